"""Exact objectives: autodiff gradients vs finite differences; stochastic → exact as t grows;
tune() improves held-out error and returns a fitted model, and gives bit for bit what the
single-function tune() gave before it was split."""

import math

import numpy as np
import pytest
import torch

import lifelong_learning.nystrom.tuning as tuning_module
from lifelong_learning.nystrom import EXACT_OBJECTIVES, NystromKRR, exact_objective, tune
from lifelong_learning.nystrom.objectives import StochasticProposed, median_heuristic


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


def _reference_tune(
    X,
    Y,
    centers,
    objective="proposed",
    epochs=200,
    lr=0.05,
    per_dimension_lengthscale=True,
    optimize_centers=True,
    lam_init=None,
    lengthscale_init=None,
    patience=5,
    num_probes=20,
    holdout_fraction=0.2,
    dtype=torch.float64,
    seed=0,
    callback=None,
):
    """The loop of tune() as one function, as it was before the split (CPU, no input checks)."""
    Xt = torch.as_tensor(X).to(dtype)
    Yt = torch.as_tensor(Y).to(dtype)
    Yt = Yt[:, None] if Yt.ndim == 1 else Yt
    n, d = Xt.shape
    Ys = (Yt - Yt.mean(0)) / Yt.std(0).clamp_min(1e-12)
    gen = np.random.default_rng(seed)
    Xo, Yo = Xt, Ys
    if objective == "holdout":
        perm = torch.as_tensor(gen.permutation(n))
        Xo, Yo = Xt[perm], Ys[perm]
    if isinstance(centers, int):
        Z = Xt[torch.as_tensor(np.sort(gen.choice(n, size=min(centers, n), replace=False)))].clone()
    else:
        Z = torch.as_tensor(centers).to(dtype).clone()
    Z.requires_grad_(optimize_centers)
    ls0 = lengthscale_init if lengthscale_init is not None else median_heuristic(Xt, seed=seed)
    ls0 = np.broadcast_to(np.asarray(ls0, dtype=np.float64), (d,) if per_dimension_lengthscale else ())
    lam0 = float(lam_init) if lam_init is not None else 1.0 / n

    def inv(y):
        return y + math.log(-math.expm1(-y)) if y < 30 else y

    ls_raw = torch.tensor([inv(float(v) - 1e-4) for v in np.atleast_1d(ls0)], dtype=dtype)
    ls_raw = (ls_raw if per_dimension_lengthscale else ls_raw[0]).requires_grad_(True)
    lam_raw = torch.tensor(inv(lam0 - 1e-12), dtype=dtype, requires_grad=True)
    opt = torch.optim.Adam([ls_raw, lam_raw] + ([Z] if optimize_centers else []), lr=lr)
    stoch = StochasticProposed(Xt, Ys, num_probes=num_probes, cg_tol=1e-3, cg_max_iter=100, seed=seed)
    history, best, rises, stopped, epoch = [], (math.inf, None), 0, False, 0
    for epoch in range(1, epochs + 1):
        opt.zero_grad()
        ls = torch.nn.functional.softplus(ls_raw) + 1e-4
        lam = torch.nn.functional.softplus(lam_raw) + 1e-12
        if objective == "proposed-stochastic":
            value = stoch.value_and_grad(Z, ls, lam)
        else:
            loss = tuning_module.exact_objective(objective, Xo, Yo, Z, ls, lam, holdout_fraction)
            loss.backward()
            value = float(loss.detach())
        if not math.isfinite(value):
            stopped = True
            break
        history.append(value)
        if value < best[0]:
            best = (value, (Z.detach().clone(), ls.detach().clone(), lam.detach().clone()))
            rises = 0
        elif len(history) > 1 and value > history[-2]:
            rises += 1
            if rises >= patience:
                stopped = True
                break
        opt.step()
        if callback is not None:
            info = {
                "objective": value,
                "centers": Z.detach(),
                "lengthscale": ls.detach(),
                "lam": lam.detach(),
            }
            callback(epoch, info)
    if best[1] is None:
        raise ValueError("the objective was not finite at the initial hyperparameters")
    Zb, lsb, lamb = best[1]
    model = NystromKRR(
        centers=Zb, lengthscale=lsb.numpy(), lam=float(lamb), dtype=dtype, device="cpu", seed=seed
    )
    return model.fit(Xt, Yt), history, epoch, stopped, float(lamb), np.atleast_1d(lsb.numpy()).tolist()


