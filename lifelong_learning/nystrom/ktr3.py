"""Kernel truncated randomized ridge regression (KTR³; Jun, Cutkosky, Orabona, poster
``../shared/seeds/003_…``, Algorithm 1), with the exact kernel or on any feature map.

The rows are permuted at random; the prefix estimators are

    f_t = argmin_f λ‖f‖² + (1/n) Σ_{i≤t} (f(x_i) − y_i)²,    t = 0, 1, …, n − 1,

i.e. ridge regression on the first ``t`` rows with ``nλ`` in the unnormalized form (the minimum-norm
least-squares fit at ``λ = 0``, the poster's tie-break); the output is ``T ∘ f_k`` with ``k``
uniform in ``{0, …, n − 1}`` and ``T`` the truncation to the training targets' range, per output
(the poster's ``T^Y`` clips to ``[−Y, Y]``, ``|y| ≤ Y``; the targets' own range ``[min y, max y]``
is the tightest interval the data says holds them). Theorem 1: the excess risk of the output is
``O(n^(−2β/(2β+b)))`` for a regression function of source condition ``β`` and eigenvalues with
``Tr L_K^b < ∞``, also in the hard regime ``2β + b < 1``, and faster when the Bayes risk is 0.

Every prefix costs one pass:

- exact kernel (``feature_map=None``, ``n`` up to a few thousand): one Cholesky factor ``L`` of
  ``K + nλI`` over the permuted rows; the leading ``t × t`` block of ``L`` is the factor of the
  leading block of ``K + nλI``, so ``α_t = L_t⁻ᵀL_t⁻¹y_t`` for any ``t`` is two triangular solves
  (:func:`kernel_ridge_prefixes`); ``f_t = Σ_{i≤t} α_i k(x_i, ·)``;
- a feature map (random features, Nyström, SLKL): the recursive engine with ``lam = nλ`` learns the
  permuted rows in order and its weights after ``t`` rows are ``W_t``
  (:func:`~lifelong_learning.learners.prequential_identity.ridge_prefixes`).

The same pass is the one in which the Zhdanov–Kalnishkan identity holds
(:func:`~lifelong_learning.learners.prequential_identity.prequential_identity`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from lifelong_learning.core.checks import as_rows
from lifelong_learning.learners.feature_map import FeatureMap, restore_feature_map, store_feature_map
from lifelong_learning.learners.nystrom_features import NystromFeatureMap
from lifelong_learning.learners.prequential_identity import ridge_prefixes
from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.nystrom.estimator import OfflineMethod, Progress, training_rows
from lifelong_learning.nystrom.kernels import (
    VANISHING_KERNEL,
    gaussian_kernel,
    knm_matmul,
    reaches_other_rows,
    resolve_device,
)

_F64 = torch.float64


def kernel_ridge_prefixes(
    K: torch.Tensor, Y: torch.Tensor, nlam: float, prefixes: Sequence[int]
) -> dict[int, torch.Tensor]:
    """``α_t = (K_t + nλI)⁻¹y_t`` for each ``t`` in ``prefixes`` (``K_t``: the leading ``t × t`` block
    of the Gram matrix ``K``, ``y_t`` the first ``t`` targets), from one Cholesky factor of
    ``K + nλI`` (module docstring); ``α_0`` is empty. At ``nλ = 0`` the minimum-norm solution
    ``K_t⁺y_t`` (a pseudo-inverse per prefix: O(t³) each)."""
    n = K.shape[0]
    wanted = sorted({int(t) for t in prefixes})
    if wanted and (wanted[0] < 0 or wanted[-1] > n):
        raise ValueError(f"prefixes must be in [0, {n}], got {list(prefixes)}")
    out: dict[int, torch.Tensor] = {}
    if nlam == 0.0:
        for t in wanted:
            out[t] = torch.linalg.pinv(K[:t, :t], hermitian=True) @ Y[:t]
        return out
    L = torch.linalg.cholesky(K + nlam * torch.eye(n, dtype=K.dtype, device=K.device))
    for t in wanted:
        out[t] = torch.cholesky_solve(Y[:t], L[:t, :t])
    return out


class KTR3(OfflineMethod):
    """Kernel truncated randomized ridge regression (module docstring), multi-output.

    Args:
        lam: ``λ ≥ 0`` of the poster's objective (the unnormalized ridge uses ``nλ``); 0: minimum norm.
        lengthscale: Gaussian length-scale of the exact kernel (unused with a ``feature_map``).
        feature_map: a feature map (:class:`~lifelong_learning.learners.feature_map.FeatureMap`) to
            run on instead of the exact kernel; None: the exact kernel.
        seed: for the permutation and ``k``.
        truncate: clip predictions to the training targets' range (Algorithm 1's ``T``).
        device: for the exact kernel: ``"auto"``, ``"cpu"`` or ``"cuda"``.

    Attributes:
        k_: the chosen prefix. permutation_: the row order. bounds_: ``(2, p)`` targets' min and max.
        centers_ / alpha_: the prefix rows and ``α_k`` (exact kernel). coef_: ``W_k`` (feature map).

    Example:
        >>> X = np.random.default_rng(0).uniform(0, 1, (300, 1)); Y = np.sin(6 * X)
        >>> model = KTR3(lam=1e-4, lengthscale=0.2, device="cpu").fit(X, Y)
        >>> model.predict(X).shape, 0 <= model.k_ < 300
        ((300, 1), True)
    """

    name = "ktr3"
    engine_reproduces = False  # T ∘ f_k: the engine continues from f_k, untruncated, on its k rows

    def __init__(
        self,
        lam: float = 1e-3,
        lengthscale: float | Any = 1.0,
        feature_map: FeatureMap | None = None,
        seed: int = 0,
        truncate: bool = True,
        device: str = "auto",
    ):
        if not (math.isfinite(lam) and lam >= 0):
            raise ValueError(f"lam must be a number >= 0, got {lam!r}")
        ls = np.asarray(lengthscale, dtype=np.float64)
        if ls.ndim > 1 or not np.all(np.isfinite(ls)) or np.any(ls <= 0):
            raise ValueError(f"lengthscale must be positive (scalar or vector), got {lengthscale!r}")
        self.lam, self.lengthscale, self.map, self.seed = float(lam), lengthscale, feature_map, int(seed)
        self.truncate, self.device = bool(truncate), resolve_device(device)
        self.k_: int | None = None
        self.n_samples = 0

    @property
    def is_fitted(self) -> bool:
        return self.k_ is not None

    def fit(
        self, X: Any, Y: Any, groups: Sequence[int] | None = None, progress: Progress | None = None
    ) -> KTR3:
        """Permute, pick ``k``, fit ``f_k`` (``groups`` unused); ``progress(1, {"k", "n"})`` once done.

        Raises:
            ValueError: bad rows (fewer than 2, NaN/Inf, shapes), a feature map of another input
                width, or an exact kernel that vanishes between distinct rows; the model is then unchanged.
        """
        X2, Y2 = training_rows(X, Y)
        n = X2.shape[0]
        rng = np.random.default_rng(self.seed)
        perm = rng.permutation(n)
        k = int(rng.integers(0, n))
        Xp, Yp = X2[perm], Y2[perm]
        if self.map is None:
            fitted = self._fit_exact(Xp, Yp, k)
        else:
            fitted = self._fit_features(Xp, Yp, k)
        if progress is not None:
            progress(1, {"k": k, "n": n})
        self.permutation_, self.bounds_ = perm, np.stack([Y2.min(0), Y2.max(0)])
        self.prefix_rows_, self.prefix_targets_ = Xp[:k].copy(), Yp[:k].copy()
        self.coef_, self.n_samples, self.k_ = fitted, n, k
        return self

    def _fit_exact(self, Xp: np.ndarray, Yp: np.ndarray, k: int) -> np.ndarray:
        """``α_k`` (``(k, p)``) of the exact kernel; checks the kernel reaches other rows."""
        n, d = Xp.shape
        ls = np.broadcast_to(np.asarray(self.lengthscale, dtype=np.float64), (d,)).copy()
        t = {"dtype": _F64, "device": self.device}
        Xt, lst = torch.as_tensor(Xp, **t), torch.as_tensor(ls, **t)
        with torch.no_grad():
            K = gaussian_kernel(Xt, Xt[: max(k, 1)], lst)  # rows × the prefix (one row at k = 0)
            if not reaches_other_rows(K, torch.arange(K.shape[1], device=K.device)):
                raise ValueError(VANISHING_KERNEL)
            alpha = kernel_ridge_prefixes(K[:k, :k], torch.as_tensor(Yp[:k], **t), n * self.lam, [k])[k]
        self.lengthscale_ = ls
        return alpha.cpu().numpy()

    def _fit_features(self, Xp: np.ndarray, Yp: np.ndarray, k: int) -> np.ndarray:
        """``W_k`` (``(D, p)``) of the ridge on the map's features (minimum norm at ``λ = 0``)."""
        n = Xp.shape[0]
        if Xp.shape[1] != self.map.n_inputs:
            raise ValueError(f"X has {Xp.shape[1]} columns, the feature map takes {self.map.n_inputs}")
        Phi = self.map.transform(Xp[:k]) if k else np.zeros((0, self.map.n_features))
        if self.lam == 0.0:
            return np.linalg.lstsq(Phi, Yp[:k], rcond=None)[0] if k else np.zeros((Phi.shape[1], Yp.shape[1]))
        engine = RecursiveRLS(self.map.n_features, Yp.shape[1], lam=n * self.lam)
        return ridge_prefixes(engine, Phi, Yp[:k], [k])[k]

    def predict_untruncated(self, X: Any) -> np.ndarray:
        """``f_k(x)``, ``(n, p)``, before the truncation."""
        self._check_fitted()
        if self.map is not None:
            return self.map.transform(as_rows(X, self.map.n_inputs, "X")) @ self.coef_
        X2 = as_rows(X, self.lengthscale_.shape[0], "X")
        if self.k_ == 0:
            return np.zeros((X2.shape[0], self.coef_.shape[1]))
        t = {"dtype": _F64, "device": self.device}
        Z, ls = torch.as_tensor(self.prefix_rows_, **t), torch.as_tensor(self.lengthscale_, **t)
        return knm_matmul(torch.as_tensor(X2, **t), Z, ls, torch.as_tensor(self.coef_, **t)).cpu().numpy()

    def predict(self, X: Any) -> np.ndarray:
        """``T ∘ f_k``: :meth:`predict_untruncated` clipped to :attr:`bounds_` per output (unless
        ``truncate`` is off)."""
        out = self.predict_untruncated(X)
        return np.clip(out, self.bounds_[0], self.bounds_[1]) if self.truncate else out

    def feature_map(self) -> FeatureMap:
        """The given map; for the exact kernel the Nyström map of the ``k`` prefix rows (ridge on it
        with ``nλ`` is the exact kernel ridge on those rows, to the jitter of its factor).
        ValueError for ``k = 0`` (the model is the constant 0) with the exact kernel."""
        self._check_fitted()
        if self.map is not None:
            return self.map
        if self.k_ == 0:
            raise ValueError("the chosen prefix is empty (k = 0): the model is 0 and has no feature map")
        return NystromFeatureMap(self.prefix_rows_, self.lengthscale_)

    def engine_lam(self, n_samples: int | None = None) -> float:
        """``nλ`` (``n`` the fitted rows), or ``λ·n_samples``; ValueError at ``λ = 0``."""
        self._check_fitted()
        if self.lam == 0.0:
            raise ValueError("λ = 0 (the minimum-norm fit) has no recursive engine: RecursiveRLS needs λ > 0")
        return self.lam * (self.n_samples if n_samples is None else int(n_samples))

    def engine(self, X: Any = None, Y: Any = None) -> RecursiveRLS:
        """The engine that learned the ``k`` prefix rows with :meth:`engine_lam` (the rows given are
        not used: ``f_k`` is the ridge of its prefix)."""
        self._check_fitted()
        fmap = self.feature_map()
        rls = RecursiveRLS(fmap.n_features, self.prefix_targets_.shape[1], lam=self.engine_lam())
        if self.k_:
            rls.update(fmap.transform(self.prefix_rows_), self.prefix_targets_)
        return rls

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Settings, ``k``, the permutation, the bounds, the prefix rows and targets, the coefficients,
        and the feature map (its own state, nested) when one is used."""
        self._check_fitted()
        meta: dict[str, Any] = {
            "lam": self.lam,
            "seed": self.seed,
            "truncate": self.truncate,
            "k": self.k_,
            "n_samples": self.n_samples,
        }
        arrays = {
            "permutation": self.permutation_.copy(),
            "bounds": self.bounds_.copy(),
            "prefix_rows": self.prefix_rows_.copy(),
            "prefix_targets": self.prefix_targets_.copy(),
            "coef": self.coef_.copy(),
        }
        if self.map is None:
            arrays["lengthscale"] = self.lengthscale_.copy()
        else:
            store_feature_map(self.map, meta, arrays)
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> KTR3:
        """Rebuild from :meth:`to_state` (on the CPU); ValueError on inconsistent content."""
        fmap = restore_feature_map(meta, arrays)
        ls = np.asarray(arrays.get("lengthscale", 1.0), dtype=np.float64)
        est = cls(
            lam=float(meta["lam"]), lengthscale=ls, feature_map=fmap, seed=int(meta["seed"]), device="cpu"
        )
        est.truncate = bool(meta["truncate"])
        k, n = int(meta["k"]), int(meta["n_samples"])
        rows, targets = np.asarray(arrays["prefix_rows"]), np.asarray(arrays["prefix_targets"])
        coef, bounds = np.asarray(arrays["coef"], dtype=np.float64), np.asarray(arrays["bounds"])
        width = ls.size if fmap is None else fmap.n_features
        if (
            not (0 <= k < n)
            or rows.shape[0] != k
            or targets.shape[0] != k
            or bounds.shape != (2, coef.shape[1])
        ):
            raise ValueError(
                f"KTR3 state: k = {k} of {n} rows, {rows.shape[0]} prefix rows, bounds {bounds.shape}"
            )
        if coef.shape[0] != (k if fmap is None else width) or not np.all(np.isfinite(coef)):
            raise ValueError(f"KTR3 state: coefficients {coef.shape}")
        if fmap is None:
            est.lengthscale_ = ls
        est.permutation_, est.bounds_, est.prefix_rows_, est.prefix_targets_ = (
            np.asarray(arrays["permutation"], dtype=np.int64),
            bounds.astype(np.float64),
            rows.astype(np.float64),
            targets.astype(np.float64),
        )
        est.coef_, est.n_samples, est.k_ = coef, n, k
        return est

    def __repr__(self) -> str:
        kernel = "exact kernel" if self.map is None else repr(self.map)
        return f"KTR3(lam={self.lam:g}, {kernel}, k={self.k_})"


__all__ = ["KTR3", "kernel_ridge_prefixes"]
