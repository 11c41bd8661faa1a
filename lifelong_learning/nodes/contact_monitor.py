"""Contact detection in the ``inverse_dynamics`` node: ``external_torque`` and ``contact`` topics.

A thin adapter over :class:`~lifelong_learning.dynamics.contact.ContactDetector` (the rule, its
settings and references are in that module): for each block of joint states the node answered,
the samples that carry effort give the external torque estimate of ``contact_estimator``:

- ``learned_residual`` (default): ``τ_ext = τ_measured − τ̂``, ``τ̂`` the answer (made before the
  sample is learned);
- ``momentum_observer``: the generalized-momentum observer on the URDF
  (:mod:`~lifelong_learning.dynamics.momentum_observer`, gain ``momentum_observer_gain``; no q̈);
- ``learned_observer``: the observer with the learned model's correction ``τ̂ − RNEA_URDF(q, q̇, q̈)``.

The monitor publishes it (sensor_msgs/JointState, the input's header) and the
contact flag (std_msgs/Bool), logs onsets and offsets with the joints and torques, and says which
samples may be learned (none in contact or within ``contact_hold_s`` after it). A message nobody
subscribes to is not built (a publish costs 50-110 µs on the answering path).

The samples not learned during a contact are **held back** (their states and torques, at most
:data:`HELD_BACK_SAMPLES`): when the contact outlasts ``contact_max_s`` and is taken as the new
steady state (``contact_relearn``: a payload grasped, a tool mounted), they are learned after all,
so the model learns the new dynamics from the moment they began, not ``contact_max_s`` later;
when the contact ends as a contact, they are dropped. (Measured in the demo, where a 1 kg payload
grasp is flagged as a contact of more than 10 s: without this the online model's evaluation nMSE
was 0.104 with detection on against 0.049 with it off.)
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool

from lifelong_learning.dynamics.contact import ONSET, TOO_LONG, ContactDetector, ContactSettings
from lifelong_learning.dynamics.guard import WARMING_UP
from lifelong_learning.dynamics.momentum_observer import MomentumObserver
from lifelong_learning.dynamics.regressor import RigidBodyRegressor

#: the values of ``contact_estimator``
ESTIMATORS = ("learned_residual", "momentum_observer", "learned_observer")
#: the most samples held back during one contact (the oldest go first): 20 s of a stream learned at
#: 1 kHz, 4.5 MB of states and torques for 7 joints
HELD_BACK_SAMPLES = 20_000


class EstimatorSamples(NamedTuple):
    """Answered samples with effort, for the contact estimators (one row per sample)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    qdd: np.ndarray


