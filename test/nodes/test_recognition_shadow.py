"""Shadow evaluation, canary and drift alarm of object_recognition in its own process on a real DDS
graph, taught LabeledFeatures of three Gaussian class clusters streamed by the
test: a model learned from permuted labels, sent as tuned_model_data with shadow off, is swapped in
at once; with shadow on, a better model (learned from other samples of the true clusters) is
promoted after its window, a worse one (permuted labels) is never served (~/predict answers and the
model version unchanged) and is dropped; with shadow off and canary on, a worse model swapped in is
rolled back by the node; then the features of every class move (a new camera: a
rotation of the feature space) and the drift alarm is raised on ~/drift and in diagnostics."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import (
    IMMEDIATE_SWAP,
    DiagnosticsReader,
    call_service,
    latched_qos,
    model_file_message,
    node_argv,
    set_double,
)

from lifelong_learning.learners.rlsc import IncrementalRLSC

pytestmark = pytest.mark.graph

NODE = "object_recognition"
D = 8
LABELS = ("cup", "ball", "box")
CENTERS = np.random.default_rng(0).normal(scale=1.2, size=(3, D))


def trained(n: int, seed: int, permute: bool) -> IncrementalRLSC:
    """A model of the clusters from ``n`` samples the node never sees (labels shifted by one class
    when ``permute``)."""
    rng = np.random.default_rng(seed)
    model = IncrementalRLSC(lambdas=1.0)
    for k in range(n):
        label = LABELS[(k + permute) % 3]
        model.partial_fit(CENTERS[k % 3] + rng.normal(size=D), [label])
    return model


class Graph:
    """The test's side: taught samples streamed in, models sent as bytes, the node's ~/shadow and
    ~/drift events, diagnostics and ~/predict read back."""

    def __init__(self, executor: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticStatus
        from lifelong_learning.msg import LabeledFeatures, ModelFile
        from lifelong_learning.srv import Predict
        from rclpy.node import Node
        from std_msgs.msg import String

        self.executor = executor
        self.node = Node("recognition_shadow_test_peer", context=executor.context)
        executor.add_node(self.node)
        latched = latched_qos()
        self.models = self.node.create_publisher(ModelFile, "tuned_model_data", latched)
        self.taught = self.node.create_publisher(LabeledFeatures, "labeled_features", 100)
        self.events: list[dict] = []
        self.node.create_subscription(
            String, f"/{NODE}/shadow", lambda m: self.events.append(json.loads(m.data)), latched
        )
        self.alarms: list[DiagnosticStatus] = []
        self.node.create_subscription(DiagnosticStatus, f"/{NODE}/drift", self.alarms.append, latched)
        self.diag = DiagnosticsReader(self.node)
        self.predict = self.node.create_client(Predict, f"/{NODE}/predict")
        self.rng = np.random.default_rng(1)
        self.camera = np.eye(D)  # what the features of the scene go through
        self.sent = 0

    def stream(self, until: Any, timeout: float) -> bool:
        """Teach samples of the three classes in turn (about 200 a second) until ``until()``."""
        from lifelong_learning.msg import LabeledFeatures

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if until():
                return True
            k = self.sent % 3
            x = self.camera @ (CENTERS[k] + self.rng.normal(size=D))
            self.taught.publish(LabeledFeatures(data=x.tolist(), label=LABELS[k]))
            self.sent += 1
            self.executor.spin_once(timeout_sec=0.005)
        return until()

    def send(self, model: IncrementalRLSC, folder: Path, name: str) -> None:
        self.models.publish(model_file_message(model, folder, name))

    def event(self, outcome: str) -> dict | None:
        return next((e for e in reversed(self.events) if e["outcome"] == outcome), None)

    def values(self) -> dict[str, str]:
        return self.diag.values(NODE)

    def answers(self) -> list[str]:
        """~/predict's labels for the three class centres."""
        from lifelong_learning.srv import Predict

        labels = []
        for center in CENTERS:
            res = call_service(self.executor, self.predict, Predict.Request(data=center.tolist()))
            assert res.success, res.message
            labels.append(res.label)
        return labels


def set_parameter(graph: Graph, name: str, value: float) -> None:
    set_double(graph.executor, graph.node, f"/{NODE}", name, value)


def start_node(start_process: Any, tmp_path: Path, *params: str) -> tuple[Any, Path]:
    """object_recognition (one λ, α 0, shadow and canary off at start, diagnostics every 0.25 s,
    ``params`` more), and the folder the test's "tuner" writes its models to."""
    tuner = tmp_path / "tuner"
    tuner.mkdir()
    proc = start_process(
        node_argv(
            NODE,
            *("-p", "lambdas:=[1.0]", "-p", "alpha:='0.0'", "-p", f"model_directory:={tmp_path / 'models'}"),
            *("-p", "diagnostics_period_s:=0.25", *IMMEDIATE_SWAP, *params),
        )
    )
    return proc, tuner


