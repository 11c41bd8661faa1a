"""Rows of a retraining job spilled to a temporary file and read back in blocks: the filtered
joint states of an inverse-dynamics job (:class:`RowStore`), the labeled features of a
classification job (:class:`FeatureStore`).

The retraining job for inverse dynamics reads its bags once
(:class:`~lifelong_learning.io.bags.JointStateStream`), filters them block by block and appends
each row ``[t, q, q̇, q̈, τ]`` (float64) here; every later pass (the rigid-body fit, the outlier
tests, the replays) reads the rows back a block at a time. The file is an unnamed temporary
file (``tempfile.TemporaryFile``, in ``$TMPDIR``): ``8 (1 + 4 n_dof)`` bytes per row on disk (232
bytes for 7 joints: 0.8 GB for an hour at 1 kHz), gone when it is closed or the process ends,
however it ends. One byte per row in a second such file marks the rows a pass left out
(:meth:`RowStore.set_left_out`).
"""

from __future__ import annotations

import itertools
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class Rows:
    """Consecutive rows: their numbers ``index`` and ``t``, ``q``, ``qd``, ``qdd``, ``tau``."""

    index: np.ndarray
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray

    def __len__(self) -> int:
        return int(self.index.size)

    def take(self, rows: np.ndarray) -> Rows:
        """The rows ``rows`` (a mask or positions) of these."""
        return Rows(*(a[rows] for a in (self.index, self.t, self.q, self.qd, self.qdd, self.tau)))

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(q, q̇, q̈, τ)``, what the learners take."""
        return self.q, self.qd, self.qdd, self.tau


class RowStore:
    """Rows ``[t, q, q̇, q̈, τ]`` of ``n_dof`` joints in a temporary file (see the module docstring),
    with the first row of each stretch (``starts``) and of each bag (``bag_starts``, its bag's
    index in ``bag_of_start``). Use as a context manager, or :meth:`close`."""

    def __init__(self, n_dof: int, block: int) -> None:
        self.n_dof, self.block = int(n_dof), int(block)
        self.width = 1 + 4 * self.n_dof
        self.n = 0
        self.starts: list[int] = []
        self.bag_starts: list[int] = []
        self.bag_of_start: list[int] = []
        self._rows = tempfile.TemporaryFile(prefix="lifelong-learning-rows-")
        self._left_out = tempfile.TemporaryFile(prefix="lifelong-learning-rows-")

    def __enter__(self) -> RowStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Delete the files."""
        self._rows.close()
        self._left_out.close()

    def append(self, t: np.ndarray, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, tau: np.ndarray) -> None:
        """Append rows at the end (``t`` ``(k,)``, the others ``(k, n_dof)``)."""
        k = np.shape(t)[0]
        if not k:
            return
        data = np.empty((k, self.width))
        d = self.n_dof
        data[:, 0] = t
        for i, a in enumerate((q, qd, qdd, tau)):
            data[:, 1 + i * d : 1 + (i + 1) * d] = a
        self._rows.seek(0, 2)
        self._rows.write(data.tobytes())
        self.n += k

    def read(self, start: int, stop: int) -> Rows:
        """Rows ``start`` to ``stop`` (excluded)."""
        k = max(0, stop - start)
        data = np.empty((k, self.width))
        self._rows.seek(start * self.width * 8)
        if self._rows.readinto(memoryview(data).cast("B")) != data.nbytes:
            raise OSError("the temporary file of the rows was truncated")
        d = self.n_dof
        parts = [data[:, 1 + i * d : 1 + (i + 1) * d] for i in range(4)]
        return Rows(np.arange(start, start + k), data[:, 0], *parts)

    def set_left_out(self, start: int, left_out: np.ndarray) -> None:
        """Mark rows ``start``, ``start + 1``, ... left out (True) or not."""
        self._left_out.seek(start)
        self._left_out.write(np.asarray(left_out, dtype=np.uint8).tobytes())

    def left_out(self, start: int, stop: int) -> np.ndarray:
        """Which rows ``start`` to ``stop`` are left out (rows never marked are not)."""
        out = np.zeros(max(0, stop - start), dtype=np.uint8)
        self._left_out.seek(0, 2)
        have = min(stop, self._left_out.tell()) - start
        if have > 0:
            self._left_out.seek(start)
            self._left_out.readinto(memoryview(out[:have]))
        return out.astype(bool)

    def blocks(self, start: int, stop: int, kept_only: bool = False) -> Iterator[Rows]:
        """Rows ``start`` to ``stop`` in blocks of at most :attr:`block` rows (with ``kept_only``,
        without those left out; empty blocks are not given)."""
        for a in range(start, stop, self.block):
            b = min(stop, a + self.block)
            rows = self.read(a, b)
            if kept_only:
                rows = rows.take(~self.left_out(a, b))
            if len(rows):
                yield rows

    def bag_of(self, index: np.ndarray) -> np.ndarray:
        """The bag (its index among those read) of each row number in ``index``."""
        at = np.searchsorted(np.asarray(self.bag_starts), index, side="right") - 1
        return np.asarray(self.bag_of_start)[np.maximum(at, 0)]


