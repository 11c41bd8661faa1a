"""Attacks on the object_recognition node from another process, one test per class.

One node process serves the module (:func:`node`, taught three classes, ``max_classes`` = 3).
Every test sends one class of bad input and checks that the node is alive (it answers a
service), that the refusal is counted under its reason (``/diagnostics``: ``rejected: <reason>``)
and that the predictions on a fixed probe set are unchanged, to the bit. The last test resets
the node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import (
    DiagnosticsReader,
    call_service,
    first_call,
    new_context,
    new_executor,
    node_argv,
    spin_until,
    stop_after_nodes,
)

from lifelong_learning.nodes.supervisor import NodeProcess

pytestmark = pytest.mark.graph

NODE = "object_recognition"
DIM = 16
CLASSES = ("mug", "duck", "teddy")
HUGE = 3e38  # finite float32: two such labeled vectors flipped 23 of 50 probe labels before the gate


def sample(rng: np.random.Generator, label: str, n: int = 1) -> np.ndarray:
    centre = np.zeros(DIM)
    centre[CLASSES.index(label) * 4 : CLASSES.index(label) * 4 + 4] = 3.0
    return centre + rng.normal(scale=0.3, size=(n, DIM))


@dataclass
class Node:
    """The attacked process, the peer that talks to it, and what it answered before any attack."""

    folder: Path
    executor: Any
    peer: Any
    proc: NodeProcess
    probes: np.ndarray
    diag: DiagnosticsReader  # the node's statuses and counters
    baseline: list[tuple[str, tuple[float, ...]]] = field(default_factory=list)
    taught: int = 0

    def spin(self, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
        return spin_until(self.executor, predicate, timeout)

    def call(self, client: Any, request: Any) -> Any:
        return call_service(self.executor, client, request, 20.0)

    def info(self) -> Any:
        from lifelong_learning.srv import GetClassifierInfo

        return self.call(self.peer.info, GetClassifierInfo.Request())

    def predict(self, x: Any) -> Any:
        from lifelong_learning.srv import Predict

        return self.call(self.peer.predict, Predict.Request(data=np.asarray(x, dtype=np.float32).tolist()))

    def answers(self) -> list[tuple[str, tuple[float, ...]]]:
        """Label and scores of every probe."""
        out = []
        for x in self.probes:
            res = self.predict(x)
            assert res.success, res.message
            out.append((res.label, tuple(res.scores)))
        return out

    def fresh_diagnostics(self) -> dict[str, str]:
        """The node's diagnostics values, published after this call."""
        self.diag.statuses(NODE).clear()
        assert self.spin(lambda: self.diag.latest(NODE) is not None, 10), self.proc.log()
        return self.diag.values(NODE)

    def wait_counted(self, reason: str, at_least: int, resend: Callable[[], None] | None = None) -> int:
        """Spin until the count of ``reason`` reaches ``at_least``; ``resend`` repeats a best-effort
        message each second while it has not (one sent before the subscription matched is lost)."""
        for _ in range(10):
            if self.spin(lambda: self.diag.rejected(NODE, reason) >= at_least, 1.0):
                return self.diag.rejected(NODE, reason)
            if resend is not None:
                resend()
        counted = self.diag.rejected(NODE, reason)
        pytest.fail(f"{reason!r} counted {counted} times, expected ≥ {at_least}\n{self.proc.log()}")

    def assert_unharmed(self) -> None:
        """Alive, nothing learned, every probe answered exactly as before the attacks."""
        assert self.proc.alive(), self.proc.log()
        info = self.info()
        assert list(info.classes) == list(CLASSES) and info.samples_seen == self.taught
        assert self.answers() == self.baseline


def make_peer(context: Any) -> Any:
    from lifelong_learning.msg import Features, LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo, LoadModel, Predict, SaveModel
    from rclpy.node import Node as RosNode
    from rclpy.qos import QoSProfile, qos_profile_sensor_data
    from std_srvs.srv import Trigger

    class Peer(RosNode):
        def __init__(self) -> None:
            super().__init__("attack_peer", context=context)
            self.features = self.create_publisher(Features, "features", qos_profile_sensor_data)
            self.labeled = self.create_publisher(LabeledFeatures, "labeled_features", QoSProfile(depth=100))
            self.info = self.create_client(GetClassifierInfo, "/object_recognition/info")
            self.predict = self.create_client(Predict, "/object_recognition/predict")
            self.save_model = self.create_client(SaveModel, "/object_recognition/save_model")
            self.load_model = self.create_client(LoadModel, "/object_recognition/load_model")
            self.reset = self.create_client(Trigger, "/object_recognition/reset")

    return Peer()


