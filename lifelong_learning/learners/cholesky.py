"""Updates of an upper-triangular Cholesky factor by rows: rank-1 (Givens) and rank-k (BLAS-3), and
rank-1 downdates (hyperbolic rotations).

Given upper-triangular ``R`` with ``RᵀR = A`` and rows ``Z`` (``k × d``), the factor of
``A + ZᵀZ`` is wanted (thesis §8.2.4: the state of recursive least squares).

- **Rank-1, per row** (:func:`chol_update_rows`, :func:`chol_update_rows_into`): Givens rotations.
  For row ``z`` and ``k = 0..d-1``, ``r = hypot(R_kk, z_k)``, ``c = R_kk/r``, ``s = z_k/r``, then
  ``[R_k,j ; z_j] ← [c s ; -s c] [R_k,j ; z_j]`` for ``j > k``. O(d²) per row, like a BLAS ``dsyr``
  of ``A`` itself; several rows are swept in one pass over the upper triangle (row ``k`` of ``R``
  meets every row in turn), so that a factor larger than the cache is read once for all of them.
  Compiled by numba (cached on disk after the first call); the inner loop runs over contiguous
  slices so that LLVM vectorizes it (the same arithmetic, bit for bit, as a scalar loop: no
  fast-math, no reassociation). Measured at d = 1280: 1.4–1.6× one ``dsyr`` per row
  (benchmarks/bench_rlsc.py), where the former scalar loop was 5–7×.
- **Rank-k, a block** (:func:`chol_update_block`): ``A + ZᵀZ`` formed with BLAS-3 and factored
  again, ``R' = chol(RᵀR + ZᵀZ)``: ``RᵀR`` by LAPACK ``dlauum`` (d³/3 flops, on the reversed
  factor: ``J R J`` is lower triangular and ``RᵀR = J (JRJ)ᵀ(JRJ) J``), ``ZᵀZ`` by ``dsyrk`` (or
  given, when several engines learn the same rows), and ``dpotrf`` (d³/3). It costs
  O(kd² + d³) at BLAS-3 speed, against O(kd²) for k Givens sweeps at vector speed: worth it for
  ``k ≥ d / BLOCK_ROWS_DIVISOR`` (:func:`block_pays`, measured crossover). The result is the batch
  solution's factor: a normal-equations factorization, whose backward error ``ε‖A‖`` is that of
  solving the whole problem at once, and which the Givens path matches to rounding
  (test/learners/test_cholesky.py checks 1e-10 on predictions).

:func:`chol_update_rows_into` is the rank-1 update written into another array, so that the old
factor stays intact until the caller decides to keep the new one (an update that must not be
half-applied, :meth:`RecursiveRLS.draft`): no copy of ``R`` is made first, the first rotation
of each row reads the old factor and writes the new one.

- **Rank-1 downdate, per row** (:func:`chol_downdate_rows`): the factor of ``A − ZᵀZ`` (exact
  unlearning, :mod:`~lifelong_learning.learners.unlearning`) by hyperbolic rotations. For row ``z``
  and ``k = 0..d-1``: ``r = sqrt(R_kk² − z_k²)``, ``c = r/R_kk``, ``s = z_k/R_kk``, ``R_kk ← r``,
  then for ``j > k``: ``R_kj ← (R_kj − s z_j)/c`` and ``z_j ← c z_j − s R_kj`` (with the new
  ``R_kj``). Row ``k`` of the new factor satisfies ``R'_kᵀR'_k = R_kᵀR_k − z⁽ᵏ⁾ᵀz⁽ᵏ⁾`` restricted to
  columns ≥ k, the hyperbolic counterpart ``[c −s; −s c]/c`` of the Givens step above
  (Golub & Van Loan, *Matrix Computations*, §6.5.4). O(d²) per row. Unlike the update it can fail:
  ``A − zᵀz`` may not be positive definite, or cancellation may make a pivot meaningless; a pivot
  ``r² < floor`` stops the downdate (the caller passes a floor it knows the exact pivots exceed,
  e.g. ``λ/2`` for ``A = λI + ZᵀZ``, whose pivots are Schur complements ≥ λ).
"""

from __future__ import annotations

import numba
import numpy as np
from scipy.linalg import blas, lapack

#: a block of k rows is factored again (BLAS-3) rather than swept row by row when
#: ``k · BLOCK_ROWS_DIVISOR ≥ d``: measured crossover on a 2-core EPYC at d = 500..1280
#: (rank-1 ≈ 2.4e-10 s per entry of the triangle, ``RᵀR`` + ``dpotrf`` ≈ 3e-11 d³ s)
BLOCK_ROWS_DIVISOR = 6
#: never refactor for fewer rows than this (the fixed cost of the BLAS-3 path dominates)
BLOCK_MIN_ROWS = 8


@numba.njit(cache=True, nogil=True, fastmath=False)
def chol_update_rows(R: np.ndarray, Z: np.ndarray) -> None:  # pragma: no cover - compiled
    """In place: ``R`` ← Cholesky factor of ``RᵀR + ZᵀZ``; ``Z`` is used as scratch (clobbered).

    Row ``k`` of ``R`` meets every row of ``Z`` in turn before row ``k + 1`` (one pass over ``R`` for
    all the rows: the rotation of row ``k`` with row ``i`` needs row ``k`` after the rows before
    ``i`` and row ``i`` after the rows of ``R`` before ``k``, in either loop order): the same
    arithmetic, bit for bit, as sweeping the rows one after the other."""
    n_rows, d = Z.shape
    for k in range(d):
        for i in range(n_rows):
            z = Z[i]
            zk = z[k]
            if zk == 0.0:
                continue
            rkk = R[k, k]
            r = np.sqrt(rkk * rkk + zk * zk)
            c = rkk / r
            s = zk / r
            R[k, k] = r
            row = R[k, k + 1 :]  # contiguous slices: the loop below is vectorized
            rest = z[k + 1 :]
            for j in range(row.shape[0]):
                rj = row[j]
                zj = rest[j]
                row[j] = c * rj + s * zj
                rest[j] = c * zj - s * rj


