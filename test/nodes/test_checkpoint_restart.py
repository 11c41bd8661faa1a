"""A learner node killed with SIGKILL (no chance to write a final checkpoint) resumes, after a
restart, from its last periodic checkpoint, and keeps learning."""

from __future__ import annotations

import signal

import numpy as np
import pytest
from conftest import node_argv

from lifelong_learning.core.model_file import ModelFileError
from lifelong_learning.learners.rlsc import IncrementalRLSC

pytestmark = pytest.mark.graph

DIM = 8
CLASSES = ("mug", "duck", "teddy")


def sample(rng, label):
    centre = np.zeros(DIM)
    k = CLASSES.index(label)
    centre[2 * k : 2 * k + 2] = 3.0
    return (centre + rng.normal(scale=0.3, size=DIM)).astype(np.float32)


def test_sigkilled_recognizer_resumes_from_its_checkpoint(executor, spin, call, start_process, tmp_path):
    from lifelong_learning.msg import LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo, Predict
    from rclpy.event_handler import PublisherEventCallbacks
    from rclpy.node import Node
    from rclpy.qos import QoSProfile

    ckpt = tmp_path / "object_recognition.model"
    args = ("-p", f"checkpoint_path:={ckpt}", "-p", "checkpoint_interval_s:=0.5")
    peer = Node("checkpoint_test_peer", context=executor.context)
    executor.add_node(peer)
    # Readers matched so far: after a SIGKILL the dead reader still counts as a subscriber
    # until its DDS lease expires, so wait for the new process's reader to match, not for a count.
    matched = [0]
    labeled = peer.create_publisher(
        LabeledFeatures,
        "labeled_features",
        QoSProfile(depth=100),
        event_callbacks=PublisherEventCallbacks(matched=lambda e: matched.__setitem__(0, e.total_count)),
    )
    info_client = peer.create_client(GetClassifierInfo, "/object_recognition/info")
    predict_client = peer.create_client(Predict, "/object_recognition/predict")

    def ask(client, request):
        # After a SIGKILL the dead server stays in the graph until its DDS lease expires, and
        # a request sent before the new server has matched is lost: ask again until answered.
        return call(client, request, timeout=30, answer_timeout=3, attempts=10)

    def info():
        return ask(info_client, GetClassifierInfo.Request())

    def teach(labels):
        for label in labels:
            labeled.publish(LabeledFeatures(data=sample(rng, label).tolist(), label=label))

    rng = np.random.default_rng(0)
    first = start_process(node_argv("object_recognition", *args))
    assert info().samples_seen == 0
    assert spin(executor, lambda: matched[0] >= 1, 30)
    teach(["mug", "duck"] * 10)
    assert spin(executor, lambda: info().samples_seen == 20, 20), first.log()

    def checkpointed():
        try:
            return IncrementalRLSC.load(ckpt).n_samples
        except ModelFileError:  # not written yet
            return -1

    assert spin(executor, lambda: checkpointed() == 20, 20), first.log()

    # More samples (a new class among them), learned, then SIGKILL at once: no final
    # checkpoint; what the periodic checkpoint had not written yet is lost.
    teach(["teddy", "mug", "duck"] * 5)
    assert spin(executor, lambda: info().samples_seen == 35, 20), first.log()
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    assert "final checkpoint" not in first.log_path.read_text()
    saved = IncrementalRLSC.load(ckpt)  # the last checkpoint the killed process wrote
    assert 20 <= saved.n_samples <= 35
    print(f"checkpoint at the kill: {saved.n_samples} of 35 samples")

    second = start_process(node_argv("object_recognition", *args))
    assert spin(executor, lambda: "restored model from checkpoint" in second.log(), 60), second.log()
    resumed = info()
    assert list(resumed.classes) == [str(c) for c in saved.classes_]
    assert list(resumed.counts) == saved.seen_counts_.tolist()
    assert resumed.samples_seen == saved.n_samples
    for label in ("mug", "duck"):
        res = ask(predict_client, Predict.Request(data=sample(rng, label).tolist()))
        assert res.success and res.label == label

    # It keeps learning from where it was.
    assert spin(executor, lambda: matched[0] >= 2, 30)
    teach(["teddy"] * 3)
    assert spin(executor, lambda: info().samples_seen == saved.n_samples + 3, 20), second.log()
    after = info()
    expected = dict(zip([str(c) for c in saved.classes_], saved.seen_counts_.tolist(), strict=True))
    expected["teddy"] = expected.get("teddy", 0) + 3
    assert dict(zip(after.classes, after.counts, strict=True)) == expected
    assert second.alive()
