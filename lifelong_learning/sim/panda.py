"""A simulated Franka Panda arm (MuJoCo) as the "real robot" of the dynamics learners.

The plant is the MJCF shipped in ``dm-robotics-panda`` (``dm_robotics/panda/assets/panda/
panda.xml``): identified link inertials, per-joint viscous damping and Coulomb friction
(``frictionloss``). Loaded through ``mujoco.MjSpec``: ``gravcomp`` set to 0 on every body (the
file compensates gravity for free otherwise), mesh geoms, meshes and textures dropped
(compiles in milliseconds), and a ``payload`` body added at the flange (link 8) whose mass is
set at run time by :meth:`PandaSimulation.set_payload` (1e-6 kg until then).

The arm tracks random smooth joint trajectories (:class:`SinusoidTrajectory`: per joint a
sum of sinusoids, seeded, scaled to stay inside the joint limits) under a computed-torque
controller that uses MuJoCo's own rigid-body terms: ``τ = M(q)(q̈_d + K_d ė + K_p e) + c(q, q̇)``,
plus a feed-forward of the MJCF's damping and Coulomb friction at the *desired* velocity
(``b q̇_d + f_c tanh(q̇_d / 0.02)``; without it the 1.2 Nm friction of joint 7 alone leaves
0.3 rad tracking errors), clipped to the effort limits. The applied torque, not the model,
is what the learners see. Each logged sample is the state **before** a step, the torque applied during it and
the resulting acceleration (``mj_step1`` → controller → ``mj_step2``, so ``qacc`` is the
forward dynamics at the logged state).

The learner's rigid-body model is example-robot-data's Panda URDF (:func:`panda_urdf_path`):
other inertials, a hand, no friction: the mismatch the semiparametric model must learn.
Joint names are the same in both models (``panda_joint1`` … ``panda_joint7``); the URDF's
finger joints are extra and locked by the learner.
"""

from __future__ import annotations

import os

import mujoco
import numpy as np

from lifelong_learning.sim.arm import ArmSimulation, SinusoidTrajectory, example_robot_data_path, joint_states

__all__ = [
    "EFFORT_LIMIT",
    "JOINT_NAMES",
    "MJCF_TO_URDF_JOINTS",
    "PandaSimulation",
    "SinusoidTrajectory",
    "joint_states",
    "load_panda_model",
    "panda_mjcf_path",
    "panda_urdf_path",
    "panda_urdf_text",
]

JOINT_NAMES = [f"panda_joint{i}" for i in range(1, 8)]
#: joint-name map from the MJCF (simulator) to example-robot-data's URDF (learner)
MJCF_TO_URDF_JOINTS = {name: name for name in JOINT_NAMES}
EFFORT_LIMIT = np.array([87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0])


def panda_mjcf_path() -> str:
    """Path of the Panda MJCF shipped in dm-robotics-panda."""
    import dm_robotics.panda as dm_panda

    path = os.path.join(os.path.dirname(dm_panda.__file__), "assets", "panda", "panda.xml")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"dm-robotics-panda has no {path}")
    return path


def panda_urdf_path() -> str:
    """Path of example-robot-data's Panda URDF."""
    return example_robot_data_path("panda_description", "urdf", "panda.urdf")


def panda_urdf_text() -> str:
    """The URDF text of :func:`panda_urdf_path`."""
    with open(panda_urdf_path(), encoding="utf-8") as f:
        return f.read()


def load_panda_model(timestep: float = 0.002) -> mujoco.MjModel:
    """Compile the Panda MJCF without meshes, without gravity compensation, with a payload body."""
    spec = mujoco.MjSpec.from_file(panda_mjcf_path())
    for geom in list(spec.geoms):
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH:
            spec.delete(geom)
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    for mat in list(spec.materials):
        spec.delete(mat)
    for tex in list(spec.textures):
        spec.delete(tex)
    for body in spec.bodies:
        body.gravcomp = 0.0
    flange = spec.body("panda_link8")
    payload = flange.add_body(name="payload", pos=[0.0, 0.0, 0.05])
    payload.mass = 1e-6
    payload.inertia = [1e-9, 1e-9, 1e-9]
    payload.explicitinertial = True
    spec.option.timestep = timestep
    return spec.compile()


class PandaSimulation(ArmSimulation):
    """The MuJoCo Panda (:func:`load_panda_model`) under computed-torque control; see
    :class:`~lifelong_learning.sim.arm.ArmSimulation`.

    Args:
        timestep: physics step (s); the controller runs every step.
        kp, kd: PD gains of the computed-torque law (1/s², 1/s).
    """

    joint_names = JOINT_NAMES  # also on the class: the plant's joints are known before one is built

    def __init__(self, timestep: float = 0.002, kp: float = 400.0, kd: float = 40.0):
        super().__init__(load_panda_model(timestep), JOINT_NAMES, EFFORT_LIMIT, kp=kp, kd=kd)
