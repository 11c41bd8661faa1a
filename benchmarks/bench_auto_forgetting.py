"""Benchmark: ``forgetting: auto`` on inverse dynamics: its update cost against one candidate, and
what it buys on a simulated Panda that grasps a payload (issue 27, item 6).

The node's model (``SemiparametricInverseDynamics`` with the node's defaults: 500 random features,
semiparametric) learns a MuJoCo Panda stream as the node does (every 4th sample of 1 kHz, i.e.
250 Hz, in blocks of 12, each block predicted before it is learned). Measured:

- the time of one block's update (``stage`` + ``commit``, weights solved) with forgetting 1.0, with
  a fixed 0.999 and with ``auto`` (one serving engine, five candidate factors raced on proxies of
  a quarter of the features), and each against 1.0's;
- the prequential nMSE (mean over the joints) over the stream after a ``--payload`` kg payload is
  grasped half-way, for each, and the factor ``auto`` serves at the end.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_auto_forgetting.py [--seconds 40] [--payload 3]

Writes docs/benchmarks/auto-forgetting.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from harness import describe_machine, provenance_line  # benchmarks/harness

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.dynamics import SemiparametricInverseDynamics
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = 12
#: the first version of ``auto`` (a full engine per candidate), measured with the same command at df2143f
BEFORE = "\n".join(
    [
        "Before (df2143f): `auto` ran a full 500-feature engine per candidate, all learning every block",
        "(the same command, the same machine, another day):",
        "",
        "| forgetting | update p50 [ms/block] | update p99 [ms/block] | p50 / forgetting 1.0's "
        "| prequential nMSE after the grasp | factor serving at the end |",
        "|---|---:|---:|---:|---:|---:|",
        "| 1.0 | 1.62 | 2.20 | 1.00 | 0.1039 | 1 |",
        "| 0.999 | 1.15 | 1.44 | 0.71 | 0.0066 | 0.999 |",
        "| auto | 6.62 | 9.08 | 4.09 | 0.0104 | 0.999 |",
        "",
    ]
)


def run(forgetting: float | str, log: dict, step: int) -> dict:
    model = SemiparametricInverseDynamics(
        panda_urdf_path(), JOINT_NAMES, n_features=500, forgetting=forgetting
    )
    idx = np.arange(0, log["t"].size, step)
    half = log["t"][idx] >= log["t"][-1] / 2
    predicted = np.empty((idx.size, len(JOINT_NAMES)))
    times = []
    for start in range(0, idx.size, BLOCK):
        rows = idx[start : start + BLOCK]
        prepared = model.prepare(log["q"][rows], log["qd"][rows], log["qdd"][rows])
        predicted[start : start + rows.size] = prepared.torque
        t0 = time.perf_counter()
        model.commit(model.stage(prepared, log["tau"][rows], solve_weights=True))
        times.append(time.perf_counter() - t0)
    tau = log["tau"][idx]
    return {
        "block_ms": 1e3 * float(np.median(times)),
        "block_p99_ms": 1e3 * float(np.percentile(times, 99)),
        "nmse_after": float(normalized_mse(tau[half], predicted[half]).mean()),
        "serving": model.serving_forgetting,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--payload", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "auto-forgetting.md")
    args = parser.parse_args()
    sim = PandaSimulation()
    log = sim.run(args.seconds, seed=3, payload_mass=args.payload, payload_at=args.seconds / 2)
    step = max(1, round(0.004 / float(np.median(np.diff(log["t"])))))  # 250 Hz
    rows, one = [], None
    for forgetting in (1.0, 0.999, "auto"):
        r = run(forgetting, log, step)
        one = r["block_ms"] if one is None else one
        rows.append(
            f"| {forgetting} | {r['block_ms']:.2f} | {r['block_p99_ms']:.2f} | {r['block_ms'] / one:.2f} | "
            f"{r['nmse_after']:.4f} | {r['serving']:g} |"
        )
        print(rows[-1], flush=True)
    text = "\n".join(
        [
            "# forgetting: auto, cost and benefit on a Panda that grasps a payload",
            "",
            "Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_auto_forgetting.py "
            f"--seconds {args.seconds:g} --payload {args.payload:g}`  ",
            f"Machine: {describe_machine()}  ",
            provenance_line(),
            "",
            f"MuJoCo Panda, {args.seconds:g} s of motion learned at 250 Hz in blocks of {BLOCK} (the node's "
            f"defaults: 500 random features, semiparametric); a {args.payload:g} kg payload grasped at "
            f"{args.seconds / 2:g} s. Update = `stage` + `commit` of one block, weights solved (the "
            "learning thread's work). nMSE: mean over the joints of the torques predicted before "
            "learning, over the second half (after the grasp).",
            "",
            "| forgetting | update p50 [ms/block] | update p99 [ms/block] | p50 / forgetting 1.0's "
            "| prequential nMSE after the grasp | factor serving at the end |",
            "|---|---:|---:|---:|---:|---:|",
            *rows,
            "",
            BEFORE,
        ]
    )
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
