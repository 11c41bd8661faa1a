"""A MuJoCo arm under computed-torque control: the "real robot" of the dynamics learners.

:class:`ArmSimulation` runs any compiled MuJoCo arm (every degree of freedom a hinge, a body
named ``payload`` whose mass is set at run time) along random smooth joint trajectories
(:class:`SinusoidTrajectory`) under the computed-torque law

    τ = M(q)(q̈_d + K_d ė + K_p e) + c(q, q̇) + b q̇_d + f_c tanh(q̇_d / 0.02),

with MuJoCo's own rigid-body terms ``M`` (armature included) and ``c``, plus a feed-forward of
the plant's viscous damping ``b`` and Coulomb friction ``f_c`` (``frictionloss``) at the
*desired* velocity, clipped to the effort limits. The applied torque, not the model, is what
the learners see. Each logged sample is the state **before** a step, the torque applied during
it and the resulting acceleration (``mj_step1`` → controller → ``mj_step2``, so ``qacc`` is the
forward dynamics at the logged state).

Two plants ship: :mod:`lifelong_learning.sim.panda` (the Panda MJCF of dm-robotics-panda) and
:class:`Ur5Simulation` here, a UR5 built from example-robot-data's URDF (:func:`ur5_plant`)
with what a real arm has and its URDF lacks: link masses and centres of mass off by a seeded
10-15 %, rotor inertia (armature) behind the gearboxes, viscous and Coulomb joint friction,
and a payload body at the flange. The learner gets the unmodified URDF.
"""

from __future__ import annotations

import glob
import os
import sysconfig
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import mujoco
import numpy as np

__all__ = [
    "UR5_JOINT_NAMES",
    "ArmSimulation",
    "Push",
    "SinusoidTrajectory",
    "Ur5Simulation",
    "example_robot_data_path",
    "joint_states",
    "ur5_plant",
    "ur5_urdf_path",
    "ur5_urdf_text",
]

UR5_JOINT_NAMES = [
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
]


def example_robot_data_path(*parts: str) -> str:
    """Path of a file shipped by the ``example-robot-data`` wheel (under
    ``<prefix>/cmeel.prefix/share/example-robot-data/robots``), e.g.
    ``example_robot_data_path("panda_description", "urdf", "panda.urdf")``."""
    rel = os.path.join("cmeel.prefix", "share", "example-robot-data", "robots", *parts)
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    try:
        import pinocchio

        # pinocchio lives in <site-packages>/cmeel.prefix/lib/pythonX/site-packages/pinocchio
        roots.add(pinocchio.__file__.split(os.sep + "cmeel.prefix" + os.sep)[0])
    except ImportError:  # pragma: no cover
        pass
    for root in sorted(roots):
        path = os.path.join(root, rel)
        if os.path.isfile(path):
            return path
    found = [p for r in sorted(roots) for p in glob.glob(os.path.join(r, "**", *parts), recursive=True)]
    if found:
        return found[0]
    raise FileNotFoundError(
        f"example-robot-data's {os.path.join(*parts)} not found; pip install example-robot-data"
    )


def ur5_urdf_path() -> str:
    """example-robot-data's UR5 URDF (joint-limited: ±π on every joint)."""
    return example_robot_data_path("ur_description", "urdf", "ur5_joint_limited_robot.urdf")


def ur5_urdf_text() -> str:
    """The URDF text of :func:`ur5_urdf_path`."""
    with open(ur5_urdf_path(), encoding="utf-8") as f:
        return f.read()


def urdf_effort_limits(urdf_text: str, joint_names: list[str]) -> np.ndarray:
    """``<limit effort>`` of each named 1-DoF joint, as Pinocchio reads the URDF (the parser the
    learner's rigid-body model uses, so plant and learner agree on the limits)."""
    import pinocchio as pin

    model = pin.buildModelFromXML(urdf_text)
    limits = []
    for name in joint_names:
        if not model.existJointName(name) or model.joints[model.getJointId(name)].nv != 1:
            raise ValueError(f"the URDF has no 1-DoF joint {name!r}")
        limit = float(model.effortLimit[model.joints[model.getJointId(name)].idx_v])
        if not (np.isfinite(limit) and limit > 0):
            raise ValueError(f"the URDF gives no effort limit for joint {name!r}")
        limits.append(limit)
    return np.array(limits)


