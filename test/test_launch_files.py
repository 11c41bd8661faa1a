"""The launch files checked statically, without the launch system (`launch` has no wheel; where its
sources are beside the repository, test/test_launch_system.py also runs them with it).

Parsed with `ast`, each launch file must only refer to things that exist: the executables it
starts (scripts/nodes/*), their parameter files (config/*.yaml, configuring that node), the
parameter names it sets inline (declared by that node), the topics it remaps (ones the node
uses: the defaults of its *_topic parameters), the launch arguments it reads (declared in the
file) and the launch files it includes (in launch/, with arguments they declare). Anything the
checker cannot resolve statically is an error too, so the launch files stay checkable. Every
launch file that starts or includes nodes gives them the middleware environment
(SetEnvironmentVariable for each item of lifelong_learning.nodes.supervisor.middleware_environment(),
the rule scripts/env.sh and `up` apply too); run against stand-ins of the launch modules, the
files set FASTDDS_DEFAULT_PROFILES_FILE to the shipped profile, or keep the user's.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((REPO / "launch").glob("*.launch.py"))


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _call_name(n) == name]


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def _string(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _strings_in(node: ast.AST, suffix: str) -> list[str]:
    return [
        n.value
        for n in ast.walk(node)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith(suffix)
    ]


def declared_arguments(tree: ast.AST) -> set[str]:
    """Names of the DeclareLaunchArgument actions of a launch file, and the common arguments where
    it calls launch_support's ``common_actions()``."""
    from lifelong_learning.nodes.launch_support import COMMON_ARGUMENTS

    return {
        name
        for call in _calls(tree, "DeclareLaunchArgument")
        if (name := _string(call.args[0] if call.args else _keyword(call, "name"))) is not None
    } | (set(COMMON_ARGUMENTS) if _calls(tree, "common_actions") else set())


def _topics_of(node: str) -> set[str]:
    from lifelong_learning.nodes.catalog import declared_parameters

    return {
        str(s.default)
        for s in declared_parameters(node)
        if s.name.endswith("_topic") and isinstance(s.default, str) and s.default
    }


def _check_config_file(path: Path, name: str, where: str, errors: list[str]) -> None:
    from lifelong_learning.commands.up import ConfigError, load_system

    if not path.is_file():
        errors.append(f"{where}: no config/{path.name}")
        return
    try:
        system = load_system([path])
    except ConfigError as exc:
        errors.append(f"{where}: {exc}")
        return
    if name not in system.nodes:
        errors.append(f"{where}: config/{path.name} does not configure node {name!r}")


def _check_inline_names(item: ast.expr, exe: str, where: str, errors: list[str]) -> None:
    """The literal keys of an inline parameters dict: parameters ``exe`` (or rclpy) declares."""
    if not isinstance(item, ast.Dict):
        errors.append(f"{where}: inline parameters must be a literal dict, not {ast.unparse(item)!r}")
        return
    _check_parameter_names(item.keys, exe, where, errors)


def _check_parameter_names(names: list[ast.expr | None], exe: str, where: str, errors: list[str]) -> None:
    """Each of ``names`` a string literal naming a parameter ``exe`` (or rclpy) declares."""
    from lifelong_learning.nodes.catalog import declared_parameters, is_builtin_parameter

    declared = {s.name for s in declared_parameters(exe)}
    for key in names:
        pname = _string(key) if key is not None else None
        if pname is None:
            errors.append(f"{where}: inline parameter names must be string literals")
        elif pname not in declared and not is_builtin_parameter(pname):
            errors.append(f"{where}: parameter {pname!r} is not declared by {exe}")


