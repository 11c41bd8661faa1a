"""RecursiveRLS equals (weighted) batch ridge regression, and rejects bad input unchanged."""

import numpy as np
import pytest

from lifelong_learning.learners import RecursiveRLS


def batch_ridge(Z, U, lam, beta=1.0):
    k = Z.shape[0]
    w = beta ** np.arange(k - 1, -1, -1)
    A = (Z * w[:, None]).T @ Z + beta**k * lam * np.eye(Z.shape[1])
    return np.linalg.solve(A, (Z * w[:, None]).T @ U)


@pytest.mark.parametrize("beta", [1.0, 0.99, 0.9])
@pytest.mark.parametrize("batch", [1, 7])
def test_equals_weighted_batch_ridge(beta, batch):
    rng = np.random.default_rng(1)
    Z, U = rng.standard_normal((400, 25)), rng.standard_normal((400, 4))
    rls = RecursiveRLS(25, 4, lam=0.3, forgetting=beta)
    for i in range(0, 400, batch):
        rls.update(Z[i : i + batch], U[i : i + batch])
    W = batch_ridge(Z, U, 0.3, beta)
    assert np.linalg.norm(rls.weights - W) / np.linalg.norm(W) < 1e-8
    R = rls.cholesky_factor
    A = R.T @ R
    w = beta ** np.arange(399, -1, -1)
    assert np.allclose(A, (Z * w[:, None]).T @ Z + beta**400 * 0.3 * np.eye(25), rtol=1e-9, atol=1e-9)
    Zt = rng.standard_normal((3, 25))  # few rows: the triangular-solve path
    assert np.allclose(rls.predict(Zt), Zt @ W, rtol=1e-8, atol=1e-10)


def test_long_forgetting_run_rescales_without_losing_precision():
    rng = np.random.default_rng(2)
    rls = RecursiveRLS(5, 1, lam=1.0, forgetting=0.5)  # s² hits 1e-100 after ~330 samples
    Z, U = rng.standard_normal((1000, 5)), rng.standard_normal((1000, 1))
    rls.update(Z, U)
    W = batch_ridge(Z[-200:], U[-200:], 1e-300, 0.5)  # older samples weigh < 2^-200
    assert np.allclose(rls.weights, W, rtol=1e-8)
    assert np.all(np.isfinite(rls.cholesky_factor))


def test_prediction_paths_agree_and_weights_cache_invalidated():
    rng = np.random.default_rng(3)
    rls = RecursiveRLS(10, 30, lam=1.0)
    rls.update(rng.standard_normal((50, 10)), rng.standard_normal((50, 30)))
    x = rng.standard_normal((2, 10))
    via_solves = rls.predict(x)  # 2 rows < 30 outputs, no cached W: solves per row
    via_weights = x @ rls.weights
    assert np.allclose(via_solves, via_weights, rtol=1e-10)
    rls.update(x, np.ones((2, 30)))
    assert not np.allclose(rls.predict(x), via_weights)


def test_add_outputs_is_a_zero_target_column():
    rng = np.random.default_rng(4)
    Z, U = rng.standard_normal((60, 6)), rng.standard_normal((60, 2))
    rls = RecursiveRLS(6, 2, lam=0.1)
    rls.update(Z[:30], U[:30])
    rls.add_outputs(1)
    rls.update(Z[30:], np.c_[U[30:], np.ones(30)])
    Y = np.c_[U, np.r_[np.zeros(30), np.ones(30)]]
    assert np.allclose(rls.weights, batch_ridge(Z, Y, 0.1), rtol=1e-9)


def test_bad_input_raises_and_leaves_state_unchanged():
    rls = RecursiveRLS(3, 2, lam=1.0)
    rls.update([1.0, 2.0, 3.0], [1.0, 0.0])
    before = rls.to_state()
    for Z, U in [
        ([1.0, 2.0], [1.0, 0.0]),  # wrong width
        ([1.0, np.nan, 3.0], [1.0, 0.0]),
        ([1.0, 2.0, 3.0], [np.inf, 0.0]),
        ([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], [[1.0, 0.0]]),  # row mismatch
        ([1.0, 2.0, 3.0], [1.0, 0.0, 5.0]),
    ]:
        with pytest.raises(ValueError):
            rls.update(Z, U)
    after = rls.to_state()
    assert before[0] == after[0]
    for key in before[1]:
        assert np.array_equal(before[1][key], after[1][key])
    with pytest.raises(ValueError):
        RecursiveRLS(3, 1, lam=0.0)
    with pytest.raises(ValueError):
        RecursiveRLS(3, 1, forgetting=1.5)


