"""The nystrom_tuner node's ~/tune action across processes: goals checked before they are
accepted, feedback, a queue, cancel at any time without a file left behind, the URDF from
robot_description, and the promotion gate: a better model reaches an object_recognition node in
another process as bytes (no shared path, no path announcement), a worse one never does. A model
of another offline method (SLKL's learned map), from a goal or from ``lifelong-learning tune``, is
hot-reloaded by that node, which keeps learning on top of it.

One tuner process and one object_recognition process serve the module; the tests run in file order.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import (
    IMMEDIATE_SWAP,
    DiagnosticsReader,
    call_service,
    new_context,
    new_executor,
    node_argv,
    spin_until,
)

from lifelong_learning.io.bags import write_joint_states, write_labeled_features
from lifelong_learning.nodes.supervisor import NodeProcess
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text

pytestmark = pytest.mark.graph

RNG = np.random.default_rng(0)
X = np.vstack([RNG.normal(0, 1, (30, 4)), RNG.normal(3, 1, (30, 4))])
LABELS = ["a"] * 30 + ["b"] * 30
SUCCEEDED, CANCELED, ABORTED = 4, 5, 6  # action_msgs/GoalStatus


@dataclass
class Graph:
    """The tuner and object_recognition processes, and a peer that talks to both."""

    root: Path
    executor: Any
    peer: Any
    client: Any
    tuner: NodeProcess
    learner: NodeProcess
    diag: DiagnosticsReader  # both nodes' statuses and counters
    progress: list[dict] = field(default_factory=list)
    model_files: list[Any] = field(default_factory=list)

    def send(self, feedback: list | None = None, **fields: Any) -> Any:
        """Send a goal (classification, tiny sizes unless given); the goal handle, accepted or not."""
        from lifelong_learning.action import TuneModel

        goal = TuneModel.Goal(**{"task": "classification", "centers": 8, "epochs": 3, **fields})
        kept = feedback if feedback is not None else []
        sent = self.client.send_goal_async(goal, feedback_callback=lambda m: kept.append(m.feedback))
        assert spin_until(self.executor, sent.done, 30), self.tuner.log()[-2000:]
        return sent.result()

    def result(self, handle: Any, timeout: float = 120.0) -> tuple[int, Any]:
        future = handle.get_result_async()
        assert spin_until(self.executor, future.done, timeout), self.tuner.log()[-2000:]
        return future.result().status, future.result().result

    def rejected(self, reason: str, **fields: Any) -> str:
        """Send a goal that must be rejected; the reason the tuner published."""
        n = len(self.progress)
        assert not self.send(**fields).accepted
        assert spin_until(
            self.executor, lambda: any(p["state"] == "rejected" for p in self.progress[n:]), 10
        ), self.progress[n:]
        published = next(p for p in self.progress[n:] if p["state"] == "rejected")
        assert published["reason"] == reason, published
        return published["message"]


@pytest.fixture(scope="module")
def graph(built_interfaces, tmp_path_factory):
    from lifelong_learning.action import TuneModel
    from lifelong_learning.msg import ModelFile
    from rclpy.action import ActionClient
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String

    root = tmp_path_factory.mktemp("tuner")
    write_labeled_features(root / "good", X, LABELS)
    tuner = NodeProcess(
        node_argv(
            "nystrom_tuner",
            *(
                "-p",
                f"output_dir:={root / 'tuner_models'}",
                "-p",
                "device:=cpu",
                "-p",
                "diagnostics_period_s:=0.2",
            ),
            *("-p", "model_topic:=''", "-p", "max_queued_goals:=1"),  # models travel as bytes only
            # no early stop: a long goal runs until cancelled (the queue test needs it running)
            *("-p", "patience:=1000000"),
        ),
        log_path=root / "tuner.log",
    )
    learner = NodeProcess(
        node_argv(
            "object_recognition",
            *("-p", f"model_directory:={root / 'robot_models'}", "-p", "diagnostics_period_s:=0.2"),
            *IMMEDIATE_SWAP,
        ),
        log_path=root / "object_recognition.log",
    )
    try:
        with new_context() as context, new_executor(context) as executor:
            peer = Node("tuner_peer", context=context)
            client = ActionClient(peer, TuneModel, "/nystrom_tuner/tune")
            g = Graph(root, executor, peer, client, tuner, learner, DiagnosticsReader(peer))
            progress = peer.create_subscription(
                String, "tuning_progress", lambda m: g.progress.append(json.loads(m.data)), 100
            )
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
            peer.create_subscription(ModelFile, "tuned_model_data", g.model_files.append, latched)
            executor.add_node(peer)
            assert spin_until(executor, client.server_is_ready, 60), tuner.log()
            # a rejection is published once (volatile): its writer must have matched this reader
            assert spin_until(executor, lambda: progress.get_publisher_count() > 0, 60), tuner.log()
            assert spin_until(executor, lambda: "model version" in g.diag.values("object_recognition"), 60), (
                learner.log()
            )
            yield g
    finally:
        tuner.stop(timeout=30.0)
        learner.stop(timeout=30.0)


def test_invalid_goals_are_rejected_with_a_reason(graph):
    root = graph.root
    assert "task must be one of" in graph.rejected("invalid goal", bags=[str(root / "good")], task="juggling")
    assert "no such bag" in graph.rejected("invalid goal", bags=[str(root / "no_such_bag")])
    (root / "garbage").mkdir()
    (root / "garbage" / "metadata.yaml").write_text("rosbag2_bagfile_information: [oops")
    assert "bag" in graph.rejected("invalid goal", bags=[str(root / "garbage")])
    assert "max_epochs 1000" in graph.rejected("goal over limit", bags=[str(root / "good")], epochs=5000)
    message = graph.rejected("invalid goal", bags=[str(root / "good")], task="inverse-dynamics")
    assert "no URDF" in message and "robot_description" in message
    assert spin_until(
        graph.executor, lambda: graph.diag.rejected("nystrom_tuner", "invalid goal") == 4, 10
    ), graph.diag.values("nystrom_tuner")
    assert "no URDF" in graph.diag.values("nystrom_tuner").get("last rejected goal", "")


def test_a_goal_runs_with_feedback_and_its_model_reaches_the_learner_as_bytes(graph):
    feedback: list[Any] = []
    version = graph.diag.count("object_recognition", "model version")
    handle = graph.send(feedback, bags=[str(graph.root / "good")])
    assert handle.accepted
    status, result = graph.result(handle)
    assert status == SUCCEEDED and result.success and result.promoted, result.message
    assert result.metric == "error rate" and math.isnan(result.serving_error)  # nothing served before
    assert "no serving model to compare with" in result.message
    assert {"reading", "tuning"} <= {f.phase for f in feedback}, [f.phase for f in feedback]
    tuning = [f for f in feedback if f.phase == "tuning"]
    assert tuning[-1].epochs == 3 and tuning[-1].epoch >= 1 and math.isfinite(tuning[-1].value)
    report = json.loads(Path(result.report_path).read_text())
    assert report["promotion"]["promoted"] and report["promotion"]["n_samples"] > 0
    # the bytes, not the path: the learner's model_directory is not the tuner's output_dir
    assert spin_until(graph.executor, lambda: bool(graph.model_files), 10)
    sent = graph.model_files[-1]
    data = Path(result.out_path).read_bytes()
    assert bytes(sent.data) == data and sent.sha256 == hashlib.sha256(data).hexdigest()
    assert sent.kind == "incremental_rlsc" and sent.name == Path(result.out_path).name
    assert spin_until(
        graph.executor, lambda: graph.diag.count("object_recognition", "model version") > version, 20
    ), graph.learner.log()[-2000:]


def test_a_worse_candidate_is_not_announced_and_the_learner_keeps_serving(graph):
    from lifelong_learning.learners.rlsc import IncrementalRLSC

    root = graph.root
    serving = IncrementalRLSC(lambdas=1.0)
    serving.partial_fit(X, np.array(LABELS, dtype=object))
    serving.save(root / "serving.llm")
    swapped = ["b" if label == "a" else "a" for label in LABELS]  # taught wrong
    write_labeled_features(root / "swapped", X, swapped)
    write_labeled_features(root / "validation", X + RNG.normal(0, 0.1, X.shape), LABELS)
    sent_before = len(graph.model_files)
    version = graph.diag.count("object_recognition", "model version")
    handle = graph.send(
        bags=[str(root / "swapped")],
        serving_model=str(root / "serving.llm"),
        validation_bags=[str(root / "validation")],
    )
    status, result = graph.result(handle)
    assert status == SUCCEEDED and result.success and not result.promoted, result.message
    assert result.candidate_error > 0.5 > result.serving_error, result.message
    assert "not promoted" in result.message and Path(result.out_path).is_file()
    assert spin_until(
        graph.executor,
        lambda: "not better" in graph.diag.values("nystrom_tuner").get("last promotion decision", ""),
        10,
    )
    assert graph.diag.count("nystrom_tuner", "models not promoted") >= 1
    assert len(graph.model_files) == sent_before  # never announced
    spin_until(graph.executor, lambda: False, 1.0)
    assert graph.diag.count("object_recognition", "model version") == version  # predictions unchanged

    forced = graph.send(
        bags=[str(root / "swapped")],
        serving_model=str(root / "serving.llm"),
        validation_bags=[str(root / "validation")],
        force=True,
    )
    status, result = graph.result(forced)
    assert status == SUCCEEDED and result.promoted and "forced" in result.message, result.message
    report = json.loads(Path(result.report_path).read_text())
    assert report["promotion"]["forced"] is True


def _reloads_settled(graph: Graph, quiet_s: float = 1.0, timeout: float = 20.0) -> bool:
    """object_recognition's ``model version`` stayed the same for ``quiet_s`` of its statuses."""
    deadline = time.monotonic() + timeout
    version, since = graph.diag.count("object_recognition", "model version"), time.monotonic()
    while time.monotonic() < deadline:
        spin_until(graph.executor, lambda: False, 0.1)
        now = graph.diag.count("object_recognition", "model version")
        if now != version:
            version, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return True
    return False


