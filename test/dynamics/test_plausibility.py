"""Plausibility gate from URDF limits and the robust residual outlier tests."""

import numpy as np
import pytest

from lifelong_learning.dynamics.plausibility import (
    EFFORT,
    MAD_TO_SIGMA,
    POSITION,
    VELOCITY,
    JointLimits,
    PlausibilityGate,
    ResidualOutlierTest,
    robust_outliers,
)
from lifelong_learning.sim.arm import UR5_JOINT_NAMES, ur5_urdf_text
from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_text


@pytest.fixture(scope="module")
def panda_limits():
    return JointLimits.from_urdf(panda_urdf_text(), JOINT_NAMES)


def test_limits_are_the_urdf_values(panda_limits):
    assert panda_limits.names == tuple(JOINT_NAMES)
    np.testing.assert_allclose(panda_limits.effort, [87, 87, 87, 87, 12, 12, 12])
    np.testing.assert_allclose(panda_limits.velocity, [2.175] * 4 + [2.61] * 3)
    assert panda_limits.lower[3] == pytest.approx(-3.0718) and panda_limits.upper[3] == pytest.approx(-0.0698)
    ur5 = JointLimits.from_urdf(ur5_urdf_text(), UR5_JOINT_NAMES)
    assert np.all(np.isfinite(ur5.effort)) and ur5.effort[0] == pytest.approx(150.0)


def test_unknown_joint_is_refused():
    with pytest.raises(ValueError, match="not in the URDF"):
        JointLimits.from_urdf(panda_urdf_text(), ["panda_joint1", "elbow"])


def test_gate_refuses_each_limit_with_the_margin(panda_limits):
    gate = PlausibilityGate(panda_limits, margin=0.5)
    q = (panda_limits.lower + panda_limits.upper) / 2
    qd = 0.5 * panda_limits.velocity
    tau = 0.5 * panda_limits.effort
    assert gate.reason(q, qd, tau) is None
    assert gate.reason(q, qd, None) is None
    spike = tau.copy()
    spike[1] = 1e6
    assert gate.reason(q, qd, spike) == EFFORT
    within_margin = tau.copy()
    within_margin[4] = -1.4 * panda_limits.effort[4]
    assert gate.reason(q, qd, within_margin) is None
    fast = qd.copy()
    fast[6] = 1.6 * panda_limits.velocity[6]
    assert gate.reason(q, fast, tau) == VELOCITY
    far = q.copy()
    span = panda_limits.upper[3] - panda_limits.lower[3]
    far[3] = panda_limits.upper[3] + 0.6 * span
    assert gate.reason(far, qd, tau) == POSITION
    nan = qd.copy()
    nan[0] = np.nan
    assert gate.reason(q, nan, tau) == VELOCITY


def test_gate_mask_counts_each_row_once(panda_limits):
    gate = PlausibilityGate(panda_limits)
    n = 10
    q = np.tile((panda_limits.lower + panda_limits.upper) / 2, (n, 1))
    qd = np.zeros((n, 7))
    tau = np.zeros((n, 7))
    tau[2, 0] = 1e6
    qd[5, 1] = 1e300
    tau[5, 1] = 1e6  # velocity and effort: counted once, as velocity
    ok, counts = gate.mask(q, qd, tau)
    assert ok.tolist() == [k not in (2, 5) for k in range(n)]
    assert counts == {VELOCITY: 1, EFFORT: 1}


def test_gate_ignores_limits_the_urdf_does_not_give():
    limits = JointLimits(
        names=("a",),
        lower=np.array([-np.inf]),
        upper=np.array([np.inf]),
        velocity=np.array([np.inf]),
        effort=np.array([2.0]),
    )
    gate = PlausibilityGate(limits)
    assert gate.reason([1e9], [1e9], [3.9]) is None
    assert gate.reason([0.0], [0.0], [4.1]) == EFFORT
    with pytest.raises(ValueError, match="margin"):
        PlausibilityGate(limits, margin=-0.1)


def test_robust_outliers_finds_spikes_not_noise():
    rng = np.random.default_rng(0)
    E = rng.normal(0.0, 0.3, (2000, 3))
    assert not robust_outliers(E).any()  # 6 sigma: P = 2e-9 per value
    E[17, 1] = 5.0
    E[400, 2] = np.nan
    out = robust_outliers(E)
    assert np.flatnonzero(out).tolist() == [17, 400]
    # a floor larger than the noise hides spikes below k * floor
    assert not robust_outliers(E[:100] * 0 + 0.1, floor=1.0).any()


