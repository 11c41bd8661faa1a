"""Offline retraining from rosbag2 logs: read, split, tune, evaluate, export, gate, report.

The one implementation behind ``lifelong-learning tune`` (:mod:`lifelong_learning.commands.tune`)
and the ``nystrom_tuner`` node: bags → (X, Y) for the task (a
:class:`~lifelong_learning.retraining.task.Task`: :mod:`~lifelong_learning.retraining.classification`
or :mod:`~lifelong_learning.retraining.inverse_dynamics`, where ``q̈`` comes from the online node's
filter, restarted at each bag) → the job's offline method fitted on a training split
(:mod:`~lifelong_learning.retraining.methods`: for ``nystrom``, hyperparameters tuned by each
requested objective, Meanti et al.) → test metrics
(:func:`lifelong_learning.core.metrics.normalized_mse`) → the first run's model exported to
the online learners' model file (IncrementalRLSC or SemiparametricInverseDynamics on the method's
feature map, see :mod:`lifelong_learning.nystrom.export`) → the promotion gate
(:mod:`~lifelong_learning.retraining.promotion`) → a markdown + JSON report next to it
(:mod:`~lifelong_learning.retraining.report`).

Both tasks tune on a uniform random sample of at most ``TuningJob.sample_rows`` training rows
(every row when there are fewer) and score and export with every row; memory is bounded by
``TuningJob.block`` rows and that sample, not by the bags (``docs/benchmarks/retraining-streaming.md``).
A job that names no objective takes the task's default
(:data:`~lifelong_learning.retraining.job.DEFAULT_OBJECTIVES`).

A job can be stopped (``run_job(..., should_stop=...)``): it is asked after every tuning epoch,
every replayed block and between phases, and raises
:class:`~lifelong_learning.retraining.job.JobCancelledError` before the model file is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lifelong_learning.nystrom.distributed import ONE_PROCESS, Group
from lifelong_learning.retraining.classification import Classification
from lifelong_learning.retraining.inverse_dynamics import InverseDynamics
from lifelong_learning.retraining.job import TASKS, JobCancelledError, TuningJob, check_outputs
from lifelong_learning.retraining.methods import fit_run
from lifelong_learning.retraining.report import (
    add_peak_memory,
    new_report,
    objective_result,
    write_reports,
)
from lifelong_learning.retraining.task import Task

Callback = Callable[[str, int, dict[str, Any]], None]
"""``callback(run, epoch, info)``, called after every tuning epoch (of the method nystrom; a step of
the others: an SLKL epoch, a NYTRO iteration, a λ of the path); ``info["objective"]`` is the
run's figure of merit then (the tuning objective, SLKL's objective, the validation error)."""

#: each task of :data:`~lifelong_learning.retraining.job.TASKS`, made from the job, its random
#: generator, the stop check and the processes: ``IMPLEMENTATIONS[job.task](job, rng, check, group)``
IMPLEMENTATIONS: dict[str, Callable[[TuningJob, np.random.Generator, Callable[[], None], Group], Task]] = {
    "classification": lambda job, rng, check, group: Classification(job, rng, group),
    "inverse-dynamics": lambda job, rng, check, group: InverseDynamics(job, check),
}
assert set(IMPLEMENTATIONS) == set(TASKS), "a task without its implementation, or one not in TASKS"


def run_job(
    job: TuningJob,
    callback: Callback | None = None,
    should_stop: Callable[[], bool] | None = None,
    phase: Callable[[str], None] | None = None,
    group: Group = ONE_PROCESS,
) -> dict[str, Any]:
    """Run ``job``; returns the report (also written as ``<report>.md`` and ``<report>.json``,
    by default ``<out>.report.*``).

    ``callback(objective, epoch, info)`` is called after every tuning epoch (``info`` as in
    :func:`~lifelong_learning.nystrom.tune`, plus ``"epochs"``). ``should_stop()`` is asked after
    every epoch, every replayed block and between phases; when it returns True the job raises
    :class:`~lifelong_learning.retraining.job.JobCancelledError` and writes nothing. ``phase(name)``
    is called as each phase starts: ``reading``, ``tuning``, ``fitting`` (the replays that choose
    forgetting and λ, and the export), ``validating`` (the promotion gate), ``writing`` (the reports).

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
    rng = np.random.default_rng(job.seed)
    check()
    step = phase or (lambda name: None)
    step("reading")
    task = IMPLEMENTATIONS[job.task](job, rng, check, group)
    try:
        return _run_task(job, task, check, callback, step, group)
    finally:
        task.close()


