"""ModelHistory: previous models written atomically in order, pruned beyond keep, others untouched;
what is kept cannot be flushed by what is worthless (an untrained model, one kept already), and the
model learned here is pinned beyond keep."""

from __future__ import annotations

import pytest
from conftest import RLSModel

from lifelong_learning.serving.history import ModelHistory, content_digest


def model(seed: float, samples: int = 1) -> RLSModel:
    m = RLSModel(3, 1, lam=1.0)
    for k in range(samples):
        m.update([1.0, seed, float(k)], [seed])
    return m


def push(history: ModelHistory, m: RLSModel, why: str = "reload", learned: int = 0):
    return history.push(m.to_model_file(), why, samples=m.n_samples, learned=learned)


def test_push_orders_and_prune_keeps_the_newest(tmp_path):
    history = ModelHistory(tmp_path / "previous", keep=2)
    assert history.files() == [] and history.prune() == []
    paths = [
        push(history, model(float(k + 1)), why).path for k, why in enumerate(("reload", "reset", "reload"))
    ]
    assert [p.name[:6] for p in paths] == ["000001", "000002", "000003"]
    assert ".before-reset." in paths[1].name and paths[0].suffix == ".model"
    (history.folder / "notes.txt").write_text("not a previous model")
    history.rolled_back.write_bytes(paths[0].read_bytes())
    assert history.files() == paths
    assert history.prune() == paths[:1]
    assert history.files() == paths[1:] and (history.folder / "notes.txt").exists()
    assert history.rolled_back.exists()  # no rollback target, never pruned
    assert push(history, model(9.0)).path.name.startswith("000004.")


@pytest.mark.parametrize("why", ["promote-candidate", "Reload", "", "reload.1", "re load"])
def test_a_why_that_files_would_not_list_is_refused(tmp_path, why):
    """A file that :meth:`files` does not list would be seen by no rollback and removed by no prune."""
    history = ModelHistory(tmp_path / "previous", keep=2)
    with pytest.raises(ValueError, match=r"\[a-z\]\+"):
        push(history, model(1.0), why)
    assert not history.folder.exists() or not any(history.folder.iterdir())


def test_an_untrained_model_is_kept_only_when_a_trained_one_replaces_it_and_only_one(tmp_path):
    """Reset spam (an empty model replaced by another) keeps nothing; a tuned model over the empty
    one (or the rigid-body prior) keeps it, and one such is enough (~/reset builds the others)."""
    history = ModelHistory(tmp_path / "previous", keep=3)
    m = RLSModel(3, 1, lam=1.0)
    kept = history.push(m.to_model_file(), "reset", samples=0, successor_samples=0)
    assert kept.path is None and "learned nothing" in kept.note
    assert history.files() == []
    first = history.push(m.to_model_file(), "reload", samples=0, successor_samples=5).path
    assert first is not None and first.name.endswith(".untrained.model")
    other = RLSModel(3, 1, lam=2.0)
    second = history.push(other.to_model_file(), "reload", samples=0, successor_samples=5).path
    assert history.files() == [second] and not first.exists()


def test_a_model_kept_already_is_moved_to_the_newest_not_copied(tmp_path):
    history = ModelHistory(tmp_path / "previous", keep=3)
    a, b = model(1.0), model(2.0)
    first = push(history, a, learned=1).path
    push(history, b)
    again = push(history, model(1.0))  # the same content, another object
    assert again.path.name.startswith("000003.") and "moved, not copied" in again.note
    assert not first.exists() and len(history.files()) == 2
    assert history.learned_of(again.path) == 1  # what it learned here is not forgotten
    assert content_digest(a.to_model_file()) == content_digest(model(1.0).to_model_file())
    assert content_digest(a.to_model_file()) != content_digest(b.to_model_file())


def test_the_model_that_learned_the_most_here_is_pinned_beyond_keep(tmp_path):
    history = ModelHistory(tmp_path / "previous", keep=2)
    little = push(history, model(1.0, 3), learned=3).path
    most = push(history, model(2.0, 50), learned=40).path
    others = [push(history, model(10.0 + k)).path for k in range(4)]
    history.prune()
    assert history.files() == [most, *others[-2:]]  # keep 2, and the pinned one
    assert not little.exists() and history.pinned().path == most
    assert ".learned-40." in most.name


def test_names_of_earlier_versions_are_listed(tmp_path):
    history = ModelHistory(tmp_path / "previous", keep=2)
    history.folder.mkdir(parents=True)
    old = history.folder / "000007.before-reset.20250101-120000.model"
    old.write_bytes(model(1.0).to_model_file().kind.encode())
    assert history.files() == [old] and history.learned_of(old) == 0 and history.pinned() is None
    assert push(history, model(2.0)).path.name.startswith("000008.")
