"""LearnerNode: services, checkpoints, hot swap and counted rejections, with a real RLS model."""

import numpy as np
import pytest
from conftest import RLSModel, node_argv

from lifelong_learning.learners import RecursiveRLS

pytestmark = pytest.mark.graph


def make_node(context, **params):
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes._base import LearnerNode, ParamSpec

    class RLSNode(LearnerNode):
        model_class = RLSModel

        def __init__(self):
            overrides = [Parameter(k, value=v) for k, v in params.items()]
            super().__init__(
                "rls_node",
                (ParamSpec("dim", 3, "input dimension"),),
                context=context,
                parameter_overrides=overrides,
            )
            self.start_learner()

        def new_model(self):
            return RLSModel(int(self.params["dim"]), 1, lam=1.0)

        def check_model(self, model):
            if model.n_features != int(self.params["dim"]):
                raise ValueError("dimension mismatch")

        def learn(self, x, y):
            with self.model_lock:
                try:
                    self.model.update(x, y)
                except ValueError as exc:
                    self.reject("bad sample", str(exc))
                    return
                self.updates_since_checkpoint += 1

    return RLSNode()


def test_save_load_reset_and_failed_load_keeps_model(executor, call, tmp_path):
    from lifelong_learning.srv import LoadModel, SaveModel
    from std_srvs.srv import Trigger

    node = make_node(executor.context, checkpoint_path=str(tmp_path / "ckpt.llm"), diagnostics_period_s=0.0)
    executor.add_node(node)
    save = node.create_client(SaveModel, "/rls_node/save_model")
    load = node.create_client(LoadModel, "/rls_node/load_model")
    reset = node.create_client(Trigger, "/rls_node/reset")
    node.learn([1.0, 2.0, 3.0], [1.0])
    x = np.array([[1.0, 2.0, 3.0]])
    trained = node.model.predict(x)
    assert call(save, SaveModel.Request(path=str(tmp_path / "a.llm")), timeout=10).success
    call(reset, Trigger.Request(), timeout=10)
    assert np.allclose(node.model.predict(x), 0.0)

    (tmp_path / "bad.llm").write_bytes(b"garbage")
    RLSModel(4, 1).save(tmp_path / "wrongdim.llm")
    for bad in ("bad.llm", "wrongdim.llm", "absent.llm"):
        res = call(load, LoadModel.Request(path=str(tmp_path / bad)), timeout=10)
        assert not res.success and "previous model kept" in res.message
    assert np.allclose(node.model.predict(x), 0.0)
    version = node.model_version
    res = call(load, LoadModel.Request(path=str(tmp_path / "a.llm")), timeout=10)
    assert res.success and node.model_version == version + 1
    assert np.array_equal(node.model.predict(x), trained)
    # The reloaded model, not the one before it, is what the next checkpoint holds.
    assert node.checkpoint()
    from lifelong_learning.core.model_file import load_model_file

    mf = load_model_file(tmp_path / "ckpt.llm")
    saved = RecursiveRLS.from_state(mf.meta, mf.arrays)
    assert np.array_equal(saved.predict(x), trained)


def test_checkpoint_on_shutdown_restore_and_corrupt_checkpoint_moved_aside(executor, tmp_path):
    ckpt = tmp_path / "ckpt.llm"
    node = make_node(executor.context, checkpoint_path=str(ckpt), diagnostics_period_s=0.0)
    node.learn([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[2.0], [3.0]])
    node.shutdown()
    expected = node.model.predict(np.eye(3))
    node.destroy_node()

    restored = make_node(executor.context, checkpoint_path=str(ckpt), diagnostics_period_s=0.0)
    assert np.array_equal(restored.model.predict(np.eye(3)), expected)
    restored.destroy_node()

    ckpt.write_bytes(ckpt.read_bytes()[:100])
    fresh = make_node(executor.context, checkpoint_path=str(ckpt), diagnostics_period_s=0.0)
    assert np.allclose(fresh.model.predict(np.eye(3)), 0.0)
    assert not ckpt.exists() and len(list(tmp_path.glob("ckpt.llm.unreadable-*"))) == 1
    fresh.destroy_node()


def test_rejections_counted_and_diagnostics_published(executor, spin):
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.node import Node

    node = make_node(executor.context, diagnostics_period_s=0.1)
    executor.add_node(node)
    listener = Node("diag_listener", context=executor.context)
    executor.add_node(listener)
    got = []
    listener.create_subscription(DiagnosticArray, "/diagnostics", got.append, 10)
    for _ in range(5):
        node.learn([np.nan, 0.0, 0.0], [1.0])
    node.learn([1.0, 0.0], [1.0])
    assert node.rejections.counts == {"bad sample": 6}
    assert node.model.n_samples == 0

    def has_counts():
        return any(kv.key == "rejected" and kv.value == "6" for m in got for s in m.status for kv in s.values)

    assert spin(executor, has_counts, 10)


def test_bad_configuration_exits_with_a_clear_error_not_a_traceback(tmp_path, built_interfaces):
    import subprocess

    argv = node_argv(
        "object_recognition", "-p", "lambdas:=[-1.0]", "-p", "diagnostics_period_s:=0.0", params_file=False
    )
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 2
    assert "cannot start the node: lambdas must be positive" in res.stderr
    assert "Traceback" not in res.stderr
