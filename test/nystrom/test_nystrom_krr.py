"""NystromKRR: exact KRR limit, PCG = direct, blocked = unblocked kernel products, input checks."""

import numpy as np
import pytest
import torch

from lifelong_learning.nystrom import NystromKRR
from lifelong_learning.nystrom.kernels import (
    gaussian_kernel,
    knm_gram,
    knm_gram_matmul,
    knm_matmul,
    knm_t_matmul,
    resolve_device,
)


def _data(n=200, d=3, p=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = np.column_stack([np.sin(X[:, 0]) + 0.1 * rng.normal(size=n), X[:, 1] * X[:, 2]])[:, :p]
    return X, Y


def test_all_points_as_centres_equals_exact_krr():
    X, Y = _data(n=80)
    lam, ls = 1e-3, 1.5
    model = NystromKRR(centers=X, lengthscale=ls, lam=lam, solver="direct", device="cpu").fit(X, Y)
    K = np.exp(-0.5 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / ls**2)
    alpha = np.linalg.solve(K + len(X) * lam * np.eye(len(X)), Y)
    Xt, _ = _data(n=30, seed=1)
    Kt = np.exp(-0.5 * ((Xt[:, None, :] - X[None, :, :]) ** 2).sum(-1) / ls**2)
    np.testing.assert_allclose(model.predict(Xt), Kt @ alpha, atol=1e-5)


@pytest.mark.parametrize("dtype,lam,tol", [("float64", 1e-4, 1e-6), ("float32", 1e-3, 5e-2)])
def test_pcg_equals_direct(dtype, lam, tol):
    X, Y = _data(n=400)
    kw = dict(centers=60, lengthscale=[1.0, 0.7, 2.0], lam=lam, dtype=dtype, device="cpu")
    direct = NystromKRR(solver="direct", **kw).fit(X, Y)
    pcg = NystromKRR(solver="pcg", cg_tol=1e-10 if dtype == "float64" else 1e-5, **kw).fit(X, Y)
    assert pcg.solver_used_ == "pcg" and pcg.cg_iterations_ > 0
    scale = np.abs(direct.predict(X)).max()
    assert np.abs(pcg.predict(X) - direct.predict(X)).max() < tol * scale


def test_small_memory_budget_gives_same_model():
    X, Y = _data(n=300)
    big = NystromKRR(centers=40, lengthscale=1.0, lam=1e-4, solver="direct", device="cpu").fit(X, Y)
    small = NystromKRR(
        centers=40, lengthscale=1.0, lam=1e-4, solver="direct", device="cpu", memory_budget=40 * 8 * 4 * 7
    ).fit(X, Y)  # 7-row blocks
    np.testing.assert_allclose(small.predict(X), big.predict(X), rtol=1e-8, atol=1e-10)


def test_blocked_products_equal_unblocked():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(257, 4, generator=g, dtype=torch.float64)
    Z = torch.randn(13, 4, generator=g, dtype=torch.float64)
    ls = torch.tensor([0.5, 1.0, 2.0, 1.5], dtype=torch.float64)
    U = torch.randn(13, 3, generator=g, dtype=torch.float64)
    V = torch.randn(257, 3, generator=g, dtype=torch.float64)
    K = gaussian_kernel(X, Z, ls)
    ref = torch.exp(-0.5 * (((X[:, None, :] - Z[None]) / ls) ** 2).sum(-1))
    torch.testing.assert_close(K, ref)
    budget = 17 * 8 * 4 * 10  # 10-row blocks
    torch.testing.assert_close(knm_matmul(X, Z, ls, U, budget), K @ U)
    torch.testing.assert_close(knm_t_matmul(X, Z, ls, V, budget), K.T @ V)
    torch.testing.assert_close(knm_gram(X, Z, ls, budget), K.T @ K)
    torch.testing.assert_close(knm_gram_matmul(X, Z, ls, U, budget), K.T @ (K @ U))


def test_bad_input_raises_and_keeps_model():
    X, Y = _data(n=50)
    model = NystromKRR(centers=10, device="cpu").fit(X, Y)
    before = model.predict(X)
    Xbad = X.copy()
    Xbad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.fit(Xbad, Y)
    with pytest.raises(ValueError, match="rows"):
        model.fit(X, Y[:-1])
    with pytest.raises(ValueError, match="columns"):
        model.predict(X[:, :2])
    np.testing.assert_array_equal(model.predict(X), before)
    with pytest.raises(ValueError):
        NystromKRR(lam=-1.0)
    with pytest.raises(ValueError):
        NystromKRR(solver="magic")
    with pytest.raises(RuntimeError):
        NystromKRR().predict(X)


def test_device_resolution():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError):
        resolve_device("tpu")
