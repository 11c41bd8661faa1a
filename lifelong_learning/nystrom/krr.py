"""Nyström kernel ridge regression (Meanti et al. §2; Rudi et al., Falkon) in torch.

Model ``f(x) = Σ_j β_j k(x, z_j)`` with ``m`` centres ``z_j`` and, with ``nλ`` used
consistently (the paper's formulas mix ``λ`` and ``nλ``),

    β = (K_nmᵀK_nm + nλ K_mm)⁻¹ K_nmᵀ Y.

Both solvers work in the whitened coordinates ``w = Lᵀβ`` where ``L Lᵀ = K_mm + εI``
(Cholesky with jitter retried upward), i.e. ridge regression on the features
``Φ = K_nm L⁻ᵀ``: ``(ΦᵀΦ + nλI) w = ΦᵀY``. This is also exactly what a
:class:`~lifelong_learning.learners.RecursiveRLS` with ``lam = nλ`` computes on ``Φ``,
which is how the model is exported to the online learners.

- ``solver="direct"``: accumulate ``K_nmᵀK_nm`` block by block (O(nm²)), one m×m Cholesky.
- ``solver="pcg"``: conjugate gradient on the same system with Falkon's preconditioner
  ``P = n(LᵀL/m + λI)`` (the system matrix with ``K_nmᵀK_nm`` replaced by its estimate
  from the centres, ``(n/m) K_mmᵀK_mm``); each iteration is one pass ``K_nmᵀ(K_nm v)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch

from lifelong_learning.core.linalg import jittered_cholesky
from lifelong_learning.core.persistence import Stateful
from lifelong_learning.learners.nystrom_features import NystromFeatureMap
from lifelong_learning.nystrom.distributed import ONE_PROCESS, Group
from lifelong_learning.nystrom.kernels import (
    DEFAULT_MEMORY_BUDGET,
    gaussian_kernel,
    knm_gram_matmul,
    knm_matmul,
    knm_t_matmul,
    resolve_device,
)
from lifelong_learning.nystrom.sums import KernelSums, kernel_sums

#: above this many rows ``solver="auto"`` picks PCG (direct costs O(nm²), PCG O(nm) per iteration)
AUTO_PCG_ROWS = 200_000

_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    torch.float32: torch.float32,
    torch.float64: torch.float64,
}


def as_tensor(x: Any, name: str, dtype: torch.dtype, device: torch.device, ndim: int = 2) -> torch.Tensor:
    """Finite 2-D (1-D promoted to a column) tensor, or ValueError."""
    t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    if t.ndim == 1 and ndim == 2:
        t = t[:, None]
    if t.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(t.shape)}")
    if not t.is_floating_point() and not t.dtype.is_complex:
        t = t.to(torch.float64)
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} contains NaN or Inf")
    return t.to(device=device, dtype=dtype)


def _blocks_gram_matmul(
    blocks: Iterable[tuple[torch.Tensor, torch.Tensor]],
    Z: torch.Tensor,
    ls: torch.Tensor,
    U: torch.Tensor,
    group: Group,
    memory_budget: int,
) -> torch.Tensor:
    """``K_nmᵀ K_nm U`` over this process's blocks, all-reduced over ``group``."""
    out = torch.zeros(Z.shape[0], U.shape[1], dtype=Z.dtype, device=Z.device)
    for X, _ in blocks:
        out += knm_gram_matmul(X, Z, ls, U, memory_budget)
    return group.all_reduce(out)


