"""Slow loads in the ``inverse_dynamics`` node: the reference model and its detector, on the learning thread.

A thin adapter over :class:`~lifelong_learning.dynamics.slow_load.SlowLoadDetector` (the rule,
its settings and why are in that module): the learning thread judges the samples of each block
(those it learns, and those the answering thread held for a slow load, so that a hold can end)
against a frozen copy of the serving model, at most :data:`JUDGE_HZ` of them per second of
stamps, together once they span :data:`JUDGE_EVERY_S`; it freezes the model again when the
detector asks, right after a block was learned. A model that starts from nothing (a fresh node,
``~/reset``) gets its first reference once it has learned for ``contact_reference_s`` of stamps: a
young model is wrong wherever it has not been yet, and a reference frozen from it takes the robot's
next motions for a load and starves learning (docs/robot.md). Until then a slow load is learned;
contacts are detected from the start. The answering thread reads :attr:`SlowLoadMonitor.holding`:
while it is true the samples are held (not learned, flagged in contact) as for a contact; the
learning thread holds those of a block stamped from a hold's onset on
(:mod:`~lifelong_learning.nodes.learning_queue`).

Judging costs the learning thread one feature map and one triangular solve with the residual's
``d × d`` factor per judged sample (docs/benchmarks/contact.md); the answers pay nothing.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from lifelong_learning.dynamics.semiparametric import (
    FrozenModel,
    PreparedSamples,
    SemiparametricInverseDynamics,
)
from lifelong_learning.dynamics.slow_load import ONSET, SlowLoadDetector, SlowLoadSettings

#: judged samples per second of stamps, at most (a window of 2 s then holds 100: enough for a median)
JUDGE_HZ = 50.0
#: the samples picked are judged together once they span this many seconds of stamps (one call for
#: several learned blocks: at 1 kHz a block holds two or three of them)
JUDGE_EVERY_S = 0.25


class SlowLoadMonitor:
    """The node's slow-load detection (see the module docstring).

    Args:
        node: the node (logger).
        settings: the detector's (checked).
        lock: the model lock (the answering thread reads the state under it).
    """

    def __init__(self, node: Any, settings: SlowLoadSettings, lock: threading.RLock | threading.Lock):
        settings.check()
        self.node, self.settings, self.lock = node, settings, lock
        self.detector: SlowLoadDetector | None = None
        self.names: list[str] = []
        self._model: SemiparametricInverseDynamics | None = None
        self._reference: FrozenModel | None = None
        self._next_judged = -np.inf  # the stamp from which the next sample is judged
        self._picked: list[tuple[np.ndarray, PreparedSamples, np.ndarray]] = []  # not judged yet
        self._learning_from = -np.inf  # the first stamp a young model learned (-inf: not young)

    def take_joints(self, names: list[str]) -> None:
        """A fresh detector for the node's joints (lock held)."""
        self.detector = SlowLoadDetector(len(names), self.settings)
        self.names = list(names)
        self._reference = self._model = None

    def reset(self) -> None:
        """Forget the reference and any hold (a new model, a load taken as the new steady state;
        lock held): a new reference is frozen after the next block learned."""
        if self.detector is not None:
            self.detector.reset()
        self._reference = self._model = None
        self._next_judged = -np.inf
        self._picked = []

    @property
    def holding(self) -> bool:
        """A slow load is held (read under the lock)."""
        return self.detector is not None and self.detector.holding

    @property
    def threshold(self) -> np.ndarray | None:
        """The smallest load held per joint now (None before the joints are known)."""
        return None if self.detector is None else self.detector.threshold

    def _thinned(self, t: np.ndarray) -> np.ndarray:
        """Rows of stamps ``t`` to judge: one per ``1 / JUDGE_HZ`` of stamps (anew after a step back)."""
        keep = np.zeros(t.size, dtype=bool)
        for i, stamp in enumerate(t.tolist()):
            if stamp >= self._next_judged or stamp < self._next_judged - 2.0 / JUDGE_HZ:
                keep[i] = True
                self._next_judged = stamp + 1.0 / JUDGE_HZ
        return keep

    def judge(
        self,
        model: SemiparametricInverseDynamics,
        items: list[tuple[np.ndarray, PreparedSamples, np.ndarray]],
    ) -> float | None:
        """Judge a block's samples of ``model`` before it learns them (learning thread): ``items``
        of stamps, prepared samples and measured torques, taken in stamp order; logs onsets and
        ends of holds. The stamp a slow load is held from (None: none is held)."""
        with self.lock:
            detector, reference = self.detector, self._reference
            if detector is None or model is not self._model or reference is None:
                return None
            since = detector.held_since
        if not items:
            return since
        t0 = time.perf_counter()
        t = np.concatenate([stamps for stamps, _, _ in items])
        order = np.argsort(t, kind="stable")
        keep = np.zeros(t.size, dtype=bool)
        keep[order] = self._thinned(t[order])  # the judged rows, in the items' order
        if not keep.any():
            return since
        picks, start = self._picked, 0
        for stamps, prepared, torques in items:  # (only the judged rows of each are copied)
            mine = np.flatnonzero(keep[start : start + stamps.size])
            start += stamps.size
            if mine.size:
                picks.append((stamps[mine], prepared.take(mine.tolist()), torques[mine]))
        t = np.concatenate([stamps for stamps, _, _ in picks])
        if t.max() - t.min() < JUDGE_EVERY_S:
            return since  # (judged with the next blocks')
        self._picked = []
        order = np.argsort(t, kind="stable")
        judged = PreparedSamples.stack([prepared for _, prepared, _ in picks]).take(order.tolist())
        tau = np.concatenate([torques for _, _, torques in picks])[order]
        predicted, leverage = model.predict_frozen(reference, judged)
        with self.lock:
            if detector is not self.detector or reference is not self._reference:
                return None  # reset meanwhile (a payload taken, another model)
            events = detector.update(t[order], tau - predicted, leverage)
            since = detector.held_since
        self.node.stats.timed("slow load judge", time.perf_counter() - t0)  # per call
        log = self.node.get_logger()
        for event in events:
            text = event.describe(self.names)
            if event.kind == ONSET:
                log.warning(f"{text}: held, not learned, until it ends or a payload explains it")
            else:
                log.info(text)
        return since

    def after_learning(
        self, model: SemiparametricInverseDynamics, prepared: PreparedSamples, stamps: list[np.ndarray]
    ) -> None:
        """After ``model`` learned a block (``prepared``; ``stamps`` of those of its samples that have
        them): freeze it as the reference when the detector asks (learning thread)."""
        with self.lock:
            detector = self.detector
            if detector is None:
                return
            if not stamps:
                return
            if model is not self._model:  # another model serves: its own reference, from scratch
                detector.reset()
                self._model, self._reference, self._picked = model, None, []
                # a model that learned nothing before this block is young (fresh, or reset); one
                # loaded or restored has learned before
                young = model.n_samples <= len(prepared.tau_parametric)
                self._learning_from = float(min(t.min() for t in stamps)) if young else -np.inf
            if detector.wants_reference is None:
                return
            if (
                detector.wants_reference == "first"
                and float(max(t.max() for t in stamps)) - self._learning_from < self.settings.reference_s
            ):
                return  # a young model's first reference_s: where it has not been yet it is wrong
        t0 = time.perf_counter()
        frozen = model.freeze()  # (the learning thread is the only one that changes the model)
        _, leverage = model.predict_frozen(frozen, prepared)
        self.node.stats.timed("slow load reference", time.perf_counter() - t0)
        with self.lock:
            if detector is self.detector and model is self._model:
                self._reference = frozen
                detector.reference_taken(float(max(t.max() for t in stamps)), leverage)

    def diagnostic_values(self) -> dict[str, str]:
        """The state, holds, references and the last window's medians."""
        detector = self.detector
        if detector is None:
            return {}
        values = {
            "slow load": detector.state,
            "slow loads held": str(detector.holds),
            "slow load references taken": f"{detector.references} ({detector.retakes} on trial failed)",
        }
        if self._reference is not None:
            values["slow load against the reference [N m]"] = ", ".join(f"{x:+.2f}" for x in detector.load)
        return values
