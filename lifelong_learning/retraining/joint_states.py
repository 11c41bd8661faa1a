"""Joint states of the inverse-dynamics job: read a block at a time, filtered, with q̈, into a row store.

:class:`JointStateReader` reads the bags once (:class:`~lifelong_learning.io.bags.JointStateStream`),
keeps the samples within the URDF's limits widened by a margin
(:class:`~lifelong_learning.dynamics.plausibility.PlausibilityGate`), leaves out spikes in q, q̇ or
τ against their neighbours (Hampel, :func:`~lifelong_learning.dynamics.plausibility.local_spikes`)
and velocities inconsistent with the positions, then estimates q̈ by the online node's filter,
restarted at each stretch and continued across blocks, and spills the rows to a temporary file
(:class:`~lifelong_learning.retraining.rows.RowStore`): memory is bounded by the block, not by the
bags. What it produces is a :class:`JointStateLog`.

:func:`flag_outliers` then marks the rows whose rigid-body residuals are beyond ``k`` robust scales
(:func:`~lifelong_learning.dynamics.plausibility.robust_outliers`, the scale from a uniform sample
of the rows, :func:`sampled`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from lifelong_learning.dynamics.acceleration import DEFAULT_WINDOW as ACCELERATION_WINDOW
from lifelong_learning.dynamics.acceleration import estimate_accelerations
from lifelong_learning.dynamics.plausibility import (
    JointLimits,
    PlausibilityGate,
    local_spikes,
    robust_scale,
    velocity_mismatch,
)
from lifelong_learning.io.bags import BagError, JointStateBlock, JointStateStream
from lifelong_learning.retraining.rows import Rows, RowStore

#: rows of context on each side of a batch for the spike and velocity tests (the half window of
#: :func:`~lifelong_learning.dynamics.plausibility.local_spikes`)
HALF_WINDOW = 3


@dataclass
class JointStateLog:
    """What reading the bags produces: the rows kept, in time order, and what was learned about them.

    ``floor``: the smallest robust scale of the residual outlier test per joint (the outlier floor
    times the effort limits); ``sum_qd2``: the sum of q̇² per joint (how much each moves);
    ``skipped``: samples left out per reason (the job adds its own); ``skipped_detail``: the first
    of each reason the stream skipped; ``bag_joints``: the joints each bag's joint states name."""

    store: RowStore
    joint_names: list[str]
    limits: JointLimits
    gate: PlausibilityGate
    floor: np.ndarray
    sum_qd2: np.ndarray
    skipped: dict[str, int]
    skipped_detail: dict[str, str]
    bag_joints: list[Any]
    bags: list[str]


@dataclass
class _Joints:
    """What the first block tells: the joints, their limits and the tests made of them."""

    names: list[str]
    limits: JointLimits
    gate: PlausibilityGate
    floor: np.ndarray
    velocity_floor: np.ndarray