def conjugate_gradient(
    matvec: Callable[[torch.Tensor], torch.Tensor],
    rhs: torch.Tensor,
    precond: Callable[[torch.Tensor], torch.Tensor],
    x0: torch.Tensor | None = None,
    tol: float = 1e-7,
    max_iter: int = 100,
    agree: Callable[[bool], bool] | None = None,
) -> tuple[torch.Tensor, int]:
    """Preconditioned CG for SPD ``A x = b`` on every column of ``rhs`` at once.

    Stops when each column's residual norm is below ``tol`` times its right-hand-side norm.
    ``agree(converged)`` turns this process's stop test into the one every process of a job
    follows (e.g. the main process's), so that all make the same number of ``matvec`` calls (each
    an all-reduce) even where their floating-point results differ in the last bits.

    Returns:
        ``(x, iterations)``.
    """
    x = torch.zeros_like(rhs) if x0 is None else x0.clone()
    r = rhs - matvec(x) if x0 is not None else rhs.clone()
    bnorm = rhs.norm(dim=0).clamp_min(torch.finfo(rhs.dtype).tiny)
    z = precond(r)
    p = z.clone()
    rz = (r * z).sum(0)
    it = 0
    for it in range(1, max_iter + 1):
        converged = bool((r.norm(dim=0) <= tol * bnorm).all())
        if agree is not None:
            converged = agree(converged)
        if converged:
            return x, it - 1
        Ap = matvec(p)
        pAp = (p * Ap).sum(0)
        alpha = torch.where(pAp > 0, rz / pAp.clamp_min(torch.finfo(rhs.dtype).tiny), torch.zeros_like(rz))
        x = x + alpha * p
        r = r - alpha * Ap
        z = precond(r)
        rz_new = (r * z).sum(0)
        beta = torch.where(rz > 0, rz_new / rz.clamp_min(torch.finfo(rhs.dtype).tiny), torch.zeros_like(rz))
        p = z + beta * p
        rz = rz_new
    return x, it


