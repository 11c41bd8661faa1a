"""Attacks on the nystrom_tuner node's ~/tune action from other processes, one test per class of bad
input: absurd epochs and centres, missing and corrupt bags, SIGINT during a job, malformed messages
in a bag. Each asserts that the node answers (or stops) as documented, that the refusal is counted
in /diagnostics, and that it then serves the next goal. One tuner process serves the module (tiny
jobs); the SIGINT test starts its own."""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DiagnosticsReader, new_context, new_executor, node_argv, spin_until

from lifelong_learning.io.bags import (
    LABELED_FEATURES_TYPE,
    typestore,
    write_joint_states,
    write_labeled_features,
)
from lifelong_learning.nodes.supervisor import NodeProcess

pytestmark = pytest.mark.graph

RNG = np.random.default_rng(0)
X = np.vstack([RNG.normal(0, 1, (20, 4)), RNG.normal(3, 1, (20, 4))])
LABELS = ["a"] * 20 + ["b"] * 20
SUCCEEDED, ABORTED = 4, 6  # action_msgs/GoalStatus
NODE = "nystrom_tuner"


def tuner_argv(output_dir: Path, *params: str, name: str | None = None) -> list[str]:
    args = [f"output_dir:={output_dir}", "device:=cpu", "diagnostics_period_s:=0.2", *params]
    ros = [a for p in args for a in ("-p", p)]
    if name:
        ros += ["-r", f"__node:={name}"]
    return node_argv("nystrom_tuner", *ros)


@dataclass
class Graph:
    """The module's tuner process and a peer: a TuneModel action client, progress and diagnostics."""

    root: Path
    models: Path
    process: NodeProcess
    executor: Any
    client: Any
    diag: DiagnosticsReader  # the tuner's statuses and counters
    progress: list[dict] = field(default_factory=list)

    def send(self, **fields: Any) -> Any:
        """Send a goal (classification, tiny sizes unless given): its handle, accepted or not."""
        from lifelong_learning.action import TuneModel

        goal = TuneModel.Goal(**{"task": "classification", "centers": 8, "epochs": 3, **fields})
        sent = self.client.send_goal_async(goal)
        assert spin_until(self.executor, sent.done, 60), self.process.log()[-2000:]
        return sent.result()

    def rejection(self, **fields: Any) -> str:
        """Send a goal that must be rejected: the reason and message the tuner published."""
        n = len(self.progress)
        assert not self.send(**fields).accepted
        assert spin_until(self.executor, lambda: any(p["state"] == "rejected" for p in self.progress[n:]), 10)
        published = next(p for p in self.progress[n:] if p["state"] == "rejected")
        return f"{published['reason']}: {published['message']}"

    def run(self, **fields: Any) -> tuple[int, Any]:
        """Send a goal that must be accepted and wait for its end: (status, result)."""
        handle = self.send(**fields)
        assert handle.accepted, self.progress[-1:]
        future = handle.get_result_async()
        assert spin_until(self.executor, future.done, 120), self.process.log()[-2000:]
        return future.result().status, future.result().result

    def counted(self, key: str, value: int, timeout: float = 10.0) -> bool:
        return spin_until(self.executor, lambda: self.diag.count(NODE, key) == value, timeout)

    def serves_a_good_goal(self) -> None:
        status, result = self.run(bags=[str(self.root / "good")])
        assert status == SUCCEEDED and result.success, result.message
        assert self.process.alive()


@pytest.fixture(scope="module")
def graph(built_interfaces, tmp_path_factory):
    from lifelong_learning.action import TuneModel
    from rclpy.action import ActionClient
    from rclpy.node import Node
    from std_msgs.msg import String

    root = tmp_path_factory.mktemp("tuner_attacks")
    write_labeled_features(root / "good", X, LABELS)
    process = NodeProcess(tuner_argv(root / "models"), log_path=root / "tuner.log")
    try:
        with new_context() as context, new_executor(context) as executor:
            peer = Node("tuner_attacker", context=context)
            client = ActionClient(peer, TuneModel, "/nystrom_tuner/tune")
            g = Graph(root, root / "models", process, executor, client, DiagnosticsReader(peer))
            progress = peer.create_subscription(
                String, "tuning_progress", lambda m: g.progress.append(json.loads(m.data)), 100
            )
            executor.add_node(peer)
            assert spin_until(executor, client.server_is_ready, 60), process.log()
            # a rejection is published once (volatile): its writer must have matched this reader
            assert spin_until(executor, lambda: progress.get_publisher_count() > 0, 60), process.log()
            assert spin_until(executor, lambda: "jobs done" in g.diag.values(NODE), 20), process.log()
            yield g
    finally:
        process.stop(timeout=30.0)


def test_absurd_epochs_and_centres_are_refused_and_counted(graph):
    before = graph.diag.count(NODE, "rejected: goal over limit")
    for fields, limit in (
        ({"epochs": 2**31 - 1}, "max_epochs 1000"),
        ({"epochs": 1001}, "max_epochs 1000"),
        ({"centers": 2**31 - 1}, "max_centers 20000"),
        ({"centers": 20001}, "max_centers 20000"),
    ):
        message = graph.rejection(bags=[str(graph.root / "good")], **fields)
        assert message.startswith("goal over limit") and limit in message, message
    assert graph.counted("rejected: goal over limit", before + 4), graph.diag.values(NODE)
    assert graph.diag.values(NODE)["running"] == "False"  # nothing was started
    graph.serves_a_good_goal()


