"""Hyperparameters (softplus reparametrization, initial values, optimizer parameters) and the
early-stopping rule of tune()."""

import math

import numpy as np
import pytest
import torch

from lifelong_learning.nystrom.early_stopping import EarlyStopping
from lifelong_learning.nystrom.hyperparameters import (
    _LAM_FLOOR,
    _LS_FLOOR,
    Hyperparameters,
    initial_centers,
    softplus_inverse,
)
from lifelong_learning.nystrom.objectives import median_heuristic


def _inputs(n=50, d=3):
    return torch.as_tensor(np.random.default_rng(1).normal(size=(n, d)))


@pytest.mark.parametrize("y", [1e-10, 1e-3, 0.5, 3.0, 29.9, 30.0, 100.0])
def test_softplus_inverse_inverts_softplus(y):
    x = softplus_inverse(y)
    assert float(torch.nn.functional.softplus(torch.tensor(x, dtype=torch.float64))) == pytest.approx(
        y, rel=1e-9
    )


def test_initial_values_are_the_median_heuristic_one_over_n_and_seeded_rows():
    X = _inputs()
    hp = Hyperparameters.initial(X, 7, np.random.default_rng(4), seed=2)
    Z, ls, lam = hp.current()
    rows = np.sort(np.random.default_rng(4).choice(50, size=7, replace=False))
    assert torch.equal(Z, X[torch.as_tensor(rows)])
    assert Z.requires_grad and Z.is_leaf and Z.data_ptr() != X.data_ptr()
    torch.testing.assert_close(ls, torch.full((3,), median_heuristic(X, seed=2), dtype=torch.float64))
    torch.testing.assert_close(lam, torch.tensor(1 / 50, dtype=torch.float64))
    assert hp.parameters() == [hp.ls_raw, hp.lam_raw, hp.centers]
    assert all(p.is_leaf and p.requires_grad for p in hp.parameters())


def test_shared_lengthscale_fixed_and_given_centres():
    X = _inputs()
    given = X[:5].numpy() + 0.1
    hp = Hyperparameters.initial(
        X,
        given,
        np.random.default_rng(0),
        per_dimension_lengthscale=False,
        optimize_centers=False,
        lam_init=0.3,
        lengthscale_init=2.0,
    )
    Z, ls, lam = hp.current()
    assert ls.shape == () and float(ls.detach()) == pytest.approx(2.0, rel=1e-12)
    assert float(lam.detach()) == pytest.approx(0.3, rel=1e-12)
    assert not Z.requires_grad and np.array_equal(Z.numpy(), given)
    assert hp.parameters() == [hp.ls_raw, hp.lam_raw]
    Z.add_(1.0)  # a copy: the caller's array is untouched
    assert np.array_equal(given, X[:5].numpy() + 0.1)


def test_positivity_floors_hold_for_very_negative_raw_values():
    hp = Hyperparameters.initial(_inputs(), 4, np.random.default_rng(0))
    with torch.no_grad():
        hp.ls_raw.fill_(-1e4)
        hp.lam_raw.fill_(-1e4)
    _, ls, lam = hp.current()
    assert torch.all(ls >= _LS_FLOOR) and float(lam.detach()) >= _LAM_FLOOR > 0


def test_gradients_reach_the_raw_tensors():
    hp = Hyperparameters.initial(_inputs(), 4, np.random.default_rng(0), lengthscale_init=[1.0, 2.0, 3.0])
    Z, ls, lam = hp.current()
    (Z.sum() + ls.sum() + lam).backward()
    assert all(p.grad is not None and torch.all(p.grad != 0) for p in hp.parameters())


