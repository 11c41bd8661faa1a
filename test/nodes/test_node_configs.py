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
    assert list(cfg) == [node], f"config/{node}.yaml must configure node {node!r}"
    values = cfg[node]["ros__parameters"]
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
