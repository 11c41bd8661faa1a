"""Exact objectives: autodiff gradients vs finite differences; stochastic → exact as t grows;
tune() improves held-out error and returns a fitted model."""

import numpy as np
import pytest
import torch

from lifelong_learning.nystrom import EXACT_OBJECTIVES, exact_objective, tune
from lifelong_learning.nystrom.objectives import StochasticProposed


def _problem(n=60, d=2, m=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    Y = torch.sin(2 * X[:, :1]) + 0.1 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    Y = (Y - Y.mean()) / Y.std()
    return X, Y, X[:m].clone() + 0.05


@pytest.mark.parametrize("name", EXACT_OBJECTIVES)
def test_exact_objective_gradient_matches_finite_differences(name):
    X, Y, Z0 = _problem()
    theta0 = torch.cat([Z0.ravel(), torch.tensor([0.9, 1.3, 1e-2], dtype=torch.float64)])

    def f(theta):
        Z = theta[: Z0.numel()].reshape(Z0.shape)
        return exact_objective(name, X, Y, Z, theta[-3:-1], theta[-1])

    theta = theta0.clone().requires_grad_(True)
    f(theta).backward()
    grad = theta.grad
    h = 1e-6
    fd = torch.empty_like(theta0)
    for i in range(theta0.numel()):
        e = torch.zeros_like(theta0)
        e[i] = h * max(1.0, abs(float(theta0[i])))
        fd[i] = (f(theta0 + e) - f(theta0 - e)) / (2 * e[i])
    torch.testing.assert_close(grad, fd, rtol=1e-4, atol=1e-6 * float(fd.abs().max()))


def test_stochastic_objective_and_gradient_approach_exact_as_probes_grow():
    X, Y, Z0 = _problem(n=120, d=3, m=15)
    ls0 = torch.tensor([1.0, 1.2, 0.8], dtype=torch.float64)
    lam0 = torch.tensor(1e-3, dtype=torch.float64)

    def leaves():
        return (
            Z0.clone().requires_grad_(True),
            ls0.clone().requires_grad_(True),
            lam0.clone().requires_grad_(True),
        )

    Z, ls, lam = leaves()
    exact = exact_objective("proposed", X, Y, Z, ls, lam)
    exact.backward()
    g_exact = torch.cat([Z.grad.ravel(), ls.grad, lam.grad[None]])
    errors = []
    for t in (4, 4000):
        Z, ls, lam = leaves()
        value = StochasticProposed(X, Y, num_probes=t, cg_tol=1e-12, cg_max_iter=500).value_and_grad(
            Z, ls, lam
        )
        g = torch.cat([Z.grad.ravel(), ls.grad, lam.grad[None]])
        errors.append((abs(value - float(exact.detach())), float((g - g_exact).norm() / g_exact.norm())))
    assert errors[1][0] < errors[0][0] and errors[1][1] < errors[0][1]
    assert errors[1][0] < 0.02 * abs(float(exact.detach())) and errors[1][1] < 0.05


@pytest.mark.parametrize("objective", ["proposed", "sgpr", "proposed-stochastic"])
def test_tune_improves_on_initial_hyperparameters(objective):
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(300, 2))
    Y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=300)
    Xte = rng.uniform(-3, 3, size=(200, 2))
    Yte = np.sin(2 * Xte[:, 0])
    model = tune(
        X,
        Y,
        centers=20,
        objective=objective,
        epochs=60,
        lr=0.1,
        device="cpu",
        lam_init=1e-1,
        lengthscale_init=5.0,
    )
    from lifelong_learning.nystrom import NystromKRR

    init = NystromKRR(centers=20, lengthscale=5.0, lam=1e-1, device="cpu").fit(X, Y)
    err = np.mean((model.predict(Xte)[:, 0] - Yte) ** 2)
    err0 = np.mean((init.predict(Xte)[:, 0] - Yte) ** 2)
    assert err < 0.5 * err0
    assert model.tuning_.history[-1] < model.tuning_.history[0]
    assert len(model.tuning_.lengthscale) == 2


def test_tune_rejects_bad_input():
    X = np.zeros((10, 2))
    with pytest.raises(ValueError, match="objective"):
        tune(X, np.zeros(10), objective="loocv")
    with pytest.raises(ValueError, match="rows"):
        tune(X, np.zeros(9))
    Xn = X.copy()
    Xn[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or Inf"):
        tune(Xn, np.zeros(10))
