"""NYTRO: Nyström iterative regularization (thesis ``../shared/seeds/004_…``, §4.3; Camoriano, Angles,
Rudi, Rosasco 2016): gradient descent on the empirical risk over the span of ``m`` Nyström centres,
preconditioned by ``K_mm``, the number of iterations ``t`` as the regularizer, chosen on held-out
rows; the Nyström code's kernels, kernel products in blocks and jittered Cholesky factor.

With ``R`` such that ``RRᵀ = K_mm⁺`` (here ``R = L⁻ᵀ``, ``LLᵀ = K_mm + εI``, as
:class:`~lifelong_learning.nystrom.krr.NystromKRR` factors it) and step ``γ = 1/sup_x k(x, x)``
(= 1 for the Gaussian kernel), eqs. 4.28-4.30 corrected:

    β_t = β_{t−1} − (γ/n) Rᵀ K_nmᵀ (K_nm R β_{t−1} − Y),   β_0 = 0,     α_t = R β_t,
    f_t(x) = Σ_j (α_t)_j k(z_j, x).

**Printing error of eq. 4.29, corrected here.** It prints ``K_nm β_{t−1}`` inside the parenthesis:
the factor ``R`` is missing (``β`` lives in the whitened coordinates, ``K_nm`` acts on ``α = Rβ``);
with it the iteration is gradient descent (Landweber) on ``(1/2n)‖K_nm R β − Y‖²``. In ``α``:
``α_t = α_{t−1} − (γ/n)(K_mm + εI)⁻¹K_nmᵀ(K_nm α_{t−1} − Y)``, which is what is computed: one
product with ``K_nm`` and one with ``K_nmᵀ`` (O(nm), ``K_nm`` kept when it fits the memory budget,
else recomputed in blocks) and one Cholesky solve (O(m²)) per iteration. Since
``‖K_nm R‖² = ‖K_nm K_mm⁻¹K_mn‖ ≤ ‖K_nn‖ ≤ n sup k``, the step ``γ/n`` never diverges.

The closed form of the iterate (Landweber): with ``A = K_nm R``,
``β_t = Σ_{j<t} (I − (γ/n)AᵀA)^j (γ/n)AᵀY``, i.e. the spectral filter ``(1 − (1 − γσ/n)^t)/σ`` on
each eigenvalue ``σ`` of ``AᵀA``: ``t`` iterations act as ridge with ``λ ≈ 1/(γt)`` per sample
(Theorem 6), which is the ``λ`` an online engine continues with (:meth:`NYTRO.engine_lam`).

Stopping on the hold-out (§4.3.4): the validation RMSE is tracked at every iteration, the run
stops once it exceeds its best so far by ``threshold`` (5 %: "the validation error ceases to be
decreasing up to a threshold of 5 % of the relative RMSE") or after ``max_iter`` (the thesis caps
its runs at 500), and ``t*`` is the iteration of the best; the model is then ``t*`` iterations on
every row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from lifelong_learning.core.checks import as_rows
from lifelong_learning.core.linalg import jittered_cholesky
from lifelong_learning.learners.nystrom_features import NystromFeatureMap
from lifelong_learning.nystrom.estimator import OfflineMethod, Progress, holdout_split, training_rows
from lifelong_learning.nystrom.kernels import (
    DEFAULT_MEMORY_BUDGET,
    gaussian_kernel,
    knm_matmul,
    knm_t_matmul,
    resolve_device,
)

_F64 = torch.float64


class _Products:
    """``K_nm U`` and ``K_nmᵀ V`` for rows ``X`` and centres ``Z``: from ``K_nm`` kept in memory
    when it fits ``memory_budget``, else in kernel blocks (recomputed each time)."""

    def __init__(self, X: torch.Tensor, Z: torch.Tensor, ls: torch.Tensor, memory_budget: int):
        self.X, self.Z, self.ls, self.budget = X, Z, ls, memory_budget
        kept = X.shape[0] * Z.shape[0] * 8 <= memory_budget
        self.K = gaussian_kernel(X, Z, ls) if kept else None

    def times(self, U: torch.Tensor) -> torch.Tensor:
        return self.K @ U if self.K is not None else knm_matmul(self.X, self.Z, self.ls, U, self.budget)

    def t_times(self, V: torch.Tensor) -> torch.Tensor:
        return self.K.T @ V if self.K is not None else knm_t_matmul(self.X, self.Z, self.ls, V, self.budget)


def landweber_step(
    alpha: torch.Tensor, K: _Products, Y: torch.Tensor, L: torch.Tensor, gamma: float
) -> torch.Tensor:
    """One NYTRO iteration in ``α`` (module docstring): ``α − (γ/n)(LLᵀ)⁻¹K_nmᵀ(K_nm α − Y)``."""
    grad = K.t_times(K.times(alpha) - Y)
    return alpha - (gamma / Y.shape[0]) * torch.cholesky_solve(grad, L)


def nytro_iterates(
    X: Any, Y: Any, centers: Any, lengthscale: Any, iterations: Sequence[int], gamma: float = 1.0
) -> dict[int, np.ndarray]:
    """``α_t`` ``(m, p)`` for each ``t`` in ``iterations`` of NYTRO on all the rows ``X``, ``Y`` with
    the given centres (CPU, float64): the iterates the closed form describes (module docstring)."""
    X2, Y2 = training_rows(X, Y, min_rows=1)
    Z = torch.as_tensor(as_rows(centers, X2.shape[1], "centers"), dtype=_F64)
    ls = torch.as_tensor(np.broadcast_to(np.asarray(lengthscale, dtype=np.float64), (X2.shape[1],)).copy())
    Xt, Yt = torch.as_tensor(X2), torch.as_tensor(Y2)
    L, _ = jittered_cholesky(gaussian_kernel(Z, Z, ls))
    K = _Products(Xt, Z, ls, DEFAULT_MEMORY_BUDGET)
    alpha = torch.zeros(Z.shape[0], Yt.shape[1], dtype=_F64)
    out, wanted = {}, sorted({int(t) for t in iterations})
    for t in range(1, (wanted[-1] if wanted else 0) + 1):
        alpha = landweber_step(alpha, K, Yt, L, gamma)
        if t in wanted:
            out[t] = alpha.numpy().copy()
    if 0 in wanted:
        out[0] = np.zeros((Z.shape[0], Yt.shape[1]))
    return out


class NYTRO(OfflineMethod):
    """NYTRO (module docstring): Nyström centres, preconditioned gradient iterations, the iteration
    count chosen on held-out rows, then that many iterations on every row.

    Args:
        centers: ``m``, training rows drawn uniformly without replacement (at most the training part).
        lengthscale: Gaussian length-scale (scalar or one per input).
        max_iter: most iterations (the thesis: 500). threshold: the stop once the validation RMSE
            exceeds its best by this fraction (0.05).
        holdout_fraction: the held-out share (:func:`~lifelong_learning.nystrom.estimator.holdout_split`).
        step: ``γ``; None: ``1/sup k(x, x) = 1`` (Gaussian).
        seed, device, memory_budget: the split and centres; where; how much ``K_nm`` may take to be kept.

    Attributes:
        iterations_: ``t*``. validation_rmse_: the validation RMSE after each iteration run (``[0]``:
        the zero model). centers_, alpha_: the centres and ``α_{t*}`` on every row.

    Example:
        >>> X = np.random.default_rng(0).uniform(-3, 3, (300, 1)); Y = np.sin(X)
        >>> NYTRO(centers=30, lengthscale=1.0, device="cpu").fit(X, Y).predict(X).shape
        (300, 1)
    """

    name = "nytro"
    engine_reproduces = False  # t* iterations are not a ridge solution: the engine continues with λ = 1/(γt*)

    def __init__(
        self,
        centers: int = 256,
        lengthscale: float | Any = 1.0,
        max_iter: int = 500,
        threshold: float = 0.05,
        holdout_fraction: float = 0.2,
        step: float | None = None,
        seed: int = 0,
        device: str = "auto",
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ):
        if int(centers) < 1 or int(max_iter) < 1:
            raise ValueError(f"centers and max_iter must be >= 1, got {centers!r}, {max_iter!r}")
        if not (math.isfinite(threshold) and threshold >= 0):
            raise ValueError(f"threshold must be >= 0, got {threshold!r}")
        if step is not None and not (math.isfinite(step) and 0 < step <= 2.0):
            raise ValueError(f"step must be in (0, 2] (times 1/sup k), got {step!r}")
        ls = np.asarray(lengthscale, dtype=np.float64)
        if ls.ndim > 1 or not np.all(np.isfinite(ls)) or np.any(ls <= 0):
            raise ValueError(f"lengthscale must be positive (scalar or vector), got {lengthscale!r}")
        self.centers, self.lengthscale, self.max_iter = int(centers), lengthscale, int(max_iter)
        self.threshold, self.holdout_fraction, self.seed = (
            float(threshold),
            float(holdout_fraction),
            int(seed),
        )
        self.gamma = 1.0 if step is None else float(step)
        self.device, self.memory_budget = resolve_device(device), int(memory_budget)
        self.alpha_: np.ndarray | None = None
        self.n_samples = 0

    @property
    def is_fitted(self) -> bool:
        return self.alpha_ is not None

    def fit(
        self, X: Any, Y: Any, groups: Sequence[int] | None = None, progress: Progress | None = None
    ) -> NYTRO:
        """Iterate on the training part and choose ``t*`` on the held-out part, then run ``t*``
        iterations on every row; ``progress(t, {"validation_rmse"})`` after each iteration."""
        X2, Y2 = training_rows(X, Y)
        n, d = X2.shape
        rng = np.random.default_rng(self.seed)
        train, val = holdout_split(n, self.holdout_fraction, groups, rng)
        picked = np.sort(rng.choice(train, size=min(self.centers, train.size), replace=False))
        ls = np.broadcast_to(np.asarray(self.lengthscale, dtype=np.float64), (d,)).copy()
        t = {"dtype": _F64, "device": self.device}
        Z, lst = torch.as_tensor(X2[picked], **t), torch.as_tensor(ls, **t)
        with torch.no_grad():
            L, _ = jittered_cholesky(gaussian_kernel(Z, Z, lst))
            history = self._select(X2, Y2, train, val, Z, lst, L, progress)
            best = int(np.argmin(history))
            alpha = torch.zeros(Z.shape[0], Y2.shape[1], **t)
            K = _Products(torch.as_tensor(X2, **t), Z, lst, self.memory_budget)
            Yt = torch.as_tensor(Y2, **t)
            for _ in range(best):
                alpha = landweber_step(alpha, K, Yt, L, self.gamma)
        self.centers_, self.lengthscale_, self.chol_ = X2[picked].copy(), ls, L.cpu().numpy()
        self.validation_rmse_, self.iterations_, self.n_samples = np.asarray(history), best, n
        self.alpha_ = alpha.cpu().numpy()
        return self

    def _select(
        self,
        X2: np.ndarray,
        Y2: np.ndarray,
        train: np.ndarray,
        val: np.ndarray,
        Z: torch.Tensor,
        lst: torch.Tensor,
        L: torch.Tensor,
        progress: Progress | None,
    ) -> list[float]:
        """Validation RMSE after each iteration on the training rows, until the stopping rule."""
        t = {"dtype": _F64, "device": Z.device}
        K = _Products(torch.as_tensor(X2[train], **t), Z, lst, self.memory_budget)
        Kv = _Products(torch.as_tensor(X2[val], **t), Z, lst, self.memory_budget)
        Y, Yv = torch.as_tensor(Y2[train], **t), torch.as_tensor(Y2[val], **t)
        alpha = torch.zeros(Z.shape[0], Y.shape[1], **t)
        history = [float(Yv.square().mean().sqrt())]
        for it in range(1, self.max_iter + 1):
            alpha = landweber_step(alpha, K, Y, L, self.gamma)
            rmse = float((Kv.times(alpha) - Yv).square().mean().sqrt())
            history.append(rmse)
            if progress is not None:
                progress(it, {"validation_rmse": rmse})
            if not math.isfinite(rmse) or rmse > (1.0 + self.threshold) * min(history):
                break
        return history

    def predict(self, X: Any) -> np.ndarray:
        """``f_{t*}(x) = Σ_j α_j k(z_j, x)``, ``(n, p)``."""
        self._check_fitted()
        X2 = as_rows(X, self.centers_.shape[1], "X")
        t = {"dtype": _F64, "device": self.device}
        Z, ls = torch.as_tensor(self.centers_, **t), torch.as_tensor(self.lengthscale_, **t)
        return knm_matmul(torch.as_tensor(X2, **t), Z, ls, torch.as_tensor(self.alpha_, **t)).cpu().numpy()

    def feature_map(self) -> NystromFeatureMap:
        """The Nyström map of the centres (``φ(x) = L⁻¹k(Z, x)``; ``f = φᵀLᵀα``)."""
        self._check_fitted()
        return NystromFeatureMap(self.centers_, self.lengthscale_, self.chol_)

    def engine_lam(self, n_samples: int | None = None) -> float:
        """``n/(γt*)``: ridge with ``λ = 1/(γt*)`` per sample, the regularization ``t*`` iterations
        amount to (Theorem 6); ``t* = 0`` (the zero model was best) counts as one iteration."""
        self._check_fitted()
        rows = self.n_samples if n_samples is None else int(n_samples)
        return rows / (self.gamma * max(self.iterations_, 1))

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The settings, ``t*``, the centres, their factor, ``α`` and the validation history."""
        self._check_fitted()
        meta = {
            "centers": self.centers,
            "max_iter": self.max_iter,
            "threshold": self.threshold,
            "holdout_fraction": self.holdout_fraction,
            "step": self.gamma,
            "seed": self.seed,
            "memory_budget": self.memory_budget,
            "iterations": self.iterations_,
            "n_samples": self.n_samples,
        }
        arrays = {
            "lengthscale": self.lengthscale_.copy(),
            "centers": self.centers_.copy(),
            "chol": self.chol_.copy(),
            "alpha": self.alpha_.copy(),
            "validation_rmse": self.validation_rmse_.copy(),
        }
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> NYTRO:
        """Rebuild from :meth:`to_state` (on the CPU); ValueError on inconsistent content."""
        ls = np.asarray(arrays["lengthscale"], dtype=np.float64)
        est = cls(
            centers=int(meta["centers"]),
            lengthscale=ls,
            max_iter=int(meta["max_iter"]),
            threshold=float(meta["threshold"]),
            holdout_fraction=float(meta["holdout_fraction"]),
            step=float(meta["step"]),
            seed=int(meta["seed"]),
            device="cpu",
            memory_budget=int(meta["memory_budget"]),
        )
        Z = as_rows(arrays["centers"], ls.size, "centers")
        fmap = NystromFeatureMap(Z, ls, arrays["chol"])  # validates the factor
        alpha = as_rows(arrays["alpha"], None, "alpha")
        if alpha.shape[0] != Z.shape[0]:
            raise ValueError(f"NYTRO state: {alpha.shape[0]} coefficients for {Z.shape[0]} centres")
        est.centers_, est.lengthscale_, est.chol_, est.alpha_ = Z, ls, fmap.chol, alpha
        est.validation_rmse_ = np.asarray(arrays["validation_rmse"], dtype=np.float64)
        est.iterations_, est.n_samples = int(meta["iterations"]), int(meta["n_samples"])
        return est

    def __repr__(self) -> str:
        chosen = f", t={self.iterations_}" if self.is_fitted else ""
        return f"NYTRO(m={self.centers}{chosen})"


__all__ = ["NYTRO", "landweber_step", "nytro_iterates"]
