"""The ``inverse_dynamics`` node: joint states in, predicted joint torques out, learned online.

- subscribes to ``joint_states`` (sensor_msgs/JointState, best effort, depth 100); joints are matched
  by name (any order, extra joints ignored); q̈ comes from a causal Savitzky–Golay filter on the
  velocities and stamps, or from ``acceleration_topic`` (sensor_msgs/JointState, accelerations in
  its ``velocity`` field);
- publishes, for each accepted input, the predicted torques (sensor_msgs/JointState ``name`` +
  ``effort``, the input's header) on ``predicted_torque_topic``, and as Float64MultiArray on
  ``torque_array_topic``;
- while ``learning`` is true (settable at run time), learns from the measured ``effort``
  (:class:`~lifelong_learning.dynamics.SemiparametricInverseDynamics`, test-then-update);
- answers first, learns after: the callback predicts the waiting joint states as one block and
  publishes, then queues them; a learning thread (:class:`~lifelong_learning.nodes.block_worker.BlockWorker`)
  learns what queued meanwhile as one block, staged on drafts while answers go on and committed under
  the model lock in O(1) (about 0.3 ms per answer at 1 kHz on two cores: docs/benchmarks/control-rate.md);
- publishes, for each answered joint state that carries effort, the external torque estimate
  (measured − predicted, on ``external_torque_topic``) and a contact flag (``contact_topic``); samples
  in contact and ``contact_hold_s`` after it are not learned, nor those of a load too slow for the
  contact thresholds (a frozen reference model's residual:
  :mod:`~lifelong_learning.nodes.slow_load_monitor`); a load held beyond ``contact_max_s`` is
  learned only when a payload explains it (:mod:`~lifelong_learning.nodes.contact_monitor`,
  :mod:`~lifelong_learning.dynamics.contact`, :mod:`~lifelong_learning.nodes.learning_queue`);
- warns on ``/diagnostics`` when most samples go unlearned, ERROR when that lasts
  (:mod:`~lifelong_learning.nodes.learning_starvation`);
- services: ``~/predict`` (lifelong_learning/PredictTorques) and those of every
  :class:`~lifelong_learning.nodes.learner.LearnerNode` (save, load, reset, rollback, checkpoints).

The URDF comes from ``robot_description`` (the text), ``urdf_path``, or else the
``robot_description_topic`` (transient local, as robot_state_publisher publishes it): until it
arrives the node rejects joint states (counted: "no robot description yet").

Each joint state goes through :class:`~lifelong_learning.dynamics.guard.SampleGuard` (its module
gives the rules): missing joints, NaN/Inf, arrays of different lengths, no effort while learning,
implausible positions or velocities (``limit_margin``) and stamps that step back are refused and
counted, the model untouched; efforts beyond the limits, residual outliers (``outlier_k``) and
samples while the q̈ filter fills are answered, not learned (``not learned: ...`` in diagnostics,
WARN when most samples of a period were outliers: the robot may have changed); a stamp jump beyond
``stamp_jump_s`` restarts the q̈ filter instead of wedging the stream.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String

from lifelong_learning.core.model_file import ModelFileError
from lifelong_learning.core.prequential import PrequentialRegression
from lifelong_learning.dynamics import SemiparametricInverseDynamics
from lifelong_learning.dynamics.guard import (
    Admitted,
    RefusedSampleError,
    SampleGuard,
)
from lifelong_learning.dynamics.joint_order import JointPicker
from lifelong_learning.dynamics.plausibility import JointLimits
from lifelong_learning.dynamics.regressor import kinematic_difference, moving_joints
from lifelong_learning.dynamics.semiparametric import PreparedSamples
from lifelong_learning.dynamics.truncation import AnswerBounds
from lifelong_learning.msg import LearningMetrics
from lifelong_learning.nodes.block_worker import BlockWorker
from lifelong_learning.nodes.contact_monitor import ContactMonitor, Detection
from lifelong_learning.nodes.inverse_dynamics_params import (
    PARAMS,
    contact_settings,
    forgetting_text,
    guard_settings,
    model_settings,
    slow_load_settings,
    starvation_settings,
    urdf_from_parameters,
)
from lifelong_learning.nodes.learner import LearnerNode
from lifelong_learning.nodes.learning_metrics import MIN_WINDOW_SAMPLES, message_from_report
from lifelong_learning.nodes.learning_queue import LEARNING_STOPPED, MODEL_REPLACED, LearningQueue, ToLearn
from lifelong_learning.nodes.learning_starvation import LearningStarvation
from lifelong_learning.nodes.runner import run_node
from lifelong_learning.nodes.shadow import ShadowMonitor
from lifelong_learning.serving import Outcome
from lifelong_learning.srv import PredictTorques

#: joint states that queued up while the node was busy, taken and answered in one callback
JOINT_STATES_BATCH = 50
#: the interpreter's thread switch interval in a process with an inverse_dynamics node
SWITCH_INTERVAL_S = 0.0005
#: answered samples that may wait for the learning thread (2 s of 1 kHz joint states)
LEARNING_QUEUE = 2000


@dataclass(frozen=True)
class _Admitted:
    """A joint state the guard admitted: its message, joint values in the model's order, and when
    the middleware received it (ns since the epoch; 0 if unknown)."""

    msg: JointState
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray | None
    admitted: Admitted
    learning: bool
    received_ns: int
    t: float = 0.0  # the header's stamp [s]


class InverseDynamicsNode(LearnerNode):
    """JointState → predicted torques; measured effort → online update."""

    model_class = SemiparametricInverseDynamics
    retraining_task = "inverse-dynamics"
    MAIN_STREAMS = ("joint_states",)
    batch_objective_solves = False  # the learning thread solves the weights (stage(solve_weights=True))

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("inverse_dynamics", PARAMS, **kwargs)
        p = self.params
        self._model_kwargs = model_settings(p)
        # no joint_names: decided from the first joint states (or the restored model)
        self.auto_joints = self._model_kwargs["joint_names"] is None
        self.learning = bool(p["learning"])
        self._guard_kwargs = guard_settings(p)
        # fail at start on bad parameters, also when the URDF is to come from a topic later
        SampleGuard.check_settings(**self._guard_kwargs)
        self._contact_settings = contact_settings(p)  # ValueError: refused (None: detection off)
        self.starvation = LearningStarvation(self, starvation_settings(p))
        self._urdf = urdf_from_parameters(p)
        self._accelerations: dict[str, float] = {}
        self.not_learned: dict[str, int] = {}
        self.bounds = AnswerBounds(bool(p["truncate_predictions"]), float(p["limit_margin"]))  # KTR3's
        self.other_joints = 0  # messages that carry none of the modelled joints (another source's)
        self._learned_since = 0  # samples learned and outliers since the last diagnostics
        self._outliers_since = 0
        self._restarts_published: dict[str, int] = {}
        self._missed_published = 0
        self._discovered_at: float | None = None  # when the joints were taken from a message
        self.joint_names: list[str] = []
        self.answer_calls = self.answered = 0  # callbacks that answered, and the answers they gave
        self.joints = JointPicker()  # the model's joints' values from a message's by-name arrays
        self._moving: list[str] = []  # the URDF's moving joints
        self.ready = False  # a model serves (URDF and joints known)
        self._create_topics()
        # answer in the callback, learn on this thread: what queues while a block is learned is
        # the next block (one rank-k update), and the answers never wait for learning
        self.gate = LearningQueue(self)  # learn or count each answered sample; hold back loads
        self._learning_ended = False  # set by shutdown() once the learning thread was stopped
        self.learner: BlockWorker[ToLearn] = BlockWorker(
            f"{self.get_name()}-learning",
            self._learn_block,
            LEARNING_QUEUE,
            self._learning_failed,
            min_interval=float(p["learning_period_s"]),
        )
        # The answering thread must get the GIL back quickly from the learning thread's Python
        # parts: CPython's default switch interval (5 ms) alone would break a 2 ms answer budget.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
        self.shadow = ShadowMonitor(self)  # models in shadow and canary, the drift alarm (learning thread)
        self.start_learner()

    def _create_topics(self) -> None:
        """The torque outputs, the joint-state input, and the optional acceleration and URDF inputs."""
        p = self.params
        self.torque_pub = self.create_overridable_publisher(JointState, p["predicted_torque_topic"], 100)
        self.torque_array_pub = (
            self.create_overridable_publisher(Float64MultiArray, p["torque_array_topic"], 100)
            if p["torque_array_topic"]
            else None
        )
        self.contact = None
        if self._contact_settings is not None:
            self.contact = ContactMonitor(
                self,
                self._contact_settings,
                p["external_torque_topic"],
                p["contact_topic"],
                str(p["contact_estimator"]),  # ValueError: not one of them
                float(p["momentum_observer_gain"]),
                slow_load_settings(p),
                float(p["contact_payload_share"]),
            )
        # Best effort like sensor-data QoS (matches reliable and best-effort drivers), but 100 deep:
        # at 100-1000 Hz a depth of 5 drops whole bursts whenever the process is briefly descheduled.
        self.create_counted_subscription(
            JointState,
            p["joint_states_topic"],
            self._on_joint_states,
            QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT),
            stream="joint_states",
            batch=JOINT_STATES_BATCH,
        )
        if p["acceleration_topic"]:
            self.create_counted_subscription(
                JointState,
                p["acceleration_topic"],
                self._on_acceleration,
                qos_profile_sensor_data,
                stream="accelerations",
            )
        if not self._urdf:
            latched = QoSProfile(
                depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            )
            topic = self.create_subscription(
                String, p["robot_description_topic"], self._on_robot_description, latched
            ).topic_name
            self.get_logger().info(
                f"robot_description and urdf_path are empty: waiting for the URDF on {topic}"
            )

    def configure_learner(self) -> None:
        """Configure: with the URDF known, restore the checkpoint or build the model (in ``auto``
        joint mode without a checkpoint, the model waits for the first joint states)."""
        if self._urdf:
            self._setup(self._urdf)

    def _setup(self, urdf: str) -> None:
        """Take ``urdf``: serve the restored or a new model, or wait for the joints (ValueError: unusable)."""
        moving = self._moving = moving_joints(urdf)  # ValueError: not a usable URDF
        if not self.auto_joints:
            unknown = [j for j in self._model_kwargs["joint_names"] if j not in moving]
            if unknown:
                raise ValueError(f"joint_names {unknown} are not moving joints of the URDF ({moving})")
        self._model_kwargs["urdf"] = urdf
        model = self.restore_checkpoint()
        if model is None and not self.auto_joints:
            model = self.new_model()
        if model is not None:
            self._serve(model)
        else:
            self.get_logger().info(
                f"joints modelled: the URDF's moving joints {moving} that the first joint states carry"
            )

    def _serve(self, model: SemiparametricInverseDynamics) -> None:
        """Serve ``model``: its joints become the node's (limits, guard, ~/predict)."""
        with self.model_lock:  # one step: a reload and a first joint state may both get here (up)
            self.serving.serve_first(model)
            self._take_joints(model.joint_names)
            if not self.ready:
                self.create_configured_service(PredictTorques, "~/predict", self._on_predict)
            self.ready = True
        self.get_logger().info(f"inverse dynamics ready: {model!r}")

    def _take_joints(self, names: list[str]) -> None:
        """The node's joints, their limits and a fresh guard (model lock held)."""
        self.joint_names = list(names)
        if self.auto_joints:  # ~/reset builds the same joints
            self._model_kwargs["joint_names"] = list(names)
        limits = JointLimits.from_urdf(self._model_kwargs["urdf"], self.joint_names)
        self.guard = SampleGuard(limits, **self._guard_kwargs)
        self._measure_joints(self.joint_names)
        if self.contact is not None:
            self.contact.take_joints(self.joint_names, limits.effort, self.serving.model.regressor)

    def _discover_joints(self, msg: JointState) -> bool:
        """``auto`` joints: model the URDF's moving joints this message carries; True if a model serves.

        Within a second of the decision, a message that carries more of the URDF's joints (a
        merged stream whose first message was one source's) decides again, with a new model.
        """
        carried = set(msg.name)
        found = [j for j in self._moving if j in carried]
        if not found:
            return False
        if self.ready:
            if self._discovered_at is not None and time.monotonic() - self._discovered_at > 1.0:
                self._discovered_at = None  # decided for good: no more checks per message
            if self._discovered_at is None or not set(found) > set(self.joint_names):
                return True
        self._model_kwargs["joint_names"] = found
        first = not self.ready
        self._serve(self.new_model())
        self._discovered_at = time.monotonic()
        how = "from the first joint states" if first else "again: a joint state carried more of them"
        self.get_logger().info(f"joints modelled {how}: {found} (set joint_names to choose them)")
        return True

    def _on_robot_description(self, msg: String) -> None:
        if self._urdf:
            if msg.data != self._urdf:
                self.reject("robot description changed", "restart the node to use the new URDF")
            return
        try:
            moving_joints(msg.data)
        except ValueError as exc:
            self.reject("cannot build the model from the robot description", str(exc))
            return
        self._urdf = msg.data
        if self.lifecycle_state in ("inactive", "active"):
            try:
                self._setup(msg.data)
            except ValueError as exc:  # e.g. joint_names not in this URDF
                self._urdf = ""
                self.reject("cannot build the model from the robot description", str(exc))

    # ---------------------------------------------------------------- LearnerNode hooks
    def new_model(self) -> SemiparametricInverseDynamics:
        return SemiparametricInverseDynamics(**self._model_kwargs)

    def check_model(self, model: SemiparametricInverseDynamics) -> None:
        """The model must be for this URDF's kinematics; with ``joint_names`` given, for those joints
        in that order (in ``auto`` mode a model brings its joints: they must be the URDF's)."""
        if not self._model_kwargs["urdf"]:
            raise ValueError("no robot description yet: a model cannot be checked against it")
        if not self.auto_joints:
            current = self._model_kwargs["joint_names"]
            if sorted(model.joint_names) != sorted(current):
                raise ValueError(f"model joints {model.joint_names} differ from this node's {current}")
            if model.joint_names != list(current):
                raise ValueError(f"model joint order {model.joint_names} differs from this node's {current}")
        difference = kinematic_difference(self._model_kwargs["urdf"], model.regressor.urdf)
        if difference:
            raise ValueError(f"model is for another robot than this node's URDF: {difference}")

    def parameter_conflicts(self, model: SemiparametricInverseDynamics) -> list[str]:
        wanted = self._model_kwargs
        saved: dict[str, Any] = {"mode": model.mode, "prior": model.prior, "forgetting": model.forgetting}
        if model.feature_map is not None and wanted["mode"] != "parametric":
            saved["n_features"] = model.feature_map.n_features
        saved["friction"] = tuple(sorted(model.friction.terms)) if model.friction is not None else ()
        wanted = {**wanted, "friction": tuple(sorted(wanted["friction"]))}
        return [
            f"{name}: checkpoint {value!r}, parameter {wanted[name]!r}"
            for name, value in saved.items()
            if value != wanted[name]
        ]

    def model_swapped(self, model: SemiparametricInverseDynamics) -> None:
        self.shadow.swapped()
        with self.metrics.lock:  # the new model's alone from here on, after half a window
            if self.metrics.accumulator is not None:
                acc = self.metrics.accumulator
                acc.restart(self.metrics.now(), acc.window_s / 2)
        if not self.ready:
            return
        if model.joint_names != self.joint_names:  # auto mode: a model brings its joints
            self._take_joints(model.joint_names)
            self.get_logger().info(f"joints modelled now: {self.joint_names} (from the loaded model)")
        else:  # another model: the last model's errors say nothing about it
            self.guard.forget_errors()
            if self.contact is not None:
                self.contact.reset()

    def reload(self, path: Any, digest: str | None = None, as_is: bool = False) -> Outcome:
        if self.ready and self.shadow.shadow_on:  # in shadow first: swapped in only if better
            return self.shadow.offer(path, digest, as_is)
        if self.ready:
            replaced = self.serving.model
            outcome = super().reload(path, digest, as_is)
            if outcome.ok:  # the replaced model in canary (canary_window_s)
                self.shadow.swapped_by_force(replaced, path)
            return outcome
        if not self._model_kwargs["urdf"]:
            return self.serving.failed("no robot description yet: cannot load a model")
        try:  # auto joints not decided yet: the model decides them
            model, key = self.serving.read_with_digest(path, digest)
        except (ModelFileError, ValueError, OSError) as exc:  # UnsafePathError: a FIFO, a device
            return self.serving.failed(f"model reload from {path} failed: {exc}")
        with self.serving.replacing() as closed, self.model_lock:
            if closed:
                return self.serving.failed(f"model reload from {path} refused: {closed}")
            self._serve(model)
            self.serving.swap_loaded(model, path, key)  # version, bookkeeping
        return Outcome(True, f"loaded {path}: joints {model.joint_names}")

    def on_cleanup(self, state: Any) -> Any:
        result = super().on_cleanup(state)
        self.ready = False
        self.joint_names = []
        self._discovered_at = None
        if self.auto_joints:
            self._model_kwargs["joint_names"] = None
        return result

    # ---------------------------------------------------------------- parameters
    def apply_parameter(self, name: str, value: Any) -> None:
        super().apply_parameter(name, value)
        self.shadow.apply_parameter(name)
        if name == "learning":
            self.learning = bool(value)
        elif name == "learning_period_s":
            self.learner.min_interval = float(value)
        elif name == "learn_max_hz":
            with self.model_lock:
                self._guard_kwargs["learn_max_hz"] = float(value)
                guard = getattr(self, "guard", None)  # none before the joints are known
                if guard is not None:
                    guard.learn_max_hz = float(value)

    # ---------------------------------------------------------------- inputs
    def _parse(self, msg: JointState) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
        """``(q, q̇, τ)`` of the model's joints in ``msg``; None when refused (counted)."""
        try:
            return self.joints.state(msg.name, self.joint_names, msg.position, msg.velocity, msg.effort)
        except RefusedSampleError as exc:
            self.reject(exc.reason, exc.detail)
            return None

    def _on_acceleration(self, msg: JointState) -> None:
        self.stats.arrived("acceleration")
        acc = np.asarray(msg.velocity, dtype=np.float64)
        if acc.shape != (len(msg.name),) or not np.all(np.isfinite(acc)):
            self.reject("bad accelerations", "velocity field must hold one finite value per name")
            return
        self._accelerations.update(zip(msg.name, acc.tolist(), strict=True))

    def _on_joint_states(self, items: list[tuple[JointState, dict[str, Any]]]) -> None:
        """Answer the joint states that were waiting (oldest first), then queue them for learning.

        Each message is checked and admitted in order (the guard's acceleration filter is a stream),
        the admitted ones are predicted as one block (:meth:`SemiparametricInverseDynamics.prepare`),
        and each gets its own answer with its own header."""
        t0 = time.perf_counter()
        admitted = [row for msg, info in items if (row := self._admit(msg, info)) is not None]
        if not admitted:
            return
        with self.model_lock:
            model, guard = self.serving.model, self.guard  # once: what answers and learns this block
            try:
                prepared = model.prepare(
                    np.stack([r.q for r in admitted]),
                    np.stack([r.qd for r in admitted]),
                    np.stack([r.admitted.qdd for r in admitted]),
                )
            except ValueError as exc:  # the model validates again; should not happen here
                self.reject("model rejected input", str(exc))
                return
            prepared = self.bounds.prepared(model, prepared)
        # answer first; a message nobody subscribes to is not built (a publish costs 50-110 µs here)
        as_states = self.torque_pub.get_subscription_count() > 0
        arrays = self.torque_array_pub
        as_arrays = arrays is not None and arrays.get_subscription_count() > 0
        for row, torque in zip(admitted, prepared.torque, strict=True):
            effort = torque.tolist()
            if as_states:
                answer = JointState(header=row.msg.header, name=self.joint_names, effort=effort)
                self.torque_pub.publish(answer)
            if as_arrays:
                arrays.publish(Float64MultiArray(data=effort))
        done_ns = time.time_ns()
        self.stats.timed("answer", (time.perf_counter() - t0) / len(admitted))
        for row in admitted:
            if row.received_ns:  # the middleware's reception time: waiting in the queue included
                self.stats.timed("receive to publish", max(0.0, (done_ns - row.received_ns) * 1e-9))
        self.answer_calls += 1
        self.answered += len(admitted)
        contact = self._detect_contact(admitted, prepared.torque)
        learn = [k for k, row in enumerate(admitted) if row.tau is not None and row.learning]
        if learn:
            self.gate.queue(model, guard, prepared, [admitted[k] for k in learn], learn, contact)

    def _admit(self, msg: JointState, info: dict[str, Any] | None) -> _Admitted | None:
        """One joint state checked and admitted by the guard; None when it is not answered (counted)."""
        self.stats.arrived("joint_states")
        if not self._model_kwargs["urdf"]:
            self.reject(
                "no robot description yet",
                f"waiting for the URDF on {self.params['robot_description_topic']}",
            )
            return None
        if not self.ready or self._discovered_at is not None:
            with self.model_lock:
                if not self._discover_joints(msg) and not self.ready:
                    self.reject(
                        "no modelled joints", f"none of {list(msg.name)[:8]} is a moving joint of the URDF"
                    )
                    return None
        if self.joint_names and not set(self.joint_names).intersection(msg.name):
            self.other_joints += 1  # partial joint states of another source (e.g. the gripper's)
            return None
        stamp, learning = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec, self.learning
        parsed = self._parse(msg)
        if parsed is not None and learning and parsed[2] is None:
            self.reject("no effort", "learning is on but the message has no effort")
            parsed = None
        qdd = None
        if parsed is not None and self.params["acceleration_topic"]:
            if all(j in self._accelerations for j in self.joint_names):
                qdd = np.array([self._accelerations[j] for j in self.joint_names])
            else:
                self.reject("no acceleration yet", "waiting for accelerations of every joint")
                parsed = None
        if parsed is None:
            with self.model_lock:
                self.guard.seen(stamp)  # refused, but it arrived: not a gap
            return None
        q, qd, tau = parsed
        with self.model_lock:
            try:
                admitted = self.guard.admit(stamp, q, qd, tau if learning else None, qdd)
            except RefusedSampleError as exc:
                self.reject(exc.reason, exc.detail)
                return None
        received = info.get("received_timestamp") if isinstance(info, dict) else None
        return _Admitted(msg, q, qd, tau, admitted, learning, int(received or 0), stamp)

    def _detect_contact(self, rows: list[_Admitted], predicted: np.ndarray) -> Detection:
        """Contact detection on the answered block (:meth:`ContactMonitor.detect`): per row, whether
        it may be learned, whether it is in contact, whether only a slow load holds it."""
        if self.contact is None:
            n = len(rows)
            return Detection(np.ones(n, dtype=bool), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool))
        with self.model_lock:
            return self.contact.detect(rows, predicted, self.serving.model.regressor)

    def _learn_block(self, block: list[ToLearn]) -> None:
        """Learn the queued samples of the serving model as one block (on the learning thread).

        The samples are judged for a slow load first (:meth:`LearningQueue.take`); the update is
        staged on drafts without the lock (answers go on meanwhile) and committed under it; samples
        queued for a model that has since been replaced (reload, rollback, reset) are not learned
        (counted)."""
        t0 = time.perf_counter()
        serving = self.serving
        with self.model_lock:
            model = serving.model
        mine = self.gate.take(model, block)
        if not mine:
            return
        try:
            prepared = PreparedSamples.stack(
                [model.prepare(*item.states) if item.prepared is None else item.prepared for item in mine]
            )
            staged = model.stage(prepared, np.concatenate([item.tau for item in mine]), solve_weights=True)
        except ValueError as exc:
            self.reject("model rejected input", str(exc))
            return
        samples = sum(len(item.tau) for item in mine)  # an item may hold several samples
        with self.model_lock:
            if serving.model is not model or staged.base_samples != model.n_samples:
                self.not_learned[MODEL_REPLACED] = self.not_learned.get(MODEL_REPLACED, 0) + samples
                return
            if self._learning_ended:  # the learning thread outlived its stop: the final checkpoint is made
                self.not_learned[LEARNING_STOPPED] = self.not_learned.get(LEARNING_STOPPED, 0) + samples
                return
            model.commit(staged)
            if self.contact is not None and any(item.prepared is None for item in mine):
                self.contact.restart_thresholds()  # a load's samples, learned at once: a new model
            serving.count_updates(samples)
            self._learned_since += samples
        if self.contact is not None and self.contact.slow is not None:
            self.contact.slow.after_learning(model, prepared, [item.t for item in mine if item.t is not None])
        self.stats.timed("learn block", time.perf_counter() - t0)
        self._score_learned(model, prepared, np.concatenate([item.tau for item in mine]))
        self.shadow.feed(model, prepared, np.concatenate([item.tau for item in mine]))

    # ---------------------------------------------------------------- ~/learning_metrics
    def _measure_joints(self, names: list[str]) -> None:
        """A fresh prequential window for these joints (the serving model and the URDF alone)."""
        metrics = self.metrics
        with metrics.lock:
            window = float(self.params["metrics_window_s"])
            metrics.accumulator = PrequentialRegression(
                len(names), window, ("model", "baseline"), min_samples=MIN_WINDOW_SAMPLES
            )
            metrics.names = list(names)
            forgetting = self._model_kwargs["forgetting"]
            metrics.forgetting = (
                1.0 if forgetting == "auto" else float(forgetting)
            )  # until a sample is scored

    def _score_learned(
        self, model: SemiparametricInverseDynamics, prepared: PreparedSamples, tau: np.ndarray
    ) -> None:
        """Score the torques answered for samples just learned (predicted before learning them) and
        what the URDF alone would have answered, against the measured ``tau`` (learning thread)."""
        metrics = self.metrics
        try:
            baseline = model.nominal_torque(prepared)
            with metrics.lock:
                if metrics.accumulator is None or metrics.accumulator.n_outputs != tau.shape[1]:
                    return  # the joints changed meanwhile
                metrics.accumulator.add(metrics.now(), tau, model=prepared.torque, baseline=baseline)
                metrics.forgetting = model.serving_forgetting
        except ValueError as exc:  # NaN/Inf somewhere: not scored, the window untouched
            self.reject("not scored in learning metrics", str(exc))

    def learning_metrics(self) -> LearningMetrics:
        metrics = self.metrics
        report = metrics.accumulator.report(metrics.now())
        msg = message_from_report(report, metrics.names, metrics.accumulator.window_s, baseline="baseline")
        msg.forgetting = metrics.forgetting
        return msg

    def _learning_failed(self, exc: BaseException) -> None:
        self.reject("internal error", f"learning a block failed: {type(exc).__name__}: {exc}")
        self.get_logger().error(f"learning a block failed, learning goes on: {exc!r}")

    def realtime_request(self) -> tuple[int, list[int]]:
        """``realtime_priority`` for the answering path; the learning thread stays normal."""
        learning = self.learner.native_id
        return int(self.params["realtime_priority"]), [] if learning is None else [learning]

    def end_trials(self, why: str) -> None:
        self.shadow.end(why)

    def settle(self) -> None:
        """Learn what is queued before a final checkpoint (cleanup); the learning thread goes on."""
        if not self.learner.wait_idle(timeout=10.0):
            self.get_logger().warning("the learning thread has not learned what was queued after 10 s")

    def shutdown(self) -> None:
        """The final checkpoint, with every sample queued for learning learned first; the learning
        thread ends (process exit, the shutdown transition: nothing configures the node again); a
        block it still learns after its 10 s is not committed (counted ``learning thread stopped``).
        No model replaces the serving one while the queue is learned."""
        self.end_serving()
        self._stop_learning()
        self._learning_ended = True
        super().shutdown()

    def destroy_node(self) -> None:
        self._stop_learning()
        super().destroy_node()

    def _stop_learning(self) -> None:
        learner = getattr(self, "learner", None)  # None: the constructor failed before it existed
        if learner is not None and not learner.stop(timeout=10.0):
            self.get_logger().warning("the learning thread is still running after 10 s")

    def forget_inputs(self) -> None:
        if self.ready:
            self.guard.reset()
            if self.contact is not None:
                self.contact.reset()
        self._accelerations.clear()

    # ---------------------------------------------------------------- services
    def _on_predict(
        self, request: PredictTorques.Request, response: PredictTorques.Response
    ) -> PredictTorques.Response:
        """The torques for a requested state, checked as a joint state of the stream is (finite, the
        joints' position and velocity limits widened by ``limit_margin``) and for an absurd
        acceleration: a refused request is answered ``success: false`` with the reason, counted."""
        names = list(request.name)
        try:
            q = self.joints.pick(names, self.joint_names, request.position, "position")
            qd = self.joints.pick(names, self.joint_names, request.velocity, "velocity")
            qdd = self.joints.pick(names, self.joint_names, request.acceleration, "acceleration")
            with self.model_lock:
                self.guard.check_request(q, qd, qdd)
                parts = self.model.predict(q, qd, qdd, return_parts=True)
                parts = self.bounds.parts(self.model, parts)
            if not all(np.all(np.isfinite(part)) for part in parts.values()):
                raise RefusedSampleError("prediction not finite", "the model's torques overflow")
        except RefusedSampleError as exc:
            self.reject(exc.reason, f"~/predict: {exc.detail}")
            response.success, response.message = False, f"refused ({exc.reason}): {exc.detail}"
            return response
        except (KeyError, ArithmeticError, ValueError) as exc:
            self.reject("bad predict request", str(exc))
            response.success, response.message = False, str(exc)
            return response
        response.success, response.message = True, ""
        response.name = list(self.joint_names)
        response.effort = parts["torque"].tolist()
        response.parametric = parts["parametric"].tolist()
        response.residual = parts["residual"].tolist()
        return response

    def checkpoint(self) -> bool:
        return self.ready and super().checkpoint()  # no model, nothing to write, before the URDF

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        problems = super().diagnostic_problems() + self.shadow.diagnostic_problems()
        if not self.ready:
            return problems
        with self.model_lock:
            learned, outliers = self._learned_since, self._outliers_since
            self._learned_since = self._outliers_since = 0
            restarts, missed = dict(self.guard.restarts), self.guard.missed
        if outliers > learned:
            problems.append(
                (
                    DiagnosticStatus.WARN,
                    f"{outliers} of {learned + outliers} samples were outliers: has the robot changed?",
                )
            )
        new = {k: n - self._restarts_published.get(k, 0) for k, n in restarts.items()}
        new = {k: n for k, n in new.items() if n > 0}
        if new:
            causes = ", ".join(f"{k}: {n}" for k, n in sorted(new.items()))
            problems.append((DiagnosticStatus.WARN, f"acceleration filter restarted ({causes})"))
        if missed > self._missed_published:
            problems.append(
                (DiagnosticStatus.WARN, f"{missed - self._missed_published} joint states missed (stamp gaps)")
            )
        self._restarts_published, self._missed_published = restarts, missed
        if self.contact is not None:
            problems += self.contact.diagnostic_problems()
        return problems + self.starvation.diagnostic_problems()

    def diagnostic_values(self) -> dict[str, str]:
        values = super().diagnostic_values()
        with self.model_lock:
            values["samples learned"] = (
                str(self.model.n_samples) if self.ready else "no robot description yet"
            )
            if self.ready:
                values["model size [kB]"] = f"{self.model.nbytes / 1e3:.1f}"
                values["forgetting"] = forgetting_text(self.model)
                values["joint states missed (stamp gaps)"] = str(self.guard.missed)
                values.update(self.bounds.diagnostics())
                for cause, n in sorted(self.guard.restarts.items()):
                    values[f"acceleration filter restarts: {cause}"] = str(n)
            for reason, n in sorted(self.not_learned.items()):
                values[f"not learned: {reason}"] = str(n)
        learner = self.learner
        calls = self.answer_calls
        values["joint states answered"] = str(self.answered)
        values["answered per callback"] = f"{self.answered / calls:.2f}" if calls else "0"
        values["real-time scheduling"] = self.realtime
        values["learning queue"] = str(learner.pending)  # answered, not learned yet (in blocks of samples)
        values["learned blocks"] = str(learner.blocks)
        values["mean block size"] = f"{learner.items / learner.blocks:.2f}" if learner.blocks else "0"
        values["largest block"] = str(learner.largest_block)
        values["joint states without modelled joints"] = str(self.other_joints)
        values["joints modelled"] = ", ".join(self.joint_names) or "not yet decided"
        values["learning"] = str(self.learning)
        if self.contact is not None:
            values.update(self.contact.diagnostic_values())
        values.update(self.starvation.diagnostic_values())
        values.update(self.shadow.diagnostic_values())
        return values


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``inverse_dynamics`` executable."""
    return run_node(InverseDynamicsNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
