"""Recursive regularized least squares with Cholesky rank-1 updates (thesis §8.2.4).

Multi-output ridge regression kept up to date one sample (or a small batch) at a time:

    W = argmin_W ‖Z W − U‖² + λ‖W‖²  =  (ZᵀZ + λI)⁻¹ ZᵀU,

with the state ``R`` (upper triangular, ``RᵀR = A = ZᵀZ + λI``, ``R₀ = √λ I``) and
``B = ZᵀU``. A new row ``z`` with target ``u`` costs one rank-1 update of ``R`` (O(d²),
:func:`~lifelong_learning.learners.cholesky.chol_update_rows`) and ``B += zᵀu`` (O(dc)).
The thesis prefers this to Sherman–Morrison updates of ``A⁻¹`` for numerical stability. A block
of ``k`` rows (a warm start, a bag replayed, messages that queued up) is one rank-k update at
BLAS-3 speed instead, ``R ← chol(RᵀR + ZᵀZ)``
(:func:`~lifelong_learning.learners.cholesky.chol_update_block`), once ``k`` is a sizeable
fraction of ``d``; engines that learn the same block can share its Gram matrix ``ZᵀZ``.

Weights ``W = R⁻¹R⁻ᵀB`` are solved lazily (two triangular solves, O(d²c)) when asked for
and cached until the next update; predicting a few rows without ``W`` costs two triangular
solves per row instead (O(d²) each), whichever is cheaper.

Exponential forgetting (thesis §8.4.3, future work there): with factor ``β ∈ (0, 1]``,
``A ← βA + zᵀz`` and ``B ← βB + zᵀu``, i.e. sample ``i`` of ``k`` weighs ``β^(k−i)`` and the
regularizer ``β^k λ`` (applied without an O(d²) rescale per sample, docs/design.md). Forgetting
also forgets the regularizer: a direction no recent sample excites becomes weakly regularized.

The batch objective (Zhdanov & Kalnishkan; :mod:`~lifelong_learning.learners.prequential_identity`):
the engine also keeps the (forgetting-weighted) count, sum and sum of squares of its targets, O(c) a
row, so that ``J = min_W λ‖W‖² + Σ_t ‖Wᵀz_t − u_t‖² = Σ_t ‖u_t‖² − tr(BᵀA⁻¹B)`` (per output: ``u_jᵀu_j
− b_jᵀA⁻¹b_j``, at its minimiser ``W = A⁻¹B``) is read off the state in O(dc) once ``W`` is solved
(:meth:`RecursiveRLS.batch_objective`): by the identity it equals the sum of the engine's online
errors, each divided by ``1 + z_tᵀA_{t−1}⁻¹z_t``, without computing a leverage per row. With
forgetting, ``J_t = βJ_{t−1} + ‖e_t‖²/(1 + z_tᵀA_{t−1}⁻¹z_t/β)``: the objective
``min_W β^t λ‖W‖² + Σ_s β^{t−s}‖Wᵀz_s − u_s‖²`` of the rows' weights, which the same formula gives.

Nothing half-applied: :meth:`RecursiveRLS.draft` gives a working engine that never writes this
one's arrays and :meth:`RecursiveRLS.commit` adopts its state in O(1), so a caller that updates
several engines commits all or none. Compact storage: ``packed=True`` stores the factor's upper
triangle only (:func:`pack_upper`, bit for bit), and an engine that saw the same rows with
another λ is refactored from it (:meth:`RecursiveRLS.regularized`,
``A' = RᵀR + (λ' − λ)I``; its accuracy: :meth:`RecursiveRLS.rebuild_error_bound`). How each
works, and why the rebuild is as accurate as an incrementally built factor: docs/design.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.linalg import blas, cholesky, solve_triangular

from lifelong_learning.core.checks import as_rows, same_rows
from lifelong_learning.core.persistence import Stateful
from lifelong_learning.learners.cholesky import (
    block_pays,
    chol_update_block,
    chol_update_rows,
    chol_update_rows_into,
    factor_gram,
    warm_up,
)

_RESCALE_BELOW = 1e-100  # fold the forgetting scale into the state below this s²
#: rows an engine lets wait before it sweeps them into its factor in one pass (sooner when read): a
#: factor larger than the cache (several λ's at d = 1280) is then read once for that many rows
QUEUE_ROWS = 8


def pack_upper(R: np.ndarray) -> np.ndarray:
    """The upper triangle of the square ``R``, row by row: ``d(d+1)/2`` entries (no rounding)."""
    return np.ascontiguousarray(R[np.triu_indices(R.shape[0])])


def unpack_upper(packed: np.ndarray, d: int) -> np.ndarray:
    """The ``d × d`` upper-triangular matrix stored by :func:`pack_upper` (zero lower triangle).

    Raises:
        ValueError: ``packed`` is not one-dimensional with ``d(d+1)/2`` entries.
    """
    packed = np.asarray(packed)
    if packed.ndim != 1 or packed.size != d * (d + 1) // 2:
        raise ValueError(f"a packed {d} × {d} triangle has {d * (d + 1) // 2} entries, got {packed.shape}")
    R = np.zeros((d, d))
    R[np.triu_indices(d)] = packed
    return R


def _add_product(B: np.ndarray, Z: np.ndarray, U: np.ndarray) -> None:
    """``B += ZᵀU`` in place, without a temporary (BLAS ``dgemm`` on ``Bᵀ``, Fortran-ordered for a
    C-ordered ``B``): a ``d × c`` temporary per sample costs more than the product (page faults)."""
    if B.size == 0 or Z.shape[0] == 0:
        return
    if not B.flags.c_contiguous:
        B += Z.T @ U
        return
    blas.dgemm(1.0, U, Z, beta=1.0, c=B.T, trans_a=1, overwrite_c=1)


def _moments_of(arrays: dict[str, np.ndarray], c: int) -> tuple[float, np.ndarray, np.ndarray] | None:
    """The targets' moments of a saved state (None when it has none, as states saved before the
    engine kept them, or they do not fit ``c`` outputs)."""
    try:
        w = np.asarray(arrays["target_weight"], dtype=np.float64).reshape(-1)
        s1 = np.asarray(arrays["target_sum"], dtype=np.float64).reshape(-1)
        s2 = np.asarray(arrays["target_sq"], dtype=np.float64).reshape(-1)
    except (KeyError, TypeError, ValueError):
        return None
    if w.shape != (1,) or s1.shape != (c,) or s2.shape != (c,):
        raise ValueError(f"RecursiveRLS state: targets' moments of shapes {w.shape}, {s1.shape}, {s2.shape}")
    if not (np.all(np.isfinite(s1)) and np.all(np.isfinite(s2)) and np.isfinite(w[0])):
        raise ValueError("RecursiveRLS state holds non-finite targets' moments")
    return float(w[0]), s1, s2


def _range_of(arrays: dict[str, np.ndarray], c: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The targets' range of a saved state (None when it has none)."""
    if "target_low" not in arrays or "target_high" not in arrays:
        return None
    low = np.asarray(arrays["target_low"], dtype=np.float64).reshape(-1)
    high = np.asarray(arrays["target_high"], dtype=np.float64).reshape(-1)
    if low.shape != (c,) or high.shape != (c,) or np.any(np.isnan(low)) or np.any(np.isnan(high)):
        raise ValueError(f"RecursiveRLS state: a targets' range of shapes {low.shape}, {high.shape}")
    return low, high


