"""~/learning_metrics of both learner nodes, each in its own process on a real DDS graph: the live
prequential error of inverse_dynamics falls below the URDF's alone as it learns simulated Panda
motion; object_recognition reports per-class error rates on taught samples; both
report the batch objective of everything their model learned beside it."""

import time

import numpy as np
import pytest
from conftest import node_argv

from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, joint_states, panda_urdf_path

pytestmark = pytest.mark.graph


def metrics_peer(context, topic):
    from lifelong_learning.msg import LearningMetrics
    from rclpy.node import Node

    node = Node("metrics_test_peer", context=context)
    received = []
    node.create_subscription(LearningMetrics, topic, received.append, 100)
    return node, received


def joint_state_message(state):
    from sensor_msgs.msg import JointState

    msg = JointState()
    sec = int(state["stamp"])
    msg.header.stamp.sec, msg.header.stamp.nanosec = sec, round((state["stamp"] - sec) * 1e9)
    msg.name = list(state["name"])
    msg.position, msg.velocity, msg.effort = (list(state[k]) for k in ("position", "velocity", "effort"))
    return msg


def test_inverse_dynamics_prequential_error_falls_below_the_urdf_alone(
    executor, spin, rclpy_context, start_process
):
    from sensor_msgs.msg import JointState

    states = list(joint_states(PandaSimulation().run(8.0, seed=11), rate_hz=100.0))
    peer, received = metrics_peer(rclpy_context, "/inverse_dynamics/learning_metrics")
    pub = peer.create_publisher(JointState, "/joint_states", 100)
    executor.add_node(peer)
    process = start_process(
        node_argv(
            "inverse_dynamics",
            "-p",
            f"urdf_path:={panda_urdf_path()}",
            "-p",
            "joint_names:=[" + ",".join(JOINT_NAMES) + "]",
            "-p",
            "n_features:=50",
            "-p",
            "diagnostics_period_s:=0.0",
            "-p",
            "metrics_period_s:=0.1",
            "-p",
            "metrics_window_s:=1.0",
        )
    )
    connected = spin(executor, lambda: pub.get_subscription_count() > 0 and bool(received), 60)
    assert connected, process.log()
    assert received[-1].window_samples == 0 and received[-1].mean_prequential_error == -1.0
    assert "fewer than 50 samples" in received[-1].undefined
    # a burst of the first joint states: the q̈ filter fills (8), the next ones are answered mostly as
    # one block by the model as it started (the URDF's rigid-body model: what the baseline scores)
    # before it learns; a window defines errors from MIN_WINDOW_SAMPLES (50) samples on
    for state in states[:62]:
        pub.publish(joint_state_message(state))
    assert spin(executor, lambda: received[-1].window_samples >= 50, 20), process.log()
    first = received[-1]
    # then 8 s of 100 Hz motion, paced at about 200 joint states a second of wall time
    start = time.monotonic()
    for k, state in enumerate(states[62:]):
        pub.publish(joint_state_message(state))
        spin(executor, lambda k=k: time.monotonic() - start > k / 200.0, 1.0)
    spin(executor, lambda: False, 0.5)
    scored = [m for m in received if m.mean_prequential_error >= 0 and m.mean_baseline_error >= 0]
    assert len(scored) > 10, process.log()
    last = scored[-1]
    assert list(last.names) == JOINT_NAMES and len(last.prequential_error) == len(last.baseline_error) == 7
    assert last.samples_learned > 500 and last.window_samples > 50 and last.model_version == 0
    assert last.forgetting == 1.0
    ratio = [m.mean_prequential_error / m.mean_baseline_error for m in scored]
    # How much of the burst was answered before the first blocks were learned depends on how fast
    # this machine learns, and so does the first window's error (it was 0.18 of the URDF's on one
    # run); that the model starts as the URDF is checked in-process below, where the block is known.
    assert first.mean_prequential_error > 0 and first.mean_baseline_error > 0, first
    # it learns: every joint below the URDF alone, the mean a fraction of it
    assert max(ratio[-5:]) < 0.2, ratio[-5:]
    assert all(p < b for p, b in zip(last.prequential_error, last.baseline_error, strict=True))
    # the residual's batch objective of everything learned, per joint (its weights solved by learning)
    assert len(last.batch_objective) == 7 and all(v >= 0 for v in last.batch_objective), last
    assert last.mean_batch_objective == pytest.approx(np.mean(last.batch_objective))
    assert "batch objective" not in last.undefined, last.undefined
    assert process.stop() == 0, process.log()


