"""jittered_cholesky: one retry schedule for numpy arrays and torch tensors."""

import numpy as np
import pytest
import torch

from lifelong_learning.core.linalg import jittered_cholesky


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_retries_on_a_singular_matrix_with_the_same_schedule(backend):
    K = np.ones((5, 5))  # identical centres: a rank-1 kernel matrix
    M = torch.tensor(K) if backend == "torch" else K
    L, eps = jittered_cholesky(M, jitter=0.0)  # ε = 0 fails, then 1e-10 × mean diagonal, ×10 ...
    assert type(L) is type(M)
    L = np.asarray(L)
    np.testing.assert_allclose(L @ L.T, K + eps * np.eye(5), atol=1e-12)
    steps = np.log10(eps / 1e-10)
    assert eps > 0 and steps == pytest.approx(round(steps))
    other = torch.tensor(K) if backend == "numpy" else K
    assert jittered_cholesky(other, jitter=0.0)[1] == eps


def test_zero_jitter_first_and_float32_default():
    L, eps = jittered_cholesky(np.eye(3) * 4.0, jitter=0.0)
    assert eps == 0.0
    np.testing.assert_allclose(L, 2.0 * np.eye(3))
    _, eps32 = jittered_cholesky(torch.eye(3, dtype=torch.float32))
    assert eps32 == pytest.approx(1e-6)


def test_differentiable_through_the_torch_path():
    X = torch.randn(4, 2, dtype=torch.float64, requires_grad=True)
    L, _ = jittered_cholesky(X @ X.T + torch.eye(4, dtype=torch.float64))
    L.diagonal().sum().backward()
    assert X.grad is not None and torch.isfinite(X.grad).all()


@pytest.mark.parametrize("bad", [np.full((2, 2), np.nan), -np.eye(3)])
def test_refuses_nan_and_indefinite(bad):
    with pytest.raises(ValueError, match=r"NaN|positive definite"):
        jittered_cholesky(bad, max_tries=3)
    with pytest.raises(ValueError, match=r"NaN|positive definite"):
        jittered_cholesky(torch.tensor(bad), max_tries=3)
