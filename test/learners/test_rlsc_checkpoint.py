"""Model files of IncrementalRLSC sized to what they must hold (state version 2): one packed factor,
the other λ's rebuilt on load; files of state version 1 still load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from lifelong_learning.core.model_file import load_model_file
from lifelong_learning.learners import IncrementalRLSC
from lifelong_learning.learners import rlsc as rlsc_module
from lifelong_learning.learners.model_selection import recoding
from lifelong_learning.learners.recursive_rls import RecursiveRLS, pack_upper, unpack_upper

STATE1 = Path(__file__).resolve().parents[1] / "data" / "models_state1"
LAMBDAS = [0.1, 1.0, 10.0, 100.0, 1000.0]  # the node's default candidates
#: predictions after a save/load round trip match the ones before to this, relative to the largest
#: |score| (measured here: below 1e-12)
ROUND_TRIP_RTOL = 1e-9


@pytest.fixture(autouse=True, scope="module")
def one_blas_thread():
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def cnn_like(rng: np.random.Generator, n: int, n_classes: int = 20, d: int = 1280):
    """Non-negative, correlated float32 features of norm ~15, like EfficientNet-Lite0's."""
    protos = np.maximum(rng.normal(0.2, 0.5, size=(n_classes, d)), 0.0)
    y = rng.integers(0, n_classes, n)
    X = np.maximum(protos[y] + rng.normal(0.0, 0.3, size=(n, d)), 0.0).astype(np.float32)
    return X.astype(np.float64), y


@pytest.fixture(scope="module")
def big_model():
    """1280-d, 5 λ candidates, 20 classes (the object_recognition node's defaults)."""
    rng = np.random.default_rng(0)
    X, y = cnn_like(rng, 260)
    clf = IncrementalRLSC(lambdas=LAMBDAS, alpha="auto")
    clf.partial_fit(X[:200], [f"object{c}" for c in y[:200]])
    return clf, X[200:]


def assert_close(actual, desired, rtol=ROUND_TRIP_RTOL):
    np.testing.assert_allclose(actual, desired, rtol=0, atol=rtol * np.abs(desired).max())


def test_a_1280_d_5_lambda_model_file_is_below_10_mb_and_round_trips(tmp_path, big_model):
    clf, X_new = big_model
    path = tmp_path / "m.llm"
    clf.save(path)
    size = path.stat().st_size
    # state version 1: 5 full float64 factors = 65.5 MB (+ B's and the validation buffer)
    assert size < 10e6, size
    mf = load_model_file(path)
    assert mf.meta["state_version"] == 2 and mf.meta["factor_of"] == [None, 0, 0, 0, 0]
    assert "engine0/R_upper" in mf.arrays and not any(k.startswith("engine1/") for k in mf.arrays)
    assert mf.arrays["val_X"].dtype == np.float32  # the features were float32: exact
    loaded = IncrementalRLSC.load(path)
    assert (loaded.lambda_, loaded.alpha_) == (clf.lambda_, clf.alpha_)
    np.testing.assert_array_equal(loaded.classes_, clf.classes_)
    np.testing.assert_array_equal(loaded._val_X, clf._val_X)
    assert_close(loaded.decision_function(X_new), clf.decision_function(X_new))
    assert_close(loaded.predict_proba(X_new), clf.predict_proba(X_new))
    for mine, theirs in zip(loaded._engines, clf._engines, strict=True):  # every λ, not only the served one
        assert_close(mine.predict(X_new), theirs.predict(X_new))
    np.testing.assert_array_equal(loaded._engines[0].cholesky_factor, clf._engines[0].cholesky_factor)
    assert loaded.validation_accuracy_ == pytest.approx(clf.validation_accuracy_)


def test_learning_after_a_reload_continues_as_without_one(tmp_path):
    rng = np.random.default_rng(1)
    X, y = cnn_like(rng, 160, n_classes=6, d=200)
    a = IncrementalRLSC(lambdas=LAMBDAS, alpha="auto").partial_fit(X[:100], y[:100])
    a.save(tmp_path / "a.llm")
    b = IncrementalRLSC.load(tmp_path / "a.llm")
    for clf in (a, b):
        for i in range(100, 150):
            clf.partial_fit(X[i], [y[i]])
    assert (a.lambda_, a.alpha_) == (b.lambda_, b.alpha_)
    assert_close(b.decision_function(X[150:]), a.decision_function(X[150:]))


