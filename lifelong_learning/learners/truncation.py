"""Class scores of incremental RLSC bounded as kernel truncated randomized ridge regression bounds its
predictor (Jun, Cutkosky, Orabona, ``../shared/seeds/003_…``, Algorithm 1: ``T^Y ∘ f``, the ridge
prediction truncated to the range of the targets), counted when that clips.

The classifier's engine regresses each class's 0/1 indicator, so the data allow each plain score in
``[0, 1]``; its recoded score ``w_c s_c`` (``w_c``: the recoding of
:func:`~lifelong_learning.learners.model_selection.recoding`, thesis eq. 7.21) in ``[0, w_c]``. A
truncated score never changes the answer's class, taken from the scores before truncation (the
largest recoded score: its truncation can tie with others'), only the scores a node publishes and
the confidence calibrated on them (far from every taught class, where plain scores run outside
``[0, 1]``, the confidence falls towards that of a tie).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from lifelong_learning.learners.model_selection import recoding


@dataclass
class ScoreBounds:
    """The bounds a node applies to the scores it answers with (module docstring) and the scores
    clipped so far. ``enabled`` False: scores as they are."""

    enabled: bool = False
    clipped: int = 0

    def scores(self, model: Any, scores: np.ndarray) -> np.ndarray:
        """Recoded ``scores`` of ``model`` (one row, ``classes_`` order) bounded to ``[0, w_c]`` per
        class, when enabled (called with the model lock held: it counts)."""
        if not self.enabled:
            return scores
        upper = recoding(np.asarray(model.class_counts_), float(model.alpha_), model.recoding_shrink)
        out = np.clip(scores, 0.0, upper)
        self.clipped += int(np.count_nonzero(out != scores))
        return out

    def bound(self, model: Any) -> Callable[[np.ndarray], np.ndarray]:
        """:meth:`scores` of ``model``, as a function of the scores."""
        return lambda scores: self.scores(model, scores)

    def diagnostics(self) -> dict[str, str]:
        """``scores truncated``, when enabled."""
        return {"scores truncated": str(self.clipped)} if self.enabled else {}


__all__ = ["ScoreBounds"]
