"""What a classifier took back is remembered, saved with it, bounded, and sorts the bags' rows
(learners/taken_back.py)."""

from __future__ import annotations

import numpy as np
import pytest

from lifelong_learning.core.model_file import ModelFile
from lifelong_learning.learners import taken_back
from lifelong_learning.learners.random_features import RandomFourierFeatures
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.learners.taken_back import TakenBack, row_digests

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
    assert not model.taken_back_
    model.unlearn_numbers(model.teaching_episode())  # the six mislabeled views
    assert np.array_equal(np.sort(model.taken_back_.rows), np.sort(row_digests(rows["wrong"])))
    assert model.taken_back_.gone == ()  # box keeps its other samples
    model.forget_class("cup")  # its training and held-out samples alike
    gone = row_digests(np.vstack([rows["wrong"], rows["cup"]]))
    assert set(model.taken_back_.rows.tolist()) == set(gone.tolist()) and model.taken_back_.gone == ("cup",)
    kept = row_digests(np.vstack([rows["box"], rows["ball"]]))
    assert not np.isin(kept, model.taken_back_.rows).any()
    model.rename_class("box", "crate")
    assert model.taken_back_.renamed == (("box", "crate"),)
    loaded = IncrementalRLSC.from_model_file(model.to_model_file())
    for copy in (loaded, model.clone()):
        record = copy.taken_back_
        assert np.array_equal(record.rows, model.taken_back_.rows)
        assert (record.gone, record.renamed) == (model.taken_back_.gone, model.taken_back_.renamed)


def test_a_row_read_back_from_a_bag_has_the_digest_the_model_took_back(tmp_path) -> None:
    """The bag holds float32 values and the reader gives float64: the digest is the same."""
    from lifelong_learning.io.bags import write_labeled_features
    from lifelong_learning.io.labeled_features import read_labeled_features

    model, rows = taught()
    model.forget_class("cup")
    write_labeled_features(tmp_path / "bag", rows["cup"], ["cup"] * len(rows["cup"]))
    read = read_labeled_features(tmp_path / "bag").X
    assert read.dtype == np.float64 and np.isin(row_digests(read), model.taken_back_.rows).all()


def test_a_newer_record_joined_keeps_a_class_renamed_to_then_forgotten_gone() -> None:
    newer = TakenBack().renaming("a", "b").removing([], ["b"])  # a renamed b, then b forgotten
    assert newer.gone == ("b",)
    joined = TakenBack().joined(newer)
    assert joined.gone == ("b",) and joined.renamed == (("a", "b"),)
    assert not TakenBack().removing([], ["x"]).joined(newer).sort(np.zeros((2, D)), ["a", "b"], []).keep.any()


FMAP = {"feature_map": RandomFourierFeatures(D, 32, bandwidth=2.0, seed=0)}


def test_a_model_with_a_feature_map_remembers_its_raw_inputs_saved_and_loaded() -> None:
    """Its kept samples are in model features, which no bag holds: it records the digests of the
    inputs it was given, as the bags hold them, also after a round trip through its file."""
    model, rows = taught(**FMAP)
    model.unlearn_numbers(model.teaching_episode())  # the six mislabeled views
    assert np.array_equal(np.sort(model.taken_back_.rows), np.sort(row_digests(rows["wrong"])))
    loaded = IncrementalRLSC.from_model_file(model.to_model_file())
    loaded.forget_class("cup")  # its training and held-out samples alike
    gone = row_digests(np.vstack([rows["wrong"], rows["cup"]]))
    assert set(loaded.taken_back_.rows.tolist()) == set(gone.tolist()) and loaded.taken_back_.gone == ("cup",)
    everything = row_digests(np.vstack(list(rows.values())))
    assert set(model.everything_taken_back().rows.tolist()) == set(everything.tolist())


