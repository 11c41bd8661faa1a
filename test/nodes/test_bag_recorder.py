"""The bag_recorder node in its own process on a real DDS graph: every message recorded as sent
(content compared after reading back, a JointState with empty effort included), files split by
size, stopped with SIGINT; after ~/split_bagfile and SIGKILL the bag holds what came before the
split; a topic with two types is refused and counted; an existing output is refused."""

import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import DiagnosticsReader, node_argv
from rosbags.highlevel import AnyReader
from ruamel.yaml import YAML

from lifelong_learning.io.bags import read_joint_states
from lifelong_learning.io.labeled_features import read_labeled_features

pytestmark = pytest.mark.graph

NODE = "bag_recorder"


def recorder_argv(*params: str) -> list[str]:
    args = [a for p in ("diagnostics_period_s:=0.2", "discovery_period_s:=0.2", *params) for a in ("-p", p)]
    return node_argv("bag_recorder", *args, params_file=False)


#: a publisher of std_msgs/Int32 on /mixed until its standard input closes
OTHER_TYPE = """
import sys, rclpy
from std_msgs.msg import Int32
rclpy.init()
node = rclpy.create_node("recorder_peer_int", start_parameter_services=False)
node.create_publisher(Int32, "mixed", 10)
print("ready", flush=True)
sys.stdin.read()
node.destroy_node()
rclpy.try_shutdown()
"""


