"""The nystrom_tuner node on a real DDS graph: a service request tunes from a bag in the
background, progress is published, the model path is announced, bad requests are refused."""

import json

import numpy as np
import pytest

pytestmark = pytest.mark.graph


def make_node(context, **params):
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes.nystrom_tuner import NystromTunerNode

    defaults = {"diagnostics_period_s": 0.0, "device": "cpu", "default_centers": 30, "default_epochs": 8}
    overrides = [Parameter(k, value=v) for k, v in {**defaults, **params}.items()]
    return NystromTunerNode(context=context, parameter_overrides=overrides)


def test_tune_service_progress_and_model_announcement(executor, spin, rclpy_context, tmp_path):
    from lifelong_learning.srv import TuneModel
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String

    from lifelong_learning.io.bags import write_labeled_features
    from lifelong_learning.learners.rlsc import IncrementalRLSC

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 1, (60, 4)), rng.normal(3, 1, (60, 4))])
    labels = ["a"] * 60 + ["b"] * 60
    order = rng.permutation(120)
    write_labeled_features(tmp_path / "bag", X[order], [labels[i] for i in order])

    node = make_node(rclpy_context, output_dir=str(tmp_path / "models"))
    peer = Node("tuner_test_peer", context=rclpy_context)
    progress, models = [], []
    peer.create_subscription(String, "tuning_progress", lambda m: progress.append(json.loads(m.data)), 100)
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    peer.create_subscription(String, "tuned_model", lambda m: models.append(m.data), latched)
    client = peer.create_client(TuneModel, "/nystrom_tuner/tune")
    executor.add_node(node)
    executor.add_node(peer)
    assert spin(executor, client.service_is_ready, 10.0)

    bad = client.call_async(TuneModel.Request(bags=[str(tmp_path / "bag")], task="juggling"))
    assert spin(executor, bad.done, 10.0)
    assert not bad.result().accepted and "task" in bad.result().message

    future = client.call_async(TuneModel.Request(bags=[str(tmp_path / "bag")], task="classification"))
    assert spin(executor, future.done, 10.0)
    result = future.result()
    assert result.accepted, result.message
    busy = client.call_async(TuneModel.Request(bags=[str(tmp_path / "bag")], task="classification"))
    assert spin(executor, busy.done, 10.0)
    assert not busy.result().accepted or busy.result().out_path  # may have finished already
    assert spin(executor, lambda: bool(models), 120.0), progress[-3:]
    assert models[0] == result.out_path
    assert any(p["state"] == "running" and p["eta_s"] is not None for p in progress)
    assert spin(executor, lambda: any(p["state"] == "done" for p in progress), 10.0)
    clf = IncrementalRLSC.load(models[0])
    assert np.mean(clf.predict(X) == np.array(labels, dtype=object)) > 0.9

    missing = client.call_async(TuneModel.Request(bags=[str(tmp_path / "none")], task="classification"))
    assert spin(executor, missing.done, 10.0) and not missing.result().accepted
    assert "not a bag directory" in missing.result().message
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "metadata.yaml").write_text("rosbag2_bagfile_information: [not, a, bag")
    corrupt = client.call_async(TuneModel.Request(bags=[str(tmp_path / "corrupt")], task="classification"))
    assert spin(executor, corrupt.done, 10.0) and corrupt.result().accepted
    assert spin(executor, lambda: any(p["state"] == "failed" for p in progress), 30.0)
    assert "corrupt" in next(p for p in progress if p["state"] == "failed")["error"]
    assert node.jobs_failed == 1 and "corrupt" in node.diagnostic_values()["last failure"]
