"""object_recognition node over a real DDS graph: teach, predict, services, bad input, restart.

One node process serves every test of this module (:func:`recognizer`, taught three classes
once); each test checks one behaviour and leaves the model as it found it.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import (
    IMMEDIATE_SWAP,
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

DIM = 16
CLASSES = ("mug", "duck", "teddy")
COUNTS = (40, 40, 15)  # samples taught per class (teddy arrives after the others, and is rarer)


def sample(rng, label, n=1):
    centre = np.zeros(DIM)
    centre[CLASSES.index(label) * 4 : CLASSES.index(label) * 4 + 4] = 3.0
    return centre + rng.normal(scale=0.3, size=(n, DIM))


def make_peer(context):
    from lifelong_learning.msg import Features, LabeledFeatures, Prediction
    from lifelong_learning.srv import GetClassifierInfo, LoadModel, Predict, SaveModel
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, qos_profile_sensor_data
    from std_srvs.srv import Trigger

    class Peer(Node):
        def __init__(self):
            super().__init__("rlsc_test_peer", context=context)
            self.features = self.create_publisher(Features, "features", qos_profile_sensor_data)
            self.labeled = self.create_publisher(LabeledFeatures, "labeled_features", QoSProfile(depth=100))
            self.predictions = []
            self.create_subscription(Prediction, "prediction", self.predictions.append, 10)
            self.info = self.create_client(GetClassifierInfo, "/object_recognition/info")
            self.predict = self.create_client(Predict, "/object_recognition/predict")
            self.save_model = self.create_client(SaveModel, "/object_recognition/save_model")
            self.load_model = self.create_client(LoadModel, "/object_recognition/load_model")
            self.reset = self.create_client(Trigger, "/object_recognition/reset")

    return Peer()


@dataclass
class Recognizer:
    """The object_recognition process shared by the module's tests, and the peer that talks to it."""

    folder: Path
    executor: Any
    peer: Any
    rng: np.random.Generator
    proc: NodeProcess | None = None
    starts: int = 0
    info_before: Any = None  # ~/info before anything was taught
    taught: int = 0

    @property
    def checkpoint(self) -> Path:
        return self.folder / "object_recognition.model"

    def start(self) -> NodeProcess:
        """Start (again) the node process, checkpointing every second to :attr:`checkpoint`."""
        args = ("-p", f"checkpoint_path:={self.checkpoint}", "-p", "checkpoint_interval_s:=1.0")
        args += ("-p", f"model_directory:={self.folder}")  # where ~/save_model and ~/load_model may go
        argv = node_argv("object_recognition", *args, "-p", "warn_period_s:=0.2", *IMMEDIATE_SWAP)
        self.starts += 1
        self.proc = NodeProcess(argv, log_path=self.folder / f"object_recognition-{self.starts}.log")
        return self.proc

    def spin(self, predicate: Callable[[], bool], timeout: float) -> bool:
        return spin_until(self.executor, predicate, timeout)

    def call(self, client: Any, request: Any) -> Any:
        return call_service(self.executor, client, request, 20.0)

    def query(self, client: Any, request: Any) -> Any:
        """A call that may be sent again (a query): sent again every 3 s, up to 60 s. Just after a
        start the server's reply writer may not have matched this peer yet: a reply then is lost."""
        return first_call(self.executor, client, request, 60.0)

    def info(self) -> Any:
        from lifelong_learning.srv import GetClassifierInfo

        return self.query(self.peer.info, GetClassifierInfo.Request())

    def predict(self, label: str) -> Any:
        """The ~/predict answer to a new sample of ``label``."""
        from lifelong_learning.srv import Predict

        x = sample(self.rng, label)[0].astype(np.float32).tolist()
        return self.query(self.peer.predict, Predict.Request(data=x))


@pytest.fixture(scope="module")
def recognizer(built_interfaces, tmp_path_factory) -> Iterator[Recognizer]:
    """One object_recognition process for the module, taught three classes (one after the others)."""
    from lifelong_learning.msg import LabeledFeatures

    with new_context() as context, new_executor(context) as executor:
        peer = make_peer(context)
        executor.add_node(peer)
        rec = Recognizer(
            tmp_path_factory.mktemp("object_recognition"), executor, peer, np.random.default_rng(0)
        )
        rec.start()
        try:
            # Wait for the node, then teach three classes (one arriving after the others).
            rec.info_before = rec.info()
            assert rec.spin(lambda: peer.labeled.get_subscription_count() > 0, 20)
            for label, n in zip(CLASSES, COUNTS, strict=True):
                for x in sample(rec.rng, label, n):
                    peer.labeled.publish(LabeledFeatures(data=x.astype(np.float32).tolist(), label=label))
                    rec.taught += 1
                    executor.spin_once(timeout_sec=0.002)
            assert rec.spin(lambda: rec.info().samples_seen == rec.taught, 20), rec.proc.log()
            yield rec
        finally:
            stop_after_nodes(executor, rec.proc)


