"""The nystrom_tuner's limits across processes: no goal can wedge,
freeze or silently stop it. Special files anywhere a goal names a path (a FIFO URDF, /dev/zero, a
FIFO metadata.yaml or storage file, FIFO models) are refused at once and counted, and the node keeps
serving; a burst of 100 goals gets 100 answers with the queue bound held exactly; a goal naming
10,000 copies of a bag is refused at once, slow goal checks hold no executor thread; a message
above ``max_message_bytes`` is skipped and counted. One tuner process serves the module."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DiagnosticsReader, new_context, new_executor, node_argv, spin_until

from lifelong_learning.io.bags import LABELED_FEATURES_TYPE, typestore, write_labeled_features
from lifelong_learning.nodes.supervisor import NodeProcess

pytestmark = pytest.mark.graph

RNG = np.random.default_rng(0)
X = np.vstack([RNG.normal(0, 1, (20, 4)), RNG.normal(3, 1, (20, 4))])
LABELS = ["a"] * 20 + ["b"] * 20
SUCCEEDED, CANCELED = 4, 5  # action_msgs/GoalStatus
NODE = "nystrom_tuner"
MAX_QUEUED = 4
MAX_MESSAGE_BYTES = 100_000
#: a goal must be answered within this (the issue asks for well under a second; the timing is
#: measured by benchmarks/bench_tuner_limits.py, this only tells "answered" from "never")
ANSWERED_S = 10.0


@dataclass
class Graph:
    """The module's tuner process and a peer: a TuneModel action client, progress and diagnostics."""

    root: Path
    process: NodeProcess
    executor: Any
    client: Any
    diag: DiagnosticsReader
    progress: list[dict] = field(default_factory=list)

    def goal(self, **fields: Any) -> Any:
        from lifelong_learning.action import TuneModel

        return TuneModel.Goal(
            **{
                "task": "classification",
                "centers": 8,
                "epochs": 3,
                "bags": [str(self.root / "good")],
                **fields,
            }
        )

    def answers(self, goals: list[Any], timeout: float = ANSWERED_S) -> list[Any]:
        """Send ``goals`` at once; their goal handles, once every one is answered (or AssertionError)."""
        sent = [self.client.send_goal_async(g) for g in goals]
        answered = spin_until(self.executor, lambda: all(f.done() for f in sent), timeout)
        n = sum(f.done() for f in sent)
        assert answered, f"{n} of {len(goals)} goals answered in {timeout} s\n{self.process.log()[-3000:]}"
        return [f.result() for f in sent]

    def refused(self, reason: str, **fields: Any) -> str:
        """Send a goal that must be rejected for ``reason``; the message the tuner published."""
        n = len(self.progress)
        (handle,) = self.answers([self.goal(**fields)])
        assert not handle.accepted, fields
        assert spin_until(self.executor, lambda: any(p["state"] == "rejected" for p in self.progress[n:]), 10)
        published = next(p for p in self.progress[n:] if p["state"] == "rejected")
        assert published["reason"] == reason, published
        return published["message"]

    def result(self, handle: Any, timeout: float = 120.0) -> tuple[int, Any]:
        future = handle.get_result_async()
        assert spin_until(self.executor, future.done, timeout), self.process.log()[-3000:]
        return future.result().status, future.result().result

    def counted(self, reason: str, value: int, timeout: float = 10.0) -> bool:
        return spin_until(self.executor, lambda: self.diag.rejected(NODE, reason) == value, timeout)

    def serves_a_good_goal(self) -> None:
        """A fresh diagnostics status arrives and a good goal succeeds: the node was not wedged."""
        self.diag.statuses(NODE).clear()
        assert spin_until(self.executor, lambda: self.diag.latest(NODE) is not None, 10), "no diagnostics"
        (handle,) = self.answers([self.goal()])
        assert handle.accepted
        status, result = self.result(handle)
        assert status == SUCCEEDED and result.success, result.message
        assert self.process.alive()


