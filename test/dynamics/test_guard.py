"""SampleGuard: what the online learner does with each sample of a joint-state stream."""

import numpy as np
import pytest

from lifelong_learning.dynamics.guard import (
    OUTLIER,
    STAMP_BACK,
    THINNED,
    WARMING_UP,
    RefusedSampleError,
    SampleGuard,
)
from lifelong_learning.dynamics.plausibility import EFFORT, VELOCITY, JointLimits
from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_text

LIMITS = JointLimits.from_urdf(panda_urdf_text(), JOINT_NAMES)
Q = (LIMITS.lower + LIMITS.upper) / 2


def feed(guard, t, qd=None, tau=None):
    return guard.admit(t, Q, np.zeros(7) if qd is None else qd, np.zeros(7) if tau is None else tau)


def test_warm_up_then_learnable_and_q_ddot_of_a_ramp():
    guard = SampleGuard(LIMITS, window=5, degree=1)
    out = [guard.admit(0.01 * k, Q, np.full(7, 0.3 * 0.01 * k), np.zeros(7)) for k in range(7)]
    assert [a.learn for a in out] == [False] * 4 + [True] * 3
    assert out[0].not_learned == WARMING_UP
    np.testing.assert_allclose(out[-1].qdd, 0.3, rtol=1e-9)
    given = guard.admit(0.07, Q, np.zeros(7), np.zeros(7), qdd=np.ones(7))
    assert given.learn and np.all(given.qdd == 1.0)


def test_implausible_velocity_never_reaches_the_filter():
    guard = SampleGuard(LIMITS, window=5, degree=1)
    for k in range(5):
        feed(guard, 0.01 * k)
    glitch = np.zeros(7)
    glitch[1] = 1e300
    with pytest.raises(RefusedSampleError) as info:
        feed(guard, 0.05, qd=glitch)
    assert info.value.reason == VELOCITY and "panda_joint2=1e+300" in info.value.detail
    after = feed(guard, 0.06)
    np.testing.assert_array_equal(after.qdd, 0.0)  # the glitch is not in the fit


def test_implausible_effort_is_answered_but_not_learned():
    guard = SampleGuard(LIMITS)
    tau = np.zeros(7)
    tau[1] = 1e6
    admitted = feed(guard, 0.0, tau=tau)
    assert not admitted.learn and admitted.not_learned == EFFORT


def test_small_step_back_refused_large_jumps_restart():
    guard = SampleGuard(LIMITS, stamp_jump_s=1.0)
    for k in range(20):
        feed(guard, 100.0 + 0.01 * k)
    with pytest.raises(RefusedSampleError) as info:
        feed(guard, 100.1)
    assert info.value.reason == STAMP_BACK
    feed(guard, 95.0)  # a simulator reset 5 s back
    assert guard.restarts == {"stamp jumped back": 1}
    feed(guard, 95.01)
    feed(guard, 2.0**31 - 2)  # one far-future stamp
    feed(guard, 95.02)  # and the stream goes on
    assert guard.restarts == {"stamp jumped back": 2, "stamp gap": 1}
    assert feed(guard, 95.03).qdd.shape == (7,)


def test_gaps_count_missed_samples():
    guard = SampleGuard(LIMITS)
    t = 0.0
    for _ in range(20):
        feed(guard, t)
        t += 0.01
    feed(guard, t + 0.03)  # three samples of 10 ms missing
    assert guard.missed == 3
    assert guard.restarts == {}


def test_isolated_outlier_leaves_the_filter_but_a_run_of_them_stays():
    guard = SampleGuard(LIMITS, window=5, degree=1, outlier_window=60)
    rng = np.random.default_rng(0)
    for k in range(60):
        feed(guard, 0.01 * k)
        assert guard.residual_refusal(rng.normal(0, 0.5, 7), np.zeros(7)) is None
    n = len(guard.estimator)
    feed(guard, 0.60)
    assert guard.residual_refusal(np.full(7, 40.0), np.zeros(7)) == OUTLIER
    assert len(guard.estimator) == n - 1  # taken out again
    feed(guard, 0.61)
    assert guard.residual_refusal(np.full(7, 40.0), np.zeros(7)) == OUTLIER
    assert len(guard.estimator) == n  # the second of a run stays


