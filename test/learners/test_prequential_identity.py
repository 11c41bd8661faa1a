"""The Zhdanov–Kalnishkan identity on the recursive engine (the weighted prequential loss equals the
batch ridge objective, to 1e-10 relative), in the poster's kernel form too; the pass's predictions
are the prefix ridge models' and its prefixes are the batch ridge fits."""

import numpy as np
import pytest

from lifelong_learning.learners.prequential_identity import (
    predict_then_learn,
    prequential_identity,
    ridge_prefixes,
)
from lifelong_learning.learners.random_features import RandomFourierFeatures
from lifelong_learning.learners.recursive_rls import RecursiveRLS


def _ridge(Z, U, lam):
    return np.linalg.solve(Z.T @ Z + lam * np.eye(Z.shape[1]), Z.T @ U)


def _rows(n=150, d=12, c=3, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, d))
    U = Z @ rng.normal(size=(d, c)) + 0.3 * rng.normal(size=(n, c))
    return Z, U


@pytest.mark.parametrize("lam", [1e-3, 0.7, 50.0])
def test_weighted_online_loss_equals_the_batch_objective(lam):
    Z, U = _rows()
    identity = prequential_identity(Z, U, lam)
    W = _ridge(Z, U, lam)
    batch = lam * (W**2).sum() + ((Z @ W - U) ** 2).sum()
    assert identity.batch_objective == pytest.approx(batch, rel=1e-10)
    assert identity.relative_gap < 1e-10
    assert identity.online_loss > identity.weighted_online_loss


def test_the_identity_on_random_features_of_one_output():
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(300, 3))
    y = np.sin(X[:, 0]) * X[:, 1] + 0.1 * rng.normal(size=300)
    Phi = RandomFourierFeatures(3, 80, bandwidth=1.0, seed=0).transform(X)
    assert prequential_identity(Phi, y, lam=300 * 1e-3).relative_gap < 1e-10


def test_the_kernel_form_of_the_poster():
    """(1/n)Σ (f_{t−1}(x_t) − y_t)²/(1 + d_t/(λn)) = min_f λ‖f‖² + (1/n)Σ (f(x_t) − y_t)², with
    d_t = K(x_t, x_t) − k_{t−1}ᵀ(K_{t−1} + λnI)⁻¹k_{t−1} (Theorem 2), from Gram matrices alone."""
    rng = np.random.default_rng(2)
    n, lam = 60, 1e-3
    X = rng.uniform(0, 1, size=(n, 2))
    y = np.cos(3 * X[:, 0]) + 0.1 * rng.normal(size=n)
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1) / 0.3**2)
    left = 0.0
    for t in range(n):
        A = K[:t, :t] + lam * n * np.eye(t)
        k = K[:t, t]
        f = k @ np.linalg.solve(A, y[:t]) if t else 0.0
        d = K[t, t] - (k @ np.linalg.solve(A, k) if t else 0.0)
        left += (f - y[t]) ** 2 / (1 + d / (lam * n)) / n
    alpha = np.linalg.solve(K + lam * n * np.eye(n), y)
    right = lam * alpha @ K @ alpha + ((K @ alpha - y) ** 2).mean()
    assert left == pytest.approx(right, rel=1e-10)


def test_each_prediction_is_the_previous_prefix_model_and_the_weight_is_the_leave_one_out_ratio():
    Z, U = _rows(n=40, d=5, c=2)
    lam = 0.5
    engine = RecursiveRLS(5, 2, lam=lam)
    for t, prediction, leverage in predict_then_learn(engine, Z, U):
        W_before = _ridge(Z[: t - 1], U[: t - 1], lam)
        np.testing.assert_allclose(prediction, Z[t - 1] @ W_before, atol=1e-10)
        residual_after = U[t - 1] - Z[t - 1] @ _ridge(Z[:t], U[:t], lam)
        np.testing.assert_allclose(residual_after, (U[t - 1] - prediction) / (1 + leverage), atol=1e-10)


def test_ridge_prefixes_are_the_batch_fits_of_each_prefix():
    Z, U = _rows(n=50, d=6, c=2)
    lam = 2.0
    out = ridge_prefixes(RecursiveRLS(6, 2, lam=lam), Z, U, [0, 1, 13, 50, 13])
    assert sorted(out) == [0, 1, 13, 50] and not np.any(out[0])
    for t in (1, 13, 50):
        np.testing.assert_allclose(out[t], _ridge(Z[:t], U[:t], lam), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="prefixes"):
        ridge_prefixes(RecursiveRLS(6, 2, lam=lam), Z, U, [51])


def test_bad_input_is_refused():
    Z, U = _rows(n=10, d=3, c=1)
    with pytest.raises(ValueError, match="forgetting"):
        next(predict_then_learn(RecursiveRLS(3, 1, lam=1.0, forgetting=0.99), Z, U))
    with pytest.raises(ValueError, match="lam"):
        prequential_identity(Z, U, lam=0.0)
    Zn = Z.copy()
    Zn[4, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        prequential_identity(Zn, U, lam=1.0)
    with pytest.raises(ValueError, match="rows"):
        prequential_identity(Z, U[:-1], lam=1.0)
