"""~/rollback across processes: an object_recognition process keeps the model
that a ~/reset or a hot reload replaces, ~/rollback brings it back with exactly the predictions it
had, two rollbacks go two steps back, the history holds at most keep_previous_models (and the model
learned here, pinned beyond them), the model a rollback replaced comes back with
~/load_model, and with nothing to roll back to the answer says why and nothing changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import IMMEDIATE_SWAP, DiagnosticsReader, call_service, first_call, node_argv, spin_until

from lifelong_learning.learners.rlsc import IncrementalRLSC

pytestmark = pytest.mark.graph

NODE = "object_recognition"
DIM = 8
TAUGHT = ("mug", "duck")
PROBES = np.random.default_rng(99).normal(scale=2.0, size=(6, DIM)).astype(np.float32)


def sample(rng: np.random.Generator, label: str, classes: tuple[str, ...], n: int = 1) -> np.ndarray:
    centre = np.zeros(DIM)
    k = classes.index(label)
    centre[2 * k : 2 * k + 2] = 3.0
    return (centre + rng.normal(scale=0.3, size=(n, DIM))).astype(np.float32)


def save_classifier(path: Path, classes: tuple[str, ...], seed: int) -> IncrementalRLSC:
    """A classifier trained offline on ``classes`` (20 samples each), saved to ``path``."""
    rng = np.random.default_rng(seed)
    X = np.vstack([sample(rng, c, classes, 20) for c in classes]).astype(np.float64)
    clf = IncrementalRLSC(lambdas=[1.0], alpha=0.0)
    clf.partial_fit(X, [c for c in classes for _ in range(20)])
    clf.save(path)
    return clf


class Recognizer:
    """The test's side of the graph: a teacher, the node's services, its diagnostics."""

    def __init__(self, executor: Any, proc: Any) -> None:
        from lifelong_learning.msg import LabeledFeatures
        from lifelong_learning.srv import GetClassifierInfo, LoadModel, Predict
        from rclpy.node import Node
        from rclpy.qos import QoSProfile
        from std_srvs.srv import Trigger

        self.executor, self.proc = executor, proc
        self.node = Node("rollback_test_peer", context=executor.context)
        executor.add_node(self.node)
        self.labeled = self.node.create_publisher(LabeledFeatures, "labeled_features", QoSProfile(depth=100))
        self.clients = {
            "predict": self.node.create_client(Predict, f"/{NODE}/predict"),
            "info": self.node.create_client(GetClassifierInfo, f"/{NODE}/info"),
            "load": self.node.create_client(LoadModel, f"/{NODE}/load_model"),
            "reset": self.node.create_client(Trigger, f"/{NODE}/reset"),
            "rollback": self.node.create_client(Trigger, f"/{NODE}/rollback"),
        }
        self.diag = DiagnosticsReader(self.node)

    def call(self, name: str, request: Any = None) -> Any:
        client = self.clients[name]
        request = client.srv_type.Request() if request is None else request
        return call_service(self.executor, client, request, 20.0)

    def predictions(self) -> list[tuple[list[str], list[float]]]:
        """The node's (labels, scores) for every probe, from ~/predict."""
        from lifelong_learning.srv import Predict

        out = []
        for x in PROBES:
            res = self.call("predict", Predict.Request(data=x.tolist()))
            assert res.success, res.message
            out.append((list(res.labels), list(res.scores)))
        return out

    def rollback(self) -> Any:
        return self.call("rollback")

    def load(self, path: Path) -> Any:
        from lifelong_learning.srv import LoadModel

        res = self.call("load", LoadModel.Request(path=str(path)))
        assert res.success, res.message
        return res

    def teach(self, rng: np.random.Generator, n_each: int) -> None:
        from lifelong_learning.msg import LabeledFeatures
        from lifelong_learning.srv import GetClassifierInfo

        assert spin_until(self.executor, lambda: self.labeled.get_subscription_count() > 0, 30)
        before = self.call("info", GetClassifierInfo.Request()).samples_seen
        for label in TAUGHT * n_each:
            x = sample(rng, label, TAUGHT)[0]
            self.labeled.publish(LabeledFeatures(data=x.tolist(), label=label))
        want = before + n_each * len(TAUGHT)
        learned = lambda: self.call("info", GetClassifierInfo.Request()).samples_seen == want  # noqa: E731
        assert spin_until(self.executor, learned, 20), self.proc.log()

    def diagnostic(self, key: str, value: str) -> bool:
        return spin_until(self.executor, lambda: self.diag.values(NODE).get(key) == value, 10)


