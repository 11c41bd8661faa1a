"""A model file over ``max_model_bytes`` on ``model_data_topic``, from another process.

An object_recognition process with ``max_model_bytes`` 1 MiB is sent a 64 MiB ModelFile of its own
kind (a correct SHA-256: only its size is wrong). It must be refused from the message's header and
counted (``model too large``), nothing may be written under ``model_directory``, the node keeps
answering ``~/predict`` the same, and its memory shows that no copy of the message was kept nor
more made than the middleware's: the node's anonymous resident memory (``RssAnon`` of
/proc/<pid>/status, sampled every 2 ms; the sender's shared-memory segment, mapped by the node, is
``RssShmem`` and not in it)

- rises at most 2.5 × the message during its arrival: the middleware reassembles the message (one
  copy: DDS has no limit on a sample's size) and hands it over serialized (rmw copies it once more,
  then frees the first); the node itself makes none. Before the fix it deserialized it into a C
  message and converted it to a Python ``bytes`` then an ``array.array``: four copies at its peak;
- is back within a quarter of the message (16 MiB) of where it was once the refusal is counted:
  before the fix the reader's memory pool kept the whole message (rmw_fastrtps'
  PREALLOCATED_WITH_REALLOC history memory).

Then the same receiver ignores an oversized file of another kind, counts a malformed message
(a data length past the message's end), and still loads a model within the limit.
"""

from __future__ import annotations

import array
import hashlib
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import IMMEDIATE_SWAP, DiagnosticsReader, call_service, first_call, node_argv, spin_until

from lifelong_learning.learners.rlsc import IncrementalRLSC

pytestmark = pytest.mark.graph

NODE = "object_recognition"
LIMIT = 1024**2  # max_model_bytes
HUGE = 64 * 1024**2  # the message's data
DIM = 8


def status_kb(pid: int, key: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (``RssAnon``, ``VmRSS``, ``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


class PeakSampler:
    """The highest ``RssAnon`` of a process, sampled every 2 ms in a thread while in the block."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, status_kb(self.pid, "RssAnon"))

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(2)


def model_file(kind: str, name: str, data: bytes | array.array, sha256: str | None = None) -> Any:
    from lifelong_learning.msg import ModelFile

    msg = ModelFile(kind=kind, name=name, sha256=sha256 or hashlib.sha256(data).hexdigest())
    msg.data = data if isinstance(data, array.array) else array.array("B", data)
    return msg


def malformed(kind: str) -> bytes:
    """A serialized ModelFile whose data length says more bytes than the message holds."""
    from rclpy.serialization import serialize_message

    raw = bytearray(serialize_message(model_file(kind, "cut.model", b"0123456789")))
    at = len(raw) - 10 - 4  # the data's length prefix: 4 bytes before its 10 bytes
    raw[at : at + 4] = (2**31).to_bytes(4, "little")
    return bytes(raw)


def test_a_model_over_the_limit_is_refused_from_its_header_and_nothing_of_it_is_kept(
    executor, start_process, tmp_path
):
    from lifelong_learning.msg import ModelFile
    from lifelong_learning.srv import Predict
    from rclpy.duration import Duration
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    models = tmp_path / "models"
    proc = start_process(
        node_argv(
            NODE,
            *("-p", f"model_directory:={models}", "-p", "diagnostics_period_s:=0.25"),
            *("-p", f"max_model_bytes:={LIMIT}", "-p", "lambdas:=[1.0]", "-p", "alpha:='0.0'"),
            *IMMEDIATE_SWAP,
        )
    )
    peer = Node("large_model_sender", context=executor.context)
    executor.add_node(peer)
    diag = DiagnosticsReader(peer)
    latched = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    pub = peer.create_publisher(ModelFile, "tuned_model_data", latched)
    predict = peer.create_client(Predict, f"/{NODE}/predict")
    probes = np.random.default_rng(5).normal(scale=2.0, size=(3, DIM)).astype(np.float32)

    def answers() -> list[tuple[list[str], list[float]]]:
        out = [call_service(executor, predict, Predict.Request(data=x.tolist())) for x in probes]
        return [(list(a.labels), list(a.scores)) for a in out]

    def count(key: str) -> int:
        return diag.count(NODE, key)

    first_call(executor, predict, Predict.Request(data=probes[0].tolist()))
    before_answers = answers()
    assert spin_until(executor, lambda: pub.get_subscription_count() > 0 and count("rejected") == 0, 30)
    huge = model_file(IncrementalRLSC.kind, "huge.model", array.array("B", bytes(HUGE)))
    before = status_kb(proc.pid, "RssAnon")

    # 64 MiB of the node's own kind, with a correct SHA-256: refused for its size alone
    with PeakSampler(proc.pid) as memory:
        pub.publish(huge)
        deadline = time.monotonic() + 60.0  # however loaded the machine: the refusal is counted
        while count("rejected: model too large") < 1:
            assert answers() == before_answers, proc.log()  # the node keeps answering, the same
            assert time.monotonic() < deadline, proc.log()
        assert pub.wait_for_all_acked(Duration(seconds=10))
        # the message's memory is freed once the callback that refused it has returned: until then
        # (10 s at most, however loaded the machine) the process may still hold it
        spin_until(executor, lambda: status_kb(proc.pid, "RssAnon") - before <= 16 * 1024**2, 10)
        after = status_kb(proc.pid, "RssAnon")
    del huge
    grew = (memory.peak - before) / HUGE
    kept = (after - before) / 1024**2
    what = f"RssAnon before {before >> 20} MiB, peak {memory.peak >> 20} MiB, after {after >> 20} MiB"
    assert grew <= 2.5, f"{grew:.2f} copies of the message at the peak; {what}"
    assert kept <= 16, f"{kept:.0f} MiB kept after the refusal; {what}"
    assert "over max_model_bytes" in diag.values(NODE)["last model received"]
    written = [p for p in models.rglob("*") if not p.is_dir()] if models.exists() else []
    assert written == [], written  # nothing stored, not even a temporary file
    assert answers() == before_answers and proc.alive()

    # another kind over the limit: not this node's (ignored, not refused); then a malformed message
    pub.publish(model_file("another_kind", "other.model", bytes(2 * LIMIT)))
    assert spin_until(executor, lambda: count("ignored model files") == 1, 20), proc.log()
    pub.publish(malformed(IncrementalRLSC.kind))
    assert spin_until(executor, lambda: count("rejected: malformed model message") == 1, 20), proc.log()
    assert count("rejected: model too large") == 1 and count("models received") == 0

    # a model within the limit still arrives and serves
    tuned = IncrementalRLSC(lambdas=[1.0], alpha=0.0)
    rng = np.random.default_rng(1)
    tuned.partial_fit(rng.normal(size=(20, DIM)), ["cup", "ball"] * 10)
    tuned.save(tmp_path / "tuned.model")
    pub.publish(model_file(tuned.kind, "tuned.model", (tmp_path / "tuned.model").read_bytes()))
    assert spin_until(executor, lambda: count("models received") == 1, 20), proc.log()
    assert all(sorted(labels) == ["ball", "cup"] for labels, _ in answers())
    assert sorted(p.name for p in (models / "received" / NODE).iterdir()) == ["tuned.model"]
    assert proc.alive()
