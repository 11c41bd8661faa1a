"""The demo's shadow window: the retrained dynamics model is judged on the robot.

The tuner's gate promoted the retrained model on a validation bag; inverse_dynamics (started with
``shadow_window_s``) does not serve it yet: it runs in shadow of the online model. The robot then
works for a while with learning on (a trajectory of its own, the payload held): both models predict
every joint state before learning it, and the node swaps the retrained model in only if its
prequential error over the window is below ``(1 − shadow_margin)`` × the online model's. The
node's verdict, as published on ``/inverse_dynamics/shadow``, goes to
``results["dynamics"]["shadow"]`` (``candidate_error``, ``serving_error``, ``samples``,
``promoted``). The rule: docs/serving.md#shadow-evaluation-canary-and-drift-alarm.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from lifelong_learning.sim.panda import PandaSimulation

SHADOW_EVENTS = "/inverse_dynamics/shadow"
#: robot seconds the log holds beyond the shadow window (the verdict comes with the first block after
#: it); the robot stops as soon as the verdict is in
MARGIN_S = 2.0
#: outcomes that end a shadow trial
VERDICTS = ("promoted", "dropped", "failed")


class ShadowEvents:
    """The node's ``~/shadow`` events (JSON), as the demo's driver receives them."""

    def __init__(self, driver: Any) -> None:
        self.lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        latched = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        driver.create_subscription(String, SHADOW_EVENTS, self._on_event, latched)

    def _on_event(self, msg: String) -> None:
        with self.lock:
            self.events.append(json.loads(msg.data))

    def seen(self, outcomes: tuple[str, ...], after: int) -> bool:
        """Whether an event from index ``after`` on has one of ``outcomes``."""
        with self.lock:
            return any(e["outcome"] in outcomes for e in self.events[after:])

    def wait(self, outcomes: tuple[str, ...], after: int, timeout: float) -> dict[str, Any] | None:
        """The first event from index ``after`` on whose outcome is one of ``outcomes`` (≤ ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = next((e for e in self.events[after:] if e["outcome"] in outcomes), None)
            if found is not None:
                return found
            time.sleep(0.05)
        return None

    def count(self) -> int:
        with self.lock:
            return len(self.events)


def shadow_window(
    stage: Any,
    events: ShadowEvents,
    after: int,
    results: dict[str, Any],
    drive_learning: Callable[[dict[str, Any], Callable[[], bool]], None],
    log_every: int,
) -> dict[str, Any]:
    """Drive the robot (learning on) through the shadow window of the model the tuner announced
    (its ``started`` event at or after index ``after``) until the node's verdict;
    ``results["dynamics"]["shadow"]``. ``drive_learning(log, until)`` publishes a simulation log as
    joint states with learning on until ``until()``; ``log_every``: simulation steps per joint state.

    Raises:
        RuntimeError: the model did not enter shadow, or no verdict came.
    """
    cfg = stage.cfg
    if events.wait(("started",), after, 30.0) is None:
        raise RuntimeError("inverse_dynamics did not put the retrained model in shadow (its log says why)")
    stage.say(f"inverse_dynamics: the retrained model runs in shadow for {cfg.shadow_seconds:g} s")
    log = PandaSimulation().run(
        cfg.shadow_seconds + MARGIN_S,
        seed=cfg.seed + 3000,
        log_every=log_every,
        payload_mass=1.0,
        payload_at=0.0,
    )
    drive_learning(log, lambda: events.seen(VERDICTS, after))
    verdict = events.wait(VERDICTS, after, 15.0)
    if verdict is None:
        raise RuntimeError("no shadow verdict from inverse_dynamics after its window")
    shadow = {
        "candidate_error": verdict["candidate_error"],
        "serving_error": verdict["serving_error"],
        "samples": verdict["samples"],
        "promoted": bool(verdict["promoted"]),
        "outcome": verdict["outcome"],
        "reason": verdict["reason"],
        "window_s": cfg.shadow_seconds,
    }
    results["dynamics"]["shadow"] = shadow
    outcome, reason = verdict["outcome"], verdict["reason"]
    stage.say(f"inverse_dynamics: retrained model {outcome} after its shadow window: {reason}")
    return shadow
