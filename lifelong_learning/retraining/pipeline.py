"""Offline retraining from rosbag2 logs: read, split, tune, evaluate, export, report.

The one implementation behind ``lifelong-learning tune`` (:mod:`lifelong_learning.commands.tune`)
and the ``nystrom_tuner`` node: bags → (X, Y) for the task (for inverse dynamics, ``q̈`` by the
online node's filter, restarted at each bag) → hyperparameters tuned by each requested
objective (Meanti et al.; :func:`lifelong_learning.nystrom.tune`) on a training split → test
metrics (:func:`lifelong_learning.core.metrics.normalized_mse`) → the first objective's model
exported to the online learners' model file (IncrementalRLSC or SemiparametricInverseDynamics,
see :mod:`lifelong_learning.nystrom.export`) → a markdown + JSON report next to it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lifelong_learning.core.files import atomic_write_text
from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.dynamics.acceleration import estimate_accelerations
from lifelong_learning.io.bags import read_joint_states, read_labeled_features
from lifelong_learning.nystrom.export import (
    export_classifier,
    export_inverse_dynamics,
    one_hot,
    residual_data,
    rigid_body_residuals,
)
from lifelong_learning.nystrom.objectives import OBJECTIVES
from lifelong_learning.nystrom.tuning import tune

TASKS = ("classification", "inverse-dynamics")


@dataclass
class TuningJob:
    """What to tune: bags, task, objectives (the first one's model is exported), sizes, output."""

    bags: Sequence[str]
    task: str
    out: str
    objectives: Sequence[str] = ("proposed",)
    centers: int = 100
    epochs: int = 100
    lr: float = 0.05
    device: str = "auto"
    dtype: str = "float64"
    test_fraction: float = 0.2
    topic: str | None = None
    urdf: str | None = None
    report: str | None = None
    seed: int = 0
    progress: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        """ValueError on an unknown task/objective or out-of-range sizes."""
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        bad = [o for o in self.objectives if o not in OBJECTIVES]
        if not self.objectives or bad:
            raise ValueError(f"unknown objective(s) {bad}; known: {', '.join(OBJECTIVES)}")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError("test_fraction must be in (0, 1)")
        if self.centers < 1 or self.epochs < 1:
            raise ValueError("centers and epochs must be >= 1")
        if not self.bags:
            raise ValueError("no bag given")
        if self.task == "inverse-dynamics" and not self.urdf:
            raise ValueError("inverse-dynamics needs a URDF")


def _split(n: int, fraction: float, rng: Any, chronological: bool) -> tuple[Any, Any]:
    n_test = max(1, round(fraction * n))
    if n - n_test < 4:
        raise ValueError(f"too few samples ({n}) for a test split of {fraction}")
    idx = np.arange(n) if chronological else rng.permutation(n)
    return np.sort(idx[: n - n_test]), np.sort(idx[n - n_test :])


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Nyström tuning report ({report['task']})",
        "",
        f"- bags: {', '.join(report['bags'])}",
        f"- samples: {report['n_train']} train, {report['n_test']} test; centres: {report['centers']}",
        f"- exported: `{report['model']}` (objective `{report['exported_objective']}`, refitted on all "
        f"{report['exported_samples']} samples)",
    ]
    if "baseline" in report:
        lines.append(f"- baseline: {report['baseline']}")
    lines += [
        "",
        "| objective | test metric | value | tuning time (s) | epochs | λ | length-scales |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in report["objectives"].items():
        ls = ", ".join(f"{v:.3g}" for v in r["lengthscale"])
        lines.append(
            f"| {name} | {r['metric']} | {r['value']:.4g} | {r['seconds']:.1f} | {r['epochs']} "
            f"| {r['lam']:.3g} | {ls} |"
        )
    return "\n".join(lines) + "\n"


def run_job(
    job: TuningJob, callback: Callable[[str, int, dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Run ``job``; returns the report (also written as ``<report>.md`` and ``<report>.json``,
    by default ``<out>.report.*``).

    ``callback(objective, epoch, info)`` is called after every tuning epoch (``info`` as in
    :func:`~lifelong_learning.nystrom.tune`, plus ``"epochs"``).

    Raises:
        BagError: unreadable bags or bad data. ValueError / OSError: invalid job or URDF path.
    """
    job.validate()
    objectives = list(job.objectives)
    rng = np.random.default_rng(job.seed)
    report: dict[str, Any] = {
        "task": job.task,
        "bags": [str(b) for b in job.bags],
        "centers": job.centers,
        "model": str(job.out),
        "exported_objective": objectives[0],
        "objectives": {},
    }
    if job.task == "classification":
        data = read_labeled_features(job.bags, topic=job.topic)
        tr, te = _split(len(data.labels), job.test_fraction, rng, chronological=False)
        labels_tr = [data.labels[i] for i in tr]
        classes, Y_tr = one_hot(labels_tr)
        X_tr, X_te = data.X[tr], data.X[te]
        labels_te = np.array([data.labels[i] for i in te], dtype=object)
    else:
        urdf = Path(str(job.urdf)).read_text(encoding="utf-8")
        js = read_joint_states(job.bags, topic=job.topic)
        qdd = estimate_accelerations(js.t, js.qd, starts=js.starts)
        tr, te = _split(js.t.size, job.test_fraction, rng, chronological=True)
        par, X_tr, Y_tr = rigid_body_residuals(urdf, js.joint_names, js.q[tr], js.qd[tr], qdd[tr], js.tau[tr])
        X_te, residual_te = residual_data(par, js.q[te], js.qd[te], qdd[te], js.tau[te])
        var_te = js.tau[te].var(axis=0)  # nMSE of torques, not of residuals
        nmse_rbd = normalized_mse(residual_te, np.zeros_like(residual_te), variance=var_te)
        report["baseline"] = f"rigid-body model (URDF prior + RLS) mean test nMSE {nmse_rbd.mean():.4g}"
    report["n_train"], report["n_test"] = len(tr), len(te)
    exported = None
    for obj in objectives:
        t0 = time.perf_counter()

        def on_epoch(epoch: int, info: dict[str, Any], obj: str = obj) -> None:
            if callback is not None:
                callback(obj, epoch, {**info, "epochs": job.epochs})

        model = tune(
            X_tr,
            Y_tr,
            centers=job.centers,
            objective=obj,
            epochs=job.epochs,
            lr=job.lr,
            dtype=job.dtype,
            device=job.device,
            progress=job.progress,
            seed=job.seed,
            callback=on_epoch,
        )
        seconds = time.perf_counter() - t0
        pred = model.predict(X_te)
        if job.task == "classification":
            err = float(np.mean(np.asarray(classes, dtype=object)[pred.argmax(1)] != labels_te))
            metric, value = "test error (%)", 100.0 * err
        else:
            nmse = normalized_mse(residual_te, pred, variance=var_te)
            metric, value = "test nMSE (mean over joints)", float(nmse.mean())
        info = model.tuning_
        report["objectives"][obj] = {
            "metric": metric,
            "value": value,
            "seconds": seconds,
            "epochs": info.epochs,
            "lam": info.lam,
            "lengthscale": info.lengthscale,
            "final_objective": info.history[-1] if info.history else None,
        }
        if exported is None:
            exported = model
    assert exported is not None
    # The test split only measured the tuned hyperparameters: the exported model is refitted
    # with them on every sample (for a robot's bag, the test split is its most recent part).
    out = Path(job.out)
    if job.task == "classification":
        export_classifier(exported, data.X, data.labels, out)
    else:
        export_inverse_dynamics(exported, urdf, js.joint_names, js.q, js.qd, qdd, js.tau, out)
    report["exported_samples"] = len(tr) + len(te)
    base = Path(job.report) if job.report else out.with_name(out.name + ".report")
    report["markdown"] = _markdown(report)
    atomic_write_text(base.with_name(base.name + ".md"), report["markdown"])
    atomic_write_text(
        base.with_name(base.name + ".json"),
        json.dumps({k: v for k, v in report.items() if k != "markdown"}, indent=2),
    )
    return report
