"""Sums over rows (KernelSums) and the streamed fit (NystromKRR.fit_blocks)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lifelong_learning.nystrom import NystromKRR
from lifelong_learning.nystrom.sums import KernelSums, kernel_sums


def _data(n: int = 300, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    Y = np.stack([np.sin(2 * X[:, 0]) * X[:, 1], np.cos(X[:, 2])], 1) + 0.05 * rng.normal(size=(n, 2))
    return {"X": X, "Y": Y, "X_test": rng.uniform(-2, 2, size=(100, 3))}


def test_sums_of_blocks_equal_the_sums_of_all_rows():
    data = _data()
    X, Y = (torch.as_tensor(data[k]) for k in ("X", "Y"))
    Z, ls = X[:10].clone(), torch.tensor([0.7, 1.1, 0.9], dtype=torch.float64)
    whole = KernelSums.zeros(10, 2, X.dtype, X.device).add(X, Y, Z, ls)
    parts = kernel_sums(((X[s], Y[s]) for s in (slice(0, 7), slice(7, 150), slice(150, 300))), Z, ls)
    assert parts.n == whole.n == 300
    for a, b in ((parts.gram, whole.gram), (parts.kty, whole.kty), (parts.yy, whole.yy)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("solver", ["direct", "pcg"])
def test_fit_blocks_equals_fit_on_all_rows(solver):
    data = _data()
    Z = data["X"][::15]
    kw = dict(centers=Z, lengthscale=[0.8, 1.0, 1.2], lam=1e-4, solver=solver, cg_tol=1e-12, cg_max_iter=500)
    whole = NystromKRR(**kw).fit(data["X"], data["Y"])
    blocks = NystromKRR(**kw).fit_blocks(
        lambda: ((data["X"][a : a + 40], data["Y"][a : a + 40]) for a in range(0, 300, 40))
    )
    assert blocks.n_samples == 300
    np.testing.assert_allclose(
        blocks.predict(data["X_test"]), whole.predict(data["X_test"]), rtol=1e-7, atol=1e-9
    )


def test_fit_blocks_needs_the_centres_and_refuses_bad_blocks():
    with pytest.raises(ValueError, match="needs the centres"):
        NystromKRR(centers=5).fit_blocks(lambda: [])
    model = NystromKRR(centers=np.zeros((3, 2)), lengthscale=1.0)
    with pytest.raises(ValueError, match="input columns"):
        model.fit_blocks(lambda: [(np.zeros((4, 3)), np.zeros((4, 1)))])
    with pytest.raises(ValueError, match="NaN"):
        model.fit_blocks(lambda: [(np.full((4, 2), np.nan), np.zeros((4, 1)))])
    assert not model.is_fitted


def test_fit_sums_from_two_groups_of_rows_equals_the_fit_of_all():
    data = _data()
    Z = data["X"][::15]
    kw = dict(centers=Z, lengthscale=[0.8, 1.0, 1.2], lam=1e-4, solver="direct")
    whole = NystromKRR(**kw).fit(data["X"], data["Y"])
    Zt, ls = torch.as_tensor(Z), torch.tensor([0.8, 1.0, 1.2], dtype=torch.float64)
    X, Y = torch.as_tensor(data["X"]), torch.as_tensor(data["Y"])
    a = kernel_sums([(X[:120], Y[:120])], Zt, ls)
    b = kernel_sums([(X[120:], Y[120:])], Zt, ls)
    both = a + b
    assert both.n == 300
    model = NystromKRR(**kw).fit_sums(both)
    np.testing.assert_allclose(
        model.predict(data["X_test"]), whole.predict(data["X_test"]), rtol=1e-7, atol=1e-9
    )
    with pytest.raises(ValueError, match="centres"):
        NystromKRR(**{**kw, "centers": 5}).fit_sums(both)
    with pytest.raises(ValueError, match="no training data"):
        NystromKRR(**kw).fit_sums(KernelSums.zeros(len(Z), 2, torch.float64, torch.device("cpu")))
