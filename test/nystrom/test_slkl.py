"""SLKL (Machart et al.) against its closed forms: the objective never rises and equals eq. 14
computed from scratch; the first-order conditions of min_{μ≥0} F hold at the end; the predictor is
kernel ridge regression on the learned kernel (eqs. 15-17); only λν matters (Proposition 3); the
kept and the on-the-fly columns give the same run; bad input is refused or meets its documented
limit, never a NaN model."""

import numpy as np
import pytest

from lifelong_learning.nystrom import SLKL

pytestmark = pytest.mark.usefixtures("one_thread")


def _data(n=80, p=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    r = np.linalg.norm(X, axis=1) + 1e-12
    Y = np.column_stack([np.sin(r) / r, np.cos(X[:, 0])][:p]) + 0.05 * rng.normal(size=(n, p))
    return X, Y


def _columns(model, X):
    """c_m = K[:, m] of every candidate (k(x, x) = 1), from scratch."""
    d2 = ((X[:, None, :] - model.centers_[None, :, :]) / model.lengthscale_) ** 2
    return np.exp(-0.5 * d2.sum(-1))


def _q_matrix(model, C):
    Kt = (C * model.weights_) @ C.T  # Σ μ_m c_m c_mᵀ
    return np.linalg.inv(model.lam * np.eye(C.shape[0]) + Kt)


def _objective(model, X, Y):
    """Eq. 14 with one μ for all outputs: tr(Yᵀ(I + K̃/λ)⁻¹Y) + νΣμ = λ tr(YᵀQY) + νΣμ."""
    Q = _q_matrix(model, _columns(model, X))
    return model.lam * np.trace(Y.T @ Q @ Y) + model.nu * model.weights_.sum()


@pytest.fixture(scope="module")
def fitted():
    X, Y = _data(n=60)
    model = SLKL(n_candidates=20, lengthscale=1.0, lam=1.0, nu=0.02, tol=1e-14, max_epochs=2000, device="cpu")
    return model.fit(X, Y), X, Y


def test_the_objective_never_rises_and_is_eq_14(fitted):
    model, X, Y = fitted
    F = model.objective_
    assert F[0] == pytest.approx((Y**2).sum(), rel=1e-14)  # μ = 0
    assert np.max(np.diff(F)) <= 1e-12 * F[0]
    assert F[-1] < 0.5 * F[0]
    assert F[-1] == pytest.approx(_objective(model, X, Y), rel=1e-10)
    assert model.converged_ and model.n_iter_ == F.size - 1 == model.n_active_history_.size - 1
    assert model.n_active_history_[-1] == model.n_active_ == np.count_nonzero(model.weights_)


def test_the_first_order_conditions_hold_at_the_end(fitted):
    """∂F/∂μ_m = ν − λ‖YᵀQc_m‖²: zero where μ_m > 0, non-negative where μ_m = 0."""
    model, X, Y = fitted
    C = _columns(model, X)
    Q = _q_matrix(model, C)
    grad = model.nu - model.lam * ((Y.T @ Q @ C) ** 2).sum(0)
    active = model.weights_ > 0
    assert 0 < active.sum() < active.size
    assert np.max(np.abs(grad[active])) < 1e-3 * model.nu
    assert np.min(grad[~active]) > -1e-3 * model.nu


def test_the_predictor_is_ridge_regression_on_the_learned_kernel(fitted):
    """f(x) = k̃_μ(x, X)(K̃ + λI)⁻¹Y, k̃_μ(x, x') = Σ μ_m k(x, x_m)k(x', x_m) (eqs. 15-17)."""
    model, X, Y = fitted
    Xq = np.random.default_rng(5).uniform(-3, 3, size=(9, 2))
    C, Cq = _columns(model, X), _columns(model, Xq)
    expected = (Cq * model.weights_) @ C.T @ _q_matrix(model, C) @ Y
    np.testing.assert_allclose(model.predict(Xq), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        model.feature_map().transform(Xq) @ model.coef_, expected, rtol=1e-9, atol=1e-12
    )


def test_only_lambda_times_nu_matters():
    """Proposition 3: (λ, ν) and (cλ, ν/c) give μ' = cμ and the same predictor (same draws)."""
    X, Y = _data(n=60, p=1)
    kw = dict(n_candidates=20, lengthscale=1.0, tol=1e-6, device="cpu", seed=3)
    a = SLKL(lam=1.0, nu=0.01, **kw).fit(X, Y)
    b = SLKL(lam=4.0, nu=0.0025, **kw).fit(X, Y)
    np.testing.assert_allclose(b.weights_, 4.0 * a.weights_, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(b.predict(X), a.predict(X), rtol=1e-8, atol=1e-12)


def test_columns_computed_on_the_fly_give_the_same_run():
    X, Y = _data(n=50)
    kw = dict(n_candidates=15, lengthscale=0.8, nu=0.01, tol=1e-6, device="cpu")
    kept = SLKL(**kw).fit(X, Y)
    fly = SLKL(memory_budget=0, **kw).fit(X, Y)
    assert np.array_equal(kept.active_, fly.active_) and kept.n_iter_ == fly.n_iter_
    np.testing.assert_allclose(fly.weights_, kept.weights_, rtol=1e-8, atol=1e-12)


def test_bad_input_is_refused():
    X, Y = _data(n=20)
    for bad in (dict(nu=0.0), dict(nu=-1.0), dict(lam=0.0), dict(nu=np.nan), dict(lengthscale=0.0)):
        with pytest.raises(ValueError):
            SLKL(**bad)
    model = SLKL(n_candidates=5, device="cpu")
    for args in ((X[:1], Y[:1]), (np.zeros((0, 2)), np.zeros((0, 2))), (X, Y[:-1])):
        with pytest.raises(ValueError):
            model.fit(*args)
    Xn = X.copy()
    Xn[2, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or Inf"):
        model.fit(Xn, Y)
    for budget in (0, 2**20):  # columns drawn one at a time, and all kept
        with pytest.raises(ValueError, match="length-scale is too small"):
            SLKL(n_candidates=5, lengthscale=1e-9, memory_budget=budget, max_epochs=3, device="cpu").fit(X, Y)
    assert not model.is_fitted


def test_the_documented_limits():
    X, Y = _data(n=20)
    many = SLKL(n_candidates=500, nu=0.01, device="cpu").fit(X, Y)  # M > n: every row a candidate
    assert many.n_candidates_ == 20
    constant = SLKL(n_candidates=10, nu=0.01, device="cpu").fit(X, np.full(20, 3.0))
    assert np.all(np.isfinite(constant.predict(X))) and constant.objective_[-1] < constant.objective_[0]
    zero = SLKL(n_candidates=10, nu=0.01, device="cpu").fit(X, np.zeros((20, 2)))
    assert zero.converged_ and zero.n_active_ == 0 and np.array_equal(zero.predict(X), np.zeros((20, 2)))
    huge = SLKL(n_candidates=10, nu=1e6, device="cpu").fit(X, Y)  # μ = 0 is optimal: the model is 0
    assert huge.n_active_ == 0 and not np.any(huge.predict(X))
    with pytest.raises(ValueError, match="no active centre"):
        huge.feature_map()


def test_nu_max_is_where_the_first_centre_enters():
    """ν_max = max_m ‖Yᵀc_m‖²/λ: just above it μ = 0 is optimal, just below it a centre is active."""
    X, Y = _data(n=50)
    kw = dict(n_candidates=12, lengthscale=1.0, lam=0.5, tol=1e-10, device="cpu", seed=3)
    probe = SLKL(nu=1.0, **kw).fit(X, Y)
    C = _columns(probe, X)
    nu_max = ((Y.T @ C) ** 2).sum(0).max() / probe.lam
    assert SLKL(nu=1.001 * nu_max, **kw).fit(X, Y).n_active_ == 0
    assert SLKL(nu=0.999 * nu_max, **kw).fit(X, Y).n_active_ >= 1
    relative = SLKL(nu=0.3, relative_nu=True, **kw).fit(X, Y)
    assert relative.nu == pytest.approx(0.3 * nu_max, rel=1e-12)
    with pytest.raises(ValueError, match="fractions"):
        SLKL(nu=[0.5, 1.0], relative_nu=True)


def test_several_nu_choose_on_held_out_rows_and_refit_on_every_row():
    """With several ν: each fitted on the training part of the split, the least validation error
    kept (the most recent recording held out with ``groups``), then that ν on every row."""
    from lifelong_learning.nystrom.estimator import holdout_split

    X, Y = _data(n=90)
    kw = dict(n_candidates=25, lengthscale=1.0, tol=1e-8, device="cpu", seed=2)
    nus = [1e-1, 1e-3, 1e-5]
    seen = []
    chosen = SLKL(nu=nus, relative_nu=True, **kw).fit(
        X, Y, groups=[0, 70], progress=lambda k, i: seen.append(i)
    )
    train, val = holdout_split(90, 0.2, [0, 70], np.random.default_rng(2))
    assert val.tolist() == list(range(70, 90))
    errors = [
        np.mean((SLKL(nu=v, relative_nu=True, **kw).fit(X[train], Y[train]).predict(X[val]) - Y[val]) ** 2)
        for v in nus
    ]
    np.testing.assert_allclose(chosen.validation_errors_, errors, rtol=1e-10)
    best = nus[int(np.argmin(errors))]
    alone = SLKL(nu=best, relative_nu=True, **kw).fit(X, Y)
    assert chosen.nu == alone.nu and chosen.n_active_ == alone.n_active_
    np.testing.assert_array_equal(chosen.predict(X), alone.predict(X))
    assert {i["nu"] for i in seen} >= {chosen.nu}
    again = SLKL.from_state(*chosen.to_state())
    assert again.nu == chosen.nu and again.nus == tuple(nus) and again.relative_nu
    np.testing.assert_array_equal(again.validation_errors_, chosen.validation_errors_)
    np.testing.assert_array_equal(again.predict(X), chosen.predict(X))
