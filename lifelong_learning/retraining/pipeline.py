"""Offline retraining from rosbag2 logs: read, split, tune, evaluate, export, report.

The one implementation behind ``lifelong-learning tune`` (:mod:`lifelong_learning.commands.tune`)
and the ``nystrom_tuner`` node: bags → (X, Y) for the task (for inverse dynamics, ``q̈`` by the
online node's filter, restarted at each bag) → hyperparameters tuned by each requested
objective (Meanti et al.; :func:`lifelong_learning.nystrom.tune`) on a training split → test
metrics (:func:`lifelong_learning.core.metrics.normalized_mse`) → the first objective's model
exported to the online learners' model file (IncrementalRLSC or SemiparametricInverseDynamics,
see :mod:`lifelong_learning.nystrom.export`) → a markdown + JSON report next to it.

A job can be stopped (``run_job(..., should_stop=...)``): it is asked after every tuning epoch,
every replayed block and between phases, and raises :class:`JobCancelledError` before the model file
is written. The outputs never replace anything but a model file (the model) or an earlier report
(the reports): a directory, a symlink, a FIFO or another file there refuses the job
(:func:`check_outputs`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lifelong_learning.core.files import UnsafePathError, atomic_write_text, check_replaceable
from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.core.model_file import is_model_file, read_model_kind
from lifelong_learning.dynamics.acceleration import estimate_accelerations
from lifelong_learning.dynamics.plausibility import (
    JointLimits,
    PlausibilityGate,
    local_spikes,
    robust_outliers,
    velocity_mismatch,
)
from lifelong_learning.dynamics.regressor import kinematic_difference
from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics
from lifelong_learning.io.bags import BagError, JointStateSet, read_joint_states, read_labeled_features
from lifelong_learning.learners.recognition_gate import DEFAULT_MAX_CLASSES
from lifelong_learning.learners.rlsc import IncrementalRLSC
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
    forgetting: Sequence[float] = DEFAULT_FORGETTING
    replay_block: int = 10
    init: str | None = None
    lengthscale_range: tuple[float, float] | None = None
    residual_regularization: Sequence[float] = DEFAULT_RESIDUAL_REGULARIZATION
    limit_margin: float = DEFAULT_LIMIT_MARGIN
    outlier_k: float = DEFAULT_OUTLIER_K
    outlier_floor: float = DEFAULT_OUTLIER_FLOOR

    def validate(self) -> None:
        """ValueError on an unknown task/objective, out-of-range sizes or a bag that is not a directory."""
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        bad = [o for o in self.objectives if o not in OBJECTIVES]
        if not self.objectives or bad:
            raise ValueError(f"unknown objective(s) {bad}; known: {', '.join(OBJECTIVES)}")
        if len(set(self.objectives)) != len(self.objectives):
            raise ValueError(f"an objective is named twice: {list(self.objectives)}")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError("test_fraction must be in (0, 1)")
        if self.centers < 1 or self.epochs < 1:
            raise ValueError("centers and epochs must be >= 1")
        self._validate_bags()
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
        if self.replay_block < 1:
            raise ValueError("replay_block must be >= 1")
        self._validate_sample_tests()
        check_outputs(self)

    def _validate_bags(self) -> None:
        if not self.bags:
            raise ValueError("no bag given")
        bags = [Path(os.path.expanduser(str(b))) for b in self.bags]
        for bag in bags:
            if not bag.is_dir():
                why = "not a bag directory" if bag.exists() else "no such bag (not a bag directory)"
                raise ValueError(f"{why}: {bag}")
        if len({b.resolve() for b in bags}) != len(bags):  # its samples would be in both splits
            raise ValueError(f"a bag is named twice: {[str(b) for b in self.bags]}")

    def _validate_init(self) -> None:
        if self.init is None:
            return
        self.init = os.path.expanduser(self.init)
        if not Path(self.init).is_file():
            raise ValueError(f"no model file {self.init} to continue from")
        want = (IncrementalRLSC if self.task == "classification" else SemiparametricInverseDynamics).kind
        found = read_model_kind(self.init)  # the header only; ModelFileError (a ValueError) if corrupt
        if found != want:
            raise ValueError(
                f"{self.init} holds a {found!r} model; a {self.task} job continues from {want!r}"
            )

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
        f"centres: {report['centers']}",
        f"- exported: `{report['model']}` (objective `{report['exported_objective']}`, refitted on all "
        f"{report['exported_samples']} samples)",
    ]
    skipped = ", ".join(f"{n} {reason}" for reason, n in report["skipped"].items())
    lines.append(f"- samples skipped (not learned, not scored): {skipped or 'none'}")
    lines += [f"- baseline {name}: test nMSE {value:.4g}" for name, value in report["baselines"].items()]
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
    """Labeled features: a random split, test error, an IncrementalRLSC with the tuned map."""

    metric = "test error (%)"

    def __init__(self, job: TuningJob, rng: Any, check: Callable[[], None] | None = None) -> None:
        data = read_labeled_features(job.bags, topic=job.topic)
        self.skipped: dict[str, int] = dict(data.skipped)
        self.tr, self.te = _split(len(data.labels), job.test_fraction, rng, chronological=False)
        self.warnings: list[str] = []
        self.baselines: dict[str, float] = {}
        self.known: list[Any] = []  # the serving model's classes, first in the exported model
        X, labels = data.X, list(data.labels)
        if job.init:
            X, labels = self._continue_from(IncrementalRLSC.load(job.init), X, labels)
        train = np.concatenate([self.tr, np.arange(len(data.labels), len(labels))])
        self.X, self.labels = X, labels
        self.classes, self.Y_tr = one_hot([labels[i] for i in train])
        if len(self.classes) > DEFAULT_MAX_CLASSES:
            self.warnings.append(
                f"{len(self.classes)} classes: an object_recognition node with the default max_classes "
                f"({DEFAULT_MAX_CLASSES}) will refuse to load this model; raise its max_classes"
            )
        self.X_tr = X[train]
        self.X_te = X[self.te]
        self.labels_te = np.array([labels[i] for i in self.te], dtype=object)

    def _continue_from(self, serving: IncrementalRLSC, X: np.ndarray, labels: list[Any]) -> tuple[Any, Any]:
        """The serving model's classes come first; its held-out samples join the training data."""
        if serving.n_features_in_ not in (None, X.shape[1]):
            raise ValueError(
                f"the model to continue from takes {serving.n_features_in_} features, the bags {X.shape[1]}"
            )
        self.known = [str(c) for c in serving.classes_.tolist()]
        if serving.feature_map is None and serving.n_validation_:
            val_X, val_labels = serving.validation_samples()
            X, labels = np.vstack([X, val_X]), labels + [str(c) for c in val_labels]
        unseen = sorted(set(self.known) - set(labels))
        if unseen:
            self.warnings.append(
                f"classes {unseen} of the serving model have no sample in the bags or its validation buffer: "
                "they are kept but cannot be predicted until taught again"
            )
        return X, labels

    def score(self, model: Any) -> tuple[float, dict[str, Any]]:
        pred = model.predict(self.X_te)
        err = float(np.mean(np.asarray(self.classes, dtype=object)[pred.argmax(1)] != self.labels_te))
        return 100.0 * err, {}

    def export(self, model: Any, choice: dict[str, Any], out: Path) -> None:
        export_classifier(model, self.X, self.labels, out, classes=self.known)


