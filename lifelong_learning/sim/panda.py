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

import glob
import os
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, field

import mujoco
import numpy as np

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
    """Path of example-robot-data's Panda URDF (installed by the ``example-robot-data`` wheel
    under ``<prefix>/cmeel.prefix/share/example-robot-data``)."""
    rel = os.path.join(
        "cmeel.prefix", "share", "example-robot-data", "robots", "panda_description", "urdf", "panda.urdf"
    )
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    try:
        import pinocchio

        # pinocchio lives in <site-packages>/cmeel.prefix/lib/pythonX/site-packages/pinocchio
        roots.add(pinocchio.__file__.split(os.sep + "cmeel.prefix" + os.sep)[0])
    except ImportError:  # pragma: no cover
        pass
    for root in roots:
        path = os.path.join(root, rel)
        if os.path.isfile(path):
            return path
    found = [
        p
        for r in roots
        for p in glob.glob(os.path.join(r, "**", "panda_description", "urdf", "panda.urdf"), recursive=True)
    ]
    if found:
        return found[0]
    raise FileNotFoundError("example-robot-data's panda.urdf not found; pip install example-robot-data")


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


@dataclass
class SinusoidTrajectory:
    """Per-joint sums of sinusoids inside the joint limits (seeded).

    ``q_j(t) = c_j + Σ_k a_jk sin(2π f_jk t + φ_jk)`` with frequencies in ``[f_min, f_max]`` Hz,
    amplitudes scaled so ``Σ|a_jk| ≤ fraction × half range`` around the range's mid-point.
    """

    lower: np.ndarray
    upper: np.ndarray
    seed: int = 0
    n_sines: int = 3
    f_min: float = 0.05
    f_max: float = 0.4
    fraction: float = 0.6
    amplitudes: np.ndarray = field(init=False)
    frequencies: np.ndarray = field(init=False)
    phases: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        n = len(self.lower)
        self.centre = (np.asarray(self.lower) + np.asarray(self.upper)) / 2
        half = (np.asarray(self.upper) - np.asarray(self.lower)) / 2
        a = rng.uniform(0.3, 1.0, (n, self.n_sines))
        self.amplitudes = a / a.sum(axis=1, keepdims=True) * (self.fraction * half)[:, None]
        self.frequencies = rng.uniform(self.f_min, self.f_max, (n, self.n_sines))
        self.phases = rng.uniform(0, 2 * np.pi, (n, self.n_sines))

    def __call__(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Desired ``(q, q̇, q̈)`` at time ``t``."""
        w = 2 * np.pi * self.frequencies
        arg = w * t + self.phases
        q = self.centre + (self.amplitudes * np.sin(arg)).sum(axis=1)
        qd = (self.amplitudes * w * np.cos(arg)).sum(axis=1)
        qdd = -(self.amplitudes * w**2 * np.sin(arg)).sum(axis=1)
        return q, qd, qdd


class PandaSimulation:
    """MuJoCo Panda under computed-torque control; see the module docstring.

    Args:
        timestep: physics step (s); the controller runs every step.
        kp, kd: PD gains of the computed-torque law (1/s², 1/s).
    """

    joint_names = JOINT_NAMES

    def __init__(self, timestep: float = 0.002, kp: float = 400.0, kd: float = 40.0):
        self.model = load_panda_model(timestep)
        self.data = mujoco.MjData(self.model)
        self.kp, self.kd = kp, kd
        self.n = self.model.nv
        self.lower = self.model.jnt_range[:, 0].copy()
        self.upper = self.model.jnt_range[:, 1].copy()
        self._payload_id = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "payload")
        self._M = np.zeros((self.n, self.n))
        self._damping = self.model.dof_damping.copy()
        self._friction = self.model.dof_frictionloss.copy()

    def set_payload(self, mass: float, radius: float = 0.05) -> None:
        """Give the payload body (a solid sphere 5 cm past the flange) a mass in kg."""
        m = max(float(mass), 1e-6)
        self.model.body_mass[self._payload_id] = m
        self.model.body_inertia[self._payload_id] = 0.4 * m * radius**2

    def run(
        self,
        duration: float,
        seed: int = 0,
        log_every: int = 1,
        payload_mass: float = 0.0,
        payload_at: float | None = None,
        trajectory: SinusoidTrajectory | None = None,
    ) -> dict[str, np.ndarray]:
        """Track a random trajectory for ``duration`` seconds from its start state.

        Args:
            duration: simulated seconds.
            seed: trajectory seed (ignored when ``trajectory`` is given).
            log_every: log one step in this many (``timestep × log_every`` between samples).
            payload_mass: payload (kg) attached at ``payload_at`` seconds (None: never).
            payload_at: time of attachment.

        Returns:
            ``{"t", "q", "qd", "qdd", "tau"}`` arrays (``tau``: applied joint torques); ``qdd``
            is MuJoCo's true acceleration; ``payload`` (0/1 per sample).
        """
        traj = trajectory or SinusoidTrajectory(self.lower, self.upper, seed=seed)
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        self.set_payload(0.0)
        q0, qd0, _ = traj(0.0)
        d.qpos[:] = q0
        d.qvel[:] = qd0
        n_steps = round(duration / m.opt.timestep)
        n_log = (n_steps + log_every - 1) // log_every
        log = {k: np.zeros((n_log, self.n)) for k in ("q", "qd", "qdd", "tau")}
        log["t"] = np.zeros(n_log)
        log["payload"] = np.zeros(n_log)
        attached = False
        i_log = 0
        for step in range(n_steps):
            t = step * m.opt.timestep
            if payload_at is not None and not attached and t >= payload_at:
                self.set_payload(payload_mass)
                attached = True
            mujoco.mj_step1(m, d)
            qr, qdr, qddr = traj(t)
            mujoco.mj_fullM(m, d, self._M)
            a = qddr + self.kd * (qdr - d.qvel) + self.kp * (qr - d.qpos)
            tau = self._M @ a + d.qfrc_bias + self._damping * qdr + self._friction * np.tanh(qdr / 0.02)
            tau = np.clip(tau, -EFFORT_LIMIT, EFFORT_LIMIT)
            d.qfrc_applied[:] = tau
            if step % log_every == 0:
                log["t"][i_log] = t
                log["q"][i_log] = d.qpos
                log["qd"][i_log] = d.qvel
                log["tau"][i_log] = tau
                log["payload"][i_log] = float(attached)
            mujoco.mj_step2(m, d)
            if step % log_every == 0:
                log["qdd"][i_log] = d.qacc
                i_log += 1
        return log


def joint_states(
    log: dict[str, np.ndarray], rate_hz: float | None = None, names: list[str] | None = None
) -> Iterator[dict]:
    """JointState-like dicts (``stamp`` s, ``name``, ``position``, ``velocity``, ``effort``) from a
    :meth:`PandaSimulation.run` log, resampled to ``rate_hz`` (nearest earlier sample; None:
    every sample). The demo publishes them as ``sensor_msgs/JointState``."""
    t = log["t"]
    names = list(names or JOINT_NAMES)
    if rate_hz is None:
        idx = np.arange(t.size)
    else:
        stamps = np.arange(t[0], t[-1] + 1e-12, 1.0 / rate_hz)
        idx = np.unique(np.searchsorted(t, stamps + 1e-9, side="right") - 1)
    for i in idx:
        yield {
            "stamp": float(t[i]),
            "name": names,
            "position": log["q"][i].tolist(),
            "velocity": log["qd"][i].tolist(),
            "effort": log["tau"][i].tolist(),
        }
