"""What a classifier took back, remembered so that a model retrained from the recorded bags takes
it back too.

Unlearning (:mod:`~lifelong_learning.learners.unlearning`: a teaching episode undone, a class
forgotten) removes samples from the model, but not from the bags the robot recorded while it was
taught: a retraining from those bags would learn them again, and its promotion gate, scoring on
the bags' most recent samples, would even prefer the candidate that knows a forgotten class. So the
model remembers the rows it unlearned by digest, and the retraining that continues from it drops
the bags' rows with those digests (:mod:`~lifelong_learning.retraining.classification`).

A row's digest is the first 8 bytes of BLAKE2b over its float32 values: the bags hold features as
float32 (LabeledFeatures), and a model without a feature map keeps its samples as they came,
float32 where that is exact. Two different rows share a digest with probability about 2⁻⁶⁴.
A model with a feature map keeps its samples in model features, which no bag holds: it remembers
nothing. Bounded: the newest :data:`MAX_TAKEN_BACK` digests (800 kB), in the model file as the
array ``taken_back``. A row taught again after it was taken back is the same row: a retraining
drops it too (teaching the object again gives new frames, which are learned).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

#: digests a model remembers (the newest); a retraining from older bags learns older ones again
MAX_TAKEN_BACK = 100_000


def row_digests(X: Any) -> np.ndarray:
    """uint64 digest of each row of ``X`` (n × d) as float32 (module docstring)."""
    rows = np.ascontiguousarray(np.atleast_2d(np.asarray(X)), dtype=np.float32)
    out = np.empty(rows.shape[0], dtype=np.uint64)
    for i, row in enumerate(rows):
        out[i] = int.from_bytes(hashlib.blake2b(row.tobytes(), digest_size=8).digest(), "little")
    return out


def remembered(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``old`` followed by the digests of ``new`` it lacks (each once), the newest
    :data:`MAX_TAKEN_BACK` kept."""
    new = np.asarray(new, dtype=np.uint64)
    _, first = np.unique(new, return_index=True)
    fresh = new[np.sort(first)]
    fresh = fresh[~np.isin(fresh, old)]
    return np.concatenate([old, fresh])[-MAX_TAKEN_BACK:]


def checked(digests: Any) -> np.ndarray:
    """The ``taken_back`` array of a model file, checked: 1-D uint64, distinct, at most
    :data:`MAX_TAKEN_BACK`; ValueError otherwise."""
    a = np.asarray(digests)
    if a.ndim != 1 or a.dtype != np.uint64 or a.size > MAX_TAKEN_BACK:
        raise ValueError(
            f"taken_back must be at most {MAX_TAKEN_BACK} uint64 digests, got {a.dtype} of shape {a.shape}"
        )
    if np.unique(a).size != a.size:
        raise ValueError("taken_back holds a digest twice")
    return a.copy()