def _keeps_learning(graph: Graph, before: int) -> None:
    """The object_recognition process, after a reload to a model of ``before`` samples, learns a
    taught sample on top of it (its ~/info counts it)."""
    from lifelong_learning.msg import LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo

    # the reloads settled: a sample taught to a model that another reload then replaces is not
    # learned (a job's model may come twice: announced by path and as bytes)
    assert _reloads_settled(graph), graph.learner.log()[-2000:]
    teacher = graph.peer.create_publisher(LabeledFeatures, "labeled_features", 10)
    info = graph.peer.create_client(GetClassifierInfo, "/object_recognition/info")
    try:
        assert call_service(graph.executor, info, GetClassifierInfo.Request()).samples_seen == before
        assert spin_until(graph.executor, lambda: teacher.get_subscription_count() > 0, 10)
        teacher.publish(LabeledFeatures(data=X[0].tolist(), label=LABELS[0]))

        def learned() -> bool:
            return call_service(graph.executor, info, GetClassifierInfo.Request()).samples_seen == before + 1

        assert spin_until(graph.executor, learned, 10), graph.learner.log()[-2000:]
    finally:
        graph.peer.destroy_publisher(teacher)
        graph.peer.destroy_client(info)


def test_a_goal_with_method_slkl_makes_a_model_the_learner_reloads_and_keeps_learning(graph):
    from lifelong_learning.learners.rlsc import IncrementalRLSC

    version = graph.diag.count("object_recognition", "model version")
    handle = graph.send(bags=[str(graph.root / "good")], method="slkl", centers=20)
    assert handle.accepted
    status, result = graph.result(handle)
    assert status == SUCCEEDED and result.promoted, result.message
    report = json.loads(Path(result.report_path).read_text())
    assert report["method"] == "slkl" and list(report["objectives"]) == ["slkl"]
    model = IncrementalRLSC.load(result.out_path)
    assert model.feature_map.kind == "slkl"
    assert model.feature_map.n_features == report["objectives"]["slkl"]["features"] <= 20
    assert spin_until(
        graph.executor, lambda: graph.diag.count("object_recognition", "model version") > version, 20
    ), graph.learner.log()[-2000:]
    _keeps_learning(graph, model.n_samples)
    assert "method must be one of" in graph.rejected(
        "invalid goal", bags=[str(graph.root / "good")], method="svm"
    )


