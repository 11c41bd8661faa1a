"""The system ``lifelong-learning up`` starts, read from ROS 2 params files and checked before anything runs.

The files are standard ROS 2 parameter files (``node_name: {ros__parameters: {...}}``). A key
names a node by its last part, in any namespace: ``inverse_dynamics``, ``/robot1/inverse_dynamics``
and ``/**/inverse_dynamics`` (the form the shipped files use: rcl applies a bare
``inverse_dynamics`` key only to a node outside any namespace) all configure and start
inverse_dynamics; a key whose last part has a ``*``, such as ``/**``, applies to every node it
matches and starts none. The nodes to start are those the files name, or those given explicitly.
Checked: YAML syntax, node names, parameter names (each must be declared by the node it
configures) and value types (a double needs ``5.0``, not ``5``); a :class:`ConfigError` names
the file, node and parameter.

It defines no ``HELP``, so ``lifelong-learning`` does not take it for a sub-command
(:mod:`lifelong_learning.commands`).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lifelong_learning.nodes import catalog

_ROS_TYPES = {bool: "bool", int: "integer", float: "double", str: "string"}

#: the parameters of one node key of a params file (nested names joined with '.')
Params = dict[str, Any]
#: every params file with its entries (node key → parameters), in the order given
ParsedFiles = list[tuple[Path, dict[str, Params]]]
#: the declared parameters (name → ParamSpec) of each node
Specs = dict[str, dict[str, Any]]


class ConfigError(ValueError):
    """A params file that cannot configure the nodes (the message names file, node, parameter)."""


@dataclass
class SystemConfig:
    """What ``up`` starts: the nodes, their default files and the user's params files."""

    files: list[Path]
    nodes: list[str]
    defaults: dict[str, Path | None] = field(default_factory=dict)

    def params_files(self, nodes: list[str] | None = None) -> list[Path]:
        """The params files of ``nodes`` (default all): their defaults, then the user's files."""
        names = self.nodes if nodes is None else nodes
        found = [self.defaults.get(name) for name in names]
        return [path for path in found if path is not None] + list(self.files)

    def params_file_args(self, nodes: list[str] | None = None) -> list[str]:
        """``--params-file`` arguments: the defaults of ``nodes`` (default all), then the files."""
        args: list[str] = []
        for path in self.params_files(nodes):
            args += ["--params-file", str(path)]
        return args


# --------------------------------------------------------------------------- values
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
    if getattr(spec, "also_auto", False):  # a number in the range, or the string auto
        if value == "auto" or (got in ("double", "integer") and spec.problem(value) is None):
            return None
        if got in ("double", "integer"):
            return f"is {value!r}, outside the parameter's range {spec.range_text()}"
        return f"is {got} {value!r}, the parameter is a number or auto"
    if isinstance(value, list) and not value:
        return f"is an empty list; ROS 2 cannot tell its type (the parameter is {want})"
    if want == got:
        problem = spec.problem(value)
        return None if problem is None else f"is {value!r}, outside the parameter's range {spec.range_text()}"
    hint = ""
    if want == "double" and got == "integer":
        hint = f" (write {value}.0)"
    elif want == "double[]" and got in ("integer[]", "mixed list"):
        hint = " (write every number with a decimal point)"
    elif want == "string" and not isinstance(value, (list, dict)):
        hint = f' (quote it: "{value}")'
    return f"is {got} {value!r}, the parameter is {want}{hint}"


# --------------------------------------------------------------------------- files
def _flatten(params: dict[str, Any], prefix: str = "") -> Params:
    out: Params = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def read_params_file(path: Path) -> dict[str, Params]:
    """The parameters per node key of a ROS 2 params file (nested names joined with '.')."""
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
    out: dict[str, Params] = {}
    for key, body in data.items():
        key = str(key)
        if not isinstance(body, dict) or not isinstance(body.get("ros__parameters"), dict):
            raise ConfigError(f"{path}: {key}: expected 'ros__parameters:' with the parameters under it")
        extra = sorted(set(body) - {"ros__parameters"})
        if extra:
            raise ConfigError(f"{path}: {key}: unexpected keys {extra} beside ros__parameters")
        out[key] = _flatten(body["ros__parameters"])
    return out


