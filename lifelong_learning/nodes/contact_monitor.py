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

The samples not learned during a contact or a slow load (:mod:`~lifelong_learning.nodes.slow_load_monitor`:
a load that builds up too slowly for the thresholds) are **held back** (their states and torques,
at most :data:`HELD_BACK_SAMPLES`), and their residuals fitted by a change of the last link's
inertial parameters (:mod:`~lifelong_learning.dynamics.payload`). When the hold outlasts
``contact_max_s`` the fit is judged (then every :data:`VERDICT_PERIOD_S` of stamps while it
lasts): when a payload explains the load on every joint (a payload grasped, a tool mounted) and
``contact_relearn`` is on, the load is the new steady state: the held samples are learned after
all, so the model learns the new dynamics from the moment they began, not ``contact_max_s`` later,
and thresholds and reference are taken anew. Otherwise the load stays held, not learned (a person
leaning on the arm, a tool resting on a fixture), and ``/diagnostics`` says why, until it goes
away. When a hold ends, its samples are dropped. (Measured in the demo, where a 1 kg payload grasp
is flagged as a contact of more than 10 s: without the held-back samples the online model's
evaluation nMSE was 0.104 with detection on against 0.049 with it off.)
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
from lifelong_learning.dynamics.payload import PayloadFit, PayloadVerdict
from lifelong_learning.dynamics.regressor import RigidBodyRegressor
from lifelong_learning.dynamics.semiparametric import PreparedSamples
from lifelong_learning.dynamics.slow_load import SlowLoadSettings
from lifelong_learning.nodes.slow_load_monitor import SlowLoadMonitor

#: the values of ``contact_estimator``
ESTIMATORS = ("learned_residual", "momentum_observer", "learned_observer")
#: the most samples held back during one contact (the oldest go first): 20 s of a stream learned at
#: 1 kHz, 4.5 MB of states and torques for 7 joints
HELD_BACK_SAMPLES = 20_000
#: stamp seconds between two verdicts on a load held beyond ``contact_max_s``
VERDICT_PERIOD_S = 1.0


class EstimatorSamples(NamedTuple):
    """Answered samples with effort, for the contact estimators (one row per sample)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    qdd: np.ndarray


class HeldBack(NamedTuple):
    """Samples held back during a load: joint states and measured torques, one row each."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray


class Detection(NamedTuple):
    """Per answered row: may be learned, in contact (published), held for a slow load only."""

    free: np.ndarray
    touching: np.ndarray
    slow: np.ndarray


