"""Benchmark: the retraining job's peak memory against the size of its bag.

One simulated Panda log (``sim/panda.py``, 100 Hz), cut into bags of ``--rows`` joint states; the
inverse-dynamics job (``lifelong_learning.retraining.pipeline``; 10 centres, 2 epochs, one
forgetting factor and one λ multiplier, so that the data, not the tuning, dominate) runs on each,
reading in blocks of ``--block`` rows with a sample of ``--sample`` rows. Peak memory of Python
and NumPy allocations (``tracemalloc``; torch's own allocator is not traced, the tuning's tensors
are bounded by the sample) after a warm-up job (imports, type store). A job without the
``block``/``sample_rows`` fields (the commit before streaming, 47fed68) is measured as it is:

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/bench_retraining_memory.py
    mkdir /tmp/before && git archive 47fed68 lifelong_learning | tar -x -C /tmp/before
    OPENBLAS_NUM_THREADS=1 PYTHONPATH=/tmp/before python benchmarks/bench_retraining_memory.py \\
        --out docs/benchmarks/retraining-memory-before.md

Writes docs/benchmarks/retraining-memory.md (``--out``).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
import tracemalloc
from pathlib import Path

from harness import cpu_model  # benchmarks/harness (sys.path[0] is benchmarks/)

from lifelong_learning.io.bags import write_joint_states
from lifelong_learning.retraining.job import TuningJob
from lifelong_learning.retraining.pipeline import run_job
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_path

ROOT = Path(__file__).resolve().parents[1]


def job(tmp: Path, rows: int, args: argparse.Namespace) -> TuningJob:
    fields = {f.name for f in dataclasses.fields(TuningJob)}
    limits = {"block": args.block, "sample_rows": args.sample} if "block" in fields else {}
    return TuningJob(
        bags=[str(tmp / f"b{rows}")],
        task="inverse-dynamics",
        out=str(tmp / f"m{rows}.llm"),
        urdf=panda_urdf_path(),
        objectives=("proposed",),
        centers=10,
        epochs=2,
        device="cpu",
        forgetting=(1.0,),
        residual_regularization=(1.0,),
        replay_block=50,
        **limits,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[2000, 8000, 32000])
    ap.add_argument("--block", type=int, default=1000)
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/retraining-memory.md"))
    args = ap.parse_args()
    log = PandaSimulation().run(max(args.rows) / 100.0, seed=3, log_every=5)
    lines = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for n in args.rows:
            write_joint_states(
                tmp / f"b{n}", log["t"][:n], JOINT_NAMES, log["q"][:n], log["qd"][:n], log["tau"][:n]
            )
        run_job(job(tmp, min(args.rows), args))  # warm-up: imports, caches
        for n in args.rows:
            tracemalloc.start()
            t0 = time.perf_counter()
            report = run_job(job(tmp, n, args))
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            lines.append(f"| {n} | {report['n_train']} | {peak / 1e6:.1f} | {time.perf_counter() - t0:.0f} |")
            print(lines[-1], flush=True)
    streaming = "block" in {f.name for f in dataclasses.fields(TuningJob)}
    how = (
        f"streaming, blocks of {args.block} rows, a sample of {args.sample}" if streaming else "whole-log job"
    )
    text = "\n".join(
        [
            "# Retraining: peak memory against the size of the bag",
            "",
            "Command: `OPENBLAS_NUM_THREADS=1 PYTHONPATH=<checkout> python "
            f"benchmarks/bench_retraining_memory.py --rows {' '.join(map(str, args.rows))} --block "
            f"{args.block} --sample {args.sample}`  ",
            f"Machine: {cpu_model()}. The job: {how}.",
            "",
            "| joint states in the bag | training rows | peak (MB, tracemalloc) | time (s) |",
            "|---:|---:|---:|---:|",
            *lines,
            "",
        ]
    )
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