def _small_data(n=60):
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(n, 3))
    Y = np.stack([np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=n), np.cos(X[:, 1])], 1)
    return X, Y


_SAME_AS_BEFORE = {
    "proposed": dict(centers=8, epochs=12, lr=0.1),
    "holdout": dict(centers=8, objective="holdout", epochs=12, lr=0.1, seed=3),
    "gcv-shared-lengthscale-fixed-centres": dict(
        centers=8, objective="gcv", epochs=10, lr=0.1, per_dimension_lengthscale=False, optimize_centers=False
    ),
    "creg-given-centres": dict(
        centers="rows", objective="creg", epochs=10, lam_init=1e-2, lengthscale_init=[1.0, 2.0, 3.0]
    ),
    "sgpr-early-stop": dict(centers=8, objective="sgpr", epochs=60, lr=1.5, patience=2, seed=5),
    "stochastic": dict(centers=8, objective="proposed-stochastic", epochs=8, lr=0.1, num_probes=5),
    "float32": dict(centers=8, epochs=8, lr=0.1, dtype=torch.float32),
}


def _recorder(calls):
    def callback(epoch, info):
        calls.append(
            (epoch, info["objective"], *(info[k].clone() for k in ("centers", "lengthscale", "lam")))
        )

    return callback


def _assert_same_run(model, calls, ref, ref_calls, X):
    ref_model, history, epochs, stopped, lam, lengthscale = ref
    t = model.tuning_
    assert (t.history, t.epochs, t.stopped_early, t.lam, t.lengthscale) == (
        history,
        epochs,
        stopped,
        lam,
        lengthscale,
    )
    assert torch.equal(model.centers_, ref_model.centers_)
    assert np.array_equal(model.predict(X), ref_model.predict(X))
    assert len(calls) == len(ref_calls)
    for got, want in zip(calls, ref_calls, strict=True):
        assert got[:2] == want[:2]
        assert all(torch.equal(a, b) for a, b in zip(got[2:], want[2:], strict=True))


@pytest.mark.parametrize("case", list(_SAME_AS_BEFORE))
def test_tune_matches_the_single_function_loop_bit_for_bit(case):
    X, Y = _small_data()
    kw = dict(_SAME_AS_BEFORE[case])
    if kw["centers"] == "rows":
        kw["centers"] = X[:7] + 0.01
    calls, ref_calls = [], []
    dtype = kw.pop("dtype", torch.float64)
    model = tune(X, Y, device="cpu", dtype=dtype, callback=_recorder(calls), **kw)
    ref = _reference_tune(X, Y, dtype=dtype, callback=_recorder(ref_calls), **kw)
    assert model.tuning_.stopped_early == (case == "sgpr-early-stop")
    _assert_same_run(model, calls, ref, ref_calls, X)


def _nan_from_call(k):
    count = [0]

    def objective(*args, **kwargs):
        count[0] += 1
        loss = exact_objective(*args, **kwargs)
        return loss * math.nan if count[0] >= k else loss

    return objective


def test_tune_stops_on_a_non_finite_objective_and_keeps_the_best(monkeypatch):
    X, Y = _small_data()
    calls, ref_calls = [], []
    monkeypatch.setattr(tuning_module, "exact_objective", _nan_from_call(6))
    model = tune(X, Y, centers=8, epochs=20, lr=0.1, device="cpu", callback=_recorder(calls))
    monkeypatch.setattr(tuning_module, "exact_objective", _nan_from_call(6))
    ref = _reference_tune(X, Y, centers=8, epochs=20, lr=0.1, callback=_recorder(ref_calls))
    assert model.tuning_.stopped_early and model.tuning_.epochs == 6 and len(model.tuning_.history) == 5
    _assert_same_run(model, calls, ref, ref_calls, X)
    monkeypatch.setattr(tuning_module, "exact_objective", _nan_from_call(1))
    with pytest.raises(ValueError, match="not finite at the initial"):
        tune(X, Y, centers=8, epochs=20, device="cpu")


