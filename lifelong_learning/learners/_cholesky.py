"""Compiled kernel: rank-1 updates of an upper-triangular Cholesky factor (thesis §8.2.4).

Given upper-triangular ``R`` with ``RᵀR = A``, :func:`chol_update_rows` overwrites ``R`` with
the factor of ``A + Σᵢ zᵢzᵢᵀ`` over the rows ``zᵢ`` of ``Z`` by Givens rotations: for row
``z`` and ``k = 0..d-1``, ``r = hypot(R_kk, z_k)``, ``c = R_kk/r``, ``s = z_k/r``, then
``[R_k,j ; z_j] ← [c s ; -s c] [R_k,j ; z_j]`` for ``j ≥ k``. O(d²) per row, one pass over
the upper triangle, like a BLAS ``dsyr`` of ``A`` itself. No Python-level loop runs per
column: the kernel is compiled by numba (cached on disk after the first call).

:func:`chol_update_rows_into` is the same update written into another array, so that the old
factor stays intact until the caller decides to keep the new one (an update that must not be
half-applied, :meth:`RecursiveRLS.draft`): no copy of ``R`` is made first, the first rotation
of each row reads the old factor and writes the new one.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, fastmath=False)
def chol_update_rows(R: np.ndarray, Z: np.ndarray) -> None:  # pragma: no cover - compiled
    """In place: ``R`` ← Cholesky factor of ``RᵀR + ZᵀZ``; ``Z`` is used as scratch (clobbered)."""
    n_rows, d = Z.shape
    for i in range(n_rows):
        z = Z[i]
        for k in range(d):
            zk = z[k]
            if zk == 0.0:
                continue
            rkk = R[k, k]
            r = np.sqrt(rkk * rkk + zk * zk)
            c = rkk / r
            s = zk / r
            R[k, k] = r
            row = R[k]
            for j in range(k + 1, d):
                rj = row[j]
                zj = z[j]
                row[j] = c * rj + s * zj
                z[j] = c * zj - s * rj


@numba.njit(cache=True, nogil=True, fastmath=False)
def chol_update_rows_into(R: np.ndarray, Z: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    """``out``'s upper triangle ← Cholesky factor of ``RᵀR + ZᵀZ``; ``R`` is only read, ``Z`` is
    clobbered, ``out``'s strict lower triangle is left as it is (keep it zero)."""
    n_rows, d = Z.shape
    if n_rows == 0:
        for k in range(d):
            for j in range(k, d):
                out[k, j] = R[k, j]
        return
    for i in range(n_rows):
        src = R if i == 0 else out
        z = Z[i]
        for k in range(d):
            zk = z[k]
            if zk == 0.0:
                if i == 0:
                    for j in range(k, d):
                        out[k, j] = src[k, j]
                continue
            rkk = src[k, k]
            r = np.sqrt(rkk * rkk + zk * zk)
            c = rkk / r
            s = zk / r
            out[k, k] = r
            for j in range(k + 1, d):
                rj = src[k, j]
                zj = z[j]
                out[k, j] = c * rj + s * zj
                z[j] = c * zj - s * rj


def warm_up() -> None:
    """Compile (or load from cache) the kernels now rather than on the first real update."""
    R = np.eye(2)
    chol_update_rows(R, np.ones((1, 2)))
    chol_update_rows_into(np.eye(2), np.ones((1, 2)), np.zeros((2, 2)))