class Peer:
    """The publishers the recorder records, a diagnostics listener and a split client."""

    def __init__(self, context):
        from lifelong_learning.msg import LabeledFeatures
        from rclpy.node import Node
        from rclpy.qos import QoSProfile
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        from std_srvs.srv import Trigger

        self.node = Node("recorder_peer", context=context)
        deep = QoSProfile(depth=200)  # reliable, volatile; deep enough to repair anything
        self.lf = self.node.create_publisher(LabeledFeatures, "labeled_features", deep)
        self.js = self.node.create_publisher(JointState, "joint_states", deep)
        self.gripper = self.node.create_publisher(JointState, "gripper", deep)
        # a second type on one topic needs a second participant (rmw refuses it in one), in a process
        # of its own (destroying one of several participants in one process can hang inside Fast DDS)
        self.mixed = self.node.create_publisher(String, "mixed", 10)
        self.other = subprocess.Popen(
            [sys.executable, "-c", OTHER_TYPE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.other.stdout.readline() == "ready\n"
        self.diag = DiagnosticsReader(self.node)
        self.split = self.node.create_client(Trigger, "/bag_recorder/split_bagfile")

    def close(self):
        self.other.stdin.close()  # it ends its node and itself
        try:
            self.other.wait(10)
        except subprocess.TimeoutExpired:
            self.other.kill()
            self.other.wait()

    def subscribed(self):
        return all(p.get_subscription_count() > 0 for p in (self.lf, self.js, self.gripper))

    def written(self, n):
        return lambda: self.diag.count(NODE, "messages written") == n

    def publish(self, start, n):
        """n LabeledFeatures, n JointStates and n gripper JointStates without effort."""
        from lifelong_learning.msg import LabeledFeatures
        from sensor_msgs.msg import JointState

        for i in range(start, start + n):
            lf = LabeledFeatures(data=[float(i), 0.5, -1.0, 2.0], label=f"obj{i % 3}")
            lf.header.stamp.sec = 100 + i
            self.lf.publish(lf)
            js = JointState(name=["a", "b"], position=[0.1 * i, 0.2], velocity=[1.0, 0.0], effort=[2.0, -i])
            js.header.stamp.sec = 100 + i
            self.js.publish(js)
            self.gripper.publish(JointState(name=["finger"], position=[0.01 * i], velocity=[0.0]))


@pytest.fixture
def peer_of():
    peers = []

    def make(context):
        peers.append(Peer(context))
        return peers[-1]

    yield make
    for peer in peers:
        peer.close()


def read_bag(path):
    """topic → deserialized messages, via AnyReader (rosbags' standard store + the bag's definitions)."""
    out: dict[str, list] = {}
    with AnyReader([path]) as reader:
        for conn, _, raw in reader.messages():
            out.setdefault(conn.topic, []).append(reader.deserialize(raw, conn.msgtype))
    return out


def listed_files(path):
    info = YAML(typ="safe").load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    return info["relative_file_paths"]


def check_content(messages, n):
    assert [m.label for m in messages["/labeled_features"]] == [f"obj{i % 3}" for i in range(n)]
    assert [m.data[0] for m in messages["/labeled_features"]] == list(range(n))
    assert [m.header.stamp.sec for m in messages["/joint_states"]] == [100 + i for i in range(n)]
    assert [list(m.effort) for m in messages["/joint_states"]] == [[2.0, -i] for i in range(n)]
    assert [list(m.position) for m in messages["/gripper"]] == [[0.01 * i] for i in range(n)]
    assert all(len(m.effort) == 0 and list(m.name) == ["finger"] for m in messages["/gripper"])


def test_records_everything_splits_by_size_and_closes_on_sigint(
    peer_of, executor, spin, rclpy_context, start_process, tmp_path
):
    bag = tmp_path / "run"
    peer = peer_of(rclpy_context)  # first: the recorder finds both types of /mixed at once (mostly)
    executor.add_node(peer.node)
    process = start_process(
        recorder_argv(
            f"output:={bag}",
            "topics:=[labeled_features, joint_states, gripper, mixed]",
            "max_bagfile_size:=2000",
        )
    )
    assert spin(executor, peer.subscribed, 30), process.log()
    peer.publish(0, 40)
    assert spin(executor, peer.written(120), 30), (peer.diag.values(NODE), process.log())

    # /mixed is refused once: with both types at once, or as a type change if one was seen first
    # (discovery of the second participant's type may come after the messages: wait for it)
    def refused():
        return sorted(peer.diag.rejected(NODE, r) for r in ("several types", "type changed"))

    assert spin(executor, lambda: refused() == [0, 1], 20), peer.diag.values(NODE)
    assert peer.diag.values(NODE)["/joint_states recorded"] == "40"
    assert process.stop(signal.SIGINT) == 0, process.log()

    files = listed_files(bag)
    assert len(files) >= 3 and files == [f"run_{k}.mcap" for k in range(len(files))]
    assert sorted(p.name for p in bag.iterdir()) == sorted([*files, "metadata.yaml"])
    messages = read_bag(bag)
    assert set(messages) == {"/labeled_features", "/joint_states", "/gripper"}
    check_content(messages, 40)
    features = read_labeled_features(bag)
    assert features.X.shape == (40, 4) and features.labels[:3] == ["obj0", "obj1", "obj2"]
    joints = read_joint_states(bag, topic="/joint_states")  # /gripper is a JointState too
    np.testing.assert_allclose(joints.tau[:, 1], -np.arange(40))


def test_split_then_sigkill_keeps_everything_before_the_split(
    peer_of, executor, spin, rclpy_context, start_process, tmp_path
):
    from std_srvs.srv import Trigger

    bag = tmp_path / "killed"
    process = start_process(
        recorder_argv(
            f"output:={bag}",
            "topics:=[labeled_features, joint_states, gripper]",
            "storage:=sqlite3",
        )
    )
    peer = peer_of(rclpy_context)
    executor.add_node(peer.node)
    assert spin(executor, peer.subscribed, 30), process.log()
    peer.publish(0, 10)
    assert spin(executor, peer.written(30), 30), (peer.diag.values(NODE), process.log())
    assert peer.split.wait_for_service(timeout_sec=10)
    future = peer.split.call_async(Trigger.Request())
    assert spin(executor, future.done, 20)
    answer = future.result()
    assert answer.success and "closed killed_0.db3 (30 messages)" in answer.message, answer.message
    peer.publish(10, 5)  # these are in the open file when the node is killed
    assert spin(executor, peer.written(45), 30), (peer.diag.values(NODE), process.log())
    process.stop(signal.SIGKILL)
    assert process.proc.returncode == -signal.SIGKILL

    assert listed_files(bag) == ["killed_0.db3"]
    assert (bag / "partial" / "killed_1" / "killed_1.db3").exists()
    check_content(read_bag(bag), 10)
    assert read_labeled_features(bag).X.shape == (10, 4)


def test_existing_output_and_bad_parameters_are_refused(rclpy_context, tmp_path):
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes.bag_recorder import BagRecorderNode

    def make(**params):
        overrides = [Parameter(k, value=v) for k, v in {"diagnostics_period_s": 0.0, **params}.items()]
        return BagRecorderNode(context=rclpy_context, parameter_overrides=overrides)

    (tmp_path / "old").mkdir()
    with pytest.raises(FileExistsError, match="never appended to"):
        make(output=str(tmp_path / "old"))
    with pytest.raises(ValueError, match="storage"):
        make(output=str(tmp_path / "new"), storage="rosbag1")
    node = make(output=str(tmp_path / "new"), topics=["js", "/abs", "js"])
    try:
        assert node.topic_names == ["/js", "/abs"]
        assert listed_files(tmp_path / "new") == []  # an empty, valid bag from the start
    finally:
        node.destroy_node()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (["storage:=rosbag1"], "storage must be one of"),
        (["max_bagfile_size:=-1"], "max_bagfile_size out of range"),
        (["max_bagfile_size:=big"], "expecting type 'INTEGER'"),
        (["topics:=['']"], "topics is empty"),
        (["topics:=['a b']"], "not a valid topic name"),
        (["output:=EXISTING"], "exists already"),
    ],
)
def test_bad_start_parameters_exit_2_with_one_line(params, message, tmp_path, built_interfaces):
    """Like every node: status 2 and one ``[ERROR] cannot start the node: ...`` line, no traceback."""
    import subprocess

    (tmp_path / "EXISTING").mkdir()
    params = [p.replace("EXISTING", str(tmp_path / "EXISTING")) for p in params]
    argv = recorder_argv(f"output:={tmp_path / 'bag'}", *params)
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("[ERROR] cannot start the node:"), res.stderr
    assert message in lines[0]
    assert not (tmp_path / "bag").exists() or "EXISTING" in " ".join(params)