def _check_parameters(call: ast.Call, exe: str, name: str, where: str, errors: list[str]) -> None:
    """``parameters=``: node_parameters("<exe>", params_file, use_sim_time, {given}) (the shipped
    config/<exe>.yaml, see lifelong_learning.nodes.launch_support) or a literal list of files and dicts."""
    parameters = _keyword(call, "parameters")
    if parameters is None:
        errors.append(f"{where}: does not load its config/{exe}.yaml")
        return
    if isinstance(parameters, ast.Call) and _call_name(parameters) == "node_parameters":
        if len(parameters.args) != 4 or _string(parameters.args[0]) != exe:
            errors.append(f"{where}: node_parameters() must name {exe!r} and take four arguments")
            return
        _check_config_file(REPO / "config" / f"{exe}.yaml", name, where, errors)
        _check_inline_names(parameters.args[3], exe, where, errors)
        return
    if not isinstance(parameters, ast.List):
        errors.append(f"{where}: parameters= must be node_parameters(...) or a literal list")
        return
    if not any(_strings_in(item, ".yaml") for item in parameters.elts):
        errors.append(f"{where}: does not load its config/{exe}.yaml")
    for item in parameters.elts:
        if isinstance(item, ast.Dict):
            _check_inline_names(item, exe, where, errors)
            continue
        files = _strings_in(item, ".yaml")
        if len(files) != 1:
            errors.append(f"{where}: cannot resolve parameters item {ast.unparse(item)!r}")
            continue
        _check_config_file(REPO / "config" / Path(files[0]).name, name, where, errors)


def _known_executable(call: ast.Call, where: str, errors: list[str]) -> str | None:
    """The executable a ``Node(executable=...)`` or ``package_node(context, executable, ...)``
    starts, if it is a literal naming one of scripts/nodes (else an error, and None)."""
    if _call_name(call) == "package_node":
        exe = _string(call.args[1]) if len(call.args) > 1 else _string(_keyword(call, "executable"))
    else:
        exe = _string(_keyword(call, "executable"))
    if exe is None:
        errors.append(f"{where}: {_call_name(call)} without a literal executable")
    elif not (REPO / "scripts" / "nodes" / exe).is_file():
        errors.append(f"{where}: no executable scripts/nodes/{exe}")
        return None
    return exe


def _check_node(call: ast.Call, where: str, errors: list[str]) -> None:
    if _string(_keyword(call, "package")) != "lifelong_learning":
        errors.append(f"{where}: Node without package='lifelong_learning'")
    exe = _known_executable(call, where, errors)
    if exe is None:
        return
    where = f"{where}: {exe}"
    name = _string(_keyword(call, "name")) or exe
    _check_parameters(call, exe, name, where, errors)
    _check_remappings(call, exe, where, errors)


def _check_remappings(call: ast.Call, exe: str, where: str, errors: list[str]) -> None:
    """``remappings=``: a literal list of ``(topic, ...)`` (a ``Node``) or a literal tuple of topic
    names (``package_node``), each a topic ``exe`` uses."""
    remappings = _keyword(call, "remappings")
    if remappings is None:
        return
    if not isinstance(remappings, ast.List | ast.Tuple):
        errors.append(f"{where}: remappings= must be a literal list")
        return
    topics = _topics_of(exe)
    for item in remappings.elts:
        source = _string(item.elts[0]) if isinstance(item, ast.Tuple) and item.elts else _string(item)
        if source is None:
            errors.append(f"{where}: cannot resolve remapping {ast.unparse(item)!r}")
        elif source not in topics:
            errors.append(f"{where}: remaps {source!r}, not a topic of {exe} ({sorted(topics)})")


def _check_package_node(call: ast.Call, where: str, errors: list[str], declared: set[str]) -> None:
    """``package_node(context, "<exe>", parameters=(...), remappings=(...))`` (launch_support): an
    executable of the package, its shipped config, parameters it declares and topics it uses, each
    set from a launch argument the file declares."""
    exe = _known_executable(call, where, errors)
    if exe is None:
        return
    where = f"{where}: {exe}"
    _check_config_file(REPO / "config" / f"{exe}.yaml", exe, where, errors)
    parameters = _keyword(call, "parameters")
    if parameters is not None and not isinstance(parameters, ast.Tuple | ast.List):
        errors.append(f"{where}: parameters= must be a literal tuple of names")
    elif parameters is not None:
        _check_parameter_names(parameters.elts, exe, where, errors)
    _check_remappings(call, exe, where, errors)
    for kind in ("parameters", "remappings"):
        names = _keyword(call, kind)
        for item in names.elts if isinstance(names, ast.Tuple | ast.List) else []:
            if (name := _string(item)) is not None and name not in declared:
                errors.append(f"{where}: launch argument {name!r} is not declared")