@pytest.fixture(scope="module")
def node(built_interfaces: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """One object_recognition process, taught three classes (max_classes = 3), and its probe answers."""
    from lifelong_learning.msg import LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo

    folder = tmp_path_factory.mktemp("attacks_recognition")
    argv = node_argv(
        "object_recognition",
        *("-p", "max_classes:=3", "-p", "diagnostics_period_s:=0.2", "-p", "warn_period_s:=0.2"),
        *("-p", f"model_directory:={folder}"),
    )
    rng = np.random.default_rng(0)
    probes = np.vstack([sample(rng, label, 4) for label in CLASSES])
    with new_context() as context, new_executor(context) as executor:
        peer = make_peer(context)
        executor.add_node(peer)
        proc = NodeProcess(argv, log_path=folder / "object_recognition.log")
        n = Node(folder, executor, peer, proc, probes, DiagnosticsReader(peer))
        try:
            first_call(executor, peer.info, GetClassifierInfo.Request())  # the node is up and answers
            assert n.spin(lambda: n.diag.latest(NODE) is not None, 10), proc.log()  # counts from here on
            assert n.spin(lambda: peer.labeled.get_subscription_count() > 0, 20)
            for label in CLASSES:
                for x in sample(rng, label, 30):
                    peer.labeled.publish(LabeledFeatures(data=x.astype(np.float32).tolist(), label=label))
                    n.taught += 1
            assert n.spin(lambda: n.info().samples_seen == n.taught, 20), proc.log()
            assert n.spin(lambda: peer.features.get_subscription_count() > 0, 20)
            n.baseline = n.answers()
            assert [label for label, _ in n.baseline] == [c for c in CLASSES for _ in range(4)]
            yield n
        finally:
            stop_after_nodes(executor, proc)


def publish_labeled(node: Node, data: Any, label: str) -> None:
    from lifelong_learning.msg import LabeledFeatures

    node.peer.labeled.publish(LabeledFeatures(data=np.asarray(data, dtype=np.float32).tolist(), label=label))


def test_vectors_of_3e38_are_not_learned(node):
    before = node.diag.rejected(NODE, "feature norm too large")
    for label in ("mug", "duck"):
        publish_labeled(node, np.full(DIM, HUGE, dtype=np.float32), label)
    node.wait_counted("feature norm too large", before + 2)
    # Far below the absolute bound (1000) but 16x the usual norm (about 6): refused too.
    publish_labeled(node, np.full(DIM, 100.0 / np.sqrt(DIM)), "teddy")
    node.wait_counted("feature norm too large", before + 3)
    node.assert_unharmed()


def test_a_huge_norm_is_not_answered(node):
    from lifelong_learning.msg import Features

    before = node.diag.rejected(NODE, "feature norm too large")
    res = node.predict(np.full(DIM, HUGE))
    assert not res.success and "feature norm" in res.message and not res.labels
    node.wait_counted("feature norm too large", before + 1)
    frame = Features(data=np.full(DIM, HUGE, dtype=np.float32).tolist())
    node.peer.features.publish(frame)  # best effort: sent again until it is counted
    node.wait_counted("feature norm too large", before + 2, resend=lambda: node.peer.features.publish(frame))
    node.assert_unharmed()


def test_an_over_long_label_is_refused(node):
    before = node.diag.rejected(NODE, "bad label")
    publish_labeled(node, sample(np.random.default_rng(1), "mug")[0], "m" * 200_000)
    publish_labeled(node, sample(np.random.default_rng(2), "mug")[0], "x" * 65)  # one above the limit
    node.wait_counted("bad label", before + 2)
    node.assert_unharmed()


def test_labels_with_nul_or_control_characters_are_refused(node):
    from lifelong_learning.msg import LabeledFeatures
    from rclpy.serialization import serialize_message

    before = node.diag.rejected(NODE, "bad label")
    x = sample(np.random.default_rng(3), "duck")[0]
    publish_labeled(node, x, "duck\x07")
    publish_labeled(node, x, "du\nck")
    # rclpy cuts a str at NUL when it publishes: put the NUL into the serialized bytes instead.
    raw = serialize_message(LabeledFeatures(data=x.astype(np.float32).tolist(), label="duckXcat"))
    assert raw.count(b"duckXcat\x00") == 1
    node.peer.labeled.publish(raw.replace(b"duckXcat\x00", b"duck\x00cat\x00"))
    node.wait_counted("bad label", before + 3)  # arrived as "duck" (a known class): learned without the check
    node.assert_unharmed()


def test_empty_labels_are_refused(node):
    before = node.diag.rejected(NODE, "bad label")
    x = sample(np.random.default_rng(4), "teddy")[0]
    for label in ("", "   ", "\t"):
        publish_labeled(node, x, label)
    node.wait_counted("bad label", before + 3)
    node.assert_unharmed()


def test_a_class_beyond_max_classes_is_refused(node):
    before = node.diag.rejected(NODE, "too many classes")
    for i in range(3):
        publish_labeled(node, sample(np.random.default_rng(5 + i), "mug")[0], f"giraffe {i}")
    node.wait_counted("too many classes", before + 3)
    node.assert_unharmed()


def test_wrong_dimensions_are_refused(node):
    before = node.diag.rejected(NODE, "wrong feature dimension")
    publish_labeled(node, np.ones(DIM + 1), "mug")
    publish_labeled(node, [], "mug")
    node.wait_counted("wrong feature dimension", before + 2)
    res = node.predict(np.ones(DIM - 1))
    assert not res.success and "expected 16" in res.message
    node.wait_counted("wrong feature dimension", before + 3)
    node.assert_unharmed()


def test_nan_and_inf_are_refused(node):
    before = node.diag.rejected(NODE, "features not finite")
    nan = np.zeros(DIM, dtype=np.float32)
    nan[3] = np.nan
    publish_labeled(node, nan, "mug")
    publish_labeled(node, np.full(DIM, np.inf, dtype=np.float32), "duck")
    node.wait_counted("features not finite", before + 2)
    assert not node.predict(nan).success
    node.wait_counted("features not finite", before + 3)
    node.assert_unharmed()


def test_saved_model_holds_only_accepted_labels_and_a_refused_file_is_not_loaded(node):
    from lifelong_learning.srv import LoadModel, SaveModel

    from lifelong_learning.learners import IncrementalRLSC

    saved = node.folder / "after-attacks.model"
    assert node.call(node.peer.save_model, SaveModel.Request(path=str(saved))).success
    model = IncrementalRLSC.load(saved)
    assert model.classes_.tolist() == list(CLASSES) and model.n_samples == node.taught
    # Files made elsewhere with a 65-character label, or a class too many: refused, counted, the
    # old model serves.
    rng = np.random.default_rng(9)
    long_label = IncrementalRLSC(lambdas=1.0)
    long_label.partial_fit(np.vstack([sample(rng, c) for c in CLASSES]), ["mug", "duck", "y" * 65])
    long_label.save(node.folder / "long-label.model")
    model.partial_fit(sample(rng, "mug"), ["giraffe"])
    model.save(node.folder / "four-classes.model")
    before = node.diag.rejected(NODE, "model reload failed")
    for name, why in (("long-label", "max_label_length = 64"), ("four-classes", "max_classes = 3")):
        res = node.call(node.peer.load_model, LoadModel.Request(path=str(node.folder / f"{name}.model")))
        assert not res.success and why in res.message
    node.wait_counted("model reload failed", before + 2)
    node.assert_unharmed()


def test_reset_forgets_the_model_and_the_norm_statistics(node):
    from std_srvs.srv import Trigger

    moderate = np.full(DIM, 100.0 / np.sqrt(DIM))  # refused above as 16x the usual norm
    assert not node.predict(moderate).success
    assert float(node.fresh_diagnostics()["feature norm median"]) > 0
    assert node.call(node.peer.reset, Trigger.Request()).success
    info = node.info()
    assert list(info.classes) == [] and info.samples_seen == 0
    diagnostics = node.fresh_diagnostics()
    assert diagnostics["feature norm median"] == "none yet" and diagnostics["feature norm limit"] == "1e+03"
    res = node.predict(moderate)  # only the absolute bound is left
    assert res.success and res.label == ""


def test_label_arrived_whole_reads_the_cdr_string_at_the_end():
    from lifelong_learning.nodes.object_recognition import label_arrived_whole

    le = b"\x00\x01\x00\x00" + b"\x00" * 8 + b"\x04\x00\x00\x00mug\x00"
    assert label_arrived_whole(le, "mug")
    assert label_arrived_whole(le + b"\x00\x00", "mug")  # final padding
    assert label_arrived_whole(b"\x00\x00\x00\x00" + b"\x00" * 8 + b"\x00\x00\x00\x04mug\x00", "mug")  # BE
    assert not label_arrived_whole(b"\x00\x01\x00\x00\x08\x00\x00\x00mug\x00cat\x00", "mug")  # cut at NUL
    bad_utf8 = b"\x00\x01\x00\x00\x03\x00\x00\x00\xff\xfe\x00"
    assert not label_arrived_whole(bad_utf8, "\ufffd\ufffd")  # rclpy replaced invalid UTF-8
    assert label_arrived_whole(b"\x00\x0a\x00\x00whatever", "mug")  # another encoding: cannot tell
