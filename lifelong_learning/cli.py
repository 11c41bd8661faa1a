"""The ``lifelong-learning`` command: offline work and running nodes without ROS tooling.

Sub-commands live in :mod:`lifelong_learning.commands` (one module each, the modules that define
``HELP``) and are found at run time; ``lifelong-learning --help`` lists them.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from lifelong_learning import __version__
from lifelong_learning.core.process import launched_by_torchrun, leave


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="lifelong-learning",
        description="Lifelong robot learning: online learners, offline retraining from rosbags.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    import lifelong_learning.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"lifelong_learning.commands.{info.name}")
        if not hasattr(mod, "HELP"):  # a module the sub-commands share, e.g. system_config
            continue
        name = getattr(mod, "NAME", info.name.replace("_", "-"))
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "_run"):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130


def entry() -> None:
    """The ``lifelong-learning`` command: :func:`main`, then the process ends with its status; a
    process of a ``torchrun`` job (its group torn down, its files written) without the interpreter's
    finalization (:mod:`lifelong_learning.core.process` says why)."""
    status = main()
    if launched_by_torchrun():
        leave(status)
    sys.exit(status)


if __name__ == "__main__":
    entry()
