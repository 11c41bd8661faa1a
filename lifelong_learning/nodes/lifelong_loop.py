"""The ``nystrom_tuner``'s lifelong loop (ROS adapter): it sends itself retraining goals.

The rule, a state machine (when, from which bags, the limits, what survives a restart), is ROS-free
in :mod:`lifelong_learning.retraining.lifelong_loop`; the files' checks in
:mod:`lifelong_learning.retraining.loop_files`. This module holds the tuner's ``auto_retrain``
parameters and wires one loop per learner of ``auto_retrain_learners`` to the graph:

- in: the learner's own answer to ``~/serving_state`` (lifelong_learning/ServingState: its task,
  drift alarm, trial and model version), asked every :data:`TICK_S`; and the recorder's closed
  files (lifelong_learning/BagFileClosed on ``bag_files_topic``), each checked on disk (inside
  ``bag_directory``, the recorder's by name and metadata, its time range, topics and SHA-256 read
  from the file) on a thread of its own before the loop sees it; a file refused is counted under
  its reason. The learner's ``~/drift`` and ``~/shadow`` topics are not taken: any peer can publish
  on them;
- out: when a job is due, the learner's serving model saved through its ``~/save_model`` into
  ``output_dir``, then a goal to the tuner's own ``~/tune`` action (the bags, the validation split,
  the serving model), which goes through the same checks, queue, gate, announcement and
  ``tuning_progress`` as anyone's goal; ``{"state": "auto_retrain", ...}`` on ``tuning_progress``
  says why it was sent. The learner puts the announced candidate in shadow; the loop sends no goal
  for a learner whose ``shadow_window_s`` is 0 (its candidate would be swapped in unjudged).

Every reply (a service answer, a goal's acceptance and result, a checked file) becomes a typed
event in one queue, taken by the tick on the executor: the loops change on one thread, nothing
waits on an executor thread. The loops' state is written to ``<output_dir>/lifelong_loop-<tuner
name>.json`` (atomically) whenever a job starts or ends or an alarm arrives, and read at start.
The loop: ``docs/lifelong-loop.md``.
"""

from __future__ import annotations

import json
import math
import queue
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from lifelong_learning.action import TuneModel
from lifelong_learning.core.files import aside_path, atomic_write_text, read_regular_text
from lifelong_learning.msg import BagFileClosed
from lifelong_learning.nodes.base import ParamSpec, directory_or_default
from lifelong_learning.retraining.job import TASKS
from lifelong_learning.retraining.lifelong_loop import (
    Job,
    JobEnded,
    LearnerState,
    LifelongLoop,
    LoopSettings,
    Phase,
    Saved,
)
from lifelong_learning.retraining.loop_files import FileFacts, UntrustedFileError, check_closed_file
from lifelong_learning.srv import SaveModel, ServingState

LOOP_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "auto_retrain",
        False,
        "The lifelong loop: the tuner sends itself a retraining goal on a learner's drift alarm (or "
        "after retrain_after_bag_files closed bag files), with the newest closed bag files, the "
        "learner's serving model and a validation split; the candidate goes through the gate, then "
        "the learner's shadow evaluation (docs/lifelong-loop.md). Settable at run time.",
        at_run_time=True,
    ),
    ParamSpec(
        "auto_retrain_learners",
        ["inverse_dynamics"],
        "The learner nodes the loop retrains, one loop each: their ~/serving_state (task, drift "
        "alarm, trial) and ~/save_model (relative names resolve in the tuner's namespace).",
    ),
    ParamSpec(
        "bag_files_topic",
        "bag_recorder/file_closed",
        "lifelong_learning/BagFileClosed: the storage files the bag recorder closed, the loop's data.",
    ),
    ParamSpec(
        "bag_directory",
        "",
        "The bag recorder's bag directory (its 'output' or the directory above it; '' = "
        "$ROS_HOME/lifelong_learning/bags, bag_recorder's default): the loop trains only on files "
        "inside it (links followed), named and listed in metadata.yaml as the recorder writes them.",
    ),
    ParamSpec(
        "retrain_on_drift",
        True,
        "Start a job when the learner raises its drift alarm (and while it stays raised, once per "
        "retrain_min_period_s), on files begun after the alarm.",
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
        "Closed bag files a loop job uses, the newest (on drift: begun after the alarm): the newest "
        "of them is the validation split, the others are trained on.",
        bounds=(2, 1000),
        at_run_time=True,
    ),
    ParamSpec(
        "retrain_min_period_s",
        300.0,
        "Least seconds between the starts of two loop jobs of one learner (kept across restarts).",
        bounds=(0.0, 7 * 86400.0),
        at_run_time=True,
    ),
)

