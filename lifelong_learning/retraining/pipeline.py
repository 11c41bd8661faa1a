"""Offline retraining from rosbag2 logs: read, split, tune, evaluate, export, report.

The one implementation behind ``lifelong-learning tune`` (:mod:`lifelong_learning.commands.tune`)
and the ``nystrom_tuner`` node: bags → (X, Y) for the task (for inverse dynamics, ``q̈`` by the
online node's filter, restarted at each bag) → hyperparameters tuned by each requested
objective (Meanti et al.; :func:`lifelong_learning.nystrom.tune`) on a training split → test
metrics (:func:`lifelong_learning.core.metrics.normalized_mse`) → the first objective's model
exported to the online learners' model file (IncrementalRLSC or SemiparametricInverseDynamics,
see :mod:`lifelong_learning.nystrom.export`) → a markdown + JSON report next to it.

Both tasks tune on a uniform random sample of at most ``TuningJob.sample_rows`` training rows
(every row when there are fewer) and score and export with every row. Inverse dynamics streams
its bags: memory is bounded by ``TuningJob.block`` rows and that sample, not by the bags (see
:class:`_InverseDynamics` and ``docs/benchmarks/retraining-streaming.md``); a job that names no
objective takes the task's default (:data:`DEFAULT_OBJECTIVES`: holdout-bags for inverse dynamics,
``docs/benchmarks/retraining-objective-default.md``).

A job can be stopped (``run_job(..., should_stop=...)``): it is asked after every tuning epoch,
every replayed block and between phases, and raises :class:`JobCancelledError` before the model file
is written. The outputs never replace anything but a model file (the model) or an earlier report
(the reports): a directory, a symlink, a FIFO or another file there refuses the job
(:func:`check_outputs`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import resource
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lifelong_learning.core.files import UnsafePathError, atomic_write_text, check_replaceable
from lifelong_learning.core.model_file import is_model_file, read_model_kind
from lifelong_learning.dynamics.acceleration import DEFAULT_WINDOW as ACCELERATION_WINDOW
from lifelong_learning.dynamics.acceleration import estimate_accelerations
from lifelong_learning.dynamics.plausibility import (
    JointLimits,
    PlausibilityGate,
    local_spikes,
    robust_scale,
    velocity_mismatch,
)
from lifelong_learning.dynamics.regressor import kinematic_difference
from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics
from lifelong_learning.io.bags import (
    DEFAULT_BLOCK,
    MISSING_JOINT,
    BagError,
    JointStateBlock,
    JointStateStream,
    Skipped,
    labeled_feature_blocks,
    message_count,
    read_joint_states,
    read_labeled_features,
)
from lifelong_learning.learners.recognition_gate import DEFAULT_MAX_CLASSES
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.nystrom.distributed import (
    ONE_PROCESS,
    Group,
    JobProgress,
    contiguous_shares,
)
from lifelong_learning.nystrom.export import (
    classifier_from_sums,
    classifier_sums,
    one_hot,
    replay_inverse_dynamics,
    residual_data,
)
from lifelong_learning.nystrom.objectives import OBJECTIVES, SUMS_OBJECTIVES
from lifelong_learning.nystrom.tuning import DEFAULT_PATIENCE, tune
from lifelong_learning.retraining.promotion import (
    DEFAULT_MARGIN,
    Decision,
    gate_classifier,
    gate_inverse_dynamics,
)
from lifelong_learning.retraining.rows import FeatureStore, Rows, RowStore

TASKS = ("classification", "inverse-dynamics")
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
#: a bag of several whose training rows the rigid-body model of all bags predicts with a torque
#: nMSE above this ratio times that of a model of the bag alone, and above it by this much, is
#: reported (:meth:`_InverseDynamics._bag_consistency`). Two 10 s bags of the simulated Panda: of
#: one robot, 0.0019 vs 0.0019 and 0.0008 vs 0.0009; a second bag of a Panda with link masses and
#: inertias x 1.2, 0.41 vs 0.0019 and 0.20 vs 0.0008; with a 1 kg payload, 0.29 vs 0.0020 and
#: 0.21 vs 0.0007 (6 s bags: test/retraining/test_bad_input.py)
BAG_MISMATCH_RATIO = 3.0
BAG_MISMATCH_NMSE = 0.02
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
#: the first line of every markdown report: what :func:`check_outputs` accepts to replace
REPORT_TITLE = "# Nyström tuning report"


class JobCancelledError(Exception):
    """The job was asked to stop (``should_stop``) before it finished; no model file was written."""


@dataclass
class TuningJob:
    """What to tune: bags, task, objectives (the first one's model is exported), sizes, output, and
    ``init``: the serving model's file to continue from (its classes; its joints, URDF and learned
    rigid-body and friction parameters)."""

    bags: Sequence[str]
    task: str
    out: str
    objectives: Sequence[str] | None = None
    centers: int = 100
    epochs: int = 100
    patience: int = DEFAULT_PATIENCE
    lr: float = 0.05
    device: str = "auto"
    dtype: str = "float64"
    test_fraction: float = 0.2
    topic: str | None = None
    urdf: str | None = None
    report: str | None = None
    seed: int = 0
    progress: bool = False
    forgetting: Sequence[float] = DEFAULT_FORGETTING
    replay_block: int = 10
    init: str | None = None
    lengthscale_range: tuple[float, float] | None = None
    residual_regularization: Sequence[float] = DEFAULT_RESIDUAL_REGULARIZATION
    limit_margin: float = DEFAULT_LIMIT_MARGIN
    outlier_k: float = DEFAULT_OUTLIER_K
    outlier_floor: float = DEFAULT_OUTLIER_FLOOR
    block: int = DEFAULT_BLOCK
    sample_rows: int = DEFAULT_SAMPLE_ROWS
    serving: str | None = None
    validation_bags: Sequence[str] = ()
    holdout_fraction: float = DEFAULT_HOLDOUT_FRACTION
    promotion_margin: float = DEFAULT_MARGIN
    force: bool = False

    def __post_init__(self) -> None:
        if self.objectives is None:  # the task's default (DEFAULT_OBJECTIVES)
            self.objectives = (DEFAULT_OBJECTIVES.get(self.task, "proposed"),)

    def validate(self, group: Group = ONE_PROCESS) -> None:
        """ValueError on an unknown task/objective, out-of-range sizes or a bag that is not a directory,
        and, for a job of several processes (``group``), on what does not run across processes.

        With several processes (a collective call: every process calls it) each checks the files it
        reads itself: the bags of its share (:meth:`shares`) and the model to continue from; the
        main process alone the validation bags, the serving model and the outputs, which only it
        reads or writes (on a cluster each machine may hold only its own bags)."""
        mine = self.shares(group)[group.rank]  # first: a collective call, before anything can raise
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        if group.world_size > 1:
            self._validate_across(group.world_size)
        bad = [o for o in self.objectives if o not in OBJECTIVES]
        if not self.objectives or bad:
            raise ValueError(f"unknown objective(s) {bad}; known: {', '.join(OBJECTIVES)}")
        if len(set(self.objectives)) != len(self.objectives):
            raise ValueError(f"an objective is named twice: {list(self.objectives)}")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError("test_fraction must be in (0, 1)")
        if self.centers < 1 or self.epochs < 1 or self.patience < 1:
            raise ValueError("centers, epochs and patience must be >= 1")
        self._validate_bags(mine, group.is_main)
        if self.task == "inverse-dynamics" and not (self.urdf or self.init):
            raise ValueError("inverse-dynamics needs a URDF (or a model to continue from)")
        self._validate_init()
        if not self.forgetting or not all(0.0 < float(b) <= 1.0 for b in self.forgetting):
            raise ValueError(f"forgetting factors must be in (0, 1], got {list(self.forgetting)}")
        if not self.residual_regularization or not all(
            0.0 < float(s) < float("inf") for s in self.residual_regularization
        ):
            raise ValueError(
                f"residual λ multipliers must be finite and > 0, got {list(self.residual_regularization)}"
            )
        if self.lengthscale_range is not None:
            low, high = (float(v) for v in self.lengthscale_range)
            if not 0.0 < low < high < float("inf"):
                raise ValueError(f"lengthscale_range must be (a, b), 0 < a < b, got {self.lengthscale_range}")
        if self.replay_block < 1 or self.block < 1:
            raise ValueError("replay_block and block must be >= 1")
        if self.sample_rows < 4:
            raise ValueError(f"sample_rows must be >= 4, got {self.sample_rows}")
        self._validate_sample_tests()
        self._validate_gate(group.is_main)
        if group.is_main:
            check_outputs(self)

    def shares(self, group: Group = ONE_PROCESS) -> list[range]:
        """The bags each process reads (by position in ``bags``): contiguous shares of about equal
        size (:func:`~lifelong_learning.nystrom.distributed.contiguous_shares`). A bag's size is the
        largest any process sees (0 where it is not), all-gathered: every process computes the same
        partition even when each machine holds only the bags of its own share."""
        sizes = [_bag_size(b) for b in self.bags]
        if group.world_size > 1:
            sizes = np.max(np.asarray(group.all_gather(sizes), dtype=np.float64), axis=0).tolist()
        return contiguous_shares(sizes, group.world_size)

    def _validate_across(self, world_size: int) -> None:
        if self.task != "classification":
            raise ValueError(
                "an inverse-dynamics job runs in one process (its bags are filtered over neighbouring "
                "samples and the exported model replays every sample in time order: a sequential pass, "
                "not a sum); run it without torchrun"
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

    def _validate_bags(self, mine: Sequence[int], main: bool = True) -> None:
        if not self.bags:
            raise ValueError("no bag given")
        bags = [Path(os.path.expanduser(str(b))) for b in self.bags]
        gate = [Path(os.path.expanduser(str(b))) for b in self.validation_bags]
        for bag in [bags[i] for i in mine] + (gate if main else []):
            _check_bag(bag)
        named = [b.resolve() for b in bags + gate]
        if len(set(named)) != len(named):  # its samples would be in two parts
            raise ValueError(f"a bag is named twice: {[str(b) for b in [*self.bags, *self.validation_bags]]}")

    def _validate_gate(self, main: bool = True) -> None:
        if not 0.0 <= float(self.holdout_fraction) <= 0.5:
            raise ValueError(f"holdout_fraction must be in [0, 0.5], got {self.holdout_fraction}")
        if not 0.0 <= float(self.promotion_margin) < 1.0:
            raise ValueError(f"the promotion margin must be in [0, 1), got {self.promotion_margin}")
        if float(self.holdout_fraction) == 0.0 and not self.validation_bags:
            raise ValueError(
                "the promotion gate needs held-out data: holdout_fraction > 0 or validation bags"
            )
        if self.serving is not None:
            self.serving = os.path.expanduser(self.serving)
            if main:  # the gate's: the main process reads it
                self._check_model_kind(self.serving, "the serving model")

    def _check_model_kind(self, path: str, what: str) -> None:
        if not Path(path).is_file():
            raise ValueError(f"no model file {path} ({what})")
        want = (IncrementalRLSC if self.task == "classification" else SemiparametricInverseDynamics).kind
        found = read_model_kind(path)  # the header only; ModelFileError (a ValueError) if corrupt
        if found != want:
            raise ValueError(f"{path} ({what}) holds a {found!r} model; a {self.task} job needs {want!r}")

    @property
    def serving_model(self) -> str | None:
        """The model the candidate must beat: ``serving``, else ``init`` (None: no serving model)."""
        return self.serving or self.init

    def _validate_init(self) -> None:
        if self.init is None:
            return
        self.init = os.path.expanduser(self.init)
        self._check_model_kind(self.init, "the model to continue from")

    def _validate_sample_tests(self) -> None:
        if not float(self.limit_margin) >= 0 or not float(self.outlier_k) > 0:
            raise ValueError("limit_margin must be >= 0 and outlier_k > 0 (inf disables either test)")
        if not 0 <= float(self.outlier_floor) < float("inf"):
            raise ValueError(f"outlier_floor must be finite and >= 0, got {self.outlier_floor}")

    def output_paths(self) -> tuple[Path, Path, Path]:
        """The model file, the markdown report and the JSON report this job writes."""
        out = Path(os.path.expanduser(str(self.out)))
        base = Path(os.path.expanduser(self.report)) if self.report else out.with_name(out.name + ".report")
        return out, base.with_name(base.name + ".md"), base.with_name(base.name + ".json")


def _check_bag(bag: Path) -> None:
    """ValueError unless ``bag`` is a rosbag2 directory whose metadata and storage files open (what
    can be checked before a job starts; a message that does not deserialize is found by reading)."""
    from rosbags.rosbag2 import Reader

    if not bag.is_dir():
        why = "not a bag directory" if bag.exists() else "no such bag (not a bag directory)"
        raise ValueError(f"{why}: {bag}")
    try:
        with Reader(bag):
            pass
    except Exception as exc:  # ReaderError, OSError, storage plugin errors
        raise ValueError(
            f"{bag}: unreadable, corrupt or truncated bag ({type(exc).__name__}: {exc})"
        ) from exc


def _is_report(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    if path.suffix == ".md":
        return head.startswith(REPORT_TITLE)
    return head.lstrip().startswith("{") and '"task"' in head and '"objectives"' in head


def check_outputs(job: TuningJob) -> None:
    """ValueError (:class:`~lifelong_learning.core.files.UnsafePathError`) unless each of the job's
    outputs is absent or a file it may replace: a model file of the job's kind for the model, an
    earlier report for
    the reports; never a directory, a symlink, a FIFO or socket, or any other file. A path whose
    parent is a regular file is refused too."""
    model, md, js = job.output_paths()
    if not model.name:
        raise UnsafePathError("empty output path")
    kind = (IncrementalRLSC if job.task == "classification" else SemiparametricInverseDynamics).kind

    def model_of_this_kind(path: Path) -> bool:  # never a learner's model of another kind (a checkpoint)
        return is_model_file(path, kind)

    for path, ours in ((model, model_of_this_kind), (md, _is_report), (js, _is_report)):
        check_replaceable(path, is_ours=ours)
        for parent in path.parents:
            if parent.exists() or parent.is_symlink():
                if not parent.is_dir():
                    raise UnsafePathError(f"{path}: {parent} is not a directory")
                break


def _split(n: int, fraction: float, rng: Any, chronological: bool) -> tuple[Any, Any]:
    n_test = max(1, round(fraction * n))
    if n - n_test < 4:
        raise ValueError(f"too few samples ({n}) for a test split of {fraction}")
    idx = np.arange(n) if chronological else rng.permutation(n)
    return np.sort(idx[: n - n_test]), np.sort(idx[n - n_test :])


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"{REPORT_TITLE} ({report['task']})",
        "",
        f"- bags: {', '.join(report['bags'])}",
        f"- samples: {report['n_train']} train, {report['n_test']} test "
        f"({'the most recent part' if report['task'] == 'inverse-dynamics' else 'a random part'}); "
        f"centres: {report['centers']}; tuned on {report['tuning_rows']} of the training samples",
        f"- exported: `{report['model']}` (objective `{report['exported_objective']}`, refitted on all "
        f"{report['exported_samples']} samples)",
    ]
    skipped = ", ".join(f"{n} {reason}" for reason, n in report["skipped"].items())
    lines.append(f"- samples skipped (not learned, not scored): {skipped or 'none'}")
    lines += [f"- baseline {name}: test nMSE {value:.4g}" for name, value in report["baselines"].items()]
    gate = report.get("promotion")
    if gate is not None:
        serving = "none" if gate["serving_error"] is None else f"{gate['serving_error']:.4g}"
        verdict = "promoted" if gate["promoted"] else "not promoted"
        lines.append(
            f"- promotion gate ({gate['n_samples']} samples of {gate['data']}): candidate "
            f"{gate['metric']} {gate['candidate_error']:.4g}, {gate['serving']} {serving}: **{verdict}** "
            f"({gate['reason']})"
            + (
                f"; then the model learned those {gate['learned_after']} samples"
                if gate.get("learned_after")
                else ""
            )
        )
    lines += [f"- **warning**: {text}" for text in report["warnings"]]
    lines += [
        "",
        "| objective | test metric | value | forgetting | residual λ × | tuning time (s) | epochs | λ "
        "| length-scales |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in report["objectives"].items():
        ls = ", ".join(f"{v:.3g}" for v in r["lengthscale"])
        lines.append(
            f"| {name} | {r['metric']} | {r['value']:.4g} | {r.get('forgetting', '')} "
            f"| {r.get('residual_lam_scale', '')} | {r['seconds']:.1f} "
            f"| {r['epochs']} | {r['lam']:.3g} | {ls} |"
        )
    return "\n".join(lines) + "\n"


#: below this RMS velocity [rad/s] a joint "barely moves": its friction cannot be identified
_STILL_RMS_VELOCITY = 0.01


class _Classification:
    """Labeled features: a random split, test error, an IncrementalRLSC with the tuned map.

    Memory is bounded by the block (``job.block`` rows) and the samples (at most
    ``job.sample_rows`` rows each for the tuning and for the promotion gate), not by the features
    of the bags, but for some tens of bytes per row (the labels' codes, the split's row numbers,
    the training labels; the random split is drawn over every process's rows) and the validation
    bags, which are read whole (by the main process): the bags are read a block at a
    time (:func:`~lifelong_learning.io.bags.labeled_feature_blocks`) into a temporary file
    (:class:`~lifelong_learning.retraining.rows.FeatureStore`) that every later pass (the score,
    the export) reads back a block at a time.

    With a ``group`` of several processes each reads the ``r``-th contiguous share of the bags
    (by size); the rows keep the one-process order (process by process), and every choice made on
    rows (the gate's most recent samples per class, the random test split, the tuning sample, the
    classes' order, the serving model's held-out samples appended last) is made on global row
    numbers, so that the job equals the one-process job. The gate's samples are gathered by the
    main process, which alone scores the gate and writes files."""

    metric = "test error (%)"

    def __init__(
        self, job: TuningJob, rng: Any, check: Callable[[], None] | None = None, group: Group = ONE_PROCESS
    ) -> None:
        self.group = group
        self.bags_read = [str(job.bags[i]) for i in job.shares(group)[group.rank]]
        self.store = FeatureStore(int(job.block))
        self.warnings: list[str] = []
        self.baselines: dict[str, float] = {}
        self.known: list[Any] = []  # the serving model's classes, first in the exported model
        self.groups: list[int] | None = None  # no bag boundaries: holdout-bags is holdout-recent
        self._scored: tuple[Any, Any] | None = None  # a model and its training rows' sums (score)
        try:
            self._read(job)
            self._split(job, rng)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Delete the temporary file of the features."""
        self.store.close()

    def _read(self, job: TuningJob) -> None:
        """Every usable labeled feature of this process's bags into the store; the skipped ones counted."""
        group, skipped = self.group, Skipped()
        error: Exception | None = None
        messages = sum(group.all_gather(message_count(self.bags_read, topic=job.topic)))
        with JobProgress(group, messages, "reading bags", unit="msg", enabled=job.progress) as progress:
            try:
                for X, labels, _ in labeled_feature_blocks(
                    self.bags_read, job.topic, int(job.block), skipped, progress.add
                ):
                    self.store.append(X, labels)
            except (BagError, OSError) as exc:
                error = exc
        group.agree(error)
        dims = group.all_gather(self.store.d)
        if len(set(dims)) > 1:
            raise BagError(f"the processes' bags hold feature vectors of different lengths: {dims}")
        self.samples_read = self.store.n  # usable labeled features (for the report)
        self.skipped: dict[str, int] = {}
        for part in group.all_gather(dict(skipped)):
            for reason, n in part.items():
                self.skipped[reason] = self.skipped.get(reason, 0) + n

    def _split(self, job: TuningJob, rng: Any) -> None:
        """The gate's rows, the random test split of the others, the serving model's held-out
        samples, the classes' order and the tuning sample."""
        group, store = self.group, self.store
        kept = np.flatnonzero(~self._hold_out(job))  # row numbers of the rows not held out
        counts = [int(c) for c in group.all_gather(int(kept.size))]
        offset = sum(counts[: group.rank])
        tr, te = _split(sum(counts), job.test_fraction, rng, chronological=False)
        mine = lambda p: p[(p >= offset) & (p < offset + kept.size)] - offset  # noqa: E731
        self.kept, self.train_rows, self.test_rows = kept, kept[mine(tr)], kept[mine(te)]
        self.extra_X, self.extra_labels = np.empty((0, store.d or 0)), []  # the serving model's samples
        if job.init:
            serving, error = None, None
            digest = None
            try:
                serving = IncrementalRLSC.load(job.init)
                digest = hashlib.sha256(Path(job.init).read_bytes()).hexdigest()
            except (ValueError, OSError) as exc:  # a file another process's machine lacks, or corrupt
                error = exc
            group.agree(error)
            if len(set(group.all_gather(digest))) > 1:  # every process must continue from one model
                raise ValueError(f"the processes' copies of {job.init} differ: give each the same model file")
            self._continue_from(serving)
        train_labels = [*store.labels(self.train_rows), *self.extra_labels]
        order = itertools.chain.from_iterable(group.all_gather(list(dict.fromkeys(train_labels))))
        self.classes = list(dict.fromkeys(order))  # one_hot's order: first appearance in the global order
        if len(self.classes) > DEFAULT_MAX_CLASSES:
            self.warnings.append(
                f"{len(self.classes)} classes: an object_recognition node with the default max_classes "
                f"({DEFAULT_MAX_CLASSES}) will refuse to load this model; raise its max_classes"
            )
        self.train_labels = train_labels  # every training row's: the score's refit
        pick = _tuning_sample(len(train_labels), int(job.sample_rows), job.seed, group)
        self.X_tr = self._training_rows(pick)
        self.Y_tr = one_hot(self.classes + [train_labels[i] for i in pick])[1][len(self.classes) :]
        self.n_train, self.n_test = (
            int(v) for v in np.sum(group.all_gather((self.train_rows.size, self.test_rows.size)), axis=0)
        )
        self.labels_te = store.labels(self.test_rows)

    def _training_rows(self, pick: np.ndarray) -> np.ndarray:
        """The training rows at positions ``pick`` (sorted) among the bags' and the serving model's."""
        bags = pick[pick < self.train_rows.size]
        extra = pick[pick >= self.train_rows.size] - self.train_rows.size
        return np.vstack([self.store.take(self.train_rows[bags]), self.extra_X[extra]])

    def _blocks(self, rows: np.ndarray, extra: bool) -> Callable[[], Iterator[np.ndarray]]:
        """The rows ``rows`` of the store (and, with ``extra``, the serving model's samples after
        them), a block at a time."""

        def blocks() -> Iterator[np.ndarray]:
            yield from self.store.blocks(rows)
            if extra and len(self.extra_labels):
                yield self.extra_X

        return blocks

    def _continue_from(self, serving: Any) -> None:
        """The serving model's classes come first; its held-out samples join the training data
        (after every row of the bags: on the last process)."""
        d = self.store.d
        if serving.n_features_in_ not in (None, d):
            raise ValueError(
                f"the model to continue from takes {serving.n_features_in_} features, the bags {d}"
            )
        self.known = [str(c) for c in serving.classes_.tolist()]
        last = self.group.rank == self.group.world_size - 1
        if serving.feature_map is None and serving.n_validation_ and last:
            val_X, val_labels = serving.validation_samples()
            self.extra_X, self.extra_labels = (
                np.asarray(val_X, dtype=np.float64),
                [str(c) for c in val_labels],
            )
        mine = set(self.store.vocabulary) | set(self.extra_labels)
        seen = set(itertools.chain.from_iterable(self.group.all_gather(sorted(mine))))
        unseen = sorted(set(self.known) - seen)
        if unseen:
            self.warnings.append(
                f"classes {unseen} of the serving model have no sample in the bags or its validation buffer: "
                "they are kept but cannot be predicted until taught again"
            )

    def _hold_out(self, job: TuningJob) -> np.ndarray:
        """Which rows the promotion gate holds out (a mask of this process's rows): the validation
        bags' when given (then none), else the most recent ``holdout_fraction`` of each class's
        samples (of a class of 5 or more; objects are taught one after the other, so the most
        recent part of the bags alone would be one class), at most about ``sample_rows`` in all,
        counted over every process's rows in the global order. Sets :attr:`held_out` (the gate's
        data, main process) and :attr:`recent` (the bags' held-out samples, learned after the gate)."""
        store, group = self.store, self.group
        codes = store.codes
        gate = np.zeros(store.n, dtype=bool)
        if not job.validation_bags:
            mine = {store.vocabulary[c]: int(k) for c, k in enumerate(np.bincount(codes)) if k}
            per_process = group.all_gather(mine)
            total_rows = sum(sum(c.values()) for c in per_process)
            fraction = min(float(job.holdout_fraction), int(job.sample_rows) / max(total_rows, 1))
            for code, label in enumerate(store.vocabulary):
                total = sum(c.get(label, 0) for c in per_process)
                before = sum(c.get(label, 0) for c in per_process[: group.rank])
                k = round(fraction * total) if total >= 5 else 0
                rows = np.flatnonzero(codes == code)
                gate[rows[before + np.arange(rows.size) >= total - k]] = True
        rows = np.flatnonzero(gate)
        recent = _gathered((store.take(rows), list(store.labels(rows))), group)
        self.recent = recent  # the bags' held-out samples, learned after the gate (main process)
        X_gate, labels_gate = recent
        error: Exception | None = None
        if job.validation_bags and group.is_main:  # the gate's data: the main process's alone
            try:
                extra = read_labeled_features(job.validation_bags, topic=job.topic)
                if extra.X.shape[1] != store.d:
                    raise BagError(
                        f"the validation bags hold {extra.X.shape[1]} features, the bags {store.d}"
                    )
                for reason, n in extra.skipped.items():
                    key = f"{reason} (validation bags)"
                    self.skipped[key] = self.skipped.get(key, 0) + n
                X_gate, labels_gate = np.vstack([X_gate, extra.X]), labels_gate + list(extra.labels)
            except (BagError, OSError) as exc:
                error = exc
        group.agree(error)
        self.held_out = (X_gate, np.array(labels_gate, dtype=object))
        return gate

    def promotion(self, out: Path, job: TuningJob) -> Decision:
        """The gate: the exported classifier and the serving one on the held-out samples."""
        if self.held_out[1].size == 0:
            raise BagError(
                "no held-out sample for the promotion gate: teach more views, or give validation bags"
            )
        candidate = IncrementalRLSC.load(out)
        return gate_classifier(
            candidate,
            job.serving_model,
            self.held_out,
            margin=float(job.promotion_margin),
            force=bool(job.force),
        )

    def learn_held_out(self, out: Path) -> int:
        """After the gate: the bags' held-out samples learned by the exported model, in their order,
        as the online learner would learn them (never the validation bags'); how many."""
        X, labels = self.recent
        if not labels:
            return 0
        model = IncrementalRLSC.load(out)
        model.partial_fit(X, labels)
        model.save(out)
        return len(labels)

    def score(self, model: Any) -> tuple[float, dict[str, Any]]:
        """The test error of the classifier exported with the tuned map from every training row
        (the tuning may have seen only a sample of them), in the classes' order. The training
        rows' sums are kept for the export of the same model."""
        sums = classifier_sums(
            model, self._blocks(self.train_rows, True), self.train_labels, self.classes, self.group
        )
        if self._scored is None:  # the first objective's model: the one exported
            self._scored = (model, sums)
        clf = classifier_from_sums(model, sums)
        classes = np.asarray(clf.classes_.tolist(), dtype=object)  # self.classes, in that order
        wrong, seen = 0.0, 0
        for X in self.store.blocks(self.test_rows):
            pred = classes[clf.decision_function(X).argmax(1)]
            wrong += float(np.sum(pred != self.labels_te[seen : seen + X.shape[0]]))
            seen += X.shape[0]
        if self.group.world_size > 1:
            wrong = float(self.group.all_reduce(torch.tensor([wrong], dtype=torch.float64))[0])
        return 100.0 * wrong / self.n_test, {}

    def export(self, model: Any, choice: dict[str, Any], out: Path) -> None:
        """Every row but the gate's (the training rows, the serving model's held-out samples, the
        test rows: sums add, so the training rows' sums of :meth:`score` are reused), the serving
        model's classes first, then the others in order of first appearance in the bags."""
        test = classifier_sums(model, self._blocks(self.test_rows, False), self.labels_te, (), self.group)
        if self._scored is not None and self._scored[0] is model:
            train = self._scored[1]
        else:  # a model not scored first: its training rows' sums again
            blocks = self._blocks(self.train_rows, True)
            train = classifier_sums(model, blocks, self.train_labels, (), self.group)
        mine = dict.fromkeys([*self.store.labels(self.kept), *self.extra_labels])  # this process's order
        order = dict.fromkeys(
            [*self.known, *itertools.chain.from_iterable(self.group.all_gather(list(mine)))]
        )
        classifier_from_sums(model, train + test, list(order), out, self.group)


def _tuning_sample(n: int, sample_rows: int, seed: Any, group: Group = ONE_PROCESS) -> np.ndarray:
    """This process's positions (among its ``n`` rows) of a uniform random sample of at most
    ``sample_rows`` of every process's rows (all of them when there are no more), drawn on global
    row numbers: the same rows whatever the number of processes."""
    counts = [int(c) for c in group.all_gather(int(n))]
    total, offset = sum(counts), sum(counts[: group.rank])
    if total <= sample_rows:
        return np.arange(n)
    pick = np.sort(np.random.default_rng(seed).choice(total, size=sample_rows, replace=False))
    return pick[(pick >= offset) & (pick < offset + n)] - offset


def _bag_size(bag: Any) -> float:
    """Bytes of a bag directory's files (the weight of its share of the work); 0 where there is none
    (or it cannot be listed)."""
    path = Path(os.path.expanduser(str(bag)))
    try:
        return float(sum(f.stat().st_size for f in path.rglob("*") if f.is_file())) if path.is_dir() else 0.0
    except OSError:
        return 0.0


def _gathered(part: tuple[np.ndarray, list[Any]], group: Group) -> tuple[np.ndarray, list[Any]]:
    """Rows and labels of every process, in process order, on the main process (others: their own)."""
    if group.world_size == 1:
        return part
    parts = group.all_gather(part)
    if not group.is_main:
        return part
    X = np.vstack([p[0] for p in parts])
    return X, [lab for p in parts for lab in p[1]]


class _Moments:
    """Count, mean and sum of squared deviations per column, merged block by block (Chan et al.):
    the variance of rows that are never all in memory."""

    def __init__(self, p: int) -> None:
        self.n, self.mean, self.m2 = 0, np.zeros(p), np.zeros(p)

    def add(self, x: np.ndarray) -> None:
        k = x.shape[0]
        if not k:
            return
        mean = x.mean(axis=0)
        m2 = ((x - mean) ** 2).sum(axis=0)
        n = self.n + k
        delta = mean - self.mean
        self.mean = self.mean + delta * (k / n)
        self.m2 = self.m2 + m2 + delta**2 * (self.n * k / n)
        self.n = n

    @property
    def var(self) -> np.ndarray:
        return self.m2 / self.n if self.n else np.full(self.m2.shape, np.nan)


def _nmse(sse: np.ndarray, n: int, var: np.ndarray) -> float:
    """Mean over joints of ``sse / n / var`` (:func:`~lifelong_learning.core.metrics.normalized_mse`
    from sums of squared errors; a joint of zero variance counts its plain MSE; NaN without rows)."""
    if not n:
        return float("nan")
    return float(np.mean(sse / n / np.where(var > 0, var, 1.0)))


def _robust_sigma(errors: np.ndarray, floor: Any) -> np.ndarray:
    """The scale of :func:`~lifelong_learning.dynamics.plausibility.robust_outliers` of ``errors``
    (of their finite rows; ``inf`` when there is none, so that only non-finite rows are outliers)."""
    finite = np.all(np.isfinite(errors), axis=1)
    if not finite.any():
        return np.full(errors.shape[1], np.inf)
    return np.maximum(robust_scale(errors[finite]), np.broadcast_to(floor, errors.shape[1:]))


def _beyond(errors: np.ndarray, sigma: np.ndarray, k: float) -> np.ndarray:
    """Rows of ``errors`` beyond ``k`` scales ``sigma`` in some column, or not finite (as
    :func:`~lifelong_learning.dynamics.plausibility.robust_outliers`)."""
    finite = np.all(np.isfinite(errors), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(errors) / np.where(sigma > 0, sigma, np.inf)
    return ~finite | np.any(z > k, axis=1)


#: rows of context on each side of a batch for the spike and velocity tests of the inverse-dynamics
#: job (the half window of :func:`~lifelong_learning.dynamics.plausibility.local_spikes`)
_HALF_WINDOW = 3


def _changes(labels: np.ndarray, previous: Any = None) -> np.ndarray:
    """Positions where ``labels`` differ from the label before (the first one: from ``previous``)."""
    before = np.concatenate([[previous], labels[:-1]]) if labels.size else labels
    return np.flatnonzero(labels != before)


class _InverseDynamics:
    """Joint states: a chronological split (the test part is the most recent one), the torque nMSE
    of the semiparametric model replayed on the training part with each residual λ multiplier and
    forgetting factor, and the export replayed on every sample with the best ones.

    Memory is bounded by the block (``job.block`` rows) and the sample (``job.sample_rows`` rows),
    not by the bags: the bags are read once, a block at a time
    (:class:`~lifelong_learning.io.bags.JointStateStream`), filtered (plausibility gate, spikes and
    velocity-consistency per block of at most ``block`` rows, q̈ continued across blocks) and
    spilled to a temporary file (:class:`~lifelong_learning.retraining.rows.RowStore`); every later
    pass reads that file a block at a time. The robust scales of the residual outlier tests and
    the Nyström tuning use a uniform random subset of at most ``sample_rows`` rows (in time order;
    every row when there are fewer); the rigid-body fits, the scores and the replays see every row.
    With one block and one sample (at most 20 000 rows by default) this is the whole-log job.
    """

    metric = "test nMSE of the torques (mean over joints)"
    #: whether one rigid-body model fits every bag (:meth:`_bag_consistency`): then holdout-bags
    #: holds each bag out in turn; otherwise it validates on the most recent rows
    bags_fit_one_model = True

    def __init__(self, job: TuningJob, rng: Any, check: Callable[[], None] | None = None) -> None:
        self.check = check
        self.warm = SemiparametricInverseDynamics.load(job.init) if job.init else None
        self.urdf = self._urdf(job)
        self.block, self.sample_rows, self.seed = int(job.block), int(job.sample_rows), job.seed
        self.forgetting = tuple(job.forgetting)
        self.lam_scales = tuple(float(s) for s in job.residual_regularization)
        self.replay_block = min(int(job.replay_block), self.block)
        self.skipped: dict[str, int] = {}
        self.warnings: list[str] = []
        self.k = float(job.outlier_k)
        self.store: RowStore | None = None
        names = self.warm.joint_names if self.warm is not None else None
        stream = JointStateStream(job.bags, topic=job.topic, joint_names=names, block=self.block)
        try:
            self._read(stream, job)
            self._fit_and_split(job)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Delete the temporary file of the rows."""
        if self.store is not None:
            self.store.close()

    def _check(self) -> None:
        if self.check is not None:
            self.check()

    # ------------------------------------------------------------------ reading
    def _read(self, stream: JointStateStream, job: TuningJob) -> None:
        """Every row of the bags, filtered, with q̈, into the row store (batches of whole blocks of
        at most ``block`` rows; a log that fits one batch is filtered as one, as the whole-log job
        did)."""
        self._carry: tuple[np.ndarray, np.ndarray, int] | None = None  # q̈ window across batches
        self._last: tuple[Any, Any] = (None, None)  # stretch and bag of the last row stored
        self._held: dict[str, np.ndarray] | None = None  # context and rows not yet decided
        self._n_context = 0
        self._stretch = -1
        self._plausible = 0
        self._gate_counts: dict[str, int] = {}
        batch: list[JointStateBlock] = []
        rows = 0
        for part in stream:
            if batch and rows + part.t.size > self.block:
                self._filter(batch, stream, job, final=False)
                self._check()
                batch, rows = [], 0
            batch.append(part)
            rows += part.t.size
        if batch:  # there is one: a stream that gives nothing raises
            self._filter(batch, stream, job, final=True)
        for reason, n in stream.skipped.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + n
        self.skipped_detail = dict(stream.skipped.details)
        self.bag_joints, self.bags = stream.bag_joints, [str(p) for p in stream.paths]
        self.samples_read = self.store.n if self.store is not None else 0  # usable joint states
        if not self._plausible:
            raise BagError(
                f"no joint state within the URDF's limits (margin {self.gate.margin:g}): {self._gate_counts}"
            )

    def _start(self, names: list[str], job: TuningJob) -> RowStore:
        """At the first block: the joints are known, the limits and the store can be made."""
        self.joint_names = list(names)
        self.limits = limits = JointLimits.from_urdf(self.urdf, self.joint_names)
        self.gate = PlausibilityGate(limits, float(job.limit_margin))
        effort = np.where(np.isfinite(limits.effort), limits.effort, 0.0)
        self.floor = float(job.outlier_floor) * effort
        self.velocity_floor = 0.01 * np.where(np.isfinite(limits.velocity), limits.velocity, 0.0)
        self.sum_qd2 = np.zeros(len(names))
        return RowStore(len(names), self.block)

    def _filter(
        self, batch: list[JointStateBlock], stream: JointStateStream, job: TuningJob, final: bool
    ) -> None:
        """One batch of blocks (at most ``block`` rows): the samples within the URDF's limits
        widened by the margin, then without spikes in q, q̇ or τ against their neighbours (Hampel,
        :func:`~lifelong_learning.dynamics.plausibility.local_spikes`) and velocities inconsistent
        with the positions, then q̈ (continued from the previous batch within a stretch); counted,
        stored. Before q̈: one velocity spike would spoil the accelerations of its neighbours.

        The spike and velocity tests look at neighbours: unless ``final``, the batch's last
        :data:`_HALF_WINDOW` rows wait for the next batch, and the rows before them go with it as
        context, so that no window stops at a batch's end (the tests' robust scales are per batch)."""
        if self.store is None:
            assert stream.joint_names is not None
            self.store = self._start(stream.joint_names, job)
        rows = self._gated(batch)
        if self._held is not None:
            rows = {k: np.concatenate([self._held[k], rows[k]]) for k in rows}
        n_context, n = self._n_context, rows["t"].size
        decide = n if final else max(n_context, n - _HALF_WINDOW)
        bad = np.zeros(n, dtype=bool)
        if np.isfinite(self.k) and n:
            starts = _changes(rows["stretch"])
            spikes = local_spikes(np.hstack([rows["q"], rows["qd"], rows["tau"]]), starts, k=self.k)
            mismatch = velocity_mismatch(
                rows["t"], rows["q"], rows["qd"], starts, k=self.k, floor=self.velocity_floor
            )
            mismatch &= ~spikes
            for reason, found in (
                ("spike (against its neighbours)", spikes),
                ("velocity inconsistent with the positions", mismatch),
            ):
                count = int(found[n_context:decide].sum())
                if count:
                    self.skipped[reason] = self.skipped.get(reason, 0) + count
            bad = spikes | mismatch
        start = max(0, decide - _HALF_WINDOW)  # the context of the rows held back
        self._held = {k: v[start:] for k, v in rows.items()}
        self._n_context = decide - start
        keep = np.zeros(n, dtype=bool)
        keep[n_context:decide] = ~bad[n_context:decide]
        self._store({k: v[keep] for k, v in rows.items()})

    def _gated(self, batch: list[JointStateBlock]) -> dict[str, np.ndarray]:
        """The rows of the batch within the URDF's limits widened by the margin (counted), with
        their stretch (numbered across batches) and bag."""
        names = ("t", "q", "qd", "tau")
        rows = {k: np.concatenate([getattr(p, k) for p in batch]) for k in names}
        rows["stretch"] = np.concatenate(
            [np.full(p.t.size, self._next_stretch(p.new_stretch)) for p in batch]
        )
        rows["bag"] = np.concatenate([np.full(p.t.size, p.bag) for p in batch])
        ok, counts = self.gate.mask(rows["q"], rows["qd"], rows["tau"])
        for reason, n in counts.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + n
            self._gate_counts[reason] = self._gate_counts.get(reason, 0) + n
        self._plausible += int(ok.sum())
        return {k: v[ok] for k, v in rows.items()}

    def _store(self, rows: dict[str, np.ndarray]) -> None:
        """Rows decided and kept: q̈, then into the row store with their stretches and bags."""
        t, qd, stretch, bag = rows["t"], rows["qd"], rows["stretch"], rows["bag"]
        if not t.size:
            return
        assert self.store is not None
        qdd = self._accelerations(t, qd, stretch)
        store = self.store
        store.starts += (store.n + _changes(stretch, self._last[0])).tolist()
        new_bag = _changes(bag, self._last[1])
        store.bag_starts += (store.n + new_bag).tolist()
        store.bag_of_start += bag[new_bag].tolist()
        self._last = (stretch[-1], bag[-1])
        store.append(t, rows["q"], qd, qdd, rows["tau"])
        self.sum_qd2 += (qd**2).sum(axis=0)

    def _next_stretch(self, new: bool) -> int:
        if new or self._stretch < 0:
            self._stretch += 1
        return self._stretch

    def _accelerations(self, t: np.ndarray, qd: np.ndarray, stretch: np.ndarray) -> np.ndarray:
        """q̈ of the rows by the node's filter, restarted at each stretch and continued from the
        last rows of the previous batch when the first row continues their stretch."""
        carry = self._carry
        n_carry = 0
        if carry is not None and carry[2] == stretch[0]:
            t, qd = np.concatenate([carry[0], t]), np.concatenate([carry[1], qd])
            stretch = np.concatenate([np.full(carry[0].size, carry[2]), stretch])
            n_carry = carry[0].size
        qdd = estimate_accelerations(t, qd, starts=_changes(stretch).tolist())[n_carry:]
        last = stretch == stretch[-1]
        keep = np.flatnonzero(last)[-(ACCELERATION_WINDOW - 1) :]
        self._carry = (t[keep], qd[keep], int(stretch[-1]))
        return qdd

    # ------------------------------------------------------------------ fitting
    def _fit_and_split(self, job: TuningJob) -> None:
        """The chronological split, the rigid-body fit on the training part without its residual
        outliers, the rows to tune on, the test part's outliers and the baselines."""
        store = self.store
        assert store is not None
        # the most recent rows are the promotion gate's: never fitted, tuned or selected on (at
        # most sample_rows of them, so that the gate's data stay in memory)
        n_gate = (
            0 if job.validation_bags else min(round(float(job.holdout_fraction) * store.n), self.sample_rows)
        )
        self.end = n = store.n - n_gate
        n_test = max(1, round(job.test_fraction * n))
        if n - n_test < 4:
            raise ValueError(f"too few samples ({n}) for a test split of {job.test_fraction}")
        self.split = split = n - n_test
        par, own = self._parametric(0, split, kept_only=False, per_bag=len(set(store.bag_of_start)) > 1)
        n_out = self._flag_outliers(par, 0, split, "training part")
        self.n_train = split - n_out
        mismatched = self._bag_consistency(par, own) if len(own) > 1 else []
        if n_out:  # one bad sample also bends the rigid-body fit: refit without the outliers
            if self.n_train < 4:
                raise BagError("too few samples left in the training part after removing residual outliers")
            par, _ = self._parametric(0, split, kept_only=True)
        self.parametric = par
        self._check()
        self.X_tr, self.Y_tr, self.groups = self._tuning_rows(par)
        self.n_test = n_test - self._flag_outliers(par, split, n, "test part")
        self.n_gate = n_gate - self._flag_outliers(par, n, store.n, "held-out part") if n_gate else 0
        self._baselines(par)
        self.warnings = self._warnings(par) + mismatched

    def _parametric(
        self, a: int, b: int, kept_only: bool, per_bag: bool = False
    ) -> tuple[Any, dict[int, Any]]:
        """The rigid-body model with friction fitted on rows ``a`` to ``b`` (from the URDF prior,
        or from the model to continue from) and, with ``per_bag``, one fitted on each bag's rows
        alone (for :meth:`_bag_consistency`)."""
        assert self.store is not None

        def new() -> SemiparametricInverseDynamics:
            model = SemiparametricInverseDynamics(self.urdf, self.joint_names, mode="parametric")
            if self.warm is not None:
                model.continue_from(self.warm)
            return model

        par = new()
        own: dict[int, SemiparametricInverseDynamics] = {}
        for rows in self.store.blocks(a, b, kept_only):
            self._check()
            par.update(*rows.arrays)
            if per_bag:
                bag = self.store.bag_of(rows.index)
                for k in np.unique(bag):
                    own.setdefault(int(k), new()).update(*rows.take(bag == k).arrays)
        return par, own

    def _subset(self, n: int) -> np.ndarray:
        """Positions of at most ``sample_rows`` of ``n`` rows: all, or a uniform random subset (sorted)."""
        if n <= self.sample_rows:
            return np.arange(n)
        return np.sort(np.random.default_rng(self.seed).choice(n, size=self.sample_rows, replace=False))

    def _sampled(self, a: int, b: int, n: int, kept_only: bool) -> Iterator[Rows]:
        """The rows of :meth:`_subset` of the ``n`` rows ``a`` to ``b`` (those kept, with
        ``kept_only``), a block at a time."""
        assert self.store is not None
        pick = self._subset(n)
        seen = 0
        for rows in self.store.blocks(a, b, kept_only):
            lo, hi = np.searchsorted(pick, [seen, seen + len(rows)])
            if hi > lo:
                yield rows.take(pick[lo:hi] - seen)
            seen += len(rows)

    def _flag_outliers(self, par: Any, a: int, b: int, part: str) -> int:
        """Mark the rows ``a`` to ``b`` whose rigid-body residuals are beyond ``k`` robust scales
        (at least the floor; the scale from :meth:`_subset` of the rows) left out; counted."""
        assert self.store is not None
        if not np.isfinite(self.k):
            return 0
        sample = [r.tau - par.predict(r.q, r.qd, r.qdd) for r in self._sampled(a, b, b - a, kept_only=False)]
        sigma = _robust_sigma(np.vstack(sample), self.floor)
        count = 0
        for rows in self.store.blocks(a, b):
            out = _beyond(rows.tau - par.predict(rows.q, rows.qd, rows.qdd), sigma, self.k)
            self.store.set_left_out(int(rows.index[0]), out)
            count += int(out.sum())
        if count:
            key = f"residual outlier ({part})"
            self.skipped[key] = self.skipped.get(key, 0) + count
        return count

    def _tuning_rows(self, par: Any) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """The residual data (:func:`~lifelong_learning.nystrom.export.residual_data`) of
        :meth:`_subset` of the training rows kept, and where each bag starts among them."""
        X, Y, index = [], [], []
        for rows in self._sampled(0, self.split, self.n_train, kept_only=True):
            x, y = residual_data(par, *rows.arrays)
            X.append(x)
            Y.append(y)
            index.append(rows.index)
        assert self.store is not None
        bags = self.store.bag_of(np.concatenate(index))
        # the bags as holdout-bags' folds, unless they are not samples of one plant (a payload
        # grasped between them): then no bag predicts another, and the most recent rows are held out
        groups = _changes(bags).tolist() if self.bags_fit_one_model else None
        return np.vstack(X), np.vstack(Y), groups

    def _bag_consistency(self, par: Any, own: dict[int, Any]) -> list[str]:
        """Warnings for the bags whose training rows the rigid-body model of all bags explains
        much worse than a rigid-body model of that bag alone (torque nMSE, rows kept): bags of
        another robot with the same joint names, or of the same robot with another payload or a
        miscalibrated sensor, which one model of them all cannot fit."""
        assert self.store is not None
        d = len(self.joint_names)
        moments = {k: _Moments(d) for k in own}
        sse = {k: np.zeros((2, d)) for k in own}
        for rows in self.store.blocks(0, self.split, kept_only=True):
            bag = self.store.bag_of(rows.index)
            for k in np.unique(bag):
                r = rows.take(bag == k)
                moments[int(k)].add(r.tau)
                for i, model in enumerate((par, own[int(k)])):
                    sse[int(k)][i] += ((r.tau - model.predict(*r.arrays[:3])) ** 2).sum(axis=0)
        out = []
        for k, m in moments.items():
            together, alone = (_nmse(sse[k][i], m.n, m.var) for i in (0, 1))
            if together > BAG_MISMATCH_RATIO * alone and together - alone > BAG_MISMATCH_NMSE:
                out.append(
                    f"bag {self.bags[k]} does not fit one rigid-body model with the other bags (torque "
                    f"nMSE of the model of all bags on it {together:.3g}, of its own {alone:.3g}): a bag of "
                    "another robot with the same joint names, or of this one with another payload or sensor "
                    "calibration? The model learns the bags in order and, with forgetting, follows the most "
                    "recent ones; holdout-bags validates on the most recent rows instead of each bag; leave "
                    "out bags of another robot"
                )
        self.bags_fit_one_model = not out
        return out

    def _baselines(self, par: Any) -> None:
        """RNEA and the rigid body with friction on the test part (kept rows), and its variance."""
        assert self.store is not None
        d = len(self.joint_names)
        moments, sse_rnea, sse_par = _Moments(d), np.zeros(d), np.zeros(d)
        for rows in self.store.blocks(self.split, self.end, kept_only=True):
            moments.add(rows.tau)
            sse_rnea += ((rows.tau - par.regressor.rnea(rows.q, rows.qd, rows.qdd)) ** 2).sum(axis=0)
            sse_par += ((rows.tau - par.predict(rows.q, rows.qd, rows.qdd)) ** 2).sum(axis=0)
        self.var_te = moments.var  # nMSE of torques, not of residuals
        self.baselines = {
            "RNEA (URDF)": _nmse(sse_rnea, self.n_test, self.var_te),
            "rigid body + friction (RLS)": _nmse(sse_par, self.n_test, self.var_te),
        }

    def _urdf(self, job: TuningJob) -> str:
        """The URDF of ``job`` or, without one, of the model to continue from (it embeds its URDF)."""
        urdf = Path(str(job.urdf)).read_text(encoding="utf-8") if job.urdf else None
        if self.warm is None:
            assert urdf is not None
            return urdf
        if urdf is None:
            return self.warm.regressor.urdf
        difference = kinematic_difference(urdf, self.warm.regressor.urdf)
        if difference:
            raise ValueError(f"the model to continue from is for another robot than {job.urdf}: {difference}")
        return urdf

    # ------------------------------------------------------------------ warnings
    def _warnings(self, par: Any) -> list[str]:
        """Bad input the job could still learn from, in words: joints that barely move, a short
        log, joint states that lacked a modelled joint, and joints of the URDF the bags move but
        the model does not take (they lacked in the message the joints were taken from)."""
        assert self.store is not None
        n, out = self.store.n, []
        rms = np.sqrt(self.sum_qd2 / n)
        still = [name for name, v in zip(self.joint_names, rms, strict=True) if v < _STILL_RMS_VELOCITY]
        if len(still) == len(self.joint_names):
            out.append(
                f"no joint moves (RMS velocity < {_STILL_RMS_VELOCITY} rad/s on every joint): these bags "
                "hold static torques only; friction, inertia and the residual's dependence on motion are not "
                "identifiable from them, so the model is no better than the URDF for motion; log motion"
            )
        elif still:
            out.append(
                f"joints {still} barely move (RMS velocity < {_STILL_RMS_VELOCITY} rad/s): their friction "
                "and inertia are not identifiable from these bags; the model keeps the URDF there"
            )
        if n < 500:
            out.append(f"only {n} samples: the tuned model may not generalize; log more motion")
        missing = self.skipped.get(MISSING_JOINT, 0)
        if missing:
            out.append(
                f"{missing} joint state(s) lacked one of the modelled joints {self.joint_names} and were "
                f"skipped (first: {self.skipped_detail.get(MISSING_JOINT, '')})"
            )
        unmodelled = {
            j: [b for b, seen in zip(self.bags, self.bag_joints, strict=True) if j in seen]
            for j in par.regressor.locked_joints
        }
        unmodelled = {j: bags for j, bags in unmodelled.items() if bags}
        if unmodelled:
            out.append(
                f"joints {sorted(unmodelled)} of the URDF are in the joint states of "
                f"{sorted({b for bags in unmodelled.values() for b in bags})} but not modelled (the model's "
                f"joints {self.joint_names} are those of the first joint state, or of the model to continue "
                "from): the model holds them still, so their motion in those bags is not explained"
            )
        return out

    # ------------------------------------------------------------------ scoring and export
    def _replay(
        self,
        model: Any,
        forgetting: float,
        lam_scale: float,
        path: Path | None = None,
        everything: bool = False,
    ) -> Any:
        """The export replayed on the training rows kept (and, with ``path``, then on the test rows
        kept, with ``everything`` the gate's held-out rows too, and saved there), in time order."""
        assert self.store is not None
        store, split = self.store, self.split
        blocks = (r.arrays for r in store.blocks(0, split, kept_only=True))
        n = self.n_train
        if path is not None:
            end = store.n if everything else self.end
            test = (r.arrays for r in store.blocks(split, end, kept_only=True))
            blocks, n = itertools.chain(blocks, test), n + self.n_test + (self.n_gate if everything else 0)
        return replay_inverse_dynamics(
            model,
            self.urdf,
            self.joint_names,
            blocks,
            n,
            path,
            forgetting=forgetting,
            block=self.replay_block,
            warm_start=self.warm,
            lam_scale=lam_scale,
            check=self.check,
        )

    def _replay_error(self, model: Any, forgetting: float, lam_scale: float) -> float:
        """Torque nMSE on the test (most recent) part of the export replayed on the training part."""
        assert self.store is not None
        sp = self._replay(model, forgetting, lam_scale)
        sse = np.zeros(len(self.joint_names))
        for rows in self.store.blocks(self.split, self.end, kept_only=True):
            sse += ((rows.tau - sp.predict(rows.q, rows.qd, rows.qdd)) ** 2).sum(axis=0)
        value = _nmse(sse, self.n_test, self.var_te)
        return value if np.isfinite(value) else float("inf")

    def score(self, model: Any) -> tuple[float, dict[str, Any]]:
        """Choose the residual λ multiplier (at the first forgetting factor), then the forgetting
        factor (at that multiplier), each by the test-part error: len(scales) + len(β) − 1 replays."""
        beta0 = self.forgetting[0]
        by_scale = {s: self._replay_error(model, beta0, s) for s in self.lam_scales}
        scale = min(by_scale, key=by_scale.__getitem__)
        by_forgetting = {beta0: by_scale[scale]}
        by_forgetting.update({b: self._replay_error(model, b, scale) for b in self.forgetting[1:]})
        best = min(by_forgetting, key=by_forgetting.__getitem__)
        return by_forgetting[best], {
            "forgetting": best,
            "by_forgetting": {str(k): v for k, v in by_forgetting.items()},
            "residual_lam_scale": scale,
            "by_residual_lam_scale": {str(k): v for k, v in by_scale.items()},
        }

    def export(self, model: Any, choice: dict[str, Any], out: Path) -> None:
        """Every sample but the outliers and the gate's, in order."""
        self._exported = (model, choice)
        self._replay(model, choice["forgetting"], choice["residual_lam_scale"], path=out)

    def learn_held_out(self, out: Path) -> int:
        """After the gate: the export replayed again on every row kept, the gate's held-out part
        (the bags' most recent rows) last, as the online learner would have learned them; the
        number of held-out rows learned."""
        assert self.store is not None
        if not self.n_gate:
            return 0
        model, choice = self._exported
        self._replay(model, choice["forgetting"], choice["residual_lam_scale"], path=out, everything=True)
        return self.n_gate

    def _validation_rows(self, job: TuningJob) -> list[tuple[np.ndarray, ...]]:
        """``(q, q̇, q̈, τ)`` of the validation bags' joint states within the limits (q̈ by the same
        filter, per bag)."""
        if not job.validation_bags:
            return []
        js = read_joint_states(job.validation_bags, topic=job.topic, joint_names=self.joint_names)
        for reason, n in js.skipped.items():
            key = f"{reason} (validation bags)"
            self.skipped[key] = self.skipped.get(key, 0) + n
        qdd = estimate_accelerations(js.t, js.qd, starts=js.starts)
        ok, _ = self.gate.mask(js.q, js.qd, js.tau)
        return [(js.q[ok], js.qd[ok], qdd[ok], js.tau[ok])]

    def promotion(self, out: Path, job: TuningJob) -> Decision:
        """The gate: the exported model and the serving one (or RNEA) on the validation bags when
        given, else on the most recent rows of the bags, which nothing was fitted on."""
        assert self.store is not None
        parts = [r.arrays for r in self.store.blocks(self.end, self.store.n, kept_only=True)]
        parts += self._validation_rows(job)
        held_out = tuple(np.vstack([p[i] for p in parts]) for i in range(4)) if parts else ()
        if not held_out or held_out[0].shape[0] == 0:
            raise BagError(
                "no held-out joint state for the promotion gate: log more, or give validation bags"
            )
        candidate = SemiparametricInverseDynamics.load(out)
        return gate_inverse_dynamics(
            candidate, job.serving_model, held_out, margin=float(job.promotion_margin), force=bool(job.force)
        )


def run_job(
    job: TuningJob,
    callback: Callable[[str, int, dict[str, Any]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    phase: Callable[[str], None] | None = None,
    group: Group = ONE_PROCESS,
) -> dict[str, Any]:
    """Run ``job``; returns the report (also written as ``<report>.md`` and ``<report>.json``,
    by default ``<out>.report.*``).

    ``callback(objective, epoch, info)`` is called after every tuning epoch (``info`` as in
    :func:`~lifelong_learning.nystrom.tune`, plus ``"epochs"``). ``should_stop()`` is asked after
    every epoch, every replayed block and between phases; when it returns True the job raises
    :class:`JobCancelledError` and writes nothing. ``phase(name)`` is called as each phase
    starts: ``reading``, ``tuning``, ``fitting`` (the replays that choose forgetting and λ, and
    the export), ``validating`` (the promotion gate), ``writing`` (the reports).

    The report's ``promotion`` entry is the gate's :class:`~lifelong_learning.retraining.promotion.Decision`
    (the candidate and the serving model on the held-out data); the job itself announces nothing.

    ``group``: the processes that run the job together (e.g. under ``torchrun``,
    :func:`~lifelong_learning.nystrom.distributed.joined`): each reads its share of the bags, the
    tuning and the export are all-reduced, and the main process gates, writes the model and the
    reports (``world_size`` and ``samples_per_rank`` in the report); every process returns the
    report. Classification only, with the objectives of
    :data:`~lifelong_learning.nystrom.objectives.SUMS_OBJECTIVES` (:meth:`TuningJob.validate`).

    Raises:
        BagError: unreadable bags or bad data. ValueError / OSError: invalid job or URDF path.
        JobCancelledError: ``should_stop()`` returned True.
        RankFailedError: with several processes, instead of those: one or more processes failed
            (each named with its error; raised on every process).
    """

    def check() -> None:
        if should_stop is not None and should_stop():
            raise JobCancelledError("stopped on request before the model was written")

    error: Exception | None = None
    try:
        job.validate(group)
    except (ValueError, OSError) as exc:
        error = exc
    group.agree(error)
    objectives = list(job.objectives)
    rng = np.random.default_rng(job.seed)
    check()
    step = phase or (lambda name: None)
    step("reading")
    if job.task == "classification":
        task: Any = _Classification(job, rng, check, group)
    else:
        task = _InverseDynamics(job, rng, check)
    try:
        return _run_task(job, task, objectives, check, callback, step, group)
    finally:
        task.close()


def _run_task(
    job: TuningJob,
    task: Any,
    objectives: list[str],
    check: Callable[[], None],
    callback: Callable[[str, int, dict[str, Any]], None] | None,
    step: Callable[[str], None],
    group: Group = ONE_PROCESS,
) -> dict[str, Any]:
    """Tune with each objective, score, export the first one's model, gate it, write the reports
    (the gate and the files: the main process)."""
    check()
    report: dict[str, Any] = {
        "task": job.task,
        "bags": [str(b) for b in job.bags],
        "world_size": group.world_size,
        "samples_per_rank": group.all_gather(task.samples_read),
        "centers": job.centers,
        "epochs_asked": job.epochs,  # each objective's "epochs": how many ran (early stopping)
        "patience": job.patience,
        "model": str(job.out),
        "exported_objective": objectives[0],
        "n_train": task.n_train,
        "n_test": task.n_test,
        "tuning_rows": int(sum(group.all_gather(len(task.X_tr)))),  # the sample the tuning saw
        "baselines": task.baselines,
        "warnings": task.warnings,
        "skipped": dict(sorted(task.skipped.items())),
        "objectives": {},
    }
    exported = None
    for obj in objectives:
        t0 = time.perf_counter()
        step("tuning")

        def on_epoch(epoch: int, info: dict[str, Any], obj: str = obj) -> None:
            if callback is not None:
                callback(obj, epoch, {**info, "epochs": job.epochs})
            check()

        model = tune(
            task.X_tr,
            task.Y_tr,
            centers=job.centers,
            objective=obj,
            epochs=job.epochs,
            patience=job.patience,
            lr=job.lr,
            dtype=job.dtype,
            device=job.device,
            progress=job.progress and group.is_main,
            seed=job.seed,
            callback=on_epoch,
            lengthscale_range=job.lengthscale_range,
            groups=task.groups,
            group=group,
        )
        seconds = time.perf_counter() - t0
        check()
        step("fitting")
        value, choice = task.score(model)
        info = model.tuning_
        report["objectives"][obj] = {
            "metric": task.metric,
            "value": value,
            "seconds": seconds,
            "epochs": info.epochs,
            "lam": info.lam,
            "lengthscale": info.lengthscale,
            "final_objective": info.history[-1] if info.history else None,
            **choice,
        }
        if exported is None:
            exported = (model, choice)
    assert exported is not None
    # The test split only measured the tuned hyperparameters: the exported model is refitted
    # with them on every sample (for a robot's bag, the test split is its most recent part).
    out, md, js = job.output_paths()
    error: Exception | None = None
    if group.is_main:
        try:
            check_outputs(job)  # again: the paths may have changed while the job ran
        except (ValueError, OSError) as exc:
            error = exc
    group.agree(error)
    check()
    task.export(exported[0], exported[1], out)
    report["exported_samples"] = task.n_train + task.n_test
    # each process's peak resident memory so far (MB): reading, tuning, scoring and the export
    report["peak_rss_mb_per_rank"] = group.all_gather(
        round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    )
    if not group.is_main:  # the main process gates the model and writes the reports
        return report
    step("validating")
    try:
        check()
        where = (
            f"validation bags {', '.join(map(str, job.validation_bags))}"
            if job.validation_bags
            else f"the most recent {float(job.holdout_fraction):.0%} of the bags, at most about "
            f"{int(job.sample_rows)} samples (never trained on)"
        )
        report["promotion"] = {**task.promotion(out, job).to_dict(), "data": where}
        # the model scored is the one written; then it learns the bags' held-out part, as the online
        # learner does with what it answers (a held-out part is not lost for training)
        report["promotion"]["learned_after"] = task.learn_held_out(out)
        report["exported_samples"] += report["promotion"]["learned_after"]
    except BaseException:  # cancelled or no gate possible: no model without its verdict
        out.unlink(missing_ok=True)
        raise
    step("writing")
    report["markdown"] = _markdown(report)
    atomic_write_text(md, report["markdown"])
    atomic_write_text(js, json.dumps({k: v for k, v in report.items() if k != "markdown"}, indent=2))
    return report
