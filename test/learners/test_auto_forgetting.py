"""forgetting="auto" (learners/auto_forgetting.py): the factor of the prequentially best proxy serves
the one full engine."""

from __future__ import annotations

import numpy as np
import pytest

from lifelong_learning.learners.auto_forgetting import AutoForgettingRLS
from lifelong_learning.learners.recursive_rls import RecursiveRLS

D, C = 20, 2


def stream(n: int, drift: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows and targets of a linear system whose weights wander (``drift``) or stay put."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, D))
    w = rng.normal(size=(D, C))
    U = np.empty((n, C))
    for i in range(n):
        if drift:
            w = w + 0.02 * rng.normal(size=(D, C))  # a random walk: wear, temperature, a payload
        U[i] = Z[i] @ w
    return Z, U + 0.1 * rng.normal(size=U.shape)


def features_stream(n: int, change: bool, seed: int, d: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Random Fourier features of a 4-d input and a nonlinear target that changes a third of the way
    in (``change``: a payload grasped) or not: the proxies learn a quarter of the features only."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 4))
    omega, phase = rng.normal(size=(4, d)), rng.uniform(0, 2 * np.pi, d)
    Z = np.sqrt(2.0 / d) * np.cos(X @ omega + phase)
    gain = (np.arange(n) >= n // 3).astype(float) if change else np.zeros(n)
    U = np.stack([np.sin(X[:, 0]) + gain * X[:, 1] * X[:, 2], np.cos(X[:, 3]) - gain * X[:, 0]], axis=1)
    return Z, U + 0.05 * rng.normal(size=U.shape)


def prequential_mse(engine, Z: np.ndarray, U: np.ndarray, block: int = 10, start: int = 0) -> float:
    """Mean squared error of each block predicted before the engine learns it (from row ``start``)."""
    errors = []
    for i in range(0, Z.shape[0], block):
        if i >= start:
            errors.append(((engine.predict(Z[i : i + block]) - U[i : i + block]) ** 2).mean())
        engine.update(Z[i : i + block], U[i : i + block])
    return float(np.mean(errors))


def test_on_a_drifting_stream_it_picks_a_factor_below_1_and_beats_no_forgetting() -> None:
    Z, U = stream(6000, drift=True)
    auto = AutoForgettingRLS(D, C, lam=1.0)
    fixed = RecursiveRLS(D, C, lam=1.0)
    auto_error = prequential_mse(auto, Z, U, start=2000)
    fixed_error = prequential_mse(fixed, Z, U, start=2000)
    assert auto.forgetting < 1.0 and auto.switches >= 1
    assert auto_error < 0.5 * fixed_error, (auto_error, fixed_error, auto.errors())


def test_on_a_stationary_stream_it_keeps_1_or_loses_nothing_measurable() -> None:
    Z, U = stream(6000, drift=False, seed=1)
    auto = AutoForgettingRLS(D, C, lam=1.0)
    fixed = RecursiveRLS(D, C, lam=1.0)
    auto_error = prequential_mse(auto, Z, U, start=1000)
    fixed_error = prequential_mse(fixed, Z, U, start=1000)
    assert auto.forgetting == 1.0 or auto_error <= 1.01 * fixed_error, (
        auto.forgetting,
        auto_error,
        fixed_error,
    )
    assert auto_error <= 1.01 * fixed_error


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_proxies_of_a_quarter_of_the_features_choose_for_the_full_engine(seed: int) -> None:
    """256 features, proxies of 64: after a change the serving engine forgets (a factor below 1 from
    the proxies) and beats no forgetting; on the same stream without the change it keeps 1.0."""
    for change in (True, False):
        Z, U = features_stream(6000, change, seed)
        auto, fixed = AutoForgettingRLS(256, 2, lam=0.01), RecursiveRLS(256, 2, lam=0.01)
        assert auto.proxy_features == 64 and auto.engine.n_features == 256
        auto_error = prequential_mse(auto, Z, U, start=2000)
        fixed_error = prequential_mse(fixed, Z, U, start=2000)
        assert auto.engine.forgetting == auto.forgetting
        if change:
            assert auto.forgetting < 1.0 and auto_error < 0.7 * fixed_error, (auto_error, fixed_error)
        else:
            assert auto.forgetting == 1.0 and auto_error <= 1.01 * fixed_error, (auto_error, fixed_error)


def test_the_update_costs_one_engine_and_small_proxies() -> None:
    auto = AutoForgettingRLS(500, 7)
    one = RecursiveRLS(500, 7)
    assert auto.proxy_features == 125 and len(auto.proxies) == 5
    assert auto.nbytes < 1.4 * one.nbytes  # the learned state: 1 + 5/16 of one engine


def test_draft_commit_is_update_and_a_dropped_draft_changes_nothing() -> None:
    Z, U = stream(300, drift=True, seed=2)
    a, b = AutoForgettingRLS(D, C, window=50), AutoForgettingRLS(D, C, window=50)
    for i in range(0, 300, 10):
        a.update(Z[i : i + 10], U[i : i + 10])
        draft = b.draft()
        draft.update(Z[i : i + 10], U[i : i + 10])
        b.draft().update(Z[i : i + 10], 100 * U[i : i + 10])  # dropped: no effect
        b.commit(draft)
    assert (a.forgetting, a.n_samples) == (b.forgetting, b.n_samples) == (a.forgetting, 300)
    assert a.engine.forgetting == b.engine.forgetting == a.forgetting
    np.testing.assert_allclose(a.predict(Z[:5]), b.predict(Z[:5]), rtol=1e-10)
    with pytest.raises(ValueError):
        a.commit(b.draft())


def test_state_round_trip_and_bad_input_leave_it_unchanged() -> None:
    Z, U = stream(2000, drift=True, seed=3)
    auto = AutoForgettingRLS(D, C)
    for i in range(0, 2000, 20):
        auto.update(Z[i : i + 20], U[i : i + 20])
    meta, arrays = auto.to_state(packed=True)
    back = AutoForgettingRLS.from_state(meta, arrays)
    assert back.forgetting == auto.forgetting and back.n_samples == auto.n_samples
    np.testing.assert_array_equal(back.predict(Z[:3]), auto.predict(Z[:3]))
    before = auto.predict(Z[:3])
    for bad in ([[np.nan] * D], [[1.0] * (D + 1)]):
        with pytest.raises(ValueError):
            auto.update(bad, [[0.0] * C])
    np.testing.assert_array_equal(auto.predict(Z[:3]), before)
    with pytest.raises(ValueError):
        AutoForgettingRLS.from_state({**meta, "candidates": [1.0, 0.5]}, arrays)
    with pytest.raises(ValueError):
        AutoForgettingRLS(D, C, candidates=(1.0, 1.0))


def old_format_state(auto_candidates: tuple[float, ...], Z: np.ndarray, U: np.ndarray, serving: int):
    """The state the first version saved: a full engine per candidate (``c<k>.`` arrays)."""
    engines = [RecursiveRLS(D, C, lam=1.0, forgetting=b) for b in auto_candidates]
    for i in range(0, Z.shape[0], 20):
        for engine in engines:
            engine.update(Z[i : i + 20], U[i : i + 20])
    meta = {
        "auto_forgetting": True,
        "candidates": list(auto_candidates),
        "window": 2000,
        "switch_margin": 0.02,
        "serving": serving,
        "switches": 1,
        "engines": [],
    }
    arrays = {}
    for k, engine in enumerate(engines):
        m, a = engine.to_state(packed=True)
        meta["engines"].append(m)
        arrays.update({f"c{k}.{name}": value for name, value in a.items()})
    return meta, arrays, engines


def test_a_state_of_the_first_format_loads_as_the_serving_engine_and_leading_proxies() -> None:
    Z, U = stream(600, drift=True, seed=4)
    candidates = (1.0, 0.999, 0.99)
    meta, arrays, engines = old_format_state(candidates, Z, U, serving=1)
    auto = AutoForgettingRLS.from_state(meta, arrays)
    assert auto.forgetting == auto.engine.forgetting == 0.999 and auto.switches == 1
    assert auto.n_samples == 600 and auto.proxy_features == D  # D < MIN_PROXY_FEATURES: all of them
    np.testing.assert_array_equal(auto.predict(Z[:4]), engines[1].predict(Z[:4]))
    for proxy, engine in zip(auto.proxies, engines, strict=True):
        np.testing.assert_allclose(proxy.weights, engine.weights, rtol=1e-12)
    auto.update(Z[:10], U[:10])  # learns on
    with pytest.raises(ValueError):
        AutoForgettingRLS.from_state({**meta, "serving": 3}, arrays)
    with pytest.raises(ValueError):
        AutoForgettingRLS.from_state({**meta, "candidates": [1.0, 0.5, 0.99]}, arrays)
    reduced = AutoForgettingRLS(100, C)
    wide = [RecursiveRLS(100, C, forgetting=b) for b in reduced.candidates]
    rng = np.random.default_rng(5)
    Zw, Uw = rng.normal(size=(50, 100)), rng.normal(size=(50, C))
    for engine in wide:
        engine.update(Zw, Uw)
    old = {**meta, "candidates": list(reduced.candidates), "serving": 0, "engines": []}
    old_arrays = {}
    for k, engine in enumerate(wide):
        m, a = engine.to_state()
        old["engines"].append(m)
        old_arrays.update({f"c{k}.{name}": value for name, value in a.items()})
    back = AutoForgettingRLS.from_state(old, old_arrays)
    assert back.proxy_features == 64  # the leading 64 × 64 block of each candidate's engine
    small = RecursiveRLS(64, C, forgetting=reduced.candidates[2])
    small.update(Zw[:, :64], Uw)
    np.testing.assert_allclose(back.proxies[2].weights, small.weights, rtol=1e-9)
