"""What a classifier took back, remembered so that a model retrained from the recorded bags takes
it back too.

Unlearning (:mod:`~lifelong_learning.learners.unlearning`: a teaching episode undone, a class
forgotten or renamed) and a reset change the model, but not the bags the robot recorded while it
was taught: a retraining from those bags would learn the old state again, and its promotion gate,
scoring on the bags' most recent samples, would even prefer the candidate that knows a forgotten
class. So the model remembers (:class:`TakenBack`), and the retraining that continues from it sorts
the bags' rows by that record (:meth:`TakenBack.sort`; retraining/classification.py):

- **rows**: the samples it unlearned, each by a digest (:func:`row_digests`): BLAKE2b with an
  8-byte digest (``digest_size=8``) over its float32 values, read as a little-endian uint64. The
  bags hold features as float32 (LabeledFeatures), and a model without a feature map keeps its
  samples as they came, float32 where that is exact; two different rows share a digest with
  probability about 2⁻⁶⁴. A row of the bags with such a digest is not learned. A model with a
  feature map (every model a retraining writes) keeps its samples in model features, which no bag
  holds, so it keeps the digest of each raw input it can unlearn beside it (learners/unlearning.py's
  ``InputDigests``) and records that one; the samples it learned as sums (a retraining's own) it
  cannot unlearn at all.
- **gone**: the classes it no longer knows by an edit (forgotten, emptied by an undo, known before
  a ``~/reset``): a row of the bags labeled so is not learned, unless the model knows that class
  again (taught since; its rows from before are still dropped by digest where they were kept).
- **renamed**: ``old → new`` of each rename: a row labeled ``old`` is learned as ``new`` (renames
  of renames kept as one step), unless the model knows ``old`` again.

Not remembered: held-out samples of an undone episode that the validation buffer had already let
go (it keeps at most ``max_validation`` per class); a retraining learns those again.

Bounded: the newest :data:`MAX_ROWS` digests (800 kB, the model file's array ``taken_back``) and
:data:`MAX_LABELS` labels of each kind (its meta ``taken_back``). Labels are kept as text, as the
bags hold them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: digests a model remembers (the newest); a retraining from older bags learns older ones again
MAX_ROWS = 100_000
#: labels gone, and renames, a model remembers (the newest of each)
MAX_LABELS = 1024


def row_digests(X: Any) -> np.ndarray:
    """uint64 digest of each row of ``X`` (n × d) as float32 (module docstring)."""
    rows = np.ascontiguousarray(np.atleast_2d(np.asarray(X)), dtype=np.float32)
    out = np.empty(rows.shape[0], dtype=np.uint64)
    for i, row in enumerate(rows):
        out[i] = int.from_bytes(hashlib.blake2b(row.tobytes(), digest_size=8).digest(), "little")
    return out


def _newest(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``old`` followed by the digests of ``new`` it lacks (each once), the newest :data:`MAX_ROWS`."""
    new = np.asarray(new, dtype=np.uint64)
    _, first = np.unique(new, return_index=True)
    fresh = new[np.sort(first)]
    return np.concatenate([old, fresh[~np.isin(fresh, old)]])[-MAX_ROWS:]


@dataclass(frozen=True, eq=False)
class Sorted:
    """The rows of the bags a retraining learns (``keep``, a mask), with their ``labels`` (renamed
    where the model renamed them); how many were dropped, and how many renamed."""

    keep: np.ndarray
    labels: list[str]
    dropped: int
    renamed: int


