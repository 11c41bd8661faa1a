"""The generalized-momentum observer on the Panda URDF through Pinocchio (no ROS): the arm
simulated by Pinocchio's forward dynamics (ABA) of the same model, so that the observer's only
errors are its own (sampling)."""

import numpy as np
import pinocchio as pin
import pytest

from lifelong_learning.dynamics.momentum_observer import MomentumObserver
from lifelong_learning.dynamics.regressor import RigidBodyRegressor
from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_text

DT = 0.001


@pytest.fixture(scope="module")
def regressor():
    return RigidBodyRegressor(panda_urdf_text(), JOINT_NAMES)


def simulate(regressor, seconds, external=None, start=0.0):
    """The arm tracking a sinusoid under computed-torque control (the drives' τ_m), with
    ``external`` (N m per joint) applied from ``start`` s; yields ``(t, q, q̇, τ_m)``."""
    model, data = regressor.model, regressor.model.createData()
    q0 = np.array([0.0, -0.4, 0.0, -2.0, 0.0, 1.6, 0.8])
    q, qd = q0.copy(), np.zeros(7)
    for k in range(round(seconds / DT)):
        t = k * DT
        w, phase = 2 * np.pi * 0.5, np.arange(7)
        target = q0 + 0.3 * np.sin(w * t + phase)
        target_qd = 0.3 * w * np.cos(w * t + phase)
        tau = pin.rnea(model, data, q, qd, 100.0 * (target - q) + 20.0 * (target_qd - qd))
        yield t, q.copy(), qd.copy(), tau
        applied = tau + (external if external is not None and t >= start else 0.0)
        qdd = pin.aba(model, data, q, qd, applied)
        qd = qd + qdd * DT
        q = q + qd * DT


def test_without_external_torque_the_residual_stays_near_zero(regressor):
    observer = MomentumObserver(regressor, gain=50.0)
    out = np.array([observer.update(t, q, qd, tau) for t, q, qd, tau in simulate(regressor, 2.0)])
    assert np.abs(out).max() < 0.05  # N m, against torques of tens of N m


def test_a_constant_external_torque_is_followed_with_the_gains_time_constant(regressor):
    gain, start, step = 50.0, 0.5, np.array([0.0, 5.0, 0.0, 0.0, 0.0, -1.0, 0.0])
    observer = MomentumObserver(regressor, gain=gain)
    rows = [(t, observer.update(t, q, qd, tau)) for t, q, qd, tau in simulate(regressor, 1.0, step, start)]
    t = np.array([r[0] for r in rows])
    r = -np.array([r[1] for r in rows])  # update returns −r (measured − predicted): r → τ_env

    def at(seconds):
        return r[int(np.searchsorted(t, start + seconds))]

    assert np.abs(r[t < start]).max() < 0.05
    # first order: 1 − e^{−1} of the step after one time constant, all of it after five
    np.testing.assert_allclose(at(1 / gain), (1 - np.exp(-1)) * step, atol=0.1)
    np.testing.assert_allclose(at(5 / gain), step, atol=0.1)
    np.testing.assert_allclose(r[-1], step, atol=0.05)


def test_a_learned_correction_is_taken_out_of_the_drives_torque(regressor):
    friction = np.full(7, 0.8)  # what a learned model would add to the URDF's torques
    plain, learned = MomentumObserver(regressor), MomentumObserver(regressor)
    for t, q, qd, tau in simulate(regressor, 1.0):
        # the drives also overcome a friction the URDF does not know
        a = plain.update(t, q, qd, tau + friction)
        b = learned.update(t, q, qd, tau + friction, correction=friction)
    np.testing.assert_allclose(a, friction, atol=0.05)  # the URDF's observer sees it as contact
    assert np.abs(b).max() < 0.05


def test_stamp_gaps_restart_and_bad_settings_are_refused(regressor):
    observer = MomentumObserver(regressor, gain=50.0, max_gap_s=0.1)
    states = list(simulate(regressor, 0.01))
    t, q, qd, tau = states[0]
    observer.update(t, q, qd, tau + 3.0)
    observer.update(t + 0.001, q, qd, tau + 3.0)
    observer.update(t + 5.0, q, qd, tau + 3.0)  # a gap: r starts again from zero
    assert observer.restarts == 1 and np.all(observer.r == 0)
    with pytest.raises(ValueError, match="gain"):
        MomentumObserver(regressor, gain=0.0)
    with pytest.raises(ValueError, match="too large"):
        fast = MomentumObserver(regressor, gain=500.0)
        fast.update(0.0, q, qd, tau)
        fast.update(0.01, q, qd, tau)  # 500/s × 10 ms > 1


def test_mass_coriolis_gravity_agree_with_rnea(regressor):
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.uniform(-1, 1, (3, 7))
    M, C, g = regressor.mass_coriolis_gravity(q, qd)
    np.testing.assert_allclose(M, M.T)
    np.testing.assert_allclose(M @ qdd + C @ qd + g, regressor.rnea(q, qd, qdd)[0], atol=1e-9)