def _run_task(
    job: TuningJob,
    task: Task,
    check: Callable[[], None],
    callback: Callback | None,
    step: Callable[[str], None],
    group: Group = ONE_PROCESS,
) -> dict[str, Any]:
    """Fit each run (:attr:`TuningJob.runs`), score, export the first one's model, gate it, write
    the reports (the gate and the files: the main process)."""
    check()
    report = new_report(job, task, group)
    exported: tuple[Any, dict[str, Any]] | None = None
    for run in job.runs:
        step("tuning")
        model, seconds = _tune(job, task, run, check, callback, group)
        check()
        step("fitting")
        value, choice = task.score(model)
        report["objectives"][run] = objective_result(task.metric, value, seconds, model, choice)
        exported = exported or (model, choice)
    assert exported is not None
    # The test split only measured the tuned hyperparameters: the exported model is refitted
    # with them on every sample (for a robot's bag, the test split is its most recent part).
    out, md, js = job.output_paths()
    _check_outputs_again(job, group)
    check()
    task.export(*exported, out)
    report["exported_samples"] = task.n_train + task.n_test
    add_peak_memory(report, group)
    if not group.is_main:  # the main process gates the model and writes the reports
        return report
    step("validating")
    _gate(job, task, out, check, report)
    step("writing")
    write_reports(report, md, js)
    return report


def _tune(
    job: TuningJob,
    task: Task,
    run: str,
    check: Callable[[], None],
    callback: Callback | None,
    group: Group,
) -> tuple[Any, float]:
    """The model of ``run`` fitted on the task's tuning rows, and the seconds it took."""
    t0 = time.perf_counter()

    def on_step(step: int, info: dict[str, Any]) -> None:
        if callback is not None:
            callback(run, step, {**info, "objective": _merit(info), "epochs": job.epochs})
        check()

    time_ordered = job.task == "inverse-dynamics"
    model = fit_run(job, run, task.X_tr, task.Y_tr, task.groups, time_ordered, group, on_step)
    return model, time.perf_counter() - t0


def _merit(info: dict[str, Any]) -> float:
    """A step's figure of merit: the objective (Meanti's, SLKL's), else the validation error."""
    for key in ("objective", "validation_rmse", "validation_error"):
        if key in info:
            return float(info[key])
    return float("nan")


def _check_outputs_again(job: TuningJob, group: Group) -> None:
    """:func:`~lifelong_learning.retraining.job.check_outputs` again, on the main process (the
    paths may have changed while the job ran); the error, if any, on every process."""
    error: Exception | None = None
    if group.is_main:
        try:
            check_outputs(job)
        except (ValueError, OSError) as exc:
            error = exc
    group.agree(error)


def _gate(job: TuningJob, task: Task, out: Path, check: Callable[[], None], report: dict[str, Any]) -> None:
    """The promotion gate's verdict on the model written to ``out`` into the report; then the
    model learns the bags' held-out part, as the online learner does with what it answers (a
    held-out part is not lost for training). No model is left without its verdict: cancelled,
    or no gate possible, the model file is deleted."""
    try:
        check()
        where = (
            f"validation bags {', '.join(map(str, job.validation_bags))}"
            if job.validation_bags
            else f"the most recent {float(job.holdout_fraction):.0%} of the bags, at most about "
            f"{int(job.sample_rows)} samples (never trained on)"
        )
        report["promotion"] = {**task.promotion(out, job).to_dict(), "data": where}
        report["promotion"]["learned_after"] = task.learn_held_out(out)
        report["exported_samples"] += report["promotion"]["learned_after"]
    except BaseException:
        out.unlink(missing_ok=True)
        raise


__all__ = ["IMPLEMENTATIONS", "run_job"]