def _assigned_dict(tree: ast.AST, name: str) -> ast.Dict | ast.DictComp | None:
    """The literal dict (or comprehension) assigned to ``name`` in the file, if there is exactly one."""
    found = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Dict | ast.DictComp)
        and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
    ]
    return found[0] if len(found) == 1 else None


def _dict_keys(tree: ast.AST, node: ast.Dict | ast.DictComp) -> list[ast.expr | None]:
    """The keys of a dict literal, ``**name`` expanded when ``name`` is a dict literal of the file
    or a comprehension over launch_support's ``COMMON_ARGUMENTS``."""
    if isinstance(node, ast.DictComp):
        from lifelong_learning.nodes.launch_support import COMMON_ARGUMENTS

        (loop,) = node.generators
        over = loop.iter.id if isinstance(loop.iter, ast.Name) else None
        return [ast.Constant(name) for name in COMMON_ARGUMENTS] if over == "COMMON_ARGUMENTS" else [None]
    keys: list[ast.expr | None] = []
    for key, value in zip(node.keys, node.values, strict=True):
        inner = _assigned_dict(tree, value.id) if key is None and isinstance(value, ast.Name) else None
        keys += _dict_keys(tree, inner) if inner is not None else [key]
    return keys


def _check_include(call: ast.Call, where: str, errors: list[str], tree: ast.AST) -> None:
    targets = _strings_in(call, ".launch.py")
    if len(targets) != 1:
        errors.append(f"{where}: cannot resolve the included launch file")
        return
    target = REPO / "launch" / Path(targets[0]).name
    if not target.is_file():
        errors.append(f"{where}: includes launch/{target.name}, which does not exist")
        return
    accepted = declared_arguments(ast.parse(target.read_text()))
    args = _keyword(call, "launch_arguments")
    if args is None:
        return
    if isinstance(args, ast.Call) and _call_name(args) == "items" and isinstance(args.func, ast.Attribute):
        args = args.func.value
    if isinstance(args, ast.Dict):
        keys = _dict_keys(tree, args)
    elif isinstance(args, ast.List):
        keys = [e.elts[0] if isinstance(e, ast.Tuple) and e.elts else e for e in args.elts]
    else:
        errors.append(f"{where}: cannot resolve launch_arguments of {target.name}")
        return
    for key in keys:
        name = _string(key) if key is not None else None
        if name not in accepted:
            errors.append(f"{where}: passes {name!r} to {target.name}, which declares {sorted(accepted)}")


MIDDLEWARE_MODULE = "lifelong_learning.nodes.supervisor"


def _check_middleware_environment(tree: ast.AST, filename: str, errors: list[str]) -> None:
    """The file imports middleware_environment from the supervisor and sets each of its variables,
    or calls launch_support's ``common_actions()``, which does."""
    imported = any(
        isinstance(n, ast.ImportFrom)
        and n.module == MIDDLEWARE_MODULE
        and any(a.name == "middleware_environment" and a.asname is None for a in n.names)
        for n in ast.walk(tree)
    )
    applied = any(
        isinstance(n, (ast.GeneratorExp, ast.ListComp))
        and isinstance(n.elt, ast.Call)
        and _call_name(n.elt) == "SetEnvironmentVariable"
        and _calls(n.generators[0].iter, "middleware_environment")
        for n in ast.walk(tree)
    )
    common = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "lifelong_learning.nodes.launch_support"
        and any(a.name == "common_actions" and a.asname is None for a in n.names)
        for n in ast.walk(tree)
    ) and bool(_calls(tree, "common_actions"))
    if not ((imported and applied) or common):
        errors.append(
            f"{filename}: does not give its nodes the middleware environment (SetEnvironmentVariable "
            f"for each item of {MIDDLEWARE_MODULE}.middleware_environment())"
        )


