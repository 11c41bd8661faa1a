"""The classifier's model file parts: which factors are stored, and the checks of a saved state."""

import numpy as np
import pytest

from lifelong_learning.learners import RecursiveRLS
from lifelong_learning.learners.model_selection import Selection
from lifelong_learning.learners.rlsc_state import (
    factor_sources,
    labels_entry,
    saved_counts,
    saved_factor_sources,
    saved_labels,
    saved_shared_factor,
    shared_factor_entry,
    validation_features,
)


def engines(lams, rows=30, d=4, seed=0):
    Z = np.random.default_rng(seed).normal(size=(rows, d))
    out = []
    for lam in lams:
        rls = RecursiveRLS(d, 2, lam=lam)
        rls.update(Z, np.eye(2)[np.arange(rows) % 2])
        out.append(rls)
    return out


def test_only_the_smallest_lambdas_factor_is_stored_when_the_rebuild_is_trusted():
    assert factor_sources(engines([1.0, 0.1, 10.0]), tolerance=1.0) == [1, None, 1]
    assert factor_sources(engines([1.0, 0.1, 10.0]), tolerance=0.0) == [None, None, None]
    other_rows = engines([1.0], seed=1) + engines([0.1])
    assert factor_sources(other_rows, tolerance=1.0) == [None, None]
    assert factor_sources([], tolerance=1.0) == []


def test_validation_features_are_float32_only_when_exact():
    exact = np.array([[0.5, 1.0]])
    assert validation_features(exact).dtype == np.float32
    assert validation_features(np.array([[0.1]])).dtype == np.float64


def test_labels_and_the_shared_factor_round_trip():
    assert saved_labels(labels_entry([1, "1", "mug"])) == [1, "1", "mug"]
    selection = Selection(2, 0.5, np.array([0.5, np.nan, 0.75]), 3.0, 12)
    serving, since, back = saved_shared_factor(shared_factor_entry(2, 7, selection), 3)
    assert (serving, since) == (2, 7) and back[:2] == (2, 0.5) and back[3:] == (3.0, 12)
    np.testing.assert_array_equal(back.accuracy, selection.accuracy)
    assert saved_shared_factor(shared_factor_entry(0, 0, None), 1) == (0, 0, None)


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"serving": 3, "since_selection": 0, "selection": None}, "not a λ candidate"),
        ({"serving": True, "since_selection": 0, "selection": None}, "integer"),
        ({"serving": 0, "since_selection": -1, "selection": None}, "integer"),
    ],
)
def test_a_bad_shared_factor_entry_is_refused(entry, match):
    with pytest.raises(ValueError, match=match):
        saved_shared_factor(entry, 3)


def test_a_saved_selection_must_match_the_lambda_in_use_and_hold_valid_values():
    entry = shared_factor_entry(1, 0, Selection(1, 0.5, np.zeros(3), 2.0, 10))
    entry["selection"]["lambda_index"] = 0
    with pytest.raises(ValueError, match="does not match"):
        saved_shared_factor(entry, 3)
    entry = shared_factor_entry(1, 0, Selection(1, 1.5, np.zeros(3), 2.0, 10))
    with pytest.raises(ValueError, match="invalid values"):
        saved_shared_factor(entry, 3)


@pytest.mark.parametrize(
    ("factor_of", "match"),
    [([None], "per engine"), ([0, None], "not another engine"), ([1, 0], "whose factor is not stored")],
)
def test_a_factor_must_come_from_another_engine_whose_factor_is_stored(factor_of, match):
    with pytest.raises(ValueError, match=match):
        saved_factor_sources(factor_of, 2)
    assert saved_factor_sources([None, 0], 2) == [None, 0] and saved_factor_sources(None, 2) == [None, None]


def test_labels_and_counts_are_checked():
    with pytest.raises(ValueError, match="does not match its type"):
        saved_labels([{"type": "int", "value": "1"}])
    with pytest.raises(ValueError, match="duplicate"):
        saved_labels([{"type": "str", "value": "a"}] * 2)
    ok = {"train_counts": np.array([2, 1]), "seen_counts": np.array([3, 1])}
    train, seen = saved_counts(ok, 2, 4)
    assert train.tolist() == [2, 1] and seen.tolist() == [3, 1]
    with pytest.raises(ValueError, match="seen_counts < train_counts"):
        saved_counts({"train_counts": np.array([2]), "seen_counts": np.array([1])}, 1, 1)
    with pytest.raises(ValueError, match="does not match the class counts"):
        saved_counts(ok, 2, 5)