def test_learn_max_hz_thins_the_learned_samples_by_their_stamps():
    """1 kHz stamps (float seconds since the epoch, not exact) thinned to 250 Hz: every 4th sample
    that may be learned is offered; the others are admitted (answered) with a reason; every
    sample still feeds the acceleration filter; a reset of the stamps starts the count anew."""
    guard = SampleGuard(LIMITS, window=5, degree=1, learn_max_hz=250.0)
    t0 = 1.8e9
    out = [feed(guard, t0 + 0.001 * k, qd=np.full(7, 0.2 * 0.001 * k)) for k in range(4 + 40)]
    assert [a.not_learned for a in out[:4]] == [WARMING_UP] * 4
    learned = [k for k, a in enumerate(out) if a.learn]
    assert learned == list(range(4, 44, 4))
    assert all(out[k].not_learned == THINNED for k in range(4, 44) if k not in learned)
    np.testing.assert_allclose(out[-1].qdd, 0.2, rtol=1e-6)  # the filter saw every sample
    after_reset = feed(guard, t0 - 5.0)  # stamps jumped back: the filter restarts, warming up
    assert after_reset.not_learned == WARMING_UP
    later = [feed(guard, t0 - 5.0 + 0.001 * k) for k in range(1, 9)]
    assert [a.learn for a in later] == [False] * 3 + [True] + [False] * 3 + [True]

    guard.learn_max_hz = 0.0  # off at run time: every sample again
    assert all(feed(guard, t0 - 5.0 + 0.001 * k).learn for k in range(9, 14))


def test_learn_max_hz_holds_its_rate_on_jittered_stamps_and_restarts_after_a_pause():
    rng = np.random.default_rng(3)
    guard = SampleGuard(LIMITS, window=5, degree=1, learn_max_hz=250.0)
    stamps = 100.0 + 0.001 * np.arange(4000) + rng.uniform(-2e-4, 2e-4, 4000)  # 1 kHz, ±0.2 ms
    learned = sum(feed(guard, t).learn for t in stamps)
    assert 995 <= learned <= 1001  # 4 s at 250 Hz (a grid: jitter does not lower the rate)
    guard = SampleGuard(LIMITS, window=5, degree=1, stamp_jump_s=1.0, learn_max_hz=100.0)
    out = [feed(guard, 0.001 * k).learn for k in range(30)]
    assert out.index(True) == 4 and sum(out) == 3  # at 4, 14 and 24 ms
    resumed = [feed(guard, 0.5 + 0.001 * k).learn for k in range(3)]  # after a 0.47 s pause
    assert resumed == [True, False, False]  # offered at once, the grid anew from there


def test_thinned_samples_keep_a_run_of_outliers_a_run():
    """A thinned sample is not tested, so it neither starts nor ends a run of outliers: the second
    outlier of a run (with thinned samples between) keeps its velocity in the filter."""
    guard = SampleGuard(LIMITS, window=5, degree=1, outlier_window=60, learn_max_hz=50.0)
    rng = np.random.default_rng(0)
    k = 0
    while k < 300:
        if feed(guard, 0.01 * k).learn:
            assert guard.residual_refusal(rng.normal(0, 0.5, 7), np.zeros(7)) is None
        k += 1
    assert feed(guard, 0.01 * k).learn  # 300 is a multiple of 2 steps: offered
    n = len(guard.estimator)
    assert guard.residual_refusal(np.full(7, 40.0), np.zeros(7)) == OUTLIER
    assert len(guard.estimator) == n - 1
    assert feed(guard, 0.01 * (k + 1)).not_learned == THINNED
    assert feed(guard, 0.01 * (k + 2)).learn
    assert guard.residual_refusal(np.full(7, 40.0), np.zeros(7)) == OUTLIER
    assert len(guard.estimator) == n  # the second of the run stays (taken out, it would be n - 1)


def test_reset_forgets_the_stream():
    guard = SampleGuard(LIMITS)
    for k in range(60):
        feed(guard, 10.0 + 0.01 * k)
        guard.residual_refusal(np.zeros(7), np.zeros(7))
    guard.reset()
    assert guard.last_stamp is None and len(guard.estimator) == 0 and guard.missed == 0
    feed(guard, 1.0)  # earlier than before the reset: accepted, no restart counted
    assert guard.restarts == {}