@numba.njit(cache=True, nogil=True, fastmath=False)
def chol_update_rows_into(R: np.ndarray, Z: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    """``out``'s upper triangle ← Cholesky factor of ``RᵀR + ZᵀZ``; ``R`` is only read, ``Z`` is
    clobbered, ``out``'s strict lower triangle is left as it is (keep it zero). One pass over ``R``
    (as :func:`chol_update_rows`): row ``k`` is copied, then rotated with every row of ``Z``."""
    n_rows, d = Z.shape
    for k in range(d):
        out[k, k:] = R[k, k:]
        for i in range(n_rows):
            z = Z[i]
            zk = z[k]
            if zk == 0.0:
                continue
            rkk = out[k, k]
            r = np.sqrt(rkk * rkk + zk * zk)
            c = rkk / r
            s = zk / r
            out[k, k] = r
            row = out[k, k + 1 :]
            rest = z[k + 1 :]
            for j in range(row.shape[0]):
                rj = row[j]
                zj = rest[j]
                row[j] = c * rj + s * zj
                rest[j] = c * zj - s * rj


@numba.njit(cache=True, nogil=True, fastmath=False)
def chol_downdate_rows(R: np.ndarray, Z: np.ndarray, floor: float) -> int:  # pragma: no cover - compiled
    """In place: ``R`` ← Cholesky factor of ``RᵀR − ZᵀZ`` by hyperbolic rotations (module docstring);
    ``Z`` is clobbered. Returns -1 when done, else the row index at which a pivot ``r²`` fell below
    ``floor`` (``R`` is then half-downdated: pass a copy)."""
    n_rows, d = Z.shape
    for i in range(n_rows):
        z = Z[i]
        for k in range(d):
            zk = z[k]
            if zk == 0.0:
                continue
            rkk = R[k, k]
            r2 = (rkk - zk) * (rkk + zk)
            if not r2 >= floor:  # NaN too
                return i
            r = np.sqrt(r2)
            c = r / rkk
            s = zk / rkk
            R[k, k] = r
            row = R[k, k + 1 :]
            rest = z[k + 1 :]
            for j in range(row.shape[0]):
                rj = (row[j] - s * rest[j]) / c
                row[j] = rj
                rest[j] = c * rest[j] - s * rj
    return -1


def block_pays(n_rows: int, d: int) -> bool:
    """Whether ``n_rows`` new rows are cheaper as one BLAS-3 refactorization than as Givens sweeps."""
    return n_rows >= max(BLOCK_MIN_ROWS, d // BLOCK_ROWS_DIVISOR)


def gram(Z: np.ndarray) -> np.ndarray:
    """``ZᵀZ`` of ``k × d`` rows by ``dsyrk`` (upper triangle filled, the strict lower one zero)."""
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    return blas.dsyrk(1.0, Z.T, trans=0, lower=0)  # Zᵀ of a C-ordered Z is Fortran-ordered: no copy


def factor_gram(R: np.ndarray) -> np.ndarray:
    """``RᵀR`` of an upper-triangular ``R`` in d³/3 flops (``dlauum`` on ``J R J``), upper triangle
    filled (the strict lower one is not meaningful), Fortran-ordered."""
    reversed_lower = np.asfortranarray(R[::-1, ::-1])  # J R J: lower triangular
    product, info = lapack.dlauum(reversed_lower, lower=1, overwrite_c=1)
    if info != 0:  # pragma: no cover - only for malformed input
        raise ValueError(f"dlauum failed (info {info})")
    return np.asfortranarray(product[::-1, ::-1])  # J (JRJ)ᵀ(JRJ) J = RᵀR; its upper triangle


def chol_update_block(R: np.ndarray, Z: np.ndarray, gram_of_rows: np.ndarray | None = None) -> np.ndarray:
    """The upper Cholesky factor of ``RᵀR + ZᵀZ`` (C-ordered, zero strict lower triangle) by one
    BLAS-3 refactorization (module docstring); ``R`` and ``Z`` are not written.

    Args:
        R: ``d × d`` upper triangular with a positive diagonal.
        Z: ``k × d`` rows (ignored when ``gram_of_rows`` is given, except for its width).
        gram_of_rows: ``ZᵀZ`` if the caller has it (:func:`gram`; upper triangle used).

    Raises:
        ValueError: the sum is not numerically positive definite (it is for finite rows).
    """
    A = factor_gram(R)
    G = gram(Z) if gram_of_rows is None else gram_of_rows
    A += G  # dpotrf reads the upper triangle only
    factor, info = lapack.dpotrf(A, lower=0, clean=1, overwrite_a=1)
    if info != 0:
        raise ValueError(f"the updated matrix is not positive definite (dpotrf info {info})")
    return np.ascontiguousarray(factor)


def warm_up() -> None:
    """Compile (or load from cache) the kernels now rather than on the first real update."""
    R = np.eye(2)
    chol_update_rows(R, np.ones((1, 2)))
    chol_update_rows_into(np.eye(2), np.ones((1, 2)), np.zeros((2, 2)))
    chol_downdate_rows(2.0 * np.eye(2), np.ones((1, 2)), 0.0)
