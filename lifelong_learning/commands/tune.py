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
:class:`~lifelong_learning.retraining.pipeline.TuningJob`). A report (markdown and JSON, next
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
:meth:`~lifelong_learning.retraining.pipeline.TuningJob.validate`).
"""

from __future__ import annotations

import argparse
import sys

HELP = "tune a Nyström model (λ, length-scales, centres) on rosbag2 logs and write a model file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``tune``."""
    parser.add_argument("bags", nargs="+", help="rosbag2 directories (MCAP or sqlite3)")
    parser.add_argument("--task", choices=("classification", "inverse-dynamics"), required=True)
    parser.add_argument(
        "--objective",
        default="",
        help="objective(s), comma-separated (default: holdout-bags for inverse dynamics, proposed for "
        "classification): proposed, proposed-stochastic, gcv, creg, sgpr, holdout, holdout-bags, "
        "holdout-recent (validates on the most recent rows: for time-ordered logs); "
        "the first one's model is exported, the others are reported for comparison",
    )
    parser.add_argument("--centers", type=int, default=100, help="number of Nyström centres M")
    parser.add_argument(
        "--epochs", type=int, default=100, help="Adam steps (early stop when the objective rises)"
    )
    parser.add_argument(
        "--patience",
        type=int,
        default=None,
        help="early stop after the objective rose this many times since its best (Meanti et al. §5; "
        "default 5)",
    )
    parser.add_argument("--lr", type=float, default=0.05, help="Adam learning rate")
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    parser.add_argument("--test-fraction", type=float, default=0.2, help="held-out test share")
    parser.add_argument(
        "--topic",
        default=None,
        help="topic to read (default: every topic of the type; inverse-dynamics needs it when the bag "
        "has several JointState topics, e.g. --topic /joint_states)",
    )
    parser.add_argument(
        "--urdf", default=None, help="URDF of the robot (inverse-dynamics; default: the --init model's)"
    )
    parser.add_argument(
        "--init",
        default=None,
        metavar="MODEL",
        help="the serving model's file (or checkpoint) to continue from: its classes are kept (and its "
        "held-out samples learned); its joints, URDF and rigid-body + friction parameters are the prior",
    )
    parser.add_argument(
        "--forgetting",
        default=None,
        help="inverse-dynamics: forgetting factors per sample to choose from on the most recent part "
        "of the bags, comma-separated (default: retraining.pipeline.DEFAULT_FORGETTING, 1 to 0.9995)",
    )
    parser.add_argument(
        "--residual-regularization",
        default=None,
        help="inverse-dynamics: multipliers of the tuned residual λ to choose from on the most recent "
        "part, comma-separated (default: retraining.pipeline.DEFAULT_RESIDUAL_REGULARIZATION, 1 to 1000)",
    )
    parser.add_argument(
        "--lengthscale-range",
        type=float,
        nargs=2,
        default=None,
        metavar=("A", "B"),
        help="bound every length-scale to [A, B] x its input's range (max - min); default: unbounded",
    )
    parser.add_argument(
        "--limit-margin",
        type=float,
        default=None,
        help="inverse-dynamics: drop samples beyond the URDF's limits widened by this margin before "
        "tuning (default 1.0: twice the velocity and effort limits; inf: keep every sample)",
    )
    parser.add_argument(
        "--outlier-k",
        type=float,
        default=None,
        help="inverse-dynamics: drop samples whose rigid-body residual exceeds this many robust "
        "standard deviations (default 6; inf: keep every sample); counts are in the report",
    )
    parser.add_argument(
        "--serving",
        default=None,
        metavar="MODEL",
        help="the serving model the promotion gate compares the candidate with (default: --init; "
        "without either: RNEA for inverse dynamics, nothing for classification)",
    )
    parser.add_argument(
        "--validation",
        nargs="+",
        default=(),
        metavar="BAG",
        help="bags the promotion gate scores on besides the most recent part of the bags (never trained on)",
    )
    parser.add_argument(
        "--holdout-fraction",
        type=float,
        default=None,
        help="most recent share of the bags held out for the promotion gate (default 0.1; at most about "
        "--sample-rows samples)",
    )
    parser.add_argument(
        "--margin",
        type=float,
        default=None,
        help="relative margin by which the candidate must beat the serving model (default 0.02)",
    )
    parser.add_argument(
        "--sample-rows",
        type=int,
        default=None,
        help="tune on a uniform random sample of at most this many training samples (default 20000); "
        "the test error and the exported model use every sample",
    )
    parser.add_argument("--out", required=True, help="model file to write (never over a non-model file)")
    parser.add_argument("--report", default=None, help="report path without suffix (default: OUT.report)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Read, tune, evaluate, export, report. Returns 0 on success, 2 on bad input."""
    from lifelong_learning.io.bags import BagError
    from lifelong_learning.nystrom.distributed import GroupSetupError, RankFailedError, joined
    from lifelong_learning.nystrom.tuning import DEFAULT_PATIENCE
    from lifelong_learning.retraining.pipeline import (
        DEFAULT_FORGETTING,
        DEFAULT_HOLDOUT_FRACTION,
        DEFAULT_LIMIT_MARGIN,
        DEFAULT_OUTLIER_K,
        DEFAULT_RESIDUAL_REGULARIZATION,
        DEFAULT_SAMPLE_ROWS,
        TuningJob,
        run_job,
    )
    from lifelong_learning.retraining.promotion import DEFAULT_MARGIN

    try:
        forgetting = (
            DEFAULT_FORGETTING if args.forgetting is None else _floats(args.forgetting, "--forgetting")
        )
        scales = (
            DEFAULT_RESIDUAL_REGULARIZATION
            if args.residual_regularization is None
            else _floats(args.residual_regularization, "--residual-regularization")
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    job = TuningJob(
        bags=list(args.bags),
        task=args.task,
        out=args.out,
        objectives=[o.strip() for o in args.objective.split(",") if o.strip()] or None,
        centers=args.centers,
        epochs=args.epochs,
        patience=DEFAULT_PATIENCE if args.patience is None else args.patience,
        lr=args.lr,
        device=args.device,
        dtype=args.dtype,
        test_fraction=args.test_fraction,
        topic=args.topic,
        urdf=args.urdf,
        forgetting=forgetting,
        residual_regularization=scales,
        lengthscale_range=tuple(args.lengthscale_range) if args.lengthscale_range else None,
        init=args.init,
        serving=args.serving,
        validation_bags=list(args.validation),
        holdout_fraction=DEFAULT_HOLDOUT_FRACTION if args.holdout_fraction is None else args.holdout_fraction,
        promotion_margin=DEFAULT_MARGIN if args.margin is None else args.margin,
        limit_margin=DEFAULT_LIMIT_MARGIN if args.limit_margin is None else args.limit_margin,
        outlier_k=DEFAULT_OUTLIER_K if args.outlier_k is None else args.outlier_k,
        report=args.report,
        sample_rows=DEFAULT_SAMPLE_ROWS if args.sample_rows is None else args.sample_rows,
        seed=args.seed,
        progress=not args.no_progress,
    )
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


def _floats(text: str, option: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{option} takes comma-separated numbers, got {text!r}") from None