def test_bad_parameters():
    bad = ({"stamp_jump_s": 0.0}, {"outlier_k": -1.0}, {"outlier_floor": np.nan}, {"margin": -1.0},
           {"learn_max_hz": -1.0}, {"learn_max_hz": np.inf})  # fmt: skip
    for kw in bad:
        with pytest.raises(ValueError):
            SampleGuard(LIMITS, **kw)


def _stream_state(guard):
    return (
        guard.last_stamp,
        guard.missed,
        dict(guard.restarts),
        len(guard.estimator),
        list(guard.estimator._t),
        guard._backsteps,
    )


def test_a_refused_sample_changes_nothing():
    guard = SampleGuard(LIMITS, stamp_jump_s=1.0)
    for k in range(12):
        feed(guard, 0.01 * k)
    before = _stream_state(guard)
    bad_cases = [
        dict(qd=np.full(7, np.inf)),  # non-finite (an infinite limit would not refuse inf)
        dict(qd=np.zeros(3)),  # wrong size
        dict(qd=np.full(7, 1e300)),  # implausible
    ]
    for kw in bad_cases:
        with pytest.raises(RefusedSampleError):
            feed(guard, 0.12, **kw)
        assert _stream_state(guard) == before
    with pytest.raises(RefusedSampleError):
        feed(guard, 0.105)  # a small step back
    assert _stream_state(guard)[:5] == before[:5]


def test_refused_messages_are_seen_not_missed_and_jitter_is_not_a_gap():
    guard = SampleGuard(LIMITS)
    rng = np.random.default_rng(3)
    t = 0.0
    for k in range(2000):  # 1 kHz with 0.1 ms stamp jitter, every 50th message refused (NaN)
        t += 0.001
        stamp = t + rng.normal(0, 0.0001)
        qd = np.full(7, np.nan) if k % 50 == 0 else None
        try:
            feed(guard, stamp, qd=qd)
        except RefusedSampleError:
            pass
    assert guard.missed == 0  # a step of 1.75 periods is 5.3 σ of the jitter; refused ones were seen
    guard.seen(t + 0.001 + 0.004)  # then four really missing
    assert guard.missed >= 4


def test_a_corrupt_stamp_slightly_ahead_costs_three_samples():
    guard = SampleGuard(LIMITS, stamp_jump_s=1.0)
    for k in range(20):
        feed(guard, 0.01 * k)
    feed(guard, 0.19 + 0.9)  # 0.9 s ahead: within stamp_jump_s, taken as a gap
    refused = 0
    for k in range(20, 30):
        try:
            feed(guard, 0.01 * k)
        except RefusedSampleError:
            refused += 1
    assert refused == 2
    assert guard.restarts == {"stamps went back": 1}


def test_gate_with_infinite_margin_and_continuous_joints():
    limits = JointLimits.from_urdf(
        """<robot name="r"><link name="a"/><link name="b"/>
        <joint name="spin" type="continuous"><parent link="a"/><child link="b"/>
        <axis xyz="0 0 1"/><limit effort="5" velocity="2"/></joint></robot>""",
        ["spin"],
    )
    assert limits.lower[0] == -np.inf and limits.upper[0] == np.inf and limits.effort[0] == 5.0
    guard = SampleGuard(limits, margin=np.inf)
    assert guard.admit(0.0, [1e9], [1e9], [1e9]).not_learned == WARMING_UP


def test_settings_are_checked_without_joints():
    """``check_settings`` refuses what the constructor refuses, before any joint is known (a node
    checks its parameters at start; its URDF may come later)."""
    SampleGuard.check_settings()  # the defaults
    SampleGuard.check_settings(outlier_k=0.0, outlier_window=0)  # the outlier test off: no window
    bad = ({"stamp_jump_s": 0.0}, {"stamp_jump_s": np.inf}, {"outlier_k": -1.0}, {"outlier_k": np.nan},
           {"outlier_floor": np.nan}, {"margin": -1.0}, {"margin": np.nan}, {"window": 1}, {"degree": 0},
           {"outlier_window": 0}, {"outlier_window": 10**6}, {"learn_max_hz": -1.0},
           {"learn_max_hz": np.inf})  # fmt: skip
    for kw in bad:
        name = next(iter(kw))
        with pytest.raises(ValueError, match=name.split("_")[0]) as checked:
            SampleGuard.check_settings(**kw)
        with pytest.raises(ValueError) as built:
            SampleGuard(LIMITS, **kw)
        assert str(built.value) == str(checked.value), kw  # one rule, one message
