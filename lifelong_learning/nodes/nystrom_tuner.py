"""``nystrom_tuner`` node: retraining from rosbag2 logs, as a ROS 2 action, with a promotion gate.

Runs :func:`lifelong_learning.retraining.pipeline.run_job` (the same code as
``lifelong-learning tune``) for each goal of the ``~/tune`` action
(lifelong_learning/action/TuneModel), one goal at a time, in the order accepted.

Goals are checked before they are accepted (task and objectives known, bags that are rosbag2
directories, a URDF for inverse dynamics: the goal's, the node's ``urdf_path``, else the latest
``robot_description`` message; a model to continue from of the task's kind; sizes within
``max_epochs`` / ``max_centers`` / ``max_bags``, no bag named twice; an output path inside
``output_dir``). A goal that fails a check is rejected: rclpy's goal response carries no text, so
the reason is logged, counted in diagnostics (``rejected: <reason>``, ``last rejected goal``) and
published on ``tuning_progress`` as ``{"state": "rejected", "reason": ...}``. At most
``max_queued_goals`` goals wait behind the running one (those being checked included); more are
rejected at once (``queue full``).

The goal callback opens no file: on the executor thread it checks what ``os.stat`` and directory
listings tell (:meth:`~lifelong_learning.retraining.job.TuningJob.check_request`: a FIFO, a device
or an oversized file anywhere a goal names a path is refused there, ``unsafe path``), then awaits
the rest (opening the bags, reading the models' headers, :meth:`TuningJob.validate`) done on the
node's goal-check thread, one goal at a time, so that no executor thread waits on a file or a
slow check, and every goal request is answered (the goal service keeps
:data:`GOAL_REQUEST_DEPTH` requests: a burst is answered, not dropped).

Goals run in the order they were accepted, also when rclpy runs their accepted callbacks on two
threads in the other order. Feedback: phase (queued, reading, tuning, validating, writing),
objective, epoch, value, ETA, queue position. Cancel works at any time: a queued goal ends at
once, a running one at its next epoch or replayed block, and no file is left behind. Each goal
writes its own file (``<task>-<UTC time>-<goal id>.npz`` unless it names one).

Before a candidate is announced, the promotion gate (:mod:`lifelong_learning.retraining.promotion`)
scores it and the serving model on the same held-out data; only a better candidate (or a forced
one) is announced: its path on ``tuned_model`` (std_msgs/String, latched: learners on this
machine) and its bytes on ``tuned_model_data`` (lifelong_learning/ModelFile, latched: learners
on any machine, no shared filesystem). The result says both figures and the decision.

Publishes ``tuning_progress`` (std_msgs/String, JSON) for observers that hold no goal (and for
the bags): ``running`` after an epoch (at most one per ``feedback_period_s``, like the feedback,
and always an objective's first and last), then ``done`` / ``failed`` / ``cancelled`` /
``rejected``.

Stopping (SIGINT/SIGTERM, :meth:`NystromTunerNode.destroy_node`): the running job is told to
stop; it ends at its next epoch or replayed block without writing a model file, and the process
waits for it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from std_msgs.msg import String

from lifelong_learning.action import TuneModel
from lifelong_learning.core.files import (
    MAX_URDF_BYTES,
    UnsafePathError,
    atomic_write_text,
    confined_path,
    read_regular_bytes,
)
from lifelong_learning.core.model_file import MAX_MODEL_BYTES, read_model_kind
from lifelong_learning.msg import ModelFile
from lifelong_learning.nodes.base import NodeBase, ParamSpec, directory_or_default
from lifelong_learning.nodes.lifelong_loop import LOOP_PARAMS, LifelongLoopMonitor
from lifelong_learning.nodes.runner import run_node
from lifelong_learning.retraining.job import JobCancelledError, TuningJob, job_options

#: seconds destroy_node waits for a stopped job before it logs that the process waits on
STOP_WAIT_S = 10.0
#: executor threads of the one-node executable: one runs a goal, the others answer goal, cancel
#: and result requests, feedback and diagnostics meanwhile
THREADS = 3
#: seconds an accepted goal waits for one accepted before it to be placed in the queue first (the
#: accepted callbacks of two goals may run on two threads in either order)
ORDER_WAIT_S = 2.0
#: goal requests the goal service holds before the executor takes them (rclpy's default, 10, let a
#: burst of 40 lose 30 without an answer): a burst this deep is answered, accepted or rejected
GOAL_REQUEST_DEPTH = 1000
NAN = float("nan")


def job_parameters() -> tuple[ParamSpec, ...]:
    """The parameters that set the jobs' options, made from the options' declarations
    (:func:`~lifelong_learning.retraining.job.job_options`: those that name a node parameter)."""
    return tuple(
        ParamSpec(o.node, o.node_default(), o.node_description(), bounds=o.node_bounds())
        for o in job_options()
        if o.node is not None
    )


PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "output_dir",
        "",
        "Directory of the model files ('' = $ROS_HOME/lifelong_learning, ~/.ros/lifelong_learning when "
        "ROS_HOME is unset): each goal writes a new file "
        "here, named by task, UTC time and goal id, with its reports beside it.",
    ),
    *job_parameters(),
    ParamSpec(
        "max_epochs",
        1000,
        "Largest epochs a request may ask for (refused above): 10x the default; with early stopping "
        "real jobs stop far earlier, and one absurd request must not occupy the tuner for days.",
        bounds=(1, 100000),
    ),
    ParamSpec(
        "max_centers",
        20000,
        "Largest centres a request may ask for (refused above): one 20000x20000 float64 kernel matrix "
        "is 3.2 GB and a job holds several, about what one large GPU or host can spare.",
        bounds=(1, 1000000),
    ),
    ParamSpec(
        "max_bags",
        1000,
        "Most bags a goal may name, validation bags included (refused above): each is checked before "
        "the goal is accepted, and one goal listing 10,000 copies of a bag held the goal check for 28 s.",
        bounds=(1, 100000),
    ),
    ParamSpec(
        "joint_states_topic",
        "/joint_states",
        "Bag topic of sensor_msgs/JointState for inverse-dynamics requests without topic "
        "('' = every JointState topic: wrong when predicted torques were recorded too).",
    ),
    ParamSpec(
        "labeled_features_topic",
        "",
        "Bag topic of LabeledFeatures for classification requests without topic ('' = every one: "
        "labeled_features and object_recognition's learned_features, a frame found on both read once).",
    ),
    ParamSpec(
        "robot_description_topic",
        "robot_description",
        "std_msgs/String URDF topic (robot_state_publisher's, transient local), used for "
        "inverse-dynamics goals when neither the goal nor urdf_path gives a URDF; '' disables.",
    ),
    ParamSpec(
        "max_queued_goals",
        4,
        "Goals that may wait behind the running one, those being checked included; more are rejected "
        "at once ('queue full').",
        bounds=(0, 1000),
    ),
    ParamSpec("progress_topic", "tuning_progress", "std_msgs/String (JSON) progress output."),
    ParamSpec(
        "feedback_period_s",
        0.1,
        "Least time between two epochs' feedback and tuning_progress messages (an objective's first "
        "and last epoch are always sent): small jobs run hundreds of epochs a second, more than a "
        "client's feedback history (10 deep by default) holds; 0 sends every epoch (settable at run time).",
        bounds=(0.0, 60.0),
        minimum_nonzero=0.01,
        at_run_time=True,
    ),
    ParamSpec(
        "model_topic",
        "tuned_model",
        "std_msgs/String (latched): path of each promoted model file, for learners on this machine; "
        "'' disables.",
    ),
    ParamSpec(
        "model_data_topic",
        "tuned_model_data",
        "lifelong_learning/ModelFile (latched): bytes of each promoted model file, for learners "
        "on machines without this one's filesystem; '' disables.",
    ),
    *LOOP_PARAMS,
)


class GoalChecks:
    """The goals' slow checks, run one at a time, in the order given, on a thread of their own: a
    goal callback awaits :meth:`submit`'s future instead of running them on an executor thread."""

    def __init__(self, executor: Callable[[], Any]) -> None:
        self._executor = executor  # the executor that awaits the futures (None: none, e.g. a test)
        self._todo: queue.SimpleQueue[tuple[Callable[[], Any], Future] | None] = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="goal checks", daemon=True)
        self._thread.start()

    def submit(self, check: Callable[[], Any]) -> Future:
        """A future of ``check()``'s value, or of the exception it raised (returned, not raised)."""
        future = Future(executor=self._executor())
        future.add_done_callback(lambda _: None)  # its end wakes the executor, which resumes the awaiting
        self._todo.put((check, future))
        return future

    def _loop(self) -> None:
        while (item := self._todo.get()) is not None:
            check, future = item
            try:
                if self._stopped.is_set():
                    raise RuntimeError("the tuner is shutting down")
                future.set_result(check())
            except Exception as exc:  # the goal's answer, whatever went wrong
                future.set_result(exc)

    def stop(self) -> None:
        """Checks not begun end at once (shutting down); the thread ends after the current one."""
        self._stopped.set()
        self._todo.put(None)


