"""The fast paths of the factor updates against the slow references: rank-k (BLAS-3) vs rank-1
(Givens) vs the batch solution, with and without forgetting, and RLSC blocks vs one by one."""

import numpy as np
import pytest
from scipy.linalg import cho_solve, cholesky

from lifelong_learning.learners.cholesky import (
    block_pays,
    chol_downdate_rows,
    chol_update_block,
    chol_update_rows,
    chol_update_rows_into,
    factor_gram,
    gram,
)
from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.learners.rlsc import IncrementalRLSC

TOL = 1e-10  # relative, on predictions (the bar for every fast path)


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def batch_weights(Z: np.ndarray, U: np.ndarray, lam: float, weights: np.ndarray | None = None) -> np.ndarray:
    """The ridge solution from scratch: (ZᵀΩZ + λ_eff I)⁻¹ ZᵀΩU."""
    w = np.ones(Z.shape[0]) if weights is None else weights
    A = (Z * w[:, None]).T @ Z + lam * np.eye(Z.shape[1])
    return np.linalg.solve(A, (Z * w[:, None]).T @ U)


def test_factor_gram_and_gram_are_the_products() -> None:
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(40, 17))
    R = cholesky(Z.T @ Z + np.eye(17), lower=False)
    assert np.allclose(np.triu(factor_gram(R)), np.triu(R.T @ R), rtol=0, atol=1e-12)
    assert np.allclose(np.triu(gram(Z)), np.triu(Z.T @ Z), rtol=0, atol=1e-12)


def test_rank_k_equals_rank_1_and_the_batch_factor() -> None:
    rng = np.random.default_rng(1)
    d = 60
    Z0, Z = rng.normal(size=(100, d)), rng.normal(size=(90, d))
    R = cholesky(Z0.T @ Z0 + 0.5 * np.eye(d), lower=False)
    block = chol_update_block(R, Z)
    givens = R.copy()
    chol_update_rows(givens, Z.copy())
    into = np.zeros_like(R)
    chol_update_rows_into(R, Z.copy(), into)
    batch = cholesky(np.vstack([Z0, Z]).T @ np.vstack([Z0, Z]) + 0.5 * np.eye(d), lower=False)
    assert block.flags.c_contiguous and not np.any(np.tril(block, -1))
    assert np.array_equal(givens, into)  # the out-of-place sweep is the same arithmetic
    assert relative(block, batch) < TOL and relative(givens, batch) < TOL
    assert relative(chol_update_block(R, Z, gram(Z)), block) < 1e-14  # a shared Gram: same factor


@pytest.mark.parametrize(("forgetting", "d", "n"), [(1.0, 48, 400), (0.995, 48, 400), (0.9, 6, 3000)])
def test_an_engine_learns_a_block_as_it_learns_row_by_row(forgetting: float, d: int, n: int) -> None:
    rng = np.random.default_rng(2)
    c = 3  # n rows: the block path (block_pays); β = 0.9 over 3000 rows folds the scale (β^2200 < 1e-100)
    assert block_pays(n, d)
    Z, W = rng.normal(size=(n, d)), rng.normal(size=(d, c))
    U = Z @ W + 0.1 * rng.normal(size=(n, c))
    by_row, by_block = RecursiveRLS(d, c, 0.3, forgetting), RecursiveRLS(d, c, 0.3, forgetting)
    for z, u in zip(Z, U, strict=True):
        by_row.update(z, u)
    by_block.update(Z, U)
    X = rng.normal(size=(20, d))
    assert by_block.n_samples == by_row.n_samples == n
    assert relative(by_block.predict(X), by_row.predict(X)) < TOL
    if forgetting == 1.0:
        assert relative(by_block.predict(X), X @ batch_weights(Z, U, 0.3)) < TOL
    elif forgetting > 0.9:  # no fold: the batch problem with weights β^(n−i) and regularizer β^n λ
        w = forgetting ** np.arange(n - 1, -1, -1)
        assert relative(by_block.predict(X), X @ batch_weights(Z, U, forgetting**n * 0.3, w)) < TOL


def test_a_drafted_block_leaves_the_engine_as_it_was_until_committed() -> None:
    rng = np.random.default_rng(3)
    d = 30
    rls = RecursiveRLS(d, 2, 1.0)
    rls.update(rng.normal(size=(50, d)), rng.normal(size=(50, 2)))
    before = rls.cholesky_factor, rls.rhs.copy()
    draft = rls.draft()
    Z, U = rng.normal(size=(200, d)), rng.normal(size=(200, 2))
    draft.update(Z, U, gram=gram(Z))
    assert np.array_equal(rls.cholesky_factor, before[0]) and np.array_equal(rls.rhs, before[1])
    rls.commit(draft)
    assert rls.n_samples == 250
    R = cholesky(before[0].T @ before[0] + Z.T @ Z, lower=False)
    assert relative(rls.weights, cho_solve((R, False), before[1] + Z.T @ U)) < TOL


