"""The one input check of the numerical code: rows of a given width, all finite.

Every learner and feature map validates its inputs here before it changes any state, so a
wrong size or a NaN is refused with the same message everywhere (and the model is untouched).
The torch boundary of the Nyström code, :func:`lifelong_learning.nystrom.krr.as_tensor`, is
the counterpart for tensors that may live on a GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def as_rows(x: Any, width: int | None = None, name: str = "X", what: str = "") -> np.ndarray:
    """``x`` as a finite float64 array of rows, shape ``(n, width)``.

    A 1-D ``x`` is one row, except when ``width`` is 1: then it is a column of ``n`` rows
    (targets of a single-output model). ``width=None`` accepts any width ≥ 1.

    Args:
        x: array-like.
        width: required number of columns, or None.
        name: the argument's name, for the error message.
        what: what the columns are (e.g. ``"joints ['j1', 'j2']"``), appended to the width error.

    Raises:
        ValueError: not 1-D or 2-D, wrong width, no column, or NaN/Inf.
    """
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None] if width == 1 and a.shape[0] != 1 else a[None, :]
    if a.ndim != 2:
        raise ValueError(f"{name} must be 1-D or 2-D, got shape {np.shape(x)}")
    if width is not None and a.shape[1] != width:
        extra = f" ({what})" if what else ""
        raise ValueError(f"{name} must have {width} columns{extra}, got shape {np.shape(x)}")
    if a.shape[1] == 0:
        raise ValueError(f"{name} has no columns")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or Inf")
    return a


def same_rows(arrays: dict[str, np.ndarray]) -> int:
    """The common number of rows of ``arrays`` (name → 2-D array); ValueError when they differ."""
    counts = {name: a.shape[0] for name, a in arrays.items()}
    if len(set(counts.values())) > 1:
        raise ValueError(f"inputs have different numbers of rows: {counts}")
    return next(iter(counts.values()), 0)