@pytest.fixture(scope="module")
def graph(built_interfaces, tmp_path_factory):
    from lifelong_learning.action import TuneModel
    from rclpy.action import ActionClient
    from rclpy.node import Node
    from rclpy.qos import QoSProfile
    from std_msgs.msg import String

    root = tmp_path_factory.mktemp("tuner_limits")
    write_labeled_features(root / "good", X, LABELS)
    params = [
        f"output_dir:={root / 'models'}",
        "device:=cpu",
        "diagnostics_period_s:=0.2",
        f"max_queued_goals:={MAX_QUEUED}",
        "max_bags:=500",
        f"max_message_bytes:={MAX_MESSAGE_BYTES}",
        "patience:=1000000",  # no early stop: a long goal runs until cancelled
        "feedback_period_s:=1.0",
    ]
    process = NodeProcess(
        node_argv(NODE, *[a for p in params for a in ("-p", p)]), log_path=root / "tuner.log"
    )
    try:
        with new_context() as context, new_executor(context) as executor:
            peer = Node("tuner_limits_peer", context=context)
            # a client that keeps a burst of requests and answers (rclpy's default keeps 10)
            deep = QoSProfile(depth=1000)
            client = ActionClient(
                peer,
                TuneModel,
                f"/{NODE}/tune",
                goal_service_qos_profile=deep,
                cancel_service_qos_profile=deep,
            )
            g = Graph(root, process, executor, client, DiagnosticsReader(peer, depth=200))
            progress = peer.create_subscription(
                String, "tuning_progress", lambda m: g.progress.append(json.loads(m.data)), 1000
            )
            executor.add_node(peer)
            assert spin_until(executor, client.server_is_ready, 60), process.log()
            assert spin_until(executor, lambda: progress.get_publisher_count() > 0, 60), process.log()
            assert spin_until(executor, lambda: "jobs done" in g.diag.values(NODE), 20), process.log()
            yield g
    finally:
        process.stop(timeout=30.0)


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _bag_with(root: Path, name: str, special: str) -> Path:
    """A copy of the good bag whose ``special`` (metadata.yaml, or an extra storage file) is a FIFO."""
    bag = root / name
    write_labeled_features(bag, X, LABELS)
    target = bag / special
    target.unlink(missing_ok=True)
    _fifo(target)
    return bag


def test_special_files_anywhere_a_goal_names_a_path_are_refused_at_once(graph):
    """Items 1 and 2: a FIFO URDF was accepted and blocked its job for good (cancel got no result,
    later goals queued behind it); three goals whose bag's metadata.yaml is a FIFO blocked all three
    executor threads (no answers, no diagnostics); /dev/zero as URDF grew memory without bound."""
    root = graph.root
    fifo = _fifo(root / "robot.urdf")
    big = root / "big.urdf"
    big.write_text("<robot name='big'/>")
    os.truncate(big, 5 << 20)  # sparse: above the URDF bound of 4 MiB
    fifo_meta = [str(_bag_with(root, f"fifo_meta{i}", "metadata.yaml")) for i in range(3)]
    fifo_storage = _bag_with(root, "fifo_storage", "extra.mcap")
    before = graph.diag.rejected(NODE, "unsafe path")
    ids = {"task": "inverse-dynamics"}
    goals = [
        graph.goal(urdf_path=str(fifo), **ids),
        graph.goal(urdf_path="/dev/zero", **ids),
        graph.goal(urdf_path=str(big), **ids),
        *(graph.goal(bags=[bag]) for bag in fifo_meta),  # three at once: one per executor thread
        graph.goal(bags=[str(fifo_storage)]),
        graph.goal(validation_bags=[fifo_meta[0]]),
        graph.goal(init_model=str(fifo)),
        graph.goal(serving_model="/dev/zero"),
    ]
    t0 = time.monotonic()
    handles = graph.answers(goals)
    print(f"{len(goals)} goals naming special files answered in {time.monotonic() - t0:.3f} s")
    assert not any(h.accepted for h in handles)
    assert graph.counted("unsafe path", before + len(goals)), graph.diag.values(NODE)
    messages = [p["message"] for p in graph.progress if p["state"] == "rejected"][-len(goals) :]
    assert any("robot.urdf is not a regular file" in m for m in messages), messages
    assert any("more than the 4194304 allowed" in m for m in messages), messages
    assert any("extra.mcap is not a regular file" in m for m in messages), messages
    assert graph.diag.values(NODE)["running"] == "False"  # nothing was started
    graph.serves_a_good_goal()


def _long_bag(path: Path) -> None:
    """3000 LabeledFeatures of 8 values: 1000 epochs on 300 centres take minutes (cancelled)."""
    rng = np.random.default_rng(1)
    write_labeled_features(path, rng.normal(0, 1, (3000, 8)), [str(i % 5) for i in range(3000)])


