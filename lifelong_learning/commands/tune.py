"""``lifelong-learning tune``: tune a Nyström model on rosbag2 logs and write a model file.

Reads the bags (:mod:`lifelong_learning.io.bags`), holds out a test split, tunes λ,
length-scales and centres with each requested objective (:func:`lifelong_learning.nystrom.tune`),
and exports the model tuned with the first objective to the online learners' model file:

- ``--task classification``: LabeledFeatures → an IncrementalRLSC with the Nyström map;
- ``--task inverse-dynamics``: JointState → a SemiparametricInverseDynamics (``--urdf``) whose
  residual (of the rigid-body model with friction) is the Nyström map + RLS, trained by replaying
  the samples in time order with the forgetting factor (``--forgetting``) and the multiplier of the
  tuned residual λ (``--residual-regularization``) that best predict the most recent part of the
  bags (the test split).

Samples that no robot produces or that the rigid-body model finds to be outliers are left out and
counted (``--limit-margin``, ``--outlier-k``; ``skipped`` in the report), as are malformed
messages in the bags. ``--init MODEL`` continues from the serving model instead of starting over (see
:class:`~lifelong_learning.retraining.job.TuningJob`). A report (markdown and JSON, next
to the model) lists per objective the test metrics, the time and the chosen hyperparameters,
and the promotion gate's verdict (:mod:`lifelong_learning.retraining.promotion`): the candidate
and the serving model (``--serving``, default ``--init``) scored on the most recent part of the
bags (``--holdout-fraction``, never trained on) and on ``--validation`` bags. The CLI announces
nothing: the verdict says whether the ``nystrom_tuner`` node would.

Under ``torchrun`` (``torchrun --nproc-per-node=N --no-python lifelong-learning tune ...``) the
processes share the job: each reads a contiguous share of the bags, the tuning and the export are
all-reduced (gloo on CPU, NCCL with a GPU per process) and rank 0 writes the model and the
report, which records ``world_size`` and ``samples_per_rank``; the model equals the one-process
model to rounding. Classification with the objectives proposed, gcv, creg or sgpr only (see
:meth:`~lifelong_learning.retraining.job.TuningJob.validate`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = "tune a Nyström model (λ, length-scales, centres) on rosbag2 logs and write a model file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``tune``: those of :class:`~lifelong_learning.retraining.job.TuningJob` that
    declare a command-line flag, from their declarations (name, type, default, choices, help)."""
    from lifelong_learning.retraining.job import job_options

    for opt in job_options():
        if opt.cli is not None:
            parser.add_argument(opt.cli, **_argument(opt))


def _argument(opt: Any) -> dict[str, Any]:
    """argparse's keywords for option ``opt``: not given, it is None, and the job's default applies."""
    kw: dict[str, Any] = {"help": opt.cli_help().replace("%", "%%")}
    if opt.form == "switch-off":
        return {**kw, "action": "store_true"}
    if not opt.cli.startswith("-"):  # positional
        return {**kw, "nargs": "+"}
    kw.update(default=None, required=opt.required)
    if opt.choices is not None:
        kw["choices"] = opt.choices
    if opt.metavar is not None:
        kw["metavar"] = opt.metavar
    if opt.form == "list":
        kw["nargs"] = "+"
    elif opt.form == "pair":
        kw["nargs"] = 2
    if opt.form != "csv" and opt.element_type() in (int, float):
        kw["type"] = opt.element_type()
    return kw


def job_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~lifelong_learning.retraining.job.TuningJob` keywords the command line gave (the
    others keep their declared defaults). ValueError for a comma-separated list that is not one."""
    from lifelong_learning.retraining.job import job_options

    given = {}
    for opt in job_options():
        if opt.cli is not None:
            value = opt.from_cli(getattr(args, _dest(opt)))
            if value is not None:
                given[opt.name] = value
    return given


def _dest(opt: Any) -> str:
    return opt.cli.lstrip("-").replace("-", "_")


def run(args: argparse.Namespace) -> int:
    """Read, tune, evaluate, export, report. Returns 0 on success, 2 on bad input."""
    from lifelong_learning.io.bags import BagError
    from lifelong_learning.nystrom.distributed import GroupSetupError, RankFailedError, joined
    from lifelong_learning.retraining.job import TuningJob
    from lifelong_learning.retraining.pipeline import run_job

    try:
        job = TuningJob(**job_arguments(args))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        with joined() as group:
            report = run_job(job, group=group)
    except (BagError, ValueError, OSError, RankFailedError, GroupSetupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not group.is_main:
        return 0
    print(report["markdown"])
    print(f"model written to {args.out}")
    verdict = "would be promoted" if report["promotion"]["promoted"] else "would NOT be promoted"
    print(f"promotion gate: {verdict}: {report['promotion']['reason']}")
    return 0
