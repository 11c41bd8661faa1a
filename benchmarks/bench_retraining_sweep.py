"""Benchmark: the retraining export's two choices (residual λ multiplier, forgetting factor), swept.

For one robot and seed of ``bench_retraining.py`` (a 90 s log at 100 Hz, a 1 kg payload grasped at
54 s, a new 15 s trajectory with the payload): the Nyström residual is tuned (``proposed``, 400
centres, 40 epochs) on the log's older 80 %, then for every (multiplier of the tuned λ, forgetting
factor) the exported model is replayed

- on the older 80 % and scored on the most recent 20 % (what the pipeline chooses on), and
- on the whole log and scored on the new trajectory (what the robot gets),

both as mean torque nMSE. The pipeline's rule (the multiplier at the first factor, then the factor
at that multiplier, each by the recent-part error) is marked.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_retraining_sweep.py --robot ur5 --seed 0

Writes docs/benchmarks/retraining-sweep-<robot>.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from bench_retraining import ROBOTS  # benchmarks/ is sys.path[0]
from harness import cpu_model  # benchmarks/harness

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.dynamics import estimate_accelerations
from lifelong_learning.nystrom.export import export_inverse_dynamics, rigid_body_residuals
from lifelong_learning.nystrom.tuning import tune

ROOT = Path(__file__).resolve().parents[1]
SCALES = (1.0, 10.0, 100.0, 1000.0)
FORGETTING = (1.0, 0.9999, 0.9995, 0.999, 0.998)


def sweep(robot: str, seed: int) -> dict[tuple[float, float], tuple[float, float]]:
    """``{(multiplier, β): (recent-part nMSE, new-trajectory nMSE)}``."""
    simulation, urdf_path, joints, _ = ROBOTS[robot]
    urdf = Path(urdf_path()).read_text()
    log = simulation().run(90.0, seed=seed, log_every=5, payload_mass=1.0, payload_at=54.0)
    new = simulation().run(15.0, seed=seed + 1000, log_every=5, payload_mass=1.0, payload_at=0.0)
    qdd, qdd_new = (estimate_accelerations(x["t"], x["qd"]) for x in (log, new))
    n = log["t"].size
    old, recent, every = slice(0, round(0.8 * n)), slice(round(0.8 * n), n), slice(0, n)

    def part(rows: slice) -> list[np.ndarray]:
        return [log["q"][rows], log["qd"][rows], qdd[rows], log["tau"][rows]]

    _, X, Y = rigid_body_residuals(urdf, joints, *part(old))
    model = tune(X, Y, centers=400, epochs=40, device="cpu", seed=seed)
    out = {}
    for scale in SCALES:
        for beta in FORGETTING:
            q, qd, a, tau = part(recent)
            fit = export_inverse_dynamics(model, urdf, joints, *part(old), forgetting=beta, lam_scale=scale)
            r = float(normalized_mse(tau, fit.predict(q, qd, a)).mean())
            full = export_inverse_dynamics(
                model, urdf, joints, *part(every), forgetting=beta, lam_scale=scale
            )
            m = float(normalized_mse(new["tau"], full.predict(new["q"], new["qd"], qdd_new)).mean())
            out[(scale, beta)] = (r, m)
            print(f"{robot} seed {seed}: λ×{scale:g} β={beta}: recent {r:.4f}, new {m:.4f}", flush=True)
    return out


def pipeline_choice(results: dict[tuple[float, float], tuple[float, float]], betas: tuple) -> tuple:
    """The pipeline's rule restricted to the forgetting factors ``betas``."""
    scale = min(SCALES, key=lambda s: results[(s, betas[0])][0])
    return scale, min(betas, key=lambda b: results[(scale, b)][0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", choices=sorted(ROBOTS), default="panda")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    results = sweep(args.robot, args.seed)
    chosen_all = pipeline_choice(results, FORGETTING)
    chosen = pipeline_choice(results, (1.0, 0.9999, 0.9995))
    lines = [
        f"# Retraining export choices swept: {args.robot}, seed {args.seed}",
        "",
        "Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_retraining_sweep.py "
        f"--robot {args.robot} --seed {args.seed}`  ",
        f"Machine: {cpu_model()}; torch {torch.__version__}, CPU. "
        f"Total time {time.perf_counter() - t0:.0f} s.",
        "",
        f"{ROBOTS[args.robot][3]}. Mean torque nMSE, `recent / new`: the export replayed on the log's "
        "older 80 % and scored on its most recent 20 % / replayed on the whole log and scored on a new "
        "trajectory. **bold**: the pipeline's choice with the default factors (1, 0.9999, 0.9995); "
        "*italic*: its choice if 0.999 and 0.998 were offered too.",
        "",
        "| residual λ × | " + " | ".join(f"β = {b}" for b in FORGETTING) + " |",
        "|---|" + "---:|" * len(FORGETTING),
    ]
    for scale in SCALES:
        cells = []
        for beta in FORGETTING:
            r, m = results[(scale, beta)]
            cell = f"{r:.4f} / {m:.4f}"
            if (scale, beta) == chosen:
                cell = f"**{cell}**"
            if (scale, beta) == chosen_all and chosen_all != chosen:
                cell = f"*{cell}*"
            cells.append(cell)
        lines.append(f"| {scale:g} | " + " | ".join(cells) + " |")
    out = ROOT / f"docs/benchmarks/retraining-sweep-{args.robot}.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main()
