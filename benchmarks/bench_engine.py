"""The learning engine at BLAS speed: rank-1 and rank-k factor updates, several λ.

Every figure is a ratio against a floor measured in the same run (the machine is shared):

(a) per labeled sample, ``IncrementalRLSC.partial_fit(x, y)`` at d = 1280, T = 30, in steady state,
    against one ``scipy.linalg.blas.dsyr`` of a d × d matrix: one λ; five λ exact (every λ its own
    factor, validation scores kept exact, thesis §7.6.3); five λ with a shared factor
    (``selection_every``), whose selections are included in its mean (amortized) cost;
(b) a block, ``partial_fit`` of 9,000 × 784 samples (MNIST's size) with one and five λ, against one
    Gram matrix ``XᵀX`` (dsyrk) plus five Cholesky factorizations (dpotrf) of the same data; and
    ``RecursiveRLS.update`` of the block (rank-k) against the same rows swept by Givens (rank-1);
(c) accuracy, the thesis' Table 7.1 protocol (benchmarks/bench_rlsc.py) on sklearn digits: RC with
    every λ exact against RC with a shared factor, same stream, same seeds.

Usage: ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_engine.py [--quick] [--out FILE]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.linalg import lapack
from scipy.linalg.blas import dsyr

from lifelong_learning.learners.cholesky import chol_update_rows, gram
from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.learners.rlsc import IncrementalRLSC

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from harness import provenance_line  # noqa: E402 - benchmarks/harness

LAMBDAS5 = np.logspace(-1, 3, 5)  # the object_recognition node's default candidates


def per_sample(d: int, T: int, n_pre: int, n_measure: int, **kwargs: object) -> dict[str, float]:
    """partial_fit of one sample after n_pre: median, mean (amortized), p99 [s]; and dsyr's median."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(T, d)) / np.sqrt(d)
    labels = rng.integers(0, T, n_pre + n_measure)
    labels[:T] = np.arange(T)
    X = centres[labels] + rng.normal(size=(labels.size, d)) / np.sqrt(d)
    clf = IncrementalRLSC(**kwargs).partial_fit(X[:n_pre], labels[:n_pre])
    A = np.asfortranarray(X[:n_pre].T @ X[:n_pre] + np.eye(d))
    times, syr = [], []
    for i in range(n_pre, n_pre + n_measure):  # interleaved with the floor: the same machine state
        t = time.perf_counter()
        clf.partial_fit(X[i], labels[i])
        times.append(time.perf_counter() - t)
        t = time.perf_counter()
        dsyr(1e-6, X[i], a=A, overwrite_a=True)
        syr.append(time.perf_counter() - t)
    a = np.asarray(times)
    return {"median": float(np.median(a)), "mean": float(a.mean()), "p99": float(np.percentile(a, 99)),
            "dsyr": float(np.median(syr))}  # fmt: skip


def block(n: int, d: int, T: int) -> dict[str, float]:
    rng = np.random.default_rng(1)
    X = rng.random((n, d))
    y = rng.integers(0, T, n)
    t = time.perf_counter()
    G = gram(X)
    for lam in LAMBDAS5:
        lapack.dpotrf(G + lam * np.eye(d), lower=0)
    floor = time.perf_counter() - t
    out = {"floor": floor}
    for name, kwargs in (
        ("one λ", {"lambdas": 1.0}),
        ("5 λ exact", {"lambdas": LAMBDAS5, "alpha": "auto"}),
        ("5 λ shared", {"lambdas": LAMBDAS5, "alpha": "auto", "selection_every": 300}),
    ):
        t = time.perf_counter()
        IncrementalRLSC(**kwargs).partial_fit(X, y)
        out[name] = time.perf_counter() - t
    E = np.eye(T)[y]
    rls = RecursiveRLS(d, T, 1.0)
    t = time.perf_counter()
    rls.update(X, E)
    out["rank-k update"] = time.perf_counter() - t
    R = np.sqrt(1.0) * np.eye(d)
    t = time.perf_counter()
    chol_update_rows(R, X.copy())
    out["rank-1 sweeps"] = time.perf_counter() - t
    out["rank-k vs rank-1 max rel. diff of the factor"] = float(
        np.abs(rls.cholesky_factor - R).max() / np.abs(R).max()
    )
    return out