def test_qos_follows_the_publishers():
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rosbags.interfaces import QosDurability, QosReliability

    from lifelong_learning.nodes.bag_recorder import rosbags_qos, subscription_qos

    reliable = QoSProfile(depth=10)
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    best_effort = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
    q = subscription_qos([reliable, latched])
    assert (q.reliability, q.durability) == (ReliabilityPolicy.RELIABLE, DurabilityPolicy.VOLATILE)
    q = subscription_qos([latched])
    assert (q.reliability, q.durability) == (ReliabilityPolicy.RELIABLE, DurabilityPolicy.TRANSIENT_LOCAL)
    q = subscription_qos([reliable, best_effort])
    assert q.reliability == ReliabilityPolicy.BEST_EFFORT and q.depth >= 100
    stored = rosbags_qos(latched)
    assert (
        stored.reliability == QosReliability.RELIABLE and stored.durability == QosDurability.TRANSIENT_LOCAL
    )
    assert (stored.deadline.sec, stored.deadline.nsec) == (0, 0)


def test_a_flood_is_recorded_or_counted_lost(executor, spin, rclpy_context, start_process, tmp_path):
    """Best-effort messages far faster than the recorder writes: every one is either recorded or
    counted as lost (from the publisher's sequence numbers), never silently missing."""
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Int32

    node = Node("flood_peer", context=rclpy_context)
    executor.add_node(node)
    pub = node.create_publisher(
        Int32, "flood", QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)
    )
    diag = DiagnosticsReader(node)
    process = start_process(recorder_argv(f"output:={tmp_path / 'flood'}", "topics:=[flood]"))
    assert spin(executor, lambda: pub.get_subscription_count() > 0, 30), process.log()

    def count(key):
        return diag.count(NODE, f"/flood {key}")

    k = 0
    while count("recorded") <= 0 and k < 200:  # best effort: until both directions have matched
        pub.publish(Int32(data=k))
        k += 1
        spin(executor, lambda: count("recorded") > 0, 0.2)
    assert count("recorded") > 0, process.log()
    spin(executor, lambda: False, 1.0)  # the warm-up messages settle
    recorded, lost = count("recorded"), count("lost")
    sent = 5000
    for i in range(sent):
        pub.publish(Int32(data=k + i))

    def accounted():
        return (count("recorded") - recorded) + (count("lost") - lost)

    # a loss shows only as a gap before a later message: messages lost at the very end of the flood
    # would never be counted, so whenever the count stalls one more (trailing) message follows
    trailing = 0
    deadline = time.monotonic() + 30
    while accounted() < sent + trailing and time.monotonic() < deadline:
        before = accounted()
        if spin(executor, lambda before=before: accounted() != before, 0.5):
            deadline = time.monotonic() + 30  # still rising: the recorder works at the machine's pace
        elif trailing < 20:
            pub.publish(Int32(data=k + sent + trailing))
            trailing += 1
    assert accounted() >= sent + trailing, (accounted(), trailing, diag.values(NODE), process.log())
    # at most the k warm-up messages may still have been on their way at the snapshot
    assert sent + trailing <= accounted() <= sent + trailing + k, (accounted(), trailing, diag.values(NODE))
    print(
        f"flood of {sent}: {count('recorded') - recorded} recorded, {count('lost') - lost} counted lost"
        f" (+{trailing} trailing)"
    )