def test_rollback_restores_the_previous_models_exact_predictions(executor, start_process, tmp_path):
    from std_srvs.srv import Trigger

    models = tmp_path / "models"
    previous = models / "previous" / NODE
    proc = start_process(
        node_argv(
            NODE,
            *("-p", f"model_directory:={models}", "-p", "keep_previous_models:=2"),
            *("-p", "lambdas:=[1.0]", "-p", "alpha:='0.0'", "-p", "diagnostics_period_s:=0.25"),
            *IMMEDIATE_SWAP,
        )
    )
    node = Recognizer(executor, proc)

    # Nothing to roll back to: a clear reason, nothing changes (a repeatable request: first_call).
    res = first_call(executor, node.clients["rollback"], Trigger.Request())
    assert not res.success and "nothing to roll back to" in res.message, res.message
    assert "the serving model is unchanged" in res.message
    assert node.predictions() == [([], [])] * len(PROBES)

    # Learned online, then reset: ~/rollback brings the learned model back, exactly.
    node.teach(np.random.default_rng(0), 10)
    learned = node.predictions()
    assert all(labels == list(TAUGHT) for labels, _ in learned)
    res = node.call("reset")
    assert res.success and "kept for ~/rollback" in res.message, res.message
    assert node.predictions() == [([], [])] * len(PROBES)
    assert len(list(previous.glob("*.before-reset.*.model"))) == 1
    res = node.rollback()
    assert res.success, res.message
    assert node.predictions() == learned
    assert node.diagnostic("previous models kept", "0 of 2")

    # A hot reload, then ~/rollback: the learned model again, exactly.
    cups = models / "cups.model"
    boxes = models / "boxes.model"
    cup_model = save_classifier(cups, ("cup", "ball"), seed=1)
    save_classifier(boxes, ("box", "can", "jar"), seed=2)
    node.load(cups)
    with_cups = node.predictions()
    assert with_cups != learned
    for (labels, scores), x in zip(with_cups, PROBES, strict=True):
        assert labels == ["cup", "ball"]
        expected = cup_model.decision_function(x.astype(np.float64))[0]
        np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)
    assert node.rollback().success
    assert node.predictions() == learned

    # Two rollbacks go two steps back; the history holds at most keep_previous_models (2), and the
    # model learned here beyond them (pinned: no replacement pushes it out).
    node.load(boxes)  # history: learned
    with_boxes = node.predictions()
    node.load(cups)  # learned, boxes
    node.load(boxes)  # learned (pinned), boxes, cups
    assert len(list(previous.glob("*.before-*.model"))) == 3
    assert node.diagnostic("previous models kept", "2 of 2")
    assert node.diag.values(NODE)["pinned previous model"].endswith("(20 samples learned here)")
    assert node.rollback().success
    assert node.predictions() == with_cups
    res = node.rollback()
    assert res.success and "1 previous model left" in res.message, res.message
    rolled_back = previous / "rolled-back.model"
    assert f"saved as {rolled_back}" in res.message, res.message
    assert node.predictions() == with_boxes
    res = node.rollback()
    assert res.success and "0 previous models left" in res.message, res.message
    assert node.predictions() == learned
    res = node.rollback()
    assert not res.success and "nothing to roll back to" in res.message, res.message
    assert node.predictions() == learned
    assert node.diagnostic("previous models kept", "0 of 2")
    assert node.diag.values(NODE)["last rollback"] != "never"

    # The model the last rollback replaced is not lost: ~/load_model brings it back.
    node.load(rolled_back)
    assert node.predictions() == with_boxes
    assert node.rollback().success  # and that load, like any, can be rolled back
    assert node.predictions() == learned
    assert proc.alive()