def test_missing_and_corrupt_bags_are_answered_and_the_next_goal_served(graph):
    from diagnostic_msgs.msg import DiagnosticStatus

    root = graph.root
    assert "not a bag directory" in graph.rejection(bags=[str(root / "no_such_bag")])
    (root / "garbage").mkdir()
    (root / "garbage" / "metadata.yaml").write_text("rosbag2_bagfile_information: [oops")
    assert graph.rejection(bags=[str(root / "garbage")]).startswith("invalid goal")
    write_labeled_features(root / "truncated", X, LABELS)
    (mcap,) = (root / "truncated").glob("*.mcap")
    mcap.write_bytes(mcap.read_bytes()[:200])
    assert "corrupt or truncated" in graph.rejection(bags=[str(root / "truncated")])
    # a bag that opens but holds no LabeledFeatures: found only by reading, the goal aborts
    write_joint_states(root / "joints", np.arange(5.0), ["j1"], *(np.zeros((5, 1)),) * 3)
    failed_before = graph.diag.count(NODE, "jobs failed")
    status, result = graph.run(bags=[str(root / "joints")])
    assert status == ABORTED and "LabeledFeatures" in result.message, result.message
    assert not result.success and result.out_path == ""
    assert graph.counted("jobs failed", failed_before + 1), graph.diag.values(NODE)
    assert "LabeledFeatures" in graph.diag.values(NODE)["last failure"]
    assert spin_until(
        graph.executor, lambda: "the last tuning job failed" in graph.diag.latest(NODE).message, 10
    )
    assert graph.diag.latest(NODE).level == DiagnosticStatus.WARN
    graph.serves_a_good_goal()
    assert spin_until(
        graph.executor, lambda: "the last tuning job failed" not in graph.diag.latest(NODE).message, 10
    )


def _bag_with_bad_messages(path: Path) -> None:
    """40 LabeledFeatures, of which one CDR blob that does not deserialize and one with NaN."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = typestore()
    Msg, Header, Time = (
        store.types[t] for t in (LABELED_FEATURES_TYPE, "std_msgs/msg/Header", "builtin_interfaces/msg/Time")
    )
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/labeled_features", LABELED_FEATURES_TYPE, typestore=store)
        for i, (row, label) in enumerate(zip(X, LABELS, strict=True)):
            data = row.astype(np.float32)
            if i == 7:
                writer.write(conn, 10**18 + i, b"\x00\x01\x00\x00\xff\xff\xff\x7f truncated")
                continue
            if i == 9:
                data = data.copy()
                data[1] = np.nan
            msg = Msg(header=Header(stamp=Time(sec=i, nanosec=0), frame_id="camera"), data=data, label=label)
            writer.write(conn, 10**18 + i, store.serialize_cdr(msg, LABELED_FEATURES_TYPE))


def test_malformed_messages_in_a_bag_are_skipped_and_counted(graph):
    _bag_with_bad_messages(graph.root / "malformed")
    status, result = graph.run(bags=[str(graph.root / "malformed")])
    assert status == SUCCEEDED and result.success, result.message
    report = json.loads(Path(result.report_path).read_text())
    assert report["skipped"] == {"corrupt message": 1, "non-finite values": 1}
    assert spin_until(
        graph.executor,
        lambda: (
            graph.diag.values(NODE).get("samples skipped (last job)")
            == "corrupt message: 1, non-finite values: 1"
        ),
        10,
    ), graph.diag.values(NODE)


def test_sigint_during_a_job_stops_it_cleanly(built_interfaces, tmp_path, start_process):
    """SIGINT while a 1000-epoch inverse-dynamics job runs: the job stops at its next epoch, no model
    file (nor a temporary one) is left, the process exits 0 without "terminate called" (before, a
    daemon worker still in torch at interpreter exit aborted it so, 3 times in 3)."""
    from lifelong_learning.action import TuneModel
    from rclpy.action import ActionClient
    from rclpy.node import Node
    from std_msgs.msg import String

    from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_path

    log = PandaSimulation().run(6.0, seed=4, log_every=5)
    write_joint_states(tmp_path / "bag", log["t"], JOINT_NAMES, log["q"], log["qd"], log["tau"])
    models = tmp_path / "models"
    process = start_process(
        tuner_argv(
            models,
            "progress_topic:=sigint_progress",
            "diagnostics_period_s:=0.0",
            "patience:=1000000",  # no early stop: the job is still running when the signal comes
            name="tuner_sigint",
        )
    )
    with new_context() as context, new_executor(context) as executor:
        peer = Node("sigint_peer", context=context)
        progress: list[dict] = []
        peer.create_subscription(
            String, "sigint_progress", lambda m: progress.append(json.loads(m.data)), 100
        )
        client = ActionClient(peer, TuneModel, "/tuner_sigint/tune")
        executor.add_node(peer)
        assert spin_until(executor, client.server_is_ready, 60), process.log()
        goal = TuneModel.Goal(
            bags=[str(tmp_path / "bag")],
            task="inverse-dynamics",
            urdf_path=panda_urdf_path(),
            centers=300,
            epochs=1000,
        )
        sent = client.send_goal_async(goal)
        assert spin_until(executor, sent.done, 60) and sent.result().accepted, process.log()
        assert spin_until(executor, lambda: any(p["state"] == "running" for p in progress), 60), process.log()
        process.send_signal(signal.SIGINT)
        code = process.wait(60)
        spin_until(executor, lambda: any(p["state"] == "cancelled" for p in progress), 2)
    log = process.log()
    assert code == 0, log
    assert "terminate called" not in log and "Traceback" not in log, log
    assert "no model written" in log
    assert [p.name for p in models.iterdir()] == []  # no model, no temporary file either
    assert progress[-1]["state"] in ("running", "cancelled")  # never "done" after the signal