@pytest.mark.parametrize("max_validation", [300, 7])  # 7: the buffer fills and replaces
def test_rlsc_learns_a_block_as_it_learns_sample_by_sample(max_validation: int) -> None:
    rng = np.random.default_rng(4)
    d, n = 40, 600
    centers = rng.normal(size=(5, d))
    y = rng.integers(0, 5, size=n)
    X = centers[y] + 0.7 * rng.normal(size=(n, d))
    kwargs = {"lambdas": [0.01, 0.1, 1.0, 10.0], "alpha": "auto", "max_validation": max_validation}
    one, block = IncrementalRLSC(**kwargs), IncrementalRLSC(**kwargs)
    for x, label in zip(X[:300], y[:300], strict=True):
        one.partial_fit(x, label)
    block.partial_fit(X[:300], y[:300])
    one.partial_fit(X[300:], y[300:])  # both: a block on a learned model
    block.partial_fit(X[300:], y[300:])
    assert np.array_equal(one.class_counts_, block.class_counts_)
    assert np.array_equal(one.seen_counts_, block.seen_counts_)
    Xv_one, yv_one = one.validation_samples()
    Xv_block, yv_block = block.validation_samples()
    assert np.array_equal(Xv_one, Xv_block) and yv_one == yv_block
    for S_one, S_block in zip(
        one._validation_scores(), block._validation_scores(), strict=True
    ):  # the kept validation scores
        assert relative(S_block, S_one) < 1e-9
    assert (one.lambda_, one.alpha_) == (block.lambda_, block.alpha_)
    T = rng.normal(size=(30, d))
    assert relative(block.decision_function(T), one.decision_function(T)) < TOL


@pytest.mark.parametrize("read_first", [False, True])
def test_a_draft_defers_its_rows_and_commits_them_in_place(read_first: bool) -> None:
    """A few rows wait in the draft (the engine's factor untouched) and are swept in place at commit;
    a draft whose state is read first settles them into a spare buffer. Both equal a direct update
    bit for bit; a dropped draft changes nothing."""
    rng = np.random.default_rng(5)
    d = 64
    base = rng.normal(size=(80, d)), rng.normal(size=(80, 4))
    Z, U = rng.normal(size=(3, d)), rng.normal(size=(3, 4))
    direct, engine = RecursiveRLS(d, 4, 0.5), RecursiveRLS(d, 4, 0.5)
    for rls in (direct, engine):
        rls.update(*base)
    direct.update(Z, U)
    before = engine.cholesky_factor, engine.rhs.copy()
    dropped = engine.draft()
    dropped.update(Z, U)
    assert np.array_equal(engine.cholesky_factor, before[0]) and np.array_equal(engine.rhs, before[1])
    draft = engine.draft()
    draft.update(Z, U)
    if read_first:
        assert np.array_equal(draft.predict(Z), direct.predict(Z))
        assert np.array_equal(engine.cholesky_factor, before[0])
    engine.commit(draft)
    assert np.array_equal(engine.cholesky_factor, direct.cholesky_factor)
    assert np.array_equal(engine.rhs, direct.rhs)


def test_downdate_gives_the_factor_of_the_difference_and_stops_below_the_floor() -> None:
    """Hyperbolic rotations: chol(A) downdated by rows Z is chol(A − ZᵀZ); a pivot that would fall
    below the floor stops it and names the row (the caller works on a copy)."""
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(30, 12))
    R = cholesky(Z.T @ Z + 0.5 * np.eye(12), lower=False)
    assert chol_downdate_rows(R, Z[:7].copy(), 0.25) == -1
    expected = cholesky(Z[7:].T @ Z[7:] + 0.5 * np.eye(12), lower=False)
    assert np.allclose(R, expected, rtol=0, atol=1e-12)
    assert np.all(np.tril(R, -1) == 0)
    R = cholesky(Z[:3].T @ Z[:3] + 0.5 * np.eye(12), lower=False)
    outside = np.vstack([Z[0], Z[10]])  # Z[10] was never added: A − zzᵀ is not positive definite
    assert chol_downdate_rows(R, outside, 0.25) == 1