def test_thirty_resets_and_forged_announcements_leave_what_was_learned_reachable(
    executor, start_process, tmp_path
):
    """Issue 29 item 8: ~/reset spam and forged model announcements once flushed the history
    (keep_previous_models 3) with empty or repeated models, so that no rollback brought back what the
    node had learned. An untrained model is never kept, one identical to a kept one is not kept twice,
    and the model the node learned stays pinned beyond the count."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    from std_srvs.srv import Trigger

    models = tmp_path / "models"
    proc = start_process(
        node_argv(
            NODE,
            *("-p", f"model_directory:={models}", "-p", "lambdas:=[1.0]", "-p", "alpha:='0.0'"),
            *("-p", "diagnostics_period_s:=0.2", "-p", "warn_period_s:=0.0"),
            *IMMEDIATE_SWAP,
        )
    )
    node = Recognizer(executor, proc)
    first_call(executor, node.clients["rollback"], Trigger.Request())  # matched both ways
    node.teach(np.random.default_rng(0), 10)
    learned = node.predictions()
    assert all(labels == list(TAUGHT) for labels, _ in learned)

    for _ in range(30):
        res = node.call("reset")
        assert res.success, res.message
    res = node.rollback()
    assert res.success, res.message
    assert node.predictions() == learned  # the first rollback: what was learned, not an empty model

    # Forged announcements on tuned_model: untrained models, two trained ones in turn, then new ones.
    empties = [models / f"empty{k}.model" for k in range(5)]
    for k, path in enumerate(empties):
        IncrementalRLSC(lambdas=[1.0 + k], alpha=0.0).save(path)
    a, b = models / "a.model", models / "b.model"
    save_classifier(a, ("cup", "ball"), seed=1)
    save_classifier(b, ("box", "can"), seed=2)
    fresh = [models / f"fresh{k}.model" for k in range(4)]
    for k, path in enumerate(fresh):
        save_classifier(path, ("jar", "pen"), seed=10 + k)
    qos = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    announce = node.node.create_publisher(String, "tuned_model", qos)
    assert spin_until(executor, lambda: announce.get_subscription_count() > 0, 30)
    for path in [*empties, a, b, a, b, a, b, *fresh]:
        version = int(node.diag.values(NODE).get("model version", "-1"))
        announce.publish(String(data=str(path)))
        rose = lambda v=version: int(node.diag.values(NODE).get("model version", "-1")) > v  # noqa: E731
        assert spin_until(executor, rose, 10), (path, proc.log())
    kept = len(list((models / "previous" / NODE).glob("*.before-*.model")))
    assert kept <= 4, kept  # keep_previous_models 3, and the learned model pinned
    for _ in range(kept):
        assert node.rollback().success
        if node.predictions() == learned:
            break
    assert node.predictions() == learned
    assert proc.alive()


def rls_node(context: Any, **params: Any) -> Any:
    """The smallest learner node (a RecursiveRLS of dimension 3), in this process."""
    from conftest import RLSModel
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes.learner import LearnerNode

    class RLSNode(LearnerNode):
        model_class = RLSModel

        def __init__(self) -> None:
            overrides = [Parameter(k, value=v) for k, v in {"diagnostics_period_s": 0.0, **params}.items()]
            super().__init__("rls_node", context=context, parameter_overrides=overrides)
            self.start_learner()

        def new_model(self) -> Any:
            return RLSModel(3, 1, lam=1.0)

    return RLSNode()


def test_what_cannot_be_kept_or_read_changes_nothing(rclpy_context, tmp_path):
    """A replacement whose model cannot be written is refused; an unreadable previous model is moved
    aside (the next rollback goes one further back); keep_previous_models 0 keeps nothing."""
    from std_srvs.srv import Trigger

    x = np.eye(3)
    node = rls_node(rclpy_context, model_directory=str(tmp_path / "models"))
    try:
        node.model.update([1.0, 2.0, 3.0], [1.0])
        first = node.model.predict(x)
        assert node._on_reset(Trigger.Request(), Trigger.Response()).success  # history: first
        node.model.update([0.0, 1.0, 0.0], [5.0])
        second = node.model.predict(x)
        assert node._on_reset(Trigger.Request(), Trigger.Response()).success  # history: first, second
        (newest,) = [p for p in node.history.files() if p.name.startswith("000002.")]
        newest.write_bytes(newest.read_bytes()[:200])  # truncated: unreadable
        ok, message = node.rollback()
        assert not ok and "unreadable" in message and "moved aside" in message, message
        assert np.allclose(node.model.predict(x), 0.0) and not newest.exists()
        assert len(list(node.history.folder.glob("000002.*.unreadable-*"))) == 1
        ok, message = node.rollback()
        assert ok, message
        assert np.array_equal(node.model.predict(x), first)
        assert not np.array_equal(first, second)

        # The history's folder cannot be written (a file in its place): reset and reload refused.
        version = node.model_version
        folder = node.history.folder
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()
        folder.write_text("in the way")
        res = node._on_reset(Trigger.Request(), Trigger.Response())
        assert not res.success and "reset refused, the model is unchanged" in res.message, res.message
        assert "keep_previous_models to 0" in res.message
        RLSModel_ = type(node.model)
        RLSModel_(3, 1).save(tmp_path / "models" / "other.model")
        ok, message = node.reload(tmp_path / "models" / "other.model")
        assert not ok and "previous model kept" in message, message
        assert node.model_version == version and np.array_equal(node.model.predict(x), first)
    finally:
        node.destroy_node()

    none_kept = rls_node(rclpy_context, model_directory=str(tmp_path / "other"), keep_previous_models=0)
    try:
        none_kept.model.update([1.0, 2.0, 3.0], [1.0])
        assert none_kept._on_reset(Trigger.Request(), Trigger.Response()).success
        ok, message = none_kept.rollback()
        assert not ok and "keep_previous_models is 0" in message, message
        assert not (tmp_path / "other" / "previous").exists()
    finally:
        none_kept.destroy_node()