def test_state_round_trip_and_validation():
    rng = np.random.default_rng(5)
    rls = RecursiveRLS(8, 3, lam=0.5, forgetting=0.95)
    rls.update(rng.standard_normal((40, 8)), rng.standard_normal((40, 3)))
    meta, arrays = rls.to_state()
    clone = RecursiveRLS.from_state(meta, arrays)
    x = rng.standard_normal((5, 8))
    assert np.array_equal(clone.predict(x), rls.predict(x))
    clone.update(x, np.ones((5, 3)))
    rls.update(x, np.ones((5, 3)))
    assert np.allclose(clone.weights, rls.weights, rtol=1e-12)
    not_triangular = arrays["R"].copy()
    not_triangular[2, 0] = 1.0
    negative_pivot = arrays["R"].copy()
    negative_pivot[1, 1] *= -1
    for R in (not_triangular, negative_pivot, np.full_like(arrays["R"], np.nan)):
        with pytest.raises(ValueError):
            RecursiveRLS.from_state(meta, dict(arrays, R=R))
    with pytest.raises(ValueError):
        RecursiveRLS.from_state({**meta, "n_features": 9}, arrays)


def test_nbytes_counts_the_learned_state():
    rls = RecursiveRLS(n_features=50, n_outputs=3, lam=1.0)
    assert rls.nbytes == 8 * (50 * 50 + 50 * 3)  # factor and right-hand side, no weights yet
    rls.update(np.ones((4, 50)), np.ones((4, 3)))
    assert rls.weights.shape == (50, 3)
    assert rls.nbytes == 8 * (50 * 50 + 2 * 50 * 3)  # the weights are cached once solved


def same_state(a: RecursiveRLS, b: RecursiveRLS) -> bool:
    (ma, aa), (mb, ab) = a.to_state(), b.to_state()
    return ma == mb and aa.keys() == ab.keys() and all(np.array_equal(aa[k], ab[k]) for k in aa)


@pytest.mark.parametrize("beta", [1.0, 0.95])
def test_a_draft_never_writes_its_engine_and_its_commit_equals_updating_in_place(beta):
    rng = np.random.default_rng(4)
    Z, U = rng.standard_normal((60, 6)), rng.standard_normal((60, 2))
    Z[Z < -0.3] = 0.0  # zeros take the kernel's skip path (CNN features have many)
    direct = RecursiveRLS(6, 2, lam=0.5, forgetting=beta)
    drafted = RecursiveRLS(6, 2, lam=0.5, forgetting=beta)
    for i in range(0, 60, 5):
        before = drafted.to_state()
        draft = drafted.draft()
        draft.update(Z[i : i + 5], U[i : i + 5])
        assert not np.array_equal(draft.to_state()[1]["R"], before[1]["R"])
        meta, arrays = drafted.to_state()  # the engine is untouched until the commit
        assert meta == before[0] and all(np.array_equal(arrays[k], before[1][k]) for k in arrays)
        if i == 40:  # a dropped draft leaves the engine as it was
            continue
        drafted.commit(draft)
        direct.update(Z[i : i + 5], U[i : i + 5])
        assert same_state(direct, drafted)  # bit for bit what the in-place update gives
    assert drafted.is_finite()
    # New outputs on a draft: the engine keeps its own.
    draft = drafted.draft()
    draft.add_outputs(1)
    draft.update(Z[:1], [[1.0, 0.0, 2.0]])
    assert drafted.n_outputs == 2 and same_state(direct, drafted)
    drafted.commit(draft)
    assert drafted.n_outputs == 3
    with pytest.raises(ValueError, match="not a pending draft"):
        direct.commit(drafted.draft())
    with pytest.raises(ValueError, match="not a pending draft"):
        drafted.commit(draft)  # already committed
    before = drafted.to_state()[1]["R"].copy()
    draft.update(Z[:1], [[1.0, 0.0, 2.0]])  # a spent draft's writes never reach the engine
    np.testing.assert_array_equal(drafted.to_state()[1]["R"], before)