def test_a_model_file_of_state_version_1_loads_with_its_predictions():
    expected = json.loads((STATE1 / "expected.json").read_text())
    mf = load_model_file(STATE1 / "incremental_rlsc_3lambdas.llm")
    assert mf.meta["state_version"] == 1 and "engine2/R" in mf.arrays
    clf = IncrementalRLSC.load(STATE1 / "incremental_rlsc_3lambdas.llm")
    # the file's decisions were written under the thesis's recoding, (k/k_t)^α for every class; the
    # learned state is the same, recoded by today's law (a class above the median count shrunk less)
    counts, alpha = clf.class_counts_, clf.alpha_
    thesis = (counts.sum() / np.maximum(counts, 1)) ** alpha
    decision = np.asarray(expected["decision"]) / thesis * recoding(counts, alpha)
    np.testing.assert_allclose(clf.decision_function(expected["probe"]), decision, rtol=1e-12)
    assert clf.classes_.tolist() == expected["classes"] and clf.n_samples == expected["n_samples"]
    assert clf.n_validation_ == expected["n_validation"]
    assert (clf.lambda_, clf.alpha_) == (expected["lambda"], expected["alpha"])


def test_an_engine_whose_rebuild_is_not_trusted_keeps_its_factor(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    X, y = cnn_like(rng, 90, n_classes=4, d=40)
    clf = IncrementalRLSC(lambdas=[10.0, 0.01, 1.0], alpha="auto").partial_fit(X[:80], y[:80])
    bounds = [clf._engines[1].rebuild_error_bound(lam) for lam in (10.0, 1.0)]
    monkeypatch.setattr(rlsc_module, "REBUILD_TOLERANCE", float(np.mean(bounds)))  # only λ = 10 rebuilt
    clf.save(tmp_path / "m.llm")
    mf = load_model_file(tmp_path / "m.llm")
    assert mf.meta["factor_of"] == [1, None, None]  # the source is the smallest λ
    loaded = IncrementalRLSC.load(tmp_path / "m.llm")
    for j in (1, 2):  # stored: bit for bit
        np.testing.assert_array_equal(loaded._engines[j].cholesky_factor, clf._engines[j].cholesky_factor)
    assert_close(loaded.decision_function(X[80:]), clf.decision_function(X[80:]))
    monkeypatch.setattr(rlsc_module, "REBUILD_TOLERANCE", 0.0)
    assert clf.to_state()[0]["factor_of"] == [None, None, None]


def test_validation_features_stay_float64_when_float32_would_round(tmp_path):
    X = np.random.default_rng(3).normal(size=(60, 5))  # not float32 values
    clf = IncrementalRLSC(lambdas=[1.0, 2.0]).partial_fit(X, [i % 3 for i in range(60)])
    assert clf.to_state()[1]["val_X"].dtype == np.float64
    clf.save(tmp_path / "m.llm")
    np.testing.assert_array_equal(IncrementalRLSC.load(tmp_path / "m.llm")._val_X, clf._val_X)


def test_packed_factor_and_refactoring_for_another_lambda():
    rng = np.random.default_rng(4)
    Z, U = rng.normal(size=(50, 12)), rng.normal(size=(50, 3))
    engines = {lam: RecursiveRLS(12, 3, lam=lam) for lam in (0.5, 2.0, 30.0)}
    for rls in engines.values():
        rls.update(Z, U)
    R = engines[0.5].cholesky_factor
    np.testing.assert_array_equal(unpack_upper(pack_upper(R), 12), R)
    meta, arrays = engines[0.5].to_state(packed=True)
    assert arrays["R_upper"].shape == (78,)
    np.testing.assert_array_equal(RecursiveRLS.from_state(meta, arrays).cholesky_factor, R)
    rebuilt = engines[0.5].regularized([0.5, 2.0, 30.0])
    for rls, lam in zip(rebuilt, (0.5, 2.0, 30.0), strict=True):
        assert rls.lam == lam and rls.n_samples == 50
        np.testing.assert_allclose(rls.cholesky_factor, engines[lam].cholesky_factor, rtol=1e-12, atol=1e-12)
        assert_close(rls.predict(Z), engines[lam].predict(Z), rtol=1e-12)
    with pytest.raises(ValueError):
        unpack_upper(np.ones(77), 12)
    forgetful = RecursiveRLS(12, 3, lam=0.5, forgetting=0.99)
    forgetful.update(Z, U)
    assert forgetful.rebuild_error_bound(1.0) == np.inf
    with pytest.raises(ValueError, match="forgetting"):
        forgetful.regularized([1.0])