def test_the_cli_with_method_slkl_makes_a_model_the_learner_reloads_and_keeps_learning(graph):
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String

    from lifelong_learning.cli import main
    from lifelong_learning.learners.rlsc import IncrementalRLSC

    out = graph.root / "robot_models" / "cli-slkl.npz"  # inside the learner's model_directory
    argv = ["tune", str(graph.root / "good"), "--task", "classification", "--method", "slkl"]
    # other candidates than the goal's (the same file would be the serving model already)
    assert main([*argv, "--centers", "15", "--device", "cpu", "--out", str(out), "--no-progress"]) == 0
    model = IncrementalRLSC.load(out)
    assert model.feature_map.kind == "slkl"
    version = graph.diag.count("object_recognition", "model version")
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    announce = graph.peer.create_publisher(String, "tuned_model", latched)
    try:
        announce.publish(String(data=str(out)))
        assert spin_until(
            graph.executor, lambda: graph.diag.count("object_recognition", "model version") > version, 20
        ), graph.learner.log()[-2000:]
    finally:
        graph.peer.destroy_publisher(announce)
    _keeps_learning(graph, model.n_samples)


def _rejections(graph: Any, since: int) -> list[dict]:
    """The tuner's ``rejected`` progress messages received since the ``since``-th."""
    return [p for p in graph.progress[since:] if p["state"] == "rejected"]


