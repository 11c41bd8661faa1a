"""The ``nystrom_tuner``'s lifelong loop (ROS adapter): it sends itself a retraining goal.

The rule (when, from which bags, the limits) is ROS-free in
:mod:`lifelong_learning.retraining.lifelong_loop`; this module holds the tuner's ``auto_retrain``
parameters and wires the rule to the graph:

- in: the learner's ``~/drift`` (diagnostic_msgs/DiagnosticStatus: WARN raised, OK cleared) and
  ``~/shadow`` (its trials' JSON events), and the recorder's closed files
  (lifelong_learning/BagFileClosed on ``bag_files_topic``);
- out: when a job is due, the learner's serving model saved through its ``~/save_model`` into
  ``output_dir``, then a goal to the tuner's own ``~/tune`` action (the bags, the validation split,
  the serving model), which goes through the same checks, queue, gate, announcement and
  ``tuning_progress`` as anyone's goal; ``{"state": "auto_retrain", ...}`` on ``tuning_progress``
  says why it was sent. The learner puts the announced candidate in shadow (when its
  ``shadow_window_s`` > 0) and swaps it in only if it wins there.

Every callback here runs on the tuner's executor and never waits: the save and the goal are
chained by their futures' callbacks. The loop: ``docs/lifelong-loop.md``.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from lifelong_learning.action import TuneModel
from lifelong_learning.msg import BagFileClosed
from lifelong_learning.nodes.base import ParamSpec
from lifelong_learning.retraining.job import TASKS
from lifelong_learning.retraining.lifelong_loop import Job, LifelongLoop, LoopSettings
from lifelong_learning.srv import SaveModel

LOOP_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "auto_retrain",
        False,
        "The lifelong loop: the tuner sends itself a retraining goal on the learner's drift alarm (or "
        "after retrain_after_bag_files closed bag files), with the newest closed bag files, the "
        "learner's serving model and a validation split; the candidate goes through the gate, then "
        "the learner's shadow evaluation (docs/lifelong-loop.md). Settable at run time.",
        at_run_time=True,
    ),
    ParamSpec(
        "auto_retrain_learner",
        "inverse_dynamics",
        "The learner node the loop watches and retrains: its ~/drift and ~/shadow topics and its "
        "~/save_model service (a relative name resolves in the tuner's namespace).",
    ),
    ParamSpec(
        "auto_retrain_task",
        "inverse-dynamics",
        "The task of the loop's goals ('inverse-dynamics' or 'classification'; only inverse_dynamics "
        "raises drift alarms: classification retrains on retrain_after_bag_files alone).",
    ),
    ParamSpec(
        "bag_files_topic",
        "bag_recorder/file_closed",
        "lifelong_learning/BagFileClosed: the storage files the bag recorder closed, the loop's data.",
    ),
    ParamSpec(
        "retrain_on_drift",
        True,
        "Start a job when the learner raises its drift alarm (and while it stays raised, once per "
        "retrain_min_period_s), on files closed after the alarm.",
        at_run_time=True,
    ),
    ParamSpec(
        "retrain_after_bag_files",
        0,
        "Start a job after this many bag files closed since the last job (0: never on a count).",
        bounds=(0, 100_000),
        at_run_time=True,
    ),
    ParamSpec(
        "retrain_bag_files",
        4,
        "Closed bag files a loop job uses, the newest (on drift: closed after the alarm): the newest "
        "of them is the validation split, the others are trained on.",
        bounds=(2, 1000),
        at_run_time=True,
    ),
    ParamSpec(
        "retrain_min_period_s",
        300.0,
        "Least seconds between the starts of two loop jobs.",
        bounds=(0.0, 7 * 86400.0),
        at_run_time=True,
    ),
)

#: seconds between two looks at whether a job is due
TICK_S = 0.5
#: the learner's events kept for a late-joining tuner (transient local)
EVENTS_DEPTH = 10


def loop_settings(params: dict[str, Any]) -> LoopSettings:
    """The rule's settings from the tuner's parameters (ValueError when out of range)."""
    return LoopSettings(
        on_drift=bool(params["retrain_on_drift"]),
        after_bag_files=int(params["retrain_after_bag_files"]),
        bag_files=int(params["retrain_bag_files"]),
        min_period_s=float(params["retrain_min_period_s"]),
    )


class LifelongLoopMonitor:
    """The tuner's lifelong loop; see the module docstring. ``node``: the NystromTunerNode."""

    def __init__(self, node: Any) -> None:
        self.node = node
        p = node.params
        if p["auto_retrain_task"] not in TASKS:
            task = p["auto_retrain_task"]
            raise ValueError(f"auto_retrain_task must be one of {sorted(TASKS)}, got {task!r}")
        self.loop = LifelongLoop(loop_settings(p))
        learner = str(p["auto_retrain_learner"]).rstrip("/")
        if not learner:
            raise ValueError("auto_retrain_learner is empty: name the learner node the loop retrains")
        self.learner = learner
        self.task_topic = self._task_topic()
        self.jobs: list[dict[str, Any]] = []  # what each loop job was sent with and how it ended
        events = QoSProfile(
            depth=EVENTS_DEPTH,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        files = QoSProfile(
            depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(DiagnosticStatus, f"{learner}/drift", self._on_drift, events)
        node.create_subscription(String, f"{learner}/shadow", self._on_trial, events)
        node.create_subscription(BagFileClosed, str(p["bag_files_topic"]), self._on_file, files)
        group = ReentrantCallbackGroup()
        self.save_client = node.create_client(SaveModel, f"{learner}/save_model", callback_group=group)
        self.action = ActionClient(node, TuneModel, "~/tune", callback_group=group)
        node.create_timer(TICK_S, self._tick)

    # ------------------------------------------------------------------ inputs
    def _on_drift(self, msg: DiagnosticStatus) -> None:
        if msg.level not in (DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR):
            self.node.reject("unreadable drift status", f"level {msg.level!r} (STALE or unknown): ignored")
            return
        raised = msg.level != DiagnosticStatus.OK  # WARN, or ERROR from another publisher
        by_swap = any(kv.key == "cleared_by" and kv.value == "swap" for kv in msg.values)
        self.loop.drift(raised, self.now(), msg.message, act=self.on, by_swap=by_swap)
        if self.on:
            what = "raised" if raised else "cleared"
            self.node.get_logger().info(f"lifelong loop: drift {what}: {msg.message}")

    def _on_trial(self, msg: String) -> None:
        try:
            event = json.loads(msg.data)
        except ValueError:
            self.node.reject("unreadable shadow event", msg.data[:200])
            return
        if isinstance(event, dict):
            self.loop.trial_event(event, self.now())

    def _on_file(self, msg: BagFileClosed) -> None:
        path = msg.closed_file
        if not path.startswith("/"):
            self.node.reject("bag file not absolute", f"{path!r} from {msg.node_name}: ignored by the loop")
            return
        stamp, topic = msg.header.stamp, self.task_topic
        usable = not topic or topic in msg.topics
        self.loop.file_closed(path, stamp.sec + 1e-9 * stamp.nanosec, usable)

    def _task_topic(self) -> str:
        """The bag topic the loop's goals read ('' = any): the tuner's default for the task
        (read-only parameters: resolved once, at start)."""
        p = self.node.params
        name = (
            p["joint_states_topic"]
            if p["auto_retrain_task"] == "inverse-dynamics"
            else p["labeled_features_topic"]
        )
        if not name:
            return ""
        try:
            return self.node.resolve_topic_name(name)
        except Exception as exc:  # rclpy's RCLError for an invalid name: the goals would fail on it too
            self.node.get_logger().warning(
                f"lifelong loop: bag topic {name!r} is no valid name ({exc}): files not filtered"
            )
            return ""

    def now(self) -> float:
        """The loop's clock: the node's (it stamps the recorder's files too), in seconds."""
        return self.node.get_clock().now().nanoseconds * 1e-9

    @property
    def on(self) -> bool:
        return bool(self.node.params["auto_retrain"])

    def apply_parameter(self, name: str) -> None:
        """A parameter of :data:`LOOP_PARAMS` changed (its range checked by the node)."""
        if name.startswith("retrain_"):
            self.loop.settings = loop_settings(self.node.params)

    # ------------------------------------------------------------------ a job
    def _tick(self) -> None:
        if not self.on or self.node.stopping_now:
            return
        now = self.now()
        job = self.loop.next_job(now)
        if job is None:
            return
        self.loop.job_started(job, now)
        record: dict[str, Any] = {**job.as_dict(), "started": time.time()}
        self.jobs.append(record)
        self.node.get_logger().info(f"lifelong loop: retraining ({job.reason}), {len(job.bags)} bag files")
        if not self.save_client.service_is_ready():
            self._send(job, record, "", f"{self.learner}/save_model is not available")
            return
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        path = self.node.output_dir / f"serving-{self.learner.rsplit('/', 1)[-1]}-{stamp}.llm"
        future = self.save_client.call_async(SaveModel.Request(path=str(path)))
        future.add_done_callback(lambda f: self._saved(f, job, record, str(path)))

    def _saved(self, future: Any, job: Job, record: dict[str, Any], path: str) -> None:
        try:
            answer = future.result()
            ok, why = bool(answer.success), str(answer.message)
        except Exception as exc:  # the service went away meanwhile
            ok, why = False, f"{type(exc).__name__}: {exc}"
        self._send(job, record, path if ok else "", "" if ok else why)

    def _send(self, job: Job, record: dict[str, Any], serving: str, why_none: str) -> None:
        """The goal to the tuner's own ~/tune (``serving``: the saved serving model, or '')."""
        if not serving:
            self.node.get_logger().warning(
                f"lifelong loop: no serving model for the gate ({why_none}); the candidate is compared "
                "with the URDF alone, then judged in shadow"
            )
        record["serving_model"] = serving
        goal = TuneModel.Goal(
            bags=list(job.bags),
            validation_bags=list(job.validation_bags),
            task=str(self.node.params["auto_retrain_task"]),
            serving_model=serving,
        )
        self.node.publish_progress({"state": "auto_retrain", **job.as_dict(), "serving_model": serving})
        try:
            future = self.action.send_goal_async(goal)
        except Exception as exc:  # the node is going down
            self._ended(record, f"not sent: {type(exc).__name__}: {exc}")
            return
        future.add_done_callback(lambda f: self._answered(f, record))

    def _answered(self, future: Any, record: dict[str, Any]) -> None:
        try:
            handle = future.result()
        except Exception as exc:
            self._ended(record, f"not sent: {type(exc).__name__}: {exc}")
            return
        if not handle.accepted:
            self._ended(record, f"rejected: {self.node.last_rejected_goal}")
            return
        handle.get_result_async().add_done_callback(lambda f: self._finished(f, record))

    def _finished(self, future: Any, record: dict[str, Any]) -> None:
        try:
            result = future.result().result
        except Exception as exc:
            self._ended(record, f"failed: {type(exc).__name__}: {exc}")
            return
        record.update(candidate=result.out_path, candidate_error=result.candidate_error,
                      serving_error=result.serving_error, promoted=bool(result.promoted))  # fmt: skip
        self._ended(record, result.message if result.success else f"failed: {result.message}")

    def _ended(self, record: dict[str, Any], outcome: str) -> None:
        record["outcome"] = outcome
        self.loop.job_ended(outcome)
        self.node.get_logger().info(f"lifelong loop: job {outcome}")

    # ------------------------------------------------------------------ diagnostics
    def diagnostic_values(self) -> dict[str, str]:
        loop = self.loop
        state = (
            "off (auto_retrain false)" if not self.on
            else f"job running: {loop.running.reason}" if loop.running is not None
            else f"waiting: {loop.waiting(self.now()) or 'a job starts'}"
        )  # fmt: skip
        return {
            "lifelong loop": state,
            "lifelong loop jobs": str(loop.jobs_started),
            "lifelong loop last job": loop.last_outcome,
            "bag files closed (seen)": f"{loop.files_closed} ({loop.files_skipped} without the task's topic)",
        }
