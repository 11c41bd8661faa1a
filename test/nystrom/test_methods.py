"""The one contract every offline method meets (lifelong_learning/nystrom/estimator.py), checked over
every registered method, as scikit-learn's check_estimator and River's checks do: fit on rows with
groups and a progress callback; predictions of the right shape; the feature map and λ the online
engine continues from (exactly, where the method says so); the model file round trip without code
execution; bad input refused with the estimator left unfitted."""

import functools

import numpy as np
import pytest

from lifelong_learning.core.model_file import ModelFileError
from lifelong_learning.learners.feature_map import feature_map_from_state, feature_map_kinds
from lifelong_learning.nystrom.estimator import OfflineMethod, holdout_split
from lifelong_learning.nystrom.methods import method_named, methods

pytestmark = pytest.mark.usefixtures("one_thread")

#: small, fast settings of every method (a method registered without settings here fails below)
SETTINGS = {
    "nystrom": dict(centers=8, epochs=3, lr=0.1, device="cpu", seed=1),
    "slkl": dict(n_candidates=20, lengthscale=1.0, nu=1e-3, device="cpu", seed=1),
    "ktr3": dict(lam=1e-3, lengthscale=1.0, device="cpu", seed=1),
    "nytro": dict(centers=15, lengthscale=1.0, max_iter=50, device="cpu", seed=1),
    "path": dict(max_centers=15, lengthscale=1.0, lam=[1e-6, 1e-3], device="cpu", seed=1),
}


def _data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    Y = np.column_stack([np.sin(2 * X[:, 0]), np.cos(X[:, 1])]) + 0.05 * rng.normal(size=(n, 2))
    return X, Y


@functools.cache
def _fitted(name):
    """The method fitted once per module (the tests below only read it)."""
    X, Y = _data()
    calls = []
    est = method_named(name, **SETTINGS[name]).fit(
        X, Y, groups=[0, 30], progress=lambda step, info: calls.append((step, info))
    )
    return est, X, Y, calls


def test_every_method_has_contract_settings():
    assert sorted(methods()) == sorted(SETTINGS)
    for name, cls in methods().items():
        assert issubclass(cls, OfflineMethod) and cls.name == name and cls.kind == f"offline_{name}"
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        method_named("nope")


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_fit_reports_progress_and_predicts_every_output(name):
    est, X, Y, calls = _fitted(name)
    assert est.is_fitted and est.n_samples == len(X)
    assert calls and all(isinstance(step, int) and isinstance(info, dict) for step, info in calls)
    P = est.predict(X[:7])
    assert P.shape == (7, 2) and P.dtype == np.float64 and np.all(np.isfinite(P))
    assert np.mean((est.predict(X) - Y) ** 2) < np.mean((Y - Y.mean(0)) ** 2)  # it learned


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_the_online_engine_continues_from_the_feature_map_and_lambda(name):
    est, X, Y, _ = _fitted(name)
    fmap = est.feature_map()
    assert fmap.kind in feature_map_kinds()
    meta, arrays = fmap.to_state()
    again = feature_map_from_state(fmap.kind, meta, arrays)
    assert np.array_equal(again.transform(X[:5]), fmap.transform(X[:5]))
    lam = est.engine_lam()
    assert np.isfinite(lam) and lam > 0
    assert est.engine_lam(2 * len(X)) == pytest.approx(2 * lam)  # regularization per sample
    engine = est.engine(X, Y)
    P_engine = engine.predict(fmap.transform(X))
    if est.engine_reproduces:
        np.testing.assert_allclose(P_engine, est.predict(X), rtol=0, atol=1e-6 * np.abs(Y).max())
    else:
        assert np.mean((P_engine - Y) ** 2) < np.mean((Y - Y.mean(0)) ** 2)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_model_file_round_trip_and_kind(name, tmp_path):
    est, X, _, _ = _fitted(name)
    path = tmp_path / f"{name}.llm"
    est.save(path)
    loaded = type(est).load(path)
    # the same numbers (a tensor's memory layout may differ, and with it the last bit of a product)
    np.testing.assert_allclose(loaded.predict(X), est.predict(X), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        loaded.feature_map().transform(X[:4]), est.feature_map().transform(X[:4]), rtol=1e-12, atol=1e-14
    )
    others = [cls for other, cls in methods().items() if other != name] or [_Other]
    for cls in others:
        with pytest.raises(ModelFileError, match=f"offline_{name}"):
            cls.load(path)


class _Other(OfflineMethod):
    name = "other"


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_bad_input_is_refused_and_leaves_the_method_unfitted(name):
    X, Y = _data()
    est = method_named(name, **SETTINGS[name])
    with pytest.raises(RuntimeError, match="not fitted"):
        est.predict(X)
    bad = X.copy()
    bad[3, 1] = np.nan
    for args in ((bad, Y), (X, Y[:-1]), (X[:1], Y[:1])):
        with pytest.raises(ValueError):
            est.fit(*args)
        assert not est.is_fitted

    def stop(step, info):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        est.fit(X, Y, progress=stop)
    assert not est.is_fitted


def test_holdout_split_keeps_recordings_whole_or_draws_at_random():
    rng = np.random.default_rng(0)
    train, val = holdout_split(100, 0.2, [0, 50, 70, 90], rng)
    assert list(val) == list(range(70, 100)) and list(train) == list(range(70))
    train, val = holdout_split(100, 0.2, [0, 95], rng)  # the last one alone is too small: held out anyway
    assert list(val) == list(range(95, 100))
    train, val = holdout_split(10, 0.2, None, rng)
    assert len(val) == 2 and sorted([*train, *val]) == list(range(10))
    assert len(holdout_split(2, 0.9, None, rng)[0]) == 1
    with pytest.raises(ValueError):
        holdout_split(1, 0.2, None, rng)


def test_the_nystrom_method_is_tune_unchanged():
    from lifelong_learning.nystrom import tune

    X, Y = _data()
    options = dict(centers=8, epochs=4, lr=0.1, objective="holdout-bags", device="cpu", seed=2)
    est = method_named("nystrom", **options).fit(X, Y, groups=[0, 30])
    model = tune(X, Y, groups=[0, 30], **options)
    assert est.tuning_.history == model.tuning_.history
    assert np.array_equal(est.predict(X), model.predict(X))
    assert est.engine_lam() == model.engine_lam() == len(X) * model.lam


def test_the_methods_are_importable_from_the_package():
    from lifelong_learning.nystrom import KTR3, NYTRO, SLKL, NystromPath

    known = methods()
    assert (known["slkl"], known["ktr3"], known["nytro"], known["path"]) == (SLKL, KTR3, NYTRO, NystromPath)
