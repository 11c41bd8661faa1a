"""The report of a retraining job: a dict (written as JSON) and its markdown rendering.

Its format is read by the benchmarks (``docs/benchmarks/*.json``), the ``nystrom_tuner`` node
(its result) and the demo: keys are only ever added. A job's report replaces only an earlier report
(:func:`~lifelong_learning.retraining.job.check_outputs`), which
:func:`~lifelong_learning.retraining.job.is_report` knows by
:data:`~lifelong_learning.retraining.job.REPORT_TITLE` (markdown) or its keys (JSON).
"""

from __future__ import annotations

import json
import resource
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lifelong_learning.core.files import atomic_write_text
from lifelong_learning.retraining.job import REPORT_TITLE

if TYPE_CHECKING:
    from lifelong_learning.nystrom.distributed import Group
    from lifelong_learning.retraining.job import TuningJob
    from lifelong_learning.retraining.task import Task


def new_report(job: TuningJob, task: Task, group: Group) -> dict[str, Any]:
    """The report of ``job`` before any tuning: what was read (every process's count) and asked."""
    return {
        "task": job.task,
        "bags": [str(b) for b in job.bags],
        "world_size": group.world_size,
        "samples_per_rank": group.all_gather(task.samples_read),
        "centers": job.centers,
        "epochs_asked": job.epochs,  # each objective's "epochs": how many ran (early stopping)
        "patience": job.patience,
        "model": str(job.out),
        "method": job.method,
        "exported_objective": job.runs[0],
        "n_train": task.n_train,
        "n_test": task.n_test,
        "tuning_rows": int(sum(group.all_gather(len(task.X_tr)))),  # the sample the tuning saw
        "baselines": task.baselines,
        "warnings": task.warnings,
        "skipped": dict(sorted(task.skipped.items())),
        "objectives": {},
    }


def objective_result(
    metric: str, value: float, seconds: float, model: Any, choice: dict[str, Any]
) -> dict[str, Any]:
    """One run's entry: the test metric of its model, the fit's time, what it chose
    (:func:`~lifelong_learning.retraining.methods.chosen`: λ, length-scales, epochs, the online
    map's size, ...), and the task's choices (forgetting, λ multiplier)."""
    from lifelong_learning.retraining.methods import chosen

    return {"metric": metric, "value": value, "seconds": seconds, **chosen(model), **choice}


def add_peak_memory(report: dict[str, Any], group: Group) -> None:
    """Each process's peak resident memory so far (MB): reading, tuning, scoring and the export."""
    report["peak_rss_mb_per_rank"] = group.all_gather(
        round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    )


def write_reports(report: dict[str, Any], md: Path, js: Path) -> None:
    """Render the markdown into ``report["markdown"]``; write it to ``md`` and the rest to ``js``."""
    report["markdown"] = markdown(report)
    atomic_write_text(md, report["markdown"])
    atomic_write_text(js, json.dumps({k: v for k, v in report.items() if k != "markdown"}, indent=2))


def markdown(report: dict[str, Any]) -> str:
    """The report as markdown: what was read and exported, the gate's verdict, the warnings, and
    one row per objective."""
    lines = [
        f"{REPORT_TITLE} ({report['task']})",
        "",
        f"- bags: {', '.join(report['bags'])}",
        f"- samples: {report['n_train']} train, {report['n_test']} test "
        f"({'the most recent part' if report['task'] == 'inverse-dynamics' else 'a random part'}); "
        f"centres: {report['centers']}; tuned on {report['tuning_rows']} of the training samples",
        f"- exported: `{report['model']}` ({_exported(report)}, refitted on all "
        f"{report['exported_samples']} samples)",
    ]
    skipped = ", ".join(f"{n} {reason}" for reason, n in report["skipped"].items())
    lines.append(f"- samples skipped (not learned, not scored): {skipped or 'none'}")
    lines += [f"- baseline {name}: test nMSE {value:.4g}" for name, value in report["baselines"].items()]
    gate = report.get("promotion")
    if gate is not None:
        lines.append(_gate_line(gate))
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


def _exported(report: dict[str, Any]) -> str:
    """Which run's model was exported, in words."""
    method = report.get("method", "nystrom")
    if method == "nystrom":
        return f"objective `{report['exported_objective']}`"
    run = report["objectives"].get(method, {})
    return f"method `{method}`, {run.get('features', '?')} features"


def _gate_line(gate: dict[str, Any]) -> str:
    serving = "none" if gate["serving_error"] is None else f"{gate['serving_error']:.4g}"
    verdict = "promoted" if gate["promoted"] else "not promoted"
    learned = gate.get("learned_after")
    return (
        f"- promotion gate ({gate['n_samples']} samples of {gate['data']}): candidate "
        f"{gate['metric']} {gate['candidate_error']:.4g}, {gate['serving']} {serving}: **{verdict}** "
        f"({gate['reason']})" + (f"; then the model learned those {learned} samples" if learned else "")
    )
