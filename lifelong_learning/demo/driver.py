"""The demo's own ROS 2 node: it plays the camera, the teacher and the robot, and collects the answers.

:class:`DemoDriver` publishes ``image``, ``teacher_label`` and ``joint_states``; it keeps, by
header stamp, every ``prediction`` and ``predicted_torque`` answered (with the time it
arrived), the per-showing answers on ``showing`` and the robot's questions, inverse_dynamics'
``external_torque`` and ``contact``, the last ``/diagnostics`` of every
node and the models announced on ``tuned_model``;
:meth:`DemoDriver.call` calls a service and :meth:`DemoDriver.run_goal` runs an action goal
from the demo's thread while :func:`running_driver` spins the node in the background.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Bool, String

from lifelong_learning.action import TuneModel
from lifelong_learning.msg import Prediction, Query, ShowingAnswer
from lifelong_learning.nodes.base import status_node
from lifelong_learning.vision.image_conversion import numpy_to_image

# Topic names (relative, remappable), as in config/*.yaml.
IMAGE, TEACHER_LABEL, PREDICTIONS = "image", "teacher_label", "prediction"
SHOWINGS, QUERIES = "showing", "/object_recognition/query"  # one answer per showing; the robot's questions
JOINT_STATES, PREDICTED_TORQUES = "joint_states", "predicted_torque"
TUNED_MODEL = "tuned_model"
EXTERNAL_TORQUE, CONTACT = "external_torque", "contact"  # inverse_dynamics' contact detection
TUNE_ACTION = "/nystrom_tuner/tune"
LABELED_FEATURES = "labeled_features"  # not used by the driver: the demo waits until it is recorded


def stamp_ns(stamp: Any) -> int:
    """A ``builtin_interfaces/Time`` in nanoseconds."""
    return int(stamp.sec) * 10**9 + int(stamp.nanosec)


def _set_stamp(header: Any, ns: int) -> None:
    header.stamp.sec, header.stamp.nanosec = divmod(int(ns), 10**9)


class DemoDriver(Node):
    """The node ``demo_driver``: publishers for the simulated sensors, the answers collected.

    Every collection is guarded by :attr:`lock` (the callbacks run on the executor's thread).
    ``say`` prints progress (tuning epochs, at most every 5 s).
    """

    def __init__(self, say: Callable[[str], None], **kwargs: Any) -> None:
        super().__init__("demo_driver", **kwargs)  # kwargs: rclpy Node's (a context)
        self.lock = threading.Lock()
        self.predictions: dict[int, tuple[str, float]] = {}  # stamp ns → (label, receive time)
        self.showings: dict[int, tuple[str, int]] = {}  # stamp ns of a frame → (its showing's answer, id)
        self.queries: list[Query] = []  # the robot's questions, in arrival order
        # stamp ns → (effort, receive time here, the time inverse_dynamics published it: DDS source time)
        self.torques: dict[int, tuple[np.ndarray, float, float]] = {}
        self.diagnostics: dict[str, dict[str, str]] = {}  # node → its last diagnostic values
        self.diagnostics_received: dict[str, int] = {}  # node → statuses received
        self.announced: list[str] = []  # tuned_model paths
        # external_torque (stamp ns, effort) and contact (flag, external_torque messages received
        # before it), in arrival order: Bool has no header (demo/contact.py pairs them)
        self.external: list[tuple[int, np.ndarray]] = []
        self.contact_flags: list[tuple[bool, int]] = []
        self._say = say
        self._last_progress = 0.0
        self.image_pub = self.create_publisher(Image, IMAGE, qos_profile_sensor_data)
        self.label_pub = self.create_publisher(String, TEACHER_LABEL, 10)
        # Reliable, as ros2_control's joint_state_broadcaster publishes; the node itself
        # subscribes best-effort (sensor data) and the recorder reliably.
        self.joint_pub = self.create_publisher(JointState, JOINT_STATES, 100)
        latched = QoSProfile(depth=5, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(Prediction, PREDICTIONS, self._on_prediction, 100)
        self.create_subscription(ShowingAnswer, SHOWINGS, self._on_showing, 100)
        self.create_subscription(Query, QUERIES, self._on_query, 10)
        self.create_subscription(JointState, PREDICTED_TORQUES, self._on_torques, 1000)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)
        self.create_subscription(JointState, EXTERNAL_TORQUE, self._on_external, 1000)
        self.create_subscription(Bool, CONTACT, self._on_contact, 1000)
        self.create_subscription(String, TUNED_MODEL, self._on_model, latched)
        # Action clients are made here, before the executor spins, and kept: rclpy's ActionClient
        # registers itself with the node before it has its lock, so one made (or destroyed) while
        # another thread spins can crash that thread (AttributeError: no attribute '_lock').
        self.actions = {TUNE_ACTION: ActionClient(self, TuneModel, TUNE_ACTION)}

    # ------------------------------------------------------------------ answers
    def _on_prediction(self, msg: Prediction) -> None:
        with self.lock:
            self.predictions[stamp_ns(msg.header.stamp)] = (msg.label, time.time())

    def _on_showing(self, msg: ShowingAnswer) -> None:
        with self.lock:
            self.showings[stamp_ns(msg.header.stamp)] = (msg.label, int(msg.showing_id))

    def _on_query(self, msg: Query) -> None:
        with self.lock:
            self.queries.append(msg)

    def _on_torques(self, msg: JointState, info: Any) -> None:
        source = info.get("source_timestamp") if isinstance(info, dict) else None
        received = time.time()
        with self.lock:
            self.torques[stamp_ns(msg.header.stamp)] = (
                np.array(msg.effort),
                received,
                int(source) * 1e-9 if source else received,
            )

    def _on_external(self, msg: JointState) -> None:
        with self.lock:
            self.external.append((stamp_ns(msg.header.stamp), np.array(msg.effort)))

    def _on_contact(self, msg: Bool) -> None:
        with self.lock:
            self.contact_flags.append((bool(msg.data), len(self.external)))

    def contact_record(
        self, quiet_s: float = 1.0, cap_s: float = 10.0
    ) -> tuple[list[tuple[int, np.ndarray]], list[tuple[bool, int]]]:
        """Copies of :attr:`external` and :attr:`contact_flags` once neither has grown for ``quiet_s``
        (or ``cap_s`` passed)."""
        deadline = time.monotonic() + cap_s
        sizes, changed = (-1, -1), time.monotonic()
        while time.monotonic() < deadline:
            with self.lock:
                now = (len(self.external), len(self.contact_flags))
            if now != sizes:
                sizes, changed = now, time.monotonic()
            elif time.monotonic() - changed >= quiet_s:
                break
            time.sleep(0.05)
        with self.lock:
            return list(self.external), list(self.contact_flags)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        with self.lock:
            for status in msg.status:
                node = status_node(status.name)
                self.diagnostics[node] = {kv.key: kv.value for kv in status.values}
                self.diagnostics_received[node] = self.diagnostics_received.get(node, 0) + 1

    def _on_feedback(self, msg: Any) -> None:
        feedback = msg.feedback
        if feedback.phase != "tuning" or not feedback.epochs or time.monotonic() - self._last_progress < 5.0:
            return
        self._last_progress = time.monotonic()
        eta = "" if math.isnan(feedback.eta_s) else f", about {feedback.eta_s:.0f} s left"
        self._say(f"tuner: {feedback.objective} epoch {feedback.epoch}/{feedback.epochs}{eta}")

    def _on_model(self, msg: String) -> None:
        with self.lock:
            self.announced.append(msg.data)

    def nodes_reporting(self) -> set[str]:
        """The nodes whose diagnostics arrived."""
        with self.lock:
            return set(self.diagnostics)

    def diagnostics_now(self) -> dict[str, dict[str, str]]:
        """A copy of the last diagnostics of every node."""
        with self.lock:
            return dict(self.diagnostics)

    def graph_view(self, node: str) -> str:
        """What this node's graph shows of ``node``: whether it is discovered and whether its
        ``/diagnostics`` publisher is (a node that is seen, publisher and all, but whose statuses
        never arrive is stuck, or its messages are lost; one not seen at all was never discovered)."""
        names = {name for name, _ in self.get_node_names_and_namespaces()}
        publishers = {info.node_name for info in self.get_publishers_info_by_topic("/diagnostics")}
        seen = "in the graph" if node in names else "not in the graph"
        return f"{seen}, its /diagnostics publisher {'seen' if node in publishers else 'not seen'}"

    def fresh_diagnostics(self, nodes: Sequence[str], timeout: float = 10.0) -> dict[str, dict[str, str]]:
        """:meth:`diagnostics_now` once each of ``nodes`` has published a status after this call (or
        ``timeout`` s passed): what they say now, not what they said a period ago."""
        with self.lock:
            before = {n: self.diagnostics_received.get(n, 0) for n in nodes}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if all(self.diagnostics_received.get(n, 0) > k for n, k in before.items()):
                    break
            time.sleep(0.05)
        return self.diagnostics_now()

    def model_version(self, name: str) -> int:
        """The model version node ``name`` last reported in its diagnostics (-1: none yet)."""
        with self.lock:
            return int(self.diagnostics.get(name, {}).get("model version", "-1"))

    def answered_predictions(self, stamps: Sequence[int]) -> dict[int, tuple[str, float] | None]:
        """The prediction (label, receive time) answering each image stamp, None if none yet."""
        with self.lock:
            return {s: self.predictions.get(s) for s in stamps}

    def answered_showings(self, stamps: Sequence[int]) -> dict[int, tuple[str, int] | None]:
        """The per-showing answer (label, showing id) published after each frame stamp, None if none."""
        with self.lock:
            return {s: self.showings.get(s) for s in stamps}

    def questions_about(self, showing_ids: set[int]) -> list[Query]:
        """The questions received about any of ``showing_ids``."""
        with self.lock:
            return [q for q in self.queries if int(q.showing_id) in showing_ids]

    def answered_torques(self, stamps: Sequence[int]) -> list[tuple[np.ndarray, float, float] | None]:
        """The predicted torques (effort, receive time, publish time of the answer) answering each
        joint-state stamp, or None."""
        with self.lock:
            return [self.torques.get(int(s)) for s in stamps]

    def settled_torques(
        self, stamps: Sequence[int], quiet_s: float = 1.0, cap_s: float = 30.0
    ) -> list[tuple[np.ndarray, float, float] | None]:
        """:meth:`answered_torques` once no answer to ``stamps`` has arrived for ``quiet_s`` (or
        every stamp is answered, or ``cap_s`` passed): answers still in this process's queue are
        counted, so a backlog here is not reported as the node's missing answers."""
        wanted = {int(s) for s in stamps}
        deadline = time.monotonic() + cap_s
        count, changed = -1, time.monotonic()
        while time.monotonic() < deadline:
            with self.lock:
                now_count = sum(1 for s in wanted if s in self.torques)
            if now_count != count:
                count, changed = now_count, time.monotonic()
            if count == len(wanted) or time.monotonic() - changed >= quiet_s:
                break
            time.sleep(0.05)
        return self.answered_torques(stamps)

    # ------------------------------------------------------------------ sensors
    def publish_frame(self, frame: np.ndarray) -> int:
        """Publish an RGB camera frame stamped now; returns the stamp (ns)."""
        msg = numpy_to_image(frame, "rgb8", message=Image())
        now = time.time_ns()
        _set_stamp(msg.header, now)
        msg.header.frame_id = "camera"
        self.image_pub.publish(msg)
        return now

    def publish_label(self, label: str) -> None:
        """What the teacher says: the name of the object in view ("" for none)."""
        self.label_pub.publish(String(data=label))

    def publish_joint_state(
        self, names: list[str], q: np.ndarray, qd: np.ndarray, tau: np.ndarray, stamp: int
    ) -> None:
        """Publish one joint state (measured efforts ``tau``) stamped ``stamp`` (ns)."""
        msg = JointState(name=names, position=q.tolist(), velocity=qd.tolist(), effort=tau.tolist())
        _set_stamp(msg.header, stamp)
        self.joint_pub.publish(msg)

    # ------------------------------------------------------------------ services
    def call(self, srv_type: Any, name: str, request: Any, timeout: float = 30.0) -> Any:
        """Call a service from this (non-executor) thread; RuntimeError on timeout."""
        client = self.create_client(srv_type, name)
        try:
            if not client.wait_for_service(timeout_sec=timeout):
                raise RuntimeError(f"service {name} not available")
            future = client.call_async(request)
            deadline = time.monotonic() + timeout
            while not future.done():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"service {name} did not answer within {timeout:.0f} s")
                time.sleep(0.02)
            return future.result()
        finally:
            self.destroy_client(client)

    def run_goal(self, name: str, goal: Any, timeout: float = 600.0) -> tuple[bool, Any]:
        """Send a goal to the action ``name`` (one of :attr:`actions`) and wait for its result
        (feedback: tuning epochs, every 5 s at most); ``(accepted, result)``, result None when the
        goal was rejected. RuntimeError on timeout."""
        client = self.actions[name]
        if not client.wait_for_server(timeout_sec=30.0):
            raise RuntimeError(f"action {name} not available")
        sent = client.send_goal_async(goal, feedback_callback=self._on_feedback)
        handle = self._wait(sent, 30.0, f"action {name} did not answer the goal")
        if not handle.accepted:
            return False, None
        return True, self._wait(handle.get_result_async(), timeout, f"action {name} did not finish").result

    @staticmethod
    def _wait(future: Any, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while not future.done():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} within {timeout:.0f} s")
            time.sleep(0.05)
        return future.result()


@contextmanager
def running_driver(say: Callable[[str], None]) -> Iterator[DemoDriver]:
    """rclpy initialized and a :class:`DemoDriver` spinning in the background.

    One thread and a single-threaded executor: the callbacks are short (they file an answer),
    and rclpy's MultiThreadedExecutor costs far more per message (its spinning thread alone took
    about two thirds of a core in the demo's robot phase, measured with py-spy), which made this
    process read the answers seconds late on 2 cores."""
    rclpy.init()
    executor = SingleThreadedExecutor()
    driver: DemoDriver | None = None
    spinner: threading.Thread | None = None
    try:
        driver = DemoDriver(say)
        executor.add_node(driver)
        spinner = threading.Thread(target=executor.spin, name="demo-driver-spin", daemon=True)
        spinner.start()
        yield driver
    finally:
        executor.shutdown()  # does not wait for a callback in progress: the spinning thread's join does
        if spinner is not None:
            spinner.join(5.0)
        if driver is not None:
            for client in driver.actions.values():  # not spinning any more: safe to destroy
                client.destroy()
            driver.destroy_node()
        rclpy.try_shutdown()
