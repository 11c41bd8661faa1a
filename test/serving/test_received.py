"""Models received as bytes, through the serving core: kind, size limit, SHA-256, stored under
received/<node>/ with a safe name, loaded once, the latched re-delivery rule, refused ones removed."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import RLSModel
from test_core import X, make_core, trained

from lifelong_learning.serving.received import ReceivedModels, received_file_name


def model_bytes(model: RLSModel, tmp_path: Path, name: str = "sent.model") -> bytes:
    model.save(tmp_path / name)
    return (tmp_path / name).read_bytes()


def send(core, data: bytes, name: str = "tuned.model", kind: str = RLSModel.kind, sha256: str | None = None):
    digest = hashlib.sha256(data).hexdigest() if sha256 is None else sha256
    return core.receive(kind, name, data, digest, "tuned_model_data", core.reload)


@pytest.mark.parametrize(
    ("name", "stored"),
    [
        ("../../../etc/passwd", "passwd"),
        ("C:\\models\\..\\tuned.model", "tuned.model"),
        (".hidden.model", "hidden.model"),
        ("..", "model-0123456789abcdef.model"),
        ("a model; rm -rf ~.model", "a_model__rm_-rf__.model"),
    ],
)
def test_a_received_name_never_leaves_the_folder(name, stored):
    assert received_file_name(name, "0123456789abcdef" * 4) == stored


def test_a_received_model_is_checked_stored_and_loaded(tmp_path):
    core = make_core(tmp_path)
    folder = tmp_path / "models" / "received" / "robot1" / "rls"
    data = model_bytes(trained(1.0), tmp_path)
    assert send(core, data, kind="another_kind") is None and core.ignored_model_files == 1
    core.received.max_bytes = len(data) - 1
    assert not send(core, data).ok
    core.received.max_bytes = 10**6
    assert not send(core, data, sha256="0" * 64).ok
    assert core.report.rejections == {"model too large": 1, "model checksum mismatch": 1}
    assert "refused: model checksum mismatch" in core.received.last and core.version == 0
    assert not folder.exists()

    outcome = send(core, data, name="../evil/tuned.model")
    assert outcome.ok and core.version == 1 and core.received.loaded == 1, outcome
    assert [p.name for p in folder.iterdir()] == ["tuned.model"]
    assert np.array_equal(core.model.predict(X), trained(1.0).predict(X))
    assert send(core, data) is None and core.version == 1  # the serving model's bytes: not again

    unfit = model_bytes(RLSModel(4, 1), tmp_path, "unfit.model")
    assert not send(core, unfit, name="unfit.model").ok
    assert core.report.rejections["model reload failed"] == 1 and not (folder / "unfit.model").exists()
    second = model_bytes(trained(2.0), tmp_path, "second.model")
    assert send(core, second, name="second.model").ok
    assert [p.name for p in folder.iterdir()] == ["second.model"]  # the older one removed
    assert core.received.loaded == 2 and core.received.last.endswith(": loaded")
    assert len(core.history.files()) == 2  # what served before each is kept for rollback


def test_a_model_that_cannot_be_stored_changes_nothing(tmp_path):
    core = make_core(tmp_path)
    folder = core.received.folder
    folder.parent.mkdir(parents=True)
    folder.write_text("in the way")
    outcome = send(core, model_bytes(trained(1.0), tmp_path))
    assert not outcome.ok and "could not be stored" in outcome.message
    assert core.report.rejections == {"model reload failed": 1} and core.version == 0
    assert "refused: cannot be stored" in core.received.last


def test_a_latched_redelivery_is_not_loaded_over_the_checkpoint_written_after_it(tmp_path):
    data = model_bytes(trained(1.0), tmp_path)
    core = make_core(tmp_path)
    assert send(core, data).ok
    core.model.update([0.0, 0.0, 1.0], [3.0])  # learned after the received model
    core.count_updates()
    assert core.checkpoint()
    learned = core.model.predict(X)

    restarted = make_core(tmp_path)  # the same files: a restart that restores the checkpoint
    restarted.serve_first(restarted.restore())
    assert send(restarted, data) is None and restarted.version == 0
    assert np.array_equal(restarted.model.predict(X), learned)

    stored = restarted.received.path_for("tuned.model", hashlib.sha256(data).hexdigest())
    later = restarted.checkpoints.restored_mtime_ns + 10**9
    os.utime(stored, ns=(later, later))  # the stored file is newer than the checkpoint: loaded
    assert send(restarted, data).ok and restarted.version == 1

    fresh = make_core(tmp_path / "fresh")  # no restored checkpoint: it starts afresh, loads it
    assert send(fresh, data).ok


def test_redelivered_needs_the_same_bytes_in_a_regular_file(tmp_path):
    received = ReceivedModels(tmp_path, 100)
    path = tmp_path / "m.model"
    path.write_bytes(b"abc")
    digest = hashlib.sha256(b"abc").hexdigest()
    now = path.stat().st_mtime_ns
    assert received.redelivered(path, digest, now)
    assert not received.redelivered(path, digest, None)
    assert not received.redelivered(path, digest, now - 1)
    assert not received.redelivered(path, hashlib.sha256(b"abd").hexdigest(), now)
    (tmp_path / "link.model").symlink_to(path)
    assert not received.redelivered(tmp_path / "link.model", digest, now)


def test_a_model_whose_bytes_were_let_go_is_refused_by_its_size_alone(tmp_path):
    """The node's receiver frees a message over ``max_model_bytes`` before the core hears of it
    (``data`` None, ``size`` from the header): refused and counted, or ignored when of another kind."""
    core = make_core(tmp_path)
    core.received.max_bytes = 1000
    outcome = core.receive(
        RLSModel.kind, "huge.model", None, "0" * 64, "tuned_model_data", core.reload, size=10**9
    )
    assert not outcome.ok and "1000000000 bytes, max_model_bytes is 1000" in outcome.message
    assert core.report.rejections == {"model too large": 1} and core.version == 0
    assert "over max_model_bytes" in core.received.last and not core.received.folder.exists()
    assert core.receive("another_kind", "x.model", None, "", "t", core.reload, size=10**9) is None
    assert core.ignored_model_files == 1 and core.report.rejections == {"model too large": 1}
    with pytest.raises(ValueError, match="no bytes"):
        core.receive(RLSModel.kind, "small.model", None, "", "t", core.reload, size=10)
