"""What the launch files in ``launch/`` share: from launch arguments (strings) to a node's parameters.

Importing it imports nothing from ``launch`` (which has no PyPI wheel, so the launch files cannot
run on machines set up from the wheels): the rules are tested here, and
``test/test_launch_files.py`` checks the launch files that use them. The two builders of launch
actions, :func:`common_actions` and :func:`package_node`, import ``launch`` and ``launch_ros`` when
a launch file calls them.

Every node a launch file starts gets, in this order (later wins, as in ``lifelong-learning up``):

1. its shipped defaults, ``config/<node>.yaml``;
2. the user's ``params_file`` argument, when one is given (a standard ROS 2 params file; key
   the nodes ``/**/<node>`` so that it applies in any namespace);
3. ``use_sim_time`` from the launch argument (the ROS 2 convention: the argument wins);
4. each parameter whose own launch argument was given (``urdf_path:=...``, ``joint_names:=...``):
   an argument left at ``''`` overrides nothing, so the params file keeps its value.

The namespace and ``log_level`` go to the ``Node`` itself (``namespace=``, ``ros_arguments=``).
"""

from __future__ import annotations

from typing import Any

import yaml

#: the launch arguments every launch file here declares (:func:`common_actions`) and the bring-up
#: passes on to each file it includes
COMMON_ARGUMENTS = (
    "namespace",
    "sigterm_timeout",
    "sigkill_timeout",
    "params_file",
    "use_sim_time",
    "log_level",
)
#: the levels rcutils accepts for ``--log-level``
LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")

#: ``ros2 launch``'s escalation after Ctrl-C, as the launch arguments every launch file here declares
#: (name: default seconds, description). A node of this package stops by itself: it waits for its
#: running callbacks (at most ``FINISH_CALLBACKS_S``, ended 2 s later if they hang, nodes/runner.py),
#: writes its final checkpoint (as long as the disk takes) and tears down (``TEARDOWN_S`` at most);
#: it ignores further signals meanwhile, so SIGTERM changes nothing, and only SIGKILL can lose the
#: checkpoint. Launch's own defaults (SIGTERM after 5 s, SIGKILL 5 s later) come before the end of
#: the wait for a callback that runs long.
STOP_TIMEOUTS = {
    "sigterm_timeout": (
        "15",
        "seconds after Ctrl-C before ros2 launch sends SIGTERM (ignored while a node stops)",
    ),
    "sigkill_timeout": (
        "15",
        "seconds after SIGTERM before SIGKILL: a node's final checkpoint may still be written",
    ),
}


def stop_escalation(sigterm_timeout: str, sigkill_timeout: str) -> dict[str, str]:
    """The ``Node`` arguments of :data:`STOP_TIMEOUTS` from their launch arguments, checked (a
    number of seconds ≥ 0): given to each node, they hold also where a scoped include would drop
    the launch configurations before the shutdown reads them.

    Raises:
        LaunchArgumentError: a value that is not a number of seconds ≥ 0.
    """
    out = {}
    for name, text in (("sigterm_timeout", sigterm_timeout), ("sigkill_timeout", sigkill_timeout)):
        try:
            seconds = float(text)
        except ValueError:
            seconds = float("nan")
        if not seconds >= 0.0 or seconds == float("inf"):
            raise LaunchArgumentError(f"{name}:={text!r} is not a number of seconds >= 0")
        out[name] = str(seconds)
    return out


def stop_timeout(name: str) -> dict[str, str]:
    """``default_value`` and ``description`` of the launch argument ``name`` of :data:`STOP_TIMEOUTS`."""
    value, text = STOP_TIMEOUTS[name]
    return {"default_value": value, "description": text}


class LaunchArgumentError(ValueError):
    """A launch argument that cannot become the parameter it sets (the message says which)."""