def test_the_first_block_is_answered_by_the_urdf_alone_and_scored_as_it(rclpy_context):
    """The model starts as the URDF: a block answered before anything was learned scores exactly as
    the URDF alone (the node in this process, the block handed to its callback whole)."""
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes.inverse_dynamics import InverseDynamicsNode

    params = {"urdf_path": panda_urdf_path(), "joint_names": JOINT_NAMES, "n_features": 50}
    params.update(diagnostics_period_s=0.0, metrics_period_s=0.0, metrics_window_s=60.0)
    overrides = [Parameter(k, value=v) for k, v in params.items()]
    node = InverseDynamicsNode(context=rclpy_context, parameter_overrides=overrides)
    try:
        states = list(joint_states(PandaSimulation().run(1.0, seed=11), rate_hz=100.0))[:62]
        node._on_joint_states([(joint_state_message(state), {}) for state in states])
        assert node.learner.wait_idle(timeout=20.0)
        msg = node._metrics_message()
        assert msg is not None and msg.window_samples >= 50 and msg.samples_learned == msg.window_samples
        assert msg.mean_baseline_error > 0, msg
        assert msg.mean_prequential_error == pytest.approx(msg.mean_baseline_error, rel=1e-9), msg
        np.testing.assert_allclose(msg.prequential_error, msg.baseline_error, rtol=1e-9)
    finally:
        node.destroy_node()


def test_object_recognition_reports_per_class_errors_on_taught_samples(
    executor, spin, rclpy_context, start_process
):
    from lifelong_learning.msg import LabeledFeatures

    peer, received = metrics_peer(rclpy_context, "/object_recognition/learning_metrics")
    pub = peer.create_publisher(LabeledFeatures, "/labeled_features", 100)
    executor.add_node(peer)
    process = start_process(
        node_argv(
            "object_recognition",
            "-p",
            "diagnostics_period_s:=0.0",
            "-p",
            "metrics_period_s:=0.1",
            "-p",
            "metrics_window_s:=60.0",
        )
    )
    assert spin(executor, lambda: pub.get_subscription_count() > 0 and bool(received), 60), process.log()
    assert list(received[-1].names) == [] and received[-1].baseline_error.tolist() == []
    rng = np.random.default_rng(0)
    centers = {
        "cup": rng.normal(size=16) * 3,
        "ball": rng.normal(size=16) * 3,
        "box": rng.normal(size=16) * 3,
    }
    for k in range(90):
        label = ("cup", "ball", "box")[k % 3]
        pub.publish(
            LabeledFeatures(data=(centers[label] + rng.normal(scale=0.3, size=16)).tolist(), label=label)
        )
        spin(executor, lambda: False, 0.005)
    done = spin(executor, lambda: bool(received) and received[-1].window_samples == 89, 20)
    assert done, [m.window_samples for m in received[-3:]]
    last = received[-1]
    assert sorted(last.names) == ["ball", "box", "cup"] and last.samples_learned == 90
    errors = dict(zip(last.names, last.prequential_error, strict=True))
    # each class's first sample is predicted as another class (it is unknown then); then it is learned
    for label in ("ball", "box"):
        assert 1 / 30 - 1e-9 <= errors[label] <= 0.2, errors
    assert errors["cup"] <= 0.2, errors  # its first sample was not scored (no class known yet)
    assert 0 < last.mean_prequential_error <= 0.2 and last.mean_baseline_error == -1.0
    assert last.undefined == ""
    # per class, the batch objective of its 0/1 indicator over the training samples (one in six held
    # out to choose λ), on the indicator's spread: below the all-zero model's 1.5 (three classes; the
    # largest λ of equal validation accuracy serves, 1000 here: offline 0.37, 0.60, 0.42)
    assert len(last.batch_objective) == 3 and all(0 < v < 1 for v in last.batch_objective), last
    assert process.stop() == 0, process.log()


def test_forgetting_auto_on_the_node_reports_the_factor_that_serves(rclpy_context):
    """``forgetting: auto`` (item 6): the node's model races the candidates on proxies, the metrics and the
    diagnostics name the factor serving; a value that is neither a number nor 'auto' stops the node at
    start."""
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes.inverse_dynamics import InverseDynamicsNode

    def node_with(forgetting):
        params = {"urdf_path": panda_urdf_path(), "joint_names": JOINT_NAMES, "n_features": 30}
        params.update(diagnostics_period_s=0.0, metrics_period_s=0.0, forgetting=forgetting)
        overrides = [Parameter(k, value=v) for k, v in params.items()]
        return InverseDynamicsNode(context=rclpy_context, parameter_overrides=overrides)

    states = list(joint_states(PandaSimulation().run(1.0, seed=2), rate_hz=100.0))
    node = node_with("auto")
    try:
        for state in states:
            node._on_joint_states([(joint_state_message(state), {})])
        assert node.learner.wait_idle(timeout=20.0)
        with node.model_lock:
            model = node.model
            assert model.forgetting == "auto" and len(model.residual.proxies) == 5
        msg = node._metrics_message()
        assert msg.samples_learned > 50 and msg.forgetting in model.residual.candidates
        assert msg.forgetting == model.serving_forgetting
        assert node.diagnostic_values()["forgetting"] == f"auto, {model.serving_forgetting:g} serving"
    finally:
        node.destroy_node()
    from rclpy.exceptions import InvalidParameterValueException

    for bad in ("fast", 2, True):  # 2: the node's own range check (rclpy checks doubles only)
        with pytest.raises((ValueError, InvalidParameterValueException), match="forgetting"):
            node_with(bad)
