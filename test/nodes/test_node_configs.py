"""config/<node>.yaml holds exactly the parameters each node declares, with the same defaults;
every other config/*.yaml is a system file that `lifelong-learning up` accepts."""

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
NODES = sorted(p.name for p in (REPO / "scripts" / "nodes").iterdir())


@pytest.mark.parametrize("node", NODES)
def test_config_file_matches_declared_parameters(node, built_interfaces):
    from lifelong_learning.nodes.catalog import declared_parameters

    cfg = yaml.safe_load((REPO / "config" / f"{node}.yaml").read_text())
    # '/**/<node>': rcl applies a bare '<node>' key only to a node outside any namespace
    assert list(cfg) == [f"/**/{node}"], f"config/{node}.yaml must configure node {node!r} in any namespace"
    values = cfg[f"/**/{node}"]["ros__parameters"]
    specs = declared_parameters(node)
    assert set(values) == {s.name for s in specs}
    for spec in specs:
        assert values[spec.name] == spec.default, (
            f"{node}.{spec.name}: yaml {values[spec.name]!r} != code {spec.default!r}"
        )
        assert type(values[spec.name]) is type(spec.default), f"{node}.{spec.name}: type differs"
        assert spec.description.strip(), f"{node}.{spec.name} has no description"


def test_other_config_files_are_system_files_up_accepts(built_interfaces):
    from lifelong_learning.commands.up import load_system

    others = sorted(p for p in (REPO / "config").glob("*.yaml") if p.stem not in NODES)
    assert "robot.yaml" in [p.name for p in others]
    for path in others:
        system = load_system([path])
        assert set(system.nodes) <= set(NODES)


@pytest.mark.parametrize("namespace", ["", "robot1", "fleet/robot2"])
def test_rcl_applies_the_shipped_file_to_the_node_in_any_namespace(namespace, built_interfaces):
    """What rcl itself reads from config/inverse_dynamics.yaml for a node in ``namespace`` (a
    namespace is what `ros2 launch ... namespace:=robot1` gives): every parameter of the file."""
    import rclpy
    from rclpy.context import Context
    from rclpy.node import Node

    path = REPO / "config" / "inverse_dynamics.yaml"
    expected = yaml.safe_load(path.read_text())["/**/inverse_dynamics"]["ros__parameters"]
    context = Context()
    rclpy.init(context=context, args=["--ros-args", "--params-file", str(path)])
    try:
        node = Node(
            "inverse_dynamics",
            namespace=namespace,
            context=context,
            automatically_declare_parameters_from_overrides=True,
        )
        got = {name: node.get_parameter(name).value for name in expected}
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    assert got == {k: (list(v) if isinstance(v, list) else v) for k, v in expected.items()}
