"""Error measures, one definition each, used by the tuner's reports, the demo and the benchmarks.

Normalized mean squared error (thesis §8.5, the measure of every inverse-dynamics figure):

    nMSE_j = (1/n) Σ_i (y_ij − ŷ_ij)² / σ_j²,

per output column ``j``, with ``σ_j²`` the variance of the true values ``y_j`` (over the
same rows, or a given variance, e.g. of a whole trajectory when scoring windows of it). A
column whose variance is zero has no scale to normalize by: its nMSE is its plain MSE (the
variance is taken as 1), so that a constant column neither divides by zero nor dominates a mean.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def normalized_mse(y_true: Any, y_pred: Any, variance: Any | None = None) -> np.ndarray:
    """Per-column nMSE of ``y_pred`` against ``y_true`` (both ``(n, p)``, or ``(n,)`` for one column).

    Args:
        variance: the ``σ²`` per column to normalize by (default: the variance of ``y_true``).

    Returns:
        ``(p,)`` float64; NaN for a column when there are no rows.
    """
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    t = t[:, None] if t.ndim == 1 else t
    p = p[:, None] if p.ndim == 1 else p
    if t.shape != p.shape:
        raise ValueError(f"y_true has shape {t.shape}, y_pred {p.shape}")
    if t.shape[0] == 0:
        return np.full(t.shape[1], np.nan)
    var = t.var(axis=0) if variance is None else np.broadcast_to(np.asarray(variance, float), (t.shape[1],))
    return ((t - p) ** 2).mean(axis=0) / np.where(var > 0, var, 1.0)
