"""Each learner node bounds its answers as KTR³ bounds its predictor when told to, and counts the clips
in diagnostics: inverse_dynamics (on by default) the residual to its targets' range and the torque to
the widened effort limits, on ~/predict as on the stream; object_recognition (off by default) the
scores to what 0/1 targets allow, the answer's class unchanged."""

import numpy as np
import pytest
from conftest import IMMEDIATE_SWAP_PARAMS, make_dynamics_node, offset_dynamics_model

from lifelong_learning.sim.panda import JOINT_NAMES

pytestmark = pytest.mark.graph


@pytest.mark.parametrize("truncate", [True, False])
def test_inverse_dynamics_answers_within_the_residuals_range(
    executor, spin, call, rclpy_context, tmp_path, truncate
):
    from lifelong_learning.srv import PredictTorques
    from rclpy.node import Node

    model, log, _ = offset_dynamics_model()
    model.save(tmp_path / "offset.npz")
    node = make_dynamics_node(
        rclpy_context,
        model_directory=str(tmp_path),
        truncate_predictions=truncate,
        limit_margin=100.0,  # the offset torques pass the effort limits: the residual's range bounds
        **IMMEDIATE_SWAP_PARAMS,
    )
    peer = Node("bounds_peer", context=rclpy_context)
    executor.add_node(node)
    executor.add_node(peer)
    assert node.reload(tmp_path / "offset.npz").ok
    q, qd, a = log["q"][0] + 0.3, np.zeros(7), np.zeros(7)  # far from every learned state
    request = PredictTorques.Request(
        name=JOINT_NAMES, position=q.tolist(), velocity=qd.tolist(), acceleration=a.tolist()
    )
    res = call(peer.create_client(PredictTorques, "/inverse_dynamics/predict"), request)
    raw = model.predict(q, qd, a)
    low = model.residual.target_range()[0]
    assert res.success and np.all(raw < low)  # the map's prediction fell away from the data
    if truncate:
        np.testing.assert_allclose(res.effort, low, rtol=1e-12)
        assert (
            node.diagnostic_values()["predictions truncated"]
            == "7 to the residual's range, 0 to the effort limits"
        )
    else:
        np.testing.assert_allclose(res.effort, raw, rtol=1e-9)
        assert "predictions truncated" not in node.diagnostic_values()


def test_object_recognition_bounds_its_scores_and_keeps_its_answer(rclpy_context):
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes.object_recognition import ObjectRecognitionNode

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.3, (30, 4)), rng.normal(3, 0.3, (10, 4))])
    labels = ["a"] * 30 + ["b"] * 10
    answers = {}
    for truncate in (False, True):
        params = {
            "diagnostics_period_s": 0.0,
            "lambdas": [0.01],
            "alpha": "1.0",
            "feature_norm_factor": 0.0,  # the classes' norms differ tenfold: none is an outlier here
            "truncate_scores": truncate,
        }
        node = ObjectRecognitionNode(
            context=rclpy_context, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]
        )
        try:
            for x, label in zip(X, labels, strict=True):
                assert node.learn(x, label)
            answers[truncate] = node._classify(np.full(4, 12.0).tolist())  # beyond class b
            values = node.diagnostic_values()
        finally:
            node.destroy_node()
    plain, bounded = answers[False], answers[True]
    assert (plain.label, plain.top_label, plain.labels) == (bounded.label, bounded.top_label, bounded.labels)
    assert (plain.top_label, plain.labels) == ("b", ["a", "b"])
    assert plain.scores != bounded.scores and min(bounded.scores) >= 0.0
    assert max(plain.scores) > max(bounded.scores) and bounded.confidence < plain.confidence
    assert int(values["scores truncated"]) >= 1