@dataclass(frozen=True, eq=False)
class TakenBack:
    """What a classifier took back (module docstring). Immutable: each change returns a new one."""

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    gone: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.rows.size or self.gone or self.renamed)

    def removing(self, X: Any, labels: Iterable[Any] = ()) -> TakenBack:
        """With the rows ``X`` unlearned and the classes ``labels`` gone."""
        return self.removing_digests(row_digests(X) if len(X) else np.zeros(0, np.uint64), labels)

    def removing_digests(self, digests: np.ndarray, labels: Iterable[Any] = ()) -> TakenBack:
        """With the rows of these digests (:func:`row_digests`) unlearned and the classes ``labels`` gone."""
        names = [str(x) for x in labels]
        gone = [g for g in self.gone if g not in set(names)] + names
        rows = _newest(self.rows, digests) if len(digests) else self.rows
        return TakenBack(rows, tuple(dict.fromkeys(gone))[-MAX_LABELS:], self.renamed)

    def renaming(self, old: Any, new: Any) -> TakenBack:
        """With class ``old`` renamed ``new`` (``new`` is no longer gone). The renames stay one step
        each: a name renamed to ``old`` before now leads to ``new``, and a cycle (``a → b``, then
        ``b → a``) leaves only the last rename."""
        old, new = str(old), str(new)
        renamed = [(a, new if b == old else b) for a, b in self.renamed if a != old]
        renamed = [(a, b) for a, b in renamed if a != b] + [(old, new)]
        gone = tuple(g for g in self.gone if g != new)
        return TakenBack(self.rows, gone, tuple(renamed)[-MAX_LABELS:])

    def beyond(self, older: TakenBack) -> TakenBack:
        """What this record holds that ``older`` does not: the rows, classes gone and renames since."""
        rows = self.rows[~np.isin(self.rows, older.rows)] if older.rows.size else self.rows
        gone = tuple(g for g in self.gone if g not in set(older.gone))
        return TakenBack(rows, gone, tuple(p for p in self.renamed if p not in set(older.renamed)))

    def joined(self, other: TakenBack) -> TakenBack:
        """This record, then ``other``'s (newer) on top: its renames, then its gone classes (which
        already say what its own renames left gone: a class renamed to, then forgotten, stays gone)."""
        out = TakenBack(_newest(self.rows, other.rows), self.gone, self.renamed)
        for old, new in other.renamed:
            out = out.renaming(old, new)
        return out.removing([], other.gone)

    def sort(self, X: np.ndarray, labels: Sequence[Any], known: Iterable[Any]) -> Sorted:
        """Which rows of the bags (``X``, ``labels``) a model that knows the classes ``known`` and
        took back this learns, and as what (module docstring)."""
        known = {str(k) for k in known}
        keep = ~np.isin(row_digests(X), self.rows) if self.rows.size and len(X) else np.ones(len(X), bool)
        renames, gone = dict(self.renamed), set(self.gone)
        out, renamed = [], 0
        for i, label in enumerate(labels):
            name, seen = str(label), set()
            while name not in known and name in renames and name not in seen:
                seen.add(name)
                name = renames[name]
            if name not in known and name in gone:
                keep[i] = False
            elif keep[i] and name != str(label):
                renamed += 1
            out.append(name)
        return Sorted(keep, [lab for lab, k in zip(out, keep, strict=True) if k], int((~keep).sum()), renamed)

    def store_into(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """The model file's entries: meta ``taken_back`` (labels), array ``taken_back`` (digests)."""
        if self:
            meta["taken_back"] = {"gone": list(self.gone), "renamed": [list(p) for p in self.renamed]}
            arrays["taken_back"] = self.rows.copy()

    @classmethod
    def restore(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> TakenBack:
        """The record of a model file (none: an empty one); ValueError on bad content."""
        entry = meta.get("taken_back")
        if entry is None and "taken_back" not in arrays:
            return cls()
        a = np.asarray(arrays.get("taken_back", np.zeros(0, np.uint64)))
        if a.ndim != 1 or a.dtype != np.uint64 or a.size > MAX_ROWS:
            raise ValueError(f"taken_back must be at most {MAX_ROWS} uint64 digests, got {a.dtype} {a.shape}")
        if np.unique(a).size != a.size:
            raise ValueError("taken_back holds a digest twice")
        entry = {} if entry is None else entry
        if not isinstance(entry, dict) or set(entry) - {"gone", "renamed"}:
            raise ValueError("taken_back's labels must be an entry of 'gone' and 'renamed' lists")
        gone, renamed = entry.get("gone", []), entry.get("renamed", [])
        if not isinstance(gone, list) or not isinstance(renamed, list):
            raise ValueError("taken_back's labels must be an entry of 'gone' and 'renamed' lists")
        pairs_ok = all(isinstance(p, list) and len(p) == 2 for p in renamed)
        texts = [*gone, *(x for p in renamed if isinstance(p, list) for x in p)]
        if not pairs_ok or not all(isinstance(t, str) for t in texts):
            raise ValueError("taken_back's labels must be texts, its renames pairs of texts")
        if len(gone) > MAX_LABELS or len(renamed) > MAX_LABELS:
            raise ValueError(f"taken_back holds more than {MAX_LABELS} labels of a kind")
        return cls(a.copy(), tuple(gone), tuple((p[0], p[1]) for p in renamed))
