"""Simulated Panda: model loading, tracking, payload, joint-state stream."""

import numpy as np
import pytest

from lifelong_learning.sim.arm import Push
from lifelong_learning.sim.panda import (
    JOINT_NAMES,
    MJCF_TO_URDF_JOINTS,
    PandaSimulation,
    SinusoidTrajectory,
    joint_states,
    panda_urdf_text,
)


@pytest.fixture(scope="module")
def sim():
    return PandaSimulation()


def test_model_has_no_gravity_compensation_and_no_meshes(sim):
    import mujoco

    assert np.all(sim.model.body_gravcomp == 0)
    assert sim.model.nmesh == 0 and sim.model.nv == 7
    names = [mujoco.mj_id2name(sim.model, mujoco.mjtObj.mjOBJ_JOINT, i) for i in range(sim.model.njnt)]
    assert names == JOINT_NAMES
    assert set(MJCF_TO_URDF_JOINTS.values()) <= set(n for n in JOINT_NAMES)
    assert "panda_joint7" in panda_urdf_text()


def test_trajectory_stays_in_limits_and_is_seeded(sim):
    a = SinusoidTrajectory(sim.lower, sim.upper, seed=4)
    b = SinusoidTrajectory(sim.lower, sim.upper, seed=4)
    qs = np.array([a(t)[0] for t in np.linspace(0, 60, 500)])
    assert np.all(qs > sim.lower) and np.all(qs < sim.upper)
    np.testing.assert_array_equal(a(1.3)[0], b(1.3)[0])


def test_tracking_logs_and_payload(sim):
    log = sim.run(4.0, seed=3, log_every=2, payload_mass=1.0, payload_at=2.0)
    n = 1000
    assert log["q"].shape == (n, 7) and log["t"].shape == (n,)
    traj = SinusoidTrajectory(sim.lower, sim.upper, seed=3)
    ref = np.array([traj(t)[0] for t in log["t"]])
    assert np.abs(log["q"] - ref).max() < 0.05  # computed-torque tracking
    assert log["payload"][0] == 0 and log["payload"][-1] == 1
    # same run without the payload: the applied torques differ once it is attached
    free = sim.run(4.0, seed=3, log_every=2)
    after = log["payload"] == 1
    assert np.abs(log["tau"][after] - free["tau"][after]).max() > 0.5
    np.testing.assert_allclose(log["tau"][~after], free["tau"][~after])


def test_a_push_applies_its_joint_torques_only_while_it_acts(sim):
    """Issue 28 item 6 (the demo's pushes): ``external`` is Jᵀ F of the force at the link's centre of
    mass (checked against MuJoCo's translational Jacobian there), zero outside the push, and the plant
    moves as without it until the push starts."""
    import mujoco

    push = Push(1.0, 1.5, "panda_link5", (0.0, 20.0, -10.0))
    log = sim.run(2.0, seed=3, log_every=5, pushes=[push])
    free = sim.run(2.0, seed=3, log_every=5)
    inside = (log["t"] >= push.start) & (log["t"] < push.end)
    assert inside.sum() == 50 and np.all(log["external"][~inside] == 0)
    assert np.abs(log["external"][inside]).max(axis=1).min() > 1.0  # a few N m on some joint
    i = int(np.flatnonzero(inside)[10])
    d = mujoco.MjData(sim.model)
    d.qpos[:] = log["q"][i]
    mujoco.mj_kinematics(sim.model, d)
    mujoco.mj_comPos(sim.model, d)
    body = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_BODY, "panda_link5")
    jacp = np.zeros((3, sim.model.nv))
    mujoco.mj_jac(sim.model, d, jacp, None, d.xipos[body], body)
    np.testing.assert_allclose(log["external"][i], jacp.T @ np.array(push.force), atol=1e-9)
    before = log["t"] <= push.start
    np.testing.assert_allclose(log["q"][before], free["q"][before])
    assert np.abs(log["tau"][inside] - free["tau"][inside]).max() > 1.0  # the controller resists it
    with pytest.raises(ValueError, match="no body"):
        sim.run(0.1, pushes=[Push(0.0, 0.05, "panda_link99", (1.0, 0.0, 0.0))])


def test_joint_states_at_a_rate(sim):
    log = sim.run(1.0, seed=0)
    msgs = list(joint_states(log, rate_hz=100.0))
    assert 99 <= len(msgs) <= 101
    assert msgs[0]["name"] == JOINT_NAMES and len(msgs[0]["effort"]) == 7
    stamps = [m["stamp"] for m in msgs]
    assert np.allclose(np.diff(stamps), 0.01, atol=2.5e-3)
