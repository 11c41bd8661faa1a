"""Benchmark: contacts seen by three external-torque estimators on a simulated Panda.

The plant is the package's MuJoCo Panda (:mod:`lifelong_learning.sim.panda`: identified inertials,
joint damping and Coulomb friction) with a 1 kg payload at the flange, tracking random smooth
trajectories under its computed-torque controller; joint states are taken at ``--rate`` Hz (the
drives' torque as the measured effort, q̈ estimated from the velocities as the node does). External
forces are applied with ``xfrc_applied`` to a random link (3 to 7, at its centre of mass, a random
direction) at random times for 0.2 to 0.6 s, magnitudes log-uniform; the true joint torque of each
force is ``Jᵀ F`` (``mj_applyFT``). Three estimates of the external torque (all as measured −
predicted, so a contact's truth is ``−Jᵀ F``):

- ``momentum_observer``: the generalized-momentum observer on the URDF (example-robot-data's
  Panda: other inertials, no friction, no payload), gain ``--gain``;
- ``learned_residual``: ``τ_m − τ̂`` of the node's learner (``SemiparametricInverseDynamics``, the
  node's defaults), learned online test-then-update through the node's guard, samples the contact
  detector flags (node defaults) not learned, after ``--learn-s`` s of free motion;
- ``learned_observer``: the observer with the learned model's correction ``τ̂ − RNEA_URDF``.

Protocol: learn free motion; then ``--free-min`` minutes of free motion (another trajectory, the
model still learning) give each estimator's false alarms; then ``--contacts`` contacts on a third
trajectory. Each estimator goes through the contact detector (``contact_k`` 6, minimum duration 3
ms, release 0.5) with the smallest ``contact_min_torque`` of a grid that raises at most one false
alarm per 10 minutes of free motion. Reported per estimator: that floor; the smallest contact size
(the contact's mean over time of ``max_j |Jᵀ F|_j``) from which ≥ 95 % of the contacts at least that
large are detected; detection latency p50/p99 (onset − contact start, detected contacts); the RMSE of
the estimate during contacts (all joints); and the free-motion nMSE of the model after the contacts
on a new trajectory against the same run without contacts (and learning every sample, no
detector: what a person pushing the arm does to a model today).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_contact.py [--quick] [--out docs/benchmarks/contact.md]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
from harness import describe_machine, provenance_line  # benchmarks/harness (sys.path[0] is benchmarks/)

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.dynamics import SemiparametricInverseDynamics
from lifelong_learning.dynamics.contact import ONSET, ContactDetector, ContactSettings
from lifelong_learning.dynamics.guard import SampleGuard
from lifelong_learning.dynamics.momentum_observer import MomentumObserver
from lifelong_learning.dynamics.plausibility import JointLimits
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text

ESTIMATORS = ("momentum_observer", "learned_residual", "learned_observer")
FLOORS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0)
LINKS = [f"panda_link{i}" for i in range(3, 8)]
PAYLOAD_KG = 1.0


@dataclass
class Contact:
    start: float
    end: float
    body: int
    force: np.ndarray  # world frame [N]


def contacts_schedule(n: int, seed: int, model: mujoco.MjModel) -> tuple[list[Contact], float]:
    """``n`` contacts 0.2-0.6 s long, 1.5-3 s apart, forces log-uniform in [2, 80] N; the duration."""
    rng = np.random.default_rng(seed)
    out, t = [], 1.0
    for _ in range(n):
        length = rng.uniform(0.2, 0.6)
        direction = rng.normal(size=3)
        magnitude = np.exp(rng.uniform(np.log(2.0), np.log(80.0)))
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, str(rng.choice(LINKS)))
        out.append(Contact(t, t + length, body, magnitude * direction / np.linalg.norm(direction)))
        t += length + rng.uniform(1.5, 3.0)
    return out, t + 1.0


def simulate(sim: PandaSimulation, seconds: float, seed: int, rate: float, contacts: list[Contact]) -> dict:
    """The computed-torque loop of :meth:`ArmSimulation.run` with the payload attached and the
    ``contacts`` applied; joint states at ``rate`` Hz with the true external torque ``Jᵀ F``."""
    m, d = sim.model, sim.data
    traj = sim.trajectory(seed)
    mujoco.mj_resetData(m, d)
    sim.set_payload(PAYLOAD_KG)
    q0, qd0, _ = traj(0.0)
    d.qpos[:], d.qvel[:] = q0, qd0
    every = max(1, round(1.0 / (rate * m.opt.timestep)))
    n_steps = round(seconds / m.opt.timestep)
    M = np.zeros((sim.n, sim.n))
    damping, friction = m.dof_damping.copy(), m.dof_frictionloss.copy()
    log = {k: [] for k in ("t", "q", "qd", "tau", "ext")}
    qfrc = np.zeros(sim.n)
    k = 0
    for step in range(n_steps):
        t = step * m.opt.timestep
        while k < len(contacts) and t >= contacts[k].end:
            k += 1
        active = contacts[k] if k < len(contacts) and t >= contacts[k].start else None
        d.xfrc_applied[:] = 0.0
        mujoco.mj_step1(m, d)
        qfrc[:] = 0.0
        if active is not None:
            d.xfrc_applied[active.body, :3] = active.force
            mujoco.mj_applyFT(m, d, active.force, np.zeros(3), d.xipos[active.body], active.body, qfrc)
        qr, qdr, qddr = traj(t)
        mujoco.mj_fullM(m, d, M)
        a = qddr + sim.kd * (qdr - d.qvel) + sim.kp * (qr - d.qpos)
        tau = M @ a + d.qfrc_bias + damping * qdr + friction * np.tanh(qdr / 0.02)
        tau = np.clip(tau, -sim.effort_limit, sim.effort_limit)
        d.qfrc_applied[:] = tau
        if step % every == 0:
            for key, value in (("t", t), ("q", d.qpos), ("qd", d.qvel), ("tau", tau), ("ext", qfrc)):
                log[key].append(np.array(value, dtype=float))
        mujoco.mj_step2(m, d)
    return {key: np.array(v) for key, v in log.items()}


class Estimators:
    """The learner (through the node's guard and contact detector) and the two observers."""

    def __init__(self, urdf: str, gain: float, learn_contacts: bool = True):
        self.model = SemiparametricInverseDynamics(urdf, JOINT_NAMES)
        limits = JointLimits.from_urdf(urdf, JOINT_NAMES)
        self.guard = SampleGuard(limits, learn_max_hz=0.0)
        self.detector = ContactDetector(7, ContactSettings(), limits.effort) if learn_contacts else None
        self.plain = MomentumObserver(self.model.regressor, gain)
        self.learned = MomentumObserver(self.model.regressor, gain)

    def copy(self, learn_contacts: bool = True) -> Estimators:
        """Another set with a copy of the learned model (fresh guard, detector and observers)."""
        other = Estimators.__new__(Estimators)
        Estimators.__init__(other, self.model.regressor.urdf, float(self.plain.gain[0]), learn_contacts)
        other.model = SemiparametricInverseDynamics.from_model_file(self.model.to_model_file())
        return other

    def run(self, log: dict, learn: bool = True, observers: bool = True) -> dict[str, np.ndarray]:
        """Test-then-update over ``log``; each estimator's external torque per sample."""
        out = {name: np.zeros_like(log["tau"]) for name in ESTIMATORS}
        for i in range(log["t"].size):
            t, q, qd, tau = log["t"][i], log["q"][i], log["qd"][i], log["tau"][i]
            admitted = self.guard.admit(t, q, qd, tau)
            parts = self.model.predict(q, qd, admitted.qdd, return_parts=True)
            predicted = parts["torque"][0] if parts["torque"].ndim == 2 else parts["torque"]
            residual = tau - predicted
            out["learned_residual"][i] = residual
            if observers:
                rnea = self.model.regressor.rnea(q, qd, admitted.qdd)[0]
                out["momentum_observer"][i] = self.plain.update(t, q, qd, tau)
                out["learned_observer"][i] = self.learned.update(t, q, qd, tau, correction=predicted - rnea)
            free = True
            if self.detector is not None:
                _, free, _ = self.detector.update(t, residual)
            if learn and free and admitted.learn and self.guard.residual_refusal(tau, predicted) is None:
                self.model.update(q, qd, admitted.qdd, tau)
        return out


def onsets(
    t: np.ndarray, estimate: np.ndarray, floor: float, warm: np.ndarray | None = None
) -> tuple[list[float], np.ndarray]:
    """Contact onsets of the node's detector (defaults, ``contact_min_torque`` = ``floor``) on
    ``estimate`` (``warm``: free-motion estimates seen just before: the thresholds' window), and
    the thresholds the detector started with."""
    detector = ContactDetector(estimate.shape[1], ContactSettings(min_torque=floor))
    if warm is not None:
        period = float(np.median(np.diff(t)))
        detector.update_block(t[0] - period * np.arange(warm.shape[0], 0, -1), warm)
    start = detector.threshold
    found = [e.t for e in detector.update_block(t, estimate).events if e.kind == ONSET and e.t >= t[0]]
    return found, start


def score(
    name: str, free: dict, contact: dict, est_free: np.ndarray, est_contact: np.ndarray, schedule
) -> dict:
    minutes = (free["t"][-1] - free["t"][0]) / 60.0
    allowed = minutes / 10.0  # one false alarm per 10 minutes
    chosen = None
    for floor in FLOORS:
        false_alarms = len(onsets(free["t"], est_free, floor)[0])
        if false_alarms <= allowed:
            chosen = (floor, false_alarms)
            break
    if chosen is None:
        return {"estimator": name, "floor": float("nan")}
    floor, false_alarms = chosen
    found, thresholds = onsets(contact["t"], est_contact, floor, warm=est_free[-2000:])
    sizes, detected, latency, outside = [], [], [], 0
    for c in schedule:
        inside = (contact["t"] >= c.start) & (contact["t"] < c.end)
        sizes.append(float(np.abs(contact["ext"][inside]).max(axis=1).mean()))
        hits = [x for x in found if c.start <= x <= c.end + 0.05]
        detected.append(bool(hits))
        if hits:
            latency.append(hits[0] - c.start)
    for x in found:
        if not any(c.start <= x <= c.end + 0.05 for c in schedule):
            outside += 1
    sizes_a, detected_a = np.array(sizes), np.array(detected)
    smallest = float("nan")
    for s in np.sort(sizes_a):
        if detected_a[sizes_a >= s].mean() >= 0.95:
            smallest = float(s)
            break
    mask = np.zeros(contact["t"].size, dtype=bool)
    for c in schedule:
        mask |= (contact["t"] >= c.start) & (contact["t"] < c.end)
    rmse = float(np.sqrt(np.mean((est_contact[mask] + contact["ext"][mask]) ** 2)))
    return {
        "estimator": name,
        "floor": floor,
        "thresholds": thresholds,
        "free false alarms": false_alarms,
        "minutes": minutes,
        "smallest": smallest,
        "detected": int(detected_a.sum()),
        "contacts": len(schedule),
        "latency p50": 1e3 * float(np.percentile(latency, 50)) if latency else float("nan"),
        "latency p99": 1e3 * float(np.percentile(latency, 99)) if latency else float("nan"),
        "rmse": rmse,
        "false alarms between contacts": outside,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 min of free motion, 40 contacts")
    parser.add_argument("--rate", type=float, default=250.0, help="joint states per second")
    parser.add_argument("--learn-s", type=float, default=60.0)
    parser.add_argument("--free-min", type=float, default=10.0)
    parser.add_argument("--contacts", type=int, default=100)
    parser.add_argument("--gain", type=float, default=25.0, help="the observers' K_O (1/s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.free_min, args.contacts, args.learn_s = 2.0, 40, 30.0
    t0 = time.perf_counter()
    urdf, sim = panda_urdf_text(), PandaSimulation()
    schedule, contact_s = contacts_schedule(args.contacts, args.seed, sim.model)
    learn_log = simulate(sim, args.learn_s, 100 + args.seed, args.rate, [])
    free_log = simulate(sim, 60 * args.free_min, 200 + args.seed, args.rate, [])
    contact_log = simulate(sim, contact_s, 300 + args.seed, args.rate, schedule)
    clean_log = simulate(sim, contact_s, 300 + args.seed, args.rate, [])
    test_log = simulate(sim, 30.0, 400 + args.seed, args.rate, [])
    print(f"simulated in {time.perf_counter() - t0:.0f} s", flush=True)

    est = Estimators(urdf, args.gain)
    est.run(learn_log, observers=False)
    free = est.run(free_log)
    clean, blind = est.copy(), est.copy(learn_contacts=False)
    contact = est.run(contact_log)
    print(f"estimated in {time.perf_counter() - t0:.0f} s", flush=True)
    rows = [score(n, free_log, contact_log, free[n], contact[n], schedule) for n in ESTIMATORS]

    def nmse(model: SemiparametricInverseDynamics) -> float:
        guard = SampleGuard(JointLimits.from_urdf(urdf, JOINT_NAMES), learn_max_hz=0.0)
        qdd = np.array(
            [
                guard.admit(t, q, qd).qdd
                for t, q, qd in zip(*(test_log[k] for k in ("t", "q", "qd")), strict=True)
            ]
        )
        pred = model.predict(test_log["q"], test_log["qd"], qdd)
        return float(normalized_mse(test_log["tau"][20:], pred[20:]).mean())

    clean.run(clean_log, observers=False)
    blind.run(contact_log, observers=False)
    models = {
        "after the contacts": est.model,
        "without contacts": clean.model,
        "contacts learned": blind.model,
    }
    accuracy = {k: nmse(v) for k, v in models.items()}
    total = time.perf_counter() - t0
    text = report(rows, accuracy, args, total)
    print(text)
    if args.out is not None:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(text)
    return 0


def report(rows: list[dict], accuracy: dict[str, float], args: argparse.Namespace, total: float) -> str:
    command = "OPENBLAS_NUM_THREADS=1 python benchmarks/bench_contact.py" + (" --quick" if args.quick else "")
    lines = [
        f"\n## {time.strftime('%Y-%m-%d')}: {args.contacts} contacts, {args.free_min:g} min of free motion",
        "",
        f"`{command}` ({args.rate:g} Hz joint states, {args.learn_s:g} s learned first, observer gain "
        f"{args.gain:g}/s, seed {args.seed}). {provenance_line()}. Machine: {describe_machine()}. "
        f"Total time {total:.0f} s.",
        "",
        "| estimator | contact_min_torque [N m] (false alarms in free motion) | thresholds, joints 1-7 "
        "[N m] | smallest contact detected ≥ 95 % [N m] | detected | latency p50 / p99 [ms] | RMSE "
        "during contact [N m] | false alarms between contacts |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not np.isfinite(r["floor"]):
            lines.append(f"| {r['estimator']} | none of the floors up to {FLOORS[-1]:g} | | | | | | |")
            continue
        lines.append(
            f"| {r['estimator']} | {r['floor']:g} ({r['free false alarms']} in {r['minutes']:.0f} min) | "
            + " ".join(f"{x:.1f}" for x in r["thresholds"])
            + f" | {r['smallest']:.2f} | {r['detected']}/{r['contacts']} | {r['latency p50']:.0f} / "
            f"{r['latency p99']:.0f} | {r['rmse']:.2f} | {r['false alarms between contacts']} |"
        )
    lines += [
        "",
        "Free-motion torque nMSE of the learned model on a new trajectory (30 s): after the contacts "
        f"(samples in contact not learned) {accuracy['after the contacts']:.4f}, the same run without "
        f"contacts {accuracy['without contacts']:.4f}, the contacts learned as dynamics (no detector) "
        f"{accuracy['contacts learned']:.4f}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
