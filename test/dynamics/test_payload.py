"""Is a held load a payload? The last link's inertial change fitted to the residuals (no ROS): a mass at
the flange is explained on every joint and its mass found; a torque on one or two joints, a load
seen at one pose, too few samples or a negative mass are not."""

import numpy as np
import pinocchio as pin
import pytest

from lifelong_learning.dynamics.payload import MIN_SAMPLES, PayloadFit, last_link_map
from lifelong_learning.dynamics.regressor import RigidBodyRegressor
from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_text

NOISE = 0.05  # N m, per joint
FREE_RMS = np.full(7, NOISE)
SMALLEST = np.full(7, 0.3)


@pytest.fixture(scope="module")
def regressor():
    return RigidBodyRegressor(panda_urdf_text(), JOINT_NAMES)


def states(reg, n, seed=0, moving=True):
    rng = np.random.default_rng(seed)
    q = rng.uniform(reg.lower_limit, reg.upper_limit, (n, reg.n_dof))
    qd = rng.normal(0.0, 0.5, (n, reg.n_dof)) * moving
    qdd = rng.normal(0.0, 2.0, (n, reg.n_dof)) * moving
    if not moving:
        q[:] = q[0]
    return reg.regressor(q, qd, qdd)


def payload(mass, at=(0.0, 0.0, 0.15)):
    """The inertial parameters of a sphere of ``mass`` kg (5 cm radius) at ``at`` in the last link's frame."""
    return (
        pin.Inertia.FromSphere(mass, 0.05).se3Action(pin.SE3(np.eye(3), np.array(at))).toDynamicParameters()
    )


def noisy(d, seed=1):
    return d + np.random.default_rng(seed).normal(0.0, NOISE, d.shape)


def test_the_map_gives_the_last_links_columns_of_the_full_regressor(regressor):
    rng = np.random.default_rng(3)
    q, qd, qdd = (rng.normal(size=(5, 7)) for _ in range(3))
    full = regressor.full_regressor(q, qd, qdd)
    last = regressor.model.njoints - 1
    expected = full[:, :, 10 * (last - 1) : 10 * last]
    np.testing.assert_allclose(
        regressor.regressor(q, qd, qdd) @ last_link_map(regressor), expected, atol=1e-9
    )


@pytest.mark.parametrize("mass", [0.3, 1.0, 3.0, -0.2])
def test_a_mass_at_the_flange_is_a_payload_and_its_mass_is_found(regressor, mass):
    fit = PayloadFit(regressor)
    Yb = states(regressor, 1000)
    d = noisy(Yb @ last_link_map(regressor) @ payload(abs(mass)) * np.sign(mass))  # (a release: negative)
    fit.add(Yb, d)
    verdict = fit.verdict(FREE_RMS, SMALLEST, 0.9)
    assert verdict.explained and verdict.decided, verdict.describe(JOINT_NAMES)
    assert verdict.mass == pytest.approx(mass, abs=0.02)
    assert verdict.fraction > 0.99 and np.all(verdict.unexplained < 1.5 * NOISE)
    assert "a payload explains it" in verdict.describe(JOINT_NAMES)


@pytest.mark.parametrize("bias", [{1: 1.0}, {1: 4.0}, {1: 3.0, 3: -2.0}, {5: 1.0}])
def test_a_torque_on_some_joints_is_no_payload(regressor, bias):
    fit = PayloadFit(regressor)
    Yb = states(regressor, 1000)
    d = np.zeros((1000, 7))
    for j, value in bias.items():
        d[:, j] = value
    fit.add(Yb, noisy(d))
    verdict = fit.verdict(FREE_RMS, SMALLEST, 0.9)
    assert verdict.decided and not verdict.explained, verdict.describe(JOINT_NAMES)
    text = verdict.describe(JOINT_NAMES)
    assert text.startswith("not a payload") and "keeps" in text


def test_the_samples_of_one_pose_or_too_few_decide_nothing(regressor):
    fit = PayloadFit(regressor)
    Yb = states(regressor, 500, moving=False)
    d = np.zeros((500, 7))
    d[:, 1] = 2.0
    fit.add(Yb, d)
    verdict = fit.verdict(FREE_RMS, SMALLEST, 0.9)
    assert not verdict.decided and not verdict.explained and "did not move" in verdict.why_not
    fit.reset()
    Yb = states(regressor, MIN_SAMPLES - 1)
    fit.add(Yb, Yb @ last_link_map(regressor) @ payload(1.0))
    verdict = fit.verdict(FREE_RMS, SMALLEST, 0.9)
    assert not verdict.decided and "needed" in verdict.describe(JOINT_NAMES)


def test_a_last_link_lighter_than_nothing_is_no_payload(regressor):
    fit = PayloadFit(regressor)
    Yb = states(regressor, 1000)
    fit.add(Yb, Yb @ last_link_map(regressor) @ payload(fit.link_mass + 1.0) * -1)
    verdict = fit.verdict(FREE_RMS, SMALLEST, 0.9)
    assert not verdict.explained and "would weigh" in verdict.why_not


def test_non_finite_rows_are_left_out(regressor):
    fit = PayloadFit(regressor)
    Yb = states(regressor, 300)
    d = Yb @ last_link_map(regressor) @ payload(1.0)
    d[5, 2] = np.nan
    fit.add(Yb, d)
    assert fit.samples == 299 and fit.verdict(FREE_RMS, SMALLEST, 0.9).explained