def check_launch_text(text: str, filename: str = "test.launch.py") -> list[str]:
    """Everything wrong in a launch file's text (empty when it is fine)."""
    tree = ast.parse(text, filename)
    errors: list[str] = []
    if not any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body):
        errors.append(f"{filename}: no generate_launch_description()")
    if not (ast.get_docstring(tree) or "").count("ros2 launch lifelong_learning"):
        errors.append(f"{filename}: the docstring shows no example `ros2 launch lifelong_learning ...` line")
    nodes, includes = _calls(tree, "Node"), _calls(tree, "IncludeLaunchDescription")
    package_nodes = _calls(tree, "package_node")
    declared = declared_arguments(tree)
    if not nodes and not includes and not package_nodes:
        errors.append(f"{filename}: starts no node")
    for call in nodes:
        _check_node(call, f"{filename}:{call.lineno}", errors)
    for call in package_nodes:
        _check_package_node(call, f"{filename}:{call.lineno}", errors, declared)
    for call in includes:
        _check_include(call, f"{filename}:{call.lineno}", errors, tree)
    if nodes or includes or package_nodes:
        _check_middleware_environment(tree, filename, errors)
    aliases = {  # arg = LaunchConfiguration
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id == "LaunchConfiguration"
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    common = {  # names bound by a loop over launch_support's COMMON_ARGUMENTS
        gen.target.id
        for n in ast.walk(tree)
        if isinstance(n, ast.DictComp | ast.ListComp | ast.SetComp | ast.GeneratorExp)
        for gen in n.generators
        if isinstance(gen.iter, ast.Name)
        and gen.iter.id == "COMMON_ARGUMENTS"
        and isinstance(gen.target, ast.Name)
    }
    for call in [c for alias in ("LaunchConfiguration", *sorted(aliases)) for c in _calls(tree, alias)]:
        if call.args and isinstance(call.args[0], ast.Name) and call.args[0].id in common:
            from lifelong_learning.nodes.launch_support import COMMON_ARGUMENTS

            errors += [
                f"{filename}:{call.lineno}: launch argument {name!r} is not declared"
                for name in COMMON_ARGUMENTS
                if name not in declared
            ]
            continue
        name = _string(call.args[0]) if call.args else None
        if name is None:
            errors.append(f"{filename}:{call.lineno}: LaunchConfiguration of a non-literal name")
        elif name not in declared:
            errors.append(f"{filename}:{call.lineno}: launch argument {name!r} is not declared")
    return errors


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_refers_only_to_what_exists(path, built_interfaces):
    assert check_launch_text(path.read_text(), path.name) == []


def test_every_learner_has_a_launch_file_and_the_bring_up_includes_them(built_interfaces):
    from lifelong_learning.nodes.catalog import node_names

    names = {p.name for p in LAUNCH_FILES}
    started = set()
    for path in LAUNCH_FILES:
        tree = ast.parse(path.read_text())
        started |= {
            _known_executable(c, path.name, []) for c in _calls(tree, "Node") + _calls(tree, "package_node")
        }
    assert set(node_names()) <= started, f"no launch file starts {set(node_names()) - started}"
    bring_up = ast.parse((REPO / "launch" / "lifelong_learning.launch.py").read_text())
    included = {
        Path(s).name for c in _calls(bring_up, "IncludeLaunchDescription") for s in _strings_in(c, ".py")
    }
    assert included == names - {"lifelong_learning.launch.py"}


BAD = '''"""ros2 launch lifelong_learning bad.launch.py"""
import os
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    config = "/share/config"
    return LaunchDescription([
        DeclareLaunchArgument("image", default_value="image"),
        Node(package="lifelong_learning", executable="object_recognizer"),
        Node(
            package="lifelong_learning",
            executable="feature_extractor",
            parameters=[os.path.join(config, "feature_extractor.yaml"), {"image_topc": "x"}],
            remappings=[("camera", LaunchConfiguration("image")), ("features", LaunchConfiguration("cam"))],
        ),
        Node(
            package="lifelong_learning",
            executable="object_recognition",
            parameters=[os.path.join(config, "nystrom_tuner.yaml"), os.path.join(config, "missing.yaml")],
        ),
        IncludeLaunchDescription(PythonLaunchDescriptionSource("/x/absent.launch.py")),
        IncludeLaunchDescription(
            PythonLaunchDescriptionSource("/x/inverse_dynamics.launch.py"),
            launch_arguments={"joint_state": "js"}.items(),
        ),
    ])
'''


def test_the_checker_finds_each_kind_of_mistake(built_interfaces):
    errors = "\n".join(check_launch_text(BAD, "bad.launch.py"))
    for expected in (
        "no executable scripts/nodes/object_recognizer",
        "feature_extractor: parameter 'image_topc' is not declared by feature_extractor",
        "feature_extractor: remaps 'camera', not a topic of feature_extractor",
        "launch argument 'cam' is not declared",
        "object_recognition: config/nystrom_tuner.yaml does not configure node 'object_recognition'",
        "object_recognition: no config/missing.yaml",
        "includes launch/absent.launch.py, which does not exist",
        "passes 'joint_state' to inverse_dynamics.launch.py, which declares",
        "bad.launch.py: does not give its nodes the middleware environment",
    ):
        assert expected in errors, f"{expected!r} not found in:\n{errors}"
    assert "remaps 'features'" not in errors  # a topic feature_extractor does use
    assert "bad.launch.py:14: object_recognizer" not in errors
    assert len(errors.splitlines()) == 9
    assert check_launch_text("x = 1\n") == [
        "test.launch.py: no generate_launch_description()",
        "test.launch.py: the docstring shows no example `ros2 launch lifelong_learning ...` line",
        "test.launch.py: starts no node",
    ]


BAD_PACKAGE_NODES = '''"""ros2 launch lifelong_learning bad.launch.py"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction

from lifelong_learning.nodes.launch_support import package_node


def _nodes(context):
    return [
        package_node(context, "object_recognizer"),
        package_node(context, context["which"]),
        package_node(
            context, "feature_extractor", parameters=("image_topc",), remappings=("camera", "image")
        ),
    ]


def generate_launch_description():
    return LaunchDescription([DeclareLaunchArgument("image_topc"), OpaqueFunction(function=_nodes)])
'''


def test_the_checker_finds_each_kind_of_mistake_in_package_nodes(built_interfaces):
    errors = "\n".join(check_launch_text(BAD_PACKAGE_NODES, "bad.launch.py"))
    for expected in (
        "no executable scripts/nodes/object_recognizer",
        "feature_extractor: parameter 'image_topc' is not declared by feature_extractor",
        "feature_extractor: remaps 'camera', not a topic of feature_extractor",
        "feature_extractor: launch argument 'camera' is not declared",
        "feature_extractor: launch argument 'image' is not declared",
        "bad.launch.py: does not give its nodes the middleware environment",
        "package_node without a literal executable",
    ):
        assert expected in errors, f"{expected!r} not found in:\n{errors}"
    assert "remaps 'image'" not in errors  # a topic feature_extractor does use
    assert "'image_topc' is not declared\n" not in errors + "\n"  # declared as a launch argument
    assert len(errors.splitlines()) == 7, errors


class _Action:
    """Stand-in for every class the launch files use from launch / launch_ros: records its arguments."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def _stand_in_modules() -> dict[str, types.ModuleType]:
    modules = {}
    for name in (
        "launch",
        "launch.actions",
        "launch.conditions",
        "launch.launch_description_sources",
        "launch.substitutions",
        "launch_ros",
        "launch_ros.actions",
        "launch_ros.parameter_descriptions",
    ):
        module = types.ModuleType(name)
        module.__getattr__ = lambda attr, _n=name: type(attr, (_Action,), {})  # type: ignore[method-assign]
        modules[name] = module
    return modules


def _description_actions(path: Path, monkeypatch, modules: dict[str, types.ModuleType] | None = None) -> list:
    """The actions of a launch file's description, built with the stand-ins (``modules``, default
    :func:`_stand_in_modules`) in place of launch and launch_ros."""
    for name, module in (modules or _stand_in_modules()).items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location(path.name.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (actions,) = module.generate_launch_description().args
    return actions


def _environment_actions(path: Path, monkeypatch) -> dict[str, str]:
    """The SetEnvironmentVariable actions of a launch file's description, as {name: value}."""
    actions = _description_actions(path, monkeypatch)
    return {a.args[0]: a.args[1] for a in actions if type(a).__name__ == "SetEnvironmentVariable"}


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_gives_its_nodes_the_shipped_fastdds_profile_or_keeps_the_users(
    path, monkeypatch, built_interfaces
):
    from lifelong_learning.nodes.supervisor import FASTDDS_PROFILES_VARIABLE, fastdds_profile_path

    monkeypatch.delenv(FASTDDS_PROFILES_VARIABLE, raising=False)
    profile = fastdds_profile_path()
    assert profile is not None and profile.name == "fastdds_large_messages.xml"
    assert _environment_actions(path, monkeypatch) == {FASTDDS_PROFILES_VARIABLE: str(profile)}
    monkeypatch.setenv(FASTDDS_PROFILES_VARIABLE, "/robot/own_profile.xml")
    assert _environment_actions(path, monkeypatch) == {}


