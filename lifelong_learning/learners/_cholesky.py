"""Compiled kernel: rank-1 updates of an upper-triangular Cholesky factor (thesis §8.2.4).

Given upper-triangular ``R`` with ``RᵀR = A``, :func:`chol_update_rows` overwrites ``R`` with
the factor of ``A + Σᵢ zᵢzᵢᵀ`` over the rows ``zᵢ`` of ``Z`` by Givens rotations: for row
``z`` and ``k = 0..d-1``, ``r = hypot(R_kk, z_k)``, ``c = R_kk/r``, ``s = z_k/r``, then
``[R_k,j ; z_j] ← [c s ; -s c] [R_k,j ; z_j]`` for ``j ≥ k``. O(d²) per row, one pass over
the upper triangle, like a BLAS ``dsyr`` of ``A`` itself. No Python-level loop runs per
column: the kernel is compiled by numba (cached on disk after the first call).
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


def warm_up() -> None:
    """Compile (or load from cache) the kernel now rather than on the first real update."""
    R = np.eye(2)
    chol_update_rows(R, np.ones((1, 2)))
