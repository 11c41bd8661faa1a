"""The generic MuJoCo arm and the UR5 plant: built from the URDF with the errors a real arm has,
tracks its trajectories inside the effort limits, and the URDF alone mispredicts it in the way the
semiparametric learner (with friction) corrects."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.dynamics import (
    RigidBodyRegressor,
    SemiparametricInverseDynamics,
    estimate_accelerations,
)
from lifelong_learning.sim.arm import (
    UR5_JOINT_NAMES,
    ArmSimulation,
    Ur5Simulation,
    joint_states,
    ur5_plant,
    ur5_urdf_text,
    urdf_effort_limits,
)


@pytest.fixture(scope="module")
def sim():
    return Ur5Simulation()


def test_plant_is_the_urdf_with_seeded_inertial_errors_rotor_inertia_and_friction():
    import mujoco

    a, b, other = ur5_plant(0), ur5_plant(0), ur5_plant(1)
    names = [mujoco.mj_id2name(a, mujoco.mjtObj.mjOBJ_JOINT, i) for i in range(a.njnt)]
    assert names == UR5_JOINT_NAMES and a.nmesh == 0 and a.ngeom == 0
    np.testing.assert_array_equal(a.body_mass, b.body_mass)  # seeded
    assert not np.allclose(a.body_mass, other.body_mass)
    links = {link.get("name"): link for link in ET.fromstring(ur5_urdf_text()).findall("link")}
    bodies = [mujoco.mj_id2name(a, mujoco.mjtObj.mjOBJ_BODY, i) for i in range(a.nbody)]
    for body, name in enumerate(bodies):
        inertial = links[name].find("inertial/mass") if name in links else None
        if inertial is not None:
            nominal = float(inertial.get("value"))
            assert 0.85 * nominal <= a.body_mass[body] <= 1.15 * nominal
    payload = bodies.index("payload")  # a body of its own (not fused into the last link)
    assert a.body_parentid[payload] == bodies.index("wrist_3_link") and a.body_mass[payload] < 1e-5
    assert np.all(a.dof_armature > 0) and np.all(a.dof_damping > 0) and np.all(a.dof_frictionloss > 0)


def test_effort_limits_are_the_ones_the_learner_reads():
    limits = urdf_effort_limits(ur5_urdf_text(), UR5_JOINT_NAMES)
    np.testing.assert_array_equal(limits, [150, 150, 150, 28, 28, 28])
    np.testing.assert_array_equal(limits, RigidBodyRegressor(ur5_urdf_text(), UR5_JOINT_NAMES).effort_limit)
    with pytest.raises(ValueError, match="no 1-DoF joint 'ee_fixed_joint'"):
        urdf_effort_limits(ur5_urdf_text(), ["ee_fixed_joint"])


def test_tracks_inside_the_effort_limits(sim):
    log = sim.run(6.0, seed=2, log_every=5, payload_mass=1.0, payload_at=3.0)
    traj = sim.trajectory(2)
    ref = np.array([traj(t)[0] for t in log["t"]])
    assert np.abs(log["q"] - ref).max() < 0.01
    assert np.all(np.abs(log["tau"]) <= sim.effort_limit)
    assert np.abs(log["qd"]).max() < 3.15  # the UR5's velocity limit
    assert next(joint_states(log, names=UR5_JOINT_NAMES))["name"] == UR5_JOINT_NAMES


def test_the_online_learner_beats_the_urdf_on_a_new_trajectory(sim):
    urdf = ur5_urdf_text()
    log = sim.run(20.0, seed=0, log_every=5, payload_mass=1.0, payload_at=10.0)
    new = sim.run(8.0, seed=100, log_every=5, payload_mass=1.0, payload_at=0.0)
    rnea = RigidBodyRegressor(urdf, UR5_JOINT_NAMES).rnea(new["q"], new["qd"], new["qdd"])
    model = SemiparametricInverseDynamics(urdf, UR5_JOINT_NAMES)
    qdd = estimate_accelerations(log["t"], log["qd"])
    for i in range(log["t"].size):
        model.update(log["q"][i], log["qd"][i], qdd[i], log["tau"][i])
    qdd_new = estimate_accelerations(new["t"], new["qd"])
    rnea_error = normalized_mse(new["tau"], rnea).mean()
    learned_error = normalized_mse(new["tau"], model.predict(new["q"], new["qd"], qdd_new)).mean()
    assert rnea_error > 0.3  # the URDF is wrong about this arm
    assert learned_error < 0.3 * rnea_error


def test_a_plant_and_its_joint_names_must_agree():
    with pytest.raises(ValueError, match="degrees of freedom"):
        ArmSimulation(ur5_plant(0), UR5_JOINT_NAMES[:5], np.ones(5))
