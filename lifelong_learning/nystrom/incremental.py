"""Incremental Nyström KRLS: the number of centres ``m`` as the regularizer, the whole path over ``m``
in one pass (thesis ``../shared/seeds/004_…``, §4.2.4, Algorithm 1, Rudi, Camoriano, Rosasco's
"Less is more"), with the Nyström code's kernels, sums and solver.

For centres ``z_1, …, z_M`` (rows of the training set drawn uniformly without replacement, in the
order they are added) and each ``t ≤ M``, eq. 4.6 with ``nλ``:

    α̃_t = (K_ntᵀK_nt + nλK_tt)⁺ K_ntᵀY,     f_t(x) = Σ_{j≤t} (α̃_t)_j k(z_j, x).

With ``H_t = K_ntᵀK_nt + nλK_tt = R_tᵀR_t`` (``R_t`` upper triangular), adding centre ``t`` borders
``H_{t−1}`` with ``c_t = K_n,t−1ᵀa_t + nλb_t`` and ``γ_t = a_tᵀa_t + nλk(z_t, z_t)`` (``a_t`` the new
column of ``K_nm``, ``b_t = k(z_t, z_{<t})``). Algorithm 1 writes the new factor as the bordered
``R_{t−1}`` with one Cholesky update by ``u_t = (c_t/(1 + g_t), g_t)`` and one downdate by
``v_t = (c_t/(1 + g_t), −1)``, ``g_t = √(1 + γ_t)`` (``u_tu_tᵀ − v_tv_tᵀ`` is the border
``[[0, c_t], [c_tᵀ, γ_t]]``). The same factor is computed here directly, without the downdate
(which can lose definiteness in rounding): ``r_t = R_{t−1}⁻ᵀc_t``, ``ρ_t = √(γ_t − ‖r_t‖²)``,
``R_t = [[R_{t−1}, r_t], [0, ρ_t]]``, O(t²). Then ``α̃_t = R_t⁻¹R_t⁻ᵀ(K_ntᵀY)``: two triangular
solves. Everything comes from the sums ``K_nmᵀK_nm``, ``K_nmᵀY`` (one pass over the rows, O(nM²),
memory O(M²): :class:`~lifelong_learning.nystrom.sums.KernelSums`) and ``K_mm``; the path costs
O(nM² + M³) per ``λ`` instead of O(nM²·T) for ``T`` separate fits (§4.2.4). A centre that adds no
direction (``ρ_t² ≤ 10⁻¹⁰γ_t``: it repeats earlier ones, the pseudo-inverse of eq. 4.6) is skipped.

The validation error of each ``f_t`` on held-out rows is computed from their sums too:
``‖K_vtα − Y_v‖² = αᵀ(K_vtᵀK_vt)α − 2αᵀK_vtᵀY_v + ‖Y_v‖²``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lifelong_learning.core.model_file import prefixed, unprefixed
from lifelong_learning.learners.nystrom_features import NystromFeatureMap
from lifelong_learning.nystrom.estimator import OfflineMethod, Progress, holdout_split, training_rows
from lifelong_learning.nystrom.kernels import DEFAULT_MEMORY_BUDGET, gaussian_kernel, resolve_device
from lifelong_learning.nystrom.krr import NystromKRR
from lifelong_learning.nystrom.sums import KernelSums

_F64 = torch.float64
#: a centre whose new pivot ``ρ_t²`` is below this fraction of ``γ_t`` adds no direction: skipped
SKIP_BELOW = 1e-10


@dataclass
class PathStep:
    """One step of the path: centre ``t`` (1-based), whether it was used, and the coefficients
    ``α̃`` over the centres used so far (``used``: their indices among the first ``t``)."""

    t: int
    added: bool
    used: list[int]
    alpha: torch.Tensor


def incremental_nystrom(
    sums: KernelSums, Kmm: torch.Tensor, lam: float, max_centers: int | None = None
) -> Iterator[PathStep]:
    """The path of eq. 4.6 over ``t = 1 … M`` (module docstring) for the data's ``sums`` at the
    centres and their ``K_mm``, with ``nλ`` (``n = sums.n``). ValueError unless ``lam > 0``."""
    if not lam > 0:
        raise ValueError(f"lam must be positive, got {lam!r}")
    M = Kmm.shape[0] if max_centers is None else min(int(max_centers), Kmm.shape[0])
    H = sums.gram + (sums.n * lam) * Kmm
    R = torch.zeros(M, M, dtype=H.dtype, device=H.device)
    used: list[int] = []
    alpha = sums.kty[:0]
    for t in range(M):
        k = len(used)
        c, gamma = H[used, t], float(H[t, t])
        r = torch.linalg.solve_triangular(R[:k, :k].T, c[:, None], upper=False)[:, 0] if k else c
        rho2 = gamma - float(r @ r)
        added = rho2 > SKIP_BELOW * gamma
        if added:
            R[:k, k], R[k, k] = r, rho2**0.5
            used.append(t)
            Rt = R[: k + 1, : k + 1]
            z = torch.linalg.solve_triangular(Rt.T, sums.kty[used], upper=False)
            alpha = torch.linalg.solve_triangular(Rt, z, upper=True)
        yield PathStep(t + 1, added, list(used), alpha)


def validation_error(step: PathStep, val: KernelSums) -> float:
    """Mean squared error (over rows and outputs) of the step's model on held-out rows, from their sums."""
    if not step.used:
        return float(val.yy.sum()) / (val.n * val.kty.shape[1])
    a, idx = step.alpha, step.used
    sse = (a * (val.gram[idx][:, idx] @ a)).sum() - 2.0 * (a * val.kty[idx]).sum() + val.yy.sum()
    return max(float(sse), 0.0) / (val.n * val.kty.shape[1])