class RecursiveRLS(Stateful):
    """Multi-output recursive ridge regression with Cholesky rank-1 updates.

    Args:
        n_features: input dimension ``d``.
        n_outputs: output dimension ``c`` (may grow later with :meth:`add_outputs`).
        lam: regularization ``λ > 0`` (not multiplied by the number of samples).
        forgetting: ``β ∈ (0, 1]``; 1 means no forgetting.

    Example:
        >>> rls = RecursiveRLS(3, 1, lam=1e-3)
        >>> rls.update([[1.0, 0.0, 2.0]], [[0.5]])
        >>> rls.predict([[1.0, 0.0, 2.0]]).shape
        (1, 1)
    """

    def __init__(self, n_features: int, n_outputs: int, lam: float = 1.0, forgetting: float = 1.0):
        if int(n_features) < 1 or int(n_outputs) < 0:
            raise ValueError("n_features must be ≥ 1 and n_outputs ≥ 0")
        if not np.isfinite(lam) or lam <= 0:
            raise ValueError(f"lam must be a positive number, got {lam!r}")
        if not (0.0 < forgetting <= 1.0):
            raise ValueError(f"forgetting must be in (0, 1], got {forgetting!r}")
        self.n_features = int(n_features)
        self.lam = float(lam)
        self.forgetting = float(forgetting)
        warm_up()
        self._draft_of: RecursiveRLS | None = None  # the engine a draft will be committed to
        self._spare: np.ndarray | None = None  # a d × d buffer with a zero lower triangle, for drafts
        self._init_state(int(n_outputs))

    def _init_state(self, n_outputs: int) -> None:
        d = self.n_features
        self._R = np.sqrt(self.lam) * np.eye(d)  # R̃ (R = s R̃)
        self._B = np.zeros((d, n_outputs))  # B̃ (B = s² B̃)
        self._scale2 = 1.0  # s²
        self._W: np.ndarray | None = None
        self.n_samples = 0  # rows seen
        self._shares_R = self._shares_B = False  # a draft's arrays still belong to its engine
        self._pending: np.ndarray | None = None  # rows not yet swept into the factor (QUEUE_ROWS at most)
        self._pending_rhs: tuple[np.ndarray, np.ndarray] | None = None  # rows and targets not yet in B
        # the targets' weighted count, sum and sum of squares (scaled as B̃); None: not known (rows
        # added by their sums alone, or a state saved without them)
        # the targets' range per output over every row learned (+inf, -inf before any); None: not known
        self._range: tuple[np.ndarray, np.ndarray] | None = (
            np.full(n_outputs, np.inf),
            np.full(n_outputs, -np.inf),
        )
        self._moments: tuple[float, np.ndarray, np.ndarray] | None = (
            0.0,
            np.zeros(n_outputs),
            np.zeros(n_outputs),
        )

    # ------------------------------------------------------------------ properties
    @property
    def n_outputs(self) -> int:
        """Output dimension ``c``."""
        return self._B.shape[1]

    @property
    def nbytes(self) -> int:
        """Memory held by the learned state (factor, its spare once drafted, right-hand side, cached
        weights) in bytes."""
        extra = sum(a.nbytes for a in (self._W, self._spare) if a is not None)
        return self._R.nbytes + self._B.nbytes + extra

    @property
    def cholesky_factor(self) -> np.ndarray:
        """Upper-triangular ``R`` with ``RᵀR = A`` (a copy)."""
        self._settle()
        return np.sqrt(self._scale2) * self._R

    @property
    def rhs(self) -> np.ndarray:
        """``B = ZᵀU`` (forgetting-weighted), read-only: a view without forgetting, else a copy."""
        self._settle_rhs()
        if self._scale2 == 1.0:
            view = self._B.view()
            view.flags.writeable = False
            return view
        return self._scale2 * self._B

    @property
    def weights_solved(self) -> bool:
        """Whether :attr:`weights` are solved (reading them costs nothing until the next update)."""
        return self._W is not None

    @property
    def weights(self) -> np.ndarray:
        """``W = A⁻¹B``, shape ``(d, c)``; solved on first access after an update."""
        if self._W is None:
            self._settle()
            # two triangular solves (BLAS trsm on the C-ordered factor as it is; cho_solve would copy
            # it to Fortran order first, several times slower at d = 1280)
            V = solve_triangular(self._R, self._B, trans="T", lower=False, check_finite=False)
            self._W = solve_triangular(self._R, V, lower=False, check_finite=False)
        return self._W

    # ------------------------------------------------------------------ learning
    def update(self, Z: np.ndarray | Any, U: np.ndarray | Any, gram: np.ndarray | None = None) -> None:
        """Add rows ``Z`` (``(n, d)`` or ``(d,)``) with targets ``U`` (``(n, c)`` or ``(c,)``).

        A few rows are swept in by Givens rotations (rank-1 each); a block of rows
        (:func:`~lifelong_learning.learners.cholesky.block_pays`) by one BLAS-3 refactorization
        of ``RᵀR + ZᵀZ`` (rank-k), with forgetting by weighting the rows. Both give the batch
        solution to rounding.

        Args:
            gram: ``ZᵀZ`` (upper triangle) when the caller has it already, e.g. several engines
                learning the same block (:func:`~lifelong_learning.learners.cholesky.gram`);
                used without forgetting only, and only when the block path is taken.

        Raises:
            ValueError: wrong shapes or non-finite values; the state is then unchanged.
        """
        Z2 = as_rows(Z, self.n_features, "Z")
        U2 = as_rows(U, self.n_outputs, "U") if self.n_outputs else np.zeros((Z2.shape[0], 0))
        same_rows({"Z": Z2, "U": U2})
        if self.forgetting == 1.0:
            self._add_rows(Z2, U2, gram)
            self._add_moments(U2, np.full(U2.shape[0], 1.0 / self._scale2))
            self._add_range(U2)
        else:
            self._own_arrays()
            start = 0
            while start < Z2.shape[0]:  # chunks along which the scale stays above _RESCALE_BELOW
                if self._scale2 * self.forgetting < _RESCALE_BELOW:
                    self._fold_scale()
                stop = start + self._rows_before_fold(Z2.shape[0] - start)
                # row i of the chunk: s_i² = s² β^(i+1); R̃ learns z_i / s_i, B̃ learns z_i u_iᵀ / s_i²
                scale2 = self._scale2 * self.forgetting ** np.arange(1, stop - start + 1)
                weighted = Z2[start:stop] / np.sqrt(scale2)[:, None]
                self._add_rows(weighted, U2[start:stop] / np.sqrt(scale2)[:, None], None)
                self._add_moments(U2[start:stop], 1.0 / scale2)
                self._add_range(U2[start:stop])
                self._scale2 = float(scale2[-1])
                start = stop
        self.n_samples += Z2.shape[0]
        self._W = None

    def add_sums(
        self,
        gram: np.ndarray,
        cross: np.ndarray,
        n: int,
        targets: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """Add ``n`` rows known only by their sums ``ZᵀZ`` (``gram``, ``d × d``) and ``ZᵀU``
        (``cross``, ``d × c``): e.g. rows held by other processes, whose sums were all-reduced.
        The same state as :meth:`update` with the rows, to rounding; without forgetting only (with
        it the rows' weights depend on their order). ``targets``: the sums ``ΣU`` and ``ΣU²`` per
        output, for :meth:`batch_objective` (without them it is not known from here on).

        Raises:
            ValueError: forgetting, wrong shapes, non-finite sums or a ``gram`` that is not positive
                semidefinite enough to keep the factor positive definite; the state is then unchanged.
        """
        if self.forgetting != 1.0:
            raise ValueError("add_sums needs forgetting 1 (with forgetting the rows' order matters)")
        d, c = self.n_features, self.n_outputs
        G = np.asarray(gram, dtype=np.float64)
        C = np.asarray(cross, dtype=np.float64).reshape(d, c) if np.size(cross) == d * c else None
        if G.shape != (d, d) or C is None:
            raise ValueError(f"sums of shapes {np.shape(gram)} and {np.shape(cross)} for d = {d}, c = {c}")
        if not (np.all(np.isfinite(G)) and np.all(np.isfinite(C))) or int(n) < 0:
            raise ValueError("the sums must be finite and n >= 0")
        sums = None if targets is None else [np.asarray(t, dtype=np.float64).reshape(-1) for t in targets]
        if sums is not None and (any(t.shape != (c,) or not np.all(np.isfinite(t)) for t in sums)):
            raise ValueError(f"the targets' sums must be {c} finite numbers each")
        self._own_arrays()
        self._R = chol_update_block(self._R, np.empty((0, d)), np.triu(G))
        self._B = self._B + C
        self.n_samples += int(n)
        self._W = None
        self._range = None  # sums say nothing of the targets' range
        if sums is None or self._moments is None:
            self._moments = None
        else:
            w, s1, s2 = self._moments
            self._moments = (w + int(n), s1 + sums[0], s2 + sums[1])

    def _rows_before_fold(self, n: int) -> int:
        """How many of ``n`` rows can be weighted before ``s²β^i`` falls below the fold threshold."""
        if self.forgetting == 1.0:
            return n
        room = np.log(_RESCALE_BELOW / self._scale2) / np.log(self.forgetting)
        return int(min(n, max(1, np.floor(room))))

    def _add_moments(self, U: np.ndarray, inverse_scale2: np.ndarray) -> None:
        """The targets' count, sum and sum of squares, each row weighted ``1/s_i²`` (as ``B̃`` learns
        it); new arrays, never written in place (a draft shares its engine's)."""
        if self._moments is None or not U.shape[0]:
            return
        w, s1, s2 = self._moments
        self._moments = (
            w + float(inverse_scale2.sum()),
            s1 + inverse_scale2 @ U,
            s2 + inverse_scale2 @ (U * U),
        )

    def _add_range(self, U: np.ndarray) -> None:
        """The targets' range with the rows ``U`` (new arrays: a draft shares its engine's)."""
        if self._range is not None and U.shape[0] and U.shape[1]:
            self._range = (
                np.minimum(self._range[0], U.min(axis=0)),
                np.maximum(self._range[1], U.max(axis=0)),
            )

    def _add_rows(self, Z: np.ndarray, U: np.ndarray, gram: np.ndarray | None) -> None:
        """``R ← chol(RᵀR + ZᵀZ)`` (Givens or BLAS-3) and ``B ← B + ZᵀU``."""
        if block_pays(Z.shape[0], self.n_features):
            self._settle()
            self._R, self._shares_R = chol_update_block(self._R, Z, gram), False
        else:
            Zs = np.array(Z, dtype=np.float64, order="C", copy=True)
            # the rows wait (a draft: for commit or a read; an engine: for QUEUE_ROWS of them or a read)
            self._pending = Zs if self._pending is None else np.vstack([self._pending, Zs])
            if not self._shares_R and self._pending.shape[0] >= QUEUE_ROWS:
                self._sweep()
        if self._shares_B:  # a draft: B + ZᵀU waits for commit (in place) or a read (a new array)
            rows = (
                (Z, U)
                if self._pending_rhs is None
                else (np.vstack([self._pending_rhs[0], Z]), np.vstack([self._pending_rhs[1], U]))
            )
            self._pending_rhs = rows
        else:
            _add_product(self._B, Z, U)

    def _sweep(self) -> None:
        """The rows waiting for this engine's own factor swept into it in place, in one pass."""
        if self._pending is not None and not self._shares_R:
            rows, self._pending = self._pending, None
            chol_update_rows(self._R, rows)

    def _settle(self) -> None:
        """Rows still waiting swept into the factor before anything reads it: an engine's into its own
        factor; a draft's into a factor of its own (the engine's stays as it was); and a draft's
        right-hand side made its own."""
        if self._pending is not None and self._shares_R:
            out = self._take_spare()
            chol_update_rows_into(self._R, self._pending.copy(), out)  # the engine may hold the rows too
            self._R, self._shares_R, self._pending = out, False, None
        self._sweep()
        self._settle_rhs()

    def _settle_rhs(self) -> None:
        """A draft's deferred ``ZᵀU`` added to a right-hand side of its own (before ``B`` is read)."""
        if self._pending_rhs is not None:
            B = self._B.copy()
            _add_product(B, *self._pending_rhs)
            self._B, self._shares_B, self._pending_rhs = B, False, None

    def _take_spare(self) -> np.ndarray:
        """A ``d × d`` buffer with a zero strict lower triangle that no engine uses: the spare of the
        engine this is a draft of (taken away from it), else a new one."""
        d = self.n_features
        origin = self._draft_of
        spare = origin._spare if origin is not None else None
        if origin is not None:
            origin._spare = None
        return spare if spare is not None and spare.shape == (d, d) else np.zeros((d, d))

    def _own_arrays(self) -> None:
        """Copy the arrays a draft still shares before updating them in place (forgetting)."""
        self._settle()
        if self._shares_R:
            self._R, self._shares_R = self._R.copy(), False
        if self._shares_B:
            self._B, self._shares_B = self._B.copy(), False

    def draft(self) -> RecursiveRLS:
        """A working engine equal to this one, for an update that must be applied whole or not at all.

        The draft reads this engine's arrays and never writes them: rows it learns by Givens
        sweeps wait in the draft until :meth:`commit` sweeps them into this engine's factor in
        place (one compiled call, which cannot stop half-way: an update costs one pass over the
        triangle), or until the draft's factor is read first (then they are swept into a spare
        buffer, without copying ``R``). :meth:`commit` adopts the draft's state, dropping the
        draft leaves this engine as it was. One draft at a time per engine.
        """
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        # the rows still waiting for this engine's factor wait for the draft's too
        twin._draft_of, twin._spare, twin._pending, twin._pending_rhs = self, None, self._pending, None
        twin._shares_R = twin._shares_B = True
        return twin

    def commit(self, draft: RecursiveRLS) -> None:
        """Adopt the state of ``draft`` (made by :meth:`draft` of this engine): O(1), plus one sweep of
        the rows the draft deferred into this engine's factor in place (compiled code without
        allocation or exceptions: it cannot stop half-way). The previous factor becomes the spare
        buffer of the next draft when the draft had settled into one.

        Raises:
            ValueError: ``draft`` is not a pending draft of this engine.
        """
        if draft._draft_of is not self:
            raise ValueError("not a pending draft of this engine")
        if draft._pending is not None:  # rows for this engine's own factor: they wait, or are swept
            self._pending, draft._pending = draft._pending, None
            if self._pending.shape[0] >= QUEUE_ROWS:
                self._sweep()
        elif draft._R is not self._R:
            self._spare, self._pending = self._R, None
        if draft._pending_rhs is not None:  # the draft still shares B: added in place
            _add_product(self._B, *draft._pending_rhs)
            draft._B, draft._pending_rhs = self._B, None
        self._R, self._B, self._W = draft._R, draft._B, draft._W
        self._scale2, self.n_samples, self.forgetting = draft._scale2, draft.n_samples, draft.forgetting
        self._moments, self._range = draft._moments, draft._range
        # The draft is spent: its arrays are now this engine's; any later write of it copies first.
        draft._draft_of, draft._shares_R, draft._shares_B = None, True, True

    def set_forgetting(self, forgetting: float) -> None:
        """Use the factor ``forgetting`` for the rows learned from now on (a time-varying factor,
        ``A_t = β_t A_{t−1} + z_tᵀz_t``): exact, since the state ``A = s²Ã`` does not depend on the
        factor that built it. O(1), except a change to 1 from below: the scale ``s²`` is folded
        into the state first (O(d²), once; the 1 path adds rows unweighted).

        Raises:
            ValueError: ``forgetting`` outside (0, 1]; nothing is changed then.
        """
        forgetting = float(forgetting)
        if not (0.0 < forgetting <= 1.0):
            raise ValueError(f"forgetting must be in (0, 1], got {forgetting!r}")
        if forgetting == 1.0 and self._scale2 != 1.0:
            self._own_arrays()
            self._fold_scale()
        self.forgetting = forgetting

    def leading(self, n_features: int) -> RecursiveRLS:
        """The engine that learned only the first ``n_features`` columns of every row this one learned
        (same λ, factor and targets), exactly: the leading ``p × p`` block of an upper-triangular
        ``R`` is the Cholesky factor of the leading block of ``A = RᵀR`` (and of ``Z_pᵀZ_p + λI``),
        and ``B``'s first ``p`` rows are ``Z_pᵀU``.

        Raises:
            ValueError: ``n_features`` not in [1, d].
        """
        p = int(n_features)
        if not 1 <= p <= self.n_features:
            raise ValueError(f"n_features must be in [1, {self.n_features}], got {n_features!r}")
        self._settle()
        sub = type(self)(p, self.n_outputs, lam=self.lam, forgetting=self.forgetting)
        sub._R = np.ascontiguousarray(self._R[:p, :p])
        sub._B = np.ascontiguousarray(self._B[:p])
        sub._scale2, sub.n_samples, sub._moments = self._scale2, self.n_samples, self._moments
        sub._range = self._range
        return sub

    def _fold_scale(self) -> None:
        self._sweep()  # the waiting rows are in the units of the scale being folded
        s = np.sqrt(self._scale2)
        self._R *= s
        self._B *= self._scale2
        if self._moments is not None:
            self._moments = tuple(m * self._scale2 for m in self._moments)  # type: ignore[assignment]
        self._scale2 = 1.0

    def add_outputs(self, n: int = 1) -> None:
        """Append ``n`` outputs whose targets were 0 for every sample so far (new classes)."""
        self._settle_rhs()
        self._B = np.concatenate([self._B, np.zeros((self.n_features, int(n)))], axis=1)
        self._shares_B = False
        if self._range is not None:  # the new outputs' targets were 0 for every row so far
            low, high = self._range
            seen = np.zeros(int(n)) if self.n_samples else np.full(int(n), np.inf)
            self._range = (np.concatenate([low, seen]), np.concatenate([high, -seen]))
        if self._moments is not None:
            w, s1, s2 = self._moments
            self._moments = (
                w,
                np.concatenate([s1, np.zeros(int(n))]),
                np.concatenate([s2, np.zeros(int(n))]),
            )
        if self._W is not None:
            self._W = np.concatenate([self._W, np.zeros((self.n_features, int(n)))], axis=1)

    def is_finite(self) -> bool:
        """Whether the factor's diagonal is finite and positive: an O(d) check after an update (a
        NaN met in a Givens sweep reaches every later diagonal entry; that no entry overflows is
        the caller's bound on the rows' norms: ``‖R‖²_F = tr A = dλ + Σ‖z‖²``). Rows a draft defers
        (:meth:`draft`) were checked finite when learned; the factor they will join is checked."""
        diag = np.diagonal(self._R)
        return bool(np.all(np.isfinite(diag)) and np.all(diag > 0))

    def reset(self) -> None:
        """Forget everything (keeps ``d``, ``c``, ``λ`` and ``β``)."""
        self._init_state(self.n_outputs)

    # ------------------------------------------------------------------ prediction
    def solve(self, Z: np.ndarray | Any) -> np.ndarray:
        """``A⁻¹Zᵀ`` for rows ``Z`` (``(n, d)`` or ``(d,)``), shape ``(d, n)``: two triangular
        solves with the factor, O(d²) per row. ``A⁻¹ = s⁻² Ã⁻¹`` under forgetting."""
        self._settle()
        Z2 = as_rows(Z, self.n_features, "Z")
        V = solve_triangular(self._R, Z2.T, trans="T", lower=False, check_finite=False)
        V = solve_triangular(self._R, V, lower=False, check_finite=False)
        return V if self._scale2 == 1.0 else V / self._scale2

    def whiten(self, Z: np.ndarray | Any) -> np.ndarray:
        """``R⁻ᵀZᵀ`` for rows ``Z``, shape ``(d, n)``: one triangular solve per row; the squared norm of
        column ``i`` is ``zᵢᵀA⁻¹zᵢ`` (the row's leverage)."""
        self._settle()
        Z2 = as_rows(Z, self.n_features, "Z")
        V = solve_triangular(self._R, Z2.T, trans="T", lower=False, check_finite=False)
        return V if self._scale2 == 1.0 else V / np.sqrt(self._scale2)

    def predict(self, Z: np.ndarray | Any) -> np.ndarray:
        """``Z W`` for rows ``Z`` (``(n, d)`` or ``(d,)``); returns ``(n, c)``."""
        Z2 = as_rows(Z, self.n_features, "Z")
        self._settle()
        if self._W is None and Z2.shape[0] < self.n_outputs:
            # Two triangular solves per row beat solving all c columns of W: Z A⁻¹ B = Z Ã⁻¹ B̃.
            V = solve_triangular(self._R, Z2.T, trans="T", lower=False, check_finite=False)
            V = solve_triangular(self._R, V, lower=False, check_finite=False)
            return V.T @ self._B
        return Z2 @ self.weights

    # ------------------------------------------------------------------ batch objective
    def target_moments(self) -> tuple[float, np.ndarray, np.ndarray] | None:
        """The (forgetting-weighted) count of the rows learned, and the sum and sum of squares of their
        targets per output; None when not known (module docstring)."""
        if self._moments is None:
            return None
        w, s1, s2 = self._moments
        return self._scale2 * w, self._scale2 * s1, self._scale2 * s2

    def target_range(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The least and the largest target of each output over every row learned (forgetting
        aside); None before any row, or when not known (rows added by their sums, an older file)."""
        if self._range is None or not self.n_samples:
            return None
        return self._range[0].copy(), self._range[1].copy()

    def batch_objective(self, target_sq: np.ndarray | None = None) -> np.ndarray:
        """Per output, ``min_w λ‖w‖² + Σ_t (wᵀz_t − u_t)²`` over the rows learned (forgetting-weighted,
        module docstring): ``Σu² − bᵀA⁻¹b``, ``(c,)``, clipped at 0 against rounding; NaN where the
        targets' squares are not known. ``target_sq``: ``Σ_t u_t²`` per output given by the caller
        (e.g. 0/1 targets: the rows of each class) instead of the moments kept. O(dc) with the
        weights solved (else their solve, O(d²c))."""
        if target_sq is None:
            moments = self.target_moments()
            if moments is None:
                return np.full(self.n_outputs, np.nan)
            target_sq = moments[2]
        squares = np.asarray(target_sq, dtype=np.float64)
        if squares.shape != (self.n_outputs,):
            raise ValueError(f"target_sq must have {self.n_outputs} entries, got {squares.shape}")
        W = self.weights  # Ã⁻¹B̃ = A⁻¹B
        fitted = self._scale2 * np.einsum("ij,ij->j", self._B, W)  # bᵀA⁻¹b = s² b̃ᵀÃ⁻¹b̃
        return np.maximum(squares - fitted, 0.0)

    # ------------------------------------------------------------------ persistence
    def scalar_state(self) -> dict[str, Any]:
        """The scalars of :meth:`to_state` (dimensions, λ, β, samples, scale), without the arrays."""
        return {
            "n_features": self.n_features,
            "n_outputs": self.n_outputs,
            "lam": self.lam,
            "forgetting": self.forgetting,
            "n_samples": self.n_samples,
            "scale2": self._scale2,
        }

    def to_state(self, packed: bool = False) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Scalars and arrays that :meth:`from_state` restores exactly; ``packed``: the factor's
        upper triangle only (``R_upper``, :func:`pack_upper`: half the bytes, the same numbers)."""
        meta = self.scalar_state()
        self._settle()
        factor = {"R_upper": pack_upper(self._R)} if packed else {"R": self._R.copy()}
        arrays = {**factor, "B": self._B.copy()}
        if self._moments is not None:  # scaled as B̃
            w, s1, s2 = self._moments
            arrays.update(target_weight=np.array([w]), target_sum=s1.copy(), target_sq=s2.copy())
        if self._range is not None:
            arrays.update(target_low=self._range[0].copy(), target_high=self._range[1].copy())
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> RecursiveRLS:
        """Rebuild an engine saved by :meth:`to_state` (full or packed factor); validates shapes and
        values."""
        try:
            d, c = int(meta["n_features"]), int(meta["n_outputs"])
            rls = cls(d, c, lam=float(meta["lam"]), forgetting=float(meta["forgetting"]))
            if "R" in arrays:
                R = np.asarray(arrays["R"], dtype=np.float64)
            else:
                R = unpack_upper(np.asarray(arrays["R_upper"], dtype=np.float64), d)
            B = np.asarray(arrays["B"], dtype=np.float64)
            scale2 = float(meta["scale2"])
            n_samples = int(meta["n_samples"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed RecursiveRLS state: {exc}") from exc
        if R.shape != (d, d) or B.shape != (d, c):
            raise ValueError(f"RecursiveRLS state has R {R.shape}, B {B.shape}; expected d={d}, c={c}")
        if not (np.all(np.isfinite(R)) and np.all(np.isfinite(B)) and np.isfinite(scale2) and scale2 > 0):
            raise ValueError("RecursiveRLS state holds non-finite values")
        if np.any(np.diag(R) <= 0) or np.any(np.tril(R, -1) != 0):
            raise ValueError("RecursiveRLS state: R is not an upper-triangular Cholesky factor")
        rls._R, rls._B, rls._scale2, rls.n_samples = R.copy(), B.copy(), scale2, n_samples
        rls._moments = _moments_of(arrays, c)
        rls._range = _range_of(arrays, c)
        return rls

    # ------------------------------------------------------------------ other regularizations
    def rebuild_error_bound(self, lam: float) -> float:
        """A bound on the relative change of predictions when the engine of regularization ``lam`` is
        refactored from this one (:meth:`regularized`) rather than updated row by row:
        ``ε · κ(A')`` with ``κ(A') ≤ 1 + tr(ZᵀZ)/λ'`` and ``tr(ZᵀZ) = ‖R‖²_F − dλ`` (worst case;
        measured changes are orders of magnitude smaller). ``inf`` under forgetting."""
        if self.forgetting != 1.0 or self._scale2 != 1.0:
            return float("inf")
        self._settle()
        gram_trace = max(float(np.einsum("ij,ij->", self._R, self._R)) - self.n_features * self.lam, 0.0)
        return float(np.finfo(np.float64).eps * (1.0 + gram_trace / float(lam)))

    def regularized(self, lams: Sequence[float], skip_failures: bool = False) -> list[RecursiveRLS | None]:
        """Engines that saw the same rows (and targets) as this one with regularizations ``lams``:
        ``A' = RᵀR + (λ' − λ)I`` (module docstring), one product ``RᵀR`` and one Cholesky factor
        each. A ``lam`` equal to this engine's gives a copy of its factor. ``skip_failures``: a ``lam``
        whose matrix is not numerically positive definite (far below this engine's λ) gives None
        instead of raising.

        Raises:
            ValueError: forgetting (the regularizer decays with the samples: not rebuilt here), a
                ``lam`` that is not positive, or a matrix that is not positive definite.
        """
        if self.forgetting != 1.0 or self._scale2 != 1.0:
            raise ValueError("an engine with forgetting cannot be refactored for another λ")
        self._settle()
        d = self.n_features
        gram: np.ndarray | None = None
        out: list[RecursiveRLS | None] = []
        for lam in lams:
            lam = float(lam)
            if not np.isfinite(lam) or lam <= 0:
                raise ValueError(f"lam must be a positive number, got {lam!r}")
            rls = type(self)(d, self.n_outputs, lam=lam)
            if lam == self.lam:
                R = self._R.copy()
            else:
                if gram is None:  # upper triangle of RᵀR (d³/3 flops, once for every λ)
                    gram = factor_gram(self._R)
                A = gram + (lam - self.lam) * np.eye(d)
                try:
                    R = np.ascontiguousarray(cholesky(A, lower=False, overwrite_a=True, check_finite=False))
                except np.linalg.LinAlgError as exc:
                    if skip_failures:
                        out.append(None)
                        continue
                    raise ValueError(f"refactoring for λ = {lam:g} failed: {exc}") from exc
            if not (np.all(np.isfinite(R)) and np.all(np.diagonal(R) > 0)):
                if skip_failures:
                    out.append(None)
                    continue
                raise ValueError(f"refactoring for λ = {lam:g} gave a non-finite factor")
            rls._R, rls._B, rls.n_samples, rls._moments = R, self._B.copy(), self.n_samples, self._moments
            rls._range = self._range
            out.append(rls)
        return out

    def __repr__(self) -> str:
        return (
            f"RecursiveRLS(n_features={self.n_features}, n_outputs={self.n_outputs}, "
            f"lam={self.lam:g}, forgetting={self.forgetting:g}, n_samples={self.n_samples})"
        )