#: seconds between two looks at the learners and at whether a job is due
TICK_S = 0.5
#: seconds a ~/serving_state call may wait for its answer before it is dropped
ANSWER_TIMEOUT_S = 5.0
#: announced files waiting for their check; more are refused (counted) until the checks catch up
MAX_PENDING_CHECKS = 1000
#: paths of announced files remembered (a repeated announcement is not checked again)
MAX_SEEN = 100_000


def loop_settings(params: dict[str, Any]) -> LoopSettings:
    """The rule's settings from the tuner's parameters (ValueError when out of range)."""
    return LoopSettings(
        on_drift=bool(params["retrain_on_drift"]),
        after_bag_files=int(params["retrain_after_bag_files"]),
        bag_files=int(params["retrain_bag_files"]),
        min_period_s=float(params["retrain_min_period_s"]),
    )


# ---------------------------------------------------------------------- the replies, as events
@dataclass(frozen=True)
class _Answer:
    """A learner's ~/serving_state answer (None: no answer)."""

    learner: str
    response: Any


@dataclass(frozen=True)
class _Checked:
    """An announced file checked: its facts, or the refusal."""

    path: str
    facts: FileFacts | None
    refusal: UntrustedFileError | None


@dataclass(frozen=True)
class _Saved:
    learner: str
    saved: Saved


@dataclass(frozen=True)
class _GoalAnswer:
    """The goal's acceptance (``handle``: None when it was not sent or not accepted: ``why``)."""

    learner: str
    handle: Any
    why: str = ""


@dataclass(frozen=True)
class _Result:
    learner: str
    result: Any
    why: str = ""


class _Learner:
    """One learner's loop and its clients."""

    def __init__(self, node: Any, name: str, settings: LoopSettings, group: Any) -> None:
        self.name = name
        self.short = name.rsplit("/", 1)[-1]
        self.loop = LifelongLoop(settings)
        self.task = ""
        self.shadow_window_s = math.nan
        self.state_client = node.create_client(ServingState, f"{name}/serving_state", callback_group=group)
        self.save_client = node.create_client(SaveModel, f"{name}/save_model", callback_group=group)
        self.asking: tuple[Any, float] | None = None  # the state call in flight, when it was made


