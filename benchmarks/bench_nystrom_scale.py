"""Nyström KRR at scale, streamed, on one process or several (``torchrun``): time, memory, error.

One process::

    python benchmarks/bench_nystrom_scale.py --rows 1000000 --out /tmp/scale-1.json

Two processes on this machine (gloo; each takes a contiguous half of the rows)::

    torchrun --standalone --nproc-per-node=2 benchmarks/bench_nystrom_scale.py --rows 1000000 \\
        --out /tmp/scale-2.json --compare /tmp/scale-1.npz

The data are generated a block at a time (``--block`` rows; block ``b`` from the seed and ``b``,
so every process can make its own blocks and none holds all of them): ``x ~ U(−2, 2)^d``,
``y = sin(2x₀)cos(x₁) + 0.5x₂² − 0.3x₃x₄ + ε``, ``ε ~ N(0, 0.1²)`` (the noise floor of the test
MSE is 0.01; only five of the ``d`` inputs matter). Hyperparameters: λ and per-dimension
length-scales tuned with ``--objective`` (default GCV: with ``--rows 20000 --centers 300 --block
5000 --tune-rows 3000 --tune-centers 200`` the proposed objective gave a test MSE of 0.183, GCV
0.113) on ``--tune-rows`` rows and ``--tune-centers``
centres (spread over the processes: the tuning runs across them too), then the fit with ``--centers``
centres (random draws of ``x``) by the direct solver on every row: one Cholesky factorization of
the m×m system, exact up to rounding, so converged by construction (no iteration cap). ``--regroup`` (one
process) also fits from the sums of the two halves of the rows added, as two processes would, to
show how far rounding alone moves the fit. Threads are
pinned to one per process, so the two-process run uses the machine's two cores and the
one-process run one of them. Peak RSS is ``ru_maxrss`` of each process.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from harness import describe_machine  # noqa: E402 - benchmarks/harness

from lifelong_learning.nystrom import NystromKRR, tune  # noqa: E402
from lifelong_learning.nystrom.distributed import JobProgress, contiguous_shares, joined  # noqa: E402
from lifelong_learning.nystrom.sums import kernel_sums  # noqa: E402

NOISE = 0.1
#: block numbers of the tuning sample and the test set (the data blocks are 0, 1, ...)
TUNE, TEST = 2**31, 2**31 + 1


def block(seed: int, b: int, rows: int, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, noisy targets and noise-free targets of block ``b``."""
    rng = np.random.default_rng([seed, b])  # b >= 0: data; TUNE, TEST: the other sets
    X = rng.uniform(-2, 2, size=(rows, d))
    f = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.5 * X[:, 2] ** 2 - 0.3 * X[:, 3] * X[:, 4]
    return X, (f + NOISE * rng.normal(size=rows))[:, None], f[:, None]


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=21)
    ap.add_argument("--centers", type=int, default=2000)
    ap.add_argument("--block", type=int, default=50_000)
    ap.add_argument("--tune-rows", type=int, default=5000)
    ap.add_argument("--tune-centers", type=int, default=300)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--objective", default="gcv", help="a tuning objective that runs across processes")
    ap.add_argument("--test", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="JSON of the results (rank 0); predictions beside it (.npz)")
    ap.add_argument("--compare", help="an .npz of another run's test predictions: the largest difference")
    ap.add_argument(
        "--regroup",
        action="store_true",
        help="one process: fit again from the sums of the first and of the second half of the blocks, "
        "added (what two processes do), and print the largest relative difference of the predictions",
    )
    ap.add_argument("--no-progress", action="store_true", help="no progress bar of the fit")
    return ap.parse_args()