class JointStateReader:
    """Reads a stream of joint states into a :class:`JointStateLog` (see the module docstring).

    Batches of whole blocks of at most ``block`` rows are filtered as one (a log that fits one
    batch is filtered as the whole-log job did). The spike and velocity tests look at neighbours:
    but for the last batch, its last :data:`HALF_WINDOW` rows wait for the next batch, and the rows
    before them go with it as context, so that no window stops at a batch's end (the tests' robust
    scales are per batch)."""

    def __init__(
        self,
        urdf: str,
        block: int,
        limit_margin: float,
        outlier_k: float,
        outlier_floor: float,
        check: Callable[[], None] | None = None,
    ) -> None:
        self.urdf, self.block, self.margin = urdf, int(block), float(limit_margin)
        self.k, self.outlier_floor = float(outlier_k), float(outlier_floor)
        self.check = check
        self.skipped: dict[str, int] = {}
        self.store: RowStore | None = None  # made at the first block, when the joints are known
        self.joints: _Joints | None = None
        self.sum_qd2 = np.zeros(0)
        self._carry: tuple[np.ndarray, np.ndarray, int] | None = None  # q̈ window across batches
        self._last: tuple[Any, Any] = (None, None)  # stretch and bag of the last row stored
        self._held: dict[str, np.ndarray] | None = None  # context and rows not yet decided
        self._n_context = 0
        self._stretch = -1
        self._plausible = 0
        self._gate_counts: dict[str, int] = {}

    def read(self, stream: JointStateStream) -> JointStateLog:
        """Every row of the stream, filtered, with q̈, into the row store (deleted if reading fails)."""
        try:
            self._read(stream)
        except BaseException:
            if self.store is not None:
                self.store.close()
            raise
        assert self.store is not None and self.joints is not None
        for reason, n in stream.skipped.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + n
        return JointStateLog(
            store=self.store,
            joint_names=self.joints.names,
            limits=self.joints.limits,
            gate=self.joints.gate,
            floor=self.joints.floor,
            sum_qd2=self.sum_qd2,
            skipped=self.skipped,
            skipped_detail=dict(stream.skipped.details),
            bag_joints=stream.bag_joints,
            bags=[str(p) for p in stream.paths],
        )

    def _read(self, stream: JointStateStream) -> None:
        batch: list[JointStateBlock] = []
        rows = 0
        for part in stream:
            if batch and rows + part.t.size > self.block:
                self._filter(batch, stream, final=False)
                if self.check is not None:
                    self.check()
                batch, rows = [], 0
            batch.append(part)
            rows += part.t.size
        if batch:  # there is one: a stream that gives nothing raises
            self._filter(batch, stream, final=True)
        if not self._plausible:
            assert self.joints is not None
            raise BagError(
                f"no joint state within the URDF's limits (margin {self.joints.gate.margin:g}): "
                f"{self._gate_counts}"
            )

    def _start(self, names: list[str]) -> None:
        """At the first block: the joints are known, the limits and the store can be made."""
        limits = JointLimits.from_urdf(self.urdf, list(names))
        effort = np.where(np.isfinite(limits.effort), limits.effort, 0.0)
        self.joints = _Joints(
            names=list(names),
            limits=limits,
            gate=PlausibilityGate(limits, self.margin),
            floor=self.outlier_floor * effort,
            velocity_floor=0.01 * np.where(np.isfinite(limits.velocity), limits.velocity, 0.0),
        )
        self.sum_qd2 = np.zeros(len(names))
        self.store = RowStore(len(names), self.block)

    def _filter(self, batch: list[JointStateBlock], stream: JointStateStream, final: bool) -> None:
        """One batch of blocks (at most ``block`` rows): the samples within the URDF's limits
        widened by the margin, then without spikes and velocities inconsistent with the positions,
        then q̈ (continued from the previous batch within a stretch); counted, stored. Before q̈:
        one velocity spike would spoil the accelerations of its neighbours."""
        if self.store is None:
            assert stream.joint_names is not None
            self._start(stream.joint_names)
        rows = self._gated(batch)
        if self._held is not None:
            rows = {k: np.concatenate([self._held[k], rows[k]]) for k in rows}
        n_context, n = self._n_context, rows["t"].size
        decide = n if final else max(n_context, n - HALF_WINDOW)
        bad = self._spikes_and_mismatches(rows, n_context, decide) if np.isfinite(self.k) and n else None
        start = max(0, decide - HALF_WINDOW)  # the context of the rows held back
        self._held = {k: v[start:] for k, v in rows.items()}
        self._n_context = decide - start
        keep = np.zeros(n, dtype=bool)
        keep[n_context:decide] = True if bad is None else ~bad[n_context:decide]
        self._store({k: v[keep] for k, v in rows.items()})

    def _spikes_and_mismatches(self, rows: dict[str, np.ndarray], n_context: int, decide: int) -> np.ndarray:
        """Rows that are spikes against their neighbours or whose velocities do not match their
        positions; those among the rows decided now (``n_context`` to ``decide``) counted."""
        assert self.joints is not None
        starts = changes(rows["stretch"])
        spikes = local_spikes(np.hstack([rows["q"], rows["qd"], rows["tau"]]), starts, k=self.k)
        mismatch = velocity_mismatch(
            rows["t"], rows["q"], rows["qd"], starts, k=self.k, floor=self.joints.velocity_floor
        )
        mismatch &= ~spikes
        for reason, found in (
            ("spike (against its neighbours)", spikes),
            ("velocity inconsistent with the positions", mismatch),
        ):
            count = int(found[n_context:decide].sum())
            if count:
                self.skipped[reason] = self.skipped.get(reason, 0) + count
        return spikes | mismatch

    def _gated(self, batch: list[JointStateBlock]) -> dict[str, np.ndarray]:
        """The rows of the batch within the URDF's limits widened by the margin (counted), with
        their stretch (numbered across batches) and bag."""
        assert self.joints is not None
        names = ("t", "q", "qd", "tau")
        rows = {k: np.concatenate([getattr(p, k) for p in batch]) for k in names}
        rows["stretch"] = np.concatenate(
            [np.full(p.t.size, self._next_stretch(p.new_stretch)) for p in batch]
        )
        rows["bag"] = np.concatenate([np.full(p.t.size, p.bag) for p in batch])
        ok, counts = self.joints.gate.mask(rows["q"], rows["qd"], rows["tau"])
        for reason, n in counts.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + n
            self._gate_counts[reason] = self._gate_counts.get(reason, 0) + n
        self._plausible += int(ok.sum())
        return {k: v[ok] for k, v in rows.items()}

    def _store(self, rows: dict[str, np.ndarray]) -> None:
        """Rows decided and kept: q̈, then into the row store with their stretches and bags."""
        t, qd, stretch, bag = rows["t"], rows["qd"], rows["stretch"], rows["bag"]
        if not t.size:
            return
        assert self.store is not None
        qdd = self._accelerations(t, qd, stretch)
        store = self.store
        store.starts += (store.n + changes(stretch, self._last[0])).tolist()
        new_bag = changes(bag, self._last[1])
        store.bag_starts += (store.n + new_bag).tolist()
        store.bag_of_start += bag[new_bag].tolist()
        self._last = (stretch[-1], bag[-1])
        store.append(t, rows["q"], qd, qdd, rows["tau"])
        self.sum_qd2 += (qd**2).sum(axis=0)

    def _next_stretch(self, new: bool) -> int:
        if new or self._stretch < 0:
            self._stretch += 1
        return self._stretch

    def _accelerations(self, t: np.ndarray, qd: np.ndarray, stretch: np.ndarray) -> np.ndarray:
        """q̈ of the rows by the node's filter, restarted at each stretch and continued from the
        last rows of the previous batch when the first row continues their stretch."""
        carry = self._carry
        n_carry = 0
        if carry is not None and carry[2] == stretch[0]:
            t, qd = np.concatenate([carry[0], t]), np.concatenate([carry[1], qd])
            stretch = np.concatenate([np.full(carry[0].size, carry[2]), stretch])
            n_carry = carry[0].size
        qdd = estimate_accelerations(t, qd, starts=changes(stretch).tolist())[n_carry:]
        last = stretch == stretch[-1]
        keep = np.flatnonzero(last)[-(ACCELERATION_WINDOW - 1) :]
        self._carry = (t[keep], qd[keep], int(stretch[-1]))
        return qdd


