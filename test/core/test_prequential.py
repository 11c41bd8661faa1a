"""Prequential error over a sliding time window (core/prequential.py): no ROS."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.core.prequential import (
    FEW_SAMPLES,
    NO_SAMPLES,
    NO_VARIANCE,
    RESTARTED,
    UNDEFINED,
    PrequentialClassification,
    PrequentialRegression,
)


def test_regression_matches_batch_nmse_over_the_window() -> None:
    """Blocks added over time: the report is the nMSE of exactly the rows still in the window."""
    rng = np.random.default_rng(0)
    acc = PrequentialRegression(3, window_s=10.0, predictors=("model", "baseline"), buckets=10)
    ys, ps, bs, ts = [], [], [], []
    for step in range(300):  # 30 s at 10 blocks a second
        t = 0.1 * step
        y = rng.normal(size=(4, 3)) * [1.0, 5.0, 0.1] + [0.0, 100.0, -3.0]
        p = y + rng.normal(scale=0.3, size=y.shape)
        b = y + rng.normal(scale=1.0, size=y.shape)
        acc.add(t, y, model=p, baseline=b)
        ys.append(y), ps.append(p), bs.append(b), ts.append(np.full(4, t))
    t_all, y_all = np.concatenate(ts), np.concatenate(ys)
    report = acc.report()
    # the window holds the buckets of the last 10 s: [20.0, 29.9] with 1 s buckets
    inside = t_all >= 20.0 - 1e-9
    assert report.samples == inside.sum() == 400
    for name, arrays in (("model", ps), ("baseline", bs)):
        want = normalized_mse(y_all[inside], np.concatenate(arrays)[inside])
        np.testing.assert_allclose(report.errors[name], want, rtol=1e-9)
        assert report.means[name] == pytest.approx(want.mean(), rel=1e-9)
    assert report.errors["model"].mean() < report.errors["baseline"].mean()
    assert report.undefined == ()
    assert acc.samples == 1200


def test_the_newest_buckets_of_the_window_report_alone() -> None:
    """``report(newest=k)``: the nMSE of exactly the rows of the newest k buckets; k out of range
    is refused."""
    rng = np.random.default_rng(1)
    acc = PrequentialRegression(2, window_s=10.0, predictors=("model",), buckets=10)
    ys, ps, ts = [], [], []
    for step in range(150):  # 15 s at 10 blocks a second, the model worse in the last 2 s
        t = 0.1 * step
        y = rng.normal(size=(3, 2))
        p = y + rng.normal(scale=1.0 if t >= 13.0 else 0.1, size=y.shape)
        acc.add(t, y, model=p)
        ys.append(y), ps.append(p), ts.append(np.full(3, t))
    t_all, y_all, p_all = np.concatenate(ts), np.concatenate(ys), np.concatenate(ps)
    newest = acc.report(newest=2)  # the buckets [13, 14) and [14, 15)
    inside = t_all >= 13.0 - 1e-9
    assert newest.samples == inside.sum() == 60
    np.testing.assert_allclose(
        newest.errors["model"], normalized_mse(y_all[inside], p_all[inside]), rtol=1e-9
    )
    assert newest.means["model"] > 2 * acc.report().means["model"]
    assert acc.report(newest=10).means["model"] == acc.report().means["model"]
    for bad in (0, 11):
        with pytest.raises(ValueError):
            acc.report(newest=bad)


def test_variance_is_kept_exactly_for_targets_far_from_zero() -> None:
    """A large offset with a small spread (gravity torque, a little motion): no cancellation."""
    acc = PrequentialRegression(1, window_s=1e9)
    rng = np.random.default_rng(1)
    y = 1e8 + rng.normal(scale=1e-3, size=(5000, 1))
    p = y + 1e-3
    for k in range(0, 5000, 7):
        acc.add(float(k), y[k : k + 7], model=p[k : k + 7])
    np.testing.assert_allclose(acc.report().errors["model"], normalized_mse(y, p), rtol=1e-4)


def test_no_variance_and_too_few_samples_are_undefined_with_a_reason() -> None:
    acc = PrequentialRegression(2, window_s=5.0, predictors=("model", "baseline"))
    empty = acc.report(0.0)
    assert empty.samples == 0 and all(why == FEW_SAMPLES for _, why in empty.undefined)
    assert empty.published("model") == [UNDEFINED, UNDEFINED]
    assert empty.published_mean("model") == UNDEFINED
    y = np.array([[2.0, 1.0], [2.0, 3.0], [2.0, 5.0]])  # the first output never varies
    acc.add(1.0, y, model=y + 0.5, baseline=y - 1.0)
    report = acc.report()
    assert report.undefined == ((0, NO_VARIANCE),)
    assert math.isnan(report.errors["model"][0]) and report.errors["model"][1] == pytest.approx(
        0.25 / (8 / 3)
    )
    assert report.means["model"] == report.errors["model"][1]  # the mean of the defined errors
    assert report.published("model")[0] == UNDEFINED
    assert all(math.isfinite(v) for v in report.published("baseline"))
    assert "panda_joint1" in report.reasons(["panda_joint1", "panda_joint2"])


def test_samples_leave_the_window_and_the_error_follows_the_stream() -> None:
    acc = PrequentialRegression(1, window_s=2.0, buckets=4)
    rng = np.random.default_rng(2)
    for step in range(40):  # 4 s of a bad model
        y = rng.normal(size=(5, 1))
        acc.add(0.1 * step, y, model=y + 2.0)
    bad = acc.report().means["model"]
    for step in range(40, 80):  # then 4 s of a good one
        y = rng.normal(size=(5, 1))
        acc.add(0.1 * step, y, model=y + 0.01)
    good = acc.report().means["model"]
    assert bad > 2.0 and good < 0.01
    assert acc.report(now=100.0).samples == 0  # long after the last sample: nothing left


def test_bad_input_is_refused_and_never_poisons_the_window() -> None:
    acc = PrequentialRegression(2, window_s=5.0, predictors=("model", "baseline"))
    y = np.array([[1.0, 2.0], [3.0, 5.0]])
    acc.add(0.0, y, model=y, baseline=y + 1)
    before = acc.report()
    bad_calls = [
        dict(t=1.0, target=[[np.nan, 1.0]], model=[[1.0, 1.0]], baseline=[[1.0, 1.0]]),
        dict(t=1.0, target=[[1.0, 1.0]], model=[[np.inf, 1.0]], baseline=[[1.0, 1.0]]),
        dict(t=math.nan, target=[[1.0, 1.0]], model=[[1.0, 1.0]], baseline=[[1.0, 1.0]]),
        dict(t=1.0, target=[[1.0, 1.0, 1.0]], model=[[1.0, 1.0, 1.0]], baseline=[[1.0, 1.0, 1.0]]),
        dict(t=1.0, target=[[1.0, 1.0]], model=[[1.0, 1.0]]),  # a predictor missing
        dict(t=1.0, target=[[1.0, 1.0]], model=[[1.0, 1.0]], baseline=[[1.0, 1.0]], other=[[1.0, 1.0]]),
        dict(t=1.0, target=[[1.0, 1.0]], model=[[1.0, 1.0], [2.0, 2.0]], baseline=[[1.0, 1.0]]),
    ]
    for call in bad_calls:
        t, target = call.pop("t"), call.pop("target")
        with pytest.raises(ValueError):
            acc.add(t, target, **call)
    after = acc.report()
    assert after.samples == before.samples == acc.samples == 2
    for name in ("model", "baseline"):
        np.testing.assert_array_equal(after.errors[name], before.errors[name])
    with pytest.raises(ValueError):
        PrequentialRegression(2, window_s=0.0)
    with pytest.raises(ValueError):
        PrequentialRegression(2, window_s=1.0, predictors=("a", "a"))


def test_a_second_model_is_scored_on_the_same_normalization() -> None:
    """What a shadow evaluation needs: one more predictor name, the same targets."""
    acc = PrequentialRegression(1, window_s=10.0, predictors=("serving", "shadow"))
    rng = np.random.default_rng(3)
    for step in range(50):
        y = rng.normal(size=(2, 1))
        acc.add(0.1 * step, y, serving=y + rng.normal(scale=0.5, size=y.shape), shadow=y * 0.99)
    report = acc.report()
    assert report.means["shadow"] < report.means["serving"]


def test_classification_per_class_error_rate_over_the_window() -> None:
    acc = PrequentialClassification(window_s=10.0, predictors=("model",), buckets=10)
    for k in range(10):  # first 10 s: "cup" always wrong
        acc.add(float(k), "cup", model="ball")
    for k in range(10, 20):  # next 10 s: "cup" right, "ball" right half of the time
        acc.add(float(k), "cup", model="cup")
        acc.add(float(k) + 0.5, "ball", model="ball" if k % 2 else "cup")
    report = acc.report(classes=["ball", "cup", "box"])
    assert report.names == ("ball", "cup", "box")
    assert report.errors["model"][0] == pytest.approx(0.5)
    assert report.errors["model"][1] == 0.0
    assert report.undefined == ((2, NO_SAMPLES),)
    assert report.published("model")[2] == UNDEFINED
    assert report.means["model"] == pytest.approx(0.25)
    assert report.samples == 20
    assert acc.report(now=100.0, classes=["cup"]).undefined == ((0, NO_SAMPLES),)
    with pytest.raises(ValueError):
        acc.add(1.0, "cup")  # no prediction given
    with pytest.raises(ValueError):
        acc.add(math.inf, "cup", model="cup")


def test_an_add_costs_the_same_however_long_the_stream() -> None:
    """O(1) amortized: the window holds at most ``buckets`` buckets, whatever was added."""
    acc = PrequentialRegression(7, window_s=1.0, predictors=("model", "baseline"), buckets=20)
    y = np.ones((1, 7))
    for k in range(5000):
        acc.add(k * 1e-3, y * k, model=y, baseline=y)
    assert len(acc._buckets.items) <= 21


def test_a_window_with_fewer_than_min_samples_defines_no_error():
    """A window that ages out while nothing is learned keeps a few samples: no figure from them."""
    rng = np.random.default_rng(0)
    acc = PrequentialRegression(2, 10.0, ("model",), min_samples=20)
    y = rng.normal(size=(30, 2))
    acc.add(0.0, y[:10], model=y[:10] + 0.1)
    few = acc.report(0.0)
    assert np.all(np.isnan(few.errors["model"]))
    assert all(why == "fewer than 20 samples in the window" for _, why in few.undefined)
    acc.add(1.0, y[10:], model=y[10:] + 0.1)
    assert np.all(np.isfinite(acc.report(1.0).errors["model"]))
    with pytest.raises(ValueError, match="min_samples"):
        PrequentialRegression(2, 10.0, min_samples=1)


def test_a_restarted_window_defines_no_error_until_its_min_span() -> None:
    """After a restart (a new model serves) the first samples' spread is small: no error is given
    from them until the window spans ``min_span``; then only the new samples are scored."""
    rng = np.random.default_rng(3)
    acc = PrequentialRegression(1, window_s=10.0, predictors=("model",))
    y = rng.normal(size=(100, 1))
    acc.add(1.0, y, model=y + 1.0)  # the old model: error 1 per sample
    acc.restart(2.0, min_span=5.0)
    acc.add(2.5, y[:10], model=y[:10] + 0.1)
    report = acc.report(3.0)
    assert math.isnan(report.means["model"]) and report.undefined[0][1] == RESTARTED
    acc.add(7.5, y[10:], model=y[10:] + 0.1)
    later = acc.report(7.5)
    assert later.samples == 100 and later.means["model"] < 0.05  # the new model's errors only


def test_a_fork_is_independent_and_scores_as_the_original() -> None:
    rng = np.random.default_rng(7)
    acc = PrequentialRegression(2, window_s=50.0, predictors=("a", "b"), buckets=5)
    for t in range(40):
        y = rng.normal(size=(3, 2))
        acc.add(float(t), y, a=y + 0.1, b=y - 0.3)
    before = acc.report()
    twin = acc.fork()
    y = rng.normal(size=(3, 2))
    twin.add(39.5, y, a=y, b=y + 5.0)  # into the newest bucket, shared before the fork
    twin.add(80.0, y, a=y, b=y)  # a new bucket, older ones dropped
    after = acc.report()
    for name in ("a", "b"):
        np.testing.assert_array_equal(after.errors[name], before.errors[name])
    acc.add(39.5, y, a=y, b=y + 5.0)
    acc.add(80.0, y, a=y, b=y)
    for name in ("a", "b"):
        np.testing.assert_array_equal(acc.report().errors[name], twin.report().errors[name])
