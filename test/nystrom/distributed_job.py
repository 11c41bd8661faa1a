"""Run by the tests under ``torchrun``: tune and fit a Nyström KRR on this process's share of rows.

``python distributed_job.py DATA.npz OUT.npz OBJECTIVE [--fail-rank R]``: every process reads the
rows of DATA.npz (``X``, ``Y``), keeps its contiguous share (processes get unequal shares on
purpose) and tunes with ``group`` from :func:`~lifelong_learning.nystrom.distributed.joined`;
rank 0 writes the predictions on ``X_test``, the tuning history and the world size to OUT.npz.
With ``--fail-rank R``, process ``R`` gets a NaN in its rows (a corrupt share).
"""

from __future__ import annotations

import argparse

import numpy as np

from lifelong_learning.core.process import leave
from lifelong_learning.nystrom import tune
from lifelong_learning.nystrom.distributed import JobProgress, contiguous_shares, joined


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("objective")
    ap.add_argument("--fail-rank", type=int, default=-1)
    args = ap.parse_args()
    data = np.load(args.data)
    X, Y = data["X"], data["Y"]
    with joined(backend="gloo") as group:
        weights = np.where(np.arange(X.shape[0]) < X.shape[0] // 3, 2.0, 1.0)  # unequal shares
        share = contiguous_shares(weights, group.world_size)[group.rank]
        Xr, Yr = X[share.start : share.stop].copy(), Y[share.start : share.stop]
        if group.rank == args.fail_rank:
            Xr[0, 0] = np.nan
        with JobProgress(group, X.shape[0], "rows read", unit="row") as progress:
            progress.add(len(share))  # the main process's bar: every process's rows
        model = tune(Xr, Yr, centers=12, objective=args.objective, epochs=8, lr=0.1, seed=1, group=group)
        add = group.counter("rows")  # no collective: each adds when it gets here
        add(len(share))
        group.all_gather(None)  # every process has added
        counted = add(0)
        decisions = group.all_gather(group.decided(group.rank == 0))  # the main process's decision
        if group.is_main:
            np.savez(
                args.out,
                pred=model.predict(data["X_test"]),
                history=np.asarray(model.tuning_.history),
                world_size=group.world_size,
                rows=len(share),
                counted=counted,
                decisions=np.asarray(decisions),
            )
    return 0


if __name__ == "__main__":
    leave(main())  # as lifelong-learning does under torchrun: no finalization after the group is gone