def accuracy(trials: int, selection_every: int, objects: bool = False) -> str:
    import bench_rlsc

    if objects:  # EfficientNet-Lite0 features (d = 1280) of 30 rendered objects, 220 views each
        X, y = bench_rlsc.object_features(Path("/tmp/rlsc_bench_object_features.npz"), 30, 220)
    else:
        X, y = bench_rlsc.digits_data()
    rows = [
        "| n_imb | RC exact total | RC shared total | RC exact rare | RC shared rare | λ exact / shared |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    results = {}
    for every in (0, selection_every):
        out, checkpoints, chosen = bench_rlsc.table_protocol(
            X, y, 100, 50, trials, int(objects), "cycle", selection_every=every, methods=("RC",)
        )
        results[every] = (out, chosen)
    for k in checkpoints:
        cells = [str(k)]
        for part in (0, 1):
            for every in (0, selection_every):
                v = 100 * np.array(results[every][0]["RC"][k][part])
                cells.append(f"{v.mean():.1f} ± {v.std():.1f}")
        lams = [np.median([c[0] for c in results[e][1][k]]) for e in (0, selection_every)]
        cells.append(f"{lams[0]:g} / {lams[1]:g}")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def accuracy_sections(selection_every: int, objects: bool) -> list[str]:
    """(c) on digits, and on the rendered objects' CNN features with ``objects``."""
    title = f"RC exact vs shared (selection_every={selection_every})"
    datasets = [("sklearn digits", False)]
    if objects:
        datasets.append(("30 rendered objects (EfficientNet-Lite0 int8 features, d = 1280)", True))
    out = []
    for name, on_objects in datasets:
        out += [f"\n### (c) Table 7.1 protocol, {name}, 10 trials: {title}\n",
                accuracy(10, selection_every, objects=on_objects)]  # fmt: skip
        print(out[-1], flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--accuracy-only", action="store_true", help="only (c)")
    parser.add_argument("--selection-every", type=int, default=300)
    parser.add_argument("--objects", action="store_true", help="(c) also on rendered objects' CNN features")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    lines = [provenance_line() + "\n"]
    d, n_meas = 1280, (150 if args.quick else 600)
    if args.accuracy_only:
        lines += accuracy_sections(args.selection_every, args.objects)
        if args.out is not None:
            with open(args.out, "a", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        return 0
    lines += ["\n### (a) One labeled sample at d = 1280, T = 30\n",
              "| model | median [ms] | mean (amortized) [ms] | p99 [ms] | dsyr [ms] | median / dsyr | "
              "mean / one λ's mean |", "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    one = None
    for name, kwargs in (
        ("one λ", {"lambdas": 1.0}),
        ("5 λ exact", {"lambdas": LAMBDAS5, "alpha": "auto"}),
        (f"5 λ shared (selection_every={args.selection_every})",
         {"lambdas": LAMBDAS5, "alpha": "auto", "selection_every": args.selection_every}),
    ):  # fmt: skip
        r = per_sample(d, 30, 1500, n_meas, **kwargs)
        one = one or r
        lines.append(
            f"| {name} | {1e3 * r['median']:.3f} | {1e3 * r['mean']:.3f} | {1e3 * r['p99']:.3f} | "
            f"{1e3 * r['dsyr']:.3f} | {r['median'] / r['dsyr']:.2f} | {r['mean'] / one['mean']:.2f} |"
        )
        print(lines[-1], flush=True)
    b = block(9000 if not args.quick else 3000, 784, 10)
    title = "A block of 9,000 × 784 (10 classes)" if not args.quick else "3,000 × 784"
    lines += [f"\n### (b) {title}\n", "| what | seconds | × floor (one Gram + 5 Cholesky) |",
              "|---|---:|---:|", f"| floor: dsyrk + 5 dpotrf | {b['floor']:.3f} | 1.00 |"]  # fmt: skip
    for name in ("one λ", "5 λ exact", "5 λ shared", "rank-k update", "rank-1 sweeps"):
        lines.append(f"| {name} | {b[name]:.3f} | {b[name] / b['floor']:.2f} |")
        print(lines[-1], flush=True)
    lines.append(
        f"\nrank-k against rank-1 sweeps: largest difference of the factors "
        f"{b['rank-k vs rank-1 max rel. diff of the factor']:.1e} (relative to the largest entry)\n"
    )
    if not args.quick:
        lines += accuracy_sections(args.selection_every, args.objects)
    text = "\n".join(lines) + "\n"
    if args.out is not None:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
