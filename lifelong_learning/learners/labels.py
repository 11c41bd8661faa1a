"""The class labels of the incremental classifier: what a label may be, and its key.

A label is an integer (not a bool) or a non-empty string of printable characters; ``1`` and
``"1"`` are different classes (the type is part of the key, :func:`label_key`). Labels come from
a teacher over the network, so anything else is refused with a clear error.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

Label = int | str


def check_label(label: Any) -> Label:
    """A label is an integer (not a bool) or a non-empty string of printable characters
    (``str.isprintable``: no control character such as NUL or a newline, no format, private-use
    or unassigned code point, no whitespace but the ASCII space) that is not only spaces; numpy
    scalars are unwrapped.

    Raises:
        ValueError: anything else.
    """
    if isinstance(label, np.generic):
        label = label.item()
    if isinstance(label, bool) or not isinstance(label, (str, numbers.Integral)):
        raise ValueError(f"labels must be non-empty strings or integers, got {label!r}")
    if isinstance(label, str):
        if not label.strip():
            raise ValueError("labels must not be empty")
        if not label.isprintable():
            raise ValueError(f"labels must be printable (no control characters), got {label[:80]!r}")
        return label
    return int(label)


def label_key(label: Label) -> tuple[str, Label]:
    """The key of a checked label in a class index: 1 and "1" are different classes."""
    return ("i" if isinstance(label, int) else "s", label)


def labels_of(y: Any, n: int) -> list[Label]:
    """The ``n`` labels of ``y`` (one label, a list or an array), each checked (:func:`check_label`).

    Raises:
        ValueError: not ``n`` labels, or a bad one.
    """
    if isinstance(y, (str, numbers.Integral, np.generic)) and not isinstance(y, np.ndarray):
        ys = [y]
    else:
        ys = list(np.asarray(y, dtype=object).ravel()) if not isinstance(y, list) else list(y)
    if len(ys) != n:
        raise ValueError(f"got {n} samples but {len(ys)} labels")
    return [check_label(v) for v in ys]
