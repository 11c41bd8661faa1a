"""Special files named to a learner, across processes.

``~/load_model`` on a FIFO inside ``model_directory`` froze the whole learner: the file was read
whole for its key before any is-a-file check, so the service waited for a writer that never came,
and no request or diagnostic was answered after it. One object_recognition process, with paths
outside ``model_directory`` allowed (so that ``/dev/zero`` can be named at all), is sent a FIFO
and ``/dev/zero`` on ``~/load_model``, on ``~/save_model`` (a FIFO) and on ``tuned_model``: each
is refused in under a second, counted, and the node goes on answering and loading good models.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import (
    IMMEDIATE_SWAP,
    DiagnosticsReader,
    call_service,
    first_call,
    new_context,
    new_executor,
    node_argv,
    spin_until,
    stop_after_nodes,
)

from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.nodes.supervisor import NodeProcess

pytestmark = pytest.mark.graph

NODE = "object_recognition"
NAMESPACE = "/special_files"
DIM = 8
#: a refusal is answered within this, however the file behaves: a service that opened a FIFO would
#: block until a writer came (never), one that read /dev/zero until memory ran out; a round trip to the
#: node's process takes milliseconds, this leaves room for a machine loaded by other tests
ANSWERED_WITHIN_S = 5.0


@dataclass
class Target:
    folder: Path  # models/ under it is the node's model_directory
    executor: Any
    peer: Any
    proc: NodeProcess
    diag: DiagnosticsReader

    @property
    def models(self) -> Path:
        return self.folder / "models"

    def timed(self, client: Any, request: Any) -> tuple[Any, float]:
        """The answer to ``request`` and its round trip in seconds (the service is matched already)."""
        t0 = time.monotonic()
        res = call_service(self.executor, client, request, 20.0)
        return res, time.monotonic() - t0

    def rejected(self, reason: str) -> int:
        return self.diag.rejected(f"{NAMESPACE}/{NODE}", reason)

    def version(self) -> int:
        return int(self.diag.values(f"{NAMESPACE}/{NODE}").get("model version", "-1"))

    def wait_rejected(self, reason: str, count: int) -> None:
        assert spin_until(self.executor, lambda: self.rejected(reason) >= count, 10), (
            reason,
            self.rejected(reason),
            self.proc.log(),
        )

    def serving(self) -> None:
        """The node answers ~/predict and ~/info, quickly."""
        from lifelong_learning.srv import GetClassifierInfo, Predict

        res, took = self.timed(self.peer.predict, Predict.Request(data=[0.1] * DIM))
        assert res.success and took < ANSWERED_WITHIN_S, (res.message, took)
        res, took = self.timed(self.peer.info, GetClassifierInfo.Request())
        assert res.success and took < ANSWERED_WITHIN_S, (res.message, took)
        assert self.proc.alive()


def trained(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    clf = IncrementalRLSC(lambdas=[1.0], alpha=0.0)
    clf.partial_fit(rng.normal(size=(6, DIM)), ["a", "b", "c"] * 2)
    clf.save(path)
    return path


@pytest.fixture(scope="module")
def target(built_interfaces: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    from lifelong_learning.srv import GetClassifierInfo, LoadModel, Predict, SaveModel
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    folder = tmp_path_factory.mktemp("special_files")
    (folder / "models").mkdir()
    argv = node_argv(
        NODE,
        *("-p", f"model_directory:={folder / 'models'}", "-p", "allow_paths_outside_model_directory:=true"),
        *("-p", "lambdas:=[1.0]", "-p", "alpha:='0.0'", "-p", "n_features:=8"),
        *("-p", "diagnostics_period_s:=0.2", "-p", "warn_period_s:=0.0", "-r", f"__ns:={NAMESPACE}"),
        *IMMEDIATE_SWAP,
    )
    with new_context() as context, new_executor(context) as executor:
        peer = Node("special_files_peer", namespace=NAMESPACE, context=context)
        executor.add_node(peer)
        peer.info = peer.create_client(GetClassifierInfo, f"{NAMESPACE}/{NODE}/info")
        peer.predict = peer.create_client(Predict, f"{NAMESPACE}/{NODE}/predict")
        peer.load_model = peer.create_client(LoadModel, f"{NAMESPACE}/{NODE}/load_model")
        peer.save_model = peer.create_client(SaveModel, f"{NAMESPACE}/{NODE}/save_model")
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        peer.announce = peer.create_publisher(String, "tuned_model", latched)
        proc = NodeProcess(argv, log_path=folder / "object_recognition.log")
        t = Target(folder, executor, peer, proc, DiagnosticsReader(peer))
        try:
            for client, request in (
                (peer.info, GetClassifierInfo.Request()),
                (peer.predict, Predict.Request(data=[0.1] * DIM)),
                (peer.load_model, LoadModel.Request(path="missing.model")),  # a refusal, once matched
                (peer.save_model, SaveModel.Request(path="")),  # no checkpoint_path: a refusal
            ):
                first_call(executor, client, request)
            assert spin_until(executor, lambda: peer.announce.get_subscription_count() > 0, 30), proc.log()
            assert spin_until(executor, lambda: t.version() >= 0, 10), proc.log()
            yield t
        finally:
            stop_after_nodes(executor, proc)


def test_load_model_of_a_fifo_or_dev_zero_is_refused_at_once(target):
    from lifelong_learning.srv import LoadModel

    fifo = target.models / "waiting.model"
    os.mkfifo(fifo)
    reason = "model reload failed"
    for path in (str(fifo), "waiting.model", "/dev/zero"):
        before = target.rejected(reason)
        res, took = target.timed(target.peer.load_model, LoadModel.Request(path=path))
        assert not res.success and "not a regular file" in res.message, res.message
        assert took < ANSWERED_WITHIN_S, (path, took)
        target.wait_rejected(reason, before + 1)
        target.serving()
    assert fifo.is_fifo()
    # a good model still loads after them
    res, _ = target.timed(
        target.peer.load_model, LoadModel.Request(path=str(trained(target.models / "ok.model", 1)))
    )
    assert res.success, res.message


def test_save_model_onto_a_fifo_is_refused_at_once(target):
    from lifelong_learning.srv import SaveModel

    inside = target.models / "save_fifo.model"
    outside = target.folder / "outside_fifo.model"  # allowed (outside paths are): still no FIFO
    for fifo in (inside, outside):
        os.mkfifo(fifo)
        before = target.rejected("path refused")
        res, took = target.timed(target.peer.save_model, SaveModel.Request(path=str(fifo)))
        assert not res.success and "special file" in res.message, res.message
        assert took < ANSWERED_WITHIN_S, (fifo, took)
        target.wait_rejected("path refused", before + 1)
        assert fifo.is_fifo()
        target.serving()


def test_announced_fifo_or_dev_zero_is_refused_and_the_topic_goes_on(target):
    from std_msgs.msg import String

    fifo = target.models / "announced_fifo.model"
    os.mkfifo(fifo)
    reason = "model reload failed"
    for path in (str(fifo), "/dev/zero"):
        before = target.rejected(reason)
        t0 = time.monotonic()
        target.peer.announce.publish(String(data=path))
        target.wait_rejected(reason, before + 1)
        took = time.monotonic() - t0  # a diagnostics period (0.2 s) and delivery included
        assert took < ANSWERED_WITHIN_S + 0.5, (path, took)
        target.serving()
    assert fifo.is_fifo()
    # the announcements' path is not wedged: a good model announced next is loaded
    version = target.version()
    target.peer.announce.publish(String(data=str(trained(target.models / "announced_ok.model", 2))))
    assert spin_until(target.executor, lambda: target.version() > version, 10), target.proc.log()
