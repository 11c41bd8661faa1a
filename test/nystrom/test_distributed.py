"""Nyström tuning across processes: two gloo processes under torchrun give the one-process model."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import said

from lifelong_learning.nystrom import tune
from lifelong_learning.nystrom.distributed import (
    ONE_PROCESS,
    GroupSetupError,
    JobProgress,
    ShardedRows,
    contiguous_shares,
    joined,
)
from lifelong_learning.nystrom.objectives import SUMS_OBJECTIVES

JOB = Path(__file__).with_name("distributed_job.py")


def _data(n: int = 300, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    Y = np.stack([np.sin(2 * X[:, 0]) * X[:, 1], np.cos(X[:, 2])], 1) + 0.05 * rng.normal(size=(n, 2))
    return {"X": X, "Y": Y, "X_test": rng.uniform(-2, 2, size=(100, 3))}


def _torchrun(tmp_path: Path, objective: str, *extra: str, nproc: int = 2) -> subprocess.CompletedProcess:
    data = tmp_path / "data.npz"
    np.savez(data, **_data())
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = str(tmp_path / "out.npz")
    cmd = [torchrun, "--standalone", f"--nproc-per-node={nproc}", str(JOB), str(data), out, objective, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


@pytest.mark.parametrize("objective", ["proposed", "gcv"])
def test_two_processes_give_the_one_process_model(tmp_path, objective):
    res = _torchrun(tmp_path, objective)
    assert res.returncode == 0, said(res)
    out = np.load(tmp_path / "out.npz")
    assert int(out["world_size"]) == 2
    data = _data()
    one = tune(data["X"], data["Y"], centers=12, objective=objective, epochs=8, lr=0.1, seed=1)
    np.testing.assert_allclose(out["history"], one.tuning_.history, rtol=1e-9)
    pred = one.predict(data["X_test"])
    assert np.max(np.abs(out["pred"] - pred)) <= 1e-8 * np.max(np.abs(pred))
    assert 0 < int(out["rows"]) < 300  # rank 0 held a share, not everything
    # the job's counters see every process's count; the main process's decisions are everyone's
    assert int(out["counted"]) == 300
    assert out["decisions"].tolist() == [True, True]
    assert "rows read (2 processes)" in res.stderr and "300/300" in res.stderr  # the whole job's bar


def test_a_corrupt_share_on_one_process_fails_every_process_with_its_message(tmp_path):
    res = _torchrun(tmp_path, "proposed", "--fail-rank", "1")
    assert res.returncode != 0
    assert "rank 1: ValueError: X contains NaN or Inf" in res.stdout + res.stderr
    assert not (tmp_path / "out.npz").exists()


def test_hold_out_objectives_are_refused_across_processes(tmp_path):
    res = _torchrun(tmp_path, "holdout-bags")
    assert res.returncode != 0
    assert "cannot be tuned across processes" in res.stdout + res.stderr
    assert "holdout" not in SUMS_OBJECTIVES


def test_a_rendezvous_that_does_not_answer_is_a_setup_error(monkeypatch):
    with socket.socket() as s:  # a port nobody listens on: bound, never listening, held until the end
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        for key, value in {
            "RANK": "1",
            "WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }.items():
            monkeypatch.setenv(key, value)
        with pytest.raises(
            GroupSetupError,
            match=rf"could not join the process group \(rank 1 of 2, rendezvous 127.0.0.1:{port}\)",
        ):
            with joined(backend="gloo", timeout_s=2):
                pass
    assert not torch.distributed.is_initialized()


def test_one_process_progress_and_decisions():
    add = ONE_PROCESS.counter("x")
    assert (add(3), add(4)) == (3, 7)
    assert ONE_PROCESS.decided(True) is True
    with JobProgress(ONE_PROCESS, 10, "off", enabled=False) as progress:
        progress.add(5)  # disabled: nothing counted, nothing shown


def test_contiguous_shares_keep_the_order_and_balance_the_weights():
    shares = contiguous_shares([5, 1, 1, 1, 1, 1], 2)
    assert shares == [range(0, 1), range(1, 6)]
    assert contiguous_shares([1] * 4, 3) == [range(0, 1), range(1, 3), range(3, 4)]
    # one heavy item would leave a share empty: equal counts instead, every process reads something
    assert contiguous_shares([100, 1, 1], 3) == [range(0, 1), range(1, 2), range(2, 3)]
    assert [len(s) for s in contiguous_shares([1, 1], 4)].count(0) == 2
    assert contiguous_shares([], 2) == [range(0, 0), range(0, 0)]


def test_one_process_rows_are_the_rows():
    X = torch.arange(12.0).reshape(6, 2)
    rows = ShardedRows(X, None, ONE_PROCESS)
    assert (rows.total, rows.offset) == (6, 0)
    torch.testing.assert_close(rows.rows([4, 1]), X[[4, 1]])
    with pytest.raises(IndexError):
        rows.rows([6])