def test_shadow_promotes_a_better_model_drops_a_worse_one_and_drift_is_alarmed(
    executor, start_process, tmp_path
):
    from diagnostic_msgs.msg import DiagnosticStatus

    drift = ("-p", "metrics_window_s:=1.0", "-p", "drift_factor:=2.0", "-p", "drift_window_s:=0.5")
    proc, tuner = start_node(start_process, tmp_path, *drift)
    graph = Graph(executor)
    assert graph.stream(lambda: graph.values().get("model version") == "0", 60), proc.log()
    assert graph.values()["drift"].startswith("reference") and graph.values()["model in shadow"] == "none"

    # Shadow off: a bad model (3000 samples of permuted labels) is swapped in at once.
    graph.send(trained(3000, 2, permute=True), tuner, "bad.model")
    assert graph.stream(lambda: graph.values().get("model version") == "1", 20), proc.log()
    set_parameter(graph, "shadow_window_s", 1.0)

    # A better candidate (2000 samples of the true clusters): in shadow for 1 s, then swapped in.
    graph.send(trained(2000, 3, permute=False), tuner, "better.model")
    assert graph.stream(lambda: graph.event("promoted") is not None, 20), proc.log()
    promoted = graph.event("promoted")
    assert promoted["candidate_error"] < 0.2 < 0.5 < promoted["serving_error"], promoted
    assert promoted["model"].endswith("better.model") and promoted["samples"] > 50
    assert graph.stream(lambda: graph.values().get("model version") == "2", 10), graph.values()
    assert graph.answers() == list(LABELS)

    # A worse candidate: it runs in shadow (learning too), never answers, is dropped after 1 s.
    graph.send(trained(3000, 4, permute=True), tuner, "permuted.model")
    assert graph.stream(lambda: len([e for e in graph.events if e["outcome"] == "started"]) == 2, 20)
    assert graph.answers() == list(LABELS)  # the serving model answers, not the candidate
    assert graph.stream(lambda: graph.event("dropped") is not None, 20), proc.log()
    dropped = graph.event("dropped")
    assert dropped["model"].endswith("permuted.model") and not dropped["promoted"]
    assert dropped["candidate_error"] > 0.5 > 0.2 > dropped["serving_error"] and dropped["samples"] > 50
    assert graph.stream(lambda: graph.values().get("shadow verdicts") == "dropped 1, promoted 1", 10)
    assert graph.values()["model version"] == "2" and graph.answers() == list(LABELS)  # never served

    # Canary: shadow off at run time, a worse model is swapped in at once; its canary rolls it back.
    set_parameter(graph, "shadow_window_s", 0.0)
    set_parameter(graph, "canary_window_s", 1.0)
    graph.send(trained(3000, 6, permute=True), tuner, "forced.model")
    assert graph.stream(lambda: graph.event("rolled back") is not None, 20), proc.log()
    rolled = graph.event("rolled back")
    assert rolled["candidate_error"] < 0.2 < 0.5 < rolled["serving_error"] and rolled["rolled_back"], rolled
    assert graph.stream(lambda: graph.values().get("automatic rollbacks") == "1", 10), graph.values()
    assert graph.values()["model version"] == "4"  # bad (1), promoted (2), forced (3), rolled back (4)
    assert graph.answers() == list(LABELS)

    # The drift alarm's reference is the serving model's level (after one metrics window);
    # then a new camera: the features of every class move, the live error stays high.
    assert graph.stream(lambda: graph.values().get("drift", "").startswith("reference 0."), 10)
    assert not graph.alarms or graph.alarms[-1].level != DiagnosticStatus.WARN
    graph.camera = np.linalg.qr(np.random.default_rng(5).normal(size=(D, D)))[0]
    assert graph.stream(lambda: any(a.level == DiagnosticStatus.WARN for a in graph.alarms), 20), (
        graph.values()
    )
    alarm = next(a for a in graph.alarms if a.level == DiagnosticStatus.WARN)
    figures = {kv.key: float(kv.value) for kv in alarm.values}
    assert figures["error"] > 2 * figures["reference"] and figures["factor"] == 2.0, figures
    assert "above 2 ×" in alarm.message
    assert graph.stream(lambda: graph.values().get("drift", "").startswith("ALARM"), 10) or any(
        a.level == DiagnosticStatus.OK for a in graph.alarms
    ), graph.values()
    assert proc.alive()


