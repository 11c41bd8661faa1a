"""Shadow evaluation, canary and drift alarm (serving/shadow.py), with real RLS learners on a
linear stream: the verdicts follow the rule of the module docstring and a failing model in a trial
is failed with its reason, never the serving one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.serving.shadow import (
    CANARY,
    DROPPED,
    FAILED,
    KEPT,
    PROMOTED,
    ROLLED_BACK,
    SHADOW,
    DriftAlarm,
    ShadowSlot,
    Trial,
    check_drift,
    check_settings,
)

D, C = 6, 2
W_TRUE = np.random.default_rng(0).normal(size=(D, C))


def stream(n: int, seed: int, w: np.ndarray = W_TRUE) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D))
    return x, x @ w + 0.05 * rng.normal(size=(n, C))


def trained(n: int, seed: int, sign: float = 1.0) -> RecursiveRLS:
    model = RecursiveRLS(D, C, lam=1.0)
    x, y = stream(n, seed)
    model.update(x, sign * y)
    return model


def predict(model: RecursiveRLS, x: np.ndarray) -> np.ndarray:
    return model.predict(x)


def learn(model: RecursiveRLS, x: np.ndarray, y: np.ndarray) -> None:
    model.update(x, y)


def run(trial: Trial, serving: RecursiveRLS, blocks: int = 40, block: int = 10, dt: float = 0.1):
    """Feed ``blocks`` blocks, the serving model predicting then learning each; the verdict."""
    for k in range(blocks):
        x, y = stream(block, 100 + k)
        answered = serving.predict(x)
        serving.update(x, y)
        verdict = trial.feed(k * dt, x, y, answered)
        if verdict is not None:
            return verdict, k
    return None, blocks


def trial(role: str, other: RecursiveRLS, **kw) -> Trial:
    args = {"window_s": 2.0, "samples": 0, "margin": 0.1, "predict": predict, "learn": learn}
    args.update(kw)
    return Trial(role, other, C, 0.0, **args)


def test_a_better_candidate_is_promoted_after_its_window():
    serving, candidate = trained(5, 1), trained(500, 2)
    verdict, k = run(trial(SHADOW, candidate), serving)
    assert verdict is not None and verdict.outcome == PROMOTED and verdict.other_wins
    assert k == 20  # 2 s of blocks 0.1 s apart: decided at the block that ends the window
    assert verdict.candidate_error < 0.9 * verdict.serving_error
    assert verdict.samples == 210
    assert verdict.as_dict()["promoted"] is True


def test_a_worse_candidate_sign_flipped_is_dropped_and_the_serving_model_unaffected():
    serving, candidate = trained(200, 1), trained(200, 2, sign=-1.0)
    reference = trained(200, 1)
    verdict, k = run(trial(SHADOW, candidate), serving)
    assert verdict.outcome == DROPPED and not verdict.other_wins
    assert verdict.candidate_error > verdict.serving_error
    assert "not better by the margin" in verdict.reason
    # the serving model learned exactly what it would have learned without a trial beside it
    for j in range(k + 1):
        reference.update(*stream(10, 100 + j))
    np.testing.assert_allclose(serving.predict(stream(3, 9)[0]), reference.predict(stream(3, 9)[0]))


def test_an_equal_candidate_is_not_promoted_within_the_margin():
    serving, candidate = trained(200, 1), trained(200, 1)
    verdict, _ = run(trial(SHADOW, candidate), serving)
    assert verdict.outcome == DROPPED
    assert verdict.candidate_error == pytest.approx(verdict.serving_error)


def test_samples_end_the_trial_before_the_window():
    verdict, k = run(trial(SHADOW, trained(500, 2), window_s=100.0, samples=50), trained(5, 1))
    assert verdict.outcome == PROMOTED and k == 4 and verdict.samples == 50


def test_canary_rolls_back_a_worse_new_model_and_keeps_a_better_one():
    replaced = trained(300, 1)
    worse_new = trained(300, 2, sign=-1.0)
    verdict, _ = run(trial(CANARY, replaced), worse_new)
    assert verdict.outcome == ROLLED_BACK and verdict.other_wins
    assert "worse by the margin" in verdict.reason
    verdict, _ = run(trial(CANARY, trained(5, 3)), trained(300, 4))
    assert verdict.outcome == KEPT and not verdict.other_wins


class Raising(RecursiveRLS):
    def predict(self, Z):
        raise RuntimeError("broken model")


def test_a_model_that_raises_or_predicts_nan_is_failed_with_its_reason():
    candidate = Raising(D, C)
    verdict, k = run(trial(SHADOW, candidate), trained(5, 1))
    assert k == 0 and verdict.outcome == FAILED and "broken model" in verdict.reason
    nan_model = trained(50, 2)

    def nan_predict(model, x):
        return np.full((x.shape[0], C), math.nan)

    verdict, _ = run(trial(SHADOW, nan_model, predict=nan_predict), trained(5, 1))
    assert verdict.outcome == FAILED and "NaN" in verdict.reason
    # a trial that ended ignores what it is fed
    t = trial(SHADOW, nan_model, predict=nan_predict)
    run(t, trained(5, 1))
    assert t.feed(1.0, *stream(2, 1), np.zeros((2, C))) is None


def test_an_undefined_error_promotes_nothing():
    t = trial(SHADOW, trained(500, 2))
    x = np.ones((10, D))
    y = np.ones((10, C))  # targets without variance: no scale, no error
    verdict = None
    for k in range(25):
        verdict = t.feed(k * 0.1, x, y, np.zeros((10, C))) or verdict
    assert verdict.outcome == DROPPED and "undefined" in verdict.reason
    assert verdict.as_dict()["candidate_error"] is None


@pytest.mark.parametrize(
    "settings",
    [
        (-1.0, 0, 0.1, 5.0),
        (math.nan, 0, 0.1, 5.0),
        (5.0, -1, 0.1, 5.0),
        (5.0, 0, 1.0, 5.0),
        (5.0, 0, 0.1, -2.0),
    ],
)
def test_settings_out_of_range_are_refused(settings):
    with pytest.raises(ValueError):
        check_settings(*settings)


def test_trial_arguments_are_checked():
    with pytest.raises(ValueError, match="role"):
        trial("other", trained(5, 1))
    with pytest.raises(ValueError, match="positive"):
        trial(SHADOW, trained(5, 1), window_s=0.0)


def test_slot_runs_one_trial_and_counts_verdicts():
    slot = ShadowSlot()
    first, second = trial(SHADOW, trained(5, 1), key="a"), trial(SHADOW, trained(5, 1), key="b")
    assert slot.start(first) is None
    assert slot.running("a") is first and slot.running("b") is None
    assert slot.start(second) is first
    verdict = first.decide(1.0)
    assert not slot.ended(first, verdict)  # no longer the running one: not counted
    assert slot.ended(second, second.decide(1.0))
    assert slot.counts == {DROPPED: 1} and slot.running() is None and slot.last is not None


def test_drift_alarm_raises_after_the_window_and_clears():
    alarm = DriftAlarm(factor=2.0, window_s=3.0)  # no warm-up: the first defined error is the reference
    assert not alarm.update(0.0, math.nan)
    assert not alarm.update(0.0, 0.1)  # the reference
    assert alarm.reference == 0.1
    assert not any(alarm.update(t, 0.15) for t in (1.0, 2.0))  # below 2 × 0.1
    raised = [alarm.update(t, 0.5) for t in (3.0, 4.0, 5.0, 6.0, 7.0)]
    assert raised == [False, False, False, True, False]  # 3 s above, raised once
    assert alarm.raised and alarm.raised_count == 1 and "0.5 above 2 × 0.1" in alarm.describe(0.5)
    assert not alarm.update(8.0, 0.1) and not alarm.raised  # back below: cleared
    alarm.rebase()
    assert math.isnan(alarm.reference)


def test_drift_alarm_takes_its_reference_after_warm_up():
    alarm = DriftAlarm(factor=2.0, window_s=1.0, warmup_s=5.0)
    alarm.rebase(10.0)
    for t, error in ((11.0, 3.0), (13.0, 1.0), (15.0, 0.2)):  # learning: the level falls
        alarm.update(t, error)
    assert math.isnan(alarm.reference)  # errors defined for 4 s only
    alarm.update(16.0, 0.15)
    assert alarm.reference == 0.15  # the error once errors were defined for 5 s


def test_drift_alarm_warm_up_starts_again_when_the_window_ages_out():
    """A stream starting up (learning switched on after a pause) scores its first samples badly:
    those are not the reference; the warm-up counts defined errors in a row."""
    alarm = DriftAlarm(factor=2.0, window_s=1.0, warmup_s=5.0)
    alarm.rebase(0.0)
    alarm.update(1.0, 0.1)
    alarm.update(3.0, math.nan)  # learning stopped: the window aged out
    for t, error in ((20.0, 0.9), (22.0, 0.3), (24.0, 0.12)):  # learning again: a start-up transient
        alarm.update(t, error)
    assert math.isnan(alarm.reference)
    alarm.update(25.0, 0.1)
    assert alarm.reference == 0.1


def test_drift_alarm_ignores_a_short_excursion():
    alarm = DriftAlarm(factor=2.0, window_s=3.0)
    alarm.update(0.0, 0.1)
    assert not any(
        alarm.update(t, v) for t, v in ((1.0, 0.5), (2.0, 0.5), (3.0, 0.1), (4.0, 0.5), (5.0, 0.5))
    )


@pytest.mark.parametrize("factor,window", [(1.0, 5.0), (-2.0, 5.0), (math.inf, 5.0), (2.0, 0.0)])
def test_drift_settings_out_of_range_are_refused(factor, window):
    with pytest.raises(ValueError):
        check_drift(factor, window)
