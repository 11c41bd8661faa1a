"""``lifelong-learning up``: start the nodes configured in ROS 2 params files, stop them with a checkpoint.

The files are standard ROS 2 parameter files (``node_name: {ros__parameters: {...}}``; a key
with ``*``, such as ``/**``, applies to every node it matches and starts none). The nodes to
start are those the files name (``--nodes`` picks some, or adds nodes that run on their
defaults). Each node is given its shipped defaults ``config/<node>.yaml`` first, then the
files in order, so a system file holds only what differs (see ``config/robot.yaml``).

Everything is checked before anything starts: YAML syntax, node names, parameter names (each
must be declared by the node it configures) and value types (a double needs ``5.0``, not
``5``). Errors exit with status 2 and name the file, node and parameter.

Modes:
- default: every node in this one process, one multi-threaded executor
  (:func:`lifelong_learning.nodes._runner.run_nodes`);
- ``--processes``: one child process per node, their output prefixed with ``[node]``; a child
  that exits is reported with its exit status, the others keep running.

Ctrl-C, SIGTERM or SIGHUP (unless ignored) stops every node with a final checkpoint of each
learner (in ``--processes`` mode: one SIGINT to each child, then a wait of ``--stop-timeout``
seconds before SIGKILL; the children run in their own session, so that a terminal's Ctrl-C
reaches them only through ``up``, and a SIGKILL of ``up`` leaves them running). The exit
status is 0 when every node stopped cleanly, non-zero otherwise.
"""

from __future__ import annotations

import argparse
import fnmatch
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

NAME = "up"
HELP = "start the nodes configured in ROS 2 params files (one process or one per node); Ctrl-C checkpoints"

_ROS_TYPES = {bool: "bool", int: "integer", float: "double", str: "string"}


class ConfigError(ValueError):
    """A params file that cannot configure the nodes (the message names file, node, parameter)."""


@dataclass
class SystemConfig:
    """What ``up`` starts: the nodes, their default files and the user's params files."""

    files: list[Path]
    nodes: list[str]
    defaults: dict[str, Path | None] = field(default_factory=dict)

    def params_file_args(self, nodes: list[str] | None = None) -> list[str]:
        """``--params-file`` arguments: the defaults of ``nodes`` (default all), then the files."""
        args: list[str] = []
        for name in self.nodes if nodes is None else nodes:
            default = self.defaults.get(name)
            if default is not None:
                args += ["--params-file", str(default)]
        for path in self.files:
            args += ["--params-file", str(path)]
        return args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``up``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        f"{HELP}.\n\n"
        "PARAMS_YAML are ROS 2 params files (node_name: {ros__parameters: {...}}; '/**' entries apply\n"
        "to every node). Each node first gets its shipped defaults config/<node>.yaml, so these\n"
        "files only need what differs. Names and types are checked before anything starts.\n\n"
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


# --------------------------------------------------------------------------- checking
def _ros_type(value: Any) -> str:
    if isinstance(value, list):
        inner = {_ros_type(v) for v in value}
        return f"{inner.pop()}[]" if len(inner) == 1 else "mixed list"
    return _ROS_TYPES.get(type(value), type(value).__name__)


def value_error(spec: Any, value: Any) -> str | None:
    """Why ``value`` cannot set the parameter ``spec`` in ROS 2 (None when it can)."""
    if value is None:
        return "has no value"
    want, got = _ros_type(spec.default), _ros_type(value)
    if isinstance(value, list) and not value:
        return f"is an empty list; ROS 2 cannot tell its type (the parameter is {want})"
    if want == got:
        return None
    hint = ""
    if want == "double" and got == "integer":
        hint = f" (write {value}.0)"
    elif want == "double[]" and got in ("integer[]", "mixed list"):
        hint = " (write every number with a decimal point)"
    elif want == "string" and not isinstance(value, (list, dict)):
        hint = f' (quote it: "{value}")'
    return f"is {got} {value!r}, the parameter is {want}{hint}"