def ur5_plant(seed: int = 0, timestep: float = 0.002) -> mujoco.MjModel:
    """A UR5 plant: example-robot-data's URDF with the errors a real arm has (seeded).

    - link masses × U(0.85, 1.15), centres of mass moved by up to 2 cm, inertias scaled with
      the mass (the URDF's values are nominal CAD numbers);
    - armature (rotor inertia reflected through the gearbox): 0.2 kg m² on the three large
      joints, 0.05 on the wrists (harmonic drives of ratio ~100; the URDF has none);
    - viscous damping 0.02 τ_max N m s/rad and Coulomb friction 0.03 τ_max N m per joint
      (τ_max: the URDF's effort limit: 150 / 28 N m);
    - a ``payload`` body 5 cm past the last link, 1e-6 kg until
      :meth:`ArmSimulation.set_payload`.

    Visual and collision elements are dropped (no meshes to find; the arm does not collide).
    """
    root = ET.fromstring(ur5_urdf_text())
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for element in link.findall(tag):
                link.remove(element)
    spec = mujoco.MjSpec.from_string(ET.tostring(root, encoding="unicode"))
    spec.option.timestep = timestep
    spec.compiler.fusestatic = False  # the URDF default would fuse the joint-less payload away
    rng = np.random.default_rng(seed)
    for body in spec.bodies[1:]:
        if body.mass <= 0:
            continue
        scale = rng.uniform(0.85, 1.15)
        body.mass *= scale
        body.inertia = np.asarray(body.inertia) * scale
        body.ipos = np.asarray(body.ipos) + rng.uniform(-0.02, 0.02, 3)
        body.explicitinertial = True
    effort = urdf_effort_limits(ur5_urdf_text(), UR5_JOINT_NAMES)
    for joint, tau_max, armature in zip(spec.joints, effort, [0.2, 0.2, 0.2, 0.05, 0.05, 0.05], strict=True):
        joint.armature = armature
        joint.damping = np.array([0.02 * tau_max, 0.0, 0.0])  # MuJoCo 4: [linear, 0, 0]
        joint.frictionloss = 0.03 * tau_max
    payload = spec.body("wrist_3_link").add_body(name="payload", pos=[0.0, 0.1323, 0.0])
    payload.mass = 1e-6
    payload.inertia = [1e-9, 1e-9, 1e-9]
    payload.explicitinertial = True
    return spec.compile()


@dataclass(frozen=True)
class Push:
    """An external force on one body of the arm (a person pushing a link), applied with MuJoCo's
    ``xfrc_applied`` at the body's centre of mass for ``start ≤ t < end`` (simulated seconds).

    Attributes:
        start, end: when the force acts [s].
        body: the pushed body's name (e.g. ``panda_link5``).
        force: the force in the world frame [N] (3 values).
    """

    start: float
    end: float
    body: str
    force: tuple[float, float, float]


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


