"""The registry of this package's nodes: names, classes, declared parameters, default config files.

A node is a module ``lifelong_learning.nodes.<name>`` (name not starting with ``_``) that
defines a ``main`` function, a ``PARAMS`` tuple of :class:`~lifelong_learning.nodes.base.ParamSpec`
and exactly one :class:`~lifelong_learning.nodes.base.NodeBase` subclass. Nodes are found by
importing the modules (which imports rclpy), so adding one needs no edit here; a test checks
that the names equal the installed executables ``scripts/nodes/*``.

The parameters a node declares are the base classes' (``NodeBase.COMMON_PARAMS``, and
``LEARNER_PARAMS`` of learner nodes, read from the node class) followed by the module's
``PARAMS``, in the order the node declares them.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType
from typing import Any

PACKAGE = "lifelong_learning"

#: parameters every rclpy node declares by itself (not in any PARAMS)
BUILTIN_PARAMETERS: tuple[str, ...] = ("use_sim_time", "start_type_description_service")
#: prefixes of parameters rclpy declares for a node's topics: QoS overrides of every input and
#: output stream (``qos_overrides./image.subscription.reliability``, read-only, set at start)
BUILTIN_PREFIXES: tuple[str, ...] = ("qos_overrides.",)


def is_builtin_parameter(name: str) -> bool:
    """Whether rclpy, not this package, declares the parameter ``name``."""
    return name in BUILTIN_PARAMETERS or name.startswith(BUILTIN_PREFIXES)


def _is_node_module(module: ModuleType) -> bool:
    return callable(getattr(module, "main", None)) and isinstance(getattr(module, "PARAMS", None), tuple)


def _node_classes(module: ModuleType) -> list[type]:
    from lifelong_learning.nodes.base import NodeBase

    return [
        c
        for c in vars(module).values()
        if isinstance(c, type) and issubclass(c, NodeBase) and c.__module__ == module.__name__
    ]


@functools.cache
def node_names() -> tuple[str, ...]:
    """Names of every node of this package, sorted (each is also its executable's name)."""
    import lifelong_learning.nodes as nodes

    names = []
    for info in pkgutil.iter_modules(nodes.__path__):
        if info.name.startswith("_") or info.name == "catalog":
            continue
        module = importlib.import_module(f"{nodes.__name__}.{info.name}")
        if _is_node_module(module) and len(_node_classes(module)) == 1:
            names.append(info.name)
    return tuple(sorted(names))


def node_module(name: str) -> ModuleType:
    """The module of node ``name``; KeyError (listing the known nodes) if there is none."""
    if name not in node_names():
        raise KeyError(f"unknown node {name!r}; the nodes of {PACKAGE} are: {', '.join(node_names())}")
    return importlib.import_module(f"lifelong_learning.nodes.{name}")


def node_class(name: str) -> type:
    """The :class:`NodeBase` subclass of node ``name`` (call it with no argument to create the node)."""
    return _node_classes(node_module(name))[0]


def is_learner(name: str) -> bool:
    """True when node ``name`` holds a learned model (a :class:`LearnerNode`: checkpoints, save/load)."""
    from lifelong_learning.nodes.learner import LearnerNode

    return issubclass(node_class(name), LearnerNode)


def declared_parameters(name: str) -> list[Any]:
    """The :class:`ParamSpec` of every parameter node ``name`` declares, in declaration order."""
    cls = node_class(name)
    specs = list(cls.COMMON_PARAMS)
    if is_learner(name):
        specs += list(cls.LEARNER_PARAMS)
    specs += list(node_module(name).PARAMS)
    return specs


def node_summary(name: str) -> str:
    """The first line of the node module's docstring."""
    doc = (node_module(name).__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""


def config_dir() -> Path | None:
    """This package's ``config/`` folder: the installed share directory, else the source tree's."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        try:
            share = Path(get_package_share_directory(PACKAGE)) / "config"
            if share.is_dir():
                return share
        except PackageNotFoundError:
            pass
    except ImportError:  # ament_index_python is not installed (pip install without ROS)
        pass
    source = Path(__file__).resolve().parents[2] / "config"
    return source if source.is_dir() else None


def default_config_file(name: str) -> Path | None:
    """``config/<name>.yaml`` (the node's defaults, equal to those in code), if shipped."""
    folder = config_dir()
    path = folder / f"{name}.yaml" if folder is not None else None
    return path if path is not None and path.is_file() else None
