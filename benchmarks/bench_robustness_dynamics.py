"""Benchmark: how far do corrupted joint states move the online inverse-dynamics model?

A simulated Panda (:mod:`lifelong_learning.sim.panda`: friction, damping, a 1 kg payload grasped
at 60 % of the run) follows a random trajectory for ``--seconds`` at 100 Hz. Its joint states are
fed one at a time to the node's learner (``SemiparametricInverseDynamics`` with the node's
defaults, through :class:`~lifelong_learning.dynamics.guard.SampleGuard` as the node does:
admit → predict → residual test → update), once clean and once with a share of the samples
corrupted, each corrupt sample by one of

- ``byte glitch``: one joint's effort becomes ±1e6 N·m;
- ``effort spike``: one joint's effort becomes ±U(1.5, 5) × its limit;
- ``small spike``: one joint's effort moves by ±U(0.2, 0.8) × its limit (within the limits);
- ``velocity glitch``: one joint's velocity becomes ±U(0.5, 1.9) × its limit (within the gate);
- ``stuck``: the previous sample's values again, with a new stamp;
- ``swapped joints``: two neighbouring joints' values swapped in q, q̇ and τ;
- ``far stamp``: the stamp moved 10⁶ s ahead.

Each model then predicts a *new* trajectory (another seed, payload attached). Reported: mean
torque nMSE there, and the largest difference from the clean-stream model's predictions on it
[N·m], with the guard's gates on (the node's defaults) and off (plausibility margin ∞, no
residual test; the stamp handling stays on, else the first far stamp would refuse everything
after it).

With ``--bags``, the same clean and corrupted logs are also written as rosbag2 bags and retrained
from (``lifelong_learning.retraining.pipeline``, what ``lifelong-learning tune`` runs: bad
messages skipped, samples gated by the URDF limits, rigid-body residual outliers dropped), and the
retrained models are compared with the one retrained from the clean bag the same way.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_robustness_dynamics.py [--seeds 0 1 2] [--bags] [--quick]

Writes docs/benchmarks/robustness-dynamics.md (and .json).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from harness import describe_machine, run_seeds  # benchmarks/harness (sys.path[0] is benchmarks/)

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.dynamics import SemiparametricInverseDynamics, estimate_accelerations
from lifelong_learning.dynamics.guard import RefusedSampleError, SampleGuard
from lifelong_learning.dynamics.plausibility import JointLimits
from lifelong_learning.io.bags import write_joint_states
from lifelong_learning.retraining.job import TuningJob
from lifelong_learning.retraining.pipeline import run_job
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_path, panda_urdf_text

ROOT = Path(__file__).resolve().parents[1]
KINDS = (
    "byte glitch",
    "effort spike",
    "small spike",
    "velocity glitch",
    "stuck",
    "swapped joints",
    "far stamp",
)


def corrupt(log: dict[str, np.ndarray], share: float, limits: JointLimits, seed: int) -> tuple[dict, dict]:
    """A copy of ``log`` with ``share`` of its samples corrupted (one kind each); counts per kind."""
    rng = np.random.default_rng(seed)
    out = {k: np.array(v, dtype=np.float64, copy=True) for k, v in log.items()}
    n, d = out["q"].shape
    bad = rng.choice(np.arange(1, n), size=round(share * n), replace=False)
    counts = dict.fromkeys(KINDS, 0)
    for i in bad:
        kind = KINDS[rng.integers(len(KINDS))]
        counts[kind] += 1
        j, sign = int(rng.integers(d)), rng.choice([-1.0, 1.0])
        if kind == "byte glitch":
            out["tau"][i, j] = sign * 1e6
        elif kind == "effort spike":
            out["tau"][i, j] = sign * rng.uniform(1.5, 5.0) * limits.effort[j]
        elif kind == "small spike":
            out["tau"][i, j] += sign * rng.uniform(0.2, 0.8) * limits.effort[j]
        elif kind == "velocity glitch":
            out["qd"][i, j] = sign * rng.uniform(0.5, 1.9) * limits.velocity[j]
        elif kind == "stuck":
            for key in ("q", "qd", "tau"):
                out[key][i] = out[key][i - 1]
        elif kind == "swapped joints":
            k = (j + 1) % d
            for key in ("q", "qd", "tau"):
                out[key][i, [j, k]] = out[key][i, [k, j]]
        else:
            out["t"][i] += 1e6
    return out, counts


def learn(log: dict[str, np.ndarray], urdf: str, limits: JointLimits, gates: bool, k: float = 6.0) -> tuple:
    """The node's learner and guard fed ``log`` one sample at a time; (model, what the guard did)."""
    model = SemiparametricInverseDynamics(urdf, JOINT_NAMES)
    guard = SampleGuard(limits, outlier_k=k) if gates else SampleGuard(limits, margin=np.inf, outlier_k=0.0)
    events: dict[str, int] = {}
    for i in range(log["t"].size):
        q, qd, tau = log["q"][i], log["qd"][i], log["tau"][i]
        try:
            admitted = guard.admit(log["t"][i], q, qd, tau)
        except RefusedSampleError as exc:
            events[exc.reason] = events.get(exc.reason, 0) + 1
            continue
        reason = admitted.not_learned or guard.residual_refusal(tau, model.predict(q, qd, admitted.qdd))
        if reason is not None:
            events[reason] = events.get(reason, 0) + 1
            continue
        try:
            model.update(q, qd, admitted.qdd, tau)
        except ValueError as exc:  # what the node counts as "model rejected input"
            events[f"model refused: {exc}"[:60]] = events.get(f"model refused: {exc}"[:60], 0) + 1
    events.update({f"filter restart: {k}": v for k, v in guard.restarts.items()})
    return model, events