def _flatten(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def read_params_file(path: Path) -> dict[str, dict[str, Any]]:
    """The parameters per node key of a ROS 2 params file (nested names joined with '.')."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected node names at the top level (node_name: {{ros__parameters: ...}})"
        )
    out: dict[str, dict[str, Any]] = {}
    for key, body in data.items():
        key = str(key)
        if not isinstance(body, dict) or not isinstance(body.get("ros__parameters"), dict):
            raise ConfigError(f"{path}: {key}: expected 'ros__parameters:' with the parameters under it")
        extra = sorted(set(body) - {"ros__parameters"})
        if extra:
            raise ConfigError(f"{path}: {key}: unexpected keys {extra} beside ros__parameters")
        out[key] = _flatten(body["ros__parameters"])
    return out


def _matches(pattern: str, node: str) -> bool:
    pattern = pattern if pattern.startswith("/") else f"/{pattern}"
    return fnmatch.fnmatchcase(f"/{node}", pattern.replace("**", "*"))


def load_system(files: list[str | Path], only: list[str] | None = None) -> SystemConfig:
    """Read and check the params files; the nodes to start (all named, or ``only``). Raises ConfigError."""
    from lifelong_learning.nodes import catalog

    known = catalog.node_names()
    paths = [Path(os.path.expanduser(str(f))).resolve() for f in files]
    parsed = [(path, read_params_file(path)) for path in paths]
    named: list[str] = []
    for path, entries in parsed:
        for key in entries:
            if "*" in key:
                continue
            name = key.lstrip("/")
            if name not in known:
                raise ConfigError(
                    f"{path}: unknown node {key!r}; the nodes of lifelong_learning are: {', '.join(known)}"
                )
            if name not in named:
                named.append(name)
    if only:
        unknown = [n for n in only if n not in known]
        if unknown:
            raise ConfigError(
                f"--nodes: unknown node(s) {', '.join(unknown)}; the nodes of lifelong_learning are: "
                f"{', '.join(known)}"
            )
        nodes = list(dict.fromkeys(only))
    else:
        nodes = named
    if not nodes:
        raise ConfigError("no node to start: the files name none (give --nodes)")
    builtin = set(catalog.BUILTIN_PARAMETERS)
    specs = {n: {s.name: s for s in catalog.declared_parameters(n)} for n in nodes}
    for path, entries in parsed:
        for key, params in entries.items():
            if "*" in key:
                targets = [n for n in nodes if _matches(key, n)]
                for pname, value in params.items():
                    if pname in builtin:
                        continue
                    declaring = [n for n in targets if pname in specs[n]]
                    if targets and not declaring:
                        raise ConfigError(
                            f"{path}: {key}: parameter {pname!r} is declared by none of the nodes it "
                            f"applies to ({', '.join(targets)})"
                        )
                    for n in declaring:
                        problem = value_error(specs[n][pname], value)
                        if problem:
                            raise ConfigError(f"{path}: {key}: {pname} {problem} (in node {n})")
                continue
            name = key.lstrip("/")
            if name not in specs:  # a node of the files not selected by --nodes: check it anyway
                specs[name] = {s.name: s for s in catalog.declared_parameters(name)}
            for pname, value in params.items():
                if pname in builtin:
                    continue
                if pname not in specs[name]:
                    raise ConfigError(
                        f"{path}: node {name} declares no parameter {pname!r} "
                        f"(see `lifelong-learning params {name}`)"
                    )
                problem = value_error(specs[name][pname], value)
                if problem:
                    raise ConfigError(f"{path}: {name}.{pname} {problem}")
    return SystemConfig(files=paths, nodes=nodes, defaults={n: catalog.default_config_file(n) for n in nodes})


# --------------------------------------------------------------------------- running
def _say(text: str) -> None:
    print(f"[up] {text}", file=sys.stderr, flush=True)


def run_in_one_process(system: SystemConfig, ros_args: list[str]) -> int:
    """Every node of ``system`` in this process until SIGINT/SIGTERM; the exit status."""
    from lifelong_learning.nodes import catalog
    from lifelong_learning.nodes._runner import run_nodes

    args = ["lifelong-learning-up", "--ros-args", *system.params_file_args(), *ros_args]
    _say(f"starting {', '.join(system.nodes)} in one process (Ctrl-C stops them with a final checkpoint)")
    return run_nodes([catalog.node_class(n) for n in system.nodes], args)


def node_command(system: SystemConfig, node: str, ros_args: list[str]) -> list[str]:
    """The command line of ``node`` in its own process."""
    return [
        sys.executable,
        "-m",
        f"lifelong_learning.nodes.{node}",
        "--ros-args",
        *system.params_file_args([node]),
        *ros_args,
    ]


class _Child:
    def __init__(self, name: str, argv: list[str], out: IO[str], lock: threading.Lock):
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PYTHONSAFEPATH": "1",  # `python -m` must not import a source tree from the current directory
        }
        self.name = name
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            # a terminal's Ctrl-C reaches `up` only, which sends each child one SIGINT (a second
            # one could interrupt a final checkpoint); but SIGKILL of `up` leaves them running
            start_new_session=True,
        )
        self.reported = False
        self.killed = False
        self._out, self._lock = out, lock
        self.reader = threading.Thread(target=self._forward, name=f"up-{name}", daemon=True)

    def _forward(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            with self._lock:
                self._out.write(f"[{self.name}] {line}\n")
                self._out.flush()


class _Signals:
    """SIGINT/SIGTERM/SIGHUP → a stop request (repeats are reported and otherwise ignored)."""

    def __init__(self) -> None:
        from lifelong_learning.nodes._runner import stop_signals

        self.stop = threading.Event()
        self.name = ""
        self._previous = {sig: signal.signal(sig, self._handle) for sig in stop_signals()}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.stop.is_set():
            _say(f"{signal.Signals(signum).name} ignored: already stopping")
            return
        self.name = signal.Signals(signum).name
        self.stop.set()

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def run_in_processes(system: SystemConfig, ros_args: list[str], stop_timeout: float) -> int:
    """One child process per node until SIGINT/SIGTERM or until every child exited; the exit status."""
    signals = _Signals()
    lock = threading.Lock()
    children: list[_Child] = []
    try:
        for name in system.nodes:
            children.append(_Child(name, node_command(system, name, ros_args), sys.stdout, lock))
        for child in children:
            child.reader.start()
        _say(
            "started "
            + ", ".join(f"{c.name} (pid {c.proc.pid})" for c in children)
            + " (Ctrl-C stops them with a final checkpoint)"
        )
        while not signals.stop.is_set():
            for child in children:
                code = child.proc.poll()
                if code is not None and not child.reported:
                    child.reported = True
                    _say(f"{child.name} exited early with status {code}; the other nodes keep running")
            if all(c.reported for c in children):
                break
            signals.stop.wait(0.2)
    finally:
        if signals.name:
            _say(f"{signals.name} received: stopping every node (SIGINT each, final checkpoints)")
        for child in children:
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + stop_timeout
        for child in children:
            try:
                child.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.killed = True
                child.proc.kill()
                child.proc.wait()
                _say(f"{child.name} did not stop within {stop_timeout:g} s: killed")
        for child in children:
            if child.reader.is_alive():
                child.reader.join(5.0)
        signals.restore()
    failed = [c for c in children if c.killed or c.proc.returncode != 0]
    for child in children:
        if not child.reported and not child.killed:
            _say(f"{child.name} stopped with status {child.proc.returncode}")
    return 1 if failed else 0


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
    if args.dry_run:
        if args.processes:
            for name in system.nodes:
                print(shlex.join(node_command(system, name, ros_args)))
        else:
            args_line = shlex.join(["--ros-args", *system.params_file_args(), *ros_args])
            print(f"one process: {', '.join(system.nodes)} {args_line}")
        return 0
    if args.processes:
        return run_in_processes(system, ros_args, args.stop_timeout)
    return run_in_one_process(system, ros_args)
