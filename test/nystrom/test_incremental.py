"""The incremental Nyström path (thesis §4.2.4, Algorithm 1): the coefficients at every m equal the
direct solve of eq. 4.6 with the first m centres, the validation errors along it equal those of
the direct fits, a repeated centre is skipped, and the chosen (λ, m) is refitted on every row."""

import numpy as np
import pytest
import torch

from lifelong_learning.nystrom import NystromKRR, NystromPath
from lifelong_learning.nystrom.incremental import incremental_nystrom, validation_error
from lifelong_learning.nystrom.kernels import gaussian_kernel
from lifelong_learning.nystrom.sums import KernelSums

pytestmark = pytest.mark.usefixtures("one_thread")


def _gauss(A, B, ls):
    return np.exp(-0.5 * (((A[:, None] - B[None]) / ls) ** 2).sum(-1))


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    Y = np.column_stack([np.sin(X[:, 0]), np.cos(X[:, 1]) * X[:, 0]]) + 0.1 * rng.normal(size=(n, 2))
    return X, Y


def _sums(X, Y, Z, ls):
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    return KernelSums.zeros(Z.shape[0], Y.shape[1], torch.float64, torch.device("cpu")).add(
        t(X), t(Y), t(Z), t(np.full(Z.shape[1], ls))
    )


def test_the_path_is_the_direct_solve_at_every_m():
    X, Y = _data()
    Xv, Yv = _data(n=40, seed=1)
    Z, ls, lam, n = X[:25], 1.1, 1e-4, X.shape[0]
    train, val = _sums(X, Y, Z, ls), _sums(Xv, Yv, Z, ls)
    Kmm = gaussian_kernel(torch.as_tensor(Z), torch.as_tensor(Z), torch.full((2,), ls, dtype=torch.float64))
    steps = list(incremental_nystrom(train, Kmm, lam))
    assert [s.t for s in steps] == list(range(1, 26)) and all(s.added for s in steps)
    for s in steps:
        Knm, Kmm_t = _gauss(X, Z[: s.t], ls), _gauss(Z[: s.t], Z[: s.t], ls)
        direct = np.linalg.solve(Knm.T @ Knm + n * lam * Kmm_t, Knm.T @ Y)
        np.testing.assert_allclose(s.alpha.numpy(), direct, rtol=1e-6, atol=1e-8 * np.abs(direct).max())
        error = ((_gauss(Xv, Z[: s.t], ls) @ direct - Yv) ** 2).mean()
        assert validation_error(s, val) == pytest.approx(error, rel=1e-7)


def test_a_repeated_centre_adds_nothing_and_is_skipped():
    X, Y = _data(n=60)
    Z = np.vstack([X[:5], X[2:3], X[5:8]])  # the 6th centre repeats the 3rd
    ls = np.full(2, 1.0)
    Kmm = gaussian_kernel(torch.as_tensor(Z), torch.as_tensor(Z), torch.as_tensor(ls))
    steps = list(incremental_nystrom(_sums(X, Y, Z, 1.0), Kmm, 1e-3))
    assert [s.added for s in steps] == [True] * 5 + [False] + [True] * 3
    assert steps[-1].used == [0, 1, 2, 3, 4, 6, 7, 8]
    assert torch.equal(steps[5].alpha, steps[4].alpha)


def test_the_estimator_chooses_lambda_and_m_on_held_out_rows_and_refits_on_all():
    X, Y = _data(n=150)
    model = NystromPath(max_centers=30, lengthscale=1.0, lam=[1e-8, 1e-2], device="cpu", seed=2)
    calls = []
    model.fit(X, Y, progress=lambda i, info: calls.append(info))
    assert model.errors_.shape == (2, 30) and len(calls) == 2
    i, j = model.lams_.index(model.best_lam_), model.best_m_ - 1
    assert model.errors_[i, j] == np.nanmin(model.errors_)
    assert model.model_.centers_.shape[0] == model.best_m_ and model.n_samples == 150
    refit = NystromKRR(centers=model.model_.centers_, lengthscale=1.0, lam=model.best_lam_, device="cpu")
    np.testing.assert_allclose(model.predict(X[:9]), refit.fit(X, Y).predict(X[:9]), rtol=1e-10, atol=1e-12)


def test_bad_input_is_refused():
    X, Y = _data(n=20)
    for bad in (dict(lam=0.0), dict(lam=[1e-3, -1.0]), dict(max_centers=0), dict(lengthscale=-1.0)):
        with pytest.raises(ValueError):
            NystromPath(**bad)
    model = NystromPath(max_centers=5, device="cpu")
    with pytest.raises(ValueError):
        model.fit(X[:1], Y[:1])
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.fit(Xn, Y)
    with pytest.raises(ValueError, match="positive"):
        next(incremental_nystrom(_sums(X, Y, X[:3], 1.0), torch.eye(3, dtype=torch.float64), 0.0))
    many = NystromPath(max_centers=500, device="cpu").fit(X, Y)  # M > the training rows: all of them
    assert many.errors_.shape == (1, 16)