def test_tune_reproduces_values_recorded_before_the_split():
    """Recorded with the single-function tune() (commit c9d8e47) on this machine's CPU."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(60, 2))
    Y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=60)
    recorded = {
        "proposed": (
            [
                1.9267210960354393,
                1.9063489662691453,
                1.8900861924447585,
                1.8783558964542397,
                1.8719775960668743,
                1.8680355016925663,
            ],
            0.024422072337590944,
            [3.6663356041457504, 3.7558503586120957],
            [-0.056558981351620075, 0.16095398463551946, -0.1663375415140469],
        ),
        "holdout": (
            [
                0.6737991966213492,
                0.6576610413980976,
                0.6466417847976599,
                0.638657926456916,
                0.6325494473182534,
                0.6273411015747926,
            ],
            0.02565859073911505,
            [3.061832870756465, 3.7539026858641513],
            [-0.04179834932431353, 0.09273616299678245, -0.1636762366863416],
        ),
    }
    for objective, (history, lam, lengthscale, pred) in recorded.items():
        model = tune(X, Y, centers=8, objective=objective, epochs=6, lr=0.1, device="cpu", seed=1)
        t = model.tuning_
        # bit for bit on the machine that recorded them; a different BLAS may round differently
        np.testing.assert_allclose(t.history, history, rtol=1e-9)
        np.testing.assert_allclose(t.lam, lam, rtol=1e-9)
        np.testing.assert_allclose(t.lengthscale, lengthscale, rtol=1e-9)
        np.testing.assert_allclose(model.predict(X[:3])[:, 0], pred, rtol=1e-8, atol=1e-12)


def test_holdout_bags_is_the_mean_error_of_each_recording_predicted_by_the_others():
    """Each group (a bag) predicted by the Nyström KRR fitted on the others (λ per training row),
    squared errors summed over all rows / n; gradients by autodiff match finite differences; one
    group (or none) is holdout-recent."""
    X, Y, Z0 = _problem(n=60, d=2, m=8)
    ls, lam = torch.tensor([0.9, 1.3], dtype=torch.float64), torch.tensor(1e-2, dtype=torch.float64)
    groups = [0, 25, 40]
    value = exact_objective("holdout-bags", X, Y, Z0, ls, lam, groups=groups)
    sse = 0.0
    for a, b in ((0, 25), (25, 40), (40, 60)):
        rest = torch.cat([torch.arange(0, a), torch.arange(b, 60)])
        model = NystromKRR(centers=Z0, lengthscale=ls.numpy(), lam=float(lam), device="cpu")
        model.fit(X[rest], Y[rest])
        sse += float(((torch.as_tensor(model.predict(X[a:b])) - Y[a:b]) ** 2).sum())
    assert float(value) == pytest.approx(sse / 60, rel=1e-8)
    for none in (None, [0], [0, 60]):
        torch.testing.assert_close(
            exact_objective("holdout-bags", X, Y, Z0, ls, lam, groups=none),
            exact_objective("holdout-recent", X, Y, Z0, ls, lam),
        )
    theta0 = torch.cat([Z0.ravel(), ls, lam[None]])

    def f(theta):
        return exact_objective(
            "holdout-bags", X, Y, theta[:16].reshape(8, 2), theta[16:18], theta[18], groups=groups
        )

    theta = theta0.clone().requires_grad_(True)
    f(theta).backward()
    fd = torch.empty_like(theta0)
    for i in range(theta0.numel()):
        e = torch.zeros_like(theta0)
        e[i] = 1e-6 * max(1.0, abs(float(theta0[i])))
        fd[i] = (f(theta0 + e) - f(theta0 - e)) / (2 * e[i])
    torch.testing.assert_close(theta.grad, fd, rtol=1e-4, atol=1e-6 * float(fd.abs().max()))


def test_fold_bounds_merge_many_recordings_into_at_most_max_folds():
    from lifelong_learning.nystrom.objectives import fold_bounds

    assert fold_bounds(10, [0, 4, 7]) == [(0, 4), (4, 7), (7, 10)]
    assert fold_bounds(10, [4, 4, 12, -1]) == [(0, 4), (4, 10)]  # 0 added, duplicates and outside dropped
    folds = fold_bounds(1000, list(range(0, 1000, 10)), max_folds=5)  # 100 bags of 10 rows
    assert len(folds) == 5 and folds[0][0] == 0 and folds[-1][1] == 1000
    assert all(b - a == 200 for a, b in folds)
