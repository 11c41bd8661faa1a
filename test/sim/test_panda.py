"""Simulated Panda: model loading, tracking, payload, joint-state stream."""

import numpy as np
import pytest

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


def test_joint_states_at_a_rate(sim):
    log = sim.run(1.0, seed=0)
    msgs = list(joint_states(log, rate_hz=100.0))
    assert 99 <= len(msgs) <= 101
    assert msgs[0]["name"] == JOINT_NAMES and len(msgs[0]["effort"]) == 7
    stamps = [m["stamp"] for m in msgs]
    assert np.allclose(np.diff(stamps), 0.01, atol=2.5e-3)
