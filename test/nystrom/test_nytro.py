"""NYTRO (thesis §4.3, eqs. 4.28-4.30 corrected): each iterate equals the closed-form Landweber
iterate (the spectral filter (1 − (1 − γσ/n)^t)/σ on the whitened features); the iteration count
is chosen on held-out rows by the stopping rule and then run on every row."""

import numpy as np
import pytest

from lifelong_learning.nystrom import NYTRO
from lifelong_learning.nystrom.nytro import nytro_iterates

pytestmark = pytest.mark.usefixtures("one_thread")


def _gauss(A, B, ls):
    return np.exp(-0.5 * (((A[:, None] - B[None]) / ls) ** 2).sum(-1))


def _data(n=100, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] / 3]) + 0.2 * rng.normal(size=(n, 2))
    return X, Y


def test_the_iterates_are_the_closed_form_landweber_iterates():
    X, Y = _data()
    Z, ls, n = X[:20], 0.9, X.shape[0]
    ts = [1, 2, 7, 60]
    got = nytro_iterates(X, Y, Z, ls, ts)
    Kmm = _gauss(Z, Z, ls)
    L = np.linalg.cholesky(Kmm + 1e-8 * np.eye(20))  # the jitter jittered_cholesky starts with
    R = np.linalg.inv(L).T  # RRᵀ = (K_mm + εI)⁻¹
    A = _gauss(X, Z, ls) @ R
    sigma, V = np.linalg.eigh(A.T @ A)
    for t in ts:
        filt = (1 - (1 - sigma / n) ** t) / sigma  # γ = 1
        alpha = R @ (V @ (filt[:, None] * (V.T @ A.T @ Y)))
        np.testing.assert_allclose(got[t], alpha, rtol=1e-6, atol=1e-9 * np.abs(alpha).max())


def test_the_iteration_count_is_chosen_on_the_held_out_rows_then_run_on_every_row():
    X, Y = _data(n=200)
    calls = []
    model = NYTRO(centers=20, lengthscale=1.0, max_iter=100, device="cpu", seed=1)
    model.fit(X, Y, progress=lambda t, info: calls.append(info["validation_rmse"]))
    h = model.validation_rmse_
    assert h.size == len(calls) + 1 and np.array_equal(h[1:], calls)
    assert model.iterations_ == int(np.argmin(h)) > 0
    assert h.size == 101 or h[-1] > 1.05 * h[: h.size - 1].min()  # stopped by the rule or the cap
    expected = nytro_iterates(X, Y, model.centers_, 1.0, [model.iterations_])[model.iterations_]
    np.testing.assert_allclose(model.alpha_, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(model.predict(X[:5]), _gauss(X[:5], model.centers_, 1.0) @ expected, rtol=1e-9)
    assert model.engine_lam() == pytest.approx(200 / model.iterations_)


def test_bad_input_is_refused():
    X, Y = _data(n=20)
    for bad in (
        dict(centers=0),
        dict(max_iter=0),
        dict(threshold=-0.1),
        dict(step=3.0),
        dict(lengthscale=0.0),
    ):
        with pytest.raises(ValueError):
            NYTRO(**bad)
    model = NYTRO(centers=5, device="cpu")
    with pytest.raises(ValueError):
        model.fit(X[:1], Y[:1])
    Xn = X.copy()
    Xn[1, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or Inf"):
        model.fit(Xn, Y)
    assert not model.is_fitted
    constant = NYTRO(centers=5, max_iter=400, device="cpu").fit(X, np.full(20, 1.5))
    assert np.all(np.isfinite(constant.predict(X)))
