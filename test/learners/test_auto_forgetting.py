"""forgetting="auto" (learners/auto_forgetting.py): the prequentially best factor serves."""

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