class FeatureStore:
    """Feature vectors (float64, ``d`` of them per row, ``d`` set by the first rows) in an unnamed
    temporary file (``8 d`` bytes per row on disk, gone when closed), and their labels in memory as
    codes (4 bytes per row) into :attr:`vocabulary`. Rows are read back a block of at most
    ``block`` rows at a time. Use as a context manager, or :meth:`close`."""

    def __init__(self, block: int) -> None:
        self.block = int(block)
        self.d: int | None = None
        self.n = 0
        self.vocabulary: list[str] = []
        self._code: dict[str, int] = {}
        self._codes = array("i")
        self._rows = tempfile.TemporaryFile(prefix="lifelong-learning-features-")

    def __enter__(self) -> FeatureStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Delete the file."""
        self._rows.close()

    def append(self, X: np.ndarray, labels: Sequence[str]) -> None:
        """Append rows ``X`` ``(k, d)`` and their labels."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] != len(labels) or (self.d is not None and X.shape[1] != self.d):
            raise ValueError(
                f"rows of shape {X.shape} with {len(labels)} labels for a store of width {self.d}"
            )
        if not X.shape[0]:
            return
        self.d = int(X.shape[1])
        self._rows.seek(0, 2)
        self._rows.write(X.tobytes())
        for label in labels:
            code = self._code.get(label)
            if code is None:
                code = self._code[label] = len(self.vocabulary)
                self.vocabulary.append(label)
            self._codes.append(code)
        self.n += X.shape[0]

    @property
    def codes(self) -> np.ndarray:
        """The label code of every row (a view of the store's codes: let it go before the next
        :meth:`append`, which cannot grow the codes while a view exists)."""
        return np.frombuffer(self._codes, dtype=np.int32) if self.n else np.zeros(0, dtype=np.int32)

    def labels(self, index: np.ndarray) -> np.ndarray:
        """The labels of rows ``index`` (an object array of the vocabulary's strings)."""
        return np.asarray(self.vocabulary, dtype=object)[self.codes[np.asarray(index, dtype=np.int64)]]

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start`` to ``stop`` (excluded)."""
        k = max(0, stop - start)
        out = np.empty((k, self.d or 0))
        self._rows.seek(start * (self.d or 0) * 8)
        if self._rows.readinto(memoryview(out).cast("B")) != out.nbytes:
            raise OSError("the temporary file of the features was truncated")
        return out

    def take(self, index: np.ndarray) -> np.ndarray:
        """Rows at the sorted row numbers ``index``, in memory (for a sample: few rows)."""
        parts = list(self.blocks(index))
        return np.vstack(parts) if parts else np.empty((0, self.d or 0))

    def blocks(self, index: np.ndarray) -> Iterator[np.ndarray]:
        """Rows at the sorted row numbers ``index``, in order, one block of the file (at most
        :attr:`block` consecutive rows) read at a time: memory is bounded by a block however
        sparse ``index`` is."""
        index = np.asarray(index, dtype=np.int64)
        if not index.size:
            return
        window = index // self.block
        cuts = np.concatenate([[0], np.flatnonzero(np.diff(window)) + 1, [index.size]])
        for lo, hi in itertools.pairwise(cuts.tolist()):
            chunk = index[lo:hi]
            first = int(chunk[0])
            yield self.read(first, int(chunk[-1]) + 1)[chunk - first]


__all__ = ["FeatureStore", "RowStore", "Rows"]
