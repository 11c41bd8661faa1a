"""ModelHistory: previous models written atomically in order, pruned beyond keep, others untouched."""

from __future__ import annotations

import pytest
from conftest import RLSModel

from lifelong_learning.serving.history import ModelHistory


def test_push_orders_and_prune_keeps_the_newest(tmp_path):
    history = ModelHistory(tmp_path / "previous", keep=2)
    assert history.files() == [] and history.prune() == []
    paths = [history.push(RLSModel(3, 1, lam=float(k + 1)).to_model_file(), why) for k, why in
             enumerate(("reload", "reset", "reload"))]  # fmt: skip
    assert [p.name[:6] for p in paths] == ["000001", "000002", "000003"]
    assert ".before-reset." in paths[1].name and paths[0].suffix == ".model"
    (history.folder / "notes.txt").write_text("not a previous model")
    history.rolled_back.write_bytes(paths[0].read_bytes())
    assert history.files() == paths
    assert history.prune() == paths[:1]
    assert history.files() == paths[1:] and (history.folder / "notes.txt").exists()
    assert history.rolled_back.exists()  # no rollback target, never pruned
    assert history.push(RLSModel(3, 1).to_model_file(), "reload").name.startswith("000004.")


@pytest.mark.parametrize("why", ["promote-candidate", "Reload", "", "reload.1", "re load"])
def test_a_why_that_files_would_not_list_is_refused(tmp_path, why):
    """A file that :meth:`files` does not list would be seen by no rollback and removed by no prune."""
    history = ModelHistory(tmp_path / "previous", keep=2)
    with pytest.raises(ValueError, match=r"\[a-z\]\+"):
        history.push(RLSModel(3, 1).to_model_file(), why)
    assert not history.folder.exists() or not any(history.folder.iterdir())
