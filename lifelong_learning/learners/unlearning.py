"""Exact unlearning for the incremental RLSC: forget a class, unlearn samples, rename a class.

A teacher who names an object wrongly, or teaches a class they did not mean to, must be able to
take it back without losing everything taught since. RLSC's state is a sum
over the training samples (thesis eqs. 7.16-7.17): ``A = λI + Σ zᵢzᵢᵀ``, ``B = Σ zᵢ e_{yᵢ}ᵀ``, the
class counts ``kₜ`` and the recoding built on them (eq. 7.21,
:func:`~lifelong_learning.learners.model_selection.recoding`). Removing
samples is subtracting their terms:

- ``A' = A − ZᵀZ``: a Cholesky rank-1 *downdate* per sample by hyperbolic rotations
  (:func:`~lifelong_learning.learners.cholesky.chol_downdate_rows`), O(d²) each, per λ engine;
- ``B' = B − ZᵀE`` (``E`` one-hot of their classes); the counts drop and the recoding follows;
- a class left with no sample (trained or held out) is removed: its column of ``B``, its count,
  its validation samples; the other classes keep their order.

The result equals, to rounding, the model trained on the remaining samples with the same split
into training and validation samples (test/learners/test_unlearning.py: relative difference of
the decision function ≤ 1e-8 against retraining from scratch, recoding on). With one λ and a fixed
α nothing is held out, and that is simply the model trained without the samples. (With model
selection, which samples a retraining would hold out depends on their numbers: the split kept is
the one the samples had; λ, α and the calibration are chosen again on the remaining validation
samples. In the shared-factor mode ``selection_every > 0`` the λ in use is downdated and the
selection made again at once.)

**The samples this needs** are kept by the model: the last ``keep_samples`` training samples
(in model features, after any feature map; float32 where that is exact), in the model file
too (meta ``kept_samples``, arrays ``kept_X``, ``kept_y``, ``kept_no``; files written before load
with none kept). Held-out samples are in the validation buffer already. A sample that is not
kept any more (older than the last ``keep_samples``, or learned as sums by
:meth:`IncrementalRLSC.learn_sums`) cannot be unlearned: a request that needs one is refused,
and so is forgetting a class with such a sample. Memory: a buffer of ``2 · keep_samples · d``
values (float32 while every kept feature is exact in float32, else float64): 1000 samples of 1280
EfficientNet features take 10 MB in memory (new rows are written past the end, and the buffer is
compacted once full, so that an update that fails leaves the store as it was) and 5 MB in the
model file. With a feature map the model also keeps the digest of each kept or held-out sample's
raw input (:class:`InputDigests`, arrays ``input_no``, ``input_digest``: 16 bytes a sample), so
that what it unlearns is recorded as the bags hold it (learners/taken_back.py).

**Positive definiteness.** ``A − zzᵀ`` is positive definite exactly when
``ρ² = 1 − ‖R⁻ᵀz‖² > 0`` (``ρ² = 1/(1 + zᵀA'⁻¹z)``), and the rounding errors of the downdate grow
like ``ε/ρ²`` (G. W. Stewart, "The effects of rounding error on an algorithm for downdating a
Cholesky factorization", 1979): a sample alone in its direction, of a norm much larger than
``√λ``, cannot be downdated accurately (one of 10⁹ with λ = 10⁻³ leaves pivots with no correct
digit). Each row is checked first (one triangular solve, O(d²)): ``ρ² < RHO_FLOOR``, or a pivot
below ``PIVOT_FLOOR · λ`` on the way (exact pivots are Schur complements of ``A' ≥ λI``: ≥ λ),
and the engine is rebuilt from the kept samples, ``R' = chol(λI + Z'ᵀZ')``, ``B' = Z'ᵀE'``, when
every training sample is kept; else the request is refused. Never is a broken factor kept: every
request is all or nothing (the new state is built aside and assigned at the end).

**Refused** (ValueError, nothing changed): an unknown class, the last class (``reset`` instead),
samples that are not kept (or more than are kept), a renaming onto the same name, a bad label.
**Rename** needs no sample: a class renamed to a new label keeps its column; renamed to a known
label, the two classes merge (``B``'s columns and the counts add: ``A`` does not depend on the
labels), exactly the model trained with those samples labeled so.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from lifelong_learning.learners.cholesky import chol_downdate_rows
from lifelong_learning.learners.labels import Label, check_label, label_key, labels_of
from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.learners.taken_back import TakenBack, row_digests
from lifelong_learning.learners.validation_scores import Pending

#: a downdated pivot below this fraction of λ (exact pivots are ≥ λ) means cancellation: rebuild
PIVOT_FLOOR = 0.5
#: a row ``z`` whose ``ρ² = 1 − ‖R⁻ᵀz‖²`` is below this is not downdated but rebuilt (its rounding
#: errors grow like ε/ρ²: ≤ ~2e-10 relative at this bound)
RHO_FLOOR = 1e-6


class DowndateError(ValueError):
    """A downdate lost positive definiteness (a pivot below ``PIVOT_FLOOR · λ``)."""


# ---------------------------------------------------------------------- the kept samples
@dataclass(frozen=True)
class SampleStore:
    """The last ``capacity`` training samples: features ``X``, class indices ``y``, sample numbers
    ``no`` (ascending). Immutable to its users: :meth:`added` writes only rows beyond this store's
    end into a shared buffer (twice the capacity; compacted into a new one when full), so that an
    update that fails leaves the old store intact. ``lost``: samples numbered ≤ it may be missing
    (evicted, or never kept)."""

    capacity: int
    buf_x: np.ndarray
    buf_y: np.ndarray
    buf_no: np.ndarray
    start: int = 0
    stop: int = 0
    lost: int = 0

    @classmethod
    def empty(cls, capacity: int, d: int, lost: int = 0) -> SampleStore:
        """No sample kept (room for ``capacity`` of dimension ``d``)."""
        n = 2 * capacity if capacity > 0 else 0
        return cls(
            capacity, np.zeros((n, d), np.float32), np.zeros(n, np.int64), np.zeros(n, np.int64), lost=lost
        )

    @property
    def rows(self) -> np.ndarray:
        """The kept features, oldest first."""
        return self.buf_x[self.start : self.stop]

    @property
    def y(self) -> np.ndarray:
        return self.buf_y[self.start : self.stop]

    @property
    def no(self) -> np.ndarray:
        return self.buf_no[self.start : self.stop]

    @property
    def size(self) -> int:
        return self.stop - self.start

    def added(self, Z: np.ndarray, cls: np.ndarray, nos: np.ndarray) -> SampleStore:
        """This store with rows ``Z`` (classes ``cls``, numbers ``nos``) appended, the oldest dropped
        beyond the capacity."""
        m = Z.shape[0]
        if self.capacity == 0:
            return replace(self, lost=max(self.lost, int(nos.max(initial=self.lost))))
        lost = self.lost
        if m > self.capacity:  # the block's first rows are not kept
            lost = max(lost, int(nos[m - self.capacity - 1]))
            Z, cls, nos = Z[-self.capacity :], cls[-self.capacity :], nos[-self.capacity :]
            m = self.capacity
        buf_x = self.buf_x
        exact32 = buf_x.dtype == np.float32 and np.array_equal(Z.astype(np.float32), Z)
        if buf_x.dtype == np.float32 and not exact32:
            buf_x = buf_x.astype(np.float64)
        start, stop, buf_y, buf_no = self.start, self.stop, self.buf_y, self.buf_no
        if stop + m > buf_x.shape[0] or buf_x is not self.buf_x:  # compact into new buffers
            keep = min(self.size, self.capacity - m)
            new_x = np.zeros_like(buf_x)
            new_y, new_no = np.zeros_like(buf_y), np.zeros_like(buf_no)
            new_x[:keep], new_y[:keep] = buf_x[stop - keep : stop], buf_y[stop - keep : stop]
            new_no[:keep] = buf_no[stop - keep : stop]
            buf_x, buf_y, buf_no, start, stop = new_x, new_y, new_no, 0, keep
        buf_x[stop : stop + m], buf_y[stop : stop + m], buf_no[stop : stop + m] = Z, cls, nos
        stop += m
        if stop - start > self.capacity:
            start = stop - self.capacity
            lost = max(lost, int(buf_no[start - 1]))
        return SampleStore(self.capacity, buf_x, buf_y, buf_no, start, stop, lost)

    def losing(self, upto: int) -> SampleStore:
        """This store, noting that samples numbered up to ``upto`` were learned without being kept."""
        return replace(self, lost=max(self.lost, int(upto)))

    def kept_where(self, keep: np.ndarray, class_map: np.ndarray | None = None) -> SampleStore:
        """A new store of the rows where ``keep`` is True, class indices mapped by ``class_map``."""
        y = self.y[keep] if class_map is None else class_map[self.y[keep]]
        fresh = SampleStore.empty(self.capacity, self.buf_x.shape[1], self.lost)
        n = int(keep.sum())
        X = fresh.buf_x if self.buf_x.dtype == np.float32 else fresh.buf_x.astype(np.float64)
        X[:n], fresh.buf_y[:n], fresh.buf_no[:n] = self.rows[keep], y, self.no[keep]
        return replace(fresh, buf_x=X, stop=n)

    def store_into(self, arrays: dict[str, np.ndarray], clock: int) -> dict[str, Any]:
        """The model file's entries (module docstring): the arrays added to ``arrays``, the meta returned."""
        arrays.update({"kept_X": self.rows.copy(), "kept_y": self.y.copy(), "kept_no": self.no.copy()})
        kept = {"capacity": self.capacity, "lost": self.lost}
        return {"keep_samples": self.capacity, "sample_clock": clock, "kept_samples": kept}

    @classmethod
    def restore(
        cls, meta: dict[str, Any], arrays: dict[str, np.ndarray], capacity: int, d: int, n_seen: int
    ) -> tuple[int, SampleStore]:
        """The sample clock and the store of a model file (:meth:`store_into`); a file without a store
        (written before, or ``keep_samples`` 0): none kept, every sample so far lost. ValueError on
        inconsistent content."""
        clock = int(meta.get("sample_clock", n_seen))
        if clock < n_seen:
            raise ValueError(f"sample_clock {clock} is below the samples seen ({n_seen})")
        entry = meta.get("kept_samples")
        if entry is None or capacity == 0:
            return clock, cls.empty(capacity, d, lost=clock)
        X, y, no = (np.asarray(arrays[k]) for k in ("kept_X", "kept_y", "kept_no"))
        n = y.shape[0] if y.ndim == 1 else -1
        if n < 0 or X.shape != (n, d) or no.shape != (n,) or n > capacity or X.dtype.kind != "f":
            raise ValueError("the kept samples have inconsistent shapes")
        if not (np.issubdtype(y.dtype, np.integer) and np.issubdtype(no.dtype, np.integer)):
            raise ValueError("the kept samples' classes and numbers must be integers")
        n_classes = len(meta["classes"])
        bad = np.any((y < 0) | (y >= max(n_classes, 1))) or np.any(no[1:] <= no[:-1])
        if bad or np.any((no < 1) | (no > clock)) or not np.all(np.isfinite(X)):
            raise ValueError("the kept samples hold a bad class, bad numbers or NaN/Inf")
        lost = int(entry["lost"])
        store = cls.empty(capacity, d, lost)
        buf_x = store.buf_x if X.dtype == np.float32 else store.buf_x.astype(np.float64)
        buf_x[:n], store.buf_y[:n], store.buf_no[:n] = X, y, no
        return clock, replace(store, buf_x=buf_x, stop=n)


