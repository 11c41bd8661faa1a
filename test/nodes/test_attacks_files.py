"""Attacks on the learner nodes' files, from another process.

One object_recognition process (taught three classes, ``model_directory`` in the test's folder)
serves every test of this module. Each test makes one kind of bad request on ``~/save_model``
or ``~/load_model`` and asserts that the node is alive (it answers ``~/info``), that the refusal
is counted (its reason's count in the node's ``/diagnostics`` values rose by one), that nothing
outside what it may write changed, and that its predictions on fixed probe inputs are unchanged.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import (
    DiagnosticsReader,
    call_service,
    first_call,
    new_context,
    new_executor,
    node_argv,
    spin_until,
    stop_after_nodes,
    write_oversized_model_file,
)

from lifelong_learning.core.model_file import ModelFile, save_model_file
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.nodes.supervisor import NodeProcess

pytestmark = pytest.mark.graph


def _latched() -> Any:
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        depth=5, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )


DIM = 8
CLASSES = ("mug", "duck", "teddy")
NODE = "object_recognition"


def sample(rng: np.random.Generator, label: str, n: int) -> np.ndarray:
    centre = np.zeros(DIM)
    k = CLASSES.index(label)
    centre[2 * k : 2 * k + 2] = 3.0
    return (centre + rng.normal(scale=0.3, size=(n, DIM))).astype(np.float32)


@dataclass
class Target:
    """The node under attack, the peer that talks to it, and what it answered before any attack."""

    folder: Path  # the test's folder: models/ is the node's model_directory, the rest is outside
    executor: Any
    peer: Any
    proc: NodeProcess
    probes: np.ndarray
    diag: DiagnosticsReader  # the node's statuses and counters
    baseline: list[tuple[str, list[float]]] = field(default_factory=list)

    @property
    def models(self) -> Path:
        return self.folder / "models"

    def call(self, client: Any, request: Any) -> Any:
        return call_service(self.executor, client, request, 20.0)

    def answers(self) -> list[tuple[str, list[float]]]:
        """~/predict's label and scores for every probe."""
        from lifelong_learning.srv import Predict

        out = []
        for x in self.probes:
            res = self.call(self.peer.predict, Predict.Request(data=x.tolist()))
            assert res.success, res.message
            out.append((res.label, list(res.scores)))
        return out

    def save(self, path: str) -> Any:
        from lifelong_learning.srv import SaveModel

        return self.call(self.peer.save_model, SaveModel.Request(path=path))

    def load(self, path: str) -> Any:
        from lifelong_learning.srv import LoadModel

        return self.call(self.peer.load_model, LoadModel.Request(path=path))

    def refused(self, request: Any, reason: str, what: str) -> Any:
        """Make ``request()``; assert it failed, the node counted it under ``reason`` and is alive and
        unchanged. Returns the answer."""
        from lifelong_learning.srv import GetClassifierInfo

        before = self.diag.rejected(NODE, reason)
        res = request()
        assert not res.success, res.message
        assert what in res.message, res.message
        assert spin_until(self.executor, lambda: self.diag.rejected(NODE, reason) == before + 1, 10), (
            self.proc.log()
        )
        assert self.proc.alive()
        assert self.call(self.peer.info, GetClassifierInfo.Request()).success
        assert self.answers() == self.baseline
        return res


def make_peer(context: Any) -> Any:
    from lifelong_learning.msg import LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo, LoadModel, Predict, SaveModel
    from rclpy.node import Node
    from rclpy.qos import QoSProfile

    peer = Node("attack_files_peer", context=context)
    peer.labeled = peer.create_publisher(LabeledFeatures, "labeled_features", QoSProfile(depth=100))
    peer.info = peer.create_client(GetClassifierInfo, f"/{NODE}/info")
    peer.predict = peer.create_client(Predict, f"/{NODE}/predict")
    peer.save_model = peer.create_client(SaveModel, f"/{NODE}/save_model")
    peer.load_model = peer.create_client(LoadModel, f"/{NODE}/load_model")
    return peer


