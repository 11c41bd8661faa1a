"""Stochastic low-rank kernel learning for regression (SLKL; Machart, Peel, Anthoine, Ralaivola,
Glotin, ``../shared/seeds/002_…``), in torch (CPU or CUDA).

The kernel is a conical combination of rank-1 Nyström kernels of ``M`` candidate rows
(eqs. 1–3): with ``c_m = K[:, m]/√k(x_m, x_m)`` (a Gaussian kernel: ``k(x, x) = 1``),
``K̃(μ) = Σ_m μ_m c_m c_mᵀ``, ``μ ≥ 0``, and ``μ`` minimises the convex (eq. 14)

    F(μ) = tr(Yᵀ(I + K̃(μ)/λ)⁻¹Y) + ν Σ_m μ_m.

With ``p`` outputs (the columns of ``Y``: an arm's torques, one-hot classes) one ``μ`` is shared:
the data term is the sum of the paper's single-output term over the outputs, so its derivatives
(eq. 20) become ``∂F/∂μ_m = ν − λ‖YᵀQc_m‖²`` with ``Q = (λI + K̃(μ))⁻¹``, and ``ν`` weighs the
kernel's size against the fit of all the outputs together (with ``p`` similar outputs, a ``ν``
about ``p`` times the single-output one gives a similar ``μ``). The predictor (eqs. 15–17) is
kernel ridge regression with ``λ`` on ``k̃_μ``, i.e. ridge regression on the feature map
``φ_m(x) = √μ_m k(x, x_m)/√k(x_m, x_m)`` of the active centres (``μ_m > 0``):
``f(x) = φ(x)ᵀW``, ``W = ΦᵀQY`` (:class:`~lifelong_learning.learners.slkl_features.SLKLFeatureMap`).
Only ``λν`` matters (Proposition 3): ``(λ, ν)`` and ``(cλ, ν/c)`` give ``μ' = cμ`` and the same
predictor.

The optimiser is the randomised coordinate descent of Algorithms 1–2: a coordinate ``m`` drawn
uniformly among the candidates, ``μ_m`` moved to the exact minimiser of ``F`` along it, found by
Sherman–Morrison (``../shared/notes/algorithms.md`` §5): with ``a = YᵀQc_m`` and ``b = c_mᵀQc_m``,

    F(μ + δe_m) − F(μ) = −λδ‖a‖²/(1 + δb) + νδ,   minimised at  δ* = (√(λ‖a‖²/ν) − 1)/b,

then ``μ_m ← max(0, μ_m + δ*)`` (convex in ``δ``: the clipped step is the constrained minimiser),
which lowers ``F`` by ``ν(t − 1)²/b`` (``t = √(λ‖a‖²/ν)``) when unclipped and never raises it.
``Q`` is held, as in §3.2, by ``G = (D⁻¹ + CᵀC/λ)⁻¹`` over the ``m₀`` active columns ``C`` (eqs.
22–23: ``Q = I/λ − CGCᵀ/λ²``), updated by rank-1 formulas in the four cases of eqs. 24–27
(:func:`_reweight`, :func:`_drop`, :func:`_add`): a step costs O(n·m₀) (``Cᵀc_m``, ``Qc_m``) plus
O(m₀²). ``G`` is refactored from ``C`` and ``μ`` (and ``F`` recomputed) at the end of every epoch of
``M`` steps (of every ``⌈256/M⌉`` epochs for small ``M``): O(n·m₀² + m₀³), at most the cost of the
steps since the last time, so rounding does not accumulate.

**Printing errors of Algorithm 2, corrected here.** (1) Its second derivative
``h = λ(yᵀQc)²(cᵀQc)`` omits the factor ``p! = 2`` of eq. 21, so its step ``(λ(yᵀQc)² − ν)/h``
is twice the Newton step of eq. 19 (Proposition 1); the exact minimiser above replaces both.
(2) Its stopping test ``F(μᵏ) − F(μᵏ⁻ᴹ) < εF(μᵏ⁻ᴹ)`` is always true, ``F`` never rising (its left
side is ≤ 0); the test used is ``F(μᵏ⁻ᴹ) − F(μᵏ) < εF(μᵏ⁻ᴹ)`` (the relative decrease over the last
``M`` steps, checked at every step ``k ≥ M``).

Kernel columns are computed once and kept (``n × M``) when they fit ``memory_budget``, otherwise
on the fly (only the ``m₀`` active ones kept, §4.2). Targets are not centred (as in the paper).

**Choosing ν.** The paper fixes ``ν``. With several values (``nu=[…]``) one is chosen on held-out
rows (:func:`~lifelong_learning.nystrom.estimator.holdout_split`: the most recent recordings, or
random rows) by the validation mean squared error, and the model refitted with it on every row.
``relative_nu=True`` gives ``ν`` as fractions of ``ν_max = max_m ‖Yᵀc_m‖²/λ``,
the smallest ``ν`` at which ``μ = 0`` meets the first-order conditions (at ``μ = 0``, ``Q = I/λ``
and ``∂F/∂μ_m = ν − ‖Yᵀc_m‖²/λ``): a grid that does not depend on the targets' scale or ``n``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from lifelong_learning.core.checks import as_rows
from lifelong_learning.learners.slkl_features import SLKLFeatureMap
from lifelong_learning.nystrom.estimator import OfflineMethod, Progress, holdout_split, training_rows
from lifelong_learning.nystrom.kernels import (
    DEFAULT_MEMORY_BUDGET,
    VANISHING_KERNEL,
    gaussian_kernel,
    knm_matmul,
    knm_t_matmul,
    reaches_other_rows,
    resolve_device,
)

_F64 = torch.float64
#: ``G`` and ``F`` are recomputed from ``C`` and ``μ`` after the first epoch that ends at least
#: this many steps after the last recomputation (every epoch when ``M`` is at least this)
_REFRESH_STEPS = 256


class _Columns:
    """The candidates' kernel columns ``c_m`` (``k(x_m, x_m) = 1``): all kept, or computed when asked.

    :attr:`informative`: some column is non-zero off its own row (known at once when the columns
    are kept; otherwise :meth:`note` finds it among the columns drawn). A length-scale far below
    the rows' spacing has none: every column is zero but on its own row (or, rounded, there too).
    """

    def __init__(self, X: torch.Tensor, picked: np.ndarray, ls: torch.Tensor, memory_budget: int) -> None:
        self.X, self.Xc, self.ls, self.picked = X, X[picked], ls, picked
        stored = X.shape[0] * picked.size * 8 <= memory_budget
        self.all = gaussian_kernel(X, self.Xc, ls) if stored else None
        self.informative = False
        if self.all is not None:
            self.informative = reaches_other_rows(self.all, torch.as_tensor(picked, device=X.device))

    def note(self, m: int, c: torch.Tensor) -> None:
        """Record whether the drawn column ``c_m`` is non-zero off its own row."""
        if not self.informative:
            self.informative = int((c != 0).sum()) > int(c[int(self.picked[m])] != 0)

    def __getitem__(self, m: int) -> torch.Tensor:
        if self.all is not None:
            return self.all[:, m]
        return gaussian_kernel(self.X, self.Xc[m : m + 1], self.ls)[:, 0]


class _Active:
    """The active columns ``C`` (``n × m₀``, in slots), their weights and ``G`` (eq. 23)."""

    def __init__(self, n: int, M: int, device: torch.device):
        cap = min(M, 64)
        self.C = torch.zeros(n, cap, dtype=_F64, device=device)
        self.G = torch.zeros(cap, cap, dtype=_F64, device=device)
        self.slot_of = np.full(M, -1, dtype=np.int64)
        self.members: list[int] = []

    @property
    def m0(self) -> int:
        return len(self.members)

    def q_of(self, c: torch.Tensor, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
        """``u = Cᵀc`` and ``Qc = (c − CGu/λ)/λ`` (eq. 22)."""
        k = self.m0
        C, G = self.C[:, :k], self.G[:k, :k]
        u = C.T @ c
        return u, (c - C @ (G @ u) / lam) / lam

    def _grow(self) -> None:
        cap = self.C.shape[1]
        C = torch.zeros(self.C.shape[0], 2 * cap, dtype=_F64, device=self.C.device)
        G = torch.zeros(2 * cap, 2 * cap, dtype=_F64, device=self.G.device)
        C[:, :cap], G[:cap, :cap] = self.C, self.G
        self.C, self.G = C, G


def _reweight(act: _Active, slot: int, mu_old: float, mu_new: float) -> None:
    """Eq. 25: ``μ_p`` changes between positive values; ``D⁻¹ += Δe_peₚᵀ``, ``Δ = 1/μ_new − 1/μ_old``,
    ``G ← G − Δ/(1 + Δg_pp) g_p g_pᵀ`` (written ``1/(1/Δ + g_pp)``: no overflow for tiny ``μ``)."""
    delta = 1.0 / mu_new - 1.0 / mu_old
    if delta == 0.0:  # a change of μ_p below the rounding of 1/μ_p: D⁻¹, hence G, unchanged
        return
    k = act.m0
    g = act.G[:k, slot].clone()
    act.G[:k, :k] -= torch.outer(g, g) / (1.0 / delta + float(g[slot]))


def _drop(act: _Active, slot: int, m: int) -> None:
    """Eq. 26: ``μ_p`` becomes 0; ``G ← (G − g_p g_pᵀ/g_pp)`` without row and column ``p`` (the
    last slot moves into ``p``)."""
    k = act.m0
    g = act.G[:k, slot].clone()
    act.G[:k, :k] -= torch.outer(g, g) / float(g[slot])
    last = k - 1
    if slot != last:
        act.C[:, slot] = act.C[:, last]
        act.G[slot, :k] = act.G[last, :k]
        act.G[:k, slot] = act.G[:k, last]
        act.G[slot, slot] = act.G[last, last]
        moved = act.members[last]
        act.members[slot] = moved
        act.slot_of[moved] = slot
    act.C[:, last] = 0.0
    act.G[last, :k] = 0.0
    act.G[:k, last] = 0.0
    act.members.pop()
    act.slot_of[m] = -1


def _add(act: _Active, m: int, c: torch.Tensor, u: torch.Tensor, b: float, mu_new: float, lam: float) -> None:
    """Eq. 27: ``μ_p`` becomes positive; ``C ← [C c_p]`` and, by the bordered inverse (Theorem 3),
    ``s = (1/μ_p + c_pᵀc_p/λ − c_pᵀCGCᵀc_p/λ²)⁻¹ = (1/μ_p + b)⁻¹`` (``b = c_pᵀQc_p``),
    ``v = −(s/λ)GCᵀc_p``, ``G ← [[G + vvᵀ/s, v], [vᵀ, s]]``."""
    k = act.m0
    if k == act.C.shape[1]:
        act._grow()
    s = 1.0 / (1.0 / mu_new + b)
    v = -(s / lam) * (act.G[:k, :k] @ u)
    act.G[:k, :k] += torch.outer(v, v) / s
    act.G[k, :k] = v
    act.G[:k, k] = v
    act.G[k, k] = s
    act.C[:, k] = c
    act.members.append(m)
    act.slot_of[m] = k


def _refactor(act: _Active, mu: np.ndarray, lam: float) -> None:
    """``G = (D⁻¹ + CᵀC/λ)⁻¹`` from ``C`` and ``μ`` (eq. 23), by a Cholesky factorization."""
    k = act.m0
    if k == 0:
        return
    C = act.C[:, :k]
    d_inv = torch.as_tensor(1.0 / mu[act.members], dtype=_F64, device=C.device)
    H = C.T @ C / lam + torch.diag(d_inv)
    L = torch.linalg.cholesky(0.5 * (H + H.T))
    act.G[:k, :k] = torch.cholesky_inverse(L)


def _objective(act: _Active, mu: np.ndarray, Y: torch.Tensor, yy: float, lam: float, nu: float) -> float:
    """``F(μ) = tr(YᵀY) − tr((CᵀY)ᵀG(CᵀY))/λ + νΣμ`` (``λ tr(YᵀQY)`` by eq. 22)."""
    k = act.m0
    if k == 0:
        return yy + nu * float(mu.sum())
    CtY = act.C[:, :k].T @ Y
    return yy - float((CtY * (act.G[:k, :k] @ CtY)).sum()) / lam + nu * float(mu.sum())


def _coordinate_step(mu_m: float, a2: float, b: float, lam: float, nu: float) -> float:
    """The exact minimiser of ``F`` along ``μ_m ≥ 0`` (module docstring): the new ``μ_m``. A zero
    column (``b = 0``) or no correlation with the targets (``a = 0``): ``F`` grows with ``μ_m``, so 0."""
    if b <= 0.0 or a2 <= 0.0:
        return 0.0
    t = math.sqrt(lam * a2 / nu)
    return max(0.0, mu_m + (t - 1.0) / b)


class _Descent:
    """One run of the coordinate descent (module docstring) on the columns of ``M`` candidates."""

    def __init__(self, est: SLKL, cols: _Columns, Y: torch.Tensor, rng: np.random.Generator, nu: float):
        self.lam, self.nu, self.tol, self.max_epochs = est.lam, nu, est.tol, est.max_epochs
        self.cols, self.Y, self.rng = cols, Y, rng
        self.M = cols.picked.size
        self.refresh_every = max(1, -(-_REFRESH_STEPS // self.M))
        self.mu = np.zeros(self.M)
        self.act = _Active(Y.shape[0], self.M, Y.device)
        self.yy = float((Y * Y).sum())
        self.history, self.m0_history = [self.yy], [0]
        self.converged = False

    def minimise(self, progress: Progress | None) -> None:
        """Epochs of ``M`` steps until the stopping test holds or ``max_epochs``; ``G`` and ``F``
        recomputed from ``C`` and ``μ`` every :attr:`refresh_every` epochs and at the end."""
        if self.cols.all is not None:
            self._check_informative()
        F, M, h = self.history[0], self.M, self.history
        for epoch in range(1, self.max_epochs + 1):
            for m in self.rng.integers(0, M, size=M):
                F += self._step(int(m))
                h.append(F)
                self.m0_history.append(self.act.m0)
                if len(h) > M and h[-1 - M] - F <= self.tol * h[-1 - M]:
                    self.converged = True
                    break
            if epoch % self.refresh_every == 0 or self.converged or epoch == self.max_epochs:
                _refactor(self.act, self.mu, self.lam)
                F = h[-1] = _objective(self.act, self.mu, self.Y, self.yy, self.lam, self.nu)
            if progress is not None:
                progress(epoch, {"objective": F, "n_active": self.act.m0, "steps": len(h) - 1})
            if self.converged:
                break
        self._check_informative()

    def _check_informative(self) -> None:
        if not self.cols.informative:
            raise ValueError(VANISHING_KERNEL)

    def _step(self, m: int) -> float:
        """One coordinate step on ``μ_m`` (eqs. 24-27); the change of ``F``."""
        act, lam = self.act, self.lam
        slot = int(act.slot_of[m])
        c = act.C[:, slot] if slot >= 0 else self.cols[m]
        self.cols.note(m, c)
        u, Qc = act.q_of(c, lam)
        b = float(c @ Qc)
        a = self.Y.T @ Qc
        a2 = float(a @ a)
        mu_old = float(self.mu[m])
        mu_new = _coordinate_step(mu_old, a2, b, lam, self.nu)
        delta = mu_new - mu_old
        if delta == 0.0:
            return 0.0
        if slot >= 0 and mu_new > 0.0:
            _reweight(act, slot, mu_old, mu_new)
        elif slot >= 0:
            _drop(act, slot, m)
        else:
            _add(act, m, c, u, b, mu_new, lam)
        self.mu[m] = mu_new
        return -lam * delta * a2 / (1.0 + delta * b) + self.nu * delta

    def weights(self) -> np.ndarray:
        """``W = D^½CᵀQY`` (``(m₀, p)``, the active centres in ``act.members`` order), ``QY`` by eq. 22."""
        act, k = self.act, self.act.m0
        if k == 0:
            return np.zeros((0, self.Y.shape[1]))
        C, G = act.C[:, :k], act.G[:k, :k]
        QY = (self.Y - C @ (G @ (C.T @ self.Y)) / self.lam) / self.lam
        sqrt_mu = torch.as_tensor(np.sqrt(self.mu[act.members]), dtype=_F64, device=C.device)
        return (sqrt_mu[:, None] * (C.T @ QY)).cpu().numpy()


def _nu_max(
    X: torch.Tensor, Y: torch.Tensor, picked: np.ndarray, ls: torch.Tensor, lam: float, budget: int
) -> float:
    """``ν_max = max_m ‖Yᵀc_m‖²/λ`` over the candidates (module docstring): ``K_nMᵀY`` in blocks."""
    KtY = knm_t_matmul(X, X[picked], ls, Y, budget)
    return float((KtY * KtY).sum(1).max()) / lam


class SLKL(OfflineMethod):
    """Stochastic low-rank kernel learning (module docstring), multi-output, with a Gaussian kernel.

    Args:
        n_candidates: ``M``, candidate rows drawn uniformly without replacement (every row when
            the data has fewer than ``M``: ``n_candidates_`` says how many were used).
        lengthscale: Gaussian length-scale ``ℓ`` (scalar or one per input), ``k = exp(−½‖(x−z)/ℓ‖²)``
            (the paper's ``σ``: its Table 1 gives ``σ²``).
        lam: ``λ > 0`` of eq. 6 (not multiplied by ``n``; only ``λν`` matters).
        nu: ``ν > 0``, the weight of ``Σμ``: larger, fewer active centres; or several, one chosen
            on held-out rows (module docstring).
        relative_nu: ``nu`` as fractions of ``ν_max`` in ``(0, 1)`` (module docstring).
        holdout_fraction: with several ``nu``, the share of rows held out to choose one.
        tol: ``ε`` of the stopping test (module docstring); 0: run ``max_epochs``.
        seed: for the candidates and the coordinates.
        max_epochs: at most this many epochs of ``M`` steps (``converged_`` False if reached).
        device: ``"auto"`` (CUDA if available), ``"cpu"`` or ``"cuda"``.
        memory_budget: bytes the ``n × M`` kernel columns may take to be kept (else computed when drawn).

    Attributes:
        centers_: the candidate rows ``(M, d)``. weights_: ``μ`` ``(M,)``. active_: indices of the
        candidates with ``μ_m > 0``. n_active_: ``m₀``. coef_: ``W`` ``(m₀, p)`` on the map of the
        active centres. objective_: ``F(μᵏ)`` at every step ``k = 0, 1, …`` (``F(0) = ‖Y‖²``).
        n_active_history_: ``m₀`` at every step. n_iter_: steps run. converged_: the stopping
        test was met. nu: the ``ν`` of the fitted model (absolute). validation_errors_: with
        several ``nu``, the validation mean squared error of each (None otherwise).

    Example:
        >>> X = np.random.default_rng(0).uniform(-3, 3, (200, 1)); Y = np.sin(X)
        >>> model = SLKL(n_candidates=50, lengthscale=1.0, nu=1e-3, device="cpu").fit(X, Y)
        >>> model.predict(X).shape, 0 < model.n_active_ <= 50
        ((200, 1), True)
    """

    name = "slkl"

    def __init__(
        self,
        n_candidates: int = 256,
        lengthscale: float | Any = 1.0,
        lam: float = 1.0,
        nu: float | Sequence[float] = 0.01,
        tol: float = 1e-4,
        seed: int = 0,
        max_epochs: int = 200,
        device: str = "auto",
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        relative_nu: bool = False,
        holdout_fraction: float = 0.2,
    ):
        if int(n_candidates) < 1:
            raise ValueError(f"n_candidates must be >= 1, got {n_candidates!r}")
        nus = tuple(float(v) for v in np.atleast_1d(np.asarray(nu, dtype=np.float64)))
        for label, value in (("lam", lam), *(("nu", v) for v in nus or (math.nan,))):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{label} must be a positive number, got {value!r}")
        if relative_nu and max(nus) >= 1.0:
            raise ValueError(f"relative nu must be fractions of nu_max in (0, 1), got {nu!r}")
        if not 0.0 < float(holdout_fraction) < 1.0:
            raise ValueError(f"holdout_fraction must be in (0, 1), got {holdout_fraction!r}")
        if not (math.isfinite(tol) and tol >= 0) or int(max_epochs) < 1:
            raise ValueError(f"tol must be >= 0 and max_epochs >= 1, got {tol!r}, {max_epochs!r}")
        ls = np.asarray(lengthscale, dtype=np.float64)
        if ls.ndim > 1 or not np.all(np.isfinite(ls)) or np.any(ls <= 0):
            raise ValueError(f"lengthscale must be positive (scalar or vector), got {lengthscale!r}")
        self.n_candidates, self.lengthscale = int(n_candidates), lengthscale
        self.lam, self.nus, self.nu, self.tol = float(lam), nus, nus[0], float(tol)
        self.relative_nu, self.holdout_fraction = bool(relative_nu), float(holdout_fraction)
        self.seed, self.max_epochs, self.memory_budget = int(seed), int(max_epochs), int(memory_budget)
        self.device = resolve_device(device)
        self.centers_: np.ndarray | None = None
        self.validation_errors_: np.ndarray | None = None
        self.n_samples = 0

    @property
    def is_fitted(self) -> bool:
        return self.centers_ is not None

    @property
    def n_candidates_(self) -> int:
        """``M`` used: ``min(n_candidates, n)``."""
        self._check_fitted()
        return self.centers_.shape[0]

    def fit(
        self, X: Any, Y: Any, groups: Sequence[int] | None = None, progress: Progress | None = None
    ) -> SLKL:
        """Minimise ``F`` on rows ``X``, targets ``Y``; with several ``nu``, each on the training part
        of a hold-out split (``groups``: the first row of each recording, the most recent held out),
        the one of least validation error then on every row. ``progress(epoch, {"objective",
        "n_active", "steps", "nu"})`` after every epoch of ``M`` steps.

        Raises:
            ValueError: bad rows (fewer than 2, NaN/Inf, shapes) or a length-scale so small that every
                candidate's kernel column is zero off its own row; the model is then unchanged.
        """
        X2, Y2 = training_rows(X, Y)
        ls = np.broadcast_to(np.asarray(self.lengthscale, dtype=np.float64), (X2.shape[1],)).copy()
        errors = None
        nu = self.nus[0]
        if len(self.nus) > 1:
            train, val = holdout_split(
                X2.shape[0], self.holdout_fraction, groups, np.random.default_rng(self.seed)
            )
            errors = np.full(len(self.nus), np.inf)
            for i, value in enumerate(self.nus):
                trial = self._clone(value)._fit_rows(X2[train], Y2[train], ls, value, progress)
                if trial.n_active_:
                    errors[i] = float(np.mean((trial.predict(X2[val]) - Y2[val]) ** 2))
            nu = self.nus[int(np.argmin(errors))]  # the first of equal errors: the larger ν if sorted so
        self._fit_rows(X2, Y2, ls, nu, progress)
        self.validation_errors_ = errors
        return self

    def _clone(self, nu: float) -> SLKL:
        """An unfitted SLKL of these settings with the one ``nu``."""
        return SLKL(
            n_candidates=self.n_candidates,
            lengthscale=self.lengthscale,
            lam=self.lam,
            nu=nu,
            tol=self.tol,
            seed=self.seed,
            max_epochs=self.max_epochs,
            device=str(self.device),
            memory_budget=self.memory_budget,
            relative_nu=self.relative_nu,
            holdout_fraction=self.holdout_fraction,
        )

    def _fit_rows(
        self, X2: np.ndarray, Y2: np.ndarray, ls: np.ndarray, nu: float, progress: Progress | None
    ) -> SLKL:
        """One descent with ``nu`` (a fraction of ``ν_max`` if :attr:`relative_nu`) on checked rows."""
        n = X2.shape[0]
        rng = np.random.default_rng(self.seed)
        picked = np.sort(rng.choice(n, size=min(self.n_candidates, n), replace=False))
        Xt = torch.as_tensor(X2, dtype=_F64, device=self.device)
        Yt = torch.as_tensor(Y2, dtype=_F64, device=self.device)
        lst = torch.as_tensor(ls, device=self.device)

        def report(epoch: int, info: dict[str, Any]) -> None:
            if progress is not None:
                progress(epoch, {**info, "nu": absolute})

        with torch.no_grad():
            absolute = (
                nu * _nu_max(Xt, Yt, picked, lst, self.lam, self.memory_budget) if self.relative_nu else nu
            )
            if not absolute > 0:  # ν_max = 0: targets orthogonal to every column (all zero, say)
                absolute = nu
            run = _Descent(self, _Columns(Xt, picked, lst, self.memory_budget), Yt, rng, absolute)
            run.minimise(report)
            W = run.weights()
        order = np.argsort(run.act.members)
        self.lengthscale_, self.centers_, self.nu = ls, X2[picked].copy(), float(absolute)
        self.weights_, self.coef_ = run.mu.copy(), W[order]
        self.active_ = np.asarray(run.act.members, dtype=np.int64)[order]
        self.objective_ = np.asarray(run.history)
        self.n_active_history_ = np.asarray(run.m0_history, dtype=np.int64)
        self.n_iter_, self.converged_, self.n_samples = len(run.history) - 1, run.converged, n
        if not self.converged_:
            warnings.warn(
                f"SLKL stopped after max_epochs={self.max_epochs} epochs without meeting tol", stacklevel=3
            )
        return self

    @property
    def n_active_(self) -> int:
        """``m₀ = ‖μ‖₀``."""
        self._check_fitted()
        return int(self.active_.size)

    def predict(self, X: Any) -> np.ndarray:
        """``f(x) = φ(x)ᵀW`` (eqs. 16–17), ``(n, p)``; 0 where no centre is active."""
        self._check_fitted()
        X2 = as_rows(X, self.centers_.shape[1], "X")
        if self.n_active_ == 0:
            return np.zeros((X2.shape[0], self.coef_.shape[1]))
        t = {"dtype": _F64, "device": self.device}
        Z = torch.as_tensor(self.centers_[self.active_], **t)
        scaled = torch.as_tensor(np.sqrt(self.weights_[self.active_])[:, None] * self.coef_, **t)
        out = knm_matmul(torch.as_tensor(X2, **t), Z, torch.as_tensor(self.lengthscale_, **t), scaled)
        return out.cpu().numpy()

    def feature_map(self) -> SLKLFeatureMap:
        """``φ_m(x) = √μ_m k(x, x_m)`` over the active centres (ValueError when none is active:
        ``ν`` so large that ``μ = 0`` is optimal, and the model predicts 0)."""
        self._check_fitted()
        if self.n_active_ == 0:
            raise ValueError(
                "no active centre (every μ_m = 0: ν too large for these targets); no feature map"
            )
        return SLKLFeatureMap(self.centers_[self.active_], self.lengthscale_, self.weights_[self.active_])

    def engine_lam(self, n_samples: int | None = None) -> float:
        """``λ`` on the fitted rows; ``λ·n_samples/n`` on ``n_samples`` rows (the same per sample)."""
        self._check_fitted()
        return self.lam * (1.0 if n_samples is None else int(n_samples) / self.n_samples)

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The settings (``nu``: the fitted model's, absolute; ``nus``: as given), the candidates,
        ``μ``, the active set, ``W``, the histories and the validation errors (numbers only)."""
        self._check_fitted()
        meta = {
            "n_candidates": self.n_candidates,
            "lam": self.lam,
            "nu": self.nu,
            "tol": self.tol,
            "seed": self.seed,
            "max_epochs": self.max_epochs,
            "memory_budget": self.memory_budget,
            "n_samples": self.n_samples,
            "converged": bool(self.converged_),
            "nus": list(self.nus),
            "relative_nu": self.relative_nu,
            "holdout_fraction": self.holdout_fraction,
        }
        arrays = {
            "lengthscale": self.lengthscale_.copy(),
            "centers": self.centers_.copy(),
            "weights": self.weights_.copy(),
            "active": self.active_.copy(),
            "coef": self.coef_.copy(),
            "objective": self.objective_.copy(),
            "n_active_history": self.n_active_history_.copy(),
        }
        if self.validation_errors_ is not None:
            arrays["validation_errors"] = self.validation_errors_.copy()
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> SLKL:
        """Rebuild from :meth:`to_state` (on the CPU); ValueError on inconsistent content."""
        ls = np.asarray(arrays["lengthscale"], dtype=np.float64)
        est = cls(
            n_candidates=int(meta["n_candidates"]),
            lengthscale=ls,
            lam=float(meta["lam"]),
            nu=[float(v) for v in meta.get("nus", [meta["nu"]])],
            tol=float(meta["tol"]),
            seed=int(meta["seed"]),
            max_epochs=int(meta["max_epochs"]),
            device="cpu",
            memory_budget=int(meta["memory_budget"]),
            relative_nu=bool(meta.get("relative_nu", False)),
            holdout_fraction=float(meta.get("holdout_fraction", 0.2)),
        )
        est.nu = float(meta["nu"])
        if "validation_errors" in arrays:
            est.validation_errors_ = np.asarray(arrays["validation_errors"], dtype=np.float64)
        centers = as_rows(arrays["centers"], ls.shape[0], "centers")
        mu = np.asarray(arrays["weights"], dtype=np.float64)
        active = np.asarray(arrays["active"], dtype=np.int64)
        coef = np.asarray(arrays["coef"], dtype=np.float64)
        M = centers.shape[0]
        if mu.shape != (M,) or np.any(mu < 0) or not np.all(np.isfinite(mu)):
            raise ValueError(f"SLKL state: {mu.shape} weights for {M} candidates, or negative ones")
        if (
            not np.array_equal(active, np.flatnonzero(mu > 0))
            or coef.ndim != 2
            or coef.shape[0] != active.size
        ):
            raise ValueError("SLKL state: the active set, the weights and the coefficients disagree")
        if not np.all(np.isfinite(coef)):
            raise ValueError("SLKL state holds non-finite coefficients")
        est.lengthscale_, est.centers_, est.weights_, est.active_, est.coef_ = ls, centers, mu, active, coef
        est.objective_ = np.asarray(arrays["objective"], dtype=np.float64)
        est.n_active_history_ = np.asarray(arrays["n_active_history"], dtype=np.int64)
        est.n_iter_, est.converged_ = est.objective_.size - 1, bool(meta["converged"])
        est.n_samples = int(meta["n_samples"])
        return est

    def __repr__(self) -> str:
        fitted = f", m0={self.n_active_}" if self.is_fitted else ""
        return f"SLKL(M={self.n_candidates}, lam={self.lam:g}, nu={self.nu:g}{fitted})"


__all__ = ["SLKL"]
