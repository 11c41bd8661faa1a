"""forgetting="auto" (learners/auto_forgetting.py): the factor of the prequentially best proxy serves
the one full engine, a factor below 1 only while the stream is mostly what a memory predicts."""

from __future__ import annotations

import numpy as np
import pytest

from lifelong_learning.core.model_file import ModelFile, load_model_file, save_model_file
from lifelong_learning.learners.auto_forgetting import DEFAULT_MAX_UNEXPLAINED, AutoForgettingRLS
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
    """Random Fourier features of a 4-d input in [-1, 1]⁴ and a nonlinear target that changes a third
    of the way in (``change``: a payload grasped) or not: the proxies learn a quarter of the features
    only (and explain the changed target to about 1 % of its variance)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 4))
    omega, phase = rng.normal(size=(4, d)), rng.uniform(0, 2 * np.pi, d)
    Z = np.sqrt(2.0 / d) * np.cos(X @ omega + phase)
    gain = (np.arange(n) >= n // 3).astype(float) if change else np.zeros(n)
    U = np.stack([np.sin(X[:, 0]) + gain * X[:, 1] * X[:, 2], np.cos(X[:, 3]) - gain * X[:, 0]], axis=1)
    return Z, U + 0.05 * rng.normal(size=U.shape)


def offsets_stream(n: int, seed: int, period: int = 200) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A stationary linear system with a constant feature whose measured targets carry ±1.5 on each
    output, the sign drawn anew every ``period`` rows (offsets no input predicts: a sensor's bias
    jumping, a hand on and off the arm). Returns the rows, the measured targets and the weights."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, D))
    Z[:, 0] = 1.0
    w = 0.3 * rng.normal(size=(D, C))
    signs = rng.choice([-1.0, 1.0], size=(n // period + 1, C))
    return Z, Z @ w + 1.5 * signs[np.arange(n) // period] + 0.1 * rng.normal(size=(n, C)), w


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
    the proxies) and beats no forgetting; on the same stream without the change it loses nothing
    measurable (it keeps 1.0, or a factor chosen by chance costs at most 3 %)."""
    for change in (True, False):
        Z, U = features_stream(6000, change, seed)
        auto, fixed = AutoForgettingRLS(256, 2, lam=0.01), RecursiveRLS(256, 2, lam=0.01)
        assert auto.proxy_features == 64 and auto.engine.n_features == 256
        auto_error = prequential_mse(auto, Z, U, start=2000)
        fixed_error = prequential_mse(fixed, Z, U, start=2000)
        assert auto.engine.forgetting == auto.forgetting
        if change:
            assert auto.forgetting < 1.0 and auto_error < 0.95 * fixed_error, (auto_error, fixed_error)
        else:
            assert auto_error <= 1.03 * fixed_error, (auto.forgetting, auto_error, fixed_error)


def test_offsets_that_no_input_predicts_trade_no_memory() -> None:
    """Switching offsets: a shorter memory follows them and wins prequentially (the rule off,
    ``max_unexplained=inf``, serves 0.998), but the best factor leaves 40 % of the variance
    unexplained: 1.0 keeps serving, and what was learned of the system is kept (its noise-free
    targets on new rows: 0.998 puts the last offsets into them)."""
    Z, U, w = offsets_stream(4000, seed=0)
    Zt = np.random.default_rng(1).normal(size=(500, D))
    Zt[:, 0] = 1.0
    rmse = {}
    for max_unexplained in (DEFAULT_MAX_UNEXPLAINED, np.inf):
        auto = AutoForgettingRLS(D, C, max_unexplained=max_unexplained)
        prequential_mse(auto, Z, U)
        assert min(auto.errors().values()) > 2 * DEFAULT_MAX_UNEXPLAINED
        rmse[max_unexplained] = float(np.sqrt(np.mean((auto.predict(Zt) - Zt @ w) ** 2)))
        if max_unexplained == DEFAULT_MAX_UNEXPLAINED:
            assert (auto.forgetting, auto.switches, auto.explained()) == (1.0, 0, False)
        else:
            assert auto.forgetting < 1.0
    assert rmse[DEFAULT_MAX_UNEXPLAINED] < 0.75 * rmse[np.inf], rmse


def test_a_factor_below_1_waits_until_the_newest_samples_are_explained_too() -> None:
    """A step change: right after it the window is still mostly the old, explained stream, but its
    newest quarter is not, so 1.0 serves; once the proxies explain the new regime over the window
    too, a factor below 1 serves and beats no forgetting."""
    rng = np.random.default_rng(6)
    Z = rng.normal(size=(6000, D))
    w0 = rng.normal(size=(D, C))
    w1 = w0 + rng.normal(size=(D, C))
    U = np.where(np.arange(6000)[:, None] < 3000, Z @ w0, Z @ w1) + 0.1 * rng.normal(size=(6000, C))
    auto, fixed = AutoForgettingRLS(D, C), RecursiveRLS(D, C)
    prequential_mse(auto, Z[:3050], U[:3050])
    window = auto.errors()
    assert min(window.values()) <= DEFAULT_MAX_UNEXPLAINED < min(auto.recent_errors().values()), window
    assert not auto.explained() and auto.forgetting == 1.0
    auto_error = prequential_mse(auto, Z[3050:], U[3050:], start=2000)  # the last 950 rows
    prequential_mse(fixed, Z[:3050], U[:3050])
    fixed_error = prequential_mse(fixed, Z[3050:], U[3050:], start=2000)
    assert auto.explained() and auto.forgetting < 1.0 and auto_error < 0.9 * fixed_error, (
        auto_error,
        fixed_error,
    )


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
    for bad in (-0.1, np.nan):
        with pytest.raises(ValueError):
            AutoForgettingRLS(D, C, max_unexplained=bad)


def test_a_model_file_of_the_present_format_loads_with_the_limit_on_unexplained_variance(tmp_path) -> None:
    """The state keeps ``max_unexplained``; a model file written before it existed (the same format
    without the key, read without pickle) loads with the default, serves the factor it saved, and
    learns on under the limit."""
    Z, U = stream(2500, drift=True, seed=7)
    auto = AutoForgettingRLS(D, C, max_unexplained=0.5)
    prequential_mse(auto, Z, U)
    meta, arrays = auto.to_state(packed=True)
    assert AutoForgettingRLS.from_state(meta, arrays).max_unexplained == 0.5
    del meta["max_unexplained"]
    save_model_file(tmp_path / "auto.npz", ModelFile(kind="auto_forgetting_rls", meta=meta, arrays=arrays))
    loaded = load_model_file(tmp_path / "auto.npz", kind="auto_forgetting_rls")
    back = AutoForgettingRLS.from_state(loaded.meta, loaded.arrays)
    assert back.max_unexplained == DEFAULT_MAX_UNEXPLAINED and back.forgetting == auto.forgetting < 1.0
    np.testing.assert_array_equal(back.predict(Z[:3]), auto.predict(Z[:3]))
    back.update(Z[:10], U[:10])
    assert back.n_samples == auto.n_samples + 10


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
