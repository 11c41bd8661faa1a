"""The incremental RLSC's validation scores ``S = X_val A⁻¹ B``, brought up to date lazily.

Model selection (thesis §7.6.3, :mod:`~lifelong_learning.learners.model_selection`) scores the
held-out samples ``X_val`` (``V × d``) with the current model of every λ candidate:
``S = X_val W = X_val A⁻¹ B``. A training row changes ``A`` and ``B`` of every engine, but only the
choice of λ, α and the calibration read ``S``: so a training row is only remembered
(:class:`Pending`), and the scores are brought up to date when a selection is needed
(:func:`refreshed`), in one step for all the rows learned since.

**The update for ``m`` rows ``Z`` with one-hot targets ``E``** (``A' = A + ZᵀZ``,
``B' = B + ZᵀE``), with the *new* factor only (the old one was updated in place): let
``H = A'⁻¹Zᵀ`` (two triangular solves with ``m`` right-hand sides) and ``K = Z H``. From
``A⁻¹ = A'⁻¹ + H (I − K)⁻¹ Hᵀ`` (Woodbury, ``A = A' − ZᵀZ``) and ``B = B' − ZᵀE``:

    S' = S + (X_val H) (I − K)⁻¹ (E − Hᵀ B').

For one row this is the RLS update ``W' = W + A'⁻¹z (e_y − zᵀW)ᵀ`` (``(1 − k)⁻¹`` turns the residual
after the update into the residual before it). ``I − K = (I + Z A⁻¹ Zᵀ)⁻¹`` is positive definite;
its smallest eigenvalue is ``≥ 1/(1 + ‖z‖²/λ)``, so the scores lose at most ``log10(1 + ‖z‖²/λ)``
digits (about 4 for CNN features of norm 20 at λ = 0.1).

Rows of the buffer that are new or replaced since the last refresh (held out meanwhile) are scored
afresh, ``X_r A'⁻¹ B'``, in the same triangular solves. When ``m`` is large (a block learned at
once) solving the weights again is cheaper: ``S' = X_val A'⁻¹B'`` (2d²T + VdT against 2d²m + m³/3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lifelong_learning.learners.recursive_rls import RecursiveRLS

#: training rows remembered at most between two refreshes; beyond, the scores are recomputed from
#: the weights (2d²T + VdT), cheaper than the update for m rows (2d²m + m³/3) once m is about T
MAX_ROWS = 64


@dataclass(frozen=True)
class Pending:
    """What changed since the validation scores were last brought up to date (immutable: an update
    that fails leaves the previous one in place).

    ``rows``/``classes``: the training rows learned since (blocks of ``m_i × d``, their class
    columns), or None once solving the weights again is cheaper (``m > MAX_ROWS``: every score is
    recomputed then); ``fresh``: the buffer rows to score afresh (held out since, or replaced)."""

    rows: tuple[np.ndarray, ...] | None
    classes: tuple[np.ndarray, ...]
    fresh: frozenset[int]

    @classmethod
    def none(cls) -> Pending:
        """Nothing pending."""
        return cls((), (), frozenset())

    @property
    def empty(self) -> bool:
        return self.rows == () and not self.fresh

    @property
    def n_rows(self) -> int:
        """Training rows learned since (0 once the scores are to be recomputed)."""
        return sum(r.shape[0] for r in self.rows) if self.rows else 0

    def trained(self, Z: np.ndarray, classes: np.ndarray) -> Pending:
        """With training rows ``Z`` of ``classes`` learned too."""
        if self.rows is None or self.n_rows + Z.shape[0] > MAX_ROWS:
            return Pending(None, (), self.fresh)
        return Pending((*self.rows, np.array(Z, dtype=np.float64)), (*self.classes, classes), self.fresh)

    def scored_afresh(self, at: np.ndarray) -> Pending:
        """With the buffer rows ``at`` to be scored afresh."""
        return Pending(self.rows, self.classes, self.fresh | {int(r) for r in at})


def refreshed(
    scores: list[np.ndarray], engines: list[RecursiveRLS], val_X: np.ndarray, pending: Pending
) -> list[np.ndarray]:
    """The validation scores of every engine brought up to date (module docstring); each engine's
    factor and right-hand side already include ``pending.rows``. New arrays: none is written."""
    V, T = val_X.shape[0], engines[0].n_outputs if engines else 0
    fresh = np.fromiter(sorted(r for r in pending.fresh if r < V), dtype=np.int64)
    d = val_X.shape[1]
    recompute = pending.rows is None
    Z = np.concatenate(pending.rows) if pending.rows else np.zeros((0, d))
    m = Z.shape[0]
    if not recompute and m * (2 * d * d + m * m / 3) > 2 * d * d * T + V * d * T:
        recompute = True
    E = np.zeros((m, T))
    if m:
        E[np.arange(m), np.concatenate(pending.classes)] = 1.0
    out = []
    for S, rls in zip(scores, engines, strict=True):
        if recompute or not V:
            out.append(val_X @ rls.weights if V else np.zeros((0, T)))
            continue
        S = np.concatenate([S, np.zeros((V - S.shape[0], T))]) if S.shape[0] < V else S.copy()
        if m + fresh.size == 0:
            out.append(S)
            continue
        H = rls.solve(np.concatenate([Z, val_X[fresh]]))  # A'⁻¹ [Zᵀ X_rᵀ]: one pair of solves
        Hz, Hr = H[:, :m], H[:, m:]
        B = rls.rhs
        if m:
            K = Z @ Hz
            residual = E - Hz.T @ B
            step = np.linalg.solve(np.eye(m) - K, residual) if m > 1 else residual / (1.0 - K[0, 0])
            S += (val_X @ Hz) @ step
        if fresh.size:
            S[fresh] = Hr.T @ B
        out.append(S)
    return out
