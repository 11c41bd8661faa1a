"""`lifelong-learning params`: the parameter docs come from the code, and docs/parameters.md is current."""

from pathlib import Path

from lifelong_learning.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_committed_docs_equal_the_rendered_parameters(built_interfaces):
    from lifelong_learning.commands.params import REGENERATE, render_markdown

    committed = (REPO / "docs" / "parameters.md").read_text()
    assert committed == render_markdown(), f"docs/parameters.md is out of date: run `{REGENERATE}`"


def test_every_declared_parameter_is_documented(built_interfaces):
    from lifelong_learning.commands.params import render_markdown
    from lifelong_learning.nodes import catalog

    text = render_markdown()
    for name in catalog.node_names():
        assert f"## `{name}`" in text
        for spec in catalog.declared_parameters(name):
            assert f"| `{spec.name}` |" in text


def test_text_listing_and_unknown_node(capsys, built_interfaces):
    assert main(["params", "inverse_dynamics"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("inverse_dynamics: ")
    assert '  robot_description_topic: string = "robot_description" (read-only)' in out
    assert "  checkpoint_path: string" in out and "  learning: bool = true\n" in out
    assert main(["params", "inverse_dynamic"]) == 2
    err = capsys.readouterr().err
    assert "unknown node(s) inverse_dynamic; the nodes are: " in err and "inverse_dynamics" in err