class NystromKRR(Stateful):
    """Nyström kernel ridge regression with a Gaussian kernel, multi-output.

    What the online learners continue from: :meth:`feature_map` (``φ(x) = L⁻¹k(Z, x)``) and
    :meth:`engine_lam` (``nλ``); its state (:meth:`to_state`) holds numbers only.

    Args:
        centers: the number ``m`` of centres (a uniform random subset of the training rows,
            without replacement) or the centres themselves, shape ``(m, d)``.
        lengthscale: Gaussian length-scale, a scalar or one per input dimension.
        lam: regularization ``λ > 0``; the system uses ``nλ``.
        solver: ``"direct"``, ``"pcg"`` or ``"auto"`` (PCG above ``AUTO_PCG_ROWS`` rows).
        dtype: ``"float32"`` or ``"float64"`` (or the torch dtypes).
        device: ``"auto"`` (CUDA if available), ``"cpu"`` or ``"cuda"``.
        memory_budget: bytes for one block of kernel rows.
        cg_tol, cg_max_iter: PCG stopping rule (relative residual, iterations).
        seed: for the choice of centres.

    Example:
        >>> X = np.random.default_rng(0).normal(size=(200, 3)); Y = np.sin(X[:, :1])
        >>> NystromKRR(centers=50, lengthscale=1.0, lam=1e-4).fit(X, Y).predict(X).shape
        (200, 1)
    """

    def __init__(
        self,
        centers: int | Any = 100,
        lengthscale: float | Any = 1.0,
        lam: float = 1e-6,
        solver: str = "auto",
        dtype: str | torch.dtype = "float64",
        device: str = "auto",
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        cg_tol: float = 1e-7,
        cg_max_iter: int = 200,
        seed: int = 0,
    ):
        if solver not in ("auto", "direct", "pcg"):
            raise ValueError(f"solver must be 'auto', 'direct' or 'pcg', got {solver!r}")
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
        if not np.isfinite(lam) or lam <= 0:
            raise ValueError(f"lam must be positive, got {lam!r}")
        ls = np.asarray(lengthscale, dtype=np.float64)
        if ls.ndim > 1 or not np.all(np.isfinite(ls)) or np.any(ls <= 0):
            raise ValueError(f"lengthscale must be positive (scalar or vector), got {lengthscale!r}")
        self.centers = centers
        self.lengthscale = lengthscale
        self.lam = float(lam)
        self.solver = solver
        self.dtype = _DTYPES[dtype]
        self.device = resolve_device(device)
        self.memory_budget = int(memory_budget)
        self.cg_tol = float(cg_tol)
        self.cg_max_iter = int(cg_max_iter)
        self.seed = int(seed)
        self.centers_: torch.Tensor | None = None
        self.lengthscale_: torch.Tensor | None = None
        self.chol_: torch.Tensor | None = None  # L, L Lᵀ = K_mm + εI
        self.jitter_: float = 0.0
        self.beta_: torch.Tensor | None = None
        self.n_samples: int = 0  # training rows of the last fit
        self.cg_iterations_: int = 0
        self.solver_used_: str = ""

    # -- helpers ------------------------------------------------------------------------
    def _t(self, x: Any, name: str) -> torch.Tensor:
        return as_tensor(x, name, self.dtype, self.device)

    def _choose_centers(self, X: torch.Tensor) -> torch.Tensor:
        if isinstance(self.centers, (int, np.integer)):
            m = int(self.centers)
            if m < 1:
                raise ValueError("the number of centres must be ≥ 1")
            m = min(m, X.shape[0])
            idx = np.random.default_rng(self.seed).choice(X.shape[0], size=m, replace=False)
            return X[torch.as_tensor(np.sort(idx), device=X.device)].clone()
        Z = self._t(self.centers, "centers")
        if Z.shape[1] != X.shape[1]:
            raise ValueError(f"centres have {Z.shape[1]} columns, X has {X.shape[1]}")
        return Z

    def _lengthscale_tensor(self, d: int) -> torch.Tensor:
        ls = torch.as_tensor(
            np.asarray(self.lengthscale, dtype=np.float64), dtype=self.dtype, device=self.device
        )
        if ls.ndim == 1 and ls.shape[0] != d:
            raise ValueError(f"lengthscale has {ls.shape[0]} entries, X has {d} columns")
        return ls

    # -- API ----------------------------------------------------------------------------
    def fit(self, X: Any, Y: Any, beta0: torch.Tensor | None = None) -> NystromKRR:
        """Fit on rows ``X`` (``(n, d)``) and targets ``Y`` (``(n,)`` or ``(n, p)``).

        ``beta0`` warm-starts PCG. On bad input raises ValueError and leaves a fitted model as it was.
        """
        Xt, Yt = self._t(X, "X"), self._t(Y, "Y")
        if Xt.shape[0] != Yt.shape[0]:
            raise ValueError(f"X has {Xt.shape[0]} rows, Y has {Yt.shape[0]}")
        if Xt.shape[0] < 1:
            raise ValueError("no training data")
        Z = self._choose_centers(Xt)
        ls = self._lengthscale_tensor(Xt.shape[1])
        with torch.no_grad():
            L, eps, beta, iters, used = self._solve(Xt, Yt, Z, ls, beta0)
        self.centers_, self.lengthscale_, self.chol_, self.jitter_ = Z, ls, L, eps
        self.beta_, self.n_samples, self.cg_iterations_, self.solver_used_ = beta, Xt.shape[0], iters, used
        return self

    def _solve(self, X, Y, Z, ls, beta0):
        n = X.shape[0]
        L, eps = self._factor(Z, ls)
        solver = self._solver_for(n)
        if solver == "direct":  # one pass over the rows for K_nmᵀK_nm and K_nmᵀY
            sums = KernelSums.zeros(Z.shape[0], Y.shape[1], Z.dtype, Z.device).add(
                X, Y, Z, ls, self.memory_budget
            )
            return L.to(self.dtype), eps, self._direct(L, sums.gram, sums.kty, n), 0, solver
        rhs = torch.linalg.solve_triangular(
            L, knm_t_matmul(X, Z, ls, Y, self.memory_budget).to(torch.float64), upper=False
        )
        w, iters = self.pcg_whitened(X, Z, ls, L, rhs, n * self.lam, beta0)
        beta = torch.linalg.solve_triangular(L.T, w, upper=True)
        return L.to(self.dtype), eps, beta.to(self.dtype), iters, solver

    def _solver_for(self, n: int) -> str:
        if self.solver == "auto":
            return "pcg" if n > AUTO_PCG_ROWS else "direct"
        return self.solver

    def _factor(self, Z: torch.Tensor, ls: torch.Tensor) -> tuple[torch.Tensor, float]:
        """``L`` (float64), ``L Lᵀ = K_mm + εI``, and the jitter ``ε``."""
        # Kernel blocks are computed in the working dtype; the m×m algebra (Cholesky factors,
        # triangular solves, CG vectors) is done in float64, which keeps float32 runs accurate
        # when K_mm is ill-conditioned and costs O(m³), not O(nm²).
        Kmm = gaussian_kernel(Z, Z, ls).to(torch.float64)
        jitter = None if self.dtype == torch.float64 else 1e-6 * float(Kmm.diagonal().mean())
        return jittered_cholesky(Kmm, jitter=jitter)

    def _direct(self, L: torch.Tensor, G: torch.Tensor, KtY: torch.Tensor, n: int) -> torch.Tensor:
        """``β`` of ``(G + nλ L Lᵀ) β = K_nmᵀY`` with ``G = K_nmᵀK_nm`` (the direct solver)."""
        f64 = torch.float64
        nlam = n * self.lam
        G, KtY = G.to(f64), KtY.to(f64)
        if self.dtype == f64:  # whitened system: (L⁻¹GL⁻ᵀ + nλI) w = L⁻¹K_nmᵀY
            eye = torch.eye(L.shape[0], dtype=f64, device=L.device)
            G = torch.linalg.solve_triangular(L, G, upper=False)
            G = torch.linalg.solve_triangular(L, G.T, upper=False)  # L⁻¹ G L⁻ᵀ (G symmetric)
            LA, _ = jittered_cholesky(0.5 * (G + G.T) + nlam * eye, jitter=0.0)
            w = torch.cholesky_solve(torch.linalg.solve_triangular(L, KtY, upper=False), LA)
            return torch.linalg.solve_triangular(L.T, w, upper=True).to(self.dtype)
        # float32 kernels: whitening would amplify their rounding by 1/ε; solve for β
        H = G + nlam * (L @ L.T)
        LH, _ = jittered_cholesky(0.5 * (H + H.T), jitter=0.0)
        return torch.cholesky_solve(KtY, LH).to(self.dtype)

    def fit_blocks(
        self,
        blocks: Callable[[], Iterable[tuple[Any, Any]]],
        group: Group = ONE_PROCESS,
        outputs: int | None = None,
    ) -> NystromKRR:
        """Fit on rows read a block at a time, on this process and every other one of ``group``.

        ``blocks()`` yields ``(X, Y)`` blocks of this process's rows; the direct solver calls it
        once, PCG once per iteration (plus one pass for the right-hand side). Memory is bounded by
        a block and ``m``, not by the rows; the m×m and m×p sums are all-reduced, so every process
        ends with the same model. The centres must be given (``centers=`` an ``(m, d)`` array:
        e.g. tuned ones); ``outputs``: the number of targets (needed by a process with no rows).
        """
        Z, ls = self._given_centers("fit_blocks")

        def checked() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
            for X, Y in blocks():
                Xt, Yt = self._t(X, "X"), self._t(Y, "Y")
                if Xt.shape[0] != Yt.shape[0] or Xt.shape[1] != Z.shape[1]:
                    raise ValueError(
                        f"a block of {tuple(Xt.shape)} rows and {tuple(Yt.shape)} targets for "
                        f"{Z.shape[1]} input columns"
                    )
                yield Xt, Yt

        with torch.no_grad():
            sums = kernel_sums(checked(), Z, ls, outputs, group, self.memory_budget)
            if self._solver_for(sums.n) == "direct":
                return self.fit_sums(sums)
            if sums.n < 1:
                raise ValueError("no training data")
            L, eps = self._factor(Z, ls)
            rhs = torch.linalg.solve_triangular(L, sums.kty.to(torch.float64), upper=False)
            w, iters = self._pcg(
                lambda u: _blocks_gram_matmul(checked(), Z, ls, u, group, self.memory_budget),
                L,
                rhs,
                sums.n,
                None,
                agree=group.decided,
            )
            beta = torch.linalg.solve_triangular(L.T, w, upper=True).to(self.dtype)
        self.centers_, self.lengthscale_, self.chol_, self.jitter_ = Z, ls, L.to(self.dtype), eps
        self.beta_, self.n_samples, self.cg_iterations_, self.solver_used_ = beta, sums.n, iters, "pcg"
        return self

    def fit_sums(self, sums: KernelSums) -> NystromKRR:
        """Fit by the direct solver from the data's sums (:class:`~lifelong_learning.nystrom.sums.KernelSums`
        at the given centres, e.g. all-reduced over processes, or added from groups of rows).

        Raises:
            ValueError: centres not given, sums of other shapes, no rows; the model is unchanged.
        """
        Z, ls = self._given_centers("fit_sums")
        m = Z.shape[0]
        if sums.gram.shape != (m, m) or sums.kty.ndim != 2 or sums.kty.shape[0] != m:
            raise ValueError(
                f"sums of shapes {tuple(sums.gram.shape)}, {tuple(sums.kty.shape)} for {m} centres"
            )
        if sums.n < 1:
            raise ValueError("no training data")
        with torch.no_grad():
            L, eps = self._factor(Z, ls)
            beta = self._direct(L, sums.gram, sums.kty, sums.n)
        self.centers_, self.lengthscale_, self.chol_, self.jitter_ = Z, ls, L.to(self.dtype), eps
        self.beta_, self.n_samples, self.cg_iterations_, self.solver_used_ = beta, sums.n, 0, "direct"
        return self

    def _given_centers(self, what: str) -> tuple[torch.Tensor, torch.Tensor]:
        if isinstance(self.centers, (int, np.integer)):
            raise ValueError(f"{what} needs the centres (an (m, d) array), not their number")
        Z = self._t(self.centers, "centers")
        return Z, self._lengthscale_tensor(Z.shape[1])

    def pcg_whitened(self, X, Z, ls, L, rhs, nlam, beta0=None):
        """Solve ``(ΦᵀΦ + nλI) w = rhs`` by PCG, ``Φ = K_nm L⁻ᵀ``; ``beta0`` (= L⁻ᵀw₀) warm-starts.

        ``L``, ``rhs`` and the iterates are float64; kernel products use ``X``'s dtype.
        """
        n = X.shape[0]
        return self._pcg(
            lambda u: knm_gram_matmul(X, Z, ls, u, self.memory_budget), L, rhs, n, beta0, nlam=nlam
        )

    def _pcg(self, gram_matmul, L, rhs, n, beta0, nlam=None, agree=None):
        """PCG on the whitened system with Falkon's preconditioner; ``gram_matmul(u)`` is
        ``K_nmᵀK_nm u`` (over every row of the job)."""
        m = L.shape[0]
        nlam = n * self.lam if nlam is None else nlam
        L = L.to(torch.float64)
        rhs = rhs.to(torch.float64)
        eye = torch.eye(m, dtype=L.dtype, device=L.device)
        Lp, _ = jittered_cholesky(L.T @ L / m + (nlam / n) * eye)

        def matvec(v):
            u = torch.linalg.solve_triangular(L.T, v, upper=True).to(self.dtype)
            KtKu = gram_matmul(u).to(torch.float64)
            return torch.linalg.solve_triangular(L, KtKu, upper=False) + nlam * v

        def precond(r):
            return torch.cholesky_solve(r, Lp) / n

        x0 = None if beta0 is None else L.T @ beta0.to(L)
        return conjugate_gradient(
            matvec, rhs, precond, x0=x0, tol=self.cg_tol, max_iter=self.cg_max_iter, agree=agree
        )

    @property
    def is_fitted(self) -> bool:
        """Whether :meth:`fit` has run (centres, factor and weights exist)."""
        return self.beta_ is not None

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise RuntimeError("NystromKRR is not fitted; call fit first")

    def predict(self, X: Any) -> np.ndarray:
        """Predictions ``K(X, Z) β`` as a numpy array ``(n, p)``."""
        return self.predict_tensor(X).cpu().numpy()

    def predict_tensor(self, X: Any) -> torch.Tensor:
        """Like :meth:`predict`, as a tensor on the model's device."""
        self._check_fitted()
        Xt = self._t(X, "X")
        if Xt.shape[1] != self.centers_.shape[1]:
            raise ValueError(f"X has {Xt.shape[1]} columns, the model {self.centers_.shape[1]}")
        with torch.no_grad():
            return knm_matmul(Xt, self.centers_, self.lengthscale_, self.beta_, self.memory_budget)

    @property
    def whitened_weights(self) -> np.ndarray:
        """``W = Lᵀβ``: the weights of ridge regression on ``Φ = K_nm L⁻ᵀ`` (``lam = nλ``)."""
        self._check_fitted()
        return (self.chol_.T @ self.beta_).cpu().numpy().astype(np.float64)

    def feature_map(self) -> NystromFeatureMap:
        """The Nyström feature map (centres, length-scales, Cholesky factor) of the fitted model."""
        self._check_fitted()
        return NystromFeatureMap(
            self.centers_.detach().cpu().numpy().astype(np.float64),
            self.lengthscale_.detach().cpu().numpy().astype(np.float64),
            self.chol_.detach().cpu().numpy().astype(np.float64),
        )

    def engine_lam(self, n_samples: int | None = None) -> float:
        """``nλ``: the RLS ``lam`` that reproduces the model (``n`` = its training rows), or that
        applies its per-sample ``λ`` to a refit on ``n_samples`` rows."""
        self._check_fitted()
        return (self.n_samples if n_samples is None else int(n_samples)) * self.lam

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Hyperparameters, solver settings and the fitted arrays (centres, length-scales, Cholesky
        factor, coefficients), as numbers; :meth:`from_state` restores them on the CPU (or
        ``device``)."""
        self._check_fitted()
        meta = {
            "lam": self.lam,
            "solver": self.solver,
            "dtype": str(self.dtype).removeprefix("torch."),
            "memory_budget": self.memory_budget,
            "cg_tol": self.cg_tol,
            "cg_max_iter": self.cg_max_iter,
            "seed": self.seed,
            "n_samples": self.n_samples,
            "jitter": self.jitter_,
            "cg_iterations": self.cg_iterations_,
            "solver_used": self.solver_used_,
        }
        arrays = {
            name: t.detach().cpu().numpy().copy()
            for name, t in (
                ("centers", self.centers_),
                ("lengthscale", self.lengthscale_),
                ("chol", self.chol_),
                ("beta", self.beta_),
            )
        }
        return meta, arrays

    @classmethod
    def from_state(
        cls, meta: dict[str, Any], arrays: dict[str, np.ndarray], device: str = "cpu"
    ) -> NystromKRR:
        """Rebuild a fitted model from :meth:`to_state` (ValueError on missing or inconsistent content)."""
        model = cls(
            centers=np.asarray(arrays["centers"]),
            lengthscale=np.asarray(arrays["lengthscale"]),
            lam=float(meta["lam"]),
            solver=str(meta["solver"]),
            dtype=str(meta["dtype"]),
            device=device,
            memory_budget=int(meta["memory_budget"]),
            cg_tol=float(meta["cg_tol"]),
            cg_max_iter=int(meta["cg_max_iter"]),
            seed=int(meta["seed"]),
        )
        Z = model._t(arrays["centers"], "centers")
        m, d = Z.shape
        ls = model._lengthscale_tensor(d)
        L, beta = model._t(arrays["chol"], "chol"), model._t(arrays["beta"], "beta")
        if L.shape != (m, m) or beta.shape[0] != m or not bool((L.diagonal() > 0).all()):
            raise ValueError(f"NystromKRR state: factor {tuple(L.shape)}, coefficients {tuple(beta.shape)}")
        model.centers_, model.lengthscale_, model.chol_, model.beta_ = Z, ls, L, beta
        model.n_samples, model.jitter_ = int(meta["n_samples"]), float(meta["jitter"])
        model.cg_iterations_, model.solver_used_ = int(meta["cg_iterations"]), str(meta["solver_used"])
        return model

    def __repr__(self) -> str:
        m = None if self.centers_ is None else self.centers_.shape[0]
        return f"NystromKRR(m={m}, lam={self.lam:g}, solver={self.solver!r}, dtype={self.dtype})"
