"""Every tuning option is declared once (TuningJob's fields, retraining/options.py): the
`lifelong-learning tune` options, the nystrom_tuner node's parameters, config/nystrom_tuner.yaml and
docs/parameters.md agree with the declarations (names, types, defaults, ranges, choices, help), and
each checker below finds a copy that drifted."""

import argparse
import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lifelong_learning.retraining.job import TuningJob, job_options
from lifelong_learning.retraining.options import MISSING, Option, Range, format_value

REPO = Path(__file__).resolve().parents[2]


def _parser() -> argparse.ArgumentParser:
    from lifelong_learning.commands.tune import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser


def cli_disagreements(parser: argparse.ArgumentParser, options: tuple[Option, ...]) -> list[str]:
    """What the command line says otherwise than the declarations, or has that none declares."""
    actions = {(a.option_strings or [a.dest])[0]: a for a in parser._actions if a.dest != "help"}
    found = [f"{flag}: declared by no option" for flag in set(actions) - {o.cli for o in options if o.cli}]
    for o in (o for o in options if o.cli):
        a = actions.get(o.cli)
        if a is None:
            found.append(f"{o.name}: no {o.cli} on the command line")
            continue
        nargs = {"list": "+", "pair": 2, "switch-off": 0}.get(o.form)
        want_type = o.element_type() if o.form in ("value", "list", "pair") else None
        expected = {
            "help": o.cli_help(),
            "choices": o.choices,
            "metavar": o.metavar,
            "nargs": nargs,
            "type": want_type if want_type in (int, float) else None,
            "required": o.required,
            "default": False if o.form == "switch-off" else None,  # None: the job's default applies
        }
        got = {
            "help": (a.help or "").replace("%%", "%"),
            "choices": tuple(a.choices) if a.choices is not None else None,
            "metavar": a.metavar,
            "nargs": a.nargs,
            "type": a.type,
            "required": a.required,
            "default": a.default,
        }
        found += [f"{o.cli} {k}: {got[k]!r} != declared {v!r}" for k, v in expected.items() if got[k] != v]
    return found


def node_disagreements(specs: list, options: tuple[Option, ...]) -> list[str]:
    """What the node's parameter declarations say otherwise than the option declarations."""
    by_name = {s.name: s for s in specs}
    found = []
    for o in (o for o in options if o.node):
        s = by_name.get(o.node)
        if s is None:
            found.append(f"{o.name}: the node declares no parameter {o.node}")
            continue
        if s.default != o.node_default() or type(s.default) is not type(o.node_default()):
            found.append(f"{o.node}: default {s.default!r} != declared {o.node_default()!r}")
        if s.bounds != o.node_bounds():
            found.append(f"{o.node}: range {s.bounds} != declared {o.node_bounds()}")
        if s.description != o.node_description():
            found.append(f"{o.node}: description {s.description!r} != declared {o.node_description()!r}")
    return found


def docs_disagreements(text: str, options: tuple[Option, ...]) -> list[str]:
    """The declared node parameters whose row in docs/parameters.md is not the declaration's."""
    from lifelong_learning.commands.params import default_text, type_name

    found = []
    for o in (o for o in options if o.node):
        bounds = o.node_bounds()
        span = "" if bounds is None else f"[{bounds[0]:g}, {bounds[1]:g}]"
        row = (
            f"| `{o.node}` | {type_name(o.node_default())} | `{default_text(o.node_default())}` | {span} "
            f"| read-only | {o.node_description()} |"
        )
        if row not in text.splitlines():
            found.append(f"{o.node}: docs/parameters.md lacks the row {row}")
    return found


def test_the_command_line_is_made_from_the_declarations():
    assert cli_disagreements(_parser(), job_options()) == []


def test_the_command_line_gives_no_default_of_its_own():
    """A bare command line makes the job of the declared defaults (but for the progress bar, which
    the command shows unless --no-progress); each option sets its own field."""
    from lifelong_learning.commands.tune import job_arguments

    parser = _parser()
    bare = TuningJob(**job_arguments(parser.parse_args(["b", "--task", "classification", "--out", "m"])))
    assert bare == TuningJob(bags=["b"], task="classification", out="m", progress=True)
    given = [
        *("b", "--task", "inverse-dynamics", "--out", "m", "--objective", "gcv,sgpr", "--centers", "7"),
        *("--epochs", "8", "--patience", "9", "--lr", "0.5", "--device", "cpu", "--dtype", "float32"),
        *("--test-fraction", "0.3", "--topic", "/js", "--urdf", "r.urdf", "--init", "i.llm"),
        *("--forgetting", "1,0.99", "--residual-regularization", "2, 3", "--lengthscale-range", "1", "2"),
        *("--limit-margin", "inf", "--outlier-k", "4", "--sample-rows", "50", "--serving", "s.llm"),
        *("--validation", "v1", "v2", "--holdout-fraction", "0.2", "--margin", "0.1", "--report", "r"),
        *("--seed", "3", "--no-progress"),
    ]
    job = TuningJob(**job_arguments(parser.parse_args(given)))
    assert dataclasses.asdict(job) == dataclasses.asdict(
        TuningJob(
            bags=["b"],
            task="inverse-dynamics",
            out="m",
            objectives=["gcv", "sgpr"],
            centers=7,
            epochs=8,
            patience=9,
            lr=0.5,
            device="cpu",
            dtype="float32",
            test_fraction=0.3,
            topic="/js",
            urdf="r.urdf",
            init="i.llm",
            forgetting=[1.0, 0.99],
            residual_regularization=[2.0, 3.0],
            lengthscale_range=(1.0, 2.0),
            limit_margin=math.inf,
            outlier_k=4.0,
            sample_rows=50,
            serving="s.llm",
            validation_bags=["v1", "v2"],
            holdout_fraction=0.2,
            promotion_margin=0.1,
            report="r",
            seed=3,
            progress=False,
        )
    )


