"""What one predict-then-learn pass of the recursive engine gives: the prequential errors, the
batch objective they add up to (the Zhdanov–Kalnishkan identity), and every prefix's ridge model.

The identity (Zhdanov & Kalnishkan 2013, Theorem 1; Theorem 2 of Jun, Cutkosky, Orabona's KTR³
poster, ``../shared/seeds/003_…``), in the engine's terms: rows ``z_t`` with targets ``u_t``, the
engine's matrix ``A_t = λI + Σ_{s≤t} z_s z_sᵀ`` and its prediction ``ŷ_t = W_{t−1}ᵀz_t`` made
before it learns ``z_t``; then, exactly,

    Σ_t ‖ŷ_t − u_t‖² / (1 + z_tᵀA_{t−1}⁻¹z_t)  =  min_W λ‖W‖² + Σ_t ‖Wᵀz_t − u_t‖²

(per output, hence summed over outputs). In the poster's kernel form ``d_t/(λn) = z_tᵀA_{t−1}⁻¹z_t``
with its ``λn`` the engine's ``λ``. A learner that predicts before it learns, as every node here
does, therefore knows its batch objective sample by sample: :func:`prequential_identity` gives
both sides. The weight ``1/(1 + z_tᵀA_{t−1}⁻¹z_t)`` is the ratio of the leave-one-out residual to
the prequential one (``u_t − W_tᵀz_t = (u_t − ŷ_t)/(1 + z_tᵀA_{t−1}⁻¹z_t)``).

The same pass gives the ridge model of every prefix ``W_t = A_t⁻¹Σ_{s≤t} z_s u_sᵀ``
(:func:`ridge_prefixes`): what kernel truncated randomized ridge regression picks one of
(:class:`~lifelong_learning.nystrom.ktr3.KTR3`). Without forgetting (with it the engine is not
the batch ridge of its rows).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lifelong_learning.core.checks import as_rows, same_rows
from lifelong_learning.learners.recursive_rls import RecursiveRLS


@dataclass(frozen=True)
class PrequentialIdentity:
    """Both sides of the identity (module docstring) for ``n`` rows, and what they are made of.

    Attributes:
        weighted_online_loss: ``Σ_t ‖ŷ_t − u_t‖²/(1 + z_tᵀA_{t−1}⁻¹z_t)``.
        batch_objective: ``min_W λ‖W‖² + Σ_t ‖Wᵀz_t − u_t‖²``, evaluated at the engine's final ``W``.
        online_loss: ``Σ_t ‖ŷ_t − u_t‖²``, the plain prequential loss (never below the weighted one).
        leverages: ``z_tᵀA_{t−1}⁻¹z_t`` per row, ``(n,)``.
        errors: ``ŷ_t − u_t`` per row, ``(n, c)``.
    """

    weighted_online_loss: float
    batch_objective: float
    online_loss: float
    leverages: np.ndarray
    errors: np.ndarray

    @property
    def relative_gap(self) -> float:
        """``|weighted − batch| / batch`` (0 to rounding; 0 when both are 0)."""
        scale = max(abs(self.batch_objective), np.finfo(np.float64).tiny)
        return abs(self.weighted_online_loss - self.batch_objective) / scale


def _fresh(engine: RecursiveRLS) -> RecursiveRLS:
    if engine.forgetting != 1.0:
        raise ValueError("the identity holds for an engine without forgetting (forgetting = 1)")
    return engine


def predict_then_learn(engine: RecursiveRLS, Z: Any, U: Any) -> Iterator[tuple[int, np.ndarray, float]]:
    """For each row in order: ``(t, ŷ_t, z_tᵀA_{t−1}⁻¹z_t)`` computed before the engine learns
    ``(z_t, u_t)``, which it then does (``t`` counts from 1). O(d² + dc) a row. The engine must not
    forget (ValueError); rows are checked before any is learned."""
    _fresh(engine)
    Z2 = as_rows(Z, engine.n_features, "Z")
    U2 = as_rows(U, engine.n_outputs, "U")
    same_rows({"Z": Z2, "U": U2})
    for t in range(Z2.shape[0]):
        z = Z2[t : t + 1]
        v = engine.solve(z)  # A_{t−1}⁻¹z_t
        yield t + 1, (v.T @ engine.rhs)[0], float(z[0] @ v[:, 0])
        engine.update(z, U2[t : t + 1])


def prequential_identity(Z: Any, U: Any, lam: float) -> PrequentialIdentity:
    """Both sides of the identity for rows ``Z`` ``(n, d)`` and targets ``U`` (``(n,)`` or ``(n, c)``)
    learned in order by a new engine with regularization ``lam`` (ValueError for bad rows or ``lam``)."""
    Z2 = as_rows(Z, None, "Z")
    U2 = np.asarray(U, dtype=np.float64)
    U2 = as_rows(U2[:, None] if U2.ndim == 1 else U2, None, "U")
    engine = RecursiveRLS(Z2.shape[1], U2.shape[1], lam=lam)
    n = Z2.shape[0]
    errors, leverages = np.empty((n, U2.shape[1])), np.empty(n)
    for t, prediction, leverage in predict_then_learn(engine, Z2, U2):
        errors[t - 1], leverages[t - 1] = prediction - U2[t - 1], leverage
    W = engine.weights
    batch = lam * float((W * W).sum()) + float(((Z2 @ W - U2) ** 2).sum())
    squared = (errors**2).sum(1)
    return PrequentialIdentity(
        weighted_online_loss=float((squared / (1.0 + leverages)).sum()),
        batch_objective=batch,
        online_loss=float(squared.sum()),
        leverages=leverages,
        errors=errors,
    )


def ridge_prefixes(engine: RecursiveRLS, Z: Any, U: Any, prefixes: Sequence[int]) -> dict[int, np.ndarray]:
    """The weights ``W_t`` of the ridge regression on the first ``t`` rows, for each ``t`` in
    ``prefixes`` (``0 ≤ t ≤ n``; ``W_0 = 0``), from one pass of ``engine`` (new, without forgetting)
    over the rows up to the largest ``t``: ``W_t = (λI + Z_tᵀZ_t)⁻¹Z_tᵀU_t``. ValueError for a prefix
    outside ``[0, n]``."""
    _fresh(engine)
    Z2 = as_rows(Z, engine.n_features, "Z")
    U2 = as_rows(U, engine.n_outputs, "U")
    same_rows({"Z": Z2, "U": U2})
    wanted = sorted({int(t) for t in prefixes})
    if wanted and (wanted[0] < 0 or wanted[-1] > Z2.shape[0]):
        raise ValueError(f"prefixes must be in [0, {Z2.shape[0]}], got {list(prefixes)}")
    out: dict[int, np.ndarray] = {}
    done = 0
    for t in wanted:
        if t > done:
            engine.update(Z2[done:t], U2[done:t])
            done = t
        out[t] = engine.weights.copy()
    return out


__all__ = ["PrequentialIdentity", "predict_then_learn", "prequential_identity", "ridge_prefixes"]