class ArmSimulation:
    """A compiled MuJoCo arm under computed-torque control; see the module docstring.

    Args:
        model: the plant; every degree of freedom a hinge, a body named ``payload``.
        joint_names: the joints, in the plant's order (also the names the learner's URDF uses).
        effort_limit: per-joint torque limits (N m) the controller clips to.
        kp, kd: PD gains of the computed-torque law (1/s², 1/s).
        trajectory_fraction: :attr:`SinusoidTrajectory.fraction` of the random trajectories.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        joint_names: list[str],
        effort_limit: np.ndarray,
        kp: float = 400.0,
        kd: float = 40.0,
        trajectory_fraction: float = 0.6,
    ):
        self.model = model
        self.data = mujoco.MjData(self.model)
        self.joint_names = list(joint_names)
        self.effort_limit = np.asarray(effort_limit, dtype=float)
        self.kp, self.kd = kp, kd
        self.trajectory_fraction = trajectory_fraction
        self.n = self.model.nv
        if len(self.joint_names) != self.n or self.effort_limit.shape != (self.n,):
            raise ValueError(f"{self.n} degrees of freedom, {len(self.joint_names)} joint names")
        self.lower = self.model.jnt_range[:, 0].copy()
        self.upper = self.model.jnt_range[:, 1].copy()
        self._payload_id = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "payload")
        if self._payload_id < 0:
            raise ValueError("the plant has no body named 'payload'")
        self._M = np.zeros((self.n, self.n))
        self._damping = self.model.dof_damping.copy()
        self._friction = self.model.dof_frictionloss.copy()

    def trajectory(self, seed: int) -> SinusoidTrajectory:
        """The random trajectory of ``seed`` for this arm."""
        return SinusoidTrajectory(self.lower, self.upper, seed=seed, fraction=self.trajectory_fraction)

    def set_payload(self, mass: float, radius: float = 0.05) -> None:
        """Give the payload body (a solid sphere past the flange) a mass in kg."""
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
        pushes: Sequence[Push] = (),
        initial_payload: float = 0.0,
    ) -> dict[str, np.ndarray]:
        """Track a random trajectory for ``duration`` seconds from its start state.

        Args:
            duration: simulated seconds.
            seed: trajectory seed (ignored when ``trajectory`` is given).
            log_every: log one step in this many (``timestep × log_every`` between samples).
            payload_mass: payload (kg) attached at ``payload_at`` seconds (None: never).
            payload_at: time of attachment.
            pushes: external forces on links (:class:`Push`); the controller does not know them.
            initial_payload: payload (kg) held from the start, until ``payload_at`` replaces it.

        Returns:
            ``{"t", "q", "qd", "qdd", "tau"}`` arrays (``tau``: applied joint torques); ``qdd``
            is MuJoCo's true acceleration; ``payload`` (0/1 per sample); ``external``: the joint
            torques the pushes apply during the step, ``Jᵀ F`` (``mj_applyFT``; zero outside pushes).
        """
        traj = trajectory or self.trajectory(seed)
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        self.set_payload(initial_payload)
        q0, qd0, _ = traj(0.0)
        d.qpos[:] = q0
        d.qvel[:] = qd0
        n_steps = round(duration / m.opt.timestep)
        n_log = (n_steps + log_every - 1) // log_every
        log = {k: np.zeros((n_log, self.n)) for k in ("q", "qd", "qdd", "tau")}
        log["t"] = np.zeros(n_log)
        log["payload"] = np.zeros(n_log)
        log["external"] = np.zeros((n_log, self.n))
        bodies = [self._body_id(p.body) for p in pushes]
        external = np.zeros(self.n)
        attached = False
        i_log = 0
        for step in range(n_steps):
            t = step * m.opt.timestep
            if payload_at is not None and not attached and t >= payload_at:
                self.set_payload(payload_mass)
                attached = True
            mujoco.mj_step1(m, d)
            self._apply_pushes(t, pushes, bodies, external)
            qr, qdr, qddr = traj(t)
            mujoco.mj_fullM(m, d, self._M)
            a = qddr + self.kd * (qdr - d.qvel) + self.kp * (qr - d.qpos)
            tau = self._M @ a + d.qfrc_bias + self._damping * qdr + self._friction * np.tanh(qdr / 0.02)
            tau = np.clip(tau, -self.effort_limit, self.effort_limit)
            d.qfrc_applied[:] = tau
            if step % log_every == 0:
                log["t"][i_log] = t
                log["q"][i_log] = d.qpos
                log["qd"][i_log] = d.qvel
                log["tau"][i_log] = tau
                log["payload"][i_log] = float(attached)
                log["external"][i_log] = external
            mujoco.mj_step2(m, d)
            if step % log_every == 0:
                log["qdd"][i_log] = d.qacc
                i_log += 1
        return log

    def _body_id(self, name: str) -> int:
        body = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name)
        if body < 0:
            raise ValueError(f"the plant has no body named {name!r}")
        return body

    def _apply_pushes(
        self, t: float, pushes: Sequence[Push], bodies: list[int], external: np.ndarray
    ) -> None:
        """Set ``xfrc_applied`` for the pushes acting at ``t`` (after ``mj_step1``: the body positions
        are current) and their joint torques ``Jᵀ F`` into ``external``."""
        d = self.data
        d.xfrc_applied[:] = 0.0
        external[:] = 0.0
        for push, body in zip(pushes, bodies, strict=True):
            if push.start <= t < push.end:
                force = np.asarray(push.force, dtype=float)
                d.xfrc_applied[body, :3] += force
                mujoco.mj_applyFT(self.model, d, force, np.zeros(3), d.xipos[body], body, external)


class Ur5Simulation(ArmSimulation):
    """The UR5 plant of :func:`ur5_plant` under computed-torque control.

    Its random trajectories use 40 % of each joint's half range (±1.26 rad around zero), which
    keeps the joint speeds near the UR5's 3.15 rad/s limit.
    """

    joint_names = UR5_JOINT_NAMES  # also on the class, as for the Panda

    def __init__(self, timestep: float = 0.002, plant_seed: int = 0, kp: float = 400.0, kd: float = 40.0):
        super().__init__(
            ur5_plant(plant_seed, timestep),
            UR5_JOINT_NAMES,
            urdf_effort_limits(ur5_urdf_text(), UR5_JOINT_NAMES),
            kp=kp,
            kd=kd,
            trajectory_fraction=0.4,
        )


def joint_states(
    log: dict[str, np.ndarray], rate_hz: float | None = None, names: list[str] | None = None
) -> Iterator[dict]:
    """JointState-like dicts (``stamp`` s, ``name``, ``position``, ``velocity``, ``effort``) from an
    :meth:`ArmSimulation.run` log, resampled to ``rate_hz`` (nearest earlier sample; None: every
    sample). ``names`` default to the Panda's joints. The demo publishes them as
    ``sensor_msgs/JointState``."""
    t = log["t"]
    if names is None:
        names = [f"panda_joint{i}" for i in range(1, 8)]
    if rate_hz is None:
        idx = np.arange(t.size)
    else:
        stamps = np.arange(t[0], t[-1] + 1e-12, 1.0 / rate_hz)
        idx = np.unique(np.searchsorted(t, stamps + 1e-9, side="right") - 1)
    for i in idx:
        yield {
            "stamp": float(t[i]),
            "name": list(names),
            "position": log["q"][i].tolist(),
            "velocity": log["qd"][i].tolist(),
            "effort": log["tau"][i].tolist(),
        }
