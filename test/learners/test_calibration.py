"""Calibrated confidence: temperature scaling fitted on the classifier's held-out validation buffer."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from lifelong_learning.core.model_file import load_model_file
from lifelong_learning.learners import IncrementalRLSC
from lifelong_learning.learners.calibration import (
    T_MAX,
    expected_calibration_error,
    fit_inverse_temperature,
    softmax,
)
from lifelong_learning.learners.model_selection import MIN_CALIBRATION_SAMPLES


@pytest.fixture(autouse=True, scope="module")
def one_blas_thread():
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def overlapping_classes(seed: int, n: int = 3000, n_classes: int = 30, d: int = 64):
    """30 Gaussian classes that overlap: a linear classifier is right ~80 % of the time."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, d)) * 0.35
    y = rng.integers(0, n_classes, n)
    return centres[y] + rng.normal(scale=6.6 / np.sqrt(d), size=(n, d)), y


def test_fit_recovers_the_temperature_of_the_labels():
    rng = np.random.default_rng(0)
    S = rng.normal(size=(4000, 8))
    for t_true in (0.5, 2.0, 7.0):
        P = softmax(S, t_true)
        y = np.array([rng.choice(8, p=p) for p in P])
        assert fit_inverse_temperature(S, y) == pytest.approx(t_true, rel=0.1)


def test_an_error_free_small_set_gives_a_finite_temperature():
    S = np.eye(3)[[0, 1, 2] * 4] + 0.01  # 12 answers, all right: Laplace smoothing keeps t finite
    t = fit_inverse_temperature(S, np.array([0, 1, 2] * 4))
    assert 1.0 < t < T_MAX
    assert softmax(S, t).max(axis=1).mean() == pytest.approx(1 - 1 / 14, abs=0.02)
    with pytest.raises(ValueError):
        fit_inverse_temperature(np.ones((3, 1)), np.zeros(3, dtype=int))  # one class
    with pytest.raises(ValueError):
        fit_inverse_temperature(np.full((2, 2), np.nan), np.zeros(2, dtype=int))


def test_expected_calibration_error_by_hand():
    conf = np.array([0.95, 0.95, 0.55, 0.55, 0.0])
    correct = np.array([1, 1, 1, 0, 0])
    # bins (0.9, 1]: |1 - 0.95| · 2/5; (0.5, 0.6]: |0.5 - 0.55| · 2/5; [0, 0.1]: 0
    assert expected_calibration_error(conf, correct) == pytest.approx(0.4 * 0.05 + 0.4 * 0.05)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_confidence_matches_accuracy_on_held_out_data_and_thresholds_raise_accuracy(seed):
    """Measured on seeds 0-3: ECE 0.030, 0.054, 0.025, 0.010 (1200 held-out samples, ~295 validation
    samples); the raw softmax of the scores: 0.04-0.27. Bound: 0.08."""
    X, y = overlapping_classes(seed)
    clf = IncrementalRLSC(lambdas=[0.1, 1.0, 10.0, 100.0, 1000.0], alpha="auto")
    clf.partial_fit(X[:1800], y[:1800])
    t, n = clf.calibration_
    assert n == clf.n_validation_ > 250 and t > 0
    P = clf.predict_proba(X[1800:])
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_array_equal(P.argmax(axis=1), clf.decision_function(X[1800:]).argmax(axis=1))
    conf = P.max(axis=1)
    correct = clf.classes_[P.argmax(axis=1)] == y[1800:]
    assert 0.6 < correct.mean() < 0.95  # a problem where confidence matters
    assert expected_calibration_error(conf, correct) < 0.08
    accuracy = [correct[conf >= th].mean() for th in (0.0, 0.5, 0.7, 0.9)]
    assert all(b > a for a, b in itertools.pairwise(accuracy))
    assert accuracy[-1] > 0.93 and (conf >= 0.9).mean() > 0.2


def test_fallback_until_enough_validation_samples_and_refit_on_selection():
    X, y = overlapping_classes(0, n=400)
    clf = IncrementalRLSC(lambdas=[1.0, 10.0], alpha=0.0, validation_every=6)
    clf.partial_fit(X[: 6 * MIN_CALIBRATION_SAMPLES - 6], y[: 6 * MIN_CALIBRATION_SAMPLES - 6])
    assert clf.n_validation_ < MIN_CALIBRATION_SAMPLES
    assert clf.calibration_ == (1.0, 0)  # uncalibrated: the plain softmax
    np.testing.assert_allclose(clf.predict_proba(X[300:]), softmax(clf.decision_function(X[300:])))
    clf.partial_fit(X[54:300], y[54:300])
    t1, n1 = clf.calibration_
    assert n1 == clf.n_validation_ >= MIN_CALIBRATION_SAMPLES and t1 != 1.0
    clf.partial_fit(X[300:], y[300:])  # refitted with the selection, on the new buffer
    assert clf.calibration_[1] == clf.n_validation_ > n1
    # One λ and fixed α keep no validation buffer: never calibrated.
    fixed = IncrementalRLSC(lambdas=1.0).partial_fit(X, y)
    assert fixed.calibration_ == (1.0, 0)


