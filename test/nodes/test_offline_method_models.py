"""Model files of the offline methods other than Nyström (here SLKL's learned low-rank map, made by
a retraining job) in the learner nodes: they load without executing code, each node loads one of its
own shape and keeps learning on top of it, and refuses one of another shape, the old model serving
on. (The cross-process path, a goal and the CLI: test_nystrom_tuner.py.)"""

import zipfile

import numpy as np
import pytest
from conftest import IMMEDIATE_SWAP_PARAMS, make_dynamics_node

from lifelong_learning.core.model_file import load_model_file
from lifelong_learning.io.bags import write_joint_states, write_labeled_features
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.learners.slkl_features import SLKLFeatureMap
from lifelong_learning.retraining.pipeline import run_job
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, joint_states, panda_urdf_text

pytestmark = [pytest.mark.graph, pytest.mark.usefixtures("one_thread")]


def _numbers_only(path):
    """Every member of the file is a numeric array (nothing a loader could execute)."""
    load_model_file(path)  # refuses object arrays (pickles)
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            with zf.open(name) as f:
                assert np.lib.format.read_array(f, allow_pickle=False).dtype.kind in "biuf", name


def test_object_recognition_loads_an_slkl_classifier_keeps_learning_and_refuses_another_width(
    rclpy_context, tmp_path, make_job
):
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes.object_recognition import ObjectRecognitionNode

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 1, (30, 4)), rng.normal(3, 1, (30, 4))])
    write_labeled_features(tmp_path / "bag", X, ["a"] * 30 + ["b"] * 30)
    run_job(make_job("bag", task="classification", out="slkl.npz", method="slkl", centers=15))
    _numbers_only(tmp_path / "slkl.npz")
    model = IncrementalRLSC.load(tmp_path / "slkl.npz")
    assert model.feature_map.kind == "slkl"
    wide = IncrementalRLSC(lambdas=1.0, feature_map=SLKLFeatureMap(np.zeros((3, 6)), 1.0, [1.0, 2.0, 3.0]))
    wide.partial_fit(rng.normal(size=(5, 6)), ["a", "b", "a", "b", "a"])
    wide.save(tmp_path / "wide.npz")

    params = {"model_directory": str(tmp_path), "diagnostics_period_s": 0.0, **IMMEDIATE_SWAP_PARAMS}
    node = ObjectRecognitionNode(
        context=rclpy_context, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]
    )
    try:
        assert node.reload(tmp_path / "slkl.npz").ok
        assert model.calibration_evidence == "samples"  # the file's; the node serves it with its own
        assert node.serving.model.calibration_evidence == node.params["calibration_evidence"] == "classes"
        assert node.learn(X[0], "a")  # on top of the reloaded model
        assert node.serving.model.n_samples == model.n_samples + 1
        outcome = node.reload(tmp_path / "wide.npz")  # a model of 6 features for a node fed 4
        assert not outcome.ok and "6" in outcome.message, outcome.message
        assert node.serving.model.feature_map.n_inputs == 4 and node.model_version == 1
    finally:
        node.destroy_node()


def test_inverse_dynamics_loads_an_slkl_model_keeps_learning_and_refuses_other_joints(
    executor, spin, rclpy_context, tmp_path, make_job
):
    from rclpy.node import Node
    from sensor_msgs.msg import JointState

    from lifelong_learning.dynamics import SemiparametricInverseDynamics

    log = PandaSimulation().run(3.0, seed=1, log_every=5)
    write_joint_states(tmp_path / "bag", log["t"], JOINT_NAMES, log["q"], log["qd"], log["tau"])
    run_job(make_job("bag", out="slkl.npz", method="slkl", centers=30))
    _numbers_only(tmp_path / "slkl.npz")
    model = SemiparametricInverseDynamics.load(tmp_path / "slkl.npz")
    assert model.feature_map.kind == "slkl"
    seven = model.feature_map  # residual inputs: 3 per joint of the state, 1 of the rigid body's torque
    six = SLKLFeatureMap(seven.centers[:, : 4 * 6], seven.lengthscale[: 4 * 6], seven.weights)
    SemiparametricInverseDynamics(panda_urdf_text(), JOINT_NAMES[:6], feature_map=six).save(
        tmp_path / "six.npz"
    )

    node = make_dynamics_node(rclpy_context, model_directory=str(tmp_path), **IMMEDIATE_SWAP_PARAMS)
    peer = Node("offline_method_peer", context=rclpy_context)
    robot = peer.create_publisher(JointState, "joint_states", 100)
    executor.add_node(node)
    executor.add_node(peer)
    assert node.reload(tmp_path / "slkl.npz").ok
    assert node.model.feature_map.kind == "slkl" and node.model.n_samples == model.n_samples
    assert spin(executor, lambda: robot.get_subscription_count() > 0, 20)
    for state in joint_states(PandaSimulation().run(0.3, seed=2), rate_hz=100.0):
        msg = JointState(name=state["name"], position=state["position"], velocity=state["velocity"])
        msg.effort = state["effort"]
        sec = int(state["stamp"])
        msg.header.stamp.sec, msg.header.stamp.nanosec = sec, round((state["stamp"] - sec) * 1e9)
        robot.publish(msg)
        executor.spin_once(timeout_sec=0.01)
    learned = lambda: node.model.n_samples > model.n_samples  # noqa: E731
    assert spin(executor, learned, 20), (node.not_learned, node.rejections.counts)
    outcome = node.reload(tmp_path / "six.npz")
    assert not outcome.ok and "joints" in outcome.message, outcome.message
    assert node.model.joint_names == JOINT_NAMES and node.model.feature_map.kind == "slkl"