def test_a_candidate_that_wins_in_shadow_is_not_swapped_in_over_an_undo(executor, start_process, tmp_path):
    """The node (serving a bad model) undid its last samples; a better candidate made without knowing
    it (it may have learned them, and keeps none of its samples) wins in shadow but is not swapped
    in: counted, published, the serving model unchanged. The same candidate remembering what the
    node took back (as a retraining that continues from the node's model does) is promoted. Loaded
    by ~/load_model, the unaware candidate is refused too, unless loaded as_is."""
    from lifelong_learning.srv import GetClassifierInfo, LoadModel, SaveModel, UndoTeaching

    proc, tuner = start_node(start_process, tmp_path)
    graph = Graph(executor)
    assert graph.stream(lambda: graph.values().get("model version") == "0", 60), proc.log()
    graph.send(trained(3000, 2, permute=True), tuner, "bad.model")
    assert graph.stream(lambda: graph.values().get("model version") == "1", 20), proc.log()
    set_parameter(graph, "shadow_window_s", 1.0)
    undo = graph.node.create_client(UndoTeaching, f"/{NODE}/undo_teaching")
    info = graph.node.create_client(GetClassifierInfo, f"/{NODE}/info")

    def seen() -> int:
        return call_service(executor, info, GetClassifierInfo.Request(), 20.0).samples_seen

    assert graph.stream(lambda: seen() >= 3010, 20), graph.values()  # the bad model learned some
    res = call_service(executor, undo, UndoTeaching.Request(last_n=3), 20.0)
    assert res.success and res.samples == 3, res.message
    assert graph.stream(lambda: graph.values().get("model version") == "2", 10), graph.values()

    graph.send(trained(2000, 3, permute=False), tuner, "unaware.model")

    def refused() -> dict | None:
        return next((e for e in graph.events if "not swapped in" in e.get("reason", "")), None)

    assert graph.stream(lambda: refused() is not None, 20), proc.log()
    assert "may have learned" in refused()["reason"] and not refused()["promoted"], refused()
    assert graph.stream(lambda: graph.diag.rejected(NODE, "model reload failed") >= 1, 10), graph.values()
    assert graph.values()["model version"] == "2"

    save = graph.node.create_client(SaveModel, f"/{NODE}/save_model")
    saved = tmp_path / "models" / "serving.llm"
    assert call_service(executor, save, SaveModel.Request(path=str(saved)), 20.0).success
    aware = trained(2000, 3, permute=False).remember_taken_back(IncrementalRLSC.load(saved).taken_back_)
    graph.send(aware, tuner, "aware.model")
    assert graph.stream(lambda: graph.event("promoted") is not None, 20), proc.log()
    assert graph.stream(lambda: graph.values().get("model version") == "3", 10), graph.values()
    assert graph.answers() == list(LABELS)

    # a person's ~/load_model: the bad model again (as is, at once: its own empty record), an undo on
    # it, then the unaware candidate
    load = graph.node.create_client(LoadModel, f"/{NODE}/load_model")
    models = tmp_path / "models"
    trained(3000, 2, permute=True).save(models / "bad.llm")
    trained(2000, 3, permute=False).save(models / "unaware.llm")
    set_parameter(graph, "shadow_window_s", 0.0)
    assert call_service(
        executor, load, LoadModel.Request(path=str(models / "bad.llm"), as_is=True), 20.0
    ).success
    assert graph.stream(lambda: graph.values().get("model version") == "4", 10), graph.values()
    learned = seen()
    assert graph.stream(lambda: seen() >= learned + 10, 20), graph.values()
    assert call_service(executor, undo, UndoTeaching.Request(last_n=3), 20.0).success
    assert graph.stream(lambda: graph.values().get("model version") == "5", 10), graph.values()
    set_parameter(graph, "shadow_window_s", 1.0)
    assert call_service(executor, load, LoadModel.Request(path=str(models / "unaware.llm")), 20.0).success
    assert graph.stream(lambda: graph.diag.rejected(NODE, "model reload failed") >= 2, 20), proc.log()
    assert graph.values()["model version"] == "5"
    res = call_service(executor, load, LoadModel.Request(path=str(models / "unaware.llm"), as_is=True), 20.0)
    assert res.success, res.message  # in shadow now; promoted as it is
    assert graph.stream(lambda: graph.values().get("model version") == "6", 20), proc.log()
    assert graph.answers() == list(LABELS) and proc.alive()


def test_cleanup_ends_a_trial_so_no_verdict_replaces_the_model_served_after(
    executor, start_process, tmp_path
):
    """A model in shadow when the node is cleaned up: the trial ends (published, no verdict); the
    node configured and activated again serves its own model, and no verdict of that trial comes."""
    from test_lifecycle_cycles import Managed

    proc, tuner = start_node(start_process, tmp_path, "-p", f"checkpoint_path:={tmp_path / 'ckpt.llm'}")
    graph = Graph(executor)
    assert graph.stream(lambda: graph.values().get("model version") == "0", 60), proc.log()
    set_parameter(graph, "shadow_window_s", 2.0)
    graph.send(trained(2000, 3, permute=False), tuner, "candidate.model")
    assert graph.stream(lambda: graph.event("started") is not None, 20), proc.log()
    managed = Managed(executor, proc, NODE, namespace="")  # a lost first reply is recovered
    managed.transition("deactivate", "inactive")
    managed.transition("cleanup", "unconfigured")
    assert graph.stream(lambda: graph.event("ended") is not None, 10), graph.events
    ended = graph.event("ended")
    assert ended["reason"] == "the node was cleaned up" and ended["model"].endswith("candidate.model"), ended
    managed.transition("configure", "inactive")
    managed.transition("activate", "active")
    before = graph.sent
    assert graph.stream(lambda: graph.sent >= before + 600, 30)  # past the trial's window, learning
    assert graph.event("promoted") is None and graph.event("dropped") is None, graph.events
    assert graph.values().get("model version") == "0", graph.values()