def test_a_feature_map_model_keeps_input_digests_only_for_samples_it_can_unlearn() -> None:
    model = IncrementalRLSC(lambdas=[0.1, 1.0], alpha=1.0, keep_samples=10, max_validation=6, **FMAP)
    X = views(11, 200, 0)
    for i, x in enumerate(X):
        model.partial_fit(x, ["cup" if i % 2 else "box"])
    held = model.to_model_file().arrays["input_no"]
    assert 10 + 6 <= held.size <= 2 * (10 + 6) + 1
    model.unlearn_numbers(model.teaching_episode(10))  # the last ten, every one kept
    assert np.array_equal(np.sort(model.taken_back_.rows), np.sort(row_digests(X[-10:])))
    nothing = IncrementalRLSC(lambdas=1.0, alpha=1.0, **FMAP)  # keeps nothing: digests nothing
    nothing.partial_fit(X[:20], ["cup"] * 20)
    assert "input_no" not in nothing.to_model_file().arrays


def test_a_feature_map_model_from_a_file_without_input_digests_records_what_it_can() -> None:
    """A file written before input digests were kept: its samples are unlearned exactly but not
    recorded; the samples learned after loading are."""
    model, _ = taught(**FMAP)
    file = model.to_model_file()
    old = IncrementalRLSC.from_model_file(
        ModelFile(file.kind, file.meta, {k: v for k, v in file.arrays.items() if not k.startswith("input_")})
    )
    new = views(12, 3, 2)
    old.partial_fit(new, ["box"] * 3)
    old.unlearn_numbers(old.teaching_episode(9))  # the 3 new and the 6 mislabeled views
    assert np.array_equal(np.sort(old.taken_back_.rows), np.sort(row_digests(new)))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"input_digest": np.arange(3, dtype=np.int64)}, "uint64"),
        ({"input_no": np.array([3, 2, 1])}, "ascend"),
        ({"input_no": np.array([3, 2, 1], dtype=np.uint64)}, "ascend"),
        ({"input_no": np.array([1, 2, 10**6])}, "ascend"),
        ({"input_no": np.array([0, 1, 2])}, "ascend"),
        ({"input_no": np.array([10**6])}, "uint64"),
    ],
)
def test_a_model_file_with_bad_input_digests_does_not_load(change: dict, match: str) -> None:
    model, _ = taught(**FMAP)
    file = model.to_model_file()
    arrays = {
        **file.arrays,
        "input_no": np.array([1, 2, 3]),
        "input_digest": np.zeros(3, np.uint64),
        **change,
    }
    with pytest.raises(ValueError, match=match):
        IncrementalRLSC.from_model_file(ModelFile(file.kind, file.meta, arrays))


@pytest.mark.parametrize(
    ("arrays", "meta", "match"),
    [
        ({"taken_back": np.arange(3, dtype=np.int64)}, {}, "uint64"),
        ({"taken_back": np.array([5, 5], dtype=np.uint64)}, {}, "twice"),
        ({"taken_back": np.zeros((2, 2), dtype=np.uint64)}, {}, "uint64"),
        ({}, {"taken_back": {"gone": [1], "renamed": []}}, "texts"),
        ({}, {"taken_back": {"gone": [], "renamed": [["a"]]}}, "pairs"),
        ({}, {"taken_back": [1, 2]}, "lists"),
        ({}, {"taken_back": {"gone": "abc"}}, "lists"),
        ({}, {"taken_back": {"gone": [], "more": []}}, "lists"),
    ],
)
def test_a_model_file_with_a_bad_record_does_not_load(arrays: dict, meta: dict, match: str) -> None:
    model, _ = taught()
    model.forget_class("cup")
    file = model.to_model_file()
    with pytest.raises(ValueError, match=match):
        IncrementalRLSC.from_model_file(
            ModelFile(file.kind, {**file.meta, **meta}, {**file.arrays, **arrays})
        )