def test_teaching_adds_classes_and_chooses_the_regularization(recognizer):
    before = recognizer.info_before
    assert before.success and list(before.classes) == []
    info = recognizer.info()
    assert list(info.classes) == list(CLASSES)
    assert list(info.counts) == [40, 40, 15]
    assert list(info.lambda_candidates) == [0.1, 1.0, 10.0, 100.0, 1000.0]
    assert info.regularization in info.lambda_candidates and 0.0 <= info.recoding_exponent <= 1.0
    assert len(info.validation_accuracy) == 5


def test_predictions_on_the_stream_are_answered_with_the_same_header(recognizer):
    from lifelong_learning.msg import Features

    peer = recognizer.peer
    peer.predictions.clear()
    assert recognizer.spin(lambda: peer.features.get_subscription_count() > 0, 20)
    # Best-effort (sensor-data) stream across processes: frames sent before discovery has
    # matched both directions may be lost, so keep sending new frames until six are answered.
    truth = {}
    deadline = time.monotonic() + 30.0
    i = 0
    while len({p.header.frame_id for p in peer.predictions}) < 6 and time.monotonic() < deadline:
        label = CLASSES[i % len(CLASSES)]
        msg = Features(data=sample(recognizer.rng, label)[0].astype(np.float32).tolist())
        msg.header.frame_id = f"frame{i}"
        truth[msg.header.frame_id] = label
        peer.features.publish(msg)
        recognizer.spin(lambda: False, 0.05)
        i += 1
    assert len({p.header.frame_id for p in peer.predictions}) >= 6, recognizer.proc.log()
    for p in peer.predictions:
        assert p.label == truth[p.header.frame_id]
        assert p.top_label == p.label  # unknown_threshold 0 (the default): always the top class
        assert list(p.labels) == list(CLASSES) and len(p.scores) == 3 and 0.0 < p.confidence <= 1.0


def test_predict_service(recognizer):
    res = recognizer.predict("teddy")
    assert res.success and res.label == "teddy"


def test_bad_input_is_rejected_and_counted_and_the_node_keeps_serving(recognizer):
    from lifelong_learning.msg import Features, LabeledFeatures
    from lifelong_learning.srv import Predict

    peer = recognizer.peer
    bad = Predict.Request(data=[1.0] * (DIM + 1))
    assert not recognizer.call(peer.predict, bad).success
    nan = [float("nan")] + [0.0] * (DIM - 1)
    peer.labeled.publish(LabeledFeatures(data=[1.0] * 3, label="mug"))
    peer.labeled.publish(LabeledFeatures(data=nan, label="mug"))
    peer.labeled.publish(LabeledFeatures(data=[1.0] * DIM, label=""))
    peer.labeled.publish(LabeledFeatures(data=[1.0] * DIM, label="   "))
    peer.features.publish(Features(data=[1.0] * 5))
    peer.features.publish(Features(data=nan))
    for _ in range(20):
        recognizer.executor.spin_once(timeout_sec=0.02)
    assert recognizer.spin(lambda: "rejected input" in recognizer.proc.log(), 10)
    # The model is untouched.
    info = recognizer.info()
    assert info.samples_seen == recognizer.taught and list(info.counts) == [40, 40, 15]
    res = recognizer.predict("duck")
    assert res.success and res.label == "duck"
    assert recognizer.proc.alive()


def test_save_reset_and_load(recognizer):
    from lifelong_learning.srv import LoadModel, SaveModel
    from std_srvs.srv import Trigger

    peer = recognizer.peer
    saved = recognizer.folder / "saved.model"
    assert recognizer.call(peer.save_model, SaveModel.Request(path=str(saved))).success
    assert recognizer.call(peer.reset, Trigger.Request()).success
    assert list(recognizer.info().classes) == []
    res = recognizer.predict("duck")
    assert res.success and res.label == ""
    # by default the file is brought up to what the reset took back: it would know no class
    res = recognizer.call(peer.load_model, LoadModel.Request(path=str(saved)))
    assert not res.success and "as_is: true serves the file as it is" in res.message, res.message
    assert list(recognizer.info().classes) == []
    assert recognizer.call(peer.load_model, LoadModel.Request(path=str(saved), as_is=True)).success
    assert recognizer.info().samples_seen == recognizer.taught