class ContactMonitor:
    """The node's contact detection: publishers, the detector of the node's joints, counts.

    Args:
        node: the node (publishers, logger, model lock).
        settings: the detector's (checked).
        external_topic, contact_topic: the outputs.
        estimator, gain: ``contact_estimator`` and ``momentum_observer_gain``.
        slow: the slow-load detector's settings (None or ``min_torque`` 0: off).
        payload_fraction: the share of a held load a payload must explain (``contact_payload_share``).
    """

    def __init__(
        self,
        node: Any,
        settings: ContactSettings,
        external_topic: str,
        contact_topic: str,
        estimator: str = "learned_residual",
        gain: float = 25.0,
        slow: SlowLoadSettings | None = None,
        payload_fraction: float = 0.9,
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
        self.slow = (
            SlowLoadMonitor(node, slow, node.model_lock) if slow is not None and slow.enabled else None
        )
        self.payload_fraction = float(payload_fraction)
        self.fit: PayloadFit | None = None
        self.regressor: RigidBodyRegressor | None = None
        self.names: list[str] = []
        self._too_long_published = self._learned_published = 0
        self._held: deque[HeldBack] = deque()
        self._held_n = 0
        self._hold_t: tuple[float, float] | None = None  # stamps of the first and last sample held
        self.verdict: PayloadVerdict | None = None  # of the load held now, once beyond contact_max_s
        self._verdict_at = -np.inf
        self.learned_after = 0  # held-back samples learned after all, cumulative
        self.loads_learned = self.loads_refused = 0  # held loads a payload explained, and did not

    def take_joints(self, names: Sequence[str], effort_limits: Any, regressor: RigidBodyRegressor) -> None:
        """A fresh detector (and observer) for the node's joints, ``regressor`` the URDF's model of
        them (ValueError: the settings refused for their limits)."""
        self.detector = ContactDetector(len(names), self.settings, effort_limits)
        self.names = list(names)
        self.regressor, self.fit = regressor, PayloadFit(regressor)
        if self.slow is not None:
            self.slow.take_joints(self.names)
        if self.estimator != "learned_residual":
            self.observer = MomentumObserver(regressor, self.gain)
        self._drop_held()

    def reset(self) -> None:
        """Forget the thresholds, the reference and any contact (another model serves, the stream
        restarted)."""
        if self.detector is not None:
            self.detector.reset()
        if self.slow is not None:
            self.slow.reset()
        if self.observer is not None:
            self.observer.reset()
        self._drop_held()

    def restart_thresholds(self) -> None:
        """Take the thresholds and the reference anew (a warm-up) once the held-back samples are
        learned: learned at once, they change the model's residuals on every joint, and thresholds
        of the model before would flag the change as a contact (the caller holds the model lock)."""
        if self.detector is not None:
            self.detector.reset()
        if self.slow is not None:
            self.slow.reset()

    @property
    def holding(self) -> bool:
        """A load is held now: a contact or a slow load (model lock held)."""
        in_contact = self.detector is not None and self.detector.in_contact
        return in_contact or (self.slow is not None and self.slow.holding)

    def hold_back(self, samples: PreparedSamples, tau: np.ndarray, stamps: np.ndarray) -> None:
        """Keep samples not learned for a load, in case it becomes the new steady state, and fit
        their residuals (``tau`` − the answer) by a payload (model lock held)."""
        self._held.append(HeldBack(samples.q, samples.qd, samples.qdd, tau))
        self._held_n += tau.shape[0]
        while self._held_n - self._held[0].tau.shape[0] >= HELD_BACK_SAMPLES:
            self._held_n -= self._held.popleft().tau.shape[0]
        first = float(stamps[0]) if self._hold_t is None else self._hold_t[0]
        self._hold_t = (first, float(stamps[-1]))
        if self.fit is not None and self.regressor is not None:
            columns = samples.columns
            if columns is None:  # (nonparametric mode: the regressor for the held samples only)
                columns = self.regressor.regressor(samples.q, samples.qd, samples.qdd)
            self.fit.add(columns, tau - samples.torque)

    def release(self) -> HeldBack | None:
        """After a block: the samples held back for a load just taken as the new steady state (to
        be learned, oldest first); None otherwise, and those held for a load that has ended (or
        never began: pending samples, the hold after a contact) are dropped (model lock held)."""
        if not self.holding:
            self._drop_held()
            return None
        if self._hold_t is None or self._hold_t[1] - self._hold_t[0] < self.settings.max_s:
            return None
        now = self._hold_t[1]
        if now < self._verdict_at or self.fit is None or self.detector is None:
            return None
        self._verdict_at = now + VERDICT_PERIOD_S
        scale = self.detector.scale  # (robust: the window still holds the young model's errors)
        own = np.zeros(len(self.names)) if scale is None else scale
        verdict = self.fit.verdict(own, self._smallest_load(), self.payload_fraction)
        first = self.verdict is None or not self.verdict.decided
        changed = first or verdict.explained != self.verdict.explained
        self.verdict = verdict
        if not (verdict.explained and self.settings.relearn):
            if changed and verdict.decided:
                self.loads_refused += first
                then = "" if self.settings.relearn else " (contact_relearn is off)"
                self.node.get_logger().warning(
                    f"load held {now - self._hold_t[0]:.1f} s, not learned{then}: "
                    f"{verdict.describe(self.names)}"
                )
            return None
        self.node.get_logger().warning(
            f"load held {now - self._hold_t[0]:.1f} s taken as the new steady state: "
            f"{verdict.describe(self.names)}; its {self._held_n} held samples are learned"
        )
        held = HeldBack(*(np.concatenate(column) for column in zip(*self._held, strict=True)))
        self.learned_after += held.tau.shape[0]
        self.loads_learned += 1
        self.detector.accept(now)
        if self.slow is not None:
            self.slow.reset()
        self._drop_held()
        return held

    def _smallest_load(self) -> np.ndarray:
        """The smallest load held per joint: the slow detector's thresholds (its floor when off)."""
        threshold = None if self.slow is None else self.slow.threshold
        return np.full(len(self.names), SlowLoadSettings().min_torque) if threshold is None else threshold

    def _drop_held(self) -> None:
        self._held.clear()
        self._held_n, self._hold_t, self.verdict, self._verdict_at = 0, None, None, -np.inf
        if self.fit is not None:
            self.fit.reset()

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

    def detect(self, rows: Sequence[Any], predicted: np.ndarray, regressor: RigidBodyRegressor) -> Detection:
        """Detection on a block of answered joint states (the node's admitted rows: ``msg``, ``q``,
        ``qd``, ``tau`` (None: no effort, not judged), ``admitted.qdd``, ``admitted.not_learned``) and
        the torques answered for them: publishes ``external_torque`` and ``contact``; per row,
        whether it may be learned, whether it is in contact, whether only a slow load holds it.
        The caller holds the model lock."""
        n = len(rows)
        free, touching, slow = np.ones(n, dtype=bool), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        with_effort = [k for k, row in enumerate(rows) if row.tau is not None]
        if not with_effort:
            return Detection(free, touching, slow)
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
                return Detection(free, touching, slow)
        # (a q̈ from the filter's partial window makes a residual of M Δq̈: not judged)
        judged = np.array([rows[k].admitted.not_learned != WARMING_UP for k in with_effort])
        held = self.slow is not None and self.slow.holding
        learn, contact = self.update(msgs, stamps, external, judged, held)
        free[with_effort], touching[with_effort] = learn & (not held), contact | held
        slow[with_effort] = learn & held
        self.node.stats.timed("contact", (time.perf_counter() - t0) / len(with_effort))  # per sample
        return Detection(free, touching, slow)

    def update(
        self,
        msgs: Sequence[JointState],
        stamps: np.ndarray,
        external: np.ndarray,
        judged: np.ndarray,
        slow_load: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Detect on the block's ``external`` torques (rows: ``msgs``, stamps in s; ``judged``: see
        :meth:`ContactDetector.update_block`), publish, log; per row, whether the contact detector
        lets it be learned and whether it is in contact. While a slow load is held (``slow_load``)
        the residuals do not enter the thresholds' window, and every flag published is true. The
        caller holds the model lock."""
        detector = self.detector
        if detector is None:
            return np.ones(len(msgs), dtype=bool), np.zeros(len(msgs), dtype=bool)
        record = np.zeros(len(msgs), dtype=bool) if slow_load else None
        block = detector.update_block(stamps, external, judged, record)
        if self.external_pub.get_subscription_count() > 0:
            for msg, torque in zip(msgs, external, strict=True):
                self.external_pub.publish(
                    JointState(header=msg.header, name=self.names, effort=torque.tolist())
                )
        if self.contact_pub.get_subscription_count() > 0:
            for flag in (block.contact | slow_load).tolist():
                self.contact_pub.publish(Bool(data=flag))
        for event in block.events:
            log = self.node.get_logger()
            text = event.describe(self.names)
            if event.kind == TOO_LONG:
                then = "judged as a payload while it lasts" if self.settings.relearn else "not learned"
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
            "held loads a payload explained (learned)": str(self.loads_learned),
            "held loads no payload explained (not learned)": str(self.loads_refused),
            "contact samples learned as a new steady state": str(self.learned_after),
        }
        if self._hold_t is not None:
            values["load held [s]"] = f"{self._hold_t[1] - self._hold_t[0]:.1f}"
        if self.verdict is not None:
            values["held load"] = self.verdict.describe(self.names)
        if detector.threshold is not None:
            values["contact thresholds [N m]"] = ", ".join(f"{x:.3g}" for x in detector.threshold)
        if self.slow is not None:
            values.update(self.slow.diagnostic_values())
        return values

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        """WARN while a load held beyond ``contact_max_s`` is not learned (and why), and when a
        contact lasted beyond it or a held load was learned since the last diagnostics."""
        detector = self.detector
        if detector is None:
            return []
        problems = []
        new = detector.too_long - self._too_long_published
        learned = self.loads_learned - self._learned_published
        self._too_long_published, self._learned_published = detector.too_long, self.loads_learned
        if self.verdict is not None and self._hold_t is not None:
            held = self._hold_t[1] - self._hold_t[0]
            why = self.verdict.describe(self.names) if self.settings.relearn else "contact_relearn is off"
            problems.append((DiagnosticStatus.WARN, f"load held {held:.0f} s, nothing of it learned: {why}"))
        elif new > 0:
            problems.append((DiagnosticStatus.WARN, f"{new} contact(s) lasted beyond contact_max_s"))
        if learned > 0:
            problems.append(
                (
                    DiagnosticStatus.WARN,
                    f"{learned} held load(s) learned as a new steady state: a payload explained it",
                )
            )
        return problems