def test_centre_count_is_capped_at_n_and_checked():
    X = _inputs(n=6)
    assert initial_centers(X, 100, np.random.default_rng(0)).shape == (6, 3)
    with pytest.raises(ValueError, match="≥ 1"):
        initial_centers(X, 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="columns"):
        initial_centers(X, np.zeros((2, 4)), np.random.default_rng(0))
    with pytest.raises(ValueError, match="positive"):
        Hyperparameters.initial(X, 3, np.random.default_rng(0), lengthscale_init=[1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="positive"):
        Hyperparameters.initial(X, 3, np.random.default_rng(0), lam_init=0.0)


def _run(values, patience):
    stop = EarlyStopping(patience)
    for i, v in enumerate(values):
        if stop.update(v, (torch.tensor(float(i)),)):
            return stop, i
    return stop, None


def test_rises_count_since_the_last_best_not_only_in_a_row():
    # 2.5 rises (1), 2.4 falls but is no new best (count kept), 2.6 rises (2): stop there
    stop, at = _run([3.0, 2.0, 2.5, 2.4, 2.6, 1.0], patience=2)
    assert at == 4 and stop.stopped and stop.rises == 2
    assert stop.history == [3.0, 2.0, 2.5, 2.4, 2.6]
    assert stop.best_value == 2.0 and float(stop.best[0]) == 1.0


def test_a_new_best_resets_the_count_and_equal_values_are_no_rise():
    stop, at = _run([3.0, 3.5, 2.0, 2.0, 2.5, 1.5, 1.5, 1.6], patience=2)
    assert at is None and not stop.stopped and stop.rises == 1
    assert stop.best_value == 1.5 and float(stop.best[0]) == 5.0  # the first of the equal values


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_value_stops_and_is_not_recorded(bad):
    stop, at = _run([2.0, 1.0, bad, 0.5], patience=5)
    assert at == 2 and stop.stopped and stop.history == [2.0, 1.0] and float(stop.best[0]) == 1.0
    first, at = _run([bad], patience=5)
    assert at == 0 and first.best is None and first.history == []


def test_best_parameters_are_detached_copies():
    p = torch.ones(3, requires_grad=True)
    stop = EarlyStopping(patience=1)
    stop.update(1.0, (p * 2,))
    with torch.no_grad():
        p.add_(5.0)
    (best,) = stop.best
    assert not best.requires_grad and torch.equal(best, torch.full((3,), 2.0))


def test_lengthscales_stay_inside_their_range_bounds_whatever_the_raw_values():
    X = _inputs() * torch.tensor([1.0, 10.0, 0.1], dtype=torch.float64)
    span = (X.max(0).values - X.min(0).values).numpy()
    hp = Hyperparameters.initial(X, 5, np.random.default_rng(0), lengthscale_range=(0.1, 4.0))
    _, ls0, _ = hp.current()
    assert np.all(ls0.detach().numpy() >= 0.1 * span) and np.all(ls0.detach().numpy() <= 4.0 * span)
    for raw in (-1e6, 1e6):
        with torch.no_grad():
            hp.ls_raw.fill_(raw)
        _, ls, _ = hp.current()
        expected = (0.1 if raw < 0 else 4.0) * span
        np.testing.assert_allclose(ls.detach().numpy(), expected, rtol=1e-9)
    shared = Hyperparameters.initial(
        X, 5, np.random.default_rng(0), per_dimension_lengthscale=False, lengthscale_range=(0.1, 4.0)
    )
    assert shared.current()[1].ndim == 0
    with pytest.raises(ValueError, match="lengthscale_range"):
        Hyperparameters.initial(X, 5, np.random.default_rng(0), lengthscale_range=(2.0, 1.0))


def test_bounded_tuning_keeps_the_lengthscales_in_range_and_still_fits():
    from lifelong_learning.nystrom.tuning import tune

    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (300, 2))
    y = np.sin(3 * X[:, 0]) + 0.05 * rng.normal(size=300)
    model = tune(X, y, centers=40, epochs=40, lengthscale_range=(0.5, 2.0), device="cpu")
    ls = np.asarray(model.tuning_.lengthscale)
    span = X.max(0) - X.min(0)
    assert np.all(ls >= 0.5 * span - 1e-9) and np.all(ls <= 2.0 * span + 1e-9)
    assert np.mean((model.predict(X).ravel() - y) ** 2) < 0.5 * y.var()


def test_rows_that_barely_differ_start_above_the_length_scale_floor():
    """A robot standing still logs nearly the same input row again and again: the median distance
    is below the floor (1e-4) and the initial length-scale would have no softplus inverse."""
    X = torch.ones(50, 3, dtype=torch.float64) + 1e-7 * torch.arange(50, dtype=torch.float64)[:, None]
    hp = Hyperparameters.initial(X, 5, np.random.default_rng(0))
    _, ls, _ = hp.current()
    assert torch.all(ls >= 10 * _LS_FLOOR - 1e-12) and torch.all(torch.isfinite(ls))
