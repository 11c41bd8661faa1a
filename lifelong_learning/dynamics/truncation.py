"""The torques inverse dynamics answers, bounded as kernel truncated randomized ridge regression bounds
its predictor, and counted when that clips (Jun, Cutkosky, Orabona, ``../shared/seeds/003_…``,
Algorithm 1: the output ``T^Y ∘ f_k``, the ridge prediction truncated to the targets' range, which is
what gives its rate in the hard regime; :class:`~lifelong_learning.nystrom.ktr3.KTR3` offline):

- the residual's prediction ``Δτ̂_j`` to ``[min_t r_tj, max_t r_tj]``, the range of the residual
  targets ``r_t = τ_t − τ̂_P(t)`` its engine learned (:meth:`RecursiveRLS.target_range
  <lifelong_learning.learners.recursive_rls.RecursiveRLS.target_range>`): the nonparametric part
  is the ridge regression the truncation is for; the rigid-body part is a physical model, left as
  it is;
- the torque ``τ̂_P + Δτ̂`` to the URDF's effort limits ``±(1 + margin) τ_max`` (no limit, or 0:
  unbounded): no actuator gives more, and the node learns no effort beyond them (its
  ``limit_margin``: the same bound).

An engine that knows no range (nothing learned yet, rows added by their sums, a model saved before
engines kept it) bounds nothing. The bounded residual is ``clip(τ̂_P + clip(Δτ̂), ±τ_max) − τ̂_P``, so
that the answer stays the sum of its parts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class AnswerBounds:
    """The bounds a node applies to its answers (module docstring), and the entries clipped so far:
    to the residual targets' range, to the effort limits. ``enabled`` False: answers as they are."""

    enabled: bool = True
    margin: float = 0.0
    residual: int = 0
    effort: int = 0
    _limits: tuple[tuple[int, float], np.ndarray] | None = field(default=None, repr=False)

    def prepared(self, model: Any, prepared: Any) -> Any:
        """:func:`bounded`, when enabled (called with the model lock held: it counts)."""
        return bounded(model, prepared, self, self.margin) if self.enabled else prepared

    def parts(self, model: Any, parts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """:func:`bounded_parts`, when enabled."""
        return bounded_parts(model, parts, self, self.margin) if self.enabled else parts

    def limits(self, model: Any, margin: float) -> np.ndarray:
        """``(1 + margin) τ_max`` per joint (``inf`` without a limit), kept for the model's regressor."""
        key = (id(model.regressor), float(margin))
        if self._limits is None or self._limits[0] != key:
            limit = np.asarray(model.regressor.effort_limit, dtype=np.float64)
            self._limits = (key, np.where(limit > 0, (1.0 + margin) * limit, np.inf))
        return self._limits[1]

    def diagnostics(self) -> dict[str, str]:
        """``predictions truncated``, when enabled."""
        if not self.enabled:
            return {}
        clipped = f"{self.residual} to the residual's range, {self.effort} to the effort limits"
        return {"predictions truncated": clipped}


def bounded_residual(
    model: Any,
    tau_parametric: np.ndarray,
    tau_residual: np.ndarray,
    counts: AnswerBounds,
    margin: float = 0.0,
) -> np.ndarray:
    """``Δτ̂`` bounded (module docstring) for answers ``τ̂_P + Δτ̂`` of ``model`` (rows of joints),
    the effort limits widened by ``margin``; the entries clipped are added to ``counts``. The array
    given when nothing clips (the answering path's common case: comparisons only)."""
    out = tau_residual
    engine = getattr(model, "residual", None)
    engine = getattr(engine, "engine", engine)  # auto forgetting serves with one engine
    span = engine.target_range() if engine is not None else None
    if span is not None:
        below, above = out < span[0], out > span[1]
        if below.any() or above.any():
            counts.residual += int(below.sum() + above.sum())
            out = np.clip(out, span[0], span[1])
    limit = (
        counts.limits(model, margin)
        if counts.margin == margin
        else AnswerBounds(margin=margin).limits(model, margin)
    )
    torque = tau_parametric + out
    over = np.abs(torque) > limit
    if over.any():
        counts.effort += int(over.sum())
        out = np.where(over, np.clip(torque, -limit, limit) - tau_parametric, out)
    return out


def bounded(model: Any, prepared: Any, counts: AnswerBounds, margin: float = 0.0) -> Any:
    """``prepared`` (:class:`~lifelong_learning.dynamics.semiparametric.PreparedSamples`) with its
    answer bounded (a new one; the same when nothing clips)."""
    residual = bounded_residual(model, prepared.tau_parametric, prepared.tau_residual, counts, margin)
    return (
        prepared
        if residual is prepared.tau_residual
        else dataclasses.replace(prepared, tau_residual=residual)
    )


def bounded_parts(
    model: Any, parts: dict[str, np.ndarray], counts: AnswerBounds, margin: float = 0.0
) -> dict[str, np.ndarray]:
    """The parts of ``model.predict(..., return_parts=True)`` with the answer bounded."""
    residual = bounded_residual(model, parts["parametric"], parts["residual"], counts, margin)
    return {**parts, "residual": residual, "torque": parts["parametric"] + residual}


__all__ = ["AnswerBounds", "bounded", "bounded_parts", "bounded_residual"]