@pytest.fixture(scope="module")
def target(built_interfaces: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The object_recognition process, taught 3 classes x 6 samples, and its answers to 6 probes."""
    from lifelong_learning.msg import LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo

    folder = tmp_path_factory.mktemp("attacks_files")
    (folder / "models").mkdir()
    argv = node_argv(
        NODE,
        *("-p", f"model_directory:={folder / 'models'}"),
        *("-p", f"checkpoint_path:={folder / 'models' / 'checkpoint.llm'}"),
        *("-p", "checkpoint_interval_s:=0.0", "-p", "diagnostics_period_s:=0.2", "-p", "warn_period_s:=0.0"),
    )
    rng = np.random.default_rng(0)
    with new_context() as context, new_executor(context) as executor:
        peer = make_peer(context)
        executor.add_node(peer)
        proc = NodeProcess(argv, log_path=folder / "object_recognition.log")
        probes = np.vstack([sample(rng, c, 2) for c in CLASSES])
        t = Target(folder, executor, peer, proc, probes, DiagnosticsReader(peer))
        try:
            assert first_call(executor, peer.info, GetClassifierInfo.Request()).success
            assert spin_until(executor, lambda: peer.labeled.get_subscription_count() > 0, 20)
            for label in CLASSES:
                for x in sample(rng, label, 6):
                    peer.labeled.publish(LabeledFeatures(data=x.tolist(), label=label))

            def learned() -> bool:
                return t.call(peer.info, GetClassifierInfo.Request()).samples_seen == 6 * len(CLASSES)

            assert spin_until(executor, learned, 20), proc.log()
            assert spin_until(executor, lambda: t.diag.latest(NODE) is not None, 10), proc.log()
            t.baseline = t.answers()
            assert [label for label, _ in t.baseline] == [c for c in CLASSES for _ in range(2)]
            yield t
        finally:
            stop_after_nodes(executor, proc)


def test_save_to_a_path_outside_the_model_directory_is_refused(target):
    outside = target.folder / "outside.llm"
    target.refused(lambda: target.save(str(outside)), "path refused", "outside the directory")
    assert not outside.exists()
    assert target.save("inside.llm").success  # a relative path: under model_directory
    assert IncrementalRLSC.load(target.models / "inside.llm").n_samples == 6 * len(CLASSES)


def test_a_dotdot_escape_is_refused(target):
    for path in ("../escaped.llm", f"{target.models}/sub/../../escaped.llm"):
        target.refused(lambda path=path: target.save(path), "path refused", "outside the directory")
    assert not (target.folder / "escaped.llm").exists()


def test_save_over_an_existing_non_model_file_is_refused(target):
    notes = target.models / "notes.txt"
    notes.write_text("the operator's notes")
    target.refused(lambda: target.save("notes.txt"), "path refused", "not a file this writer made")
    assert notes.read_text() == "the operator's notes"


def test_save_over_a_fifo_is_refused(target):
    fifo = target.models / "fifo.llm"
    os.mkfifo(fifo)
    target.refused(lambda: target.save(str(fifo)), "path refused", "special file")
    assert fifo.is_fifo()


def test_save_over_a_symlink_is_refused(target):
    # the link and the model file it points to are both inside model_directory
    assert target.save("real.llm").success
    link = target.models / "link.llm"
    link.symlink_to(target.models / "real.llm")
    before = (target.models / "real.llm").read_bytes()
    target.refused(lambda: target.save("link.llm"), "path refused", "symbolic link")
    assert link.is_symlink() and (target.models / "real.llm").read_bytes() == before


def test_save_over_a_directory_is_refused(target):
    directory = target.models / "a_directory"
    directory.mkdir()
    (directory / "keep.txt").write_text("keep")
    target.refused(lambda: target.save("a_directory"), "path refused", "is a directory")
    assert (directory / "keep.txt").read_text() == "keep"


def test_load_of_a_file_whose_header_claims_8_tib_is_refused_at_once(target):
    huge = write_oversized_model_file(target.models / "huge.llm", IncrementalRLSC.kind)
    took = []

    def load():
        t0 = time.monotonic()
        res = target.load("huge.llm")
        took.append(time.monotonic() - t0)
        return res

    res = target.refused(load, "model reload failed", "the limit is")
    assert "8796093022208 bytes" in res.message
    # answered at once (a service round trip, generous for a loaded machine), nothing allocated:
    # it must not hang on the bad file
    assert took[0] < 10.0
    assert huge.stat().st_size < 1000


def test_load_from_outside_the_model_directory_is_refused(target):
    IncrementalRLSC(lambdas=[1.0], alpha=0.0).save(target.folder / "foreign.llm")  # a valid model
    target.refused(lambda: target.load(str(target.folder / "foreign.llm")), "path refused", "outside")


def test_save_over_another_learners_model_is_refused(target):
    """E.g. the inverse_dynamics checkpoint beside this node's in a shared model_directory."""
    other = target.models / "inverse_dynamics.llm"
    save_model_file(other, ModelFile(kind="semiparametric_inverse_dynamics", meta={"x": 1}))
    before = other.read_bytes()
    target.refused(lambda: target.save("inverse_dynamics.llm"), "path refused", "not a file this writer made")
    assert other.read_bytes() == before


def test_announcing_the_nodes_own_checkpoint_is_refused(target):
    """One String on model_topic naming the checkpoint would roll the model back to it."""
    from std_msgs.msg import String

    # a checkpoint that differs from the serving model (as one from a minute ago would)
    IncrementalRLSC(lambdas=[1.0], alpha=0.0).save(target.models / "checkpoint.llm")
    before = target.diag.rejected(NODE, "path refused")
    announce = target.peer.create_publisher(String, "tuned_model", _latched())
    assert spin_until(target.executor, lambda: announce.get_subscription_count() > 0, 10)
    announce.publish(String(data="checkpoint.llm"))
    assert spin_until(
        target.executor, lambda: target.diag.rejected(NODE, "path refused") == before + 1, 10
    ), target.proc.log()
    assert target.answers() == target.baseline