def retrain(log: dict[str, np.ndarray], folder: Path, name: str) -> tuple:
    """The model retrained from ``log`` written as a bag, and the report's skipped counts."""
    write_joint_states(folder / name, log["t"], JOINT_NAMES, log["q"], log["qd"], log["tau"])
    job = TuningJob(
        bags=[str(folder / name)],
        task="inverse-dynamics",
        out=str(folder / f"{name}.llm"),
        objectives=["proposed"],
        urdf=panda_urdf_path(),
        centers=400,
        epochs=40,
        device="cpu",
    )
    report = run_job(job)
    return SemiparametricInverseDynamics.load(job.out), report.get("skipped", {})


def bag_rows(seed: int, log: dict, new: dict, qdd_new: np.ndarray, shares: list[float], limits) -> list:
    """Retrained from clean and corrupted bags: nMSE on the new trajectory and Δ to the clean one."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        reference = None
        for share in [0.0, *shares]:
            stream, counts = corrupt(log, share, limits, seed=seed + 7) if share else (log, {})
            t0 = time.perf_counter()
            model, skipped = retrain(stream, Path(tmp), f"bag{int(share * 100)}")
            pred = model.predict(new["q"], new["qd"], qdd_new)
            reference = pred if reference is None else reference
            rows.append(
                {
                    "seed": seed,
                    "corrupted": share,
                    **scores(new, pred, reference),
                    "corruptions": counts,
                    "skipped": skipped,
                    "seconds": time.perf_counter() - t0,
                }
            )
            r = rows[-1]
            print(
                f"seed {seed} bag corrupted {share:.0%}: nMSE {r['nMSE new trajectory']:.4g}, "
                f"max |Δτ| {r['max |Δτ| vs clean [N·m]']:.3g} N·m; skipped {skipped} ({r['seconds']:.0f} s)",
                flush=True,
            )
    return rows


def one_seed(seed: int, seconds: float, shares: list[float], outlier_k: float, bags: bool) -> dict:
    urdf = panda_urdf_text()
    limits = JointLimits.from_urdf(urdf, JOINT_NAMES)
    log = PandaSimulation().run(seconds, seed=seed, log_every=5, payload_mass=1.0, payload_at=0.6 * seconds)
    log = {k: log[k] for k in ("t", "q", "qd", "tau")}
    new = PandaSimulation().run(15.0, seed=seed + 1000, log_every=5, payload_mass=1.0, payload_at=0.0)
    qdd_new = estimate_accelerations(new["t"], new["qd"])

    def predict(model):
        return model.predict(new["q"], new["qd"], qdd_new)

    rows = []
    clean, clean_events = learn(log, urdf, limits, gates=True, k=outlier_k)
    reference = predict(clean)
    for share in [0.0, *shares]:
        stream, counts = corrupt(log, share, limits, seed=seed + 7) if share else (log, {})
        for gates in (True, False):
            t0 = time.perf_counter()
            if share == 0 and gates:
                model, events = clean, clean_events
            else:
                model, events = learn(stream, urdf, limits, gates, outlier_k)
            pred = predict(model)
            rows.append(
                {
                    "seed": seed,
                    "corrupted": share,
                    "gates": "on" if gates else "off",
                    **scores(new, pred, reference),
                    "corruptions": counts,
                    "guard": events,
                    "seconds": time.perf_counter() - t0,
                }
            )
            r = rows[-1]
            print(
                f"seed {seed} corrupted {share:.0%} gates {r['gates']}: nMSE {r['nMSE new trajectory']:.4g}, "
                f"max |Δτ| {r['max |Δτ| vs clean [N·m]']:.3g} N·m; guard {events}",
                flush=True,
            )
    return {"rows": rows, "bags": bag_rows(seed, log, new, qdd_new, shares, limits) if bags else []}


def command(args: argparse.Namespace) -> str:
    """The flags of this run, as they would be typed."""
    flags = [f"--seeds {' '.join(map(str, args.seeds))}"]
    if args.seconds != 60.0 and not args.quick:
        flags.append(f"--seconds {args.seconds:g}")
    if args.shares != [0.01, 0.05]:
        flags.append(f"--shares {' '.join(f'{x:g}' for x in args.shares)}")
    if args.outlier_k != 6.0:
        flags.append(f"--outlier-k {args.outlier_k:g}")
    flags += [f for f, on in (("--bags", args.bags), ("--quick", args.quick)) if on]
    return " ".join(flags)


def scores(new: dict, pred: np.ndarray, reference: np.ndarray) -> dict:
    """Mean torque nMSE of ``pred`` on the new trajectory and its largest difference to ``reference``."""
    return {
        "nMSE new trajectory": float(normalized_mse(new["tau"], pred).mean()),
        "max |Δτ| vs clean [N·m]": float(np.max(np.abs(pred - reference))),
    }


def markdown(results: list[dict], args: argparse.Namespace, total: float) -> str:
    rows = [r for res in results for r in res["rows"]]
    lines = [
        "# Robustness: corrupted joint states and the online inverse-dynamics model",
        "",
        f"Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_robustness_dynamics.py {command(args)}`  ",
        f"Machine: {describe_machine()}. Total time {total:.0f} s.",
        "",
        f"Panda, {args.seconds:.0f} s at 100 Hz per stream (payload at 60 %), the node's learner and "
        "guard (SampleGuard: plausibility margin 1.0, residual outliers beyond 6 robust σ, stamp jumps "
        "restart the q̈ filter); evaluated on a new 15 s trajectory with the payload. Corruption kinds: "
        + ", ".join(KINDS)
        + " (one per corrupt sample, uniformly; see the script's docstring).",
        "",
        "| corrupted | gates | nMSE new trajectory (mean) | per seed | max abs Δτ vs clean [N·m] (worst) |",
        "|---:|---|---:|---|---:|",
    ]
    for share in sorted({r["corrupted"] for r in rows}):
        for gates in ("on", "off"):
            sel = [r for r in rows if r["corrupted"] == share and r["gates"] == gates]
            nmse = [r["nMSE new trajectory"] for r in sel]
            delta = max(r["max |Δτ| vs clean [N·m]"] for r in sel)
            per_seed = ", ".join(f"{v:.4g}" for v in nmse)
            lines.append(f"| {share:.0%} | {gates} | {np.mean(nmse):.4g} | {per_seed} | {delta:.3g} |")
    lines += ["", "What the guard did (seed of the first row, 5 % corrupted, gates on):", ""]
    worst = max(r["corrupted"] for r in rows)
    pick = next(r for r in rows if r["corrupted"] == worst and r["gates"] == "on")
    lines += [f"- corruptions injected: {pick['corruptions']}", f"- guard: {pick['guard']}"]
    bags = [r for res in results for r in res["bags"]]
    if bags:
        lines += [
            "",
            "## Retrained from bags (`--bags`)",
            "",
            "The same logs as rosbag2 bags, retrained with `lifelong_learning.retraining.pipeline` (proposed "
            "objective, 400 centres, 40 epochs); Δτ against the model retrained from the clean bag.",
            "",
            "| corrupted | nMSE new trajectory (mean) | per seed | max abs Δτ vs clean [N·m] (worst) |",
            "|---:|---:|---|---:|",
        ]
        for share in sorted({r["corrupted"] for r in bags}):
            sel = [r for r in bags if r["corrupted"] == share]
            nmse = [r["nMSE new trajectory"] for r in sel]
            per_seed = ", ".join(f"{v:.4g}" for v in nmse)
            delta = max(r["max |Δτ| vs clean [N·m]"] for r in sel)
            lines.append(f"| {share:.0%} | {np.mean(nmse):.4g} | {per_seed} | {delta:.3g} |")
        worst = max(r["corrupted"] for r in bags)
        lines += ["", f"Skipped by the pipeline (last seed, {worst:.0%}): {bags[-1]['skipped']}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--shares", type=float, nargs="+", default=[0.01, 0.05])
    ap.add_argument("--outlier-k", type=float, default=6.0, help="the guard's outlier_k (node default 6)")
    ap.add_argument("--bags", action="store_true", help="also retrain from clean and corrupted bags")
    ap.add_argument("--quick", action="store_true", help="one seed, 20 s streams (a smoke run)")
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/robustness-dynamics.md"))
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.seconds = args.seeds[:1], 20.0
    run_seeds(
        args.seeds,
        lambda seed: one_seed(seed, args.seconds, args.shares, args.outlier_k, args.bags),
        lambda results, seconds: markdown(results, args, seconds),
        None if args.quick else args.out,  # a smoke run prints only
        json_default=str,
    )


if __name__ == "__main__":
    main()
