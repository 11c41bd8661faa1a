"""The promotion gate: a retrained model serves only if it beats the serving one on data neither saw.

Both models are scored on the same held-out data: validation bags when the job has them (motion
recorded with learning off, new to both models), else the most recent part of the bags (never
used for the candidate's training, tuning or model selection). A serving model that learned online
has seen that part: a classifier is scored as if it had not, having unlearned exactly the held-out
samples it still keeps (``IncrementalRLSC.without``, learners/unlearning.py; its own held-out
samples among them too, which chose its λ and calibration). Those it keeps no more, and an
inverse-dynamics model, which keeps none, are scored as they are: there the gate errs towards
keeping what serves. The metric is the one the rest of the package reports for the task:

- inverse dynamics: the torque nMSE, mean over joints (:func:`~lifelong_learning.core.metrics.normalized_mse`,
  each joint's error over the variance of its measured torques);
- classification: the error rate (share of held-out samples whose predicted label is wrong).

Decision rule (:func:`decide`): the candidate is promoted when
``candidate_error <= (1 - margin) * serving_error`` and ``candidate_error < serving_error``, i.e.
when it is better by at least the relative ``margin`` (two equal scores, even two perfect ones,
show no gain worth a swap) (default 2 %: a difference smaller than that is within what two runs on the
same data differ by, and a swap must be worth its risk). With no serving model to compare with,
an inverse-dynamics candidate must beat the URDF's own rigid-body model (RNEA), which is what
the robot does without learning; a classifier is then promoted (there is nothing to be worse
than). ``force`` promotes anyway and is recorded as such.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from lifelong_learning.core.metrics import normalized_mse

#: the default relative margin by which a candidate must beat the serving model
DEFAULT_MARGIN = 0.02

NMSE = "nMSE"
ERROR_RATE = "error rate"


@dataclass(frozen=True)
class Decision:
    """The gate's verdict: both models' held-out errors, what was compared, whether it serves."""

    promoted: bool
    reason: str
    metric: str
    candidate_error: float
    serving_error: float | None
    serving: str  # what the candidate was compared with: a model file, "RNEA (URDF)" or "none"
    margin: float
    forced: bool
    n_samples: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the report's ``promotion`` entry)."""
        return asdict(self)


def torque_error(tau: np.ndarray, predicted: np.ndarray) -> float:
    """Mean-over-joints nMSE of ``predicted`` torques against measured ``tau`` (``inf`` if not finite)."""
    value = float(np.mean(normalized_mse(tau, predicted)))
    return value if np.isfinite(value) else float("inf")


def label_error(labels: np.ndarray, predicted: np.ndarray) -> float:
    """Share of ``predicted`` labels that differ from ``labels``."""
    labels, predicted = np.asarray(labels, dtype=object), np.asarray(predicted, dtype=object)
    if labels.size == 0:
        raise ValueError("no held-out sample to score")
    return float(np.mean(labels != predicted))


def decide(
    candidate_error: float,
    serving_error: float | None,
    *,
    metric: str,
    serving: str,
    n_samples: int,
    margin: float = DEFAULT_MARGIN,
    force: bool = False,
) -> Decision:
    """Promote the candidate when it is better than ``serving_error`` by the relative ``margin``.

    ``serving_error`` None: there is nothing to compare with (promoted). ``force``: promoted
    whatever the figures, and the reason says so.
    """
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin must be in [0, 1), got {margin}")
    if serving_error is None:
        better, reason = True, f"no serving model to compare with; candidate {metric} {candidate_error:.4g}"
    else:
        bound = (1.0 - margin) * serving_error
        # strictly lower as well: two perfect scores (0 and 0) show no gain worth a swap
        better = bool(
            np.isfinite(candidate_error) and candidate_error <= bound and candidate_error < serving_error
        )
        relation = "better" if better else "not better"
        reason = (
            f"candidate {metric} {candidate_error:.4g} is {relation} than {serving} "
            f"{serving_error:.4g} by the margin {margin:.0%} (needs <= {bound:.4g})"
        )
    if force and not better:
        reason = f"forced: {reason}"
    return Decision(
        promoted=better or force,
        reason=reason,
        metric=metric,
        candidate_error=float(candidate_error),
        serving_error=None if serving_error is None else float(serving_error),
        serving=serving,
        margin=float(margin),
        forced=bool(force and not better),
        n_samples=int(n_samples),
    )


def gate_inverse_dynamics(
    candidate: Any,
    serving_file: str | None,
    held_out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    *,
    margin: float = DEFAULT_MARGIN,
    force: bool = False,
) -> Decision:
    """Score a SemiparametricInverseDynamics ``candidate`` and the serving model (``serving_file``;
    None: the URDF's rigid-body model, RNEA) on ``held_out = (q, q̇, q̈, τ)``.

    Raises ValueError when the serving model is for other joints than the candidate.
    """
    from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics

    q, qd, qdd, tau = held_out
    if q.shape[0] == 0:
        raise ValueError("no held-out joint state to score the candidate on")
    mine = torque_error(tau, candidate.predict(q, qd, qdd))
    if serving_file is None:
        theirs, name = torque_error(tau, candidate.regressor.rnea(q, qd, qdd)), "RNEA (URDF)"
    else:
        serving = SemiparametricInverseDynamics.load(serving_file)
        if list(serving.joint_names) != list(candidate.joint_names):
            raise ValueError(
                f"the serving model {serving_file} models joints {list(serving.joint_names)}, "
                f"the candidate {list(candidate.joint_names)}"
            )
        theirs, name = torque_error(tau, serving.predict(q, qd, qdd)), f"serving model {serving_file}"
    return decide(mine, theirs, metric=NMSE, serving=name, n_samples=q.shape[0], margin=margin, force=force)


def gate_classifier(
    candidate: Any,
    serving_file: str | None,
    held_out: tuple[np.ndarray, np.ndarray],
    *,
    margin: float = DEFAULT_MARGIN,
    force: bool = False,
) -> Decision:
    """Score an IncrementalRLSC ``candidate`` and the serving classifier (``serving_file``; None:
    nothing to compare with; without the held-out samples it keeps: module docstring) on
    ``held_out = (X, labels)``: error rates."""
    from lifelong_learning.learners.rlsc import IncrementalRLSC

    X, labels = held_out
    mine = label_error(labels, candidate.predict(X))
    theirs, name = None, "none"
    if serving_file is not None:
        serving = IncrementalRLSC.load(serving_file)
        if serving.n_features_in_ not in (None, X.shape[1]):
            raise ValueError(
                f"the serving model {serving_file} takes {serving.n_features_in_} features, not {X.shape[1]}"
            )
        name = f"serving model {serving_file}"
        try:
            unseen, n = serving.without(X, labels)
        except ValueError as exc:  # no class left without them, or no exact downdate: as it is
            unseen, n = serving, 0
            name += f" (as it is: {exc})"
        else:
            name += f" without {n} of the {len(labels)} held-out samples (those it keeps)"
        theirs = label_error(labels, unseen.predict(X))
    return decide(
        mine, theirs, metric=ERROR_RATE, serving=name, n_samples=len(labels), margin=margin, force=force
    )