def test_streaming_test_warms_up_refuses_a_spike_and_follows_a_lasting_change():
    rng = np.random.default_rng(1)
    test = ResidualOutlierTest(2, k=6.0, window=100, min_samples=20)
    assert test.scale is None
    assert not test.check([100.0, 0.0])  # during warm-up nothing is an outlier
    test.reset()
    flags = [test.check(rng.normal(0, 1.0, 2)) for _ in range(200)]
    assert not any(flags)
    np.testing.assert_allclose(test.scale, [1.0, 1.0], rtol=0.35)
    assert test.check([0.0, 50.0])
    assert test.check([np.nan, 0.0])
    assert test.outliers == 2
    # a lasting offset (a payload): outliers until it fills half the window, then learned again
    flags = [test.check(rng.normal(0, 1.0, 2) + np.array([20.0, 0.0])) for _ in range(100)]
    first_accepted = flags.index(False)
    assert 40 <= first_accepted <= 55
    assert not any(flags[first_accepted + 15 :])  # the scale is refreshed every 10 errors


def test_streaming_scale_has_a_floor():
    test = ResidualOutlierTest(1, k=6.0, window=50, min_samples=10, floor=0.5)
    for _ in range(50):
        test.check([0.0])
    assert test.scale[0] == 0.5
    assert not test.check([2.9]) and test.check([3.1])
    assert MAD_TO_SIGMA == pytest.approx(1.4826, abs=1e-4)


def test_local_spikes_finds_glitches_in_a_smooth_log_not_its_motion():
    from lifelong_learning.dynamics.plausibility import local_spikes

    t = np.linspace(0.0, 10.0, 1001)
    X = np.column_stack([np.sin(t), 5.0 * np.cos(3 * t), 0.01 * t])
    assert not local_spikes(X).any()
    bad = X.copy()
    bad[100, 1] += 1.5  # a glitch within any limit (10 typical steps of this column)
    bad[[500, 501], 0] = bad[[500, 501], 0][::-1] + np.array([0.3, -0.3])  # two values swapped and off
    bad[700, 2] = bad[699, 2]  # a repeated (stuck) sample is not a spike
    found = np.flatnonzero(local_spikes(bad))
    assert 100 in found and {500, 501} & set(found) and 700 not in found
    # windows stop at segment boundaries: a jump between two bags is not a spike
    two = np.vstack([X[:500], X[:500] + 10.0])
    assert not local_spikes(two, starts=[0, 500]).any()


def test_velocity_mismatch_finds_a_small_velocity_glitch_that_is_no_spike():
    from lifelong_learning.dynamics.plausibility import local_spikes, velocity_mismatch

    t = np.arange(500) * 0.01
    q = np.column_stack([np.sin(t), 0.5 * np.sin(2 * t)])
    qd = np.column_stack([np.cos(t), np.cos(2 * t)])
    assert not velocity_mismatch(t, q, qd).any()
    bad = qd.copy()
    bad[250, 1] += 0.08  # small: within the local variation of the velocity
    assert not local_spikes(np.hstack([q, bad]))[250]
    assert np.flatnonzero(velocity_mismatch(t, q, bad)).tolist() == [250]
    # a floor hides mismatches below k * floor (a drive's own velocity filtering)
    assert not velocity_mismatch(t, q, bad, floor=0.02).any()


ONE_JOINT = JointLimits(("a",), *(np.array([v]) for v in (-1.0, 1.0, 2.0, 3.0)))


@pytest.mark.parametrize(
    ("check", "build"),
    [
        (lambda: PlausibilityGate.check_margin(np.nan), lambda: PlausibilityGate(ONE_JOINT, np.nan)),
        (lambda: ResidualOutlierTest.check_settings(np.inf, 10), lambda: ResidualOutlierTest(1, np.inf, 10)),
        (lambda: ResidualOutlierTest.check_settings(6.0, 0), lambda: ResidualOutlierTest(1, 6.0, 0)),
        (
            lambda: ResidualOutlierTest.check_settings(6.0, 10, 11),
            lambda: ResidualOutlierTest(1, 6.0, 10, 11),
        ),
        (
            lambda: ResidualOutlierTest.check_floor(np.array([-1.0])),
            lambda: ResidualOutlierTest(1, 6.0, 10, 5, -1.0),
        ),
    ],
)
def test_settings_are_checked_without_building_with_the_same_message(check, build):
    """Each part's rule has one home, a static check that its constructor uses too: a caller that
    checks settings before it can build (the guard, a node without its URDF) says the same."""
    with pytest.raises(ValueError) as checked:
        check()
    with pytest.raises(ValueError) as built:
        build()
    assert str(checked.value) == str(built.value)
