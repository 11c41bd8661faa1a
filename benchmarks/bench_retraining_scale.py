"""Classification retraining from bags at scale, on one process and on several (``torchrun``).

::

    python benchmarks/bench_retraining_scale.py --messages 1000000 --root /tmp/scale-bags \\
        --out /tmp/retraining-scale.json

writes ``--bags`` rosbag2 bags (MCAP) of ``--messages`` LabeledFeatures messages in all under
``--root`` (kept, and reused by a later run with the same sizes), then runs the command a user
runs, ``lifelong-learning tune BAG... --task classification``, once per entry of
``--processes`` (``1``: the plain command; ``N``: under ``torchrun --standalone
--nproc-per-node=N``), one thread per process, and reports for each: the wall time of the
command, each process's share of the messages and its peak resident memory (from the job's
report), the job's test error and the exported model's error on ``--fresh`` new samples of the same
distribution that no bag holds. The models of the runs are compared on those samples (largest
relative difference of the scores).

The data: ``--classes`` classes, each a mixture of two Gaussian blobs (unit variance) in ``--d``
dimensions, centres drawn once from the seed; bag ``b`` from the seed and ``b``. The job keeps
its defaults but for ``--centers``, ``--epochs`` and ``--sample-rows`` (the tuning sample).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from harness import describe_machine  # noqa: E402 - benchmarks/harness

from lifelong_learning.io.bags import write_labeled_features  # noqa: E402
from lifelong_learning.learners.rlsc import IncrementalRLSC  # noqa: E402

FRESH = 10**6  # the seed offset of the new samples (the bags use 0, 1, ...)


def samples(seed: int, part: int, n: int, d: int, classes: int) -> tuple[np.ndarray, list[str]]:
    """``n`` samples of part ``part`` (a bag, or :data:`FRESH`)."""
    centres = np.random.default_rng(seed).normal(scale=0.6, size=(2 * classes, d))
    rng = np.random.default_rng([seed, part])
    blob = rng.integers(0, 2 * classes, size=n)
    X = centres[blob] + rng.normal(size=(n, d))
    return X, [f"class{k % classes}" for k in blob]


def make_bags(args: argparse.Namespace) -> list[Path]:
    """The bags (written unless the root holds them for these sizes already)."""
    root = Path(args.root)
    stamp = root / "sizes.json"
    sizes = {
        "messages": args.messages,
        "bags": args.bags,
        "d": args.d,
        "classes": args.classes,
        "seed": args.seed,
    }
    paths = [root / f"bag{b:03d}" for b in range(args.bags)]
    if stamp.exists() and json.loads(stamp.read_text()) == sizes and all(p.is_dir() for p in paths):
        return paths
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    for b, path in enumerate(paths):
        n = args.messages // args.bags + (b < args.messages % args.bags)
        X, labels = samples(args.seed, b, n, args.d, args.classes)
        write_labeled_features(path, X, labels)
    stamp.write_text(json.dumps(sizes))
    print(
        f"wrote {args.messages} messages in {args.bags} bags in {time.perf_counter() - t0:.0f} s", flush=True
    )
    return paths


def run(args: argparse.Namespace, bags: list[Path], processes: int, out: Path) -> dict:
    """One run of the command; its report, with the wall time."""
    options = [
        "--task",
        "classification",
        "--centers",
        str(args.centers),
        "--epochs",
        str(args.epochs),
        "--sample-rows",
        str(args.sample_rows),
        "--device",
        "cpu",
        "--out",
        str(out),
    ]
    command = ["tune", *map(str, bags), *options]
    if processes == 1:
        argv = [sys.executable, "-m", "lifelong_learning.cli", *command]
    else:
        torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
        argv = [
            torchrun,
            "--standalone",
            f"--nproc-per-node={processes}",
            "-m",
            "lifelong_learning.cli",
            *command,
        ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    res = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} ... failed ({res.returncode}):\n{res.stdout[-3000:]}")
    report = json.loads(out.with_name(out.name + ".report.json").read_text())
    return {"processes": processes, "wall_s": wall, "report": report}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--bags", type=int, default=8)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--centers", type=int, default=500)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--sample-rows", type=int, default=20_000)
    ap.add_argument("--fresh", type=int, default=20_000, help="new samples the exported models are scored on")
    ap.add_argument("--processes", default="1,2", help="comma-separated process counts, one run each")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--root", required=True, help="folder of the bags (kept for the next run)")
    ap.add_argument("--out", required=True, help="JSON of the results; the models beside it")
    args = ap.parse_args()
    bags = make_bags(args)
    X, labels = samples(args.seed, FRESH, args.fresh, args.d, args.classes)
    out = Path(args.out)
    runs, scores = [], []
    for processes in (int(p) for p in args.processes.split(",")):
        result = run(args, bags, processes, out.with_name(f"{out.stem}-{processes}.llm"))
        model = IncrementalRLSC.load(result["report"]["model"])
        scores.append((model.classes_.tolist(), model.decision_function(X)))
        result["fresh_error_pct"] = 100.0 * float(
            np.mean(model.predict(X) != np.asarray(labels, dtype=object))
        )
        r = result.pop("report")
        result.update(
            samples_per_rank=r["samples_per_rank"],
            peak_rss_mb_per_rank=r["peak_rss_mb_per_rank"],
            tuning_rows=r["tuning_rows"],
            tuning_s=r["objectives"][r["exported_objective"]]["seconds"],
            test_error_pct=r["objectives"][r["exported_objective"]]["value"],
            exported_samples=r["exported_samples"],
        )
        runs.append(result)
        print(json.dumps(result), flush=True)
    (classes0, s0), diffs = scores[0], []
    for classes, s in scores[1:]:
        assert classes == classes0, "the runs' models order their classes differently"
        diffs.append(float(np.max(np.abs(s - s0)) / np.max(np.abs(s0))))
    summary = {
        "command": " ".join(sys.argv),
        "machine": describe_machine(),
        "messages": args.messages,
        "bags": args.bags,
        "d": args.d,
        "classes": args.classes,
        "centers": args.centers,
        "runs": runs,
        "max_rel_diff_vs_first_run": diffs,
    }
    out.write_text(json.dumps(summary, indent=2))
    for r in runs:
        print(
            f"| {args.messages:,} | {r['processes']} | {r['wall_s']:.0f} | {r['samples_per_rank']} | "
            f"{r['peak_rss_mb_per_rank']} | {r['test_error_pct']:.2f} | {r['fresh_error_pct']:.2f} |"
        )
    print(f"largest relative difference of the scores against the first run: {diffs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
