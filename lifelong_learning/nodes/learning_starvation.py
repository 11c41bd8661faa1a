"""Starved learning: WARN when most samples go unlearned, ERROR if that lasts.

A thin adapter over :class:`~lifelong_learning.dynamics.starvation.StarvationMonitor` (the rule
and why the bound escalates rather than learns are in that module): the answering thread adds
each block's samples offered for learning and the reasons of those not learned; ``/diagnostics``
carries WARN while learning is starved (``starvation_share`` of the last ``starvation_window_s``
of samples not learned) and ERROR once it has been for ``learning_off_max_s``, each with the main
reason and what to do about it (:data:`REMEDIES`); the log says the same when it begins, when
it escalates and when it ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus

from lifelong_learning.dynamics.starvation import Starvation, StarvationMonitor, StarvationSettings

#: what to do, by reason a sample was not learned (the node's reasons; others get the generic one)
REMEDIES = {
    "contact": (
        "something pushes or holds the arm (external_torque shows which joints): take it off. A "
        "payload just grasped is learned once held contact_max_s, if a last-link change explains it "
        "(docs/robot.md#a-load-that-stays-payload-or-push)"
    ),
    "slow load": (
        "a load that built up slowly is held (a person leaning on the arm?): take it off. If it is "
        "part of the robot now and no payload, ~/reset relearns from scratch"
    ),
    "residual outlier": (
        "the model's errors jumped: has the robot changed (a tool, the URDF, the effort units)? "
        "outlier_k sets the test; ~/reset relearns from scratch"
    ),
    "effort beyond limit": "the measured efforts exceed the URDF's limits: check the units, limit_margin",
    "acceleration filter warming up": "the stream keeps restarting the q̈ filter: check the driver's stamps",
    "learning queue full": (
        "learning cannot keep up with the stream: raise learning_period_s, lower learn_max_hz or n_features"
    ),
    "model replaced before learning": "models are swapped in faster than they learn: check who sends them",
}
GENERIC_REMEDY = "see docs/diagnostics.md"


class LearningStarvation:
    """The node's starvation monitor (see the module docstring).

    Args:
        node: the node (logger).
        settings: the rule's (checked).
    """

    def __init__(self, node: Any, settings: StarvationSettings):
        self.node = node
        self.monitor = StarvationMonitor(settings)
        self._lock = threading.Lock()
        self._logged = 0  # the level last logged: 0 none, 1 starved, 2 too long

    def reset(self) -> None:
        """Forget the window (another model, the stream restarted)."""
        with self._lock:
            self.monitor.reset()

    def add(self, t: float, offered: int, not_learned: Iterable[str]) -> None:
        """A block of answered samples (see :meth:`StarvationMonitor.add`); logs a change of state."""
        with self._lock:
            self.monitor.add(t, offered, not_learned)
            level = self.monitor.level
            if level == self._logged:
                return
            status = self.monitor.status()
        log, self._logged = self.node.get_logger(), level
        if level == 0:
            log.info("learning is no longer starved")
        elif status is not None and level == 2:  # (one call site per severity: rclpy's rule)
            log.error(self._text(status))
        elif status is not None:
            log.warning(self._text(status))

    def _text(self, status: Starvation) -> str:
        settings = self.monitor.settings
        text = status.describe(settings.window_s)
        if status.too_long:
            text += f", beyond learning_off_max_s {settings.max_off_s:g} s: the model is going stale"
        return f"{text}: {REMEDIES.get(status.main_reason, GENERIC_REMEDY)}"

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        """WARN while starved, ERROR beyond ``learning_off_max_s``."""
        with self._lock:
            status = self.monitor.status()
        if status is None or not status.starved:
            return []
        return [(DiagnosticStatus.ERROR if status.too_long else DiagnosticStatus.WARN, self._text(status))]

    def diagnostic_values(self) -> dict[str, str]:
        """The share not learned over the window, and the starvations so far."""
        with self._lock:
            status, episodes = self.monitor.status(), self.monitor.episodes
        window = self.monitor.settings.window_s
        share = "too few samples" if status is None else f"{100 * status.share:.0f} %"
        return {f"not learned over the last {window:g} s": share, "learning starvations": str(episodes)}