def test_add_sums_equals_learning_the_rows_and_refuses_what_it_cannot_apply():
    rng = np.random.default_rng(3)
    Z, U = rng.normal(size=(40, 5)), rng.normal(size=(40, 2))
    rows = RecursiveRLS(5, 2, lam=0.5)
    rows.update(Z[:10], U[:10])
    rows.update(Z[10:], U[10:])
    sums = RecursiveRLS(5, 2, lam=0.5)
    sums.update(Z[:10], U[:10])
    sums.add_sums(Z[10:].T @ Z[10:], Z[10:].T @ U[10:], 30)
    np.testing.assert_allclose(sums.weights, rows.weights, rtol=1e-10, atol=1e-12)
    assert sums.n_samples == rows.n_samples == 40
    before = sums.weights.copy()
    with pytest.raises(ValueError, match="shapes"):
        sums.add_sums(np.eye(4), np.zeros((4, 2)), 1)
    with pytest.raises(ValueError, match="finite"):
        sums.add_sums(np.full((5, 5), np.nan), np.zeros((5, 2)), 1)
    with pytest.raises(ValueError, match="positive definite"):
        sums.add_sums(-1e6 * np.eye(5), np.zeros((5, 2)), 1)
    np.testing.assert_array_equal(sums.weights, before)
    with pytest.raises(ValueError, match="forgetting"):
        RecursiveRLS(5, 2, lam=0.5, forgetting=0.99).add_sums(np.eye(5), np.zeros((5, 2)), 1)


@pytest.mark.parametrize("drafted", [False, True])
def test_a_factor_changed_mid_stream_equals_the_weighted_batch_solve(drafted):
    """A_t = β_t A_{t−1} + z_tᵀz_t with β_t changed between updates (set_forgetting, to 1 and back
    included), through drafts too: the batch solve weighing row i by Π_{j>i} β_j, λ by Π_j β_j."""
    rng = np.random.default_rng(11)
    Z, U = rng.standard_normal((480, 12)), rng.standard_normal((480, 3))
    betas = np.repeat([1.0, 0.97, 1.0, 0.9, 0.99], 96)
    rls = RecursiveRLS(12, 3, lam=0.4)
    for i in range(0, 480, 8):
        target = rls.draft() if drafted else rls
        target.set_forgetting(betas[i])
        target.update(Z[i : i + 8], U[i : i + 8])
        if drafted:
            rls.commit(target)
        assert rls.forgetting == betas[i]
    later = np.concatenate([np.cumprod(betas[::-1])[::-1][1:], [1.0]])  # Π_{j>i} β_j
    A = (Z * later[:, None]).T @ Z + np.prod(betas) * 0.4 * np.eye(12)
    W = np.linalg.solve(A, (Z * later[:, None]).T @ U)
    assert np.linalg.norm(rls.weights - W) / np.linalg.norm(W) < 1e-9
    with pytest.raises(ValueError):
        rls.set_forgetting(0.0)
    assert rls.forgetting == 0.99


def test_the_leading_block_is_the_engine_of_the_first_columns():
    rng = np.random.default_rng(12)
    Z, U = rng.standard_normal((300, 10)), rng.standard_normal((300, 2))
    full, small = RecursiveRLS(10, 2, lam=0.2, forgetting=0.98), RecursiveRLS(4, 2, lam=0.2, forgetting=0.98)
    for i in range(0, 300, 6):
        full.update(Z[i : i + 6], U[i : i + 6])
        small.update(Z[i : i + 6, :4], U[i : i + 6])
    lead = full.leading(4)
    np.testing.assert_allclose(lead.weights, small.weights, rtol=1e-9)
    assert (lead.n_samples, lead.forgetting) == (300, 0.98)
    for bad in (0, 11):
        with pytest.raises(ValueError):
            full.leading(bad)