def flag(name: str, text: str) -> bool:
    """A boolean launch argument: ``true``/``false`` (any case, as launch writes them)."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise LaunchArgumentError(f"launch argument {name}:={text!r}: expected true or false")
    return value == "true"


def name_list(name: str, text: str) -> list[str]:
    """A list of names from a launch argument: ``a,b,c`` or the YAML list ``[a, b, c]``."""
    text = text.strip()
    if text.startswith("["):
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise LaunchArgumentError(f"launch argument {name}:={text!r} is not a YAML list: {exc}") from exc
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise LaunchArgumentError(f"launch argument {name}:={text!r}: expected a list of names")
        names = [v.strip() for v in value]
    else:
        names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise LaunchArgumentError(f"launch argument {name}:={text!r} has an empty name")
    return names


def log_level(text: str) -> str:
    """The ``--log-level`` value of a ``log_level`` argument (refused unless rcutils knows it)."""
    level = text.strip().lower()
    if level not in LOG_LEVELS:
        raise LaunchArgumentError(
            f"launch argument log_level:={text!r}: expected one of {', '.join(LOG_LEVELS)}"
        )
    return level


def _converted(spec: Any, text: str) -> Any:
    """A launch argument's text as the value of the parameter ``spec`` declares (its default's type)."""
    if isinstance(spec.default, bool):
        return flag(spec.name, text)
    if isinstance(spec.default, list):
        return name_list(spec.name, text)
    if isinstance(spec.default, str):
        return text.strip()
    raise LaunchArgumentError(f"parameter {spec.name} ({type(spec.default).__name__}) has no launch argument")


def node_parameters(
    node: str, params_file: str, use_sim_time: str, given: dict[str, str]
) -> list[str | dict[str, Any]]:
    """The ``parameters=`` of a launch_ros ``Node`` for this package's node ``node``: its shipped
    file, the user's params file (if any), ``use_sim_time``, then each parameter of ``given``
    (name → the launch argument's text) whose argument was not ``''``, converted to the type the
    node declares (``a,b`` or ``[a, b]`` for a list of names).
    """
    from lifelong_learning.nodes.catalog import declared_parameters, default_config_file

    shipped = default_config_file(node)
    if shipped is None:
        raise LaunchArgumentError(f"no shipped config/{node}.yaml: is lifelong_learning installed?")
    specs = {spec.name: spec for spec in declared_parameters(node)}
    unknown = sorted(set(given) - set(specs))
    if unknown:
        raise LaunchArgumentError(f"node {node} declares no parameter {', '.join(unknown)}")
    parameters: list[str | dict[str, Any]] = [str(shipped)]
    if params_file.strip():
        parameters.append(params_file.strip())
    parameters.append({"use_sim_time": flag("use_sim_time", use_sim_time)})
    chosen = {name: _converted(specs[name], text) for name, text in given.items() if text.strip()}
    if chosen:
        parameters.append(chosen)
    return parameters


def common_actions(nodes: str = "the node") -> list[Any]:
    """The actions every launch file here starts with: the shipped Fast DDS profile in the
    environment (large camera frames; unless ``FASTDDS_DEFAULT_PROFILES_FILE`` is set), then the
    launch arguments :data:`COMMON_ARGUMENTS` (``nodes``: what the namespace applies to, for its
    description)."""
    from launch.actions import DeclareLaunchArgument, SetEnvironmentVariable

    from lifelong_learning.nodes.supervisor import middleware_environment

    return [
        *(SetEnvironmentVariable(name, value) for name, value in middleware_environment().items()),
        DeclareLaunchArgument("namespace", default_value="", description=f"namespace of {nodes}"),
        DeclareLaunchArgument("sigterm_timeout", **stop_timeout("sigterm_timeout")),
        DeclareLaunchArgument("sigkill_timeout", **stop_timeout("sigkill_timeout")),
        DeclareLaunchArgument(
            "params_file", default_value="", description="params file applied after the shipped ones"
        ),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="time from /clock"),
        DeclareLaunchArgument("log_level", default_value="info", description="|".join(LOG_LEVELS)),
    ]


def package_node(
    context: Any, executable: str, parameters: tuple[str, ...] = (), remappings: tuple[str, ...] = ()
) -> Any:
    """The launch_ros ``Node`` of this package's node ``executable`` (named after it), from the
    launch arguments in ``context``: its namespace, parameters (:func:`node_parameters`; each name
    of ``parameters`` is a launch argument that sets the parameter of that name), the topics named
    in ``remappings`` remapped to their launch arguments, its log level and the stop escalation
    (:func:`stop_escalation`).

    Raises:
        LaunchArgumentError: an argument that cannot become what it sets.
    """
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    def argument(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    return Node(
        package="lifelong_learning",
        executable=executable,
        name=executable,
        namespace=argument("namespace"),
        parameters=node_parameters(
            executable,
            argument("params_file"),
            argument("use_sim_time"),
            {name: argument(name) for name in parameters},
        ),
        remappings=[(topic, argument(topic)) for topic in remappings],
        ros_arguments=["--log-level", log_level(argument("log_level"))],
        output="screen",
        **stop_escalation(argument("sigterm_timeout"), argument("sigkill_timeout")),
    )