def test_a_burst_of_100_goals_gets_100_answers_and_the_queue_bound_holds(graph):
    """Item 5: of a burst of 40 goals, 30 got no answer at all (never counted), and the queue reached
    5 with max_queued_goals 4. Every goal of a burst is answered; one runs, exactly 4 wait."""
    _long_bag(graph.root / "long")
    long_goal = graph.goal(bags=[str(graph.root / "long")], centers=300, epochs=1000)
    before = graph.diag.rejected(NODE, "queue full")
    graph.diag.statuses(NODE).clear()
    handles = graph.answers([long_goal] * 100, timeout=60.0)
    accepted = [h for h in handles if h.accepted]
    assert len(accepted) == 1 + MAX_QUEUED, f"{len(accepted)} accepted"
    assert graph.counted("queue full", before + 100 - len(accepted)), graph.diag.values(NODE)
    assert spin_until(graph.executor, lambda: graph.diag.values(NODE).get("running") == "True", 30)
    queued = [int(s.values[i].value) for s in graph.diag.statuses(NODE) for i in range(len(s.values))
              if s.values[i].key == "queued goals"]  # fmt: skip
    assert max(queued) <= MAX_QUEUED, queued
    for h in accepted:
        h.cancel_goal_async()
    for h in accepted:
        status, result = graph.result(h, timeout=60.0)
        assert status == CANCELED, (status, result.message)
    assert spin_until(graph.executor, lambda: graph.diag.values(NODE).get("queued goals") == "0", 10)
    graph.serves_a_good_goal()


def test_many_bags_are_refused_at_once_and_slow_checks_hold_no_executor_thread(graph):
    """Item 9: a goal listing 10,000 copies of one bag held the goal check for 27.7 s before it was
    rejected; checking goals on the executor threads let three slow goal checks stop every answer."""
    good = str(graph.root / "good")
    message = graph.refused("goal over limit", bags=[good] * 10_000)
    assert "max_bags 500" in message, message
    assert "named twice" in graph.refused("invalid goal", bags=[good, str(graph.root / "." / "good")])
    many = graph.root / "many"
    many.mkdir()
    for i in range(250):  # checked by opening each: about half a second per goal
        write_labeled_features(many / f"b{i}", X, LABELS)
    slow = graph.goal(bags=[str(many / f"b{i}") for i in range(250)])
    sent = [graph.client.send_goal_async(slow) for _ in range(3)]
    probe = graph.client.send_goal_async(graph.goal(epochs=5000))  # over max_epochs: rejected at once
    assert spin_until(graph.executor, probe.done, ANSWERED_S), graph.process.log()[-3000:]
    assert not probe.result().accepted
    assert not any(f.done() for f in sent), "a slow goal was answered before the probe"
    assert spin_until(graph.executor, lambda: all(f.done() for f in sent), 120), graph.process.log()[-3000:]
    handles = [f.result() for f in sent]
    assert all(h.accepted for h in handles)
    for h in handles:
        h.cancel_goal_async()
    for h in handles:
        graph.result(h)


def _bag_with_a_huge_message(path: Path) -> None:
    """The good bag's 40 LabeledFeatures and, in the middle, one of 200000 values (800 kB)."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = typestore()
    Msg, Header, Time = (
        store.types[t] for t in (LABELED_FEATURES_TYPE, "std_msgs/msg/Header", "builtin_interfaces/msg/Time")
    )
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/labeled_features", LABELED_FEATURES_TYPE, typestore=store)
        for i, (row, label) in enumerate(zip(X, LABELS, strict=True)):
            data = np.zeros(200_000, np.float32) if i == 20 else row.astype(np.float32)
            msg = Msg(header=Header(stamp=Time(sec=i, nanosec=0), frame_id="camera"), data=data, label=label)
            writer.write(conn, 10**18 + i, store.serialize_cdr(msg, LABELED_FEATURES_TYPE))


def test_a_message_above_max_message_bytes_is_skipped_and_counted(graph):
    """Item 9: one 256 MB message in a bag took the tuner from 669 MB to 2.2 GB; now a message
    above max_message_bytes is skipped before it is deserialized, and counted."""
    _bag_with_a_huge_message(graph.root / "huge")
    (handle,) = graph.answers([graph.goal(bags=[str(graph.root / "huge")])])
    assert handle.accepted
    status, result = graph.result(handle)
    assert status == SUCCEEDED and result.success, result.message
    report = json.loads(Path(result.report_path).read_text())
    assert report["skipped"] == {"message too large": 1}, report["skipped"]
    assert spin_until(
        graph.executor,
        lambda: graph.diag.values(NODE).get("samples skipped (last job)") == "message too large: 1",
        10,
    ), graph.diag.values(NODE)