class LifelongLoopMonitor:
    """The tuner's lifelong loops; see the module docstring. ``node``: the NystromTunerNode."""

    def __init__(self, node: Any) -> None:
        self.node = node
        p = node.params
        names = [str(n).rstrip("/") for n in p["auto_retrain_learners"]]
        if not names or not all(names) or len(set(names)) != len(names):
            raise ValueError(f"auto_retrain_learners must name distinct learner nodes, got {names!r}")
        self.bag_root = directory_or_default(str(p["bag_directory"]), "bags")
        group = ReentrantCallbackGroup()
        settings = loop_settings(p)
        self.learners = {name: _Learner(node, name, settings, group) for name in names}
        self.events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._checks: queue.Queue[str | None] = queue.Queue(maxsize=MAX_PENDING_CHECKS)
        self._seen: set[str] = set()
        self.files_refused = 0
        self.state_path = node.output_dir / f"lifelong_loop-{node.get_name()}.json"
        #: where the loops' state at start came from (diagnostics: ``lifelong loop state``)
        self.state_origin = f"new: no {self.state_path.name} in {self.state_path.parent}"
        self._restore()
        files = QoSProfile(
            depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(BagFileClosed, str(p["bag_files_topic"]), self._on_file, files)
        self.action = ActionClient(node, TuneModel, "~/tune", callback_group=group)
        self._checker = threading.Thread(target=self._check_files, name="loop file checks", daemon=True)
        self._checker.start()
        node.create_timer(TICK_S, self._tick)

    # ------------------------------------------------------------------ the checkpoint
    def _restore(self) -> None:
        """The loops' state from the last run (a file that cannot be read is moved aside)."""
        now = self.now()
        try:
            text = read_regular_text(self.state_path, 1 << 22)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            self.node.reject("lifelong loop state unreadable", f"{self.state_path}: {exc}")
            self.state_origin = f"new: {self.state_path} unreadable"
            return
        try:
            states = json.loads(text)["learners"]
            read = {
                name: learner.loop.read_state(states[name], now)
                for name, learner in self.learners.items()
                if name in states
            }
        except (ValueError, KeyError, TypeError) as exc:
            aside = aside_path(self.state_path, "unreadable")
            self.state_path.replace(aside)
            self.node.reject("lifelong loop state unreadable", f"{self.state_path} moved to {aside}: {exc}")
            self.state_origin = f"new: {self.state_path} unreadable, moved to {aside}"
            return
        for name, fields in read.items():  # every learner's state was read whole: none is half-restored
            self.learners[name].loop.take_state(fields, now)
        restored = f"restored from {self.state_path} ({', '.join(sorted(read))})"
        self.state_origin = restored if read else f"new: {self.state_path} has none of these learners"
        self.node.get_logger().info(f"lifelong loop: state {self.state_origin}")

    def _save(self) -> None:
        states = {name: learner.loop.to_state() for name, learner in self.learners.items()}
        try:
            atomic_write_text(self.state_path, json.dumps({"learners": states}, indent=1))
        except OSError as exc:
            self.node.reject("lifelong loop state not written", f"{self.state_path}: {exc}")

    # ------------------------------------------------------------------ inputs
    def _on_file(self, msg: BagFileClosed) -> None:
        path = msg.closed_file
        if path in self._seen:
            return  # the recorder repeats its last announcements to a late joiner
        if len(self._seen) >= MAX_SEEN:
            self._seen.clear()
        self._seen.add(path)
        try:
            self._checks.put_nowait(path)
        except queue.Full:
            self.node.reject(
                "bag file announcements flood", f"{path!r}: {MAX_PENDING_CHECKS} wait for checks"
            )

    def _check_files(self) -> None:
        """The checks' thread: reading the files never holds the executor."""
        while (path := self._checks.get()) is not None:
            try:
                self.events.put(_Checked(path, check_closed_file(path, self.bag_root), None))
            except UntrustedFileError as refusal:
                self.events.put(_Checked(path, None, refusal))

    def _ask(self, learner: _Learner, now: float) -> None:
        """Ask the learner's ~/serving_state (one call at a time; one unanswered for long is dropped)."""
        if learner.asking is not None:
            future, since = learner.asking
            if not future.done() and now - since < ANSWER_TIMEOUT_S:
                return
            if not future.done():
                learner.state_client.remove_pending_request(future)
            learner.asking = None
        if not learner.state_client.service_is_ready():
            return
        future = learner.state_client.call_async(ServingState.Request())
        learner.asking = (future, now)
        name = learner.name
        future.add_done_callback(lambda f: self.events.put(_Answer(name, _value(f))))

    def now(self) -> float:
        """The loop's clock: the node's (the recorder stamps its files with its own), in seconds."""
        return self.node.get_clock().now().nanoseconds * 1e-9

    @property
    def on(self) -> bool:
        return bool(self.node.params["auto_retrain"])

    def apply_parameter(self, name: str) -> None:
        """A parameter of :data:`LOOP_PARAMS` changed (its range checked by the node)."""
        for learner in self.learners.values():
            if name.startswith("retrain_"):
                learner.loop.settings = loop_settings(self.node.params)
            elif name == "auto_retrain":
                learner.loop.set_on(self.on)

    # ------------------------------------------------------------------ the tick
    def _tick(self) -> None:
        now = self.now()
        changed = False
        while True:
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                break
            changed = self._take(event, now) or changed
        if self.node.stopping_now:
            return
        for learner in self.learners.values():
            if learner.loop.on != self.on:
                learner.loop.set_on(self.on)
            self._ask(learner, now)
            if not self.on or learner.task not in TASKS:
                continue
            if learner.shadow_window_s == 0:
                continue
            job = learner.loop.next_job(now)
            if job is not None:
                self._start(learner, job)
                changed = True
        if changed:
            self._save()

    def _take(self, event: Any, now: float) -> bool:
        """One event into its loop; True when what the checkpoint keeps may have changed."""
        if isinstance(event, _Checked):
            if event.refusal is not None:
                self.files_refused += 1
                self.node.reject(event.refusal.reason, f"{event.refusal}: not used by the lifelong loop")
                return False
            for learner in self.learners.values():
                learner.loop.file(event.facts)
            return False
        learner = self.learners[event.learner]
        if isinstance(event, _Answer):
            return self._answered(learner, event.response, now)
        if isinstance(event, _Saved):
            learner.loop.saved(event.saved)
            self._send(learner, event.saved)
            return True
        if isinstance(event, _GoalAnswer):
            if event.handle is None:
                self._ended(learner, JobEnded(now, event.why))
                return True
            name = learner.name
            event.handle.get_result_async().add_done_callback(
                lambda f: self.events.put(_Result(name, _value(f), _failure(f)))
            )
            return False
        if isinstance(event, _Result):
            self._finished(learner, event, now)
            return True
        raise TypeError(f"not a lifelong loop event: {event!r}")

    def _answered(self, learner: _Learner, response: Any, now: float) -> bool:
        learner.asking = None
        if response is None or not response.success:
            return False
        if response.task != learner.task and response.task in TASKS:
            learner.task = response.task
            learner.loop.topic = self._task_topic(response.task)
        learner.shadow_window_s = float(response.shadow_window_s)
        pending = learner.loop.pending
        state = LearnerState(
            at=now,
            drift=str(response.drift_message or "drift alarm") if response.drift_raised else None,
            trial=f"{response.trial_role} of {response.trial_model}" if response.trial_running else None,
            version=int(response.model_version),
        )
        learner.loop.learner(state)
        if learner.loop.pending != pending and self.on:
            what = "raised" if state.drift else "answered"
            self.node.get_logger().info(
                f"lifelong loop {learner.short}: drift alarm {what}: {state.drift or ''}"
            )
            return True
        return False

    def _task_topic(self, task: str) -> str:
        """The bag topic a task's goals read ('' = any): the tuner's default for the task."""
        p = self.node.params
        name = p["joint_states_topic"] if task == "inverse-dynamics" else p["labeled_features_topic"]
        if not name:
            return ""
        try:
            return self.node.resolve_topic_name(name)
        except RuntimeError as exc:  # rclpy's RCLError for an invalid name: the goals would fail on it too
            self.node.get_logger().warning(f"lifelong loop: bag topic {name!r} is no valid name ({exc})")
            return ""

    # ------------------------------------------------------------------ a job
    def _start(self, learner: _Learner, job: Job) -> None:
        self.node.get_logger().info(
            f"lifelong loop {learner.short}: retraining ({job.reason}), {len(job.bags)} bag files"
        )
        learner.loop.jobs[-1]["wall_time"] = time.time()
        if not learner.save_client.service_is_ready():
            self.events.put(_Saved(learner.name, Saved("", f"{learner.name}/save_model is not available")))
            return
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        path = str(self.node.output_dir / f"serving-{learner.short}-{stamp}.llm")
        future = learner.save_client.call_async(SaveModel.Request(path=path))
        name = learner.name

        def saved(f: Any) -> None:
            answer = _value(f)
            ok = answer is not None and bool(answer.success)
            why = "" if ok else (answer.message if answer is not None else _failure(f))
            self.events.put(_Saved(name, Saved(path if ok else "", why)))

        future.add_done_callback(saved)

    def _send(self, learner: _Learner, saved: Saved) -> None:
        """The goal to the tuner's own ~/tune, with the serving model saved for the gate (or '')."""
        job = learner.loop.running
        if job is None:
            return
        if not saved.path:
            self.node.get_logger().warning(
                f"lifelong loop {learner.short}: no serving model for the gate ({saved.why}); the "
                "candidate is compared with the URDF alone, then judged in shadow"
            )
        goal = TuneModel.Goal(
            bags=list(job.bags),
            validation_bags=list(job.validation_bags),
            task=learner.task,
            serving_model=saved.path,
        )
        self.node.publish_progress(
            {"state": "auto_retrain", "learner": learner.name, **job.as_dict(), "serving_model": saved.path}
        )
        name = learner.name
        if not self.action.server_is_ready():
            self.events.put(_GoalAnswer(name, None, "not sent: the tuner's ~/tune is not ready"))
            return
        future = self.action.send_goal_async(goal)

        def answered(f: Any) -> None:
            handle = _value(f)
            if handle is None or not handle.accepted:
                why = _failure(f) or f"rejected: {self.node.last_rejected_goal}"
                self.events.put(_GoalAnswer(name, None, why))
            else:
                self.events.put(_GoalAnswer(name, handle))

        future.add_done_callback(answered)

    def _finished(self, learner: _Learner, event: _Result, now: float) -> None:
        response = event.result
        result = getattr(response, "result", None)
        if result is None:
            self._ended(learner, JobEnded(now, f"failed: {event.why or 'no result'}"))
            return
        record = learner.loop.jobs[-1] if learner.loop.jobs else {}
        record.update(candidate=result.out_path, candidate_error=result.candidate_error,
                      serving_error=result.serving_error, promoted=bool(result.promoted))  # fmt: skip
        outcome = result.message if result.success else f"failed: {result.message}"
        self._ended(learner, JobEnded(now, outcome, bool(result.success and result.promoted)))

    def _ended(self, learner: _Learner, event: JobEnded) -> None:
        learner.loop.job_ended(event)
        self.node.get_logger().info(f"lifelong loop {learner.short}: job {event.outcome}")

    # ------------------------------------------------------------------ diagnostics
    def stop(self) -> None:
        """The checks' thread ends (the node is going down)."""
        try:
            self._checks.put_nowait(None)
        except queue.Full:
            pass

    def diagnostic_values(self) -> dict[str, str]:
        now = self.now()
        values: dict[str, str] = {}
        for learner in self.learners.values():
            loop, key = learner.loop, f"lifelong loop {learner.short}"
            if not self.on:
                state = "off (auto_retrain false)"
            elif learner.task not in TASKS:
                state = f"waiting: {learner.name}/serving_state has not answered"
            elif learner.shadow_window_s == 0:
                state = (
                    f"held: {learner.name} swaps received models in at once (shadow_window_s 0); "
                    "the loop sends no candidate unjudged on live data"
                )
            elif loop.phase in (Phase.SAVING, Phase.TUNING):
                state = f"{loop.phase.value}: {loop.running.reason if loop.running else ''}"
            else:
                state = f"{loop.phase.value}: {loop.waiting(now) or 'a job starts'}"
            values[key] = state
            values[f"{key} jobs"] = str(loop.jobs_started)
            values[f"{key} last job"] = loop.last_outcome
            skipped = ", ".join(f"{n} {why}" for why, n in sorted(loop.files_skipped.items()))
            values[f"{key} bag files"] = f"{loop.files_closed} usable" + (f" ({skipped})" if skipped else "")
        values["bag files refused (lifelong loop)"] = str(self.files_refused)
        values["lifelong loop state"] = self.state_origin
        return values

    def diagnostic_problems(self) -> list[str]:
        """What is wrong with a loop that is on (WARN)."""
        if not self.on:
            return []
        return [
            f"lifelong loop: {learner.name} has shadow_window_s 0: no candidate is sent to it"
            for learner in self.learners.values()
            if learner.shadow_window_s == 0
        ]


def _value(future: Any) -> Any:
    """A done future's result, or None when it was cancelled or raised (see :func:`_failure`)."""
    if future.cancelled() or future.exception() is not None:
        return None
    return future.result()


def _failure(future: Any) -> str:
    """Why a done future has no result ('' when it has one)."""
    if future.cancelled():
        return "cancelled"
    exc = future.exception()
    return "" if exc is None else f"{type(exc).__name__}: {exc}"