class HeldBack(NamedTuple):
    """Samples held back during a contact: joint states and measured torques, one row each."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray


class ContactMonitor:
    """The node's contact detection: publishers, the detector of the node's joints, counts.

    Args:
        node: the node (publishers, logger).
        settings: the detector's (checked).
        external_topic, contact_topic: the outputs.
    """

    def __init__(
        self,
        node: Any,
        settings: ContactSettings,
        external_topic: str,
        contact_topic: str,
        estimator: str = "learned_residual",
        gain: float = 25.0,
    ):
        if estimator not in ESTIMATORS:
            raise ValueError(f"contact_estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")
        self.node = node
        self.settings = settings
        self.estimator, self.gain = estimator, float(gain)
        self.observer: MomentumObserver | None = None
        self.external_pub = node.create_overridable_publisher(JointState, external_topic, 100)
        self.contact_pub = node.create_overridable_publisher(Bool, contact_topic, 100)
        self.detector: ContactDetector | None = None
        self.names: list[str] = []
        self._too_long_published = 0
        self._held: deque[HeldBack] = deque()
        self._held_n = 0
        self._relearn = False  # the contact held back for became the steady state (in the last block)
        self.learned_after = 0  # held-back samples learned after all, cumulative

    def take_joints(self, names: Sequence[str], effort_limits: Any, regressor: RigidBodyRegressor) -> None:
        """A fresh detector (and observer) for the node's joints, ``regressor`` the URDF's model of
        them (ValueError: the settings refused for their limits)."""
        self.detector = ContactDetector(len(names), self.settings, effort_limits)
        self.names = list(names)
        if self.estimator != "learned_residual":
            self.observer = MomentumObserver(regressor, self.gain)

    def reset(self) -> None:
        """Forget the thresholds and any contact (another model serves, the stream restarted)."""
        if self.detector is not None:
            self.detector.reset()
        if self.observer is not None:
            self.observer.reset()
        self._drop_held()

    def restart_thresholds(self) -> None:
        """Take the thresholds anew (a warm-up) once the held-back samples are learned: learned at
        once, they change the model's residuals on every joint, and thresholds of the model before
        would flag the change as a contact (the caller holds the model lock)."""
        if self.detector is not None:
            self.detector.reset()

    def hold_back(self, samples: HeldBack) -> None:
        """Keep samples not learned for a contact, in case it becomes the new steady state."""
        self._held.append(samples)
        self._held_n += samples.tau.shape[0]
        while self._held_n - self._held[0].tau.shape[0] >= HELD_BACK_SAMPLES:
            self._held_n -= self._held.popleft().tau.shape[0]

    def release(self) -> HeldBack | None:
        """After a block: the samples held back for a contact just taken as the new steady state
        (to be learned, oldest first); None otherwise, and those held for a contact that has ended
        (or never began: pending samples, the hold after a contact) are dropped."""
        if self._relearn and self._held:
            held = HeldBack(*(np.concatenate(column) for column in zip(*self._held, strict=True)))
            self.learned_after += held.tau.shape[0]
            self._drop_held()
            return held
        if self.detector is None or not self.detector.in_contact or self._relearn:
            self._drop_held()
        return None

    def _drop_held(self) -> None:
        self._held.clear()
        self._held_n, self._relearn = 0, False

    def estimate(self, rows: Any, residual: np.ndarray, regressor: RigidBodyRegressor) -> np.ndarray:
        """The external torques of the answered ``rows`` (``t``, ``q``, ``qd``, ``qdd``, ``tau``
        arrays, one row per sample) for ``contact_estimator``; ``residual`` = measured − predicted.

        Raises:
            ValueError: the observer's gain is too large for the samples' period.
        """
        observer = self.observer
        if observer is None:
            return residual
        out = np.empty_like(residual)
        learned = self.estimator == "learned_observer"
        for i in range(residual.shape[0]):
            correction = None
            if learned:  # δ = τ̂ − RNEA_URDF, τ̂ = τ − residual
                urdf = regressor.rnea(rows.q[i], rows.qd[i], rows.qdd[i])[0]
                correction = rows.tau[i] - residual[i] - urdf
            out[i] = observer.update(rows.t[i], rows.q[i], rows.qd[i], rows.tau[i], correction)
        return out

    def detect(
        self, rows: Sequence[Any], predicted: np.ndarray, regressor: RigidBodyRegressor
    ) -> tuple[np.ndarray, np.ndarray]:
        """Detection on a block of answered joint states (the node's admitted rows: ``msg``, ``q``,
        ``qd``, ``tau`` (None: no effort, not judged), ``admitted.qdd``, ``admitted.not_learned``) and
        the torques answered for them: publishes ``external_torque`` and ``contact``; per row,
        whether it may be learned and whether it is in contact. The caller holds the model lock."""
        free, touching = np.ones(len(rows), dtype=bool), np.zeros(len(rows), dtype=bool)
        with_effort = [k for k, row in enumerate(rows) if row.tau is not None]
        if not with_effort:
            return free, touching
        t0 = time.perf_counter()
        msgs = [rows[k].msg for k in with_effort]
        stamps = np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in msgs])
        external = residual = np.stack([rows[k].tau for k in with_effort]) - predicted[with_effort]
        if self.observer is not None:  # (the states only for an observer: a fast default)
            samples = EstimatorSamples(
                stamps,
                *(np.stack([getattr(rows[k], a) for k in with_effort]) for a in ("q", "qd", "tau")),
                np.stack([rows[k].admitted.qdd for k in with_effort]),
            )
            try:
                external = self.estimate(samples, residual, regressor)
            except ValueError as exc:  # the observer's gain against this stream's period
                self.node.reject("contact estimator", str(exc))
                return free, touching
        # (a q̈ from the filter's partial window makes a residual of M Δq̈: not judged)
        judged = np.array([rows[k].admitted.not_learned != WARMING_UP for k in with_effort])
        free[with_effort], touching[with_effort] = self.update(msgs, stamps, external, judged)
        self.node.stats.timed("contact", (time.perf_counter() - t0) / len(with_effort))  # per sample
        return free, touching

    def update(
        self, msgs: Sequence[JointState], stamps: np.ndarray, external: np.ndarray, judged: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Detect on the block's ``external`` torques (rows: ``msgs``, stamps in s; ``judged``: see
        :meth:`ContactDetector.update_block`), publish, log; per row, whether it may be learned and
        whether it is in contact. The caller holds the model lock."""
        detector = self.detector
        if detector is None:
            return np.ones(len(msgs), dtype=bool), np.zeros(len(msgs), dtype=bool)
        block = detector.update_block(stamps, external, judged)
        if self.external_pub.get_subscription_count() > 0:
            for msg, torque in zip(msgs, external, strict=True):
                self.external_pub.publish(
                    JointState(header=msg.header, name=self.names, effort=torque.tolist())
                )
        if self.contact_pub.get_subscription_count() > 0:
            for flag in block.contact.tolist():
                self.contact_pub.publish(Bool(data=flag))
        for event in block.events:
            log = self.node.get_logger()
            text = event.describe(self.names)
            self._relearn = self._relearn or (event.kind == TOO_LONG and self.settings.relearn)
            if event.kind == TOO_LONG:
                then = (
                    "taken as the new steady state (contact_relearn): its samples are learned"
                    if self.settings.relearn
                    else "not learned"
                )
                log.warning(f"{text}: beyond contact_max_s {self.settings.max_s:g} s, {then}")
            elif event.kind == ONSET:
                log.warning(text)
            else:
                log.info(text)
        return block.learn, block.contact

    def diagnostic_values(self) -> dict[str, str]:
        detector = self.detector
        if detector is None:
            return {"contact": "no joints yet"}
        state = "in contact" if detector.in_contact else "free"
        if detector.threshold is None:
            state = "free (thresholds warming up)"
        values = {
            "contact": state,
            "contacts": str(detector.contacts),
            "samples in contact": str(detector.samples_in_contact),
            "contacts beyond contact_max_s": str(detector.too_long),
            "contact samples learned as a new steady state": str(self.learned_after),
        }
        if detector.threshold is not None:
            values["contact thresholds [N m]"] = ", ".join(f"{x:.3g}" for x in detector.threshold)
        return values

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        """WARN when a contact lasted beyond ``contact_max_s`` since the last diagnostics, or lasts now."""
        detector = self.detector
        if detector is None:
            return []
        new = detector.too_long - self._too_long_published
        self._too_long_published = detector.too_long
        if detector.beyond_max:
            return [(DiagnosticStatus.WARN, "in contact beyond contact_max_s: nothing is learned")]
        if new > 0:
            return [(DiagnosticStatus.WARN, f"{new} contact(s) lasted beyond contact_max_s")]
        return []
