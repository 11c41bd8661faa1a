"""``lifelong-learning up``: start the nodes configured in ROS 2 params files, stop them with a checkpoint.

The files are standard ROS 2 parameter files; which node a key names and what is checked is in
:mod:`lifelong_learning.commands.system_config`. The nodes to start are those the files name
(``--nodes`` picks some, or adds nodes that run on their defaults). Each node is given its shipped
defaults ``config/<node>.yaml`` first, then the files in order, so a system file holds only what
differs (see ``config/robot.yaml``). Everything is checked before anything starts; errors exit
with status 2 and name the file, node and parameter.

Modes:
- default: every node in this one process, each on a thread of its own with the executor of its
  executable (:func:`lifelong_learning.nodes.runner.run_nodes`);
- ``--processes``: one child process per node, their output prefixed with ``[node]``; a child
  that exits is reported with its exit status, the others keep running (the processes and
  signals: :mod:`lifelong_learning.nodes.supervisor`).

Large messages: unless ``FASTDDS_DEFAULT_PROFILES_FILE`` is set already (then it is kept),
``up`` sets it to the shipped Fast DDS profile ``config/fastdds_large_messages.xml`` for the
nodes it starts, in this process and in the children alike
(:func:`lifelong_learning.nodes.supervisor.middleware_environment`).

Ctrl-C, SIGTERM or SIGHUP (unless ignored) stops every node with a final checkpoint of each
learner (in ``--processes`` mode: one SIGINT to each child, then a wait of ``--stop-timeout``
seconds before SIGKILL; the children run in their own session, so that a terminal's Ctrl-C
reaches them only through ``up``, and a SIGKILL of ``up`` leaves them running). The exit
status is 0 when every node stopped cleanly, non-zero otherwise.
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys

from lifelong_learning.commands.system_config import ConfigError, SystemConfig, load_system
from lifelong_learning.nodes import catalog
from lifelong_learning.nodes.supervisor import (
    FASTDDS_PROFILES_VARIABLE,
    NodeProcess,
    StopSignals,
    middleware_environment,
    node_command,
    stop_all,
)

__all__ = [
    "ConfigError",
    "SystemConfig",
    "add_arguments",
    "load_system",
    "run",
    "run_in_one_process",
    "run_in_processes",
]

NAME = "up"
HELP = "start the nodes configured in ROS 2 params files (one process or one per node); Ctrl-C checkpoints"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``up``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        f"{HELP}.\n\n"
        "PARAMS_YAML are ROS 2 params files (node_name or /**/node_name: {ros__parameters: {...}};\n"
        "'/**' entries apply to every node). Each node first gets its shipped defaults\n"
        "config/<node>.yaml, so these files only need what differs. Names and types are checked\n"
        "before anything starts.\n\n"
        "example: lifelong-learning up config/robot.yaml --nodes object_recognition,feature_extractor"
    )
    parser.add_argument("params_files", nargs="+", metavar="PARAMS_YAML", help="ROS 2 params files")
    parser.add_argument(
        "--nodes",
        default="",
        help="comma-separated nodes to start (default: every node the files name); "
        "a node the files do not name runs on its defaults",
    )
    parser.add_argument(
        "--processes", action="store_true", help="one process per node (default: all in this process)"
    )
    parser.add_argument(
        "--stop-timeout",
        type=float,
        default=30.0,
        help="--processes: seconds a node may take to stop (final checkpoint) before SIGKILL [30]",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="check the files and print what would run, start nothing"
    )
    parser.add_argument(
        "--ros-args",
        dest="ros_args",
        nargs=argparse.REMAINDER,
        default=[],
        help="everything after it goes to the nodes as ROS arguments (remappings -r, -p ...; "
        "in one process they apply to every node)",
    )


# --------------------------------------------------------------------------- running
def _say(text: str) -> None:
    print(f"[up] {text}", file=sys.stderr, flush=True)


def apply_middleware_environment(dry_run: bool = False) -> dict[str, str]:
    """Give this process (and so the nodes it starts) the shipped Fast DDS profile for large
    messages unless a profiles file is set already; say which one the nodes use. Must run before
    ``rclpy.init``. With ``dry_run`` only says it. Returns the variables set."""
    added = middleware_environment()
    if not dry_run:
        os.environ.update(added)
    variable = FASTDDS_PROFILES_VARIABLE
    if added:
        _say(f"Fast DDS profile: {variable}={added[variable]} (shipped, for large messages)")
    elif os.environ.get(variable):
        _say(f"Fast DDS profile: {variable}={os.environ[variable]} (yours, kept)")
    return added


def run_in_one_process(system: SystemConfig, ros_args: list[str]) -> int:
    """Every node of ``system`` in this process until SIGINT/SIGTERM; the exit status."""
    from lifelong_learning.nodes.runner import run_nodes  # imports rclpy: only when nodes run here

    args = ["lifelong-learning-up", "--ros-args", *system.params_file_args(), *ros_args]
    _say(f"starting {', '.join(system.nodes)} in one process (Ctrl-C stops them with a final checkpoint)")
    return run_nodes([catalog.node_class(n) for n in system.nodes], args)


def _command(system: SystemConfig, node: str, ros_args: list[str]) -> list[str]:
    """The command line of ``node`` in its own process: its defaults, the files, the ROS arguments."""
    return node_command(node, system.params_files([node]), ros_args=ros_args)


def _watch(children: list[NodeProcess], stop: StopSignals) -> set[str]:
    """Report each child that exits, until a stop is requested or none is left; the ones reported."""
    reported: set[str] = set()
    while not stop.event.is_set():
        for child in children:
            if child.name not in reported and not child.alive():
                reported.add(child.name)
                _say(
                    f"{child.name} exited early with status {child.returncode}; the other nodes keep running"
                )
        if len(reported) == len(children):
            break
        stop.event.wait(0.2)
    return reported


def run_in_processes(system: SystemConfig, ros_args: list[str], stop_timeout: float) -> int:
    """One child process per node until SIGINT/SIGTERM or until every child exited; the exit status."""
    stop = StopSignals("up").install()
    children: list[NodeProcess] = []
    reported: set[str] = set()
    try:
        for name in system.nodes:
            argv = _command(system, name, ros_args)
            children.append(NodeProcess(argv, name=name, forward_to=sys.stdout))
        _say(
            "started "
            + ", ".join(f"{c.name} (pid {c.pid})" for c in children)
            + " (Ctrl-C stops them with a final checkpoint)"
        )
        reported = _watch(children, stop)
    finally:
        if stop.signal_name:
            _say(f"{stop.signal_name} received: stopping every node (SIGINT each, final checkpoints)")
        for child in stop_all(children, timeout=stop_timeout):
            _say(f"{child.name} did not stop within {stop_timeout:g} s: killed")
        stop.restore()
    for child in children:
        if child.name not in reported and not child.killed:
            _say(f"{child.name} stopped with status {child.returncode}")
    return 1 if any(c.killed or c.returncode != 0 for c in children) else 0


def run(args: argparse.Namespace) -> int:
    """Check the files, then run the nodes; 2 on a configuration error."""
    only = [n.strip() for n in args.nodes.split(",") if n.strip()]
    try:
        system = load_system(args.params_files, only or None)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ros_args = list(args.ros_args or [])
    if not math.isfinite(args.stop_timeout) or args.stop_timeout < 0:
        print("error: --stop-timeout must be a finite number of seconds >= 0", file=sys.stderr)
        return 2
    apply_middleware_environment(dry_run=args.dry_run)
    if args.dry_run:
        if args.processes:
            for name in system.nodes:
                print(shlex.join(_command(system, name, ros_args)))
        else:
            args_line = shlex.join(["--ros-args", *system.params_file_args(), *ros_args])
            print(f"one process: {', '.join(system.nodes)} {args_line}")
        return 0
    if args.processes:
        return run_in_processes(system, ros_args, args.stop_timeout)
    return run_in_one_process(system, ros_args)
