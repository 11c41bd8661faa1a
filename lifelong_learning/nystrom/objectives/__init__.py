"""Hyperparameter objectives for Nyström KRR (Meanti et al., §3 and §4), one small class each on a
thin base (:mod:`~lifelong_learning.nystrom.objectives.base`), found by name here.

- the sums objectives (:mod:`~lifelong_learning.nystrom.objectives.complexity`): ``"proposed"``
  (eq. 9), ``"gcv"`` (eq. 5), ``"creg"`` (eq. 6), ``"sgpr"`` (Titsias' bound); exact, functions
  of the data's sums, so also computed across processes (:func:`sums_step`);
- the hold-out objectives (:mod:`~lifelong_learning.nystrom.objectives.holdout`): ``"holdout"``,
  ``"holdout-recent"``, ``"holdout-bags"``; exact;
- ``"proposed-stochastic"`` (:mod:`~lifelong_learning.nystrom.objectives.stochastic`): eq. 9 by
  Hutchinson traces and CG, for large ``n``, with its gradient written by hand.

A new objective is a class in one of these modules (or a module of its own) and a line in
:data:`OBJECTIVE_CLASSES`' tuple below; the names, the job's choices and the tuner follow.
"""

from __future__ import annotations

import torch

from lifelong_learning.nystrom.distributed import Group
from lifelong_learning.nystrom.hyperparameters import median_heuristic
from lifelong_learning.nystrom.kernels import DEFAULT_MEMORY_BUDGET
from lifelong_learning.nystrom.objectives.base import (
    Objective,
    ObjectiveSettings,
    Step,
    SumsObjective,
)
from lifelong_learning.nystrom.objectives.complexity import GCV, SGPR, CReg, Proposed
from lifelong_learning.nystrom.objectives.holdout import (
    MAX_FOLDS,
    Holdout,
    HoldoutBags,
    HoldoutRecent,
    fold_bounds,
)
from lifelong_learning.nystrom.objectives.stochastic import ProposedStochastic, StochasticProposed
from lifelong_learning.nystrom.sums import KernelSums

#: every objective by name, in the order the job's help lists them
OBJECTIVE_CLASSES: dict[str, type[Objective]] = {
    cls.name: cls
    for cls in (Proposed, GCV, CReg, SGPR, Holdout, HoldoutRecent, HoldoutBags, ProposedStochastic)
}
EXACT_OBJECTIVES = tuple(name for name, cls in OBJECTIVE_CLASSES.items() if cls.exact)
OBJECTIVES = (*EXACT_OBJECTIVES, *(name for name, cls in OBJECTIVE_CLASSES.items() if not cls.exact))
#: the objectives that depend on the data only through the sums of
#: :class:`~lifelong_learning.nystrom.sums.KernelSums`: they can be computed across processes
#: (:func:`sums_step`). The hold-out ones cannot (their split is by row position: the validation
#: rows are the most recent, or a shuffled subset, or whole recordings, of the one global row
#: order), nor ``"proposed-stochastic"`` (its probe vectors are drawn per row).
SUMS_OBJECTIVES = tuple(name for name, cls in OBJECTIVE_CLASSES.items() if cls.from_sums)


def objective_named(name: str) -> Objective:
    """The objective called ``name`` (ValueError naming the known ones otherwise)."""
    try:
        return OBJECTIVE_CLASSES[name]()
    except (KeyError, TypeError):
        raise ValueError(f"unknown objective {name!r}; known: {OBJECTIVES}") from None


def _sums_objective_named(name: str, why: str) -> SumsObjective:
    objective = OBJECTIVE_CLASSES.get(name)
    if objective is None or not issubclass(objective, SumsObjective):
        raise ValueError(f"objective {name!r} {why}; those are {SUMS_OBJECTIVES}")
    return objective()


def exact_objective(
    name: str,
    X: torch.Tensor,
    Y: torch.Tensor,
    Z: torch.Tensor,
    ls: torch.Tensor,
    lam: torch.Tensor,
    holdout_fraction: float = 0.2,
    groups: list[int] | None = None,
) -> torch.Tensor:
    """Value of the exact objective ``name`` (differentiable in ``Z``, ``ls``, ``lam``);
    ``groups``: the first row of each recording, for ``"holdout-bags"`` (ignored by the others)."""
    if name not in EXACT_OBJECTIVES:
        raise ValueError(f"unknown objective {name!r}; known: {OBJECTIVES}")
    settings = ObjectiveSettings(holdout_fraction=holdout_fraction, groups=groups)
    return objective_named(name).value(X, Y, Z, ls, lam, settings)


def sums_objective(
    name: str, sums: KernelSums, Z: torch.Tensor, ls: torch.Tensor, lam: torch.Tensor
) -> torch.Tensor:
    """Value of the objective ``name`` (one of :data:`SUMS_OBJECTIVES`) from the data's sums
    (differentiable in the sums, ``Z``, ``ls`` and ``lam``)."""
    return _sums_objective_named(name, "is not a function of the data's sums").of_sums(sums, Z, ls, lam)


def sums_step(
    name: str, X: torch.Tensor, Y: torch.Tensor, group: Group, memory_budget: int = DEFAULT_MEMORY_BUDGET
) -> Step:
    """The objective ``name`` (one of :data:`SUMS_OBJECTIVES`) over the rows of every process of
    ``group``, this process holding ``X``, ``Y`` (:meth:`SumsObjective.step_across`)."""
    objective = _sums_objective_named(name, "cannot be computed across processes")
    return objective.step_across(X, Y, group, memory_budget)


__all__ = [
    "EXACT_OBJECTIVES",
    "GCV",
    "MAX_FOLDS",
    "OBJECTIVES",
    "OBJECTIVE_CLASSES",
    "SGPR",
    "SUMS_OBJECTIVES",
    "CReg",
    "Holdout",
    "HoldoutBags",
    "HoldoutRecent",
    "Objective",
    "ObjectiveSettings",
    "Proposed",
    "ProposedStochastic",
    "Step",
    "StochasticProposed",
    "SumsObjective",
    "exact_objective",
    "fold_bounds",
    "median_heuristic",
    "objective_named",
    "sums_objective",
    "sums_step",
]