def _weighted_batch_objective(Z, U, lam, betas):
    """min_W (Π β) λ‖W‖² + Σ_i (Π_{j>i} β_j) ‖Wᵀz_i − u_i‖², per output, from scratch."""
    later = np.concatenate([np.cumprod(betas[::-1])[::-1][1:], [1.0]])
    reg = np.prod(betas) * lam
    W = np.linalg.solve((Z * later[:, None]).T @ Z + reg * np.eye(Z.shape[1]), (Z * later[:, None]).T @ U)
    return reg * (W * W).sum(0) + (later[:, None] * (Z @ W - U) ** 2).sum(0)


@pytest.mark.parametrize("batch", [1, 5, 200])
def test_the_batch_objective_is_the_identity_of_the_online_errors(batch):
    """Without forgetting: Σ_t e_t²/(1 + z_tᵀA_{t−1}⁻¹z_t) (the identity's left side, row by row)
    equals the engine's batch objective read off its state, per output, to 1e-10 relative; rows
    learned one by one, in small blocks and in one BLAS-3 block alike."""
    from lifelong_learning.learners.prequential_identity import predict_then_learn

    rng = np.random.default_rng(21)
    Z, U = rng.standard_normal((400, 15)), rng.standard_normal((400, 3)) + 2.0
    rls = RecursiveRLS(15, 3, lam=0.7)
    for i in range(0, 400, batch):
        rls.update(Z[i : i + batch], U[i : i + batch])
    weighted = np.zeros(3)
    for t, prediction, leverage in predict_then_learn(RecursiveRLS(15, 3, lam=0.7), Z, U):
        weighted += (prediction - U[t - 1]) ** 2 / (1.0 + leverage)
    np.testing.assert_allclose(rls.batch_objective(), weighted, rtol=1e-10)
    np.testing.assert_allclose(
        rls.batch_objective(), _weighted_batch_objective(Z, U, 0.7, np.ones(400)), rtol=1e-9
    )
    n, total, squares = rls.target_moments()
    assert n == 400 and np.allclose(total, U.sum(0)) and np.allclose(squares, (U * U).sum(0))


def test_with_forgetting_the_batch_objective_is_that_of_the_weighted_rows():
    """Forgetting factors changed mid-stream (through drafts): the objective of the rows' weights, and
    the recursion J_t = βJ_{t−1} + e_t²/(1 + z_tᵀA_{t−1}⁻¹z_t/β) of the online errors."""
    rng = np.random.default_rng(22)
    Z, U = rng.standard_normal((360, 10)), rng.standard_normal((360, 2))
    betas = np.repeat([1.0, 0.97, 1.0, 0.9, 0.99, 0.999], 60)
    rls, online = RecursiveRLS(10, 2, lam=0.4), RecursiveRLS(10, 2, lam=0.4)
    J = np.zeros(2)
    for i in range(0, 360, 6):
        draft = rls.draft()
        draft.set_forgetting(betas[i])
        draft.update(Z[i : i + 6], U[i : i + 6])
        rls.commit(draft)
        online.set_forgetting(betas[i])
        for t in range(i, i + 6):  # one row at a time, its error and leverage before learning it
            z = Z[t : t + 1]
            e, leverage = online.predict(z)[0] - U[t], float(z[0] @ online.solve(z)[:, 0])
            J = betas[t] * J + e**2 / (1.0 + leverage / betas[t])
            online.update(z, U[t : t + 1])
    expected = _weighted_batch_objective(Z, U, 0.4, betas)
    np.testing.assert_allclose(rls.batch_objective(), expected, rtol=1e-8)
    np.testing.assert_allclose(J, expected, rtol=1e-8)