def test_the_newest_are_kept_each_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(taken_back, "MAX_ROWS", 4)
    monkeypatch.setattr(taken_back, "MAX_LABELS", 2)
    X = views(5, 6, 0)
    record = TakenBack().removing(X[[0, 1, 1, 2]], ["a", "b", "c"])
    assert record.rows.tolist() == row_digests(X[:3]).tolist() and record.gone == ("b", "c")
    record = record.removing(X[2:5])
    assert record.rows.tolist() == row_digests(X[1:5]).tolist()
    model = IncrementalRLSC(lambdas=1.0, alpha=1.0).remember_taken_back(record.renaming("x", "y"))
    assert model.taken_back_.renamed == (("x", "y"),) and model.taken_back_.rows.size == 4


def test_rows_are_sorted_by_digest_class_and_name() -> None:
    """Rows unlearned are dropped; a class gone is dropped unless known again; a renamed class is
    learned under its new name (the chain followed) unless its old name is known again."""
    X = views(6, 6, 1)
    record = (
        TakenBack()
        .removing(X[:1], ["cup"])  # row 0 undone; cup forgotten
        .renaming("mug", "tumbler")
        .renaming("tumbler", "glass")
        .renaming("jar", "pot")
    )
    labels = ["box", "cup", "mug", "jar", "box", "cup"]
    out = record.sort(X, labels, known=["box", "glass", "jar"])
    assert out.keep.tolist() == [False, False, True, True, True, False]
    assert out.labels == ["glass", "jar", "box"] and (out.dropped, out.renamed) == (3, 1)
    # cup taught again since: its rows are learned, except the one undone
    again = record.sort(X, labels, known=["box", "glass", "cup"])
    assert again.keep.tolist() == [False, True, True, True, True, True]


def test_a_reset_takes_back_everything_the_model_knew() -> None:
    model, rows = taught()
    record = model.everything_taken_back()
    assert set(record.gone) == {"cup", "box", "ball"}
    everything = row_digests(np.vstack(list(rows.values())))
    assert set(record.rows.tolist()) == set(everything.tolist())
    fresh = IncrementalRLSC(lambdas=1.0, alpha=1.0).remember_taken_back(record)
    fresh.partial_fit(views(9, 4, 0), ["cup"] * 4)  # cup taught again after the reset
    out = fresh.taken_back_.sort(
        np.vstack([rows["cup"], rows["box"]]), ["cup"] * 12 + ["box"] * 12, fresh.classes_
    )
    assert not out.keep.any()  # the rows from before the reset: none learned again


def test_renames_stay_one_step_and_a_cycle_does_not_bring_back_a_class_gone() -> None:
    record = TakenBack().renaming("a", "b").renaming("b", "c")
    assert record.renamed == (("a", "c"), ("b", "c"))
    cycle = TakenBack().renaming("a", "b").renaming("b", "a").removing([], ["a"])
    assert cycle.renamed == (("b", "a"),)
    out = cycle.sort(views(8, 2, 0), ["a", "b"], known=[])
    assert not out.keep.any()
    assert TakenBack().removing([], (x for x in ["p", "q"])).removing([], iter(["r"])).gone == ("p", "q", "r")


@pytest.mark.parametrize("fmap", [{}, FMAP], ids=["features", "feature map"])
def test_a_model_about_to_serve_takes_back_what_the_serving_model_took_back_since(fmap: dict) -> None:
    """The candidate learned what the serving model learned; the serving model then undid the
    mistake, forgot cup and renamed box crate: the candidate, caught up, does the same, and
    predicts as a model that never learned them."""
    serving, _ = taught(**fmap)
    candidate = serving.clone()
    serving.unlearn_numbers(serving.teaching_episode())
    serving.forget_class("cup")
    serving.rename_class("box", "crate")
    assert candidate.caught_up(TakenBack(), serving.classes_) is candidate  # nothing taken back since
    caught = candidate.caught_up(serving.taken_back_, serving.classes_)
    assert caught is not candidate and list(candidate.classes_) == ["cup", "box", "ball"]  # a copy
    assert list(caught.classes_) == list(serving.classes_) == ["crate", "ball"]
    test = np.vstack([views(20, 10, 1), views(21, 10, 2)])
    assert np.allclose(caught.decision_function(test), serving.decision_function(test), atol=1e-8)
    assert set(caught.taken_back_.rows.tolist()) == set(serving.taken_back_.rows.tolist())
    assert (caught.taken_back_.gone, caught.taken_back_.renamed) == (("cup",), (("box", "crate"),))


