"""What a classifier unlearned is remembered by digest, saved with it and bounded (learners/taken_back.py)."""

from __future__ import annotations

import numpy as np
import pytest

from lifelong_learning.core.model_file import ModelFile
from lifelong_learning.learners import taken_back
from lifelong_learning.learners.random_features import RandomFourierFeatures
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.learners.taken_back import remembered, row_digests

D = 6


def views(seed: int, n: int, centre: int) -> np.ndarray:
    """``n`` float32-exact rows around the ``centre``-th axis."""
    rng = np.random.default_rng(seed)
    X = 3.0 * np.eye(D)[centre] + rng.normal(scale=0.5, size=(n, D))
    return X.astype(np.float32).astype(np.float64)


def taught(**kw) -> tuple[IncrementalRLSC, dict[str, np.ndarray]]:
    """cup, box, ball taught in turn (held-out samples among them), then 6 views of ball named box."""
    rows = {"cup": views(0, 12, 0), "box": views(1, 12, 1), "ball": views(2, 12, 2), "wrong": views(3, 6, 2)}
    model = IncrementalRLSC(lambdas=[0.1, 1.0], alpha="auto", validation_every=3, keep_samples=100, **kw)
    for label in ("cup", "box", "ball"):
        for x in rows[label]:
            model.partial_fit(x, [label])
    for x in rows["wrong"]:
        model.partial_fit(x, ["box"])
    return model, rows


def test_undone_and_forgotten_rows_are_remembered_saved_and_cloned() -> None:
    model, rows = taught()
    assert model.taken_back_.size == 0
    model.unlearn_numbers(model.teaching_episode())  # the six mislabeled views
    assert np.array_equal(np.sort(model.taken_back_), np.sort(row_digests(rows["wrong"])))
    model.forget_class("cup")  # its training and held-out samples alike
    gone = row_digests(np.vstack([rows["wrong"], rows["cup"]]))
    assert set(model.taken_back_.tolist()) == set(gone.tolist())
    kept = row_digests(np.vstack([rows["box"], rows["ball"]]))
    assert not np.isin(kept, model.taken_back_).any()
    loaded = IncrementalRLSC.from_model_file(model.to_model_file())
    assert np.array_equal(loaded.taken_back_, model.taken_back_)
    assert np.array_equal(model.clone().taken_back_, model.taken_back_)
    # the digest is of the float32 values: the bag's LabeledFeatures data give the same
    assert np.array_equal(row_digests(rows["cup"].astype(np.float32)), row_digests(rows["cup"]))


def test_a_model_with_a_feature_map_remembers_nothing() -> None:
    """Its kept samples are in model features, which no bag holds."""
    model, _ = taught(feature_map=RandomFourierFeatures(D, 32, bandwidth=2.0, seed=0))
    model.forget_class("cup")
    assert model.taken_back_.size == 0 and not model.has_class("cup")


@pytest.mark.parametrize(
    ("digests", "match"),
    [
        (np.arange(3, dtype=np.int64), "uint64"),
        (np.array([5, 5], dtype=np.uint64), "twice"),
        (np.zeros((2, 2), dtype=np.uint64), "shape"),
    ],
)
def test_a_model_file_with_bad_digests_does_not_load(digests: np.ndarray, match: str) -> None:
    model, _ = taught()
    model.forget_class("cup")
    file = model.to_model_file()
    with pytest.raises(ValueError, match=match):
        IncrementalRLSC.from_model_file(
            ModelFile(file.kind, file.meta, {**file.arrays, "taken_back": digests})
        )


def test_the_newest_digests_are_kept_each_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(taken_back, "MAX_TAKEN_BACK", 4)
    a = remembered(np.zeros(0, np.uint64), np.array([1, 2, 2, 3], dtype=np.uint64))
    assert a.tolist() == [1, 2, 3]
    assert remembered(a, np.array([3, 4, 5], dtype=np.uint64)).tolist() == [2, 3, 4, 5]
    model = IncrementalRLSC(lambdas=1.0, alpha=1.0).remember_taken_back(np.arange(10, dtype=np.uint64))
    assert model.taken_back_.tolist() == [6, 7, 8, 9]
