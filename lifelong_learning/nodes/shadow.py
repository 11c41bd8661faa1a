"""Shadow evaluation, canary and drift alarm of a learner node (ROS adapter): ``inverse_dynamics``
and ``object_recognition``.

The numerics and the rules are ROS-free (:mod:`lifelong_learning.serving.shadow`); this module holds
the nodes' parameters for them, the one trial that runs at a time, the ``~/shadow`` and ``~/drift``
topics and the diagnostics. Everything a trial does runs where the node learns, right after the
serving model learned (``inverse_dynamics``: its learning thread, a block at a time;
``object_recognition``: its ``labeled_features`` callback, a sample at a time): the answering path
never predicts with a model in a trial. What differs between the learners is in the *ops* given to
:class:`ShadowMonitor`: ``predict``, ``learn`` and ``scores(model)`` (the scorer of
:mod:`~lifelong_learning.serving.shadow`; ``inverse_dynamics``' is :class:`PreparedOps`,
``object_recognition``'s is in :mod:`lifelong_learning.nodes.recognition_shadow`).

- A model received for hot reload (``model_topic``, ``model_data_topic``, ``~/load_model``) while
  ``shadow_window_s`` > 0 is read and checked (another robot, another joint order: refused as any
  reload, counted) and runs in shadow; promoted (swapped in through
  :meth:`~lifelong_learning.serving.ServingCore.replace`, the serving model kept for ``~/rollback``)
  or dropped at the end of its window.
- After a swap (a promotion, or an immediate swap with ``shadow_window_s`` 0), with
  ``canary_window_s`` > 0, the replaced model runs in shadow of the new one; if it is better by the
  margin, the node calls :meth:`~lifelong_learning.serving.ServingCore.rollback` by itself.
- ``drift_factor`` > 0: the live error of ``~/learning_metrics`` against its level after warm-up.

The design: ``docs/serving.md#shadow-evaluation-canary-and-drift-alarm``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from lifelong_learning.nodes.base import ParamSpec
from lifelong_learning.serving import Outcome
from lifelong_learning.serving.shadow import (
    CANARY,
    ENDED,
    FAILED,
    ROLLED_BACK,
    SHADOW,
    DriftAlarm,
    ShadowSlot,
    Trial,
    Verdict,
    check_drift,
    check_settings,
)


def shadow_params(window_s: float, canary_s: float) -> tuple[ParamSpec, ...]:
    """The parameters of shadow evaluation, canary and drift alarm, with a learner's default windows
    (on by default: a received model reaches the answers only after winning on live data)."""
    return (
        ParamSpec(
            "shadow_window_s",
            window_s,
            "Seconds a model received for hot reload (model_topic, model_data_topic, ~/load_model) runs "
            "in shadow of the serving model on the live stream (both predict each sample before learning "
            "it, both learn; only the serving model answers) before it is swapped in, only if its "
            "prequential error is below (1 - shadow_margin) x the serving model's; otherwise dropped "
            "(~/shadow, diagnostics). 0: swapped in at once, unjudged (settable at run time).",
            bounds=(0.0, 86400.0),
            at_run_time=True,
            minimum_nonzero=0.5,
        ),
        ParamSpec(
            "shadow_samples",
            0,
            "Scored samples that end a shadow or canary window before its seconds; 0: the seconds alone.",
            bounds=(0, 10_000_000),
            at_run_time=True,
        ),
        ParamSpec(
            "shadow_margin",
            0.05,
            "The relative margin of the shadow and canary rules: a candidate is promoted, and a new model "
            "rolled back, only when the other model's error is below (1 - shadow_margin) x its own.",
            bounds=(0.0, 0.9),
            at_run_time=True,
        ),
        ParamSpec(
            "canary_window_s",
            canary_s,
            "Seconds the replaced model runs in shadow of a model just swapped in (a promotion or an "
            "immediate reload); if the new model is worse by shadow_margin, the node rolls back by itself "
            "(~/rollback's machinery, logged, counted, on ~/shadow). 0: off.",
            bounds=(0.0, 86400.0),
            at_run_time=True,
            minimum_nonzero=0.5,
        ),
        ParamSpec(
            "drift_factor",
            3.0,
            "Drift alarm: when the live prequential error stays above drift_factor x its level at the last "
            "swap (after one metrics_window_s of warm-up) for drift_window_s, diagnostics WARN with the "
            "figures and a diagnostic_msgs/DiagnosticStatus is published on ~/drift. 0: off.",
            bounds=(0.0, 1000.0),
            at_run_time=True,
            minimum_nonzero=1.01,
        ),
        ParamSpec(
            "drift_window_s",
            30.0,
            "Seconds the live error must stay above the drift threshold before the alarm.",
            bounds=(0.1, 86400.0),
            at_run_time=True,
        ),
    )


#: counted rejections (docs/refusals.md)
SHADOW_FAILED = "model in shadow failed"
#: how often the drift alarm reads the live error (seconds)
DRIFT_PERIOD_S = 0.5


class PreparedOps:
    """``inverse_dynamics``: ``predict`` and ``learn`` of a model in a trial on the serving model's
    prepared block: the model's own preparation (its normalization, its features) is computed once
    for both; scored by the mean nMSE over its joints."""

    #: the reference floor of the drift alarm (an nMSE is never exactly 0: none)
    drift_floor = 0.0

    def __init__(self) -> None:
        self._last: tuple[Any, Any, Any] | None = None

    @staticmethod
    def scores(model: Any) -> int:
        return len(model.joint_names)

    def predict(self, model: Any, block: Any) -> Any:
        prepared = model.prepare(block.q, block.qd, block.qdd)
        self._last = (model, block, prepared)
        return prepared.torque

    def learn(self, model: Any, block: Any, tau: Any) -> None:
        last = self._last
        prepared = last[2] if last is not None and last[0] is model and last[1] is block else None
        self._last = None
        if prepared is None:
            prepared = model.prepare(block.q, block.qd, block.qdd)
        model.commit(model.stage(prepared, tau, solve_weights=True))


class ShadowMonitor:
    """The node's trial (shadow or canary) and drift alarm; see the module docstring. ``ops``:
    :class:`PreparedOps` by default (``inverse_dynamics``)."""

    def __init__(self, node: Any, ops: Any = None) -> None:
        self.node = node
        self.slot = ShadowSlot()
        self.ops = ops if ops is not None else PreparedOps()
        self.rollbacks = 0
        self.drift: DriftAlarm | None = None
        self.drift_error = math.nan
        self._drift_read = -math.inf
        self._own_swap = False
        p = node.params
        check_settings(
            float(p["shadow_window_s"]), int(p["shadow_samples"]), float(p["shadow_margin"]),
            float(p["canary_window_s"]),
        )  # fmt: skip
        self._build_drift()
        qos = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.shadow_pub = node.create_publisher(String, "~/shadow", qos)
        self.drift_pub = node.create_publisher(DiagnosticStatus, "~/drift", qos)

    def _build_drift(self) -> None:
        p = self.node.params
        factor, window = float(p["drift_factor"]), float(p["drift_window_s"])
        check_drift(factor, window)
        warmup, floor = float(p["metrics_window_s"]), float(self.ops.drift_floor)
        self.drift = DriftAlarm(factor, window, warmup, floor) if factor > 0 else None

    def apply_parameter(self, name: str) -> None:
        """A parameter of :func:`shadow_params` changed (its range checked by the node)."""
        if name in ("drift_factor", "drift_window_s"):
            self._build_drift()

    # ---------------------------------------------------------------- trials
    @property
    def shadow_on(self) -> bool:
        return float(self.node.params["shadow_window_s"]) > 0

    def _trial(
        self, role: str, model: Any, window_s: float, label: str, key: str | None, catch_up: bool = True
    ) -> Trial:
        p = self.node.params
        return Trial(
            role, model, self.ops.scores(model), time.monotonic(), window_s, int(p["shadow_samples"]),
            float(p["shadow_margin"]), self.ops.predict, self.ops.learn, label, key, catch_up,
        )  # fmt: skip

    def offer(self, path: str | Path, digest: str | None, as_is: bool = False) -> Outcome:
        """A model for hot reload: read and checked (refused as a failed reload), then in shadow;
        ``as_is`` (``~/load_model``'s ``as_is: true``): if promoted, not caught up with the serving
        model (:meth:`LearnerNode.reload`)."""
        serving = self.node.serving
        if serving.closed:
            return serving.failed(f"model reload from {path} refused, previous model kept: {serving.closed}")
        if self.slot.running(digest) is not None and digest is not None:
            return Outcome(True, f"{path} is in shadow already")
        try:
            model, key = serving.read_with_digest(path, digest)
        except (OSError, ValueError) as exc:  # ModelFileError, UnsafePathError, unfit (another robot)
            return serving.failed(f"model reload from {path} refused, previous model kept: {exc}")
        window = float(self.node.params["shadow_window_s"])
        replaced = self.slot.start(self._trial(SHADOW, model, window, str(path), key, not as_is))
        if replaced is not None:
            self._ended(replaced, f"{path} replaces it")
        margin = float(self.node.params["shadow_margin"])
        message = (
            f"{path} runs in shadow of the serving model for {window:g} s; it is swapped in only if its "
            f"prequential error is below {1 - margin:g} x the serving model's (~/shadow)"
        )
        self.node.get_logger().info(message)
        self._publish({"role": SHADOW, "outcome": "started", "model": str(path), "window_s": window})
        return Outcome(True, message)

    def swapped_by_force(self, replaced: Any, path: str | Path) -> None:
        """An immediate swap (shadow off) replaced ``replaced``: it runs in canary if that is on."""
        window = float(self.node.params["canary_window_s"])
        if window > 0 and replaced is not None:
            canary = self._trial(CANARY, replaced, window, f"the model replaced by {path}", None)
            ended = self.slot.start(canary)
            if ended is not None:
                self._ended(ended, f"{path} was swapped in")

    def end(self, why: str) -> None:
        """End the running trial, if any, because of ``why`` (nothing is swapped for it), and give the
        drift alarm a new reference: the model it compared goes (cleanup, shutdown)."""
        trial = self.slot.stop()
        if trial is not None:
            self._ended(trial, why)
        self._rebase_drift(why, "lifecycle")

    def _rebase_drift(self, why: str, by: str) -> None:
        """The drift alarm takes a new reference (a raised alarm is cleared, ``cleared_by`` ``by``)."""
        if self.drift is not None:
            raised = self.drift.raised
            self.drift.rebase(time.monotonic())
            if raised:
                self._publish_drift(DiagnosticStatus.OK, f"drift alarm cleared: {why}", {}, cleared_by=by)

    def swapped(self) -> None:
        """The serving model was swapped (under the model lock): a trial not of this swap compared
        with the old model and ends; the drift alarm takes a new reference."""
        self._rebase_drift("a new serving model", "swap")
        if not self._own_swap:
            trial = self.slot.stop()
            if trial is not None:
                self._ended(trial, "the serving model was replaced")

    def feed(self, serving_model: Any, prepared: Any, tau: Any) -> None:
        """On the learning thread, after ``serving_model`` learned ``prepared`` (answered with
        ``prepared.torque``): :meth:`feed_sample`."""
        self.feed_sample(serving_model, prepared, tau, prepared.torque)

    def feed_sample(self, serving_model: Any, block: Any, truth: Any, answered: Any) -> None:
        """Where the node learns, after ``serving_model`` learned ``block`` (of true ``truth``; it had
        predicted ``answered`` before): the trial's model predicts then learns it; a verdict is
        acted on; the drift alarm reads the live error."""
        self._in_trial(serving_model, lambda trial: trial.feed(time.monotonic(), block, truth, answered))
        self._check_drift()

    def feed_unscored(self, serving_model: Any, block: Any, truth: Any) -> None:
        """Where the node learns a sample it does not score (a pasted copy) after ``serving_model``
        learned it: the trial's model learns it too, unscored (:meth:`Trial.learn`)."""
        self._in_trial(serving_model, lambda trial: trial.learn(block, truth))

    def _in_trial(self, serving_model: Any, step: Callable[[Trial], Verdict | None]) -> None:
        """``step`` on the running trial, if any, while ``serving_model`` still serves; a verdict it
        gives is acted on."""
        trial = self.slot.running()
        if trial is None:
            return
        with self.node.model_lock:
            current = self.node.serving.model is serving_model
        verdict = step(trial) if current else None
        if verdict is not None and self.slot.ended(trial, verdict):
            self._act(trial, verdict, serving_model)

    def _act(self, trial: Trial, verdict: Verdict, serving_model: Any) -> None:
        node, log = self.node, self.node.get_logger()
        if verdict.outcome == FAILED:
            node.reject(SHADOW_FAILED, f"{trial.label}: {verdict.reason}; the serving model is unchanged")
        elif verdict.role == SHADOW and verdict.other_wins:
            # the swap and its canary at once: a cleanup (which ends trials) never comes between them
            with node.serving.replacing():
                self._own_swap = True
                try:
                    note = node.serving.replace(trial.other, "reload", trial.key, catch_up=trial.catch_up)
                except (OSError, ValueError) as exc:  # not kept, refused by the catch-up or closed
                    node.serving.failed(f"{trial.label} won in shadow but was not swapped in: {exc}")
                    refused = {"promoted": False, "reason": f"not swapped in: {exc}"}
                    self._publish({**verdict.as_dict(), **refused})
                    return
                finally:
                    self._own_swap = False
                window = float(node.params["canary_window_s"])
                if window > 0:
                    self.slot.start(self._trial(CANARY, serving_model, window, "the model it replaced", None))
            node.serving.reloaded(trial.label)
            log.info(f"promoted {trial.label} after its shadow window: {verdict.reason}{note}")
        elif verdict.outcome == ROLLED_BACK:
            outcome = node.serving.rollback()
            self.rollbacks += outcome.ok
            log.warning(f"automatic rollback ({verdict.reason}): {outcome.message}")
        elif verdict.role == SHADOW:
            log.warning(f"dropped {trial.label} after its shadow window: {verdict.reason}")
        else:
            log.info(f"canary passed: {verdict.reason}")
        self._publish(verdict.as_dict())

    def _ended(self, trial: Trial, why: str) -> None:
        """``trial`` ended without a verdict: logged and published (outcome ``ended``)."""
        self.node.get_logger().warning(f"{trial.role} of {trial.label} ended without a verdict: {why}")
        self._publish({"role": trial.role, "outcome": ENDED, "model": trial.label, "reason": why})

    def _publish(self, event: dict[str, Any]) -> None:
        self.shadow_pub.publish(String(data=json.dumps(event, sort_keys=True)))

    # ---------------------------------------------------------------- drift
    def _check_drift(self) -> None:
        alarm, now = self.drift, time.monotonic()
        if alarm is None or now - self._drift_read < DRIFT_PERIOD_S:
            return
        self._drift_read = now
        metrics = self.node.metrics
        with metrics.lock:
            if metrics.accumulator is None:
                return
            error = metrics.accumulator.report(metrics.now()).means["model"]
        self.drift_error = error
        raised = alarm.raised
        figures = {"error": error, "reference": alarm.reference, "factor": alarm.factor}
        if alarm.update(now, error):
            text = alarm.describe(error)
            self.node.get_logger().warning(f"drift: {text}")
            self._publish_drift(DiagnosticStatus.WARN, text, figures)
        elif raised and not alarm.raised:
            text = f"drift alarm cleared: live prequential error {error:.4g} back at or below the threshold"
            self.node.get_logger().info(text)
            self._publish_drift(DiagnosticStatus.OK, text, figures, cleared_by="error")

    def _publish_drift(
        self, level: bytes, text: str, figures: dict[str, float], cleared_by: str = ""
    ) -> None:
        """A ``~/drift`` status: WARN when the alarm is raised, OK when it clears (``cleared_by``:
        ``error``, the error fell back; ``swap``, a new serving model)."""
        values = [KeyValue(key=k, value=f"{v:.6g}") for k, v in figures.items()]
        if cleared_by:
            values.append(KeyValue(key="cleared_by", value=cleared_by))
        if self.drift is not None:
            values.append(KeyValue(key="window_s", value=f"{self.drift.window_s:g}"))
        status = DiagnosticStatus(level=level, name=self.node.get_fully_qualified_name(), message=text)
        status.values = values
        self.drift_pub.publish(status)

    # ---------------------------------------------------------------- ~/serving_state
    def fill_state(self, response: Any) -> None:
        """The trial and the drift alarm into a ``ServingState`` response (the tuner's loop asks)."""
        trial = self.slot.running()
        response.trial_running = trial is not None
        if trial is not None:
            response.trial_role, response.trial_model = trial.role, trial.label
            response.trial_window_s, response.trial_samples = float(trial.window_s), int(trial.samples)
        alarm = self.drift
        response.drift_raised = bool(alarm is not None and alarm.raised)
        if response.drift_raised:
            response.drift_message = alarm.describe(self.drift_error)
        response.shadow_window_s = float(self.node.params["shadow_window_s"])

    # ---------------------------------------------------------------- diagnostics
    def diagnostic_values(self) -> dict[str, str]:
        slot = self.slot
        trial = slot.running()
        values = {
            "model in shadow": "none"
            if trial is None
            else f"{trial.role}: {trial.label} ({trial.samples} samples scored)",
            "shadow verdicts": ", ".join(f"{k} {n}" for k, n in sorted(slot.counts.items())) or "none",
            "last shadow verdict": "none"
            if slot.last is None
            else f"{slot.last.outcome}: {slot.last.reason}",
            "automatic rollbacks": str(self.rollbacks),
        }
        alarm = self.drift
        values["drift"] = (
            "off" if alarm is None
            else f"ALARM: {alarm.describe(self.drift_error)}" if alarm.raised
            else f"reference {alarm.reference:.4g} (x{alarm.factor:g}), alarms {alarm.raised_count}"
        )  # fmt: skip
        return values

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        alarm = self.drift
        if alarm is not None and alarm.raised:
            return [(DiagnosticStatus.WARN, f"drift: {alarm.describe(self.drift_error)}")]
        return []