def test_a_model_that_may_have_learned_what_was_taken_back_is_refused() -> None:
    """A candidate learned from sums (as a retraining's) cannot unlearn: refused, saying why; one
    that keeps every sample it trained on and never saw the undone ones is only told of them."""
    serving, rows = taught()
    everything = np.vstack(list(rows.values()))
    labels = ["cup"] * 12 + ["box"] * 12 + ["ball"] * 12 + ["box"] * 6
    sums = IncrementalRLSC(lambdas=1.0, alpha=1.0)
    order = ["cup", "box", "ball"]
    E = np.eye(3)[[order.index(label) for label in labels]]
    sums.learn_sums(order, everything.T @ everything, everything.T @ E, np.bincount(E.argmax(1)), D)
    undone = serving.clone().unlearn_numbers(serving.teaching_episode())
    with pytest.raises(ValueError, match=r"6 samples .* may have learned"):
        sums.caught_up(undone.taken_back_, undone.classes_)
    forgot = serving.clone().forget_class("cup")
    with pytest.raises(ValueError, match="knows 'cup', which the serving model forgot"):
        sums.caught_up(forgot.taken_back_, forgot.classes_)
    # the serving model knows cup again (taught since): nothing to forget, only to remember
    again = sums.caught_up(TakenBack().removing([], ["cup"]), ["cup", "box", "ball"])
    assert list(again.classes_) == ["cup", "box", "ball"] and again.taken_back_.gone == ("cup",)
    fresh = IncrementalRLSC(lambdas=1.0, alpha=1.0, keep_samples=100)
    fresh.partial_fit(np.vstack([rows["cup"], rows["box"]]), ["cup"] * 12 + ["box"] * 12)
    told = fresh.caught_up(undone.taken_back_, undone.classes_)
    assert np.array_equal(told.decision_function(everything), fresh.decision_function(everything))
    assert set(told.taken_back_.rows.tolist()) == set(row_digests(rows["wrong"]).tolist())


def test_a_model_that_forgets_a_class_exactly_is_caught_up_though_it_keeps_not_everything() -> None:
    """The candidate keeps only its last samples, but all of the class the serving model forgot:
    forgetting it takes back every row of it, so nothing is missing and it is not refused."""
    serving = IncrementalRLSC(lambdas=1.0, alpha=1.0, keep_samples=5)
    serving.partial_fit(np.vstack([views(30, 10, 0), views(31, 10, 1)]), ["a"] * 10 + ["b"] * 10)
    serving.partial_fit(views(32, 3, 2), ["x"] * 3)
    candidate = serving.clone()
    serving.forget_class("x")
    caught = candidate.caught_up(serving.taken_back_, serving.classes_)
    assert list(caught.classes_) == ["a", "b"] and caught.taken_back_.gone == ("x",)


def test_labels_that_are_not_text_are_found_by_their_text() -> None:
    serving = IncrementalRLSC(lambdas=1.0, alpha=1.0, keep_samples=100)
    serving.partial_fit(
        np.vstack([views(33, 6, 0), views(34, 6, 1), views(35, 6, 2)]), [1] * 6 + [2] * 6 + [3] * 6
    )
    candidate = serving.clone()
    serving.forget_class(3)
    serving.rename_class(1, "one")
    caught = candidate.caught_up(serving.taken_back_, [str(c) for c in serving.classes_])
    assert list(caught.classes_) == ["one", 2]
