"""The batch objective a learner reports next to its prequential error (``~/learning_metrics``): what
its model would have scored had it been fitted on everything it learned at once.

For the engine's rows ``z_t`` and targets ``u_t`` (per output ``j``), the regularized batch objective
``J_j = min_w λ‖w‖² + Σ_t (wᵀz_t − u_tj)²`` equals, by the Zhdanov–Kalnishkan identity
(:mod:`~lifelong_learning.learners.prequential_identity`), the engine's own online errors, each
divided by ``1 + z_tᵀA_{t−1}⁻¹z_t``: the prequential loss with the share the model could not have
known taken out. The engine reads it off its state (:meth:`RecursiveRLS.batch_objective
<lifelong_learning.learners.recursive_rls.RecursiveRLS.batch_objective>`); here it is put on the
scale of an nMSE, divided by the spread of the targets, ``Σ_t (u_tj − ū_j)²`` (forgetting-weighted
like the rows):

    batch nMSE_j = J_j / Σ_t (u_tj − ū_j)²,

0 for a perfect fit without penalty, 1 for the mean's error. Which engine, and its targets:

- incremental RLSC (object_recognition): the engine of the λ in use, targets the one-vs-all 0/1
  indicators, so ``Σu² = Σu = k_j``, the training samples of class ``j`` (the counts it keeps);
- semiparametric inverse dynamics: the residual's engine (targets: the torque minus the rigid-body
  part's prediction when it learned), per joint; without a residual (parametric mode) the rigid-body
  part's one engine fits every joint with one parameter vector: one figure for all joints;
- a model whose engine learned rows by their sums alone, or was saved without its targets' moments,
  has none (undefined, with the reason).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.learners.rlsc import IncrementalRLSC

#: why a batch objective is undefined
NOT_KEPT = "the engine does not know its targets' squares (rows added by their sums, or an older file)"
NO_SPREAD = "the targets did not vary: no scale to normalize the objective by"
FEW_ROWS = "fewer than 2 samples learned"
NOT_SOLVED = "the weights are not solved since the model was loaded (nothing learned yet)"
ONE_FOR_ALL = "the rigid-body part fits every joint with one parameter vector: its figure is the mean"


@dataclass(frozen=True)
class BatchObjective:
    """Per output: the batch nMSE (module docstring), NaN where undefined; their mean (or the one
    figure of a model that has one for all outputs); the reasons, by output index."""

    values: np.ndarray
    mean: float
    undefined: tuple[tuple[int, str], ...] = ()


def normalized(objective: Any, weight: float, total: Any, squares: Any) -> BatchObjective:
    """``J_j / (Σu² − (Σu)²/n)`` per output, from the objective and the targets' (weighted) count
    ``weight``, sums ``total`` and sums of squares ``squares``."""
    J = np.asarray(objective, dtype=np.float64)
    s1, s2 = np.asarray(total, dtype=np.float64), np.asarray(squares, dtype=np.float64)
    values = np.full(J.shape, np.nan)
    if not weight >= 2.0 - 1e-12:
        return BatchObjective(values, math.nan, tuple((j, FEW_ROWS) for j in range(J.size)))
    spread = s2 - s1 * s1 / weight
    ok = (spread > 1e-12 * np.maximum(s2, 1e-300)) & np.isfinite(J)
    values[ok] = J[ok] / spread[ok]
    undefined = tuple((int(j), NO_SPREAD if np.isfinite(J[j]) else NOT_KEPT) for j in np.flatnonzero(~ok))
    return BatchObjective(values, float(values[ok].mean()) if ok.any() else math.nan, undefined)


def engine_objective(engine: Any, solve: bool = True) -> BatchObjective:
    """Of a :class:`RecursiveRLS` (or an engine that serves with one, ``.engine``: auto forgetting) from
    the moments it keeps. ``solve``: solve the weights if they are not (O(d²c)); else undefined then."""
    rls: RecursiveRLS = getattr(engine, "engine", engine)
    moments = rls.target_moments()
    if moments is None:
        return BatchObjective(
            np.full(rls.n_outputs, np.nan), math.nan, tuple((j, NOT_KEPT) for j in range(rls.n_outputs))
        )
    if not solve and not rls.weights_solved:
        return BatchObjective(
            np.full(rls.n_outputs, np.nan), math.nan, tuple((j, NOT_SOLVED) for j in range(rls.n_outputs))
        )
    return normalized(rls.batch_objective(), *moments)


def classifier_objective(model: IncrementalRLSC) -> BatchObjective:
    """Of an :class:`~lifelong_learning.learners.rlsc.IncrementalRLSC`, per class (module docstring)."""
    counts = np.asarray(model.class_counts_, dtype=np.float64)
    engine = serving_engine(model)
    return normalized(engine.batch_objective(target_sq=counts), float(counts.sum()), counts, counts)


def serving_engine(model: IncrementalRLSC) -> RecursiveRLS:
    """The engine of the λ in use: the one :meth:`IncrementalRLSC.decision_function` predicts with
    (read as that method reads it)."""
    engines = model._engines
    return engines[0] if model.shares_factor else engines[model._select().lambda_index]


def model_objective(model: Any, solve: bool = True) -> BatchObjective | None:
    """Of a learner's model: a classifier's (:func:`classifier_objective`), a semiparametric model's
    residual, or its rigid-body part's one figure (module docstring); None for a model with neither."""
    if isinstance(model, IncrementalRLSC):
        return classifier_objective(model) if len(model.class_counts_) else None
    residual, parametric = getattr(model, "residual", None), getattr(model, "parametric", None)
    if residual is not None:
        return engine_objective(residual, solve)
    if parametric is None:
        return None
    one = engine_objective(parametric, solve)
    n = len(getattr(model, "joint_names", ())) or 1
    why = ONE_FOR_ALL if math.isfinite(one.mean) else one.undefined[0][1]
    return BatchObjective(np.full(n, np.nan), one.mean, tuple((j, why) for j in range(n)))


__all__ = ["BatchObjective", "classifier_objective", "engine_objective", "model_objective", "normalized"]
