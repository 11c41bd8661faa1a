"""What a retraining job is: :class:`TuningJob`, every option declared once with its type, default,
range and help (:mod:`~lifelong_learning.retraining.options`), and its validation.

The ``lifelong-learning tune`` options, the ``nystrom_tuner`` node's job parameters and
``docs/parameters.md`` are made from these declarations. Importing this module loads no torch, ROS
or learners (the CLI builds its parser and the node declares its parameters from it).

The outputs never replace anything but a model file (the model) or an earlier report (the
reports): a directory, a symlink, a FIFO or another file there refuses the job
(:func:`check_outputs`). Every file a job names is checked before anything opens it: a bag's files
(:func:`~lifelong_learning.io.bag_files.check_bag`), the URDF and the models regular files within
their bounds (:data:`MAX_URDF_BYTES`, :data:`~lifelong_learning.core.model_file.MAX_MODEL_BYTES`);
:meth:`TuningJob.check_request` does all that opens nothing, cheaply (the tuner node's goal check).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lifelong_learning.core.files import MAX_URDF_BYTES, UnsafePathError, check_regular, check_replaceable
from lifelong_learning.core.model_file import MAX_MODEL_BYTES, is_model_file, read_model_kind
from lifelong_learning.io.bag_files import DEFAULT_MAX_MESSAGE_BYTES, check_bag, open_bag
from lifelong_learning.io.bags import DEFAULT_BLOCK
from lifelong_learning.nystrom.early_stopping import DEFAULT_PATIENCE
from lifelong_learning.retraining.options import Option, Range, option, options_of
from lifelong_learning.retraining.promotion import DEFAULT_MARGIN

if TYPE_CHECKING:
    from lifelong_learning.nystrom.distributed import Group

#: forgetting factors per sample the inverse-dynamics export chooses from, on the most recent block.
#: Smaller factors were dropped: with them the rule picked 0.999 on seed 0 of both robots, which
#: predicted a new trajectory 6.8x (UR5) and 1.8x (Panda) worse than 0.9995; 0.998 was worse than no
#: forgetting in every cell (exponential forgetting also forgets the λI prior: the RLS winds up).
#: docs/benchmarks/retraining-sweep-{ur5,panda}.md
DEFAULT_FORGETTING = (1.0, 0.9999, 0.9995)
#: multipliers of the tuned residual λ the inverse-dynamics export chooses from, on the most recent
#: block: the tuning objectives are computed on the logged path and under-regularize for new motion
#: (seed 0: ×100 chosen on the UR5, ×10 on the Panda; at β = 1 the new-trajectory error of ×1 was
#: 0.114 and 0.078, of the chosen multiplier 0.058 and 0.062: docs/benchmarks/retraining-sweep-*.md)
DEFAULT_RESIDUAL_REGULARIZATION = (1.0, 10.0, 100.0, 1000.0)
#: plausibility margin of the joint limits for inverse-dynamics samples (0.5 refused 5 % of the
#: simulated Panda's samples, which tracks at up to 1.5 times its URDF velocity limits:
#: see :mod:`lifelong_learning.dynamics.plausibility`); inf: no gate
DEFAULT_LIMIT_MARGIN = 1.0
#: residual outlier threshold in robust standard deviations of the rigid-body residuals; inf: none
DEFAULT_OUTLIER_K = 6.0
#: smallest robust scale of the residual outlier test, as a fraction of each joint's effort limit:
#: on the clean simulated Panda (12 s, 1200 samples) the rigid-body residuals are so small that
#: without a floor 171 samples (14 %) were beyond 6 scales, with 0.002 27, with 0.01 6 (0.5 %)
DEFAULT_OUTLIER_FLOOR = 0.01
#: most rows of the inverse-dynamics job's log held in memory for tuning the Nyström residual, and
#: for the robust scales of its residual outlier tests: a uniform random subset of the training
#: (or test) part, in time order, when it has more (every row otherwise). Exact objectives on
#: 20 000 rows and 400 centres hold about 0.3 GB; the fits, scores and replays see every row.
DEFAULT_SAMPLE_ROWS = 20_000
#: most recent share of the bags held out for the promotion gate when no validation bags are given
#: (never trained on, tuned on or selected on): both the candidate and the serving model are scored
#: there (:mod:`lifelong_learning.retraining.promotion`). A serving model that learned online has
#: seen those rows, so this gate favours it (it errs towards keeping what serves); validation bags
#: recorded with learning off are new to both, and then they alone are the gate's data
#: (nothing of the training bags is held out)
DEFAULT_HOLDOUT_FRACTION = 0.1
#: the objective a job tunes with when it names none, per task. Inverse dynamics: holdout-bags
#: (each bag held out in turn when one rigid-body model fits every bag; the most recent rows
#: otherwise, and for one bag): on a plant that does not change while it logs it chose better
#: hyperparameters than proposed on every seed, as good on the Panda, where the residual matters
#: little; where a payload changed between bags it validates on the most recent rows (holdout-
#: recent), which was better than proposed on the UR5 and worse on the Panda (numbers and commands:
#: docs/benchmarks/retraining-objectives.md). Classification: proposed (rows in no time order).
DEFAULT_OBJECTIVES = {"classification": "proposed", "inverse-dynamics": "holdout-bags"}
#: Nyström centres M when a job names none: the number the CLI and the job had from the start
#: (that of :func:`~lifelong_learning.nystrom.tune` too); the node had 200, chosen with it and never
#: measured against 100. The benchmarks name theirs (320 to 400 for a better model, at 10 to 16
#: times the cost of the O(n M²) objectives)
DEFAULT_CENTERS = 100

#: the offline methods a job may retrain with (:mod:`~lifelong_learning.retraining.methods` makes
#: each from the job): Meanti et al.'s tuning of a Nyström model, SLKL's learned low-rank kernel,
#: NYTRO's iterations and the incremental Nyström path over the number of centres
METHODS = ("nystrom", "slkl", "nytro", "path")

_OBJECTIVE_NAMES = (
    "proposed, proposed-stochastic, gcv, creg, sgpr, holdout, holdout-bags, holdout-recent (validates on "
    "the most recent rows: for time-ordered logs)"
)
_GOAL_ZERO = "used when a goal gives 0"
_POSITIVE = Range(0.0, high_open=True, low_open=True)


class JobCancelledError(Exception):
    """The job was asked to stop (``should_stop``) before it finished; no model file was written."""


@dataclass(frozen=True)
class TaskInfo:
    """What a task is to the job: the kind of model file it writes
    (:mod:`lifelong_learning.core.model_file`; the learner's ``kind``), and whether it runs across
    processes (``why_one_process``: why not, said to a job that asks; empty: it does)."""

    kind: str
    why_one_process: str = ""

    @property
    def distributed(self) -> bool:
        """Whether a job of several processes may run this task."""
        return not self.why_one_process


#: every task by name: what the job's ``task`` may be
TASKS: dict[str, TaskInfo] = {
    "classification": TaskInfo(kind="incremental_rlsc"),  # IncrementalRLSC.kind
    "inverse-dynamics": TaskInfo(
        kind="semiparametric_inverse_dynamics",  # SemiparametricInverseDynamics.kind
        why_one_process="its bags are filtered over neighbouring samples and the exported model replays "
        "every sample in time order: a sequential pass, not a sum",
    ),
}


#: the first line of every markdown report: what :func:`~lifelong_learning.retraining.job.check_outputs`
#: accepts to replace
REPORT_TITLE = "# Nyström tuning report"


def is_report(path: Path) -> bool:
    """Whether ``path`` holds a report a job wrote (markdown by its title, JSON by its keys)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    if path.suffix == ".md":
        return head.startswith(REPORT_TITLE)
    return head.lstrip().startswith("{") and '"task"' in head and '"objectives"' in head


@dataclass
class TuningJob:
    """What to tune: bags, task, objectives (the first one's model is exported), sizes, output, and
    ``init``: the serving model's file to continue from (its classes; its joints, URDF and learned
    rigid-body and friction parameters). Each field's help says what it does (:func:`job_options`)."""

    bags: Sequence[str] = option(
        help="rosbag2 directories (MCAP or sqlite3), or storage files of one (.mcap, .db3)",
        cli="bags",
        form="list",
    )
    task: str = option(
        help="what to learn: from LabeledFeatures (classification) or from JointState (inverse-dynamics)",
        choices=tuple(TASKS),
        cli="--task",
    )
    out: str = option(help="model file to write (never over a non-model file)", cli="--out")
    method: str = option(
        "nystrom",
        help="offline method: nystrom (λ, length-scales and the M centres tuned by the objectives, Meanti "
        "et al.), slkl (a learned conical combination of rank-1 Nyström kernels of M candidate centres, ν "
        "chosen on held-out rows: m₀ ≤ M features), nytro (gradient iterations on the span of M centres, "
        "their number chosen on held-out rows) or path (the number of centres m ≤ M and λ chosen on "
        "held-out rows); the objectives are the nystrom method's; docs/retraining.md says when to pick which",
        choices=METHODS,
        cli="--method",
        node="default_method",
        node_note="used when a goal gives none ('')",
    )
    # None (the default) is filled in at construction: a job's objectives are always named
    objectives: Sequence[str] = option(
        None,
        help=f"objective(s) to tune with, comma-separated: {_OBJECTIVE_NAMES}; the first one's model is "
        "exported, the others are reported for comparison; none named: the task's default ("
        + ", ".join(f"{name} for {task}" for task, name in DEFAULT_OBJECTIVES.items())
        + ")",
        label="objectives",
        cli="--objective",
        form="csv",
        node="default_objective",
        node_note="used when a goal names none ('' = none named)",
    )
    centers: int = option(
        DEFAULT_CENTERS,
        help="number of Nyström centres M",
        range=Range(1),
        cli="--centers",
        node="default_centers",
        node_range=Range(1, 1_000_000),
        node_note=_GOAL_ZERO,
    )
    epochs: int = option(
        100,
        help="Adam steps (early stop when the objective rises)",
        range=Range(1),
        cli="--epochs",
        node="default_epochs",
        node_range=Range(1, 100_000),
        node_note=_GOAL_ZERO,
    )
    patience: int = option(
        DEFAULT_PATIENCE,
        help="early stop: the tuning ends after the objective rose this many times since its best "
        "(Meanti et al. §5); the best hyperparameters are kept",
        range=Range(1),
        cli="--patience",
        node="patience",
        node_range=Range(1, 1_000_000),
    )
    # no range of the job's (none before the declarations): the node's parameter is bounded
    lr: float = option(
        0.05, help="Adam learning rate", cli="--lr", node="learning_rate", node_range=Range(1e-6, 10.0)
    )
    device: str = option(
        "auto", help="'auto' (CUDA if available), 'cpu' or 'cuda'", cli="--device", node="device"
    )
    dtype: str = option(
        "float64",
        help="floating-point type of the tuning",
        choices=("float32", "float64"),
        cli="--dtype",
        node="dtype",
    )
    test_fraction: float = option(
        0.2,
        help="share of the samples held out for the test metrics (random for classification, the most "
        "recent for inverse dynamics)",
        range=Range(0.0, 1.0, low_open=True, high_open=True),
        cli="--test-fraction",
        node="test_fraction",
        node_range=Range(0.01, 0.9),
    )
    topic: str | None = option(
        None,
        help="topic to read (none: every topic of the task's type; inverse dynamics needs it when the "
        "bags have several JointState topics, e.g. /joint_states)",
        cli="--topic",
    )
    urdf: str | None = option(
        None,
        help="URDF file of the robot, for inverse dynamics, a regular file of at most 4 MiB (none: the URDF "
        "of the model to continue from)",
        cli="--urdf",
        node="urdf_path",
        node_note="used for goals without urdf_path ('' = the URDF on robot_description_topic)",
    )
    init: str | None = option(
        None,
        help="the serving model's file (or checkpoint) to continue from: its classes are kept (and its "
        "held-out samples learned); its joints, URDF and rigid-body + friction parameters are the prior",
        cli="--init",
        metavar="MODEL",
    )
    forgetting: Sequence[float] = option(
        DEFAULT_FORGETTING,
        help="inverse dynamics: forgetting factors per sample to choose from on the most recent part of "
        "the bags, comma-separated",
        range=Range(0.0, 1.0, low_open=True),
        label="forgetting factors",
        cli="--forgetting",
        form="csv",
    )
    residual_regularization: Sequence[float] = option(
        DEFAULT_RESIDUAL_REGULARIZATION,
        help="inverse dynamics: multipliers of the tuned residual λ to choose from on the most recent "
        "part of the bags, comma-separated",
        range=_POSITIVE,
        label="residual λ multipliers",
        cli="--residual-regularization",
        form="csv",
    )
    lengthscale_range: tuple[float, float] | None = option(
        None,
        help="bound every length-scale to [A, B] x its input's range (max - min), 0 < A < B; none: unbounded",
        cli="--lengthscale-range",
        form="pair",
        metavar=("A", "B"),
    )
    limit_margin: float = option(
        DEFAULT_LIMIT_MARGIN,
        help="inverse dynamics: drop samples beyond the URDF's limits widened by this margin before "
        "tuning (1: twice the velocity and effort limits; inf: keep every sample)",
        range=Range(0.0),
        range_note="inf disables the test",
        cli="--limit-margin",
    )
    outlier_k: float = option(
        DEFAULT_OUTLIER_K,
        help="inverse dynamics: drop samples whose rigid-body residual exceeds this many robust "
        "standard deviations (inf: keep every sample); counts are in the report",
        range=Range(0.0, low_open=True),
        range_note="inf disables the test",
        cli="--outlier-k",
    )
    outlier_floor: float = option(
        DEFAULT_OUTLIER_FLOOR,
        help="inverse dynamics: smallest robust scale of the residual outlier test, as a fraction of "
        "each joint's effort limit",
        range=Range(0.0, high_open=True),
    )
    replay_block: int = option(
        10, help="inverse dynamics: samples per update of the export's replay", range=Range(1)
    )
    block: int = option(
        DEFAULT_BLOCK, help="rows read, filtered and held in memory at a time", range=Range(1)
    )
    max_message_bytes: int = option(
        DEFAULT_MAX_MESSAGE_BYTES,
        help="largest recorded message read from a bag, in bytes: a larger one is skipped before it is "
        "deserialized and counted ('message too large'); LabeledFeatures and JointState messages are a "
        "few kB",
        range=Range(1),
        cli="--max-message-bytes",
        node="max_message_bytes",
        node_range=Range(1024, 1_000_000_000),
    )
    sample_rows: int = option(
        DEFAULT_SAMPLE_ROWS,
        help="tune on a uniform random sample of at most this many training samples; the test error "
        "and the exported model use every sample",
        range=Range(4),
        cli="--sample-rows",
    )
    serving: str | None = option(
        None,
        help="the serving model the promotion gate compares the candidate with (none: init; without "
        "either: RNEA for inverse dynamics, nothing for classification)",
        cli="--serving",
        metavar="MODEL",
    )
    validation_bags: Sequence[str] = option(
        (),
        help="bags the promotion gate scores on besides the most recent part of the bags (never trained on)",
        cli="--validation",
        form="list",
        metavar="BAG",
    )
    holdout_fraction: float = option(
        DEFAULT_HOLDOUT_FRACTION,
        help="most recent share of the bags the promotion gate scores the candidate and the serving "
        "model on, never trained on (at most about sample_rows samples; 0: validation bags only)",
        range=Range(0.0, 0.5),
        cli="--holdout-fraction",
        node="holdout_fraction",
        node_range=Range(0.01, 0.5),
        node_note="the node holds out at least 0.01, with or without validation bags",
    )
    promotion_margin: float = option(
        DEFAULT_MARGIN,
        help="relative margin by which the candidate's held-out error must be below the serving "
        "model's for it to be promoted (0.02: 2 % lower)",
        range=Range(0.0, 1.0, high_open=True),
        label="the promotion margin",
        cli="--margin",
        node="promotion_margin",
        node_range=Range(0.0, 0.99),
    )
    force: bool = option(False, help="promote the candidate even if it is not better (said in the report)")
    report: str | None = option(
        None, help="report path without suffix (none: the model file's path + .report)", cli="--report"
    )
    seed: int = option(0, help="random seed of the splits, samples and centres", cli="--seed")
    # the job shows no progress bar unless asked; the command line shows it unless --no-progress
    progress: bool = option(
        False, help="progress bar", cli="--no-progress", form="switch-off", cli_default=True
    )

    def __post_init__(self) -> None:
        if self.objectives is None:  # the task's default (DEFAULT_OBJECTIVES)
            self.objectives = (DEFAULT_OBJECTIVES.get(self.task, "proposed"),)

    @property
    def runs(self) -> tuple[str, ...]:
        """What the job fits, in order, each scored and reported under its name: the objectives for
        the method nystrom (the first one's model is exported), else the one method."""
        return tuple(self.objectives) if self.method == "nystrom" else (self.method,)

    def validate(self, group: Group | None = None) -> None:
        """ValueError on an unknown task/objective, an option out of its range, a bag that is not a
        directory or does not open, a file that is not a regular file within its bound, and, for a
        job of several processes (``group``), on what does not run across processes.

        With several processes (a collective call: every process calls it) each checks the files it
        reads itself: the bags of its share (:meth:`shares`) and the model to continue from; the
        main process alone the validation bags, the serving model and the outputs, which only it
        reads or writes (on a cluster each machine may hold only its own bags)."""
        group = _one_process() if group is None else group
        mine = self.shares(group)[group.rank]  # first: a collective call, before anything can raise
        self._check(mine, group.is_main, group.world_size, opened=True)

    def check_request(self) -> None:
        """What :meth:`validate` checks without opening a file or loading torch, in one process:
        the options, the bags (directories whose files are regular, none named twice), the URDF
        and the models (regular files within their bounds) and the outputs, with ``os.stat`` and
        directory listings only (a FIFO is never waited on). :meth:`validate` checks it all again,
        and opens the bags and reads the models' headers.

        Raises:
            ValueError (BagError, UnsafePathError), OSError: as :meth:`validate`.
        """
        self._check(range(len(self.bags)), True, 1, opened=False)

    def _check(self, mine: Sequence[int], main: bool, world_size: int, opened: bool) -> None:
        for opt in job_options():  # the task first: the other checks depend on it
            opt.check(getattr(self, opt.name))
        if world_size > 1:
            self._validate_across(world_size)
        if opened:  # the objectives' names load torch
            self._validate_objectives()
        self._validate_bags(mine, main, opened)
        if self.task == "inverse-dynamics" and not (self.urdf or self.init):
            raise ValueError("inverse-dynamics needs a URDF (or a model to continue from)")
        if self.urdf:
            _check_file(Path(os.path.expanduser(str(self.urdf))), MAX_URDF_BYTES, "URDF")
        self._validate_init(opened)
        if self.lengthscale_range is not None:
            low, high = (float(v) for v in self.lengthscale_range)
            if not 0.0 < low < high < float("inf"):
                raise ValueError(f"lengthscale_range must be (a, b), 0 < a < b, got {self.lengthscale_range}")
        self._validate_gate(main, opened)
        if main:
            check_outputs(self)

    def shares(self, group: Group | None = None) -> list[range]:
        """The bags each process reads (by position in ``bags``): contiguous shares of about equal
        size (:func:`~lifelong_learning.nystrom.distributed.contiguous_shares`). A bag's size is the
        largest any process sees (0 where it is not), all-gathered: every process computes the same
        partition even when each machine holds only the bags of its own share."""
        from lifelong_learning.nystrom.distributed import contiguous_shares

        group = _one_process() if group is None else group
        sizes = [_bag_size(b) for b in self.bags]
        if group.world_size > 1:
            sizes = np.max(np.asarray(group.all_gather(sizes), dtype=np.float64), axis=0).tolist()
        return contiguous_shares(sizes, group.world_size)

    @property
    def serving_model(self) -> str | None:
        """The model the candidate must beat: ``serving``, else ``init`` (None: no serving model)."""
        return self.serving or self.init

    def output_paths(self) -> tuple[Path, Path, Path]:
        """The model file, the markdown report and the JSON report this job writes."""
        out = Path(os.path.expanduser(str(self.out)))
        base = Path(os.path.expanduser(self.report)) if self.report else out.with_name(out.name + ".report")
        return out, base.with_name(base.name + ".md"), base.with_name(base.name + ".json")

    def model_kind(self) -> str:
        """The kind of model file (:mod:`lifelong_learning.core.model_file`) this job's task writes."""
        return TASKS[self.task].kind

    def _validate_objectives(self) -> None:
        from lifelong_learning.nystrom.objectives import OBJECTIVES

        bad = [o for o in self.objectives if o not in OBJECTIVES]
        if not self.objectives or bad:
            raise ValueError(f"unknown objective(s) {bad}; known: {', '.join(OBJECTIVES)}")
        if len(set(self.objectives)) != len(self.objectives):
            raise ValueError(f"an objective is named twice: {list(self.objectives)}")

    def _validate_across(self, world_size: int) -> None:
        from lifelong_learning.nystrom.objectives import SUMS_OBJECTIVES

        info = TASKS[self.task]
        if self.method != "nystrom":
            raise ValueError(f"the method {self.method} runs in one process; run it without torchrun")
        if not info.distributed:
            raise ValueError(
                f"an {self.task} job runs in one process ({info.why_one_process}); run it without torchrun"
            )
        bad = [o for o in self.objectives if o not in SUMS_OBJECTIVES]
        if bad:
            raise ValueError(
                f"objective(s) {bad} cannot be tuned across processes (they hold rows out by position in "
                f"the one log); those that can: {', '.join(SUMS_OBJECTIVES)}"
            )
        if len(self.bags) < world_size:
            raise ValueError(
                f"{len(self.bags)} bag(s) for {world_size} processes: each process reads whole bags"
            )

    def _validate_bags(self, mine: Sequence[int], main: bool = True, opened: bool = True) -> None:
        if not self.bags:
            raise ValueError("no bag given")
        bags = [Path(os.path.expanduser(str(b))) for b in self.bags]
        gate = [Path(os.path.expanduser(str(b))) for b in self.validation_bags]
        try:
            named = Counter(b.resolve() for b in bags + gate)
        except (OSError, RuntimeError) as exc:  # a loop of links, a name too long
            raise ValueError(f"a bag path cannot be resolved: {exc}") from exc
        twice = sorted(str(b) for b, n in named.items() if n > 1)
        if twice:  # its samples would be in two parts
            more = f" and {len(twice) - 3} more" if len(twice) > 3 else ""
            raise ValueError(f"a bag is named twice: {', '.join(twice[:3])}{more}")
        for bag in [bags[i] for i in mine] + (gate if main else []):
            check_bag(bag)
            if opened:
                _open_bag(bag)

    def _validate_gate(self, main: bool = True, opened: bool = True) -> None:
        if float(self.holdout_fraction) == 0.0 and not self.validation_bags:
            raise ValueError(
                "the promotion gate needs held-out data: holdout_fraction > 0 or validation bags"
            )
        if self.serving is not None:
            self.serving = os.path.expanduser(self.serving)
            if main:  # the gate's: the main process reads it
                self._check_model(self.serving, "the serving model", opened)

    def _check_model(self, path: str, what: str, opened: bool) -> None:
        _check_file(Path(path), MAX_MODEL_BYTES, "model", f" ({what})")
        if not opened:
            return
        want = self.model_kind()
        found = read_model_kind(path)  # the header only; ModelFileError (a ValueError) if corrupt
        if found != want:
            raise ValueError(f"{path} ({what}) holds a {found!r} model; a {self.task} job needs {want!r}")

    def _validate_init(self, opened: bool = True) -> None:
        if self.init is None:
            return
        self.init = os.path.expanduser(self.init)
        self._check_model(self.init, "the model to continue from", opened)


def job_options() -> tuple[Option, ...]:
    """Every option of :class:`TuningJob`, declared once (its fields), in field order."""
    return options_of(TuningJob)


def check_outputs(job: TuningJob) -> None:
    """ValueError (:class:`~lifelong_learning.core.files.UnsafePathError`) unless each of the job's
    outputs is absent or a file it may replace: a model file of the job's kind for the model, an
    earlier report for the reports; never a directory, a symlink, a FIFO or socket, or any other
    file. A path whose parent is a regular file is refused too."""
    model, md, js = job.output_paths()
    if not model.name:
        raise UnsafePathError("empty output path")
    kind = job.model_kind()

    def model_of_this_kind(path: Path) -> bool:  # never a learner's model of another kind (a checkpoint)
        return is_model_file(path, kind)

    for path, ours in ((model, model_of_this_kind), (md, is_report), (js, is_report)):
        check_replaceable(path, is_ours=ours)
        for parent in path.parents:
            if parent.exists() or parent.is_symlink():
                if not parent.is_dir():
                    raise UnsafePathError(f"{path}: {parent} is not a directory")
                break


def _one_process() -> Group:
    from lifelong_learning.nystrom.distributed import ONE_PROCESS

    return ONE_PROCESS


def _check_file(path: Path, max_bytes: int, what: str, note: str = "") -> None:
    """ValueError unless ``path`` is a regular file of at most ``max_bytes`` (opens nothing)."""
    try:
        check_regular(path, max_bytes)
    except (FileNotFoundError, NotADirectoryError):
        raise ValueError(f"no {what} file {path}{note}") from None


def _open_bag(bag: Path) -> None:
    """ValueError unless ``bag``, which :func:`~lifelong_learning.io.bag_files.check_bag` passed, is
    a rosbag2 directory whose metadata and storage files open (what can be checked before a job
    starts; a message that does not deserialize is found by reading)."""
    try:
        with open_bag(bag):
            pass
    except ValueError:  # BagError: what check_bag refuses, found again
        raise
    except Exception as exc:  # ReaderError, OSError, storage plugin errors
        raise ValueError(
            f"{bag}: unreadable, corrupt or truncated bag ({type(exc).__name__}: {exc})"
        ) from exc


def _bag_size(bag: Any) -> float:
    """Bytes of a bag directory's files, or of a storage file (the weight of its share of the work);
    0 where there is none (or it cannot be listed)."""
    path = Path(os.path.expanduser(str(bag)))
    try:
        if path.is_file():
            return float(path.stat().st_size)
        return float(sum(f.stat().st_size for f in path.rglob("*") if f.is_file())) if path.is_dir() else 0.0
    except OSError:
        return 0.0
