"""config/<node>.yaml holds exactly the parameters each node declares, with the same defaults."""

import importlib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
NODES = sorted(p.name for p in (REPO / "scripts" / "nodes").iterdir())


def declared_specs(node: str):
    from lifelong_learning.nodes._base import LearnerNode, NodeBase

    module = importlib.import_module(f"lifelong_learning.nodes.{node}")
    classes = [
        c
        for c in vars(module).values()
        if isinstance(c, type) and issubclass(c, NodeBase) and c.__module__ == module.__name__
    ]
    assert len(classes) == 1, f"{node}: expected one node class"
    specs = [*NodeBase.COMMON_PARAMS, *module.PARAMS]
    if issubclass(classes[0], LearnerNode):
        specs += list(LearnerNode.LEARNER_PARAMS)
    return specs


@pytest.mark.parametrize("node", NODES)
def test_config_file_matches_declared_parameters(node, built_interfaces):
    cfg = yaml.safe_load((REPO / "config" / f"{node}.yaml").read_text())
    assert list(cfg) == [node], f"config/{node}.yaml must configure node {node!r}"
    values = cfg[node]["ros__parameters"]
    specs = declared_specs(node)
    assert set(values) == {s.name for s in specs}
    for spec in specs:
        assert values[spec.name] == spec.default, (
            f"{node}.{spec.name}: yaml {values[spec.name]!r} != code {spec.default!r}"
        )
        assert type(values[spec.name]) is type(spec.default), f"{node}.{spec.name}: type differs"
        assert spec.description.strip(), f"{node}.{spec.name} has no description"