@dataclass(frozen=True)
class InputDigests:
    """The digests (:func:`~lifelong_learning.learners.taken_back.row_digests`) of the raw inputs of
    the samples a model with a feature map keeps or holds out, by sample number (``no``, ascending):
    such a model keeps its samples in model features, which no bag holds, so what it unlearns is
    recorded by these. Digests of samples no longer kept are dropped now and then (:meth:`only`)."""

    no: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    digest: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))

    @property
    def size(self) -> int:
        return int(self.no.size)

    def added(self, nos: np.ndarray, digests: np.ndarray) -> InputDigests:
        """With the digests of samples numbered ``nos`` (all above those held) appended."""
        no = np.concatenate([self.no, np.asarray(nos, np.int64)])
        return InputDigests(no, np.concatenate([self.digest, np.asarray(digests, np.uint64)]))

    def of(self, nos: np.ndarray) -> np.ndarray:
        """The digests of the samples numbered ``nos`` that are held (others skipped)."""
        nos = np.asarray(nos, np.int64)
        at = np.clip(np.searchsorted(self.no, nos), 0, max(self.size - 1, 0))
        found = self.no[at] == nos if self.size else np.zeros(nos.size, bool)
        return self.digest[at[found]]

    def only(self, nos: np.ndarray) -> InputDigests:
        """Only the digests of the samples numbered ``nos``."""
        keep = np.isin(self.no, nos)
        return InputDigests(self.no[keep], self.digest[keep])

    def store_into(self, arrays: dict[str, np.ndarray]) -> None:
        """The model file's arrays ``input_no`` and ``input_digest`` (none when empty)."""
        if self.size:
            arrays.update({"input_no": self.no.copy(), "input_digest": self.digest.copy()})

    @classmethod
    def restore(cls, arrays: dict[str, np.ndarray], clock: int) -> InputDigests:
        """The digests of a model file (none: empty, as in files written before). ValueError on
        inconsistent content."""
        if "input_no" not in arrays and "input_digest" not in arrays:
            return cls()
        no, digest = np.asarray(arrays.get("input_no")), np.asarray(arrays.get("input_digest"))
        if no.ndim != 1 or digest.shape != no.shape or digest.dtype != np.uint64:
            raise ValueError("the input digests must be as many uint64 as their sample numbers")
        if (
            not np.issubdtype(no.dtype, np.integer)
            or np.any(no[1:] <= no[:-1])
            or np.any((no < 1) | (no > clock))
        ):
            raise ValueError("the input digests' sample numbers must ascend within the samples numbered")
        return cls(no.astype(np.int64), digest.copy())


