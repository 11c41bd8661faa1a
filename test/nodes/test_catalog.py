"""The node registry: found from the modules, equal to the installed executables, parameters as declared."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_nodes_are_the_executables(built_interfaces):
    from lifelong_learning.nodes.catalog import node_names

    assert list(node_names()) == sorted(p.name for p in (REPO / "scripts" / "nodes").iterdir())


def test_classes_parameters_and_default_files(built_interfaces):
    from lifelong_learning.nodes import catalog
    from lifelong_learning.nodes.base import NodeBase
    from lifelong_learning.nodes.learner import LearnerNode

    learners = {n for n in catalog.node_names() if catalog.is_learner(n)}
    assert {"object_recognition", "inverse_dynamics"} <= learners
    assert "nystrom_tuner" not in learners
    for name in catalog.node_names():
        cls = catalog.node_class(name)
        assert issubclass(cls, NodeBase)
        names = [s.name for s in catalog.declared_parameters(name)]
        assert len(names) == len(set(names)), f"{name} declares a parameter twice"
        assert names[: len(NodeBase.COMMON_PARAMS)] == [s.name for s in NodeBase.COMMON_PARAMS]
        has_learner_params = {s.name for s in LearnerNode.LEARNER_PARAMS} <= set(names)
        assert has_learner_params == (name in learners)
        default = catalog.default_config_file(name)
        assert default is not None and default.name == f"{name}.yaml"
        assert catalog.node_summary(name)
    with pytest.raises(KeyError, match="unknown node 'nope'; the nodes of lifelong_learning are: "):
        catalog.node_class("nope")


def test_declared_parameters_are_what_a_running_node_declares(rclpy_context):
    """Against the real thing: a node created from the catalog declares exactly these (plus rclpy's own)."""
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes import catalog

    node = catalog.node_class("object_recognition")(
        context=rclpy_context, parameter_overrides=[Parameter("diagnostics_period_s", value=0.0)]
    )
    try:
        declared = set(node.list_parameters([], 0).names)
    finally:
        node.destroy_node()
    expected = {s.name for s in catalog.declared_parameters("object_recognition")}
    ours = {name for name in declared if not name.startswith(catalog.BUILTIN_PREFIXES)}
    assert ours == expected | set(catalog.BUILTIN_PARAMETERS)
    # every input and output stream's QoS can be overridden from a params file
    assert "qos_overrides./features.subscription.reliability" in declared
    assert "qos_overrides./prediction.publisher.depth" in declared


def test_the_tuner_node_default_patience_is_the_tuning_default():
    """The node's job parameters are generated from the job's declarations: the same default."""
    from lifelong_learning.nodes import catalog
    from lifelong_learning.nystrom.tuning import DEFAULT_PATIENCE

    spec = next(s for s in catalog.declared_parameters("nystrom_tuner") if s.name == "patience")
    assert spec.default == DEFAULT_PATIENCE