class _LaunchConfiguration(_Action):
    """Stand-in of launch.substitutions.LaunchConfiguration: ``perform`` reads the context dict."""

    def perform(self, context: dict[str, str]) -> str:
        return context[self.args[0]]


def _nodes_started(path: Path, monkeypatch, given: dict[str, str]) -> list[_Action]:
    """The Node stand-ins a launch file's OpaqueFunction returns for the arguments ``given`` (the
    others at their declared defaults)."""
    modules = _stand_in_modules()
    modules["launch.substitutions"].LaunchConfiguration = _LaunchConfiguration
    actions = _description_actions(path, monkeypatch, modules)
    context = {
        a.args[0]: a.kwargs["default_value"] for a in actions if type(a).__name__ == "DeclareLaunchArgument"
    }
    assert set(given) <= set(context), f"{path.name} declares no {set(given) - set(context)}"
    context.update(given)
    (function,) = [a.kwargs["function"] for a in actions if type(a).__name__ == "OpaqueFunction"]
    return function(context)


PER_NODE_FILES = [p for p in LAUNCH_FILES if p.name != "lifelong_learning.launch.py"]


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_ros2_launch_kills_a_stopping_node_only_after_its_deadlines_and_checkpoint(
    path, monkeypatch, built_interfaces
):
    """SIGKILL (after sigterm_timeout + sigkill_timeout) comes after the node's own deadlines for
    its callbacks and teardown (nodes/runner.py), with 10 s to spare for its final checkpoint."""
    from lifelong_learning.nodes.launch_support import STOP_TIMEOUTS
    from lifelong_learning.nodes.runner import FINISH_CALLBACKS_S, TEARDOWN_S

    actions = _description_actions(path, monkeypatch)
    declared = {a.args[0]: a.kwargs for a in actions if type(a).__name__ == "DeclareLaunchArgument"}
    seconds = [float(declared[name]["default_value"]) for name in ("sigterm_timeout", "sigkill_timeout")]
    assert seconds == [float(value) for value, _ in STOP_TIMEOUTS.values()]
    assert sum(seconds) >= FINISH_CALLBACKS_S + 2.0 + TEARDOWN_S + 10.0
    # each node is given them itself: a scoped include drops the configurations before the shutdown
    if path.name != "lifelong_learning.launch.py":
        for node in _nodes_started(path, monkeypatch, {"sigkill_timeout": "40"}):
            assert (node.kwargs["sigterm_timeout"], node.kwargs["sigkill_timeout"]) == ("15.0", "40.0")