# ---------------------------------------------------------------------- engines
def downdated(engine: RecursiveRLS, Z: np.ndarray, E: np.ndarray) -> RecursiveRLS:
    """A new engine for ``A − ZᵀZ``, ``B − ZᵀE`` (``engine`` untouched), row by row, each checked
    first (module docstring: ``ρ² = 1 − ‖R⁻ᵀz‖² ≥ RHO_FLOOR``).

    Raises:
        DowndateError: a row would lose positive definiteness, or its downdate could not be accurate.
    """
    R = engine.cholesky_factor  # a copy
    floor = PIVOT_FLOOR * engine.lam
    for i, z in enumerate(np.array(Z, dtype=np.float64, order="C")):
        a = solve_triangular(R, z, trans="T", lower=False, check_finite=False)
        rho2 = 1.0 - float(a @ a)
        if not rho2 >= RHO_FLOOR or chol_downdate_rows(R, z[None, :], floor) >= 0:
            raise DowndateError(
                f"the downdate of sample {i} would lose positive definiteness (ρ² = {rho2:.3g})"
            )
    return _engine(engine, R, engine.rhs - Z.T @ E, engine.n_samples - Z.shape[0])


def rebuilt(engine: RecursiveRLS, Z: np.ndarray, E: np.ndarray) -> RecursiveRLS:
    """A new engine of ``engine``'s λ trained on exactly ``Z`` (targets ``E``) at once."""
    fresh = RecursiveRLS(engine.n_features, E.shape[1], lam=engine.lam)
    if Z.shape[0]:
        fresh.update(Z, E)
    return fresh


