"""Rigid-body base regressor: τ = Y_b π_b equals Pinocchio RNEA, joint selection and order."""

import numpy as np
import pytest

from lifelong_learning.dynamics.regressor import RigidBodyRegressor, kinematic_difference
from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_text


@pytest.fixture(scope="module")
def urdf():
    return panda_urdf_text()


def _states(reg, n, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.uniform(reg.lower_limit, reg.upper_limit, (n, reg.n_dof)),
        rng.standard_normal((n, reg.n_dof)),
        rng.standard_normal((n, reg.n_dof)),
    )


def test_base_regressor_reproduces_rnea(urdf):
    reg = RigidBodyRegressor(urdf, JOINT_NAMES)
    assert reg.locked_joints == ["panda_finger_joint1", "panda_finger_joint2"]
    assert reg.n_base < reg.full_parameters.size
    q, qd, qdd = _states(reg, 10)
    tau = np.einsum("nib,b->ni", reg.regressor(q, qd, qdd), reg.base_parameters())
    np.testing.assert_allclose(tau, reg.rnea(q, qd, qdd), rtol=1e-9, atol=1e-9)
    # full regressor too, and the base map holds for other parameter vectors
    other = reg.full_parameters * np.random.default_rng(3).uniform(0.5, 1.5, reg.full_parameters.size)
    Yf = reg.full_regressor(q, qd, qdd)
    np.testing.assert_allclose(
        Yf @ other, reg.regressor(q, qd, qdd) @ reg.base_parameters(other), rtol=1e-8, atol=1e-8
    )


def test_joint_order_follows_joint_names(urdf):
    ordered = RigidBodyRegressor(urdf, JOINT_NAMES)
    perm = [3, 0, 6, 1, 5, 2, 4]
    shuffled = RigidBodyRegressor(urdf, [JOINT_NAMES[i] for i in perm])
    q, qd, qdd = _states(ordered, 4)
    np.testing.assert_allclose(
        shuffled.rnea(q[:, perm], qd[:, perm], qdd[:, perm]), ordered.rnea(q, qd, qdd)[:, perm], atol=1e-10
    )
    assert list(shuffled.velocity_limit) == list(ordered.velocity_limit[perm])


def test_subset_locks_other_joints_at_zero(urdf):
    reg = RigidBodyRegressor(urdf, ["panda_joint2", "panda_joint4"])
    full = RigidBodyRegressor(urdf, [*JOINT_NAMES, "panda_finger_joint1", "panda_finger_joint2"])
    q = np.zeros((1, 9))
    q[0, 1], q[0, 3] = 0.4, -1.2
    np.testing.assert_allclose(
        reg.rnea([[0.4, -1.2]], [[0, 0]], [[0, 0]])[0], full.rnea(q, 0 * q, 0 * q)[0, [1, 3]]
    )


def test_bad_urdf_and_names_rejected(urdf):
    with pytest.raises(ValueError):
        RigidBodyRegressor("not xml")
    with pytest.raises(ValueError):
        RigidBodyRegressor(urdf, ["panda_joint1", "no_such_joint"])
    with pytest.raises(ValueError):
        RigidBodyRegressor(urdf, ["panda_joint1", "panda_joint1"])


def test_kinematic_difference_ignores_inertias_and_formatting_not_geometry(urdf):
    assert kinematic_difference(urdf, urdf) == ""
    assert kinematic_difference(urdf, urdf.replace("<robot", "<!-- reformatted -->\n<robot", 1)) == ""
    heavier = urdf.replace('<mass value="4.970684"/>', '<mass value="6.0"/>', 1)
    assert heavier != urdf and kinematic_difference(urdf, heavier) == ""
    moved = urdf.replace('xyz="0 0 0.333"', 'xyz="0 0 0.4"', 1)
    assert "panda_joint1" in kinematic_difference(urdf, moved)
    turned = urdf.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 1 0"/>', 1)
    assert "panda_joint1" in kinematic_difference(urdf, turned)
    renamed = urdf.replace('"panda_joint1"', '"arm_joint1"')
    assert "joints" in kinematic_difference(urdf, renamed)
    with pytest.raises(ValueError):
        kinematic_difference(urdf, "<robot name='broken'><link></robot>")