def _rows(js: JointStateSet, ok: np.ndarray) -> JointStateSet:
    """The rows ``ok`` of ``js`` (its bag starts moved to the rows kept)."""
    if ok.all():
        return js
    kept_before = np.concatenate([[0], np.cumsum(ok)])
    starts = sorted({int(kept_before[s]) for s in js.starts} - {int(ok.sum())})
    return JointStateSet(js.joint_names, js.t[ok], js.q[ok], js.qd[ok], js.tau[ok], starts or [0], js.skipped)


class _InverseDynamics:
    """Joint states: a chronological split (the test part is the most recent one), the torque nMSE
    of the semiparametric model replayed on the training part with each residual λ multiplier and
    forgetting factor, and the export replayed on every sample with the best ones."""

    metric = "test nMSE of the torques (mean over joints)"

    def __init__(self, job: TuningJob, rng: Any, check: Callable[[], None] | None = None) -> None:
        self.check = check
        self.warm = SemiparametricInverseDynamics.load(job.init) if job.init else None
        self.urdf = self._urdf(job)
        names = self.warm.joint_names if self.warm is not None else None
        raw = read_joint_states(job.bags, topic=job.topic, joint_names=names)
        self.skipped: dict[str, int] = dict(raw.skipped)
        self.outliers_k = float(job.outlier_k)
        self.limits = limits = JointLimits.from_urdf(self.urdf, raw.joint_names)
        self.js = self._despiked(self._plausible(raw, PlausibilityGate(limits, float(job.limit_margin))))
        self.qdd = estimate_accelerations(self.js.t, self.js.qd, starts=self.js.starts)
        tr, te = _split(self.js.t.size, job.test_fraction, rng, chronological=True)
        self.forgetting = tuple(job.forgetting)
        self.lam_scales = tuple(float(s) for s in job.residual_regularization)
        self.block = job.replay_block
        effort = np.where(np.isfinite(limits.effort), limits.effort, 0.0)
        self.outliers = {"k": float(job.outlier_k), "floor": float(job.outlier_floor) * effort}
        js = self.js
        par, self.X_tr, self.Y_tr, self.tr = self._without_outliers(tr, "training part")
        _, residual_te = residual_data(par, js.q[te], js.qd[te], self.qdd[te], js.tau[te])
        out_te = self._outliers(residual_te, "test part")
        self.te = te = te[~out_te]
        residual_te = residual_te[~out_te]
        self.var_te = js.tau[te].var(axis=0)  # nMSE of torques, not of residuals
        rnea = par.regressor.rnea(js.q[te], js.qd[te], self.qdd[te])
        self.baselines = {
            "RNEA (URDF)": float(normalized_mse(js.tau[te], rnea).mean()),
            "rigid body + friction (RLS)": float(
                normalized_mse(residual_te, np.zeros_like(residual_te), variance=self.var_te).mean()
            ),
        }
        self.warnings = self._warnings()

    def _plausible(self, js: JointStateSet, gate: PlausibilityGate) -> JointStateSet:
        """The samples within the URDF's limits widened by the margin (before q̈ is estimated from
        them: one velocity spike would spoil the accelerations of its neighbours); counted."""
        ok, counts = gate.mask(js.q, js.qd, js.tau)
        for reason, n in counts.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + n
        if not ok.any():
            raise BagError(f"no joint state within the URDF's limits (margin {gate.margin:g}): {counts}")
        return _rows(js, ok)

    def _despiked(self, js: JointStateSet) -> JointStateSet:
        """Without the samples that are spikes in q, q̇ or τ against their neighbours (Hampel,
        :func:`~lifelong_learning.dynamics.plausibility.local_spikes`; within the limits, but a
        glitch all the same), before q̈ is estimated from them; counted."""
        if not np.isfinite(self.outliers_k):
            return js
        spikes = local_spikes(np.hstack([js.q, js.qd, js.tau]), js.starts, k=self.outliers_k)
        if spikes.any():
            self.skipped["spike (against its neighbours)"] = int(spikes.sum())
        floor = 0.01 * np.where(np.isfinite(self.limits.velocity), self.limits.velocity, 0.0)
        mismatch = velocity_mismatch(js.t, js.q, js.qd, js.starts, k=self.outliers_k, floor=floor) & ~spikes
        if mismatch.any():
            self.skipped["velocity inconsistent with the positions"] = int(mismatch.sum())
        return _rows(js, ~(spikes | mismatch))

    def _outliers(self, residuals: np.ndarray, part: str) -> np.ndarray:
        """Rows of rigid-body residuals beyond ``k`` robust scales (at least the floor); counted."""
        if not np.isfinite(self.outliers["k"]):
            return np.zeros(residuals.shape[0], dtype=bool)
        out = robust_outliers(residuals, k=self.outliers["k"], floor=self.outliers["floor"])
        if out.any():
            key = f"residual outlier ({part})"
            self.skipped[key] = self.skipped.get(key, 0) + int(out.sum())
        return out

    def _without_outliers(self, tr: np.ndarray, part: str) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        """The rigid-body model fitted on rows ``tr``, refitted without the rows whose residuals it
        finds to be outliers (one bad sample also bends the rigid-body fit), with the residual data
        of the rows kept and those rows."""
        js = self.js
        fitted = rigid_body_residuals(
            self.urdf, js.joint_names, js.q[tr], js.qd[tr], self.qdd[tr], js.tau[tr], self.warm
        )
        out = self._outliers(fitted[2], part)
        if not out.any():
            return (*fitted, tr)
        tr = tr[~out]
        if tr.size < 4:
            raise BagError(f"too few samples left in the {part} after removing residual outliers")
        refit = rigid_body_residuals(
            self.urdf, js.joint_names, js.q[tr], js.qd[tr], self.qdd[tr], js.tau[tr], self.warm
        )
        return (*refit, tr)

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

    def _warnings(self) -> list[str]:
        js, out = self.js, []
        rms = np.sqrt(np.mean(js.qd**2, axis=0))
        still = [name for name, v in zip(js.joint_names, rms, strict=True) if v < _STILL_RMS_VELOCITY]
        if still:
            out.append(
                f"joints {still} barely move (RMS velocity < {_STILL_RMS_VELOCITY} rad/s): their friction "
                "and inertia are not identifiable from these bags; the model keeps the URDF there"
            )
        if js.t.size < 500:
            out.append(f"only {js.t.size} samples: the tuned model may not generalize; log more motion")
        return out

    def _part(self, rows: Any) -> list[np.ndarray]:
        return [self.js.q[rows], self.js.qd[rows], self.qdd[rows], self.js.tau[rows]]

    def _replay_error(self, model: Any, forgetting: float, lam_scale: float) -> float:
        """Torque nMSE on the test (most recent) part of the export replayed on the training part."""
        sp = export_inverse_dynamics(
            model,
            self.urdf,
            self.js.joint_names,
            *self._part(self.tr),
            forgetting=forgetting,
            block=self.block,
            warm_start=self.warm,
            lam_scale=lam_scale,
            check=self.check,
        )
        q, qd, qdd, tau = self._part(self.te)
        value = float(normalized_mse(tau, sp.predict(q, qd, qdd), variance=self.var_te).mean())
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
        export_inverse_dynamics(
            model,
            self.urdf,
            self.js.joint_names,
            *self._part(np.concatenate([self.tr, self.te])),  # every sample but the outliers, in order
            out,
            forgetting=choice["forgetting"],
            block=self.block,
            warm_start=self.warm,
            lam_scale=choice["residual_lam_scale"],
            check=self.check,
        )


