"""Benchmark: do hyperparameters tuned on two trajectories predict a third better than on one?

Issue 12's criterion, per objective, on a plant that does not change while it logs: a simulated
arm (``--robot``, as in ``bench_retraining.py``) follows trajectories A, B and C (seeds ``s``,
``s + 1``, ``s + 2``; ``--seconds`` each at 100 Hz, no payload). The retraining job
(``lifelong_learning.retraining.pipeline``) tunes on bag A alone and on bags A and B, with the
forgetting factor 1 and the residual λ multiplier 1 (so that only the tuning differs). Each job's
hyperparameters (centres, length-scales, λ) are then fitted on the same data, bag A, replayed as
the export replays (10 samples at a time), and predict C: mean torque nMSE over joints. The job's
own exported model (trained on its bags) is scored on C too.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_retraining_objectives.py --robot ur5 \\
        --seeds 0 10 20 30 40 50 --seconds 20

Writes docs/benchmarks/retraining-objectives[-<robot>].md (and .json); the test
``test/retraining/test_two_trajectories.py`` is seed 0 of the UR5 rows.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from bench_retraining import ROBOTS  # benchmarks/ is sys.path[0]
from harness import cpu_model, run_seeds  # benchmarks/harness

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.dynamics import SemiparametricInverseDynamics, estimate_accelerations
from lifelong_learning.io.bags import write_joint_states
from lifelong_learning.retraining.job import TuningJob
from lifelong_learning.retraining.pipeline import run_job

ROOT = Path(__file__).resolve().parents[1]


def error(model: SemiparametricInverseDynamics, log: dict) -> float:
    qdd = estimate_accelerations(log["t"], log["qd"])
    return float(normalized_mse(log["tau"], model.predict(log["q"], log["qd"], qdd)).mean())


def fitted_on(
    log: dict, urdf: str, joints: list[str], feature_map, lam: float
) -> SemiparametricInverseDynamics:
    """The semiparametric model with a tuned feature map and per-sample λ, replayed on ``log``."""
    qdd = estimate_accelerations(log["t"], log["qd"])
    model = SemiparametricInverseDynamics(
        urdf, list(joints), mode="semiparametric", feature_map=feature_map, lam_residual=log["t"].size * lam
    )
    for s in range(0, log["t"].size, 10):
        model.update(log["q"][s : s + 10], log["qd"][s : s + 10], qdd[s : s + 10], log["tau"][s : s + 10])
    return model


def one_seed(seed: int, args: argparse.Namespace, objectives: list[str]) -> dict:
    simulation, urdf_path, joints, _ = ROBOTS[args.robot]
    urdf = Path(urdf_path()).read_text()
    A, B, C = (simulation().run(args.seconds, seed=seed + k, log_every=5) for k in range(3))
    out: dict = {"seed": seed}
    with tempfile.TemporaryDirectory() as tmp:
        for name, log in (("A", A), ("B", B)):
            write_joint_states(Path(tmp) / name, log["t"], joints, log["q"], log["qd"], log["tau"])
        for objective in objectives:
            for label, bags in (("one", ["A"]), ("two", ["A", "B"])):
                t0 = time.perf_counter()
                model_path = Path(tmp) / f"{objective}-{label}.llm"
                report = run_job(
                    TuningJob(
                        bags=[str(Path(tmp) / b) for b in bags],
                        task="inverse-dynamics",
                        out=str(model_path),
                        urdf=urdf_path(),
                        objectives=(objective,),
                        centers=args.centers,
                        epochs=args.epochs,
                        device="cpu",
                        forgetting=(1.0,),
                        residual_regularization=(1.0,),
                    )
                )
                exported = SemiparametricInverseDynamics.load(model_path)
                lam = report["objectives"][objective]["lam"]
                key = f"{objective}, tuned on {label} ({'A' if label == 'one' else 'A, B'})"
                out[f"{key}, fitted on A"] = error(fitted_on(A, urdf, joints, exported.feature_map, lam), C)
                out[f"{key}, exported"] = error(exported, C)
                print(
                    f"seed {seed}: {key}: fitted on A {out[f'{key}, fitted on A']:.4f}, exported "
                    f"{out[f'{key}, exported']:.4f} ({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
    return out


def markdown(results: list[dict], args: argparse.Namespace, objectives: list[str], seconds: float) -> str:
    seeds = " ".join(str(r["seed"]) for r in results)
    lines = [
        "# Retraining: hyperparameters tuned on one trajectory or on two, on a third",
        "",
        "Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_retraining_objectives.py "
        f"--robot {args.robot} --seeds {seeds} --seconds {args.seconds:g} --centers {args.centers} "
        f"--epochs {args.epochs} --objectives {','.join(objectives)}`  ",
        f"Machine: {cpu_model()}; torch {torch.__version__}, CPU. Total time {seconds:.0f} s.",
        "",
        f"Per seed s: {ROBOTS[args.robot][3]}, no payload, follows trajectories A, B, C (seeds s, s + 1, "
        f"s + 2, {args.seconds:g} s each at 100 Hz). The retraining job tunes on bag A, then on bags A "
        f"and B ({args.centers} centres, ≤ {args.epochs} epochs, forgetting 1, residual λ × 1). "
        "'fitted on A': the job's hyperparameters fitted on bag A (only the hyperparameters differ); "
        "'exported': the job's own model (trained on its bags). Mean torque nMSE over joints on C.",
        "",
        "| tuning | " + " | ".join(f"seed {r['seed']}" for r in results) + " | mean | two < one |",
        "|---|" + "---:|" * (len(results) + 2),
    ]
    for key in [k for k in results[0] if k != "seed"]:
        values = [r[key] for r in results]
        wins = ""
        if ", tuned on two" in key:
            one = key.replace("tuned on two (A, B)", "tuned on one (A)")
            wins = f"{sum(r[key] < r[one] for r in results)} of {len(results)}"
        cells = " | ".join(f"{v:.4f}" for v in values)
        lines.append(f"| {key} | {cells} | {sum(values) / len(values):.4f} | {wins} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", choices=sorted(ROBOTS), default="ur5")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 10, 20, 30, 40, 50])
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each trajectory")
    ap.add_argument("--objectives", default="holdout-bags,proposed")
    ap.add_argument("--centers", type=int, default=40)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--out", help="default docs/benchmarks/retraining-objectives[-<robot>].md")
    args = ap.parse_args()
    torch.set_num_threads(1)
    objectives = [o for o in args.objectives.split(",") if o]
    suffix = "" if args.robot == "ur5" else f"-{args.robot}"
    run_seeds(
        args.seeds,
        lambda seed: one_seed(seed, args, objectives),
        lambda results, seconds: markdown(results, args, objectives, seconds),
        args.out or ROOT / f"docs/benchmarks/retraining-objectives{suffix}.md",
    )


if __name__ == "__main__":
    main()
