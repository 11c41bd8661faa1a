"""Checkpoints through the serving core: written when something changed, a failed write retried
and reported, restored at start (unreadable or incompatible ones moved aside, conflicts kept)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import RLSModel
from test_core import X, make_core, trained

from lifelong_learning.core.files import UnsafePathError


def test_written_when_changed_retried_after_a_failure(tmp_path):
    core = make_core(tmp_path / "run")
    ckpt = core.checkpoints.path
    assert core.checkpoint() and ckpt.exists()  # none on disk: written
    assert not core.checkpoint()  # nothing changed since
    core.model.update([1.0, 0.0, 0.0], [1.0])
    core.count_updates()
    ckpt.parent.rename(tmp_path / "aside")
    ckpt.parent.write_text("in the way")  # the folder cannot be written
    assert not core.checkpoint()
    assert core.checkpoints.error is not None and core.updates_since_checkpoint == 1
    assert core.report is not None and core.checkpoints.last != "never"
    ckpt.parent.unlink()
    (tmp_path / "aside").rename(ckpt.parent)
    assert core.checkpoint() and core.checkpoints.error is None and core.updates_since_checkpoint == 0
    assert RLSModel.load(ckpt).n_samples == 2 and core.checkpoints.nbytes == ckpt.stat().st_size


def test_no_checkpoint_path_or_no_model_writes_nothing(tmp_path):
    assert not make_core(tmp_path, checkpoint=False).checkpoint()
    core = make_core(tmp_path)
    core.release()
    assert not core.checkpoint() and not (tmp_path / "ckpt.model").exists()


@pytest.mark.parametrize(
    ("content", "why"), [("truncated", "unreadable"), ("other dimension", "incompatible")]
)
def test_a_checkpoint_that_cannot_serve_is_moved_aside(tmp_path, content, why):
    ckpt = tmp_path / "ckpt.model"
    if content == "truncated":
        trained(1.0).save(ckpt)
        ckpt.write_bytes(ckpt.read_bytes()[:100])
    else:
        RLSModel(4, 1).save(ckpt)
    core = make_core(tmp_path)
    assert core.restore() is None and core.checkpoints.restored_mtime_ns is None
    assert not ckpt.exists() and len(list(tmp_path.glob(f"ckpt.model.{why}-*"))) == 1


def test_restored_with_its_conflicts_unless_unwanted(tmp_path):
    trained(1.0).save(tmp_path / "ckpt.model")
    core = make_core(tmp_path)
    assert core.restore(wanted=False) is None
    model = core.restore(lambda m: [f"lam: checkpoint {m.lam}, parameter 2.0"])
    assert np.array_equal(model.predict(X), trained(1.0).predict(X))
    assert core.checkpoints.conflicts == ["lam: checkpoint 1.0, parameter 2.0"]
    assert core.checkpoints.last == f"restored from {tmp_path / 'ckpt.model'}"
    assert core.checkpoints.restored_mtime_ns == (tmp_path / "ckpt.model").stat().st_mtime_ns


def test_a_checkpoint_path_that_is_not_a_file_is_refused(tmp_path):
    (tmp_path / "ckpt.model").mkdir()
    with pytest.raises(UnsafePathError, match=r"checkpoint_path .*directory"):
        make_core(tmp_path).prepare_files()


def test_temporaries_of_killed_writes_are_removed(tmp_path):
    killed = tmp_path / ".ckpt.model.k1ll3d_x.tmp"  # what a SIGKILL mid-checkpoint leaves
    other = tmp_path / ".someone_else.model.abcdefgh.tmp"
    for path in (killed, other):
        path.write_bytes(b"half a model")
    make_core(tmp_path).prepare_files()
    assert not killed.exists() and other.exists()
