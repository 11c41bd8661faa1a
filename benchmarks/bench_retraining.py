"""Benchmark: does retraining from the logs make the robot better on motion it has not made yet?

The demo's scenario, on several seeds, without DDS: a simulated arm (``--robot``: the Panda of
:mod:`lifelong_learning.sim.panda` or the UR5 of :mod:`lifelong_learning.sim.arm`; inertial
errors, joint damping and Coulomb friction, a 1 kg payload grasped at 60 % of the run; the
URDF knows none of that) follows a random trajectory for ``--seconds`` at 100 Hz. Then a *new*
trajectory (another seed, payload attached) is predicted by

- RNEA of the URDF;
- the online learners, fed the log one joint state at a time as the node is (q̈ from the node's
  filter): P, NP and SP, with and without the friction terms;
- the model retrained from a rosbag2 bag of the log by ``lifelong_learning.retraining.pipeline``
  (what ``lifelong-learning tune`` and the ``nystrom_tuner`` node run), for each objective.

The metric is the mean over joints of the torque nMSE on the new trajectory.

With ``--bags K`` the log is K trajectories of ``--seconds``/K each (seeds ``seed + 100 k``; the
payload grasped at 60 % of the total time), each its own bag, as a robot logs sessions: the
retraining job gets the K bags (the ``holdout-bags`` objective then holds each out in turn).
``--grasp 0`` attaches the payload from the start (a plant that does not change while it logs);
``--no-batch`` leaves out the one-batch-fit line.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_retraining.py [--robot ur5] [--seeds 0 1 2] \\
        [--bags 3] [--quick]

Writes docs/benchmarks/retraining.md (Panda) or retraining-<robot>.md (and .json), with ``--bags K``
retraining-bags<K>[-<robot>].md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from harness import cpu_model, per_seed_table, run_seeds  # benchmarks/harness (sys.path[0] is benchmarks/)

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.dynamics import (
    RigidBodyRegressor,
    SemiparametricInverseDynamics,
    estimate_accelerations,
)
from lifelong_learning.io.bags import write_joint_states
from lifelong_learning.retraining.job import TuningJob
from lifelong_learning.retraining.pipeline import run_job
from lifelong_learning.sim.arm import UR5_JOINT_NAMES, Ur5Simulation, ur5_urdf_path
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_path

#: robot → (plant, the learner's URDF, joints, the plant in words)
ROBOTS = {
    "panda": (
        PandaSimulation,
        panda_urdf_path,
        JOINT_NAMES,
        "a simulated Panda (MuJoCo, dm-robotics-panda's MJCF: identified inertials, damping, Coulomb "
        "friction; the learner's URDF is example-robot-data's, with other inertials and no friction)",
    ),
    "ur5": (
        Ur5Simulation,
        ur5_urdf_path,
        UR5_JOINT_NAMES,
        "a simulated UR5 (MuJoCo, built from example-robot-data's URDF with link masses and centres of "
        "mass off by up to 15 % / 2 cm, rotor inertia, damping and Coulomb friction; the learner gets "
        "the unmodified URDF)",
    ),
}

ROOT = Path(__file__).resolve().parents[1]
ONLINE = {
    "P": {"mode": "parametric", "friction": ()},
    "P + friction": {"mode": "parametric"},
    "NP": {"mode": "nonparametric"},
    "SP": {"mode": "semiparametric", "friction": ()},
    "SP + friction (node default)": {"mode": "semiparametric"},
}


def online(
    log: dict[str, np.ndarray], qdd: np.ndarray, urdf: str, joints: list[str], **kw
) -> SemiparametricInverseDynamics:
    """The online learner fed the log one sample at a time, as the node is."""
    model = SemiparametricInverseDynamics(urdf, list(joints), **kw)
    for i in range(log["t"].size):
        model.update(log["q"][i], log["qd"][i], qdd[i], log["tau"][i])
    return model


def logs_of(
    simulation, seconds: float, seed: int, bags: int, grasp_at: float = 0.6
) -> list[dict[str, np.ndarray]]:
    """The logged run: one trajectory, or ``bags`` trajectories of ``seconds / bags`` (seeds
    ``seed + 100 k``), the payload grasped at ``grasp_at`` (60 %) of the total time."""
    part, grasp = seconds / bags, grasp_at * seconds
    out = []
    for k in range(bags):
        at = max(0.0, grasp - k * part)
        out.append(
            simulation().run(
                part, seed=seed + 100 * k, log_every=5, payload_mass=1.0, payload_at=at if at < part else None
            )
        )
    return out


def one_seed(seed: int, objectives: list[str], args: argparse.Namespace) -> dict:
    seconds, centers, epochs, robot, bags = args.seconds, args.centers, args.epochs, args.robot, args.bags
    simulation, urdf_path, joints, _ = ROBOTS[robot]
    urdf = Path(urdf_path()).read_text()
    logs = logs_of(simulation, seconds, seed, bags, args.grasp)
    log = {k: np.concatenate([x[k] for x in logs]) for k in ("q", "qd", "tau")}
    new = simulation().run(15.0, seed=seed + 1000, log_every=5, payload_mass=1.0, payload_at=0.0)
    qdd = np.concatenate([estimate_accelerations(x["t"], x["qd"]) for x in logs])
    qdd_new = estimate_accelerations(new["t"], new["qd"])
    log["t"] = np.arange(log["q"].shape[0]) * 0.01  # only its length is used below

    def score(model) -> float:
        return float(normalized_mse(new["tau"], model.predict(new["q"], new["qd"], qdd_new)).mean())

    rnea = RigidBodyRegressor(urdf, list(joints)).rnea(new["q"], new["qd"], new["qdd"])
    out: dict = {"seed": seed, "RNEA (URDF)": float(normalized_mse(new["tau"], rnea).mean())}
    for name, kw in ONLINE.items():
        t0 = time.perf_counter()
        out[f"online {name}"] = score(online(log, qdd, urdf, joints, **kw))
        print(
            f"seed {seed}: online {name} {out[f'online {name}']:.4f} ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    with tempfile.TemporaryDirectory() as tmp:
        paths = [str(Path(tmp) / f"bag{k}") for k in range(bags)]
        for path, x in zip(paths, logs, strict=True):
            write_joint_states(path, x["t"], joints, x["q"], x["qd"], x["tau"])
        # The last job: one batch fit of every sample, no forgetting (the export before replay).
        jobs = [(f"retrained ({o})", o, {}) for o in objectives]
        batch = {"forgetting": (1.0,), "replay_block": 10**9}
        if not args.no_batch:
            jobs.append(("retrained, one batch fit (the previous export)", objectives[0], batch))
        for label, objective, extra in jobs:
            t0 = time.perf_counter()
            job = TuningJob(
                bags=paths,
                task="inverse-dynamics",
                out=str(Path(tmp) / "model.llm"),
                objectives=[objective],
                urdf=urdf_path(),
                centers=centers,
                epochs=epochs,
                device="cpu",
                **extra,
            )
            result = run_job(job)["objectives"][objective]
            out[label] = score(SemiparametricInverseDynamics.load(job.out))
            out[f"{label} details"] = {
                "forgetting": result["forgetting"],
                "residual λ multiplier": result["residual_lam_scale"],
                "recent-part nMSE": result["value"],
                "lengthscale median": float(np.median(result["lengthscale"])),
                "seconds": time.perf_counter() - t0,
            }
            print(
                f"seed {seed}: {label} {out[label]:.4f} β={result['forgetting']} "
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    return out


def markdown(results: list[dict], args: argparse.Namespace, seconds: float) -> str:
    grasp_s = args.grasp * args.seconds
    split = (
        f" as {args.bags} trajectories of {args.seconds / args.bags:g} s, one bag each"
        if args.bags > 1
        else ""
    )
    lines = [
        "# Retraining: the robot on motion it has not made yet",
        "",
        "Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_retraining.py "
        f"--robot {args.robot} --seeds "
        f"{' '.join(map(str, args.seeds))} --centers {args.centers} --objectives {args.objectives}"
        f"{f' --bags {args.bags} --seconds {args.seconds:g}' if args.bags > 1 else ''}"
        f"{f' --grasp {args.grasp:g}' if args.grasp != 0.6 else ''}{' --no-batch' if args.no_batch else ''}"
        f"{' --quick' if args.quick else ''}`  ",
        f"Machine: {cpu_model()}; torch {torch.__version__}, CPU. Total time {seconds:.0f} s.",
        "",
        f"Per seed: {ROBOTS[args.robot][3]}, with a 1 kg payload grasped at {grasp_s:.0f} s, "
        f"logs {args.seconds:.0f} s at 100 Hz{split}"
        "; a new 15 s "
        "trajectory (seed + 1000, payload attached) is predicted. Mean over joints of the torque nMSE on "
        "that trajectory. Online learners are fed the log one joint state at a time (q̈ from the node's "
        "filter), as the node is; retrained = the tuner's pipeline on a rosbag2 bag of the log "
        f"({args.centers} centres, ≤ {args.epochs} epochs; friction on; the residual λ multiplier and the "
        "forgetting factor chosen on the log's most recent 20 %).",
        "",
        *per_seed_table(results, ".4f"),
    ]
    lines += [
        "",
        "Retrained model details (forgetting and residual λ multiplier chosen, nMSE on the log's most "
        "recent part, median "
        "length-scale, time):",
        "",
    ]
    for r in results:
        for key, d in r.items():
            if key.endswith("details"):
                lines.append(
                    f"- seed {r['seed']}, {key[:-8]}: β = {d['forgetting']}, "
                    f"λ × {d.get('residual λ multiplier', '(not recorded)')}, recent-part nMSE "
                    f"{d['recent-part nMSE']:.4f}, length-scale median {d['lengthscale median']:.2f}, "
                    f"{d['seconds']:.0f} s"
                )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", choices=sorted(ROBOTS), default="panda")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--seconds", type=float, default=90.0, help="length of the logged run")
    ap.add_argument("--objectives", default="proposed,holdout-recent")
    ap.add_argument("--centers", type=int, default=400)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--bags", type=int, default=1, help="the log as this many trajectories, one bag each")
    ap.add_argument("--grasp", type=float, default=0.6, help="payload grasped at this fraction of the log")
    ap.add_argument("--no-batch", action="store_true", help="leave out the one-batch-fit line")
    ap.add_argument("--quick", action="store_true", help="30 s logs, one seed")
    ap.add_argument("--out", help="default docs/benchmarks/retraining.md (panda), retraining-ur5.md, ...")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.seeds = 30.0, args.seeds[:1]
    torch.set_num_threads(1)
    objectives = [o for o in args.objectives.split(",") if o]
    suffix = "" if args.bags == 1 else f"-bags{args.bags}"
    suffix += "" if args.grasp == 0.6 else f"-grasp{args.grasp:g}"
    suffix += "" if args.robot == "panda" else f"-{args.robot}"
    run_seeds(
        args.seeds,
        lambda seed: one_seed(seed, objectives, args),
        lambda results, seconds: markdown(results, args, seconds),
        args.out or ROOT / f"docs/benchmarks/retraining{suffix}.md",
    )


if __name__ == "__main__":
    main()