def run_job(
    job: TuningJob,
    callback: Callable[[str, int, dict[str, Any]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Run ``job``; returns the report (also written as ``<report>.md`` and ``<report>.json``,
    by default ``<out>.report.*``).

    ``callback(objective, epoch, info)`` is called after every tuning epoch (``info`` as in
    :func:`~lifelong_learning.nystrom.tune`, plus ``"epochs"``). ``should_stop()`` is asked after
    every epoch, every replayed block and between phases; when it returns True the job raises
    :class:`JobCancelledError` and writes nothing.

    Raises:
        BagError: unreadable bags or bad data. ValueError / OSError: invalid job or URDF path.
        JobCancelledError: ``should_stop()`` returned True.
    """

    def check() -> None:
        if should_stop is not None and should_stop():
            raise JobCancelledError("stopped on request before the model was written")

    job.validate()
    objectives = list(job.objectives)
    rng = np.random.default_rng(job.seed)
    check()
    task_class = _Classification if job.task == "classification" else _InverseDynamics
    task = task_class(job, rng, check)
    check()
    report: dict[str, Any] = {
        "task": job.task,
        "bags": [str(b) for b in job.bags],
        "centers": job.centers,
        "model": str(job.out),
        "exported_objective": objectives[0],
        "n_train": len(task.tr),
        "n_test": len(task.te),
        "baselines": task.baselines,
        "warnings": task.warnings,
        "skipped": dict(sorted(task.skipped.items())),
        "objectives": {},
    }
    exported = None
    for obj in objectives:
        t0 = time.perf_counter()

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
            lr=job.lr,
            dtype=job.dtype,
            device=job.device,
            progress=job.progress,
            seed=job.seed,
            callback=on_epoch,
            lengthscale_range=job.lengthscale_range,
        )
        seconds = time.perf_counter() - t0
        check()
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
    check_outputs(job)  # again: the paths may have changed while the job ran
    check()
    task.export(exported[0], exported[1], out)
    report["exported_samples"] = len(task.tr) + len(task.te)
    report["markdown"] = _markdown(report)
    atomic_write_text(md, report["markdown"])
    atomic_write_text(js, json.dumps({k: v for k, v in report.items() if k != "markdown"}, indent=2))
    return report