def test_restart_restores_the_final_checkpoint_written_on_sigint(recognizer):
    assert recognizer.proc.stop(signal.SIGINT) == 0
    assert recognizer.checkpoint.exists()
    proc = recognizer.start()  # the same arguments
    assert recognizer.spin(lambda: "restored model from checkpoint" in proc.log(), 60)
    info = recognizer.info()
    assert list(info.classes) == list(CLASSES) and info.samples_seen == recognizer.taught
    res = recognizer.predict("mug")
    assert res.success and res.label == "mug"


def test_unknown_threshold_answers_unknown_far_from_every_taught_class(built_interfaces, tmp_path):
    """With unknown_threshold set, a feature far from every taught class is answered label "" (with
    its top_label and a low calibrated confidence); a taught view is answered with its label. The
    diagnostics report the calibration and the checkpoint's size."""
    from lifelong_learning.msg import Features, LabeledFeatures, Prediction
    from lifelong_learning.srv import GetClassifierInfo, Predict
    from rclpy.qos import QoSProfile, qos_profile_sensor_data

    ns = "/unknown_test"  # beside the module's node: its own names
    checkpoint = tmp_path / "recognizer.model"
    argv = node_argv(
        "object_recognition",
        "-r",
        f"__ns:={ns}",
        "-p",
        "unknown_threshold:=0.7",
        "-p",
        f"checkpoint_path:={checkpoint}",
        "-p",
        "checkpoint_interval_s:=1.0",
        "-p",
        f"model_directory:={tmp_path}",
    )
    far = np.zeros(DIM, dtype=np.float32)
    far[12:] = 3.0  # no taught class excites dimensions 12-15
    proc = NodeProcess(argv, log_path=tmp_path / "object_recognition.log")
    with new_context() as context, new_executor(context) as executor:
        from conftest import DiagnosticsReader, first_call
        from rclpy.node import Node

        peer = Node("unknown_test_peer", context=context)
        executor.add_node(peer)
        labeled = peer.create_publisher(LabeledFeatures, f"{ns}/labeled_features", QoSProfile(depth=100))
        features = peer.create_publisher(Features, f"{ns}/features", qos_profile_sensor_data)
        predictions: list[Any] = []
        peer.create_subscription(Prediction, f"{ns}/prediction", predictions.append, 10)
        diagnostics = DiagnosticsReader(peer)
        info = peer.create_client(GetClassifierInfo, f"{ns}/object_recognition/info")
        predict = peer.create_client(Predict, f"{ns}/object_recognition/predict")
        try:
            assert first_call(executor, info, GetClassifierInfo.Request()).success, proc.log()
            assert spin_until(executor, lambda: labeled.get_subscription_count() > 0, 20)
            rng = np.random.default_rng(1)
            taught = 0
            for label, n in zip(CLASSES, COUNTS, strict=True):
                for x in sample(rng, label, n):
                    labeled.publish(LabeledFeatures(data=x.astype(np.float32).tolist(), label=label))
                    taught += 1
                    executor.spin_once(timeout_sec=0.002)
            assert spin_until(
                executor,
                lambda: call_service(executor, info, GetClassifierInfo.Request()).samples_seen == taught,
                20,
            ), proc.log()
            for label in CLASSES:
                x = sample(rng, label)[0].astype(np.float32).tolist()
                res = call_service(executor, predict, Predict.Request(data=x))
                assert res.success and res.label == res.top_label == label and res.confidence >= 0.7
            res = call_service(executor, predict, Predict.Request(data=far.tolist()))
            assert res.success and res.label == "" and res.top_label in CLASSES and res.confidence < 0.7
            # The stream too (best effort: send until answered).
            assert spin_until(executor, lambda: features.get_subscription_count() > 0, 20)
            deadline = time.monotonic() + 30.0
            while not predictions and time.monotonic() < deadline:
                features.publish(Features(data=far.tolist()))
                spin_until(executor, lambda: bool(predictions), 0.2)
            assert predictions, proc.log()
            p = predictions[0]
            assert p.label == "" and p.top_label in CLASSES and p.confidence < 0.7
            # Diagnostics: the calibration in use, and the checkpoint's size once one is written.
            name = f"{ns}/object_recognition"

            def reported() -> bool:  # a status published after the checkpoint of what was taught
                values = diagnostics.values(name)
                size = values.get("checkpoint size [MB]", "")
                return (
                    values.get("confidence calibration", "").startswith("temperature")
                    and checkpoint.exists()
                    and size == f"{checkpoint.stat().st_size / 1e6:.2f}"
                )

            assert spin_until(executor, reported, 20), diagnostics.values(name)
            values = diagnostics.values(name)
            assert values["unknown threshold"] == "0.7"
        finally:
            stop_after_nodes(executor, proc)
