"""Early stopping for the hyperparameter tuning loop (the stopping rule of Meanti et al., §5).

Fed one objective value per epoch, :class:`EarlyStopping` keeps the history of the finite
values, the best (lowest) value and a detached copy of the parameters at it, and says when to
stop:

- on a non-finite value (NaN or ±Inf; it is not added to the history), or
- when ``patience`` epochs have had a value above the previous epoch's value since the last
  new best (a new best resets the count; an epoch that goes down without reaching the best
  neither counts nor resets it).

The caller then uses :attr:`EarlyStopping.best`, not the last parameters. Importing this module
loads no torch (the job's declaration of ``patience`` reads :data:`DEFAULT_PATIENCE` from here).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

#: rises of the objective since its best before the tuning stops (Meanti et al., §5)
DEFAULT_PATIENCE = 5


class EarlyStopping:
    """Best-value tracker with the stopping rule in the module docstring.

    Attributes:
        patience: rises (since the last best) that stop the loop.
        history: the finite values seen, in order.
        best_value: the lowest of them (``inf`` before the first).
        best: detached copies of the parameters passed with ``best_value`` (``None`` before).
        rises: rises counted since the last best.
        stopped: whether :meth:`update` has asked to stop.
    """

    def __init__(self, patience: int):
        self.patience = patience
        self.history: list[float] = []
        self.best_value = math.inf
        self.best: tuple[torch.Tensor, ...] | None = None
        self.rises = 0
        self.stopped = False

    def update(self, value: float, params: Sequence[torch.Tensor]) -> bool:
        """Record this epoch's ``value`` at ``params``; True when the loop should stop now."""
        if not math.isfinite(value):
            self.stopped = True
            return True
        self.history.append(value)
        if value < self.best_value:
            self.best_value = value
            self.best = tuple(p.detach().clone() for p in params)
            self.rises = 0
        elif len(self.history) > 1 and value > self.history[-2]:
            self.rises += 1
            if self.rises >= self.patience:
                self.stopped = True
                return True
        return False


__all__ = ["DEFAULT_PATIENCE", "EarlyStopping"]