def data(args: argparse.Namespace, numbers: range) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Rows and noisy targets of the data blocks ``numbers``."""
    for b in numbers:
        X, Y, _ = block(args.seed, b, min(args.block, args.rows - b * args.block), args.d)
        yield torch.as_tensor(X), torch.as_tensor(Y)


def tuned_on_sample(args: argparse.Namespace, group: Any) -> tuple[Any, float]:
    """1. Tuning on a sample (block TUNE), split over the processes; the model and its seconds."""
    Xs, Ys, _ = block(args.seed, TUNE, args.tune_rows, args.d)
    part = contiguous_shares([1.0] * args.tune_rows, group.world_size)[group.rank]
    t0 = time.perf_counter()
    tuned = tune(
        Xs[part.start : part.stop],
        Ys[part.start : part.stop],
        centers=args.tune_centers,
        objective=args.objective,
        epochs=args.epochs,
        lr=args.lr,
        seed=args.seed,
        group=group,
    )
    return tuned, time.perf_counter() - t0


def fresh_centres(args: argparse.Namespace) -> np.ndarray:
    """The fit's m centres: random draws of x."""
    return np.random.default_rng([args.seed, TEST + 1]).uniform(-2, 2, size=(args.centers, args.d))


def fitted(args: argparse.Namespace, group: Any, mine: range, tuned: Any) -> tuple[NystromKRR, float, list]:
    """2. The fit on every row, streamed, with m fresh centres: the model, its seconds and each
    process's figures."""
    model = NystromKRR(
        centers=fresh_centres(args), lengthscale=tuned.lengthscale_.numpy(), lam=tuned.lam, solver="direct"
    )
    rows = 0

    def blocks() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        nonlocal rows
        for X, Y in data(args, mine):
            rows += X.shape[0]
            yield X, Y
            progress.add(X.shape[0])  # once the block's sums are added

    t0 = time.perf_counter()
    # the whole job's rows (every process's), with an ETA, on rank 0
    with JobProgress(group, args.rows, "fit", unit="row", enabled=not args.no_progress) as progress:
        model.fit_blocks(blocks, group, outputs=1)
    t_fit = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    per_rank = group.all_gather({"rank": group.rank, "rows": rows, "fit_s": t_fit, "peak_rss_gb": rss})
    return model, t_fit, per_rank


def main() -> int:
    args = parse_args()
    torch.set_num_threads(1)
    n_blocks = -(-args.rows // args.block)
    with joined(backend="gloo") as group:
        mine = contiguous_shares(
            [min(args.block, args.rows - b * args.block) for b in range(n_blocks)], group.world_size
        )[group.rank]
        tuned, t_tune = tuned_on_sample(args, group)
        model, t_fit, per_rank = fitted(args, group, mine, tuned)
        if not group.is_main:
            return 0
        Xt, Yt, Ft = block(args.seed, TEST, args.test, args.d)
        pred = model.predict(Xt)
        result = {
            "command": " ".join(sys.argv),
            "machine": describe_machine(),
            "torch": torch.__version__,
            "world_size": group.world_size,
            "n": args.rows,
            "d": args.d,
            "m": args.centers,
            "block": args.block,
            "tuning": {
                "objective": args.objective,
                "rows": args.tune_rows,
                "centers": args.tune_centers,
                "epochs": tuned.tuning_.epochs,
                "seconds": t_tune,
                "lam": tuned.lam,
            },
            "fit_seconds": t_fit,
            "per_rank": per_rank,
            "test_mse": float(np.mean((pred - Yt) ** 2)),
            "test_mse_vs_truth": float(np.mean((pred - Ft) ** 2)),
            "noise_var": NOISE**2,
            "solver": model.solver_used_,
        }
        if args.regroup and group.world_size == 1:
            halves = [
                kernel_sums(data(args, part), model.centers_, model.lengthscale_)
                for part in contiguous_shares([1.0] * n_blocks, 2)
            ]
            regrouped = NystromKRR(
                centers=fresh_centres(args), lengthscale=tuned.lengthscale_.numpy(), lam=tuned.lam
            )
            other = regrouped.fit_sums(halves[0] + halves[1]).predict(Xt)
            result["regroup_max_rel_diff"] = float(np.max(np.abs(pred - other)) / np.max(np.abs(pred)))
        if args.compare:
            other = np.load(args.compare)["pred"]
            result["max_rel_diff_vs"] = {
                "file": args.compare,
                "value": float(np.max(np.abs(pred - other)) / np.max(np.abs(other))),
            }
        out = Path(args.out)
        out.write_text(json.dumps(result, indent=2))
        np.savez(out.with_suffix(".npz"), pred=pred)
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