def test_goals_queue_and_cancel_at_any_time_leaves_no_file(graph):
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String

    log = PandaSimulation().run(6.0, seed=4, log_every=5)
    write_joint_states(graph.root / "arm", log["t"], JOINT_NAMES, log["q"], log["qd"], log["tau"])
    robot = Node("robot_state_publisher_stand_in", context=graph.peer.context)  # publishes the URDF latched
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    robot.create_publisher(String, "robot_description", latched).publish(String(data=panda_urdf_text()))
    graph.executor.add_node(robot)
    models = graph.root / "tuner_models"
    before = {p.name for p in models.iterdir()}
    long_goal = {
        "bags": [str(graph.root / "arm")],
        "task": "inverse-dynamics",
        "centers": 500,
        "epochs": 1000,  # tens of seconds here without early stopping (the tuner's patience)
    }
    running_feedback: list[Any] = []
    # the URDF from robot_description: rejected ('no URDF') until the latched message has reached the
    # tuner (discovery is asynchronous), then accepted
    for _ in range(30):
        sent_at, seen = time.monotonic(), len(graph.progress)  # this goal's rejection, not an earlier test's
        running = graph.send(running_feedback, **long_goal)
        if running.accepted:
            break
        assert spin_until(graph.executor, lambda s=seen: bool(_rejections(graph, s)), 10), graph.progress[
            seen:
        ]
        assert "no URDF" in _rejections(graph, seen)[-1]["message"], _rejections(graph, seen)
        spin_until(graph.executor, lambda: False, 1.0)
    assert running.accepted, graph.progress[-1:]
    queued_feedback: list[Any] = []
    queued = graph.send(queued_feedback, bags=[str(graph.root / "good")])
    assert queued.accepted
    assert spin_until(graph.executor, lambda: any(f.phase == "queued" for f in queued_feedback), 10), (
        [f.phase for f in queued_feedback],
        [f.phase for f in running_feedback][-5:],
        graph.tuner.log()[-2000:],
    )
    assert queued_feedback[0].queue_position == 1, queued_feedback[0]
    assert graph.rejected("queue full", bags=[str(graph.root / "good")]).startswith("1 goal(s)")
    call = queued.cancel_goal_async()
    assert spin_until(graph.executor, call.done, 10)
    status, result = graph.result(queued, timeout=10)
    assert status == CANCELED and "before it started" in result.message
    assert spin_until(graph.executor, lambda: any(f.phase == "tuning" for f in running_feedback), 60)
    call = running.cancel_goal_async()
    assert spin_until(graph.executor, call.done, 10)
    status, result = graph.result(running, timeout=60)
    assert status == CANCELED and not result.success and result.out_path == "", (status, result.message)
    # feedback_period_s (0.1 s): at most one tuning feedback per 0.1 s, besides an objective's first
    # and last epoch (this job runs about a hundred epochs a second here, unthrottled)
    tuning = [f for f in running_feedback if f.phase == "tuning"]
    objectives = {f.objective for f in tuning}
    assert len(tuning) <= (time.monotonic() - sent_at) / 0.1 + 2 * len(objectives) + 1, len(tuning)
    new = {p.name for p in models.iterdir()} - before
    assert all(name.startswith("robot_description-") and name.endswith(".urdf") for name in new), new
    graph.executor.remove_node(robot)
    robot.destroy_node()


class _Handle:
    """Stands in for rclpy's ServerGoalHandle in the test below: the part ``_on_accepted`` uses."""

    def __init__(self, goal: Any, n: int) -> None:
        self.request, self.goal_id = goal, SimpleNamespace(uuid=bytes([n]) * 16)
        self.executed, self.feedback, self.is_cancel_requested = False, [], False

    def execute(self) -> None:
        self.executed = True

    def publish_feedback(self, feedback: Any) -> None:
        self.feedback.append(feedback)