@pytest.mark.parametrize("path", PER_NODE_FILES, ids=lambda p: p.name)
def test_defaults_start_the_nodes_on_their_shipped_files_outside_any_namespace(
    path, monkeypatch, built_interfaces
):
    from lifelong_learning.nodes.catalog import default_config_file

    nodes = _nodes_started(path, monkeypatch, {})
    assert nodes
    for node in nodes:
        exe = node.kwargs["executable"]
        assert node.kwargs["namespace"] == ""
        assert node.kwargs["parameters"] == [str(default_config_file(exe)), {"use_sim_time": False}]
        assert node.kwargs["ros_arguments"] == ["--log-level", "info"]


def test_inverse_dynamics_arguments_reach_the_node_in_order(monkeypatch, built_interfaces):
    from lifelong_learning.nodes.catalog import default_config_file

    given = {
        "namespace": "robot1",
        "params_file": "/robot/lifelong_learning.yaml",
        "use_sim_time": "True",
        "log_level": "WARN",
        "joint_names": "[panda_joint1, panda_joint2]",
        "urdf_path": "/robot/panda.urdf",
    }
    (node,) = _nodes_started(REPO / "launch" / "inverse_dynamics.launch.py", monkeypatch, given)
    assert node.kwargs["namespace"] == "robot1"
    assert node.kwargs["parameters"] == [
        str(default_config_file("inverse_dynamics")),  # shipped defaults first
        "/robot/lifelong_learning.yaml",  # then the user's file
        {"use_sim_time": True},
        {"urdf_path": "/robot/panda.urdf", "joint_names": ["panda_joint1", "panda_joint2"]},
    ]
    assert node.kwargs["ros_arguments"] == ["--log-level", "warn"]
    (node,) = _nodes_started(
        REPO / "launch" / "inverse_dynamics.launch.py", monkeypatch, {"joint_names": "a, b ,c"}
    )
    assert node.kwargs["parameters"][-1] == {"joint_names": ["a", "b", "c"]}  # urdf_path: the file's


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"log_level": "verbose"}, "log_level:='verbose': expected one of debug, info, warn, error, fatal"),
        ({"use_sim_time": "yes"}, "use_sim_time:='yes': expected true or false"),
        ({"joint_names": "a,,b"}, "joint_names:='a,,b' has an empty name"),
        ({"joint_names": "[a, 3]"}, "expected a list of names"),
        ({"sigkill_timeout": "soon"}, "sigkill_timeout:='soon' is not a number of seconds >= 0"),
        ({"sigterm_timeout": "-1"}, "sigterm_timeout:='-1' is not a number of seconds >= 0"),
    ],
)
def test_bad_launch_arguments_are_clear_errors(given, message, monkeypatch, built_interfaces):
    from lifelong_learning.nodes.launch_support import LaunchArgumentError

    with pytest.raises(LaunchArgumentError, match=re.escape(message)):
        _nodes_started(REPO / "launch" / "inverse_dynamics.launch.py", monkeypatch, given)


def test_the_bring_up_passes_the_common_arguments_to_every_file(built_interfaces):
    tree = ast.parse((REPO / "launch" / "lifelong_learning.launch.py").read_text())
    from lifelong_learning.nodes.launch_support import COMMON_ARGUMENTS

    common = set(COMMON_ARGUMENTS)
    assert {
        "namespace",
        "params_file",
        "use_sim_time",
        "log_level",
        "sigterm_timeout",
        "sigkill_timeout",
    } <= common
    for call in _calls(tree, "IncludeLaunchDescription"):
        args = _keyword(call, "launch_arguments").func.value
        passed = {_string(k) for k in _dict_keys(tree, args)}
        assert common <= passed, (call.lineno, common - passed)
    for path in PER_NODE_FILES:
        assert common <= declared_arguments(ast.parse(path.read_text())), path.name