def test_calibration_is_saved_and_restored(tmp_path):
    X, y = overlapping_classes(1, n=900)
    clf = IncrementalRLSC(lambdas=[0.1, 10.0], alpha="auto").partial_fit(X[:700], y[:700])
    clf.save(tmp_path / "m.llm")
    saved = load_model_file(tmp_path / "m.llm").meta["calibration"]
    assert saved == {
        "method": "temperature",
        "inverse_temperature": clf.calibration_[0],
        "validation_samples": clf.calibration_[1],
    }
    loaded = IncrementalRLSC.load(tmp_path / "m.llm")
    assert loaded.calibration_ == pytest.approx(clf.calibration_, rel=1e-9)
    np.testing.assert_allclose(
        loaded.predict_proba(X[700:]), clf.predict_proba(X[700:]), rtol=1e-9, atol=1e-12
    )


def test_counted_by_classes_near_copies_of_the_held_out_frames_do_not_raise_the_confidence():
    """A longer showing gives more held-out frames of the same classes, near copies of each other:
    counted by classes (the node's ``calibration_evidence``) they leave ε, hence the confidence, as
    it was; counted by samples, ten times the copies make the answers more confident."""
    rng = np.random.default_rng(1)
    S = np.eye(4)[np.arange(40) % 4] + rng.normal(scale=0.05, size=(40, 4))
    y = np.arange(40) % 4
    copies = np.tile(S, (10, 1)) + rng.normal(scale=1e-3, size=(400, 4))
    by_class = [fit_inverse_temperature(A, b, answers=4) for A, b in ((S, y), (copies, np.tile(y, 10)))]
    assert by_class[1] == pytest.approx(by_class[0], rel=0.05)
    assert softmax(S, by_class[0]).max(axis=1).mean() == pytest.approx(1 - 1 / 6, abs=0.03)  # ε = 1/(4 + 2)
    by_sample = [fit_inverse_temperature(S, y), fit_inverse_temperature(copies, np.tile(y, 10))]
    assert by_sample[1] > 1.3 * by_sample[0]  # 4.9 → 7.2
    with pytest.raises(ValueError):
        fit_inverse_temperature(S, y, answers=0)


def test_calibration_evidence_is_a_setting_saved_with_the_model(tmp_path):
    X, y = overlapping_classes(2, n=900)
    kwargs = {"lambdas": [0.1, 10.0], "alpha": "auto"}
    by_class = IncrementalRLSC(calibration_evidence="classes", **kwargs).partial_fit(X[:700], y[:700])
    by_sample = IncrementalRLSC(**kwargs).partial_fit(X[:700], y[:700])
    np.testing.assert_allclose(by_class.decision_function(X[700:]), by_sample.decision_function(X[700:]))
    assert by_class.calibration_[0] < by_sample.calibration_[0]  # ε = 1/32 against 1/(n + 2): less sure
    by_class.save(tmp_path / "m.llm")
    loaded = IncrementalRLSC.load(tmp_path / "m.llm")
    assert loaded.calibration_evidence == "classes"
    np.testing.assert_allclose(loaded.predict_proba(X[700:]), by_class.predict_proba(X[700:]), rtol=1e-9)
    by_sample.set_params(calibration_evidence="classes")  # selection only: the same calibration
    assert by_sample.calibration_ == pytest.approx(by_class.calibration_, rel=1e-9)
    with pytest.raises(ValueError, match="calibration_evidence"):
        IncrementalRLSC(calibration_evidence="frames")


def test_recoding_shrink_is_a_setting_saved_with_the_model(tmp_path):
    X, y = overlapping_classes(3, n=3000)
    each = [np.flatnonzero(y[:2400] == c)[:40] for c in range(30)]  # 40 of every class, none held out
    rows = np.concatenate([*each, *[each[0]] * 4])  # class 0 taught five times as often
    X, y = np.concatenate([X[rows], X[2400:]]), np.concatenate([y[rows], y[2400:]])
    rows = np.arange(rows.size)
    kwargs = {"lambdas": [1.0], "alpha": 1.0}
    thesis = IncrementalRLSC(recoding_shrink=1.0, **kwargs).partial_fit(X[rows], y[rows])
    gentle = IncrementalRLSC(**kwargs).partial_fit(X[rows], y[rows])
    assert gentle.recoding_shrink == 0.25
    S_thesis, S_gentle = thesis.decision_function(X[rows.size :]), gentle.decision_function(X[rows.size :])
    np.testing.assert_allclose(S_thesis[:, 1:], S_gentle[:, 1:])  # at or below the median: alike
    assert np.all(np.abs(S_thesis[:, 0]) <= np.abs(S_gentle[:, 0]) + 1e-12)  # the favourite shrunk more
    thesis.save(tmp_path / "m.llm")
    loaded = IncrementalRLSC.load(tmp_path / "m.llm")
    assert loaded.recoding_shrink == 1.0
    np.testing.assert_allclose(
        loaded.predict_proba(X[rows.size :]), thesis.predict_proba(X[rows.size :]), rtol=1e-9
    )
    gentle.set_params(recoding_shrink=1.0)  # selection only: the thesis model's answers, no retraining
    np.testing.assert_allclose(gentle.decision_function(X[rows.size :]), S_thesis, rtol=1e-9)
    meta, arrays = thesis.to_state()
    del meta["recoding_shrink"]  # a file that does not say: the default
    assert IncrementalRLSC.from_state(meta, arrays).recoding_shrink == 0.25
    for bad in (-0.1, 1.5, float("nan"), "1"):
        with pytest.raises(ValueError, match="recoding_shrink"):
            IncrementalRLSC(recoding_shrink=bad)
    with pytest.raises(ValueError, match="recoding_shrink"):
        gentle.set_params(recoding_shrink=2.0)
    assert gentle.recoding_shrink == 1.0
