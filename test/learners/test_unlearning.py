"""Exact unlearning: forget_class, unlearn, rename_class and undoing a teaching
episode, each against the model retrained from scratch without the samples (relative difference of
the decision function ≤ 1e-8, recoding on); refusals that change nothing; the kept samples bounded
and stored in the model file; a downdate that loses positive definiteness rebuilt, never broken."""

from __future__ import annotations

import numpy as np
import pytest

from lifelong_learning.core.model_file import ModelFile
from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.learners.rlsc import IncrementalRLSC

TOL = 1e-8
D = 24


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def stream(seed: int = 0, n: int = 240, n_classes: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian classes of unequal sizes (class 4 rare), in a shuffled order."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=2.0, size=(n_classes, D))
    y = rng.choice(n_classes, size=n, p=[0.3, 0.3, 0.2, 0.15, 0.05])
    return centres[y] + rng.normal(size=(n, D)), y


def trained(X: np.ndarray, y: np.ndarray, one_by_one: int = 60, **kw) -> IncrementalRLSC:
    """A model that learned ``X``, ``y`` in a block and then one sample at a time."""
    model = IncrementalRLSC(**kw)
    split = len(y) - one_by_one
    model.partial_fit(X[:split], y[:split])
    for x, label in zip(X[split:], y[split:], strict=True):
        model.partial_fit(x, [label])
    return model


def scores_by_label(model: IncrementalRLSC, P: np.ndarray) -> dict:
    s = model.decision_function(P)
    return {c: s[:, j] for j, c in enumerate(model.classes_.tolist())}


def assert_same_model(model: IncrementalRLSC, reference: IncrementalRLSC, P: np.ndarray) -> None:
    a, b = scores_by_label(model, P), scores_by_label(reference, P)
    assert sorted(a) == sorted(b)
    counts = dict(zip(model.classes_.tolist(), model.class_counts_.tolist(), strict=True))
    assert counts == dict(zip(reference.classes_.tolist(), reference.class_counts_.tolist(), strict=True))
    for c in a:
        assert relative(a[c], b[c]) <= TOL, c
    assert model.n_samples == reference.n_samples


def snapshot(model: IncrementalRLSC) -> tuple:
    meta, arrays = model.to_state()
    return meta, {k: np.array(v) for k, v in arrays.items()}


def assert_unchanged(model: IncrementalRLSC, before: tuple) -> None:
    meta, arrays = model.to_state()
    assert meta == before[0]
    assert sorted(arrays) == sorted(before[1])
    for k, v in arrays.items():
        assert np.array_equal(v, before[1][k]), k


@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_forget_class_equals_retraining_without_it(alpha: float) -> None:
    X, y = stream()
    model = trained(X, y, lambdas=0.5, alpha=alpha, keep_samples=1000)
    P = np.random.default_rng(9).normal(scale=2.0, size=(40, D))
    model.forget_class(2)
    keep = y != 2
    reference = IncrementalRLSC(lambdas=0.5, alpha=alpha).partial_fit(X[keep], y[keep])
    assert model.classes_.tolist() == [c for c in reference.classes_.tolist()]
    assert np.array_equal(model.class_counts_, reference.class_counts_)
    assert_same_model(model, reference, P)
    # learning goes on as in the retrained model
    model.partial_fit(X[:5], y[:5])
    reference.partial_fit(X[:5], y[:5])
    assert_same_model(model, reference, P)


def test_unlearn_samples_equals_retraining_and_an_emptied_class_goes() -> None:
    X, y = stream(1)
    model = trained(X, y, lambdas=2.0, alpha=1.0, keep_samples=1000)
    rng = np.random.default_rng(2)
    gone = np.zeros(len(y), bool)
    gone[rng.choice(len(y), 50, replace=False)] = True
    gone[y == 4] = True  # every sample of the rare class: the class goes with them
    order = rng.permutation(np.flatnonzero(gone))  # any order
    model.unlearn(X[order], y[order])
    reference = IncrementalRLSC(lambdas=2.0, alpha=1.0).partial_fit(X[~gone], y[~gone])
    assert 4 not in model.classes_.tolist()
    assert np.array_equal(model.class_counts_, reference.class_counts_)
    assert_same_model(model, reference, np.random.default_rng(3).normal(scale=2.0, size=(40, D)))


def test_with_model_selection_every_engine_and_the_validation_buffer_follow() -> None:
    """Several λ and α 'auto': each λ's engine equals one trained on the remaining training samples,
    the removed held-out samples leave the validation buffer, and the scores match the buffer."""
    X, y = stream(4, n=300)
    lambdas = [0.1, 1.0, 10.0]
    model = trained(X, y, lambdas=lambdas, alpha="auto", keep_samples=1000)
    kept_X, kept_labels, _ = model.kept_samples()
    val_before = model.n_validation_
    assert len(kept_labels) + val_before == len(y)
    model.forget_class(1)
    keep_rows = np.array([lab != 1 for lab in kept_labels])
    Zt, yt = kept_X[keep_rows], np.array(kept_labels)[keep_rows]
    P = np.random.default_rng(5).normal(scale=2.0, size=(30, D))
    for lam, engine in zip(lambdas, model._engines, strict=True):
        fresh = IncrementalRLSC(lambdas=lam, alpha=0.0).partial_fit(Zt, yt)
        assert relative(engine.predict(P), fresh._engines[0].predict(P)) <= TOL
    _, val_labels = model.validation_samples()
    assert 1 not in val_labels and len(val_labels) < val_before
    assert model.n_samples == int(np.sum(y != 1))
    for S, engine in zip(model._val_S, model._engines, strict=True):
        assert np.allclose(S, engine.predict(model._val_X), rtol=0, atol=1e-12)
    assert model.lambda_ in lambdas and 0.0 <= model.alpha_ <= 1.0


def test_shared_factor_mode_downdates_the_lambda_in_use_and_selects_again() -> None:
    X, y = stream(6, n=200)
    model = trained(X, y, lambdas=[0.1, 1.0, 10.0], alpha="auto", selection_every=50, keep_samples=500)
    model.forget_class(0)
    kept_X, labels, _ = model.kept_samples()
    fresh = RecursiveRLS(D, len(model.classes_), lam=model.lambda_)
    E = np.zeros((len(labels), len(model.classes_)))
    E[np.arange(len(labels)), [model.classes_.tolist().index(c) for c in labels]] = 1.0
    fresh.update(kept_X, E)
    P = np.random.default_rng(7).normal(size=(20, D))
    assert relative(model._engines[0].predict(P), fresh.predict(P)) <= TOL


def test_rename_to_a_new_label_and_merge_into_a_known_one_equal_retraining_so_labeled() -> None:
    X, y = stream(8)
    labels = np.array(["mug", "cup", "ball", "box", "pen"], dtype=object)[y]
    model = trained(X, labels, lambdas=1.0, alpha=1.0, keep_samples=0)  # renaming needs no sample
    P = np.random.default_rng(9).normal(scale=2.0, size=(30, D))
    before = model.decision_function(P)
    model.rename_class("box", "crate")
    assert "crate" in model.classes_.tolist() and "box" not in model.classes_.tolist()
    assert np.array_equal(model.decision_function(P), before)
    model.rename_class("mug", "cup")  # the teacher called the cup "mug" at times: merge
    relabeled = np.where(labels == "mug", "cup", np.where(labels == "box", "crate", labels))
    reference = IncrementalRLSC(lambdas=1.0, alpha=1.0).partial_fit(X, relabeled.tolist())
    assert_same_model(model, reference, P)


def test_undoing_the_last_teaching_episode_restores_the_model_before_it() -> None:
    X, y = stream(10)
    model = trained(X, y, lambdas=[0.3, 3.0], alpha="auto", keep_samples=1000)
    P = np.random.default_rng(11).normal(scale=2.0, size=(30, D))
    before = model.decision_function(P)
    rng = np.random.default_rng(12)
    wrong = X[y == 0][:9] + 0.1 * rng.normal(size=(9, D))  # class 0 objects, taught as 3
    for x in wrong:
        model.partial_fit(x, [3])
    episode = model.teaching_episode()
    assert len(episode) == 9
    model.unlearn_numbers(episode)
    assert relative(model.decision_function(P), before) <= TOL
    assert model.n_samples == len(y)
    # the last n, across a change of label
    for x in wrong[:4]:
        model.partial_fit(x, [1])
    for x in wrong[4:6]:
        model.partial_fit(x, [2])
    assert len(model.teaching_episode()) == 2
    model.unlearn_numbers(model.teaching_episode(6))
    assert relative(model.decision_function(P), before) <= TOL


def test_bad_requests_are_refused_and_change_nothing() -> None:
    X, y = stream(13)
    model = trained(X, y, lambdas=1.0, alpha=1.0, keep_samples=100)  # the oldest are not kept
    before = snapshot(model)
    cases = [
        (lambda: model.forget_class(7), "not a known class"),
        (lambda: model.forget_class("0"), "not a known class"),  # 0 and "0" differ
        (lambda: model.forget_class(0), "only"),  # its oldest samples are not kept
        (lambda: model.unlearn(X[:1], y[:1]), "not kept"),  # sample 0 was evicted
        (lambda: model.unlearn(X[-1:] + 1e-3, y[-1:]), "not kept"),  # never learned
        (lambda: model.unlearn(X[-1:], [(int(y[-1]) + 1) % 4]), "not kept"),  # another label
        (lambda: model.unlearn(np.vstack([X[-1:]] * 300), [int(y[-1])] * 300), "only"),
        (lambda: model.unlearn(X[-1:], [99]), "not a known class"),
        (lambda: model.rename_class(1, 1), "already"),
        (lambda: model.rename_class(1, ""), "empty"),
        (lambda: model.unlearn_numbers([1]), "not kept"),
        (lambda: model.teaching_episode(500), "only"),
    ]
    for call, words in cases:
        with pytest.raises(ValueError, match=words):
            call()
        assert_unchanged(model, before)
    one = IncrementalRLSC(keep_samples=10).partial_fit(X[:3], [5, 5, 5])
    with pytest.raises(ValueError, match="last class"):
        one.forget_class(5)
    with pytest.raises(ValueError, match="no class"):
        one.unlearn(X[:3], [5, 5, 5])
    with pytest.raises(ValueError, match="learned nothing"):
        IncrementalRLSC(keep_samples=10).unlearn(X[:1], [1])


def test_a_downdate_that_loses_positive_definiteness_is_rebuilt_from_the_kept_samples() -> None:
    """One huge sample in a model of tiny λ: removing it cancels the factor's pivots; the model is
    rebuilt from the kept samples and equals retraining. Without every sample kept: refused."""
    X, y = stream(14, n=60)
    huge = np.zeros((1, D))
    huge[0, 0] = 1e9
    Xh, yh = np.vstack([X, huge, X[:2]]), np.r_[y, 1, y[:2]]
    model = IncrementalRLSC(lambdas=1e-3, alpha=0.5, keep_samples=100).partial_fit(Xh, yh)
    model.unlearn(huge, [1])
    assert model.rebuilds_ == 1
    reference = IncrementalRLSC(lambdas=1e-3, alpha=0.5).partial_fit(np.vstack([X, X[:2]]), np.r_[y, y[:2]])
    P = np.random.default_rng(15).normal(size=(20, D))
    assert relative(model.decision_function(P), reference.decision_function(P)) <= TOL
    assert all(engine.is_finite() for engine in model._engines)
    partial = IncrementalRLSC(lambdas=1e-3, alpha=0.5, keep_samples=5).partial_fit(Xh, yh)
    before = snapshot(partial)
    with pytest.raises(ValueError, match="positive definiteness"):
        partial.unlearn(huge, [1])
    assert_unchanged(partial, before)


def test_kept_samples_are_bounded_saved_and_older_files_load() -> None:
    X, y = stream(16, n=300)
    model = trained(X, y, lambdas=1.0, alpha=1.0, keep_samples=64)
    kept_X, labels, numbers = model.kept_samples()
    assert len(labels) == 64 and np.array_equal(numbers, np.arange(237, 301))
    assert np.array_equal(kept_X, X[-64:]) and labels == y[-64:].tolist()
    block = IncrementalRLSC(keep_samples=10).partial_fit(X[:30], y[:30])  # one block beyond the capacity
    assert np.array_equal(block.kept_samples()[2], np.arange(21, 31)) and block._kept.lost == 20
    one_label = IncrementalRLSC(keep_samples=10).partial_fit(X[:30], [1] * 30)
    with pytest.raises(ValueError, match="not kept any more"):  # the episode began before the kept ones
        one_label.teaching_episode()
    assert len(one_label.teaching_episode(10)) == 10
    loaded = IncrementalRLSC.from_model_file(model.to_model_file())
    assert loaded.keep_samples == 64
    for a, b in zip(loaded.kept_samples(), model.kept_samples(), strict=True):
        assert np.array_equal(a, b)
    P = np.random.default_rng(17).normal(size=(10, D))
    model.unlearn(X[-5:], y[-5:])
    loaded.unlearn(X[-5:], y[-5:])
    assert np.array_equal(model.decision_function(P), loaded.decision_function(P))
    # a file as written before (no kept samples, no keep_samples): loads, nothing can be unlearned
    old = IncrementalRLSC(lambdas=1.0, alpha=1.0).partial_fit(X, y).to_model_file()
    assert "kept_X" not in old.arrays and "keep_samples" not in old.meta
    restored = IncrementalRLSC.from_model_file(ModelFile(old.kind, old.meta, old.arrays))
    assert restored.keep_samples == 0 and restored.n_samples == 300
    with pytest.raises(ValueError, match="only 0 are kept"):
        restored.unlearn(X[-1:], y[-1:])


def test_float32_features_are_kept_as_float32_and_a_failed_update_keeps_the_store() -> None:
    X, y = stream(18, n=50)
    X32 = X.astype(np.float32)
    model = IncrementalRLSC(keep_samples=40).partial_fit(X32, y)
    assert model._kept.buf_x.dtype == np.float32
    before = model.kept_samples()
    with pytest.raises(ValueError):
        model.partial_fit(np.vstack([X32[:2], np.full((1, D), np.nan, np.float32)]), [0, 1, 2])
    after = model.kept_samples()
    assert np.array_equal(before[0], after[0]) and before[1] == after[1]
    model.unlearn(X32[-3:], y[-3:])  # float32 inputs match the kept float32 rows
    assert model.n_samples == 47


def test_rows_learned_as_sums_are_not_kept_and_cannot_be_unlearned() -> None:
    X, y = stream(19, n=80)
    model = IncrementalRLSC(lambdas=1.0, alpha=0.0, keep_samples=100).partial_fit(X[:40], y[:40])
    E = np.zeros((40, 5))
    E[np.arange(40), y[40:]] = 1.0
    counts = np.bincount(y[40:], minlength=5)
    model.learn_sums(list(range(5)), X[40:].T @ X[40:], X[40:].T @ E, counts.tolist(), D)
    before = snapshot(model)
    with pytest.raises(ValueError, match="are kept"):
        model.forget_class(int(y[0]))
    with pytest.raises(ValueError, match="not kept any more"):
        model.teaching_episode()
    assert_unchanged(model, before)
    model.partial_fit(X[:3], [9, 9, 9])  # learned after the sums: the last 3 are undone exactly
    with pytest.raises(ValueError, match="not kept any more"):  # the episode may have begun in the sums
        model.teaching_episode()
    model.unlearn_numbers(model.teaching_episode(3))
    reference = IncrementalRLSC(lambdas=1.0, alpha=0.0).partial_fit(X, y)
    assert_same_model(model, reference, np.random.default_rng(20).normal(size=(10, D)))


def test_the_bound_on_kept_samples_can_change_and_the_newest_stay() -> None:
    X, y = stream(21, n=120)
    model = IncrementalRLSC(lambdas=1.0, alpha=1.0, keep_samples=100).partial_fit(X, y)
    model.set_keep_samples(30)
    assert np.array_equal(model.kept_samples()[2], np.arange(91, 121)) and model._kept.lost == 90
    model.set_keep_samples(200)  # grows: the 30 stay, the next ones join
    model.partial_fit(X[:5], y[:5])
    assert len(model.kept_samples()[1]) == 35 and model.keep_samples == 200
    assert IncrementalRLSC.from_model_file(model.to_model_file()).keep_samples == 200
    model.unlearn_numbers(model.teaching_episode(5))
    reference = IncrementalRLSC(lambdas=1.0, alpha=1.0).partial_fit(X, y)
    assert_same_model(model, reference, np.random.default_rng(22).normal(size=(10, D)))
    model.set_keep_samples(0)
    assert model._kept.size == 0 and model._kept.lost == 120
    with pytest.raises(ValueError, match="keep_samples"):
        model.set_keep_samples(-1)
