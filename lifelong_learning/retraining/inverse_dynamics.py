"""The inverse-dynamics task of a retraining job: joint states → a SemiparametricInverseDynamics (a
:class:`~lifelong_learning.retraining.task.Task`).

A chronological split (the test part is the most recent one), the torque nMSE of the
semiparametric model replayed on the training part with each residual λ multiplier and forgetting
factor, and the export replayed on every sample with the best ones.

Memory is bounded by the block (``job.block`` rows) and the sample (``job.sample_rows`` rows), not
by the bags: the bags are read once, a block at a time, filtered and spilled to a temporary file
(:mod:`~lifelong_learning.retraining.joint_states`); every later pass reads that file a block at a
time. The robust scales of the residual outlier tests and the Nyström tuning use a uniform random
subset of at most ``sample_rows`` rows (in time order; every row when there are fewer); the
rigid-body fits, the scores and the replays see every row. With one block and one sample (at most
20 000 rows by default) this is the whole-log job (``docs/benchmarks/retraining-streaming.md``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lifelong_learning.core.files import MAX_URDF_BYTES, read_regular_text
from lifelong_learning.dynamics.acceleration import estimate_accelerations
from lifelong_learning.dynamics.regressor import kinematic_difference
from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics
from lifelong_learning.io.bags import MISSING_JOINT, BagError, JointStateStream, read_joint_states
from lifelong_learning.nystrom.export import replay_inverse_dynamics, residual_data
from lifelong_learning.retraining.job import TuningJob
from lifelong_learning.retraining.joint_states import (
    JointStateLog,
    JointStateReader,
    changes,
    flag_outliers,
    sampled,
)
from lifelong_learning.retraining.promotion import Decision, gate_inverse_dynamics

#: a bag of several whose training rows the rigid-body model of all bags predicts with a torque
#: nMSE above this ratio times that of a model of the bag alone, and above it by this much, is
#: reported (:meth:`InverseDynamics._bag_consistency`). Two 10 s bags of the simulated Panda: of
#: one robot, 0.0019 vs 0.0019 and 0.0008 vs 0.0009; a second bag of a Panda with link masses and
#: inertias x 1.2, 0.41 vs 0.0019 and 0.20 vs 0.0008; with a 1 kg payload, 0.29 vs 0.0020 and
#: 0.21 vs 0.0007 (6 s bags: test/retraining/test_bad_input.py)
BAG_MISMATCH_RATIO = 3.0
BAG_MISMATCH_NMSE = 0.02
#: below this RMS velocity [rad/s] a joint "barely moves": its friction cannot be identified
STILL_RMS_VELOCITY = 0.01


@dataclass
class Fit:
    """What fitting produces: the split of the rows (training ``[0, split)``, test ``[split,
    end)``, the gate's held-out ``[end, n)``) and the samples kept of each part, the rigid-body model
    fitted on the training part, the residual rows to tune on and the test part's baselines."""

    split: int
    end: int
    n_train: int
    n_test: int
    n_gate: int
    parametric: SemiparametricInverseDynamics
    X_tr: np.ndarray
    Y_tr: np.ndarray
    groups: list[int] | None
    var_te: np.ndarray
    baselines: dict[str, float]
    warnings: list[str]


class InverseDynamics:
    """Joint states: see the module docstring. Its state: the job's settings, :attr:`log` (what
    reading produced) and :attr:`fit` (what fitting produced)."""

    metric = "test nMSE of the torques (mean over joints)"

    def __init__(self, job: TuningJob, check: Callable[[], None] | None = None) -> None:
        self.check = check
        self.warm = SemiparametricInverseDynamics.load(job.init) if job.init else None
        self.urdf = self._urdf(job)
        self.sample_rows, self.seed = int(job.sample_rows), job.seed
        self.forgetting = tuple(job.forgetting)
        self.lam_scales = tuple(float(s) for s in job.residual_regularization)
        self.replay_block = min(int(job.replay_block), int(job.block))
        self.k = float(job.outlier_k)
        self._exported: tuple[Any, dict[str, Any]] | None = None  # the model and choice of export()
        names = self.warm.joint_names if self.warm is not None else None
        stream = JointStateStream(
            job.bags,
            topic=job.topic,
            joint_names=names,
            block=int(job.block),
            max_message_bytes=int(job.max_message_bytes),
        )
        reader = JointStateReader(
            self.urdf, int(job.block), float(job.limit_margin), self.k, float(job.outlier_floor), check
        )
        self.log: JointStateLog = reader.read(stream)  # its store deleted if reading fails
        self.samples_read = self.log.store.n  # usable joint states
        try:
            self.fit = self._fit(job)
        except BaseException:
            self.close()
            raise

    # the Task's figures: those of the fit and of the log
    n_train = property(lambda self: self.fit.n_train)
    n_test = property(lambda self: self.fit.n_test)
    X_tr = property(lambda self: self.fit.X_tr)
    Y_tr = property(lambda self: self.fit.Y_tr)
    groups = property(lambda self: self.fit.groups)
    baselines = property(lambda self: self.fit.baselines)
    warnings = property(lambda self: self.fit.warnings)
    skipped = property(lambda self: self.log.skipped)

    def close(self) -> None:
        """Delete the temporary file of the rows."""
        self.log.store.close()

    def _check(self) -> None:
        if self.check is not None:
            self.check()

    # ------------------------------------------------------------------ fitting
    def _fit(self, job: TuningJob) -> Fit:
        """The chronological split, the rigid-body fit on the training part without its residual
        outliers, the rows to tune on, the test part's outliers and the baselines."""
        store = self.log.store
        # the most recent rows are the promotion gate's: never fitted, tuned or selected on (at
        # most sample_rows of them, so that the gate's data stay in memory)
        n_gate = (
            0 if job.validation_bags else min(round(float(job.holdout_fraction) * store.n), self.sample_rows)
        )
        end = store.n - n_gate
        n_test = max(1, round(job.test_fraction * end))
        if end - n_test < 4:
            raise ValueError(f"too few samples ({end}) for a test split of {job.test_fraction}")
        split = end - n_test
        par, own = self._parametric(0, split, kept_only=False, per_bag=len(set(store.bag_of_start)) > 1)
        n_out = self._flag_outliers(par, 0, split, "training part")
        n_train = split - n_out
        mismatched = self._bag_consistency(par, own, split) if len(own) > 1 else []
        if n_out:  # one bad sample also bends the rigid-body fit: refit without the outliers
            if n_train < 4:
                raise BagError("too few samples left in the training part after removing residual outliers")
            par, _ = self._parametric(0, split, kept_only=True)
        self._check()
        # the bags as holdout-bags' folds, unless they are not samples of one plant (a payload
        # grasped between them): then no bag predicts another, and the most recent rows are held out
        X_tr, Y_tr, groups = self._tuning_rows(par, split, n_train, by_bag=not mismatched)
        n_test -= self._flag_outliers(par, split, end, "test part")
        n_gate = n_gate - self._flag_outliers(par, end, store.n, "held-out part") if n_gate else 0
        var_te, baselines = self._baselines(par, split, end, n_test)
        return Fit(
            split=split,
            end=end,
            n_train=n_train,
            n_test=n_test,
            n_gate=n_gate,
            parametric=par,
            X_tr=X_tr,
            Y_tr=Y_tr,
            groups=groups,
            var_te=var_te,
            baselines=baselines,
            warnings=self._warnings(par) + mismatched,
        )

    def _parametric(
        self, a: int, b: int, kept_only: bool, per_bag: bool = False
    ) -> tuple[Any, dict[int, Any]]:
        """The rigid-body model with friction fitted on rows ``a`` to ``b`` (from the URDF prior,
        or from the model to continue from) and, with ``per_bag``, one fitted on each bag's rows
        alone (for :meth:`_bag_consistency`)."""
        store = self.log.store

        def new() -> SemiparametricInverseDynamics:
            model = SemiparametricInverseDynamics(self.urdf, self.log.joint_names, mode="parametric")
            if self.warm is not None:
                model.continue_from(self.warm)
            return model

        par = new()
        own: dict[int, SemiparametricInverseDynamics] = {}
        for rows in store.blocks(a, b, kept_only):
            self._check()
            par.update(*rows.arrays)
            if per_bag:
                bag = store.bag_of(rows.index)
                for k in np.unique(bag):
                    own.setdefault(int(k), new()).update(*rows.take(bag == k).arrays)
        return par, own

    def _flag_outliers(self, par: Any, a: int, b: int, part: str) -> int:
        return flag_outliers(self.log, par, a, b, self.k, part, self.sample_rows, self.seed)

    def _tuning_rows(
        self, par: Any, split: int, n_train: int, by_bag: bool
    ) -> tuple[np.ndarray, np.ndarray, list[int] | None]:
        """The residual data (:func:`~lifelong_learning.nystrom.export.residual_data`) of a sample
        of the training rows kept and, with ``by_bag``, where each bag starts among them."""
        store = self.log.store
        X, Y, index = [], [], []
        for rows in sampled(store, 0, split, n_train, True, self.sample_rows, self.seed):
            x, y = residual_data(par, *rows.arrays)
            X.append(x)
            Y.append(y)
            index.append(rows.index)
        bags = store.bag_of(np.concatenate(index))
        return np.vstack(X), np.vstack(Y), changes(bags).tolist() if by_bag else None

    def _bag_consistency(self, par: Any, own: dict[int, Any], split: int) -> list[str]:
        """Warnings for the bags whose training rows the rigid-body model of all bags explains
        much worse than a rigid-body model of that bag alone (torque nMSE, rows kept): bags of
        another robot with the same joint names, or of the same robot with another payload or a
        miscalibrated sensor, which one model of them all cannot fit."""
        store, d = self.log.store, len(self.log.joint_names)
        moments = {k: _Moments(d) for k in own}
        sse = {k: np.zeros((2, d)) for k in own}
        for rows in store.blocks(0, split, kept_only=True):
            bag = store.bag_of(rows.index)
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
                    f"bag {self.log.bags[k]} does not fit one rigid-body model with the other bags (torque "
                    f"nMSE of the model of all bags on it {together:.3g}, of its own {alone:.3g}): a bag of "
                    "another robot with the same joint names, or of this one with another payload or sensor "
                    "calibration? The model learns the bags in order and, with forgetting, follows the most "
                    "recent ones; holdout-bags validates on the most recent rows instead of each bag; leave "
                    "out bags of another robot"
                )
        return out

    def _baselines(self, par: Any, split: int, end: int, n_test: int) -> tuple[np.ndarray, dict[str, float]]:
        """The test part's torque variance (kept rows), and the nMSE there of RNEA and of the rigid
        body with friction."""
        d = len(self.log.joint_names)
        moments, sse_rnea, sse_par = _Moments(d), np.zeros(d), np.zeros(d)
        for rows in self.log.store.blocks(split, end, kept_only=True):
            moments.add(rows.tau)
            sse_rnea += ((rows.tau - par.regressor.rnea(rows.q, rows.qd, rows.qdd)) ** 2).sum(axis=0)
            sse_par += ((rows.tau - par.predict(rows.q, rows.qd, rows.qdd)) ** 2).sum(axis=0)
        var_te = moments.var  # nMSE of torques, not of residuals
        return var_te, {
            "RNEA (URDF)": _nmse(sse_rnea, n_test, var_te),
            "rigid body + friction (RLS)": _nmse(sse_par, n_test, var_te),
        }

    def _urdf(self, job: TuningJob) -> str:
        """The URDF of ``job`` or, without one, of the model to continue from (it embeds its URDF)."""
        urdf = read_regular_text(Path(str(job.urdf)).expanduser(), MAX_URDF_BYTES) if job.urdf else None
        if self.warm is None:
            assert urdf is not None
            return urdf
        if urdf is None:
            return self.warm.regressor.urdf
        difference = kinematic_difference(urdf, self.warm.regressor.urdf)
        if difference:
            raise ValueError(f"the model to continue from is for another robot than {job.urdf}: {difference}")
        return urdf

    def _warnings(self, par: Any) -> list[str]:
        """Bad input the job could still learn from, in words: joints that barely move, a short
        log, joint states that lacked a modelled joint, and joints of the URDF the bags move but
        the model does not take (they lacked in the message the joints were taken from)."""
        log = self.log
        n, out, names = log.store.n, [], log.joint_names
        rms = np.sqrt(log.sum_qd2 / n)
        still = [name for name, v in zip(names, rms, strict=True) if v < STILL_RMS_VELOCITY]
        if len(still) == len(names):
            out.append(
                f"no joint moves (RMS velocity < {STILL_RMS_VELOCITY} rad/s on every joint): these bags "
                "hold static torques only; friction, inertia and the residual's dependence on motion are not "
                "identifiable from them, so the model is no better than the URDF for motion; log motion"
            )
        elif still:
            out.append(
                f"joints {still} barely move (RMS velocity < {STILL_RMS_VELOCITY} rad/s): their friction "
                "and inertia are not identifiable from these bags; the model keeps the URDF there"
            )
        if n < 500:
            out.append(f"only {n} samples: the tuned model may not generalize; log more motion")
        missing = log.skipped.get(MISSING_JOINT, 0)
        if missing:
            out.append(
                f"{missing} joint state(s) lacked one of the modelled joints {names} and were "
                f"skipped (first: {log.skipped_detail.get(MISSING_JOINT, '')})"
            )
        unmodelled = {
            j: [b for b, seen in zip(log.bags, log.bag_joints, strict=True) if j in seen]
            for j in par.regressor.locked_joints
        }
        unmodelled = {j: bags for j, bags in unmodelled.items() if bags}
        if unmodelled:
            out.append(
                f"joints {sorted(unmodelled)} of the URDF are in the joint states of "
                f"{sorted({b for bags in unmodelled.values() for b in bags})} but not modelled (the model's "
                f"joints {names} are those of the first joint state, or of the model to continue "
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
        store, fit = self.log.store, self.fit
        blocks = (r.arrays for r in store.blocks(0, fit.split, kept_only=True))
        n = fit.n_train
        if path is not None:
            end = store.n if everything else fit.end
            test = (r.arrays for r in store.blocks(fit.split, end, kept_only=True))
            blocks, n = itertools.chain(blocks, test), n + fit.n_test + (fit.n_gate if everything else 0)
        return replay_inverse_dynamics(
            model,
            self.urdf,
            self.log.joint_names,
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
        sp = self._replay(model, forgetting, lam_scale)
        sse = np.zeros(len(self.log.joint_names))
        for rows in self.log.store.blocks(self.fit.split, self.fit.end, kept_only=True):
            sse += ((rows.tau - sp.predict(rows.q, rows.qd, rows.qdd)) ** 2).sum(axis=0)
        value = _nmse(sse, self.fit.n_test, self.fit.var_te)
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
        if self._exported is None:
            raise RuntimeError("learn_held_out() before export(): no exported model to replay")
        if not self.fit.n_gate:
            return 0
        model, choice = self._exported
        self._replay(model, choice["forgetting"], choice["residual_lam_scale"], path=out, everything=True)
        return self.fit.n_gate

    def _validation_rows(self, job: TuningJob) -> list[tuple[np.ndarray, ...]]:
        """``(q, q̇, q̈, τ)`` of the validation bags' joint states within the limits (q̈ by the same
        filter, per bag)."""
        if not job.validation_bags:
            return []
        js = read_joint_states(
            job.validation_bags,
            topic=job.topic,
            joint_names=self.log.joint_names,
            max_message_bytes=int(job.max_message_bytes),
        )
        for reason, n in js.skipped.items():
            key = f"{reason} (validation bags)"
            self.log.skipped[key] = self.log.skipped.get(key, 0) + n
        qdd = estimate_accelerations(js.t, js.qd, starts=js.starts)
        ok, _ = self.log.gate.mask(js.q, js.qd, js.tau)
        return [(js.q[ok], js.qd[ok], qdd[ok], js.tau[ok])]

    def promotion(self, out: Path, job: TuningJob) -> Decision:
        """The gate: the exported model and the serving one (or RNEA) on the validation bags when
        given, else on the most recent rows of the bags, which nothing was fitted on."""
        store = self.log.store
        parts = [r.arrays for r in store.blocks(self.fit.end, store.n, kept_only=True)]
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