def _answer(callback: Any, timeout: float = 60.0) -> Any:
    """The answer of an async goal callback, run here to its end (its slow checks run on the node's
    goal-check thread meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            callback.send(None)
        except StopIteration as done:
            return done.value
        assert time.monotonic() < deadline, "the goal callback never answered"
        time.sleep(0.01)


def test_goals_run_in_the_order_accepted_when_their_callbacks_race(built_interfaces, tmp_path, monkeypatch):
    """rclpy sends the goal response, then calls the accepted callback on any free executor thread:
    a client's next goal can reach it first (a fresh-clone CI run saw the second goal run first).
    The later goal waits for the earlier one and queues behind it."""
    from lifelong_learning.action import TuneModel
    from rclpy.action import GoalResponse
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes import nystrom_tuner

    monkeypatch.setattr(nystrom_tuner, "ORDER_WAIT_S", 60.0)  # no skipping however slow this machine
    write_labeled_features(tmp_path / "bag", X, LABELS)
    with new_context() as ctx:
        node = nystrom_tuner.NystromTunerNode(
            context=ctx,
            parameter_overrides=[
                Parameter("output_dir", value=str(tmp_path / "out")),
                Parameter("diagnostics_period_s", value=0.0),
            ],
        )
        try:
            goals = [
                TuneModel.Goal(bags=[str(tmp_path / "bag")], task="classification", centers=8, epochs=3)
                for _ in range(2)
            ]
            assert [_answer(node._on_goal(g)) for g in goals] == [GoalResponse.ACCEPT] * 2
            first, second = _Handle(goals[0], 1), _Handle(goals[1], 2)
            late = threading.Thread(target=node._on_accepted, args=(second,))
            late.start()  # the later goal's callback runs first, and waits
            deadline = time.monotonic() + 30
            while id(goals[1]) in node._tickets and time.monotonic() < deadline:
                time.sleep(0.01)
            assert late.is_alive() and not second.executed and not second.feedback
            node._on_accepted(first)
            late.join(30)
            assert first.executed and not second.executed
            assert [(f.phase, f.queue_position) for f in second.feedback] == [("queued", 1)]
            # a goal cancelled before it was placed ends without running or queuing
            third = _Handle(
                TuneModel.Goal(bags=[str(tmp_path / "bag")], task="classification", centers=8, epochs=3), 3
            )
            assert _answer(node._on_goal(third.request)) == GoalResponse.ACCEPT
            third.is_cancel_requested = True
            node._on_accepted(third)
            assert third.executed and bytes([3]) * 16 in node._dropped and third not in node._queue
            with node._lock:  # neither runs (stand-in handles): nothing for destroy_node to wait for
                node._running = None
                node._queue.clear()
                node._idle.set()
        finally:
            node.destroy_node()


def test_a_goal_takes_its_place_before_its_check_and_gives_it_back_when_refused(built_interfaces, tmp_path):
    """The queue bound counts goals still being checked (a burst once filled the queue past it), and
    a goal refused by the check on the goal-check thread gives its place back."""
    from lifelong_learning.action import TuneModel
    from rclpy.action import GoalResponse
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes import nystrom_tuner

    write_labeled_features(tmp_path / "bag", X, LABELS)
    write_labeled_features(tmp_path / "truncated", X, LABELS)
    (mcap,) = (tmp_path / "truncated").glob("*.mcap")
    mcap.write_bytes(mcap.read_bytes()[:200])  # found only by opening it: on the goal-check thread

    def goal(bag: str) -> Any:
        return TuneModel.Goal(bags=[str(tmp_path / bag)], task="classification", centers=8, epochs=3)

    with new_context() as ctx:
        node = nystrom_tuner.NystromTunerNode(
            context=ctx,
            parameter_overrides=[
                Parameter("output_dir", value=str(tmp_path / "out")),
                Parameter("diagnostics_period_s", value=0.0),
                Parameter("max_queued_goals", value=1),
            ],
        )
        try:
            assert _answer(node._on_goal(goal("truncated"))) == GoalResponse.REJECT
            assert node.rejections.snapshot() == {"invalid goal": 1} and node._places == 0
            assert "corrupt or truncated" in node.last_rejected_goal
            first, second = node._on_goal(goal("bag")), node._on_goal(goal("bag"))
            third = node._on_goal(goal("bag"))
            started: list[Any] = []
            for callback in (first, second):  # each takes its place, then awaits its check
                try:
                    callback.send(None)
                    started.append(callback)
                except StopIteration as done:  # checked already
                    started.append(done.value)
            assert _answer(third) == GoalResponse.REJECT  # 1 running + 1 waiting, though none accepted yet
            assert node.last_rejected_goal == "queue full: 1 goal(s) already wait"
            answers = [s if isinstance(s, GoalResponse) else _answer(s) for s in started]
            assert answers == [GoalResponse.ACCEPT] * 2
            assert node._places == 2
        finally:
            node.destroy_node()
