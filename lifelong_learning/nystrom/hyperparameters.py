"""The trainable hyperparameters of a Nyström KRR (Meanti et al., §3-4).

Meanti et al. optimize the regularization ``λ``, the Gaussian length-scales ``ℓ`` (one per
input dimension, or one shared) and the ``m`` centre coordinates ``Z`` jointly, by gradient
descent on a hyperparameter objective. Here:

- positivity by the softplus reparametrization with a floor,
  ``λ = softplus(λ_raw) + 1e-12`` and ``ℓ = softplus(ℓ_raw) + 1e-4``, so the optimizer works
  on the unconstrained ``λ_raw``, ``ℓ_raw`` (and on ``Z`` directly);
- optionally, length-scales bounded in units of each input dimension's range ``r_d`` (max − min
  of the training rows): ``ℓ_d = r_d (a + (b − a) sigmoid(ℓ_raw,d))`` for ``lengthscale_range =
  (a, b)``. A lower bound keeps the tuner from shrinking ``ℓ`` until the kernel interpolates the
  one logged path (its objective, computed on that path, rewards it; new motion is then
  predicted by the prior alone), an upper bound from growing it until the kernel is flat (off by
  default: no benchmark here has shown it to help);
- initial values: ``λ₀ = 1/n``, ``ℓ₀`` = the median pairwise distance of the rows (the median
  heuristic, shared by all dimensions), ``Z₀`` = ``m`` distinct rows drawn uniformly at
  random (sorted indices), unless given.

:meth:`Hyperparameters.current` maps the raw tensors to ``(Z, ℓ, λ)`` (differentiable);
:meth:`Hyperparameters.parameters` lists the tensors the optimizer updates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lifelong_learning.nystrom.distributed import ShardedRows
from lifelong_learning.nystrom.krr import as_tensor

_LAM_FLOOR = 1e-12
_LS_FLOOR = 1e-4


def median_heuristic(X: torch.Tensor | ShardedRows, max_rows: int = 2000, seed: int = 0) -> float:
    """Median pairwise distance of (a subsample of) the rows of ``X`` (of every process's rows, for
    :class:`~lifelong_learning.nystrom.distributed.ShardedRows`: the same subsample of the global rows)."""
    rows = X if isinstance(X, ShardedRows) else ShardedRows(X)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randperm(rows.total, generator=gen)[:max_rows]
    sample = rows.rows(idx.numpy())
    D = torch.cdist(sample, sample)
    vals = D[torch.triu(torch.ones_like(D, dtype=torch.bool), diagonal=1)]
    med = float(vals.median()) if vals.numel() else 1.0
    return med if med > 0 and math.isfinite(med) else 1.0


def softplus_inverse(y: float) -> float:
    """x with softplus(x) = y (y > 0)."""
    return y + math.log(-math.expm1(-y)) if y < 30 else y


def initial_centers(
    X: torch.Tensor | ShardedRows, centers: int | Any, gen: np.random.Generator
) -> torch.Tensor:
    """``Z₀``: ``min(centers, n)`` distinct rows of ``X`` drawn with ``gen`` (sorted indices; of the
    global rows for :class:`~lifelong_learning.nystrom.distributed.ShardedRows`), or the given
    centres ``(m, d)``; a copy either way (never the caller's array or ``X`` itself)."""
    rows = X if isinstance(X, ShardedRows) else ShardedRows(X)
    n, d = rows.total, rows.X.shape[1]
    dtype, device = rows.X.dtype, rows.X.device
    if isinstance(centers, (int, np.integer)):
        m = min(int(centers), n)
        if m < 1:
            raise ValueError("the number of centres must be ≥ 1")
        return rows.rows(np.sort(gen.choice(n, size=m, replace=False))).clone()
    Z0 = as_tensor(centers, "centers", dtype, device)
    if Z0.shape[1] != d:
        raise ValueError(f"centres have {Z0.shape[1]} columns, X has {d}")
    return Z0.clone()


def _bounds(X: ShardedRows, lengthscale_range: tuple[float, float], per_dimension: bool) -> tuple[Any, Any]:
    """``(a r, b r)`` with ``r`` the per-column range of ``X`` (median range if not per dimension;
    a constant column counts as range 1)."""
    a, b = (float(v) for v in lengthscale_range)
    if not (0.0 < a < b and math.isfinite(b)):
        raise ValueError(f"lengthscale_range must be (a, b) with 0 < a < b, got {lengthscale_range!r}")
    low, high = X.column_ranges()
    r = (high - low).detach().cpu().numpy().astype(np.float64)
    r = np.where(r > 0, r, 1.0)
    if not per_dimension:
        r = np.full_like(r, np.median(r))
    return np.maximum(a * r, _LS_FLOOR), b * r


@dataclass
class Hyperparameters:
    """Centres ``Z`` and the raw (unconstrained) length-scales and ``λ``; see the module docstring.

    Attributes:
        centers: ``(m, d)`` centres; a leaf that requires grad when ``optimize_centers``.
        ls_raw: ``(d,)`` raw length-scales, or a 0-D tensor for one shared length-scale.
        lam_raw: 0-D raw ``λ``.
        optimize_centers: whether the centres are trained.
        ls_bounds: ``(low, high)`` length-scales ``(d,)`` (or 0-D) the sigmoid maps into, or None.
    """

    centers: torch.Tensor
    ls_raw: torch.Tensor
    lam_raw: torch.Tensor
    optimize_centers: bool = True
    ls_bounds: tuple[torch.Tensor, torch.Tensor] | None = None

    @classmethod
    def initial(
        cls,
        X: torch.Tensor | ShardedRows,
        centers: int | Any,
        gen: np.random.Generator,
        per_dimension_lengthscale: bool = True,
        optimize_centers: bool = True,
        lam_init: float | None = None,
        lengthscale_init: float | Any | None = None,
        seed: int = 0,
        lengthscale_range: tuple[float, float] | None = None,
    ) -> Hyperparameters:
        """Initial hyperparameters for inputs ``X`` ``(n, d)`` (dtype and device taken from ``X``), or
        for the rows of every process (:class:`~lifelong_learning.nystrom.distributed.ShardedRows`:
        the same on every process, and the same as for all the rows in one process).

        Args:
            centers: number of centres (drawn from the rows with ``gen``) or initial centres ``(m, d)``.
            lam_init: ``λ₀`` (default ``1/n``). lengthscale_init: ``ℓ₀``, a scalar or ``(d,)``
                (default: the median heuristic on ``X`` with ``seed``, at least 10⁻³: rows that
                barely differ give a median distance at the floor), moved inside the bounds.
            lengthscale_range: ``(a, b)``, ``0 < a < b``: each ``ℓ_d`` stays in
                ``[a r_d, b r_d]`` (``r_d``: the range of column ``d``; shared ``ℓ``: the median
                range). None: only the floor ``1e-4``.
        """
        rows = X if isinstance(X, ShardedRows) else ShardedRows(X)
        n, d = rows.total, rows.X.shape[1]
        Z0 = initial_centers(rows, centers, gen)
        if lengthscale_init is None:  # not at the floor, where softplus⁻¹ fails (a robot standing still)
            ls0 = max(median_heuristic(rows, seed=seed), 10 * _LS_FLOOR)
        else:
            ls0 = lengthscale_init
        ls0 = np.broadcast_to(np.asarray(ls0, dtype=np.float64), (d,) if per_dimension_lengthscale else ())
        lam0 = float(lam_init) if lam_init is not None else 1.0 / n
        if not (lam0 > 0 and np.all(ls0 > 0)):
            raise ValueError("lam_init and lengthscale_init must be positive")
        Z = Z0.requires_grad_(optimize_centers)
        bounds = None
        if lengthscale_range is None:
            raw = [softplus_inverse(float(v) - _LS_FLOOR) for v in np.atleast_1d(ls0)]
        else:
            low, high = _bounds(rows, lengthscale_range, per_dimension_lengthscale)
            frac = np.clip((np.atleast_1d(ls0) - low) / (high - low), 0.01, 0.99)
            raw = np.log(frac) - np.log1p(-frac)  # logit
            bounds = tuple(torch.as_tensor(b, dtype=Z0.dtype, device=Z0.device) for b in (low, high))
            if not per_dimension_lengthscale:
                bounds = (bounds[0][0], bounds[1][0])
        ls_raw = torch.tensor(np.asarray(raw, dtype=np.float64), dtype=Z0.dtype, device=Z0.device)
        if not per_dimension_lengthscale:
            ls_raw = ls_raw[0]
        ls_raw.requires_grad_(True)
        lam_raw = torch.tensor(
            softplus_inverse(lam0 - _LAM_FLOOR), dtype=Z0.dtype, device=Z0.device, requires_grad=True
        )
        return cls(Z, ls_raw, lam_raw, optimize_centers, bounds)

    def current(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(Z, ℓ, λ)`` at the current raw values, differentiable with respect to them."""
        if self.ls_bounds is None:
            ls = torch.nn.functional.softplus(self.ls_raw) + _LS_FLOOR
        else:
            low, high = self.ls_bounds
            ls = low + (high - low) * torch.sigmoid(self.ls_raw)
        lam = torch.nn.functional.softplus(self.lam_raw) + _LAM_FLOOR
        return self.centers, ls, lam

    def parameters(self) -> list[torch.Tensor]:
        """The tensors the optimizer updates: ``ℓ_raw``, ``λ_raw`` and, if trained, ``Z``."""
        return [self.ls_raw, self.lam_raw] + ([self.centers] if self.optimize_centers else [])


__all__ = ["Hyperparameters", "initial_centers", "median_heuristic", "softplus_inverse"]