def test_the_node_parameters_are_made_from_the_declarations(built_interfaces):
    from lifelong_learning.nodes import catalog

    specs = list(catalog.declared_parameters("nystrom_tuner"))
    assert node_disagreements(specs, job_options()) == []
    # what the node makes of its parameters' defaults is the job's defaults
    for o in (o for o in job_options() if o.node):
        assert o.from_node(o.node_default()) == (o.default if o.name != "objectives" else None), o.name
    shipped = yaml.safe_load((REPO / "config" / "nystrom_tuner.yaml").read_text())
    values = shipped["/**/nystrom_tuner"]["ros__parameters"]
    assert {o.node: values[o.node] for o in job_options() if o.node} == {
        o.node: o.node_default() for o in job_options() if o.node
    }


def test_the_parameter_docs_show_the_declarations():
    text = (REPO / "docs" / "parameters.md").read_text(encoding="utf-8")
    assert docs_disagreements(text, job_options()) == []


def test_each_checker_finds_a_copy_that_drifted(built_interfaces):
    """A hand-written option, another help, default or range: each is found."""
    from lifelong_learning.nodes import catalog
    from lifelong_learning.nodes.base import ParamSpec

    parser = _parser()
    parser.add_argument("--extra", type=int, default=3)
    next(a for a in parser._actions if a.dest == "centers").help = "centres"
    assert cli_disagreements(parser, job_options()) == [
        "--extra: declared by no option",
        "--centers help: 'centres' != declared 'number of Nyström centres M (default: 100)'",
    ]
    specs = list(catalog.declared_parameters("nystrom_tuner"))
    centres = next(o for o in job_options() if o.name == "centers")
    moved = [ParamSpec(s.name, 200, s.description, s.bounds) if s.name == centres.node else s for s in specs]
    assert node_disagreements(moved, job_options()) == ["default_centers: default 200 != declared 100"]
    narrower = dataclasses.replace(centres, range=Range(1, 1000))
    assert node_disagreements(specs, (narrower,)) == [
        "default_centers: range (1, 1000000) != declared (1, 1000)"
    ]
    text = (REPO / "docs" / "parameters.md").read_text(encoding="utf-8")
    assert docs_disagreements(text.replace("Number of Nyström centres M", "Centres"), job_options()) == [
        "default_centers: docs/parameters.md lacks the row | `default_centers` | integer | `100` "
        f"| [1, 1e+06] | read-only | {centres.node_description()} |"
    ]


def test_the_objectives_help_names_every_objective():
    from lifelong_learning.nystrom.objectives import OBJECTIVES

    help_text = next(o for o in job_options() if o.name == "objectives").help
    named = help_text.split(": ", 1)[1].split(" (validates")[0].split(", ")
    assert sorted(named) == sorted(OBJECTIVES)


def test_a_declaration_carries_name_type_default_range_and_help():
    centers = next(o for o in job_options() if o.name == "centers")
    declared = (centers.name, centers.type, centers.default, str(centers.range))
    assert declared == ("centers", int, 100, "[1, 1e+06]")
    assert centers.help == "number of Nyström centres M" and centers.cli == "--centers"
    assert [o.name for o in job_options()] == [f.name for f in dataclasses.fields(TuningJob)]
    required = [o.name for o in job_options() if o.default is MISSING]
    assert required == ["bags", "task", "out"]
    assert format_value((1.0, 0.9999, 0.9995)) == "1,0.9999,0.9995"


@pytest.mark.parametrize(
    ("rng", "inside", "outside", "phrase"),
    [
        (Range(0.0, 1.0, low_open=True), [1.0, 1e-9], [0.0, 1.5, math.nan, "x"], "in (0, 1]"),
        (Range(0.0, high_open=True, low_open=True), [1e300], [0.0, math.inf, math.nan], "finite and > 0"),
        (Range(0.0, low_open=True), [math.inf], [0.0, -1.0], "> 0"),
        (Range(4), [4, math.inf], [3], ">= 4"),
    ],
)
def test_a_range_says_what_it_holds(rng, inside, outside, phrase):
    assert all(v in rng for v in inside) and not any(v in rng for v in outside)
    assert rng.phrase() == phrase


def test_the_declarations_load_neither_torch_nor_ros():
    """The tune command's parser (built at every start of the CLI) and the tuner node import the
    declarations: they load no torch, ROS, Pinocchio, nor the learners (scipy and numba)."""
    heavy = ("torch", "rclpy", "pinocchio", "scipy", "lifelong_learning.learners")
    code = (
        "import sys, argparse\n"
        "import lifelong_learning.retraining.job as job\n"
        "from lifelong_learning.commands.tune import add_arguments\n"
        "add_arguments(argparse.ArgumentParser())\n"
        "job.TuningJob(bags=['b'], task='classification', out='m')\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