def _engine(like: RecursiveRLS, R: np.ndarray, B: np.ndarray, n: int) -> RecursiveRLS:
    meta = {**like.scalar_state(), "n_outputs": B.shape[1], "n_samples": n}
    return RecursiveRLS.from_state(meta, {"R": R, "B": B})


def without_columns(engine: RecursiveRLS, keep: np.ndarray) -> RecursiveRLS:
    """``engine`` with only the outputs where ``keep`` is True (the factor shared, not copied)."""
    R = engine.cholesky_factor
    return _engine(engine, R, np.ascontiguousarray(engine.rhs[:, keep]), engine.n_samples)


def one_hot(cls: np.ndarray, T: int) -> np.ndarray:
    E = np.zeros((cls.size, T))
    E[np.arange(cls.size), cls] = 1.0
    return E


# ---------------------------------------------------------------------- the operations
class Unlearning:
    """The unlearning methods of :class:`~lifelong_learning.learners.rlsc.IncrementalRLSC` (a mixin:
    it works on the classifier's state; the module docstring says how)."""

    #: downdates that lost positive definiteness and were rebuilt from the kept samples
    rebuilds_: int = 0

    @property
    def taken_back_(self) -> TakenBack:
        """What this model took back: rows unlearned, classes gone, renames (learners/taken_back.py)."""
        return self._taken_back

    def remember_taken_back(self, record: TakenBack) -> Any:
        """Remember ``record`` too (older than this model's own): e.g. a retrained model, that of the
        model it continues from."""
        self._taken_back = record.joined(self._taken_back)
        return self

    def everything_taken_back(self) -> TakenBack:
        """This model's record with everything it knows taken back too (its kept and held-out rows,
        its classes): what a model that replaces it on ``~/reset`` remembers."""
        return self._taken_back.removing_digests(self._sample_digests()[1], [str(c) for c in self._labels])

    def clone(self) -> Any:
        """An independent copy in memory, bit for bit (a model file would rebuild some factors)."""
        return copy.deepcopy(self)

    def set_keep_samples(self, n: int) -> Any:
        """Keep the last ``n`` training samples from now on (of those kept now, the newest ``n`` stay):
        e.g. a model read from a file written with another bound, or before samples were kept.

        Raises:
            ValueError: ``n`` is not an integer ≥ 0.
        """
        if isinstance(n, bool) or int(n) < 0:
            raise ValueError(f"keep_samples must be an integer ≥ 0, got {n!r}")
        n, store = int(n), self._kept
        if n == store.capacity:
            return self
        fresh = SampleStore.empty(n, store.buf_x.shape[1], store.lost)
        if store.size:
            fresh = fresh.added(store.rows, store.y, store.no)
        self.keep_samples, self._kept = n, fresh
        return self

    def labels_of_numbers(self, numbers: Sequence[int]) -> list[Label]:
        """The labels of the kept samples numbered ``numbers`` (in that order; unknown numbers skipped)."""
        nos, cls = self._present()
        at = {int(n): int(c) for n, c in zip(nos, cls, strict=True)}
        return [self._labels[at[int(n)]] for n in numbers if int(n) in at]

    def caught_up(self, record: TakenBack, known: Iterable[Any]) -> Any:
        """This model, or a changed copy, that has taken back what ``record`` (the serving model's,
        which knows the classes ``known``) took back since this model's own record was made: a
        model about to replace the serving one (a hot reload, a promotion) must not bring back what
        the robot's user took back while it was trained or in shadow.

        On a copy: renames applied; classes gone from the serving model forgotten (unless it knows
        them again); the samples it undid unlearned where this model keeps them (by digest); the
        rest of the record remembered. Samples it undid that this model does not keep are harmless
        only when this model keeps every sample it trained on (it never learned them); otherwise it
        may have learned them (a retraining learns its rows as sums) and cannot unlearn them.

        Raises:
            ValueError: this model knows a class the serving model forgot and cannot forget it
                exactly, or may have learned samples the serving model undid; the reason says which.
        """
        known = {str(k) for k in known}
        extra = record.beyond(self._taken_back)
        # a class gone from the serving model that this one knows, even one gone in both records
        # (forgotten again since this model learned it anew)
        stale = [g for g in record.gone if g not in known and self._label_named(g) is not None]
        if not extra and not stale:
            return self
        model = self.clone()
        for old, new in extra.renamed:
            if model._label_named(old) is not None:
                model.rename_class(model._label_named(old), new)
        for name in dict.fromkeys([*extra.gone, *stale]):
            label = model._label_named(name)
            if name in known or label is None:
                continue
            try:
                model.forget_class(label)
            except ValueError as exc:
                raise ValueError(
                    f"it knows {name!r}, which the serving model forgot, and cannot forget it exactly ({exc})"
                ) from exc
        numbers, digests = model._sample_digests()
        hit = np.isin(digests, extra.rows)
        try:
            if hit.any():
                model.unlearn_numbers(numbers[hit])
        except ValueError as exc:
            raise ValueError(f"it cannot unlearn the samples the serving model undid since: {exc}") from exc
        covered = model._taken_back.beyond(self._taken_back).rows  # what the copy just took back
        missing = int(np.isin(extra.rows, covered, invert=True).sum())
        if missing and not self._keeps_every_trained_sample():
            raise ValueError(
                f"the serving model took back {missing} samples since this model was made "
                "(~/undo_teaching, ~/forget_class, ~/reset) that this model may have learned and "
                "cannot unlearn; a retraining from the serving model leaves them out"
            )
        model._taken_back = model._taken_back.joined(extra)
        return model

    def without(self, X: Any, y: Any) -> tuple[Any, int]:
        """A copy that has unlearned the labeled samples ``X``, ``y`` it keeps or held out (found by
        digest, as the bags hold them, and label; each kept sample at most once, the newest first),
        and how many it unlearned; this model itself when it keeps none of them. What it keeps no
        more stays learned. E.g. a serving model scored on samples it learned online, as if it had
        never seen them (the promotion gate, retraining/promotion.py).

        Raises:
            ValueError: unlearning them would leave no class, or a downdate could not be done
                exactly and the model cannot be rebuilt; nothing changes.
        """
        if not len(X):
            return self, 0
        numbers, digests = self._sample_digests()
        labels = self.labels_of_numbers(numbers)
        need = Counter(zip(row_digests(X).tolist(), (str(lab) for lab in labels_of(y, len(X))), strict=True))
        chosen = []
        for at in np.argsort(-numbers, kind="stable"):
            key = (int(digests[at]), str(labels[at]))
            if need[key] > 0:
                need[key] -= 1
                chosen.append(int(numbers[at]))
        if not chosen:
            return self, 0
        return self.clone().unlearn_numbers(chosen), len(chosen)

    def _label_named(self, name: str) -> Label | None:
        """The class whose label reads ``name`` as text (a record keeps labels as text), if known."""
        return next((label for label in self._labels if str(label) == name), None)

    def _sample_digests(
        self, train: np.ndarray | None = None, val: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Numbers and digests of the kept training rows ``train`` and validation rows ``val`` (masks;
        all by default), as the bags hold them: of the rows themselves, or of their raw inputs where
        a feature map made them (those learned before the model kept input digests are skipped)."""
        train = np.ones(self._kept.size, bool) if train is None else train
        val = np.ones(self._val_y.size, bool) if val is None else val
        numbers = np.concatenate([self._kept.no[train], self._val_age[val]])
        if self.feature_map is None:
            return numbers, row_digests(np.vstack([self._kept.rows[train], self._val_X[val]]))
        numbers = numbers[np.isin(numbers, self._inputs.no)]
        return numbers, self._inputs.of(numbers)

    def _keeps_every_trained_sample(self) -> bool:
        """Whether every sample trained on is kept, with its digest: a sample undone elsewhere that
        is not among them was never learned."""
        every = self._kept.size == int(self._train_counts.sum())
        return every and (self.feature_map is None or bool(np.isin(self._kept.no, self._inputs.no).all()))

    def kept_samples(self) -> tuple[np.ndarray, list[Label], np.ndarray]:
        """The kept training samples (model features), their labels and numbers, oldest first."""
        store = self._kept
        return store.rows.astype(np.float64), [self._labels[int(c)] for c in store.y], store.no.copy()

    def teaching_episode(self, n: int = 0) -> np.ndarray:
        """The numbers of the samples of the last teaching episode, trained or held out: the newest
        samples back to the last change of label (``n`` 0), or the newest ``n``.

        Raises:
            ValueError: no sample, or the episode reaches samples that are not kept.
        """
        nos, cls = self._present()
        if nos.size == 0:
            raise ValueError("no sample to undo (none learned, or none kept: keep_samples)")
        if n > nos.size:
            raise ValueError(f"{n} samples asked for, only {nos.size} are kept (keep_samples)")
        if n > 0:
            first = nos.size - n
        else:  # back to the last change of label
            differ = np.flatnonzero(cls != cls[-1])
            first = int(differ[-1]) + 1 if differ.size else 0
        # samples not kept (evicted, or learned as sums) after the one before the episode could be
        # part of it; the newest n must all come after the last one not kept
        if n > 0:
            before = int(nos[first]) - 1
        else:
            before = int(nos[first - 1]) if first > 0 else 0
        if self._kept.lost > before:
            raise ValueError(
                "the episode reaches samples that are not kept any more "
                f"(keep_samples = {self._kept.capacity}); ~/rollback or a retraining instead"
            )
        return nos[first:]

    def _present(self) -> tuple[np.ndarray, np.ndarray]:
        """Numbers and classes of the kept training samples and validation samples, by number."""
        nos = np.concatenate([self._kept.no, self._val_age])
        cls = np.concatenate([self._kept.y, self._val_y])
        order = np.argsort(nos, kind="stable")
        return nos[order], cls[order]

    def unlearn_numbers(self, numbers: Sequence[int]) -> Any:
        """Unlearn the kept samples numbered ``numbers`` (:meth:`teaching_episode`).

        Raises:
            ValueError: a number that is not a kept sample, or the last class would go; nothing changes.
        """
        want = np.asarray(numbers, dtype=np.int64)
        train = np.isin(self._kept.no, want)
        val = np.isin(self._val_age, want)
        missing = set(want.tolist()) - set(self._kept.no[train].tolist()) - set(self._val_age[val].tolist())
        if missing:
            raise ValueError(f"{len(missing)} of the samples are not kept (e.g. number {min(missing)})")
        return self._remove(train, val)

    def unlearn(self, X: Any, y: Any) -> Any:
        """Unlearn labeled samples ``X``, ``y`` learned before: each must equal a kept training sample
        or a validation sample of the same label (in model features); see the module docstring.

        Raises:
            ValueError: a sample that is not kept, more samples than kept, bad input, or the last
                class would go; nothing changes then.
        """
        if not self._labels:
            raise ValueError("the classifier has learned nothing to unlearn")
        Z = self._features(X)
        labels = labels_of(y, Z.shape[0])
        kept, val_X = self._kept, self._val_X
        if Z.shape[0] > kept.size + self._val_y.size:
            raise ValueError(f"{Z.shape[0]} samples to unlearn, only {kept.size + self._val_y.size} are kept")
        train = np.zeros(kept.size, bool)
        val = np.zeros(self._val_y.size, bool)
        for i, (z, lab) in enumerate(zip(Z, labels, strict=True)):
            c = self._index.get(label_key(lab))
            if c is None:
                raise ValueError(f"sample {i}: {lab!r} is not a known class")
            hit = _first_free(kept.rows, kept.y, train, z, c)
            if hit >= 0:
                train[hit] = True
                continue
            hit = _first_free(val_X, self._val_y, val, z, c)
            if hit < 0:
                raise ValueError(
                    f"sample {i} of {lab!r} is not kept (only the last keep_samples = {kept.capacity} are)"
                )
            val[hit] = True
        return self._remove(train, val)

    def forget_class(self, label: Label) -> Any:
        """Forget class ``label``: every sample of it unlearned, its column and count removed.

        Raises:
            ValueError: an unknown class, the last class, or a class whose samples are not all kept.
        """
        c = self._class_of(label)
        if len(self._labels) == 1:
            raise ValueError(f"{label!r} is the last class; reset the model instead")
        train = self._kept.y == c
        if int(train.sum()) != int(self._train_counts[c]):
            raise ValueError(
                f"{label!r} has {int(self._train_counts[c])} training samples, only {int(train.sum())} "
                f"are kept (keep_samples = {self._kept.capacity}): it cannot be forgotten exactly"
            )
        return self._remove(train, self._val_y == c, drop=c)

    def rename_class(self, old: Label, new: Label) -> Any:
        """Call class ``old`` ``new``; when ``new`` is a known class the two merge (module docstring).

        Raises:
            ValueError: ``old`` unknown, ``new`` a bad label or equal to ``old``; nothing changes then.
        """
        c = self._class_of(old)
        new = check_label(new)
        if label_key(new) == label_key(self._labels[c]):
            raise ValueError(f"{old!r} is called {new!r} already")
        record = self._taken_back.renaming(self._labels[c], new)
        target = self._index.get(label_key(new))
        if target is None:
            labels = list(self._labels)
            labels[c] = new
            self._labels, self._index = labels, {label_key(lab): i for i, lab in enumerate(labels)}
            self._selection = None
            self._taken_back = record
            return self
        T = len(self._labels)
        keep = np.arange(T) != c
        class_map = np.cumsum(keep) - 1
        class_map[c] = class_map[target]
        engines = []
        for rls in self._engines:
            B = rls.rhs.copy()
            B[:, target] += B[:, c]
            engines.append(_engine(rls, rls.cholesky_factor, np.ascontiguousarray(B[:, keep]), rls.n_samples))
        train_counts, seen_counts = self._train_counts.copy(), self._seen_counts.copy()
        train_counts[target] += train_counts[c]
        seen_counts[target] += seen_counts[c]
        self._commit(
            engines, keep, class_map, train_counts[keep], seen_counts[keep], np.ones(self._val_y.size, bool)
        )
        self._kept = self._kept.kept_where(np.ones(self._kept.size, bool), class_map)
        self._taken_back = record
        if self.shares_factor:
            self.select_model()
        return self

    def _class_of(self, label: Label) -> int:
        if not self.has_class(label):
            raise ValueError(f"{label!r} is not a known class (known: {len(self._labels)} classes)")
        label = label.item() if isinstance(label, np.generic) else label
        return self._index[label_key(label if isinstance(label, str) else int(label))]

    def _remove(self, train: np.ndarray, val: np.ndarray, drop: int | None = None) -> Any:
        """Unlearn the kept training rows ``train`` and validation rows ``val`` (masks); classes
        left without a sample go, ``drop`` too. All or nothing."""
        T = len(self._labels)
        cls_t, cls_v = self._kept.y[train], self._val_y[val]
        train_counts = self._train_counts - np.bincount(cls_t, minlength=T)
        seen_counts = self._seen_counts - np.bincount(cls_t, minlength=T) - np.bincount(cls_v, minlength=T)
        emptied = (seen_counts == 0) & (self._seen_counts > 0)
        if drop is not None:
            emptied[drop] = True
        keep_cls = ~emptied
        if not keep_cls.any():
            raise ValueError("unlearning these samples would leave no class; reset the model instead")
        Z = self._kept.rows[train].astype(np.float64)
        E = one_hot(cls_t, T)
        engines = []
        for rls in self._engines:
            try:
                new = downdated(rls, Z, E) if Z.shape[0] else rls
            except DowndateError:
                new = self._rebuilt(rls, ~train)
            engines.append(without_columns(new, keep_cls) if not keep_cls.all() else new)
        class_map = np.cumsum(keep_cls) - 1
        gone = [str(self._labels[c]) for c in np.flatnonzero(emptied)]
        record = self._taken_back.removing_digests(self._sample_digests(train, val)[1], gone)
        self._commit(engines, keep_cls, class_map, train_counts[keep_cls], seen_counts[keep_cls], ~val)
        self._kept = self._kept.kept_where(~train, class_map)
        self._taken_back = record
        self.n_samples -= int(train.sum() + val.sum())
        if self.shares_factor:
            self.select_model()
        return self

    def _rebuilt(self, rls: RecursiveRLS, rest: np.ndarray) -> RecursiveRLS:
        """``rls`` trained again on the kept rows ``rest``, when every training sample is kept."""
        if self._kept.size != int(self._train_counts.sum()):
            raise ValueError(
                "the downdate would lose positive definiteness (numerical cancellation) and the model "
                f"cannot be rebuilt: only {self._kept.size} of its {int(self._train_counts.sum())} "
                "training samples are kept; the model is unchanged"
            )
        self.rebuilds_ += 1
        Z = self._kept.rows[rest].astype(np.float64)
        return rebuilt(rls, Z, one_hot(self._kept.y[rest], len(self._labels)))

    def _commit(
        self,
        engines: list[RecursiveRLS],
        keep_cls: np.ndarray,
        class_map: np.ndarray,
        train_counts: np.ndarray,
        seen_counts: np.ndarray,
        keep_val: np.ndarray,
    ) -> None:
        """Assign the new state (nothing here raises on valid input); the validation scores again."""
        labels = [lab for lab, k in zip(self._labels, keep_cls, strict=True) if k]
        val_X, val_y = self._val_X[keep_val], class_map[self._val_y[keep_val]]
        val_S = [] if self.shares_factor else [rls.predict(val_X) for rls in engines]
        self._engines, self._labels = engines, labels
        self._index = {label_key(lab): i for i, lab in enumerate(labels)}
        self._train_counts, self._seen_counts = train_counts, seen_counts
        self._val_X, self._val_y, self._val_age = val_X, val_y, self._val_age[keep_val]
        self._val_S, self._selection = val_S, None
        self._pending_val = Pending.none()


def _first_free(X: np.ndarray, y: np.ndarray, taken: np.ndarray, z: np.ndarray, c: int) -> int:
    """The first row of ``X`` of class ``c``, equal to ``z`` and not taken yet; -1 if none."""
    rows = np.flatnonzero((y == c) & ~taken)
    if rows.size == 0:
        return -1
    equal = np.all(X[rows].astype(np.float64) == z[None, :], axis=1)
    return int(rows[np.argmax(equal)]) if equal.any() else -1
