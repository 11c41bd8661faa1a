"""``lifelong-learning demo``: the main job on embedded defaults (see lifelong_learning.demo)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HELP = "run the learners online over DDS against the simulated robot and camera; write a report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a short run (about a minute), as in CI")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="run folder (default: runs/<date-time> under the current directory)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the objects, views and trajectories")
    parser.add_argument(
        "--realtime-priority",
        type=int,
        default=0,
        metavar="N",
        help="run inverse_dynamics' answering path at SCHED_FIFO priority N (1-99; needs rtprio), as on a "
        "robot; 0 (default): normal scheduling",
    )


def run(args: argparse.Namespace) -> int:
    from lifelong_learning.demo.config import DemoConfig
    from lifelong_learning.demo.run import DemoRun

    if not 0 <= args.realtime_priority <= 99:
        print(f"error: --realtime-priority must be in [0, 99], got {args.realtime_priority}", file=sys.stderr)
        return 2
    cfg = DemoConfig.quick() if args.quick else DemoConfig()
    cfg.seed = args.seed
    cfg.realtime_priority = args.realtime_priority
    out = (args.out or Path("runs") / time.strftime("%Y%m%d-%H%M%S")).resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"error: cannot create the run folder {out}: {exc}", file=sys.stderr)
        return 2
    try:
        report = DemoRun(cfg, out).run()
    except RuntimeError as exc:  # a node did not start or died: its log is in the run folder
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"report written to {report}")
    return 0