def test_the_targets_moments_follow_the_state_or_are_said_unknown():
    rng = np.random.default_rng(23)
    Z, U = rng.standard_normal((50, 6)), rng.standard_normal((50, 2))
    rls = RecursiveRLS(6, 2, lam=1.0)
    rls.update(Z[:30], U[:30])
    draft = rls.draft()
    draft.update(Z[30:], U[30:])
    assert rls.target_moments()[0] == 30  # a draft never writes its engine
    again = RecursiveRLS.from_state(*rls.to_state(packed=True))
    np.testing.assert_array_equal(again.batch_objective(), rls.batch_objective())
    meta, arrays = rls.to_state()
    older = RecursiveRLS.from_state(meta, {"R": arrays["R"], "B": arrays["B"]})  # saved without them
    assert older.target_moments() is None and np.isnan(older.batch_objective()).all()
    np.testing.assert_allclose(older.batch_objective((U[:30] ** 2).sum(0)), rls.batch_objective(), rtol=1e-12)
    rls.add_outputs(1)
    assert rls.batch_objective()[2] == 0.0 and rls.target_moments()[2].shape == (3,)
    summed = RecursiveRLS(6, 2, lam=1.0)
    summed.add_sums(Z.T @ Z, Z.T @ U, 50, targets=(U.sum(0), (U * U).sum(0)))
    whole = RecursiveRLS(6, 2, lam=1.0)
    whole.update(Z, U)
    np.testing.assert_allclose(summed.batch_objective(), whole.batch_objective(), rtol=1e-9)
    summed.add_sums(Z.T @ Z, Z.T @ U, 50)  # rows by their sums alone: their targets are not known
    assert summed.target_moments() is None


def test_the_targets_range_follows_every_row_learned():
    rng = np.random.default_rng(24)
    Z, U = rng.standard_normal((40, 5)), rng.standard_normal((40, 2))
    rls = RecursiveRLS(5, 2, lam=1.0, forgetting=0.9)
    assert rls.target_range() is None  # nothing learned
    rls.update(Z[:20], U[:20])
    draft = rls.draft()
    draft.update(Z[20:], U[20:])
    np.testing.assert_array_equal(rls.target_range()[1], U[:20].max(0))  # a draft never writes its engine
    rls.commit(draft)
    low, high = rls.target_range()
    np.testing.assert_array_equal(low, U.min(0))
    np.testing.assert_array_equal(high, U.max(0))
    again = RecursiveRLS.from_state(*rls.to_state(packed=True))
    np.testing.assert_array_equal(again.target_range()[0], low)
    rls.add_outputs(1)  # a new class: its targets were 0 so far
    assert rls.target_range()[0][2] == rls.target_range()[1][2] == 0.0
    summed = RecursiveRLS(5, 2, lam=1.0)
    summed.add_sums(Z.T @ Z, Z.T @ U, 40)
    assert summed.target_range() is None


def test_rows_wait_for_the_factor_and_are_swept_in_one_pass_bit_for_bit():
    """Rows wait (QUEUE_ROWS at most) and are swept in one pass when enough came or anything reads the
    factor: the factor is the one of sweeping each row as it came, bit for bit; a draft of an engine
    with waiting rows learns after them, and dropping it leaves the engine and its rows as they were."""
    from lifelong_learning.learners.cholesky import chol_update_rows
    from lifelong_learning.learners.recursive_rls import QUEUE_ROWS

    rng = np.random.default_rng(11)
    d, n = 24, 3 * QUEUE_ROWS + 3
    Z, U = rng.normal(size=(n, d)), rng.normal(size=(n, 2))
    rls = RecursiveRLS(d, 2, lam=0.5)
    reference = np.sqrt(0.5) * np.eye(d)
    for i in range(n):
        rls.update(Z[i], U[i])
        chol_update_rows(reference, Z[i : i + 1].copy())
        assert (rls._pending is None) == ((i + 1) % QUEUE_ROWS == 0)  # swept every QUEUE_ROWS rows
    assert rls._pending is not None and rls._pending.shape[0] == 3
    draft = rls.draft()
    draft.update(Z[:2], U[:2])
    drafted = draft.cholesky_factor  # read: swept into a factor of its own
    assert rls._pending is not None and rls._pending.shape[0] == 3  # the engine's rows still wait
    assert np.array_equal(rls.cholesky_factor, reference)  # read: swept, bit for bit
    with_two = reference.copy()
    chol_update_rows(with_two, Z[:2].copy())
    assert np.array_equal(drafted, with_two)
    W = np.linalg.solve(Z.T @ Z + 0.5 * np.eye(d), Z.T @ U)
    np.testing.assert_allclose(rls.weights, W, rtol=1e-9, atol=1e-12)