class NystromTunerNode(NodeBase):
    """Retrains Nyström models from bags, one action goal at a time; announces only better models."""

    EXECUTOR_THREADS: ClassVar[int] = THREADS  # a goal runs in a callback: cancels and requests beside it

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("nystrom_tuner", PARAMS, **kwargs)
        self._stop = threading.Event()  # first: destroy_node uses it, also after a failed start
        self._idle = threading.Event()
        self._idle.set()
        self._server: ActionServer | None = None
        self._checks: GoalChecks | None = None
        p = self.params
        if not 1 <= int(p["default_epochs"]) <= int(p["max_epochs"]):
            raise ValueError(f"default_epochs must be in [1, max_epochs={p['max_epochs']}]")
        if not 1 <= int(p["default_centers"]) <= int(p["max_centers"]):
            raise ValueError(f"default_centers must be in [1, max_centers={p['max_centers']}]")
        base = str(p["output_dir"])
        self.output_dir = directory_or_default(base)
        try:
            self.output_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a configuration error: the node cannot start (exit status 2)
            raise ValueError(f"output_dir {self.output_dir} cannot be created: {exc}") from exc
        self.progress_pub = self.create_publisher(String, p["progress_topic"], 10)
        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        self.model_pub = (
            self.create_publisher(String, p["model_topic"], latched) if p["model_topic"] else None
        )
        # the last two models kept for late joiners: the newest of each kind when the two learners'
        # models were promoted in turn (a learner takes its own kind only)
        latched_two = QoSProfile(
            depth=2, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        self.model_data_pub = (
            self.create_publisher(ModelFile, p["model_data_topic"], latched_two)
            if p["model_data_topic"]
            else None
        )
        self.robot_description: str | None = None
        if p["robot_description_topic"]:
            self.create_subscription(
                String, p["robot_description_topic"], self._on_robot_description, latched
            )
        self._lock = threading.Lock()
        self._placed = threading.Condition(self._lock)
        # acceptance order: id(goal message) -> (ticket, the message: kept so that its id stays its
        # own, the job checked in _on_goal)
        self._tickets: dict[int, tuple[int, Any, Any]] = {}
        self._issued = self._next_ticket = 0
        self._running: ServerGoalHandle | None = None
        self._queue: deque[ServerGoalHandle] = deque()
        self._jobs: dict[bytes, Any] = {}  # goal id -> its TuningJob, from acceptance to its end
        self._dropped: set[bytes] = set()  # goals cancelled while queued: they end without running
        self._places = 0  # goals being checked, accepted, queued or running: max_queued_goals + 1 at most
        self.jobs_done = self.jobs_failed = self.jobs_cancelled = 0
        self.promoted = self.refused_promotion = 0
        self.last_failure = self.last_rejected_goal = self.last_decision = "none"
        self.last_job_failed = False  # a WARN in diagnostics until a job succeeds
        self.last_skipped: dict[str, int] = {}
        self._checks = GoalChecks(lambda: self.executor)
        # a burst of goal requests waits in the service, none dropped (rclpy's default keeps 10)
        requests = QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=GOAL_REQUEST_DEPTH, reliability=ReliabilityPolicy.RELIABLE
        )
        self._server = ActionServer(
            self,
            TuneModel,
            "~/tune",
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            handle_accepted_callback=self._on_accepted,
            cancel_callback=self._on_cancel,
            callback_group=ReentrantCallbackGroup(),
            goal_service_qos_profile=requests,
        )
        self.loop = LifelongLoopMonitor(self)  # sends goals to ~/tune: after the server exists

    def _on_robot_description(self, msg: String) -> None:
        if len(msg.data) > MAX_URDF_BYTES:  # characters: at least as many bytes
            size = f"{len(msg.data)} characters, more than {MAX_URDF_BYTES}"
            self.reject("robot description too large", size)
        elif msg.data.strip():
            self.robot_description = msg.data

    # ------------------------------------------------------------ goals
    def _urdf_path(self, goal: Any) -> str | None:
        """The goal's URDF file, the node's ``urdf_path``, else the robot_description message
        (written once per distinct text to ``output_dir``: the report names the file)."""
        given = goal.urdf_path or self.params["urdf_path"]
        if given or goal.task != "inverse-dynamics" or self.robot_description is None:
            return given or None
        text = self.robot_description
        path = self.output_dir / f"robot_description-{hashlib.sha256(text.encode()).hexdigest()[:12]}.urdf"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text)
        return str(path)

    def _out_path(self, goal: Any, goal_id: bytes) -> Path:
        """A new file in output_dir, named by task, UTC time and goal id (unique per goal)."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        name = f"{goal.task or 'model'}-{stamp}-{goal_id.hex()[:8]}.npz"
        return confined_path(name, self.output_dir, allow_outside=False)

    def _job(self, goal: Any, out: Path) -> TuningJob:
        """The goal as a checked TuningJob. Raises ValueError / OSError (UnsafePathError) with the reason."""
        p = self.params
        if int(goal.epochs) > int(p["max_epochs"]):
            raise OverflowError(f"epochs {goal.epochs} is above max_epochs {p['max_epochs']}")
        if int(goal.centers) > int(p["max_centers"]):
            raise OverflowError(f"centers {goal.centers} is above max_centers {p['max_centers']}")
        if len(goal.bags) + len(goal.validation_bags) > int(p["max_bags"]):
            n = len(goal.bags) + len(goal.validation_bags)
            raise OverflowError(f"{n} bags (validation bags included) is above max_bags {p['max_bags']}")
        options = {o.name: o for o in job_options() if o.node is not None}
        values = {name: o.from_node(p[o.node]) for name, o in options.items()}  # the node's defaults
        topic_default = (
            p["joint_states_topic"] if goal.task == "inverse-dynamics" else p["labeled_features_topic"]
        )
        urdf = self._urdf_path(goal)
        if goal.task == "inverse-dynamics" and not (urdf or goal.init_model):
            raise ValueError(
                "no URDF: give urdf_path in the goal or the node's urdf_path, or publish robot_description"
            )
        values.update(
            # none named: the task's default (retraining.job.DEFAULT_OBJECTIVES)
            method=goal.method or values["method"],
            objectives=options["objectives"].from_node(goal.objective or p["default_objective"]),
            centers=int(goal.centers) or values["centers"],
            epochs=int(goal.epochs) or values["epochs"],
            urdf=urdf,
            init=goal.init_model or None,
            topic=goal.topic or topic_default or None,
            serving=goal.serving_model or None,
            validation_bags=list(goal.validation_bags),
            force=bool(goal.force),
        )
        job = TuningJob(bags=list(goal.bags), task=goal.task, out=str(out), **values)
        job.check_request()  # what opens no file: the rest, job.validate(), on the goal-check thread
        return job

    def _reject(self, reason: str, message: str) -> GoalResponse:
        self.reject(reason, message)
        self.last_rejected_goal = f"{reason}: {message}"
        self.publish_progress({"state": "rejected", "reason": reason, "message": message})
        return GoalResponse.REJECT

    def _refuse(self, exc: BaseException) -> GoalResponse:
        """Reject a goal whose check raised ``exc``: its reason, counted, logged and published."""
        self._release()
        if isinstance(exc, OverflowError):
            return self._reject("goal over limit", str(exc))
        if isinstance(exc, UnsafePathError):  # a FIFO, a device, an oversized file, an output not ours
            return self._reject("unsafe path", str(exc))
        if isinstance(exc, (ValueError, OSError)):
            return self._reject("invalid goal", str(exc))
        if self._stop.is_set():
            return self._reject("shutting down", "the tuner is shutting down")
        self.get_logger().error(f"goal check failed: {type(exc).__name__}: {exc}")
        return self._reject("internal error", f"{type(exc).__name__}: {exc}")

    def _release(self) -> None:
        """A goal gives back its place (rejected after its place was taken, or ended)."""
        with self._lock:
            self._places = max(0, self._places - 1)

    async def _on_goal(self, goal: Any) -> GoalResponse:
        """Accept a goal only if it can run: the reason of a rejection is logged, counted, published.

        On the executor thread: a place (at most ``max_queued_goals`` + 1 goals hold one) and what
        opens no file; then, awaited, :meth:`TuningJob.validate` on the goal-check thread."""
        if self._stop.is_set():
            return self._reject("shutting down", "the tuner is shutting down")
        with self._lock:
            if self._places > int(self.params["max_queued_goals"]):
                return self._reject("queue full", f"{self._places - 1} goal(s) already wait")
            self._places += 1  # given back when the goal is rejected or ends (_release)
        try:
            job = self._job(goal, self._out_path(goal, os.urandom(4)))  # its file: named in _on_accepted
        except Exception as exc:  # never leave a client without an answer
            return self._refuse(exc)
        assert self._checks is not None
        failed = await self._checks.submit(job.validate)  # the bags opened, the models' headers read
        if isinstance(failed, BaseException):
            return self._refuse(failed)
        if self._stop.is_set():
            self._release()
            return self._reject("shutting down", "the tuner is shutting down")
        with self._lock:  # the order goals run in: the order they were accepted (see _on_accepted)
            self._tickets[id(goal)] = (self._issued, goal, job)
            self._issued += 1
        return GoalResponse.ACCEPT

    def _on_accepted(self, handle: ServerGoalHandle) -> None:
        goal_id = bytes(handle.goal_id.uuid)
        with self._placed:
            ticket, _, job = self._tickets.pop(id(handle.request), (None, None, None))
            if ticket is None:  # skipped as never arriving (its place given back): it takes one again
                self._places += 1
        try:  # the job checked in _on_goal, its file named after the goal id
            out = str(self._out_path(handle.request, goal_id))
            self._jobs[goal_id] = (
                replace(job, out=out) if job is not None else self._job(handle.request, Path(out))
            )
        except Exception as exc:  # the check passed a moment ago; the goal ends at once, aborted
            self.last_failure = f"{type(exc).__name__}: {exc}"
        with self._placed:
            # rclpy sends the goal response before it calls this: a client's next goal, accepted
            # later, can get here first on another executor thread. It waits for the earlier ones, at
            # most ORDER_WAIT_S: an earlier goal whose callback never comes (rclpy failed to send its
            # response) is skipped, and its ticket dropped.
            if ticket is not None:
                if not self._placed.wait_for(lambda: self._next_ticket >= ticket, ORDER_WAIT_S):
                    self.get_logger().warning(f"goal {goal_id.hex()[:8]}: an earlier goal never arrived")
                    for key in [k for k, entry in self._tickets.items() if entry[0] < ticket]:
                        del self._tickets[key]
                        self._places = max(0, self._places - 1)  # its place, never to be used
                self._next_ticket = max(self._next_ticket, ticket + 1)
                self._placed.notify_all()
            if self._stop.is_set():  # stopping: like the queued goals, it never starts
                self._jobs.pop(goal_id, None)
                self._places = max(0, self._places - 1)
                return
            if handle.is_cancel_requested:  # cancelled while it waited: it ends without running
                self._dropped.add(goal_id)
                handle.execute()
                return
            start = self._running is None
            if start:
                self._running = handle
                self._idle.clear()
            else:
                self._queue.append(handle)
                position = len(self._queue)
        if start:
            handle.execute()
        else:
            handle.publish_feedback(self._feedback("queued", queue_position=position))
            self.get_logger().info(f"goal {goal_id.hex()[:8]} queued behind {position} other(s)")

    def _on_cancel(self, handle: ServerGoalHandle) -> CancelResponse:
        """Cancel at any time: a queued goal ends at once, the running one at its next epoch."""
        with self._lock:
            if handle in self._queue:
                self._queue.remove(handle)
                self._dropped.add(bytes(handle.goal_id.uuid))
                handle.execute()  # it ends as cancelled without running (see _execute)
        return CancelResponse.ACCEPT

    # ------------------------------------------------------------ running a goal
    @staticmethod
    def _feedback(phase: str, **fields: Any) -> Any:
        defaults = {"objective": "", "epoch": 0, "epochs": 0, "value": NAN, "eta_s": NAN, "queue_position": 0}
        return TuneModel.Feedback(phase=phase, **{**defaults, **fields})

    def publish_progress(self, payload: dict[str, Any]) -> None:
        """One JSON message on ``tuning_progress`` (never raises)."""
        try:
            self.progress_pub.publish(String(data=json.dumps(payload)))
        except Exception as exc:  # the context may be going down while a job ends
            self.get_logger().warning(f"progress not published ({exc}): {payload.get('state')}")

    def _execute(self, handle: ServerGoalHandle) -> Any:
        try:
            return self._execute_goal(handle)
        finally:
            self._release()

    def _execute_goal(self, handle: ServerGoalHandle) -> Any:
        goal_id = bytes(handle.goal_id.uuid)
        if goal_id in self._dropped:  # cancelled while queued: never ran
            self._dropped.discard(goal_id)
            self._jobs.pop(goal_id, None)
            deadline = time.monotonic() + 2.0  # the cancel request's state change follows its callback
            while not handle.is_cancel_requested and time.monotonic() < deadline:
                time.sleep(0.01)
            self.jobs_cancelled += 1
            handle.canceled()
            return TuneModel.Result(
                message="cancelled before it started", candidate_error=NAN, serving_error=NAN
            )
        try:
            return self._run(handle, self._jobs.pop(goal_id, None))
        finally:
            self._start_next()

    def _start_next(self) -> None:
        with self._lock:
            self._running = self._queue.popleft() if self._queue and not self._stop.is_set() else None
            following, waiting = self._running, list(self._queue)
            if following is None:
                self._idle.set()
        for position, handle in enumerate(waiting, start=1):
            handle.publish_feedback(self._feedback("queued", queue_position=position))
        if following is not None:
            following.execute()

    def _run(self, handle: ServerGoalHandle, job: Any) -> Any:
        from lifelong_learning.retraining.pipeline import run_job  # torch: loaded with the first job

        result = TuneModel.Result(candidate_error=NAN, serving_error=NAN)
        if job is None or self._stop.is_set():
            result.message = "the tuner is shutting down" if job is not None else self.last_failure
            handle.abort()
            return result
        t0 = time.monotonic()
        steps_total = len(job.runs) * job.epochs
        last_sent = [-math.inf]
        held: list[tuple[str, int, float] | None] = [None]  # the latest epoch not sent (throttled)

        def send(objective: str, epoch: int, value: float) -> None:
            steps = list(job.runs).index(objective) * job.epochs + min(epoch, job.epochs)
            eta = (time.monotonic() - t0) / steps * (steps_total - steps) if steps else NAN
            handle.publish_feedback(
                self._feedback(
                    "tuning", objective=objective, epoch=epoch, epochs=job.epochs, value=value, eta_s=eta
                )
            )
            self.publish_progress(
                {"state": "running", "objective": objective, "epoch": epoch, "epochs": job.epochs,
                 "value": value, "eta_s": None if math.isnan(eta) else eta}
            )  # fmt: skip

        def flush() -> None:  # an objective's last epoch, also when early stopping ended it
            if held[0] is not None:
                send(*held[0])
                held[0] = None

        def progress(objective: str, epoch: int, info: dict[str, Any]) -> None:
            now = time.monotonic()
            if epoch <= 1:
                flush()  # the previous objective's last epoch first
            ends = epoch <= 1 or epoch >= job.epochs  # an objective's first and last epoch: always
            if not ends and now - last_sent[0] < float(self.params["feedback_period_s"]):
                held[0] = (objective, epoch, float(info["objective"]))
                return
            last_sent[0], held[0] = now, None
            send(objective, epoch, float(info["objective"]))

        def phase(name: str) -> None:
            flush()
            handle.publish_feedback(self._feedback(name))

        self.get_logger().info(f"tuning {job.task} on {len(job.bags)} bag(s) into {job.out}")
        try:
            report = run_job(
                job,
                callback=progress,
                should_stop=lambda: self._stop.is_set() or handle.is_cancel_requested,
                phase=phase,
            )
        except JobCancelledError:
            self.jobs_cancelled += 1
            self.get_logger().info(f"tuning stopped after {time.monotonic() - t0:.1f} s; no model written")
            self.publish_progress({"state": "cancelled", "out_path": str(job.out)})
            result.message = "cancelled: no model written"
            if handle.is_cancel_requested:
                handle.canceled()
            else:
                handle.abort()
            return result
        except Exception as exc:  # any failure is reported, the node keeps serving
            self.jobs_failed += 1
            self.last_job_failed = True
            self.last_failure = f"{type(exc).__name__}: {exc}"
            self.get_logger().error(f"tuning failed: {exc}")
            self.publish_progress({"state": "failed", "error": self.last_failure, "out_path": str(job.out)})
            result.message = f"failed: {self.last_failure}"
            handle.abort()
            return result
        return self._finish(handle, job, report, result, time.monotonic() - t0)

    def _finish(
        self, handle: ServerGoalHandle, job: Any, report: dict[str, Any], result: Any, seconds: float
    ) -> Any:
        """Report the gate's decision; announce the model when promoted; succeed the goal."""
        self.jobs_done += 1
        self.last_job_failed = False
        self.last_skipped = dict(report.get("skipped", {}))
        decision = report["promotion"]
        promoted = bool(decision["promoted"])
        self.last_decision = decision["reason"]
        result.success, result.promoted, result.out_path = True, promoted, str(job.out)
        result.report_path = str(job.output_paths()[2])
        result.message = ("promoted: " if promoted else "not promoted: ") + decision["reason"]
        result.metric = decision["metric"]
        result.candidate_error = float(decision["candidate_error"])
        serving = decision["serving_error"]
        result.serving_error = NAN if serving is None else float(serving)
        self.get_logger().info(f"model written to {job.out} in {seconds:.1f} s; {result.message}")
        self.publish_progress(
            {"state": "done", "out_path": str(job.out), "report": report["objectives"],
             "skipped": self.last_skipped, "promotion": decision}
        )  # fmt: skip
        if promoted:
            self.promoted += 1
            self._announce(Path(job.out))
        else:
            self.refused_promotion += 1
        handle.succeed()
        return result

    def _announce(self, path: Path) -> None:
        """The model's path (learners on this machine) and bytes (learners anywhere), latched."""
        if self.model_pub is not None:
            self.model_pub.publish(String(data=str(path)))
        if self.model_data_pub is None:
            return
        data = read_regular_bytes(path, MAX_MODEL_BYTES)
        msg = ModelFile(kind=read_model_kind(path), name=path.name, sha256=hashlib.sha256(data).hexdigest())
        msg.stamp = self.get_clock().now().to_msg()
        msg.data = data
        self.model_data_pub.publish(msg)

    # ------------------------------------------------------------ state
    def apply_parameter(self, name: str, value: Any) -> None:
        super().apply_parameter(name, value)
        if getattr(self, "loop", None) is not None:  # None while the parameters are declared
            self.loop.apply_parameter(name)

    @property
    def stopping_now(self) -> bool:
        """The node is stopping: no goal starts any more."""
        return self._stop.is_set()

    @property
    def running(self) -> bool:
        """A goal is running now."""
        return not self._idle.is_set()

    def diagnostic_values(self) -> dict[str, str]:
        values = super().diagnostic_values()
        with self._lock:
            values["running"] = str(self._running is not None)
            values["queued goals"] = str(len(self._queue))
        values["jobs done"] = str(self.jobs_done)
        values["jobs failed"] = str(self.jobs_failed)
        values["jobs cancelled"] = str(self.jobs_cancelled)
        values["models promoted"] = str(self.promoted)
        values["models not promoted"] = str(self.refused_promotion)
        values["last promotion decision"] = self.last_decision
        values["last failure"] = self.last_failure
        values["last rejected goal"] = self.last_rejected_goal
        values["samples skipped (last job)"] = (
            ", ".join(f"{k}: {v}" for k, v in sorted(self.last_skipped.items())) or "none"
        )
        p = self.params
        values["limits"] = (
            f"epochs <= {p['max_epochs']}, centers <= {p['max_centers']}, bags <= {p['max_bags']}"
        )
        values["output dir"] = str(self.output_dir)
        values.update(self.loop.diagnostic_values())
        return values

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        problems = super().diagnostic_problems()
        if self.last_job_failed:
            problems.append((DiagnosticStatus.WARN, f"the last tuning job failed: {self.last_failure}"))
        problems.extend((DiagnosticStatus.WARN, text) for text in self.loop.diagnostic_problems())
        return problems

    def stop_job(self, timeout_s: float = STOP_WAIT_S) -> bool:
        """Tell the running goal to stop and wait up to ``timeout_s`` for it; True when none runs now.

        New goals are rejected from here on, queued ones do not start.
        """
        self._stop.set()
        if self._idle.wait(timeout_s):
            return True
        self.get_logger().warning(
            f"the tuning job has not stopped after {timeout_s:g} s (one epoch can be long); "
            "the process exits once it does"
        )
        return False

    def stopping(self) -> None:
        """The process is stopping: the running goal ends at its next epoch, queued ones never start."""
        self._stop.set()

    def finish(self) -> None:
        """The process is stopping, its callbacks done: the checks' and the loop's threads end and the
        running goal, told to stop, is waited for (before the teardown's deadline)."""
        if self._checks is not None:
            self._checks.stop()
        if getattr(self, "loop", None) is not None:
            self.loop.stop()
        self.stop_job()

    def destroy_node(self) -> None:
        self.finish()
        if self._server is not None:  # None after a failed start
            self._server.destroy()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the node (the ``nystrom_tuner`` executable)."""
    return run_node(NystromTunerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
