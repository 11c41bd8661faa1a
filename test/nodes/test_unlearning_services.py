"""Undoing teaching across processes: an object_recognition process taught a
wrong episode unlearns it through ~/undo_teaching and answers exactly as before it; ~/rollback
undoes the undo; ~/rename_class and ~/forget_class change the classes as retraining would; bad
requests are refused with a clear message, counted, and change nothing. What the node took back
(undone, forgotten, renamed, reset) is not learned again by a retraining that continues from its
model, from a bag of everything it was taught."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import DiagnosticsReader, call_service, first_call, latched_qos, node_argv, spin_until

pytestmark = pytest.mark.graph

NODE = "object_recognition"
DIM = 8
CLASSES = ("mug", "duck", "teddy")
PROBES = np.random.default_rng(99).normal(scale=2.0, size=(6, DIM)).astype(np.float32)


def sample(rng: np.random.Generator, label: str, n: int = 1) -> np.ndarray:
    centre = np.zeros(DIM)
    k = CLASSES.index(label)
    centre[2 * k : 2 * k + 2] = 3.0
    return (centre + rng.normal(scale=0.3, size=(n, DIM))).astype(np.float32)


class Teacher:
    """The test's side of the graph: labeled samples, the node's services, its diagnostics."""

    def __init__(self, executor: Any, proc: Any) -> None:
        from lifelong_learning.msg import LabeledFeatures
        from lifelong_learning.srv import (
            ForgetClass,
            GetClassifierInfo,
            Predict,
            RenameClass,
            SaveModel,
            UndoTeaching,
        )
        from rclpy.node import Node
        from rclpy.qos import QoSProfile
        from std_srvs.srv import Trigger

        self.executor, self.proc = executor, proc
        self.node = Node("unlearning_test_peer", context=executor.context)
        executor.add_node(self.node)
        self.labeled = self.node.create_publisher(LabeledFeatures, "labeled_features", QoSProfile(depth=100))
        self.sent: list[tuple[np.ndarray, str]] = []  # every labeled sample, as a bag would hold it
        self.clients = {
            name: self.node.create_client(srv, f"/{NODE}/{name}")
            for name, srv in (
                ("predict", Predict),
                ("info", GetClassifierInfo),
                ("rollback", Trigger),
                ("forget_class", ForgetClass),
                ("undo_teaching", UndoTeaching),
                ("rename_class", RenameClass),
                ("reset", Trigger),
                ("save_model", SaveModel),
            )
        }
        self.diag = DiagnosticsReader(self.node)

    def call(self, name: str, **fields: Any) -> Any:
        client = self.clients[name]
        return call_service(self.executor, client, client.srv_type.Request(**fields), 20.0)

    def info(self) -> Any:
        return self.call("info")

    def predictions(self) -> list[tuple[list[str], np.ndarray]]:
        out = []
        for x in PROBES:
            res = self.call("predict", data=x.tolist())
            assert res.success, res.message
            out.append((list(res.labels), np.asarray(res.scores)))
        return out

    def teach(self, rng: np.random.Generator, label: str, n: int, like: str | None = None) -> None:
        """``n`` samples of ``like`` (default: ``label``) labeled ``label``; waits until learned."""
        from lifelong_learning.msg import LabeledFeatures

        assert spin_until(self.executor, lambda: self.labeled.get_subscription_count() > 0, 30)
        want = self.info().samples_seen + n
        for x in sample(rng, like or label, n):
            self.labeled.publish(LabeledFeatures(data=x.tolist(), label=label))
            self.sent.append((x, label))
        assert spin_until(self.executor, lambda: self.info().samples_seen == want, 20), self.proc.log()

    def refused(self) -> int:
        spin_until(self.executor, lambda: False, 0.6)  # a diagnostics period or two
        return self.diag.rejected(NODE, "unlearning refused")


def same_predictions(a: list, b: list) -> bool:
    """Labels equal, scores equal to float32 rounding (the message's type)."""
    pairs = zip(a, b, strict=True)
    return all(la == lb and np.allclose(sa, sb, rtol=1e-6, atol=1e-6) for (la, sa), (lb, sb) in pairs)


def test_a_wrong_episode_is_undone_exactly_and_classes_are_renamed_and_forgotten(
    executor, start_process, tmp_path
):
    from lifelong_learning.srv import GetClassifierInfo

    models = tmp_path / "models"
    proc = start_process(
        node_argv(
            NODE,
            *("-p", f"model_directory:={models}", "-p", f"checkpoint_path:={tmp_path / 'ckpt.model'}"),
            *("-p", "keep_samples:=200", "-p", "diagnostics_period_s:=0.25"),
        )
    )
    node = Teacher(executor, proc)
    first_call(executor, node.clients["info"], GetClassifierInfo.Request())
    rng = np.random.default_rng(0)
    node.teach(rng, "mug", 30)
    node.teach(rng, "duck", 30)
    before = node.predictions()
    assert all(labels == ["mug", "duck"] for labels, _ in before)

    # A wrong episode: ducks shown and called "mug". ~/undo_teaching takes it back, exactly.
    node.teach(rng, "mug", 12, like="duck")
    wrong = node.predictions()
    assert not same_predictions(wrong, before)
    res = node.call("undo_teaching", last_n=0)
    assert res.success and res.samples == 12 and list(res.labels) == ["mug"], res.message
    assert "kept for ~/rollback" in res.message
    assert same_predictions(node.predictions(), before)
    info = node.info()
    assert info.samples_seen == 60 and list(info.counts) == [30, 30]

    # ~/rollback undoes the undo; undoing again (the last 12) gets back to before.
    assert node.call("rollback").success
    assert same_predictions(node.predictions(), wrong) and node.info().samples_seen == 72
    res = node.call("undo_teaching", last_n=12)
    assert res.success and res.samples == 12, res.message
    assert same_predictions(node.predictions(), before)

    # A renamed class answers with its new name, with the same scores.
    res = node.call("rename_class", label="duck", new_label="rubber duck")
    assert res.success, res.message
    renamed = node.predictions()
    for (labels, scores), (_, scores_before) in zip(renamed, before, strict=True):
        assert labels == ["mug", "rubber duck"] and np.array_equal(scores, scores_before)

    # A class taught by mistake, forgotten: the model answers as before it was taught.
    node.teach(rng, "teddy", 15)
    assert node.info().classes[-1] == "teddy"
    res = node.call("forget_class", label="teddy")
    assert res.success and "15 samples" in res.message, res.message
    assert same_predictions(node.predictions(), renamed)
    assert list(node.info().classes) == ["mug", "rubber duck"]

    # Bad requests: refused with the reason, counted, nothing changed.
    counted = node.refused()
    refusals = [
        ("forget_class", {"label": "unicorn"}, "not a known class"),
        ("rename_class", {"label": "unicorn", "new_label": "horse"}, "not a known class"),
        ("rename_class", {"label": "mug", "new_label": "  "}, "new label refused"),
        ("rename_class", {"label": "mug", "new_label": "mug"}, "already"),
        ("undo_teaching", {"last_n": 5000}, "only"),
    ]
    for name, fields, words in refusals:
        res = node.call(name, **fields)
        assert not res.success and words in res.message and "unchanged" in res.message, res.message
    assert node.call("forget_class", label="mug").success
    res = node.call("forget_class", label="rubber duck")
    assert not res.success and "last class" in res.message, res.message
    assert spin_until(executor, lambda: node.diag.rejected(NODE, "unlearning refused") == counted + 6, 10)
    assert list(node.info().classes) == ["rubber duck"]
    assert node.call("rollback").success  # the forgotten mug comes back
    assert same_predictions(node.predictions(), renamed)
    assert proc.alive()


def test_a_retraining_from_the_bag_does_not_learn_again_what_the_node_took_back(
    executor, start_process, tmp_path, make_job
):
    """The bag holds every sample the node was sent; the node undid a wrong episode, forgot a class
    and renamed one. A retraining that continues from the node's saved model learns the bag as the
    node now knows it; after ~/reset, only what was taught since."""
    from lifelong_learning.srv import GetClassifierInfo

    from lifelong_learning.io.bags import write_labeled_features
    from lifelong_learning.learners import IncrementalRLSC
    from lifelong_learning.retraining.classification import TAKEN_BACK
    from lifelong_learning.retraining.pipeline import run_job

    proc = start_process(node_argv(NODE, *("-p", f"model_directory:={tmp_path}", "-p", "keep_samples:=200")))
    node = Teacher(executor, proc)
    first_call(executor, node.clients["info"], GetClassifierInfo.Request())
    rng = np.random.default_rng(1)
    node.teach(rng, "mug", 20)
    node.teach(rng, "duck", 20)
    node.teach(rng, "mug", 8, like="duck")  # the mistake
    assert node.call("undo_teaching", last_n=0).samples == 8
    node.teach(rng, "teddy", 15)
    assert node.call("forget_class", label="teddy").success
    assert node.call("rename_class", label="duck", new_label="rubber duck").success

    def retrain(name: str) -> tuple[IncrementalRLSC, dict]:
        assert node.call("save_model", path=str(tmp_path / f"{name}.llm")).success
        X, labels = np.array([x for x, _ in node.sent]), [label for _, label in node.sent]
        write_labeled_features(tmp_path / f"{name}-bag", X, labels)
        init = str(tmp_path / f"{name}.llm")
        report = run_job(
            make_job(
                f"{name}-bag", task="classification", centers=20, epochs=3, out=f"{name}-new.llm", init=init
            )
        )
        return IncrementalRLSC.load(tmp_path / f"{name}-new.llm"), report

    model, report = retrain("edited")
    assert list(model.classes_) == ["mug", "rubber duck"] and report["skipped"] == {TAKEN_BACK: 23}
    ducks = sample(np.random.default_rng(7), "duck", 20)
    assert np.mean(model.predict(ducks.astype(np.float64)) == "rubber duck") > 0.9

    assert node.call("reset").success
    node.teach(rng, "teddy", 10)  # after the reset: the only samples a retraining may learn
    model, report = retrain("reset")
    assert list(model.classes_) == ["teddy"] and report["skipped"] == {TAKEN_BACK: 63}, report["skipped"]
    assert proc.alive()


def test_a_model_reloaded_after_an_undo_does_not_bring_the_mistake_back(
    executor, start_process, tmp_path, make_job
):
    """A retraining learned a bag that holds a mistake; the node then undid it. That retraining's
    model, announced as a tuner announces it, is refused (it learned the mistake as sums and cannot
    unlearn it), counted, and the node answers as before; a retraining that continues from the
    node's model now loads, and a class renamed on the node since is renamed in it as it is
    swapped in. ~/load_model does the same, unless asked to serve the file as it is."""
    from lifelong_learning.srv import GetClassifierInfo, LoadModel
    from std_msgs.msg import String

    from lifelong_learning.io.bags import write_labeled_features
    from lifelong_learning.retraining.pipeline import run_job

    argv = ("-p", f"model_directory:={tmp_path}", "-p", "keep_samples:=200", "-p", "shadow_window_s:=0.0")
    proc = start_process(node_argv(NODE, *argv))
    node = Teacher(executor, proc)
    announce = node.node.create_publisher(String, "tuned_model", latched_qos())
    load = node.node.create_client(LoadModel, f"/{NODE}/load_model")
    first_call(executor, node.clients["info"], GetClassifierInfo.Request())
    rng = np.random.default_rng(3)
    node.teach(rng, "mug", 20)
    node.teach(rng, "duck", 20)
    node.teach(rng, "mug", 8, like="duck")  # the mistake

    def retrain(name: str) -> str:
        assert node.call("save_model", path=str(tmp_path / f"{name}-serving.llm")).success
        X, labels = np.array([x for x, _ in node.sent]), [label for _, label in node.sent]
        write_labeled_features(tmp_path / f"{name}-bag", X, labels)
        init = str(tmp_path / f"{name}-serving.llm")
        run_job(
            make_job(f"{name}-bag", task="classification", centers=20, epochs=3, out=f"{name}.llm", init=init)
        )
        return str(tmp_path / f"{name}.llm")

    def version() -> str:
        return node.diag.values(NODE).get("model version", "")

    before_undo = retrain("before-undo")
    assert node.call("undo_teaching", last_n=0).samples == 8
    answers = node.predictions()
    assert spin_until(executor, lambda: version() == "1", 10), node.diag.values(NODE)
    announce.publish(String(data=before_undo))
    assert spin_until(executor, lambda: node.diag.rejected(NODE, "model reload failed") == 1, 20), proc.log()
    assert "may have learned and cannot unlearn" in proc.log()
    assert same_predictions(node.predictions(), answers) and version() == "1"

    after_undo = retrain("after-undo")  # continues from the node's model: the mistake left out
    assert node.call("rename_class", label="duck", new_label="rubber duck").success
    announce.publish(String(data=after_undo))
    assert spin_until(executor, lambda: version() == "3", 20), proc.log()  # renamed (2), loaded (3)
    assert sorted(node.info().classes) == ["mug", "rubber duck"]
    ducks = [node.call("predict", data=x.tolist()).top_label for x in sample(rng, "duck", 10)]
    assert ducks.count("rubber duck") >= 9, ducks

    res = call_service(executor, load, LoadModel.Request(path=before_undo), 20.0)
    assert not res.success and "may have learned" in res.message, res.message
    res = call_service(executor, load, LoadModel.Request(path=before_undo, as_is=True), 20.0)
    assert res.success, res.message  # a person's choice: as the file holds it
    assert sorted(node.info().classes) == ["duck", "mug"] and proc.alive()
