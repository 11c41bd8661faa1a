"""Recursive regularized least squares with Cholesky rank-1 updates (thesis §8.2.4).

Multi-output ridge regression kept up to date one sample (or a small batch) at a time:

    W = argmin_W ‖Z W − U‖² + λ‖W‖²  =  (ZᵀZ + λI)⁻¹ ZᵀU,

with the state ``R`` (upper triangular, ``RᵀR = A = ZᵀZ + λI``, ``R₀ = √λ I``) and
``B = ZᵀU``. A new row ``z`` with target ``u`` costs one rank-1 update of ``R`` (O(d²),
:func:`~lifelong_learning.learners._cholesky.chol_update_rows`) and ``B += zᵀu`` (O(dc)).
The thesis prefers this to Sherman–Morrison updates of ``A⁻¹`` for numerical stability.

Weights ``W = R⁻¹R⁻ᵀB`` are solved lazily (two triangular solves, O(d²c)) when asked for
and cached until the next update; predicting a few rows without ``W`` costs two triangular
solves per row instead (O(d²) each), whichever is cheaper.

Exponential forgetting (thesis §8.4.3, future work there): with factor ``β ∈ (0, 1]``,
``A ← βA + zᵀz`` and ``B ← βB + zᵀu``, i.e. sample ``i`` of ``k`` weighs ``β^(k−i)`` and the
regularizer ``β^k λ``. It is applied without an O(d²) rescale per sample: the code keeps
``R = s·R̃`` and ``B = s²·B̃`` with a scalar ``s² = β^k``, updates ``R̃`` with ``z/s`` and ``B̃``
with ``zᵀu/s²`` (``W = Ã⁻¹B̃`` is unchanged by the common scale), and folds ``s`` back into
``R̃``, ``B̃`` when ``s²`` gets small. Note that forgetting also forgets the regularizer: a
direction no recent sample excites becomes weakly regularized.

Nothing half-applied: :meth:`RecursiveRLS.draft` gives a working engine that starts equal to
this one and never writes this one's arrays; :meth:`RecursiveRLS.commit` adopts its state in
O(1). A caller that updates several engines (one per λ) updates drafts, checks them, and
commits all or none. Without forgetting no ``d × d`` copy is made: the draft's first update
writes the new factor into a spare buffer that the engine keeps (the previous factor becomes
the next spare), so an engine that is drafted holds two factors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from lifelong_learning.core.checks import as_rows, same_rows
from lifelong_learning.core.persistence import Stateful
from lifelong_learning.learners._cholesky import chol_update_rows, chol_update_rows_into, warm_up

_RESCALE_BELOW = 1e-100  # fold the forgetting scale into the state below this s²


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
        return np.sqrt(self._scale2) * self._R

    @property
    def rhs(self) -> np.ndarray:
        """``B = ZᵀU`` (forgetting-weighted), read-only: a view without forgetting, else a copy."""
        if self._scale2 == 1.0:
            view = self._B.view()
            view.flags.writeable = False
            return view
        return self._scale2 * self._B

    @property
    def weights(self) -> np.ndarray:
        """``W = A⁻¹B``, shape ``(d, c)``; solved on first access after an update."""
        if self._W is None:
            self._W = cho_solve((self._R, False), self._B, check_finite=False)
        return self._W

    # ------------------------------------------------------------------ learning
    def update(self, Z: np.ndarray | Any, U: np.ndarray | Any) -> None:
        """Add rows ``Z`` (``(n, d)`` or ``(d,)``) with targets ``U`` (``(n, c)`` or ``(c,)``).

        Raises:
            ValueError: wrong shapes or non-finite values; the state is then unchanged.
        """
        Z2 = as_rows(Z, self.n_features, "Z")
        U2 = as_rows(U, self.n_outputs, "U") if self.n_outputs else np.zeros((Z2.shape[0], 0))
        same_rows({"Z": Z2, "U": U2})
        beta = self.forgetting
        if beta == 1.0:
            Zs = np.array(Z2, dtype=np.float64, order="C", copy=True)
            if self._shares_R:  # a draft's first write: into its own buffer, the engine's R stays
                out = self._take_spare()
                chol_update_rows_into(self._R, Zs, out)
                self._R, self._shares_R = out, False
            else:
                chol_update_rows(self._R, Zs)
            if self._shares_B:
                self._B, self._shares_B = self._B + Z2.T @ U2, False
            else:
                self._B += Z2.T @ U2
        else:
            self._own_arrays()
            for z, u in zip(Z2, U2, strict=True):  # the scale changes between rows
                self._scale2 *= beta
                if self._scale2 < _RESCALE_BELOW:
                    self._fold_scale()
                s = np.sqrt(self._scale2)
                zs = (z / s)[None, :].copy()
                chol_update_rows(self._R, zs)
                self._B += np.outer(z, u) / self._scale2
        self.n_samples += Z2.shape[0]
        self._W = None

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
        if self._shares_R:
            self._R, self._shares_R = self._R.copy(), False
        if self._shares_B:
            self._B, self._shares_B = self._B.copy(), False

    def draft(self) -> RecursiveRLS:
        """A working engine equal to this one, for an update that must be applied whole or not at all.

        The draft reads this engine's arrays and never writes them (its first update writes the
        new factor into a spare buffer, without copying ``R``); :meth:`commit` adopts the draft's
        state, dropping the draft leaves this engine as it was. One draft at a time per engine.
        """
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin._draft_of, twin._spare = self, None
        twin._shares_R = twin._shares_B = True
        return twin

    def commit(self, draft: RecursiveRLS) -> None:
        """Adopt the state of ``draft`` (made by :meth:`draft` of this engine) in O(1); cannot fail
        half-way. The previous factor becomes the spare buffer of the next draft.

        Raises:
            ValueError: ``draft`` is not a pending draft of this engine.
        """
        if draft._draft_of is not self:
            raise ValueError("not a pending draft of this engine")
        if draft._R is not self._R:
            self._spare = self._R
        self._R, self._B, self._W = draft._R, draft._B, draft._W
        self._scale2, self.n_samples = draft._scale2, draft.n_samples
        # The draft is spent: its arrays are now this engine's; any later write of it copies first.
        draft._draft_of, draft._shares_R, draft._shares_B = None, True, True

    def _fold_scale(self) -> None:
        s = np.sqrt(self._scale2)
        self._R *= s
        self._B *= self._scale2
        self._scale2 = 1.0

    def add_outputs(self, n: int = 1) -> None:
        """Append ``n`` outputs whose targets were 0 for every sample so far (new classes)."""
        self._B = np.concatenate([self._B, np.zeros((self.n_features, int(n)))], axis=1)
        self._shares_B = False
        if self._W is not None:
            self._W = np.concatenate([self._W, np.zeros((self.n_features, int(n)))], axis=1)

    def is_finite(self) -> bool:
        """Whether the factor's diagonal is finite and positive: an O(d) check after an update (a
        NaN met in a Givens sweep reaches every later diagonal entry; that no entry overflows is
        the caller's bound on the rows' norms: ``‖R‖²_F = tr A = dλ + Σ‖z‖²``)."""
        diag = np.diagonal(self._R)
        return bool(np.all(np.isfinite(diag)) and np.all(diag > 0))

    def reset(self) -> None:
        """Forget everything (keeps ``d``, ``c``, ``λ`` and ``β``)."""
        self._init_state(self.n_outputs)

    # ------------------------------------------------------------------ prediction
    def solve(self, Z: np.ndarray | Any) -> np.ndarray:
        """``A⁻¹Zᵀ`` for rows ``Z`` (``(n, d)`` or ``(d,)``), shape ``(d, n)``: two triangular
        solves with the factor, O(d²) per row. ``A⁻¹ = s⁻² Ã⁻¹`` under forgetting."""
        Z2 = as_rows(Z, self.n_features, "Z")
        V = solve_triangular(self._R, Z2.T, trans="T", lower=False, check_finite=False)
        V = solve_triangular(self._R, V, lower=False, check_finite=False)
        return V if self._scale2 == 1.0 else V / self._scale2

    def predict(self, Z: np.ndarray | Any) -> np.ndarray:
        """``Z W`` for rows ``Z`` (``(n, d)`` or ``(d,)``); returns ``(n, c)``."""
        Z2 = as_rows(Z, self.n_features, "Z")
        if self._W is None and Z2.shape[0] < self.n_outputs:
            # Two triangular solves per row beat solving all c columns of W: Z A⁻¹ B = Z Ã⁻¹ B̃.
            V = solve_triangular(self._R, Z2.T, trans="T", lower=False, check_finite=False)
            V = solve_triangular(self._R, V, lower=False, check_finite=False)
            return V.T @ self._B
        return Z2 @ self.weights

    # ------------------------------------------------------------------ persistence
    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Scalars and arrays that :meth:`from_state` restores exactly."""
        meta = {
            "n_features": self.n_features,
            "n_outputs": self.n_outputs,
            "lam": self.lam,
            "forgetting": self.forgetting,
            "n_samples": self.n_samples,
            "scale2": self._scale2,
        }
        return meta, {"R": self._R.copy(), "B": self._B.copy()}

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> RecursiveRLS:
        """Rebuild an engine saved by :meth:`to_state`; validates shapes and values."""
        try:
            d, c = int(meta["n_features"]), int(meta["n_outputs"])
            rls = cls(d, c, lam=float(meta["lam"]), forgetting=float(meta["forgetting"]))
            R = np.asarray(arrays["R"], dtype=np.float64)
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
        return rls

    def __repr__(self) -> str:
        return (
            f"RecursiveRLS(n_features={self.n_features}, n_outputs={self.n_outputs}, "
            f"lam={self.lam:g}, forgetting={self.forgetting:g}, n_samples={self.n_samples})"
        )