# --------------------------------------------------------------------------- nodes
def _matches(pattern: str, node: str) -> bool:
    pattern = pattern if pattern.startswith("/") else f"/{pattern}"
    return fnmatch.fnmatchcase(f"/{node}", pattern.replace("**", "*"))


def node_of_key(key: str) -> str | None:
    """The node a params-file key names (its last part, any namespace), None for a ``*`` pattern."""
    name = key.rstrip("/").rsplit("/", 1)[-1]
    return None if "*" in name or not name else name


def _named_nodes(parsed: ParsedFiles, known: Sequence[str]) -> list[str]:
    """The nodes the files name (not the ``*`` keys), in order of appearance; all must be known."""
    named: list[str] = []
    for path, entries in parsed:
        for key in entries:
            name = node_of_key(key)
            if name is None:
                continue
            if name not in known:
                raise ConfigError(
                    f"{path}: unknown node {key!r}; the nodes of lifelong_learning are: {', '.join(known)}"
                )
            if name not in named:
                named.append(name)
    return named


def _nodes_to_start(parsed: ParsedFiles, known: Sequence[str], only: list[str] | None) -> list[str]:
    """``only`` (checked, without repeats) if given, else every node the files name."""
    named = _named_nodes(parsed, known)
    if only:
        unknown = [n for n in only if n not in known]
        if unknown:
            raise ConfigError(
                f"--nodes: unknown node(s) {', '.join(unknown)}; the nodes of lifelong_learning are: "
                f"{', '.join(known)}"
            )
        named = list(dict.fromkeys(only))
    if not named:
        raise ConfigError("no node to start: the files name none (give --nodes)")
    return named


# --------------------------------------------------------------------------- parameters
def _declared(name: str) -> dict[str, Any]:
    return {s.name: s for s in catalog.declared_parameters(name)}


def _check_pattern(path: Path, key: str, params: Params, nodes: list[str], specs: Specs) -> None:
    """A ``*`` entry: each parameter must be declared by one of the started nodes it matches."""
    targets = [n for n in nodes if _matches(key, n)]
    for pname, value in params.items():
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


def _check_node(path: Path, name: str, params: Params, specs: Specs) -> None:
    """A node's entry: every parameter declared by the node, with a value of its type."""
    if name not in specs:  # a node of the files not selected by --nodes: check it anyway
        specs[name] = _declared(name)
    for pname, value in params.items():
        if pname not in specs[name]:
            raise ConfigError(
                f"{path}: node {name} declares no parameter {pname!r} (see `lifelong-learning params {name}`)"
            )
        problem = value_error(specs[name][pname], value)
        if problem:
            raise ConfigError(f"{path}: {name}.{pname} {problem}")


def _check_parameters(parsed: ParsedFiles, nodes: list[str]) -> None:
    """Every entry of every file against the parameters its nodes declare (rclpy's own skipped)."""
    specs: Specs = {n: _declared(n) for n in nodes}
    for path, entries in parsed:
        for key, params in entries.items():
            own = {pname: value for pname, value in params.items() if not catalog.is_builtin_parameter(pname)}
            name = node_of_key(key)
            if name is None:
                _check_pattern(path, key, own, nodes, specs)
            else:
                _check_node(path, name, own, specs)


def load_system(files: Sequence[str | os.PathLike[str]], only: list[str] | None = None) -> SystemConfig:
    """Read and check the params files; the nodes to start (all named, or ``only``). Raises ConfigError."""
    known = catalog.node_names()
    paths = [Path(os.path.expanduser(str(f))).resolve() for f in files]
    parsed: ParsedFiles = [(path, read_params_file(path)) for path in paths]
    nodes = _nodes_to_start(parsed, known, only)
    _check_parameters(parsed, nodes)
    return SystemConfig(files=paths, nodes=nodes, defaults={n: catalog.default_config_file(n) for n in nodes})
