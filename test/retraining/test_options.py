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
from lifelong_learning.retraining.options import MISSING, Option, Range, format_value, option, options_of

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
    narrower = dataclasses.replace(centres, node_range=Range(1, 1000))
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
    assert declared == ("centers", int, 100, "[1, inf]")
    assert centers.node_bounds() == (1, 1_000_000)
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


#: the nystrom_tuner parameters' bounds at df2a1c2 (before the declarations): the node keeps them
NODE_BOUNDS = {
    "default_centers": (1, 1_000_000),
    "default_epochs": (1, 100_000),
    "patience": (1, 1_000_000),
    "learning_rate": (1e-6, 10.0),
    "test_fraction": (0.01, 0.9),
    "promotion_margin": (0.0, 0.99),
    "holdout_fraction": (0.01, 0.5),
    "max_message_bytes": (1024, 1_000_000_000),
}


def test_the_node_keeps_its_own_bounds():
    """The node's parameters are bounded as before the declarations (holdout_fraction >= 0.01: the
    node always holds some of the bags out); the job's ranges are wider (those of the CLI)."""
    bounds = {o.node: o.node_bounds() for o in job_options() if o.node}
    assert {k: v for k, v in bounds.items() if v is not None} == NODE_BOUNDS
    for o in (o for o in job_options() if o.node_range is not None):
        assert o.node_range.closed and o.node_range.low in o.range if o.range else True, o.name


def _cli_job(tmp_path, *flags: str) -> TuningJob:
    from lifelong_learning.commands.tune import job_arguments

    given = [str(tmp_path / "bag"), "--task", "classification", "--out", str(tmp_path / "m"), *flags]
    return TuningJob(**job_arguments(_parser().parse_args(given)))


@pytest.mark.parametrize(
    "flags",
    [
        ("--lr", "20"),
        ("--lr", "0"),
        ("--test-fraction", "0.95"),
        ("--margin", "0.995"),
        ("--epochs", "200000"),
        ("--centers", "2000000"),
        ("--patience", "2000000"),
        ("--holdout-fraction", "0", "--validation", "check"),
        ("--limit-margin", "inf", "--outlier-k", "inf"),
    ],
)
def test_the_command_line_accepts_what_it_accepted_before(tmp_path, flags):
    """Values `lifelong-learning tune` accepted at df2a1c2, beyond the node's parameter bounds."""
    from lifelong_learning.io.bags import write_labeled_features

    for name in ("bag", "check"):
        write_labeled_features(tmp_path / name, [[0.0, 1.0]] * 20, ["a"] * 20)
    flags = tuple(str(tmp_path / f) if f == "check" else f for f in flags)
    _cli_job(tmp_path, *flags).validate()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--forgetting", ""), r"forgetting factors must be in \(0, 1\], got \[\]"),
        (("--residual-regularization", " , "), r"residual λ multipliers must be finite and > 0, got \[\]"),
        (("--test-fraction", "1"), r"test_fraction must be in \(0, 1\), got 1.0"),
        (("--margin", "1"), r"the promotion margin must be in \[0, 1\), got 1.0"),
        (("--centers", "0"), r"centers must be >= 1, got 0"),
        (("--epochs", "0"), r"epochs must be >= 1, got 0"),
        (("--patience", "0"), r"patience must be >= 1, got 0"),
        (("--limit-margin", "-1"), r"limit_margin must be >= 0 \(inf disables the test\), got -1.0"),
        (("--outlier-k", "0"), r"outlier_k must be > 0 \(inf disables the test\), got 0.0"),
    ],
)
def test_the_command_line_refuses_what_it_refused_before(tmp_path, flags, message):
    """Values `lifelong-learning tune` refused at df2a1c2, with a message that says at least as much."""
    from lifelong_learning.io.bags import write_labeled_features

    write_labeled_features(tmp_path / "bag", [[0.0, 1.0]] * 20, ["a"] * 20)
    with pytest.raises(ValueError, match=message):
        _cli_job(tmp_path, *flags).validate()


def test_an_empty_objective_list_names_none():
    """`--objective ''` and the node's default_objective '': the task's default, as before."""
    objectives = next(o for o in job_options() if o.name == "objectives")
    assert objectives.from_cli("") is None and objectives.from_cli(" , ") is None
    assert objectives.from_node("") is None
    assert TuningJob(bags=["b"], task="inverse-dynamics", out="m").objectives == ("holdout-bags",)


def test_the_progress_bar_has_a_default_for_the_job_and_one_for_the_command_line():
    progress = next(o for o in job_options() if o.name == "progress")
    assert (progress.default, progress.cli_default) == (False, True)
    assert (progress.from_cli(False), progress.from_cli(True)) == (True, False)  # --no-progress: False
    with pytest.raises(AssertionError, match="switch-off"):
        option(False, help="bar", cli="--no-bar", form="switch-off")


def test_a_csv_node_parameter_is_converted_like_the_command_line():
    forgetting = next(o for o in job_options() if o.name == "forgetting")
    assert forgetting.from_node("1, 0.999") == [1.0, 0.999] == forgetting.from_cli("1, 0.999")
    assert forgetting.from_node("") == [] == forgetting.from_cli("")  # refused by check, not the default
    with pytest.raises(ValueError, match="takes comma-separated numbers"):
        forgetting.from_node("1, fast")


def test_a_sequence_is_known_by_its_type_not_its_command_line_form():
    """check() reads a sequence's elements whatever its form (here none: not on the command line)."""
    forgetting = next(o for o in job_options() if o.name == "forgetting")
    bare = dataclasses.replace(forgetting, cli=None, form="value")
    with pytest.raises(ValueError, match=r"got \[1.0, 2.0\]"):
        bare.check((1.0, 2.0))
    bare.check((1.0, 0.5))
    assert not next(o for o in job_options() if o.name == "topic").is_sequence()  # str | None


def test_a_declaration_that_cannot_be_right_is_refused():
    with pytest.raises(AssertionError, match="form 'lst' is not one of"):
        option((), help="x", form="lst")
    with pytest.raises(AssertionError, match="closed and finite"):
        option(1, help="x", node="x", node_range=Range(1))
    with pytest.raises(AssertionError, match="outside the job's range"):
        option(1, help="x", range=Range(1, 10), node="x", node_range=Range(0, 10))
    with pytest.raises(AssertionError, match="without a node parameter"):
        option(1, help="x", node_range=Range(0, 10))


def test_an_option_type_must_be_importable_at_run_time(tmp_path, monkeypatch):
    """A field that is no option may be annotated with a name imported for type checkers only;
    an option may not, and the error says so."""
    (tmp_path / "annotated_job.py").write_text(
        "from __future__ import annotations\n"
        "from dataclasses import dataclass\n"
        "from typing import TYPE_CHECKING\n"
        "from lifelong_learning.retraining.options import option\n"
        "if TYPE_CHECKING:\n"
        "    from decimal import Decimal\n\n"
        "@dataclass\n"
        "class Fine:\n"
        "    note: Decimal | None = None\n"
        "    size: int = option(3, help='a size')\n\n"
        "@dataclass\n"
        "class Wrong:\n"
        "    size: Decimal = option(3, help='a size')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import annotated_job

    try:
        assert [(o.name, o.type) for o in options_of(annotated_job.Fine)] == [("size", int)]
        with pytest.raises(TypeError, match=r"Wrong\.size: its annotation 'Decimal' names 'Decimal'"):
            options_of(annotated_job.Wrong)
    finally:
        sys.modules.pop("annotated_job", None)