def changes(labels: np.ndarray, previous: Any = None) -> np.ndarray:
    """Positions where ``labels`` differ from the label before (the first one: from ``previous``)."""
    before = np.concatenate([[previous], labels[:-1]]) if labels.size else labels
    return np.flatnonzero(labels != before)


def subset(n: int, size: int, seed: Any) -> np.ndarray:
    """Positions of at most ``size`` of ``n`` rows: all, or a uniform random subset (sorted)."""
    if n <= size:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))


def sampled(store: RowStore, a: int, b: int, n: int, kept_only: bool, size: int, seed: Any) -> Iterator[Rows]:
    """The rows of :func:`subset` of the ``n`` rows ``a`` to ``b`` of ``store`` (those kept, with
    ``kept_only``), a block at a time."""
    pick = subset(n, size, seed)
    seen = 0
    for rows in store.blocks(a, b, kept_only):
        lo, hi = np.searchsorted(pick, [seen, seen + len(rows)])
        if hi > lo:
            yield rows.take(pick[lo:hi] - seen)
        seen += len(rows)


def flag_outliers(
    log: JointStateLog, par: Any, a: int, b: int, k: float, part: str, size: int, seed: Any
) -> int:
    """Mark the rows ``a`` to ``b`` whose residuals of the rigid-body model ``par`` are beyond
    ``k`` robust scales (at least the log's floor; the scale from a uniform sample of at most
    ``size`` of the rows) left out; counted in ``log.skipped`` as residual outliers of ``part``."""
    if not np.isfinite(k):
        return 0
    store = log.store
    sample = [r.tau - par.predict(r.q, r.qd, r.qdd) for r in sampled(store, a, b, b - a, False, size, seed)]
    sigma = _robust_sigma(np.vstack(sample), log.floor)
    count = 0
    for rows in store.blocks(a, b):
        out = _beyond(rows.tau - par.predict(rows.q, rows.qd, rows.qdd), sigma, k)
        store.set_left_out(int(rows.index[0]), out)
        count += int(out.sum())
    if count:
        key = f"residual outlier ({part})"
        log.skipped[key] = log.skipped.get(key, 0) + count
    return count


def _robust_sigma(errors: np.ndarray, floor: Any) -> np.ndarray:
    """The scale of :func:`~lifelong_learning.dynamics.plausibility.robust_outliers` of ``errors``
    (of their finite rows; ``inf`` when there is none, so that only non-finite rows are outliers)."""
    finite = np.all(np.isfinite(errors), axis=1)
    if not finite.any():
        return np.full(errors.shape[1], np.inf)
    return np.maximum(robust_scale(errors[finite]), np.broadcast_to(floor, errors.shape[1:]))


def _beyond(errors: np.ndarray, sigma: np.ndarray, k: float) -> np.ndarray:
    """Rows of ``errors`` beyond ``k`` scales ``sigma`` in some column, or not finite (as
    :func:`~lifelong_learning.dynamics.plausibility.robust_outliers`)."""
    finite = np.all(np.isfinite(errors), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(errors) / np.where(sigma > 0, sigma, np.inf)
    return ~finite | np.any(z > k, axis=1)
