"""Benchmark: the retraining job's offline methods (``--method nystrom | slkl | nytro | path``) on the
same bags, through the pipeline ``lifelong-learning tune`` and the tuner node run.

Data (per seed):

- **dynamics**: the simulated Panda of ``benchmarks/bench_retraining.py`` (inertial errors, damping,
  Coulomb friction the URDF lacks; a 1 kg payload grasped at 60 % of the run), ``--seconds`` at
  100 Hz in one bag; a new 15 s trajectory (seed + 1000, payload attached) is predicted. Error: mean
  over joints of the torque nMSE;
- **recognition**: sklearn's digits (64 pixels / 16, 10 classes), a stratified 80 % in one bag of
  LabeledFeatures, the other 20 % new. Error: % misclassified;
- with ``--demo-bag DIR``: the demo's bag (``lifelong-learning demo --quick --out /tmp/run`` writes
  /tmp/run/bag), inverse dynamics on its ``/joint_states`` (no new trajectory: the gate's error only).

Every method runs as a job at each ``--centers`` M: ``nystrom`` (Meanti et al.'s tuning, the task's
default objective, ``--epochs`` epochs and the budgets of ``--budgets``, for the time it takes to
reach an error), ``slkl`` (M candidates, ν chosen on held-out rows), ``nytro`` and ``path``. Columns:
the promotion gate's held-out error (the bags' most recent 10 %, never trained or selected on), the
error on the new data, the online map's size (m, SLKL's m₀), the method's time (the job's
``seconds``), and the exported model's cost per sample in the learner: one update and one prediction
(``SemiparametricInverseDynamics.update``/``predict``, ``IncrementalRLSC.partial_fit``/
``decision_function``), timed in interleaved rounds over every exported model of the seed (medians),
so that the machine's load weighs on all alike.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_retraining_methods.py [--seeds 0 1 2] [--quick]

Writes docs/benchmarks/retraining-methods.md and .json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from harness import describe_machine, git_head, load_average, run_seeds

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.dynamics import SemiparametricInverseDynamics, estimate_accelerations
from lifelong_learning.io.bags import write_joint_states, write_labeled_features
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.nystrom.export import residual_data
from lifelong_learning.retraining.job import TuningJob
from lifelong_learning.retraining.pipeline import run_job
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_path

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("slkl", "nytro", "path")
#: the payload is grasped at this fraction of the logged run (bench_retraining.py's scenario)
GRASP_AT = 0.6
#: rounds of the interleaved cost measurement, samples per round
ROUNDS, PER_ROUND = 15, 40


def dynamics(seed: int, seconds: float, tmp: Path) -> dict[str, Any]:
    log = PandaSimulation().run(
        seconds, seed=seed, log_every=5, payload_mass=1.0, payload_at=GRASP_AT * seconds
    )
    write_joint_states(tmp / "bag", log["t"], JOINT_NAMES, log["q"], log["qd"], log["tau"])
    new = PandaSimulation().run(15.0, seed=seed + 1000, log_every=5, payload_mass=1.0, payload_at=0.0)
    qdd = estimate_accelerations(new["t"], new["qd"])
    rows = (new["q"], new["qd"], qdd, new["tau"])

    def error(model: SemiparametricInverseDynamics) -> float:
        return float(normalized_mse(new["tau"], model.predict(*rows[:3])).mean())

    def cost(model: SemiparametricInverseDynamics, i: int) -> None:
        model.update(*(r[i : i + 1] for r in rows))
        model.predict(*(r[i : i + 1] for r in rows[:3]))

    def residual_cost(model: SemiparametricInverseDynamics) -> Callable[[int], None]:
        X, Y = residual_data(model, *rows)  # the residual's inputs and targets of the new rows
        fmap, engine = model.feature_map, model.residual

        def one(i: int) -> None:
            phi = fmap.transform(X[i : i + 1])
            engine.update(phi, Y[i : i + 1])
            engine.predict(phi)

        return one

    return {
        "task": "inverse-dynamics",
        "bags": [str(tmp / "bag")],
        "job": {"urdf": panda_urdf_path()},
        "load": SemiparametricInverseDynamics.load,
        "error": error,
        "cost": cost,
        "map cost": residual_cost,
        "n_cost": rows[0].shape[0],
    }


def recognition(seed: int, tmp: Path) -> dict[str, Any]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.2, stratify=y, random_state=seed)
    write_labeled_features(tmp / "digits", Xtr, [f"d{v}" for v in ytr])
    labels = np.array([f"d{v}" for v in yte], dtype=object)

    def error(model: IncrementalRLSC) -> float:
        return 100.0 * float(np.mean(model.predict(Xte) != labels))

    def cost(model: IncrementalRLSC, i: int) -> None:
        model.partial_fit(Xte[i : i + 1], [labels[i]])
        model.decision_function(Xte[i : i + 1])

    return {
        "task": "classification",
        "bags": [str(tmp / "digits")],
        "job": {},
        "load": IncrementalRLSC.load,
        "error": error,
        "cost": cost,
        "map cost": None,  # the learner is the map and the engine
        "n_cost": len(labels),
    }


def demo_bag(path: str) -> dict[str, Any]:
    return {
        "task": "inverse-dynamics",
        "bags": [path],
        "job": {"urdf": panda_urdf_path(), "topic": "/joint_states"},
        "load": SemiparametricInverseDynamics.load,
        "error": None,
        "cost": None,
        "map cost": None,
        "n_cost": 0,
    }


def runs(args: argparse.Namespace) -> list[tuple[str, str, int]]:
    """(label, method, epochs) of one data set and M: Meanti at each budget, then the others."""
    budgets = sorted({*args.budgets, args.epochs})
    return [(f"nystrom ({e} epochs)", "nystrom", e) for e in budgets] + [(m, m, args.epochs) for m in METHODS]


def one_job(data: dict[str, Any], method: str, centers: int, epochs: int, seed: int, out: Path) -> dict:
    job = TuningJob(
        bags=data["bags"],
        task=data["task"],
        out=str(out),
        method=method,
        centers=centers,
        epochs=epochs,
        device="cpu",
        seed=seed,
        **data["job"],
    )
    t0 = time.perf_counter()
    report = run_job(job)
    run = report["objectives"][report["exported_objective"]]
    percent = 100.0 if data["task"] == "classification" else 1.0  # the gate's error rate, as %
    row = {
        "held-out error": percent * report["promotion"]["candidate_error"],
        "features": run["features"],
        "seconds": run["seconds"],
        "job seconds": time.perf_counter() - t0,
        "test value": run["value"],
        "chosen": {k: run[k] for k in ("nu", "iterations", "best_m", "lam", "epochs") if k in run},
    }
    if data["error"] is not None:
        row["new-data error"] = data["error"](data["load"](out))
    return row


def costs(data: dict[str, Any], models: dict[str, Path]) -> dict[str, dict[str, float]]:
    """Median µs per sample of each exported model (``learner``: one update and one prediction of the
    whole learner; ``map``: of the feature map and the engine alone, for dynamics), rounds interleaved."""
    loaded = {label: data["load"](path) for label, path in models.items()}
    steps = {(label, "learner"): lambda i, m=m: data["cost"](m, i) for label, m in loaded.items()}
    if data["map cost"] is not None:
        twins = {label: data["load"](path) for label, path in models.items()}
        steps.update({(label, "map"): data["map cost"](m) for label, m in twins.items()})
    times: dict[tuple[str, str], list[float]] = {key: [] for key in steps}
    n = data["n_cost"]
    for r in range(ROUNDS):
        for key, step in steps.items():
            t0 = time.perf_counter()
            for k in range(PER_ROUND):
                step((r * PER_ROUND + k) % n)
            times[key].append((time.perf_counter() - t0) / PER_ROUND * 1e6)
    out: dict[str, dict[str, float]] = {label: {} for label in loaded}
    for (label, part), t in times.items():
        out[label][part] = float(np.median(t))
    return out


def one_seed(seed: int, args: argparse.Namespace) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sets = {
            f"Panda {args.seconds:g} s": dynamics(seed, args.seconds, tmp),
            "digits": recognition(seed, tmp),
        }
        if args.demo_bag:
            sets["demo bag"] = demo_bag(args.demo_bag)
        for name, data in sets.items():
            for M in args.centers:
                models: dict[str, Path] = {}
                for label, method, epochs in runs(args):
                    out = tmp / f"{name.split()[0]}-{M}-{label.replace(' ', '_')}.npz"
                    row = one_job(data, method, M, epochs, seed, out)
                    rows.append({"seed": seed, "data": name, "M": M, "method": label, **row})
                    models[label] = out
                    print(
                        f"seed {seed} {name} M={M} {label}: held-out {row['held-out error']:.4g} "
                        f"new {row.get('new-data error', float('nan')):.4g} features {row['features']} "
                        f"{row['seconds']:.1f} s",
                        flush=True,
                    )
                if data["cost"] is not None:
                    us = costs(data, models)
                    for row in rows[-len(models) :]:
                        row["µs per sample"] = us[row["method"]]["learner"]
                        if "map" in us[row["method"]]:
                            row["map µs per sample"] = us[row["method"]]["map"]
    return rows


def _mean(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if key in r]
    return float(np.mean(values)) if values else float("nan")


def markdown(results: list[dict], args: argparse.Namespace, seconds: float, load: str) -> str:
    seeds = sorted({r["seed"] for r in results})
    lines = [
        "# Retraining with each offline method: SLKL, NYTRO and the m-path against Meanti's tuning",
        "",
        "Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_retraining_methods.py --seeds "
        f"{' '.join(map(str, seeds))} --centers {' '.join(map(str, args.centers))} --seconds {args.seconds:g}"
        f"{' --demo-bag ' + args.demo_bag if args.demo_bag else ''}` (torch on 1 thread)  ",
        f"Machine: {describe_machine()}; torch {torch.__version__}, CPU  ",
        f"Git: {git_head()}, load average before: {load}; total time {seconds:.0f} s",
        "",
        "What is run: the module docstring of `benchmarks/bench_retraining_methods.py`. Mean over "
        f"{len(seeds)} seed(s); held-out: the promotion gate's error on the bags' most recent 10 % "
        "(torque nMSE, or % misclassified: the gate's error rate × 100); new: on the new trajectory "
        "(dynamics) or the 20 % of digits "
        "never in the bag; features: the online map's size (m; SLKL's m₀ of M); time: the method's fit "
        "(the job's tuning time); cost: one update and one prediction of the exported model per sample, "
        "in the learner, µs (medians of interleaved rounds); map + engine: the part of it that scales "
        "with the map's size (dynamics: the residual's feature map, RLS update and prediction; the rest "
        "is the rigid-body regressor), in the same rounds.",
        "",
        "| data | M | method | held-out error | new-data error | features | time (s) | cost (µs/sample) "
        "| map + engine (µs/sample) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    keys = sorted({(r["data"], r["M"], r["method"]) for r in results}, key=lambda k: (k[0], k[1]))
    order = {label: i for i, (label, _, _) in enumerate(runs(args))}
    keys.sort(key=lambda k: (k[0], k[1], order.get(k[2], 99)))
    for data, M, method in keys:
        rows = [r for r in results if (r["data"], r["M"], r["method"]) == (data, M, method)]
        lines.append(
            f"| {data} | {M} | {method} | {_mean(rows, 'held-out error'):.4g} | "
            f"{_mean(rows, 'new-data error'):.4g} | {_mean(rows, 'features'):.0f} | "
            f"{_mean(rows, 'seconds'):.2f} | {_mean(rows, 'µs per sample'):.0f} "
            f"| {_mean(rows, 'map µs per sample'):.0f} |"
        )
    lines += [
        "",
        "Time to the same held-out error: for each other method, on each seed, the least tuning time of "
        "a Meanti budget (epochs " + ", ".join(map(str, sorted({*args.budgets, args.epochs}))) + ") whose "
        "held-out error was at most the method's (means over the seeds where one was):",
        "",
    ]
    lines += time_to_error(results, args)
    lines += ["", "Chosen (seed 0):", ""]
    for r in results:
        if r["seed"] == seeds[0] and not r["method"].startswith("nystrom ("):
            lines.append(f"- {r['data']}, M = {r['M']}, {r['method']}: {r['chosen']}")
    return "\n".join(lines) + "\n"


def time_to_error(results: list[dict], args: argparse.Namespace) -> list[str]:
    """Per data set, M and method (slkl, nytro, path): its time and held-out error, and the least
    time of a Meanti budget whose held-out error was as low, on the same seed (seeds where one was)."""
    lines = [
        "| data | M | method | its held-out error | its time (s) | seeds where a Meanti budget reached it "
        "| Meanti's least time to it (s) |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    groups = sorted({(r["data"], r["M"], r["method"]) for r in results if r["method"] in METHODS})
    for data, M, method in groups:
        mine = [r for r in results if (r["data"], r["M"], r["method"]) == (data, M, method)]
        reached = []
        for r in mine:
            meanti = [
                m["seconds"]
                for m in results
                if (m["seed"], m["data"], m["M"]) == (r["seed"], data, M)
                and m["method"].startswith("nystrom (")
                and m["held-out error"] <= r["held-out error"]
            ]
            if meanti:
                reached.append(min(meanti))
        least = f"{np.mean(reached):.2f}" if reached else "never"
        lines.append(
            f"| {data} | {M} | {method} | {_mean(mine, 'held-out error'):.4g} | {_mean(mine, 'seconds'):.2f} "
            f"| {len(reached)} of {len(mine)} | {least} |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--centers", type=int, nargs="+", default=[100, 300])
    ap.add_argument("--seconds", type=float, default=40.0, help="length of the logged Panda run")
    ap.add_argument("--epochs", type=int, default=100, help="Meanti's epochs (the job's default)")
    ap.add_argument("--budgets", type=int, nargs="*", default=[5, 10, 20, 50], help="fewer epochs, timed too")
    ap.add_argument("--demo-bag", help="the demo's bag directory (its /joint_states)")
    ap.add_argument("--quick", action="store_true", help="one seed, M = 100, 20 s, budgets 10")
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/retraining-methods.md"))
    ap.add_argument("--from-json", help="render the markdown of these results (the .json written by a run)")
    args = ap.parse_args()
    if args.from_json:  # the provenance lines of the run that measured them are kept
        results = json.loads(Path(args.from_json).read_text())
        before = Path(args.out).read_text().splitlines()
        lines = markdown(results, args, 0.0, "").splitlines()
        lines[2:5] = before[2:5]
        Path(args.out).write_text("\n".join(lines) + "\n")
        return
    if args.quick:
        args.seeds, args.centers, args.seconds, args.budgets = args.seeds[:1], [100], 20.0, [10]
    torch.set_num_threads(1)
    load = load_average()
    run_seeds(
        args.seeds,
        lambda seed: one_seed(seed, args),
        lambda results, seconds: markdown(results, args, seconds, load),
        args.out,
        flatten=True,
    )


if __name__ == "__main__":
    main()
