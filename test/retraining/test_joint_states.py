"""Joint states of the inverse-dynamics job (retraining/joint_states.py): read a block at a time,
filtered, with q̈, into a row store; residual outliers flagged."""

import numpy as np
import pytest

from lifelong_learning.dynamics.acceleration import estimate_accelerations
from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics
from lifelong_learning.io.bags import BagError, JointStateStream, write_joint_states
from lifelong_learning.retraining.joint_states import JointStateReader, flag_outliers
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text


def _read(bag, block, limit_margin=1.0, outlier_k=6.0):
    stream = JointStateStream([bag], block=block)
    return JointStateReader(panda_urdf_text(), block, limit_margin, outlier_k, 0.01).read(stream)


def test_a_log_read_in_batches_gives_the_rows_of_one_batch(tmp_path):
    """Batches of 100 rows (q̈ continued across them, 3 rows of context for the spike and velocity
    tests) store the rows one batch stores: the same rows, stretches and bags, q̈ to rounding, and
    the same one spike left out and counted."""
    log = PandaSimulation().run(4.0, seed=2, log_every=5)
    log["tau"][150, 1] += 40.0
    write_joint_states(tmp_path / "bag", log["t"], JOINT_NAMES, log["q"], log["qd"], log["tau"])
    whole, batched = _read(tmp_path / "bag", 10_000), _read(tmp_path / "bag", 100)
    try:
        assert whole.skipped == batched.skipped == {"spike (against its neighbours)": 1}
        assert whole.store.n == batched.store.n == log["t"].size - 1
        a, b = whole.store.read(0, whole.store.n), batched.store.read(0, batched.store.n)
        for name in ("t", "q", "qd", "tau"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        np.testing.assert_allclose(b.qdd, a.qdd, rtol=1e-12, atol=1e-9)
        kept = np.delete(np.arange(log["t"].size), 150)
        qdd = estimate_accelerations(log["t"][kept], log["qd"][kept])  # the node's filter on the rows kept
        np.testing.assert_allclose(a.qdd, qdd, rtol=1e-12, atol=1e-9)
        assert whole.store.starts == batched.store.starts == [0]
        assert whole.joint_names == batched.joint_names == list(JOINT_NAMES)
        np.testing.assert_allclose(batched.sum_qd2, (log["qd"][kept] ** 2).sum(axis=0))
        assert whole.bags == [str(tmp_path / "bag")]
    finally:
        whole.store.close()
        batched.store.close()


def test_a_log_beyond_the_limits_is_refused_and_leaves_no_file(tmp_path):
    log = PandaSimulation().run(1.0, seed=2, log_every=5)
    write_joint_states(tmp_path / "bag", log["t"], JOINT_NAMES, log["q"], log["qd"], 1e6 + log["tau"])
    with pytest.raises(BagError, match=r"no joint state within the URDF's limits \(margin 1\)"):
        _read(tmp_path / "bag", 50)


def test_residual_outliers_are_flagged_counted_and_left_out(tmp_path):
    """A torque 30 N·m off on one row (kept by the reader: no spike test with k = inf) is beyond 6
    robust scales of the rigid-body residuals: left out and counted for its part, besides the rows
    the clean log leaves out (its robust scale barely moves)."""
    log = PandaSimulation().run(4.0, seed=3, log_every=5)
    flagged = {}
    for name, glitch in (("clean", 0.0), ("glitch", 30.0)):
        tau = log["tau"].copy()
        tau[200, 3] += glitch
        write_joint_states(tmp_path / name, log["t"], JOINT_NAMES, log["q"], log["qd"], tau)
        read = _read(tmp_path / name, 10_000, outlier_k=float("inf"))
        try:
            store = read.store
            assert store.n == log["t"].size and read.skipped == {}
            par = SemiparametricInverseDynamics(panda_urdf_text(), JOINT_NAMES, mode="parametric")
            for rows in store.blocks(0, store.n):
                par.update(*rows.arrays)
            assert flag_outliers(read, par, 0, store.n, float("inf"), "test part", 10_000, 0) == 0
            n = flag_outliers(read, par, 0, store.n, 6.0, "training part", 10_000, 0)
            flagged[name] = set(np.flatnonzero(store.left_out(0, store.n)).tolist())
            assert n == len(flagged[name]) and read.skipped == {"residual outlier (training part)": n}
        finally:
            read.store.close()
    assert flagged["glitch"] == flagged["clean"] | {200} and 200 not in flagged["clean"], flagged