class NystromPath(OfflineMethod):
    """Nyström KRLS with ``m`` (and ``λ``, from a few) chosen on held-out rows along the incremental
    path (module docstring), then refitted on every row (thesis §4.2.4: "after model selection, we
    retrain the best model on the entire training set").

    Args:
        max_centers: ``M``, the longest path (at most the training part's rows).
        lengthscale: Gaussian length-scale (scalar or one per input).
        lam: ``λ > 0`` (``nλ`` in the system), or several: one path each, sharing the sums.
        holdout_fraction: the held-out share (:func:`~lifelong_learning.nystrom.estimator.holdout_split`:
            whole recordings when ``groups`` are given, else random rows; the thesis holds out 20 %).
        seed: for the split and the centres' order. device, memory_budget: as for :class:`NystromKRR`.

    Attributes:
        errors_: ``(len(lams_), M)`` validation mean squared error of the path at each ``m``.
        lams_: the ``λ`` tried. best_lam_, best_m_: the chosen pair (``best_m_`` a position on the
        path; skipped centres are not in the model). model_: the refitted :class:`NystromKRR`.

    Example:
        >>> X = np.random.default_rng(0).uniform(-3, 3, (300, 1)); Y = np.sin(X)
        >>> NystromPath(max_centers=40, lam=[1e-6, 1e-3], device="cpu").fit(X, Y).errors_.shape
        (2, 40)
    """

    name = "path"

    def __init__(
        self,
        max_centers: int = 256,
        lengthscale: float | Any = 1.0,
        lam: float | Sequence[float] = 1e-6,
        holdout_fraction: float = 0.2,
        seed: int = 0,
        device: str = "auto",
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ):
        lams = [float(v) for v in np.atleast_1d(np.asarray(lam, dtype=np.float64))]
        if not lams or not all(np.isfinite(v) and v > 0 for v in lams):
            raise ValueError(f"lam must be one or more positive numbers, got {lam!r}")
        if int(max_centers) < 1:
            raise ValueError(f"max_centers must be >= 1, got {max_centers!r}")
        ls = np.asarray(lengthscale, dtype=np.float64)
        if ls.ndim > 1 or not np.all(np.isfinite(ls)) or np.any(ls <= 0):
            raise ValueError(f"lengthscale must be positive (scalar or vector), got {lengthscale!r}")
        self.max_centers, self.lengthscale, self.lams_ = int(max_centers), lengthscale, lams
        self.holdout_fraction, self.seed, self.memory_budget = (
            float(holdout_fraction),
            int(seed),
            int(memory_budget),
        )
        self.device = resolve_device(device)
        self.model_: NystromKRR | None = None

    @property
    def is_fitted(self) -> bool:
        return self.model_ is not None

    @property
    def n_samples(self) -> int:  # type: ignore[override]  # the refitted model's rows
        return 0 if self.model_ is None else self.model_.n_samples

    def fit(
        self, X: Any, Y: Any, groups: Sequence[int] | None = None, progress: Progress | None = None
    ) -> NystromPath:
        """The path for every ``λ`` on the training part, the best ``(λ, m)`` on the held-out part, the
        refit on every row. ``progress(i, {"lam", "best_m", "validation_error"})`` after each ``λ``."""
        X2, Y2 = training_rows(X, Y)
        n, d = X2.shape
        rng = np.random.default_rng(self.seed)
        train, val = holdout_split(n, self.holdout_fraction, groups, rng)
        order = rng.permutation(train)[: self.max_centers]
        ls = np.broadcast_to(np.asarray(self.lengthscale, dtype=np.float64), (d,)).copy()
        t = {"dtype": _F64, "device": self.device}
        Z, lst = torch.as_tensor(X2[order], **t), torch.as_tensor(ls, **t)
        with torch.no_grad():
            sums = [
                KernelSums.zeros(Z.shape[0], Y2.shape[1], _F64, self.device).add(
                    torch.as_tensor(X2[rows], **t), torch.as_tensor(Y2[rows], **t), Z, lst, self.memory_budget
                )
                for rows in (train, val)
            ]
            errors, added = self._paths(sums[0], sums[1], gaussian_kernel(Z, Z, lst), progress)
        flat = int(np.nanargmin(errors.T))  # the smallest m first among equal errors
        best_m, best = divmod(flat, len(self.lams_))
        used = np.flatnonzero(added[best][: best_m + 1])
        model = NystromKRR(
            centers=X2[order][used],
            lengthscale=ls,
            lam=self.lams_[best],
            device=str(self.device),
            memory_budget=self.memory_budget,
        )
        self.model_ = model.fit(X2, Y2)
        self.errors_, self.best_lam_, self.best_m_ = errors, self.lams_[best], best_m + 1
        return self

    def _paths(
        self, train: KernelSums, val: KernelSums, Kmm: torch.Tensor, progress: Progress | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Validation errors ``(L, M)`` of every path and which centres each added."""
        M = Kmm.shape[0]
        errors, added = np.full((len(self.lams_), M), np.nan), np.zeros((len(self.lams_), M), dtype=bool)
        for i, lam in enumerate(self.lams_):
            last = validation_error(PathStep(0, False, [], train.kty[:0]), val)
            for step in incremental_nystrom(train, Kmm, lam):
                if step.added:
                    last = validation_error(step, val)
                errors[i, step.t - 1], added[i, step.t - 1] = last, step.added
            if progress is not None:
                best = int(np.argmin(errors[i]))
                progress(i + 1, {"lam": lam, "best_m": best + 1, "validation_error": float(errors[i, best])})
        return errors, added

    def predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        return self.model_.predict(X)

    def feature_map(self) -> NystromFeatureMap:
        self._check_fitted()
        return self.model_.feature_map()

    def engine_lam(self, n_samples: int | None = None) -> float:
        self._check_fitted()
        return self.model_.engine_lam(n_samples)

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The settings, the chosen pair, the validation errors and the refitted model's state."""
        self._check_fitted()
        meta = {
            "max_centers": self.max_centers,
            "lams": self.lams_,
            "holdout_fraction": self.holdout_fraction,
            "seed": self.seed,
            "memory_budget": self.memory_budget,
            "best_lam": self.best_lam_,
            "best_m": self.best_m_,
        }
        model_meta, model_arrays = self.model_.to_state()
        return {**meta, "model": model_meta}, {
            "errors": self.errors_.copy(),
            **prefixed("model", model_arrays),
        }

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> NystromPath:
        """Rebuild from :meth:`to_state` (the model on the CPU)."""
        model = NystromKRR.from_state(meta["model"], unprefixed("model", arrays))
        est = cls(
            max_centers=int(meta["max_centers"]),
            lengthscale=model.lengthscale_.numpy(),
            lam=list(meta["lams"]),
            holdout_fraction=float(meta["holdout_fraction"]),
            seed=int(meta["seed"]),
            device="cpu",
            memory_budget=int(meta["memory_budget"]),
        )
        errors = np.asarray(arrays["errors"], dtype=np.float64)
        if errors.ndim != 2 or errors.shape[0] != len(est.lams_):
            raise ValueError(f"NystromPath state: errors of shape {errors.shape} for {len(est.lams_)} λ")
        est.model_, est.errors_ = model, errors
        est.best_lam_, est.best_m_ = float(meta["best_lam"]), int(meta["best_m"])
        return est

    def __repr__(self) -> str:
        chosen = f", m={self.best_m_}, lam={self.best_lam_:g}" if self.is_fitted else ""
        return f"NystromPath(M={self.max_centers}{chosen})"


__all__ = ["NystromPath", "PathStep", "incremental_nystrom", "validation_error"]
