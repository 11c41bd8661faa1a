"""``lifelong-learning tune`` under torchrun: two gloo processes share the bags and give the
one-process model; a corrupt bag on one process ends the job with no model written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import said

from lifelong_learning.cli import main
from lifelong_learning.io.bags import write_labeled_features
from lifelong_learning.learners.rlsc import IncrementalRLSC

OPTIONS = [
    "--task",
    "classification",
    "--centers",
    "40",
    "--epochs",
    "10",
    "--device",
    "cpu",
    "--sample-rows",
    "200",  # of about 300 training samples: the tuning sample is drawn across processes too
    "--no-progress",
]


@pytest.fixture(scope="module")
def bags(tmp_path_factory):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X, y = X[:420] / 16.0, [f"digit{v}" for v in y[:420]]
    root = tmp_path_factory.mktemp("bags")
    paths = []
    for name, (a, b) in zip("abc", [(0, 180), (180, 300), (300, 420)], strict=True):
        write_labeled_features(root / name, X[a:b], y[a:b], storage="mcap")
        paths.append(root / name)
    return paths, X


def _torchrun(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    cmd = [torchrun, "--standalone", "--nproc-per-node=2", "-m", "lifelong_learning.cli", "tune", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def _one_and_two(paths, X, args: list[str], tmp_path: Path):
    """``tune`` with ``args`` in this process and under torchrun (2 processes): both succeed and give
    the same classes and scores on ``X`` (1e-8 of the largest); their models, reports and the
    torchrun run."""
    one, two = tmp_path / "one.npz", tmp_path / "two.npz"
    assert main(["tune", *map(str, paths), *OPTIONS, *args, "--out", str(one)]) == 0
    res = _torchrun([*map(str, paths), *OPTIONS, *args, "--out", str(two)], tmp_path)
    assert res.returncode == 0, said(res)
    a, b = IncrementalRLSC.load(one), IncrementalRLSC.load(two)
    assert a.classes_.tolist() == b.classes_.tolist()
    sa, sb = a.decision_function(X), b.decision_function(X)
    assert np.max(np.abs(sa - sb)) <= 1e-8 * np.max(np.abs(sa))
    reports = [json.loads((tmp_path / f"{n}.npz.report.json").read_text()) for n in ("one", "two")]
    return a, b, reports, res


def test_two_processes_write_the_one_process_model(bags, tmp_path):
    paths, X = bags
    _, _, (r1, r2), res = _one_and_two(paths, X, [], tmp_path)
    assert res.stdout.count("model written to") == 1  # rank 0 reports, rank 1 is quiet
    assert (r1["world_size"], r2["world_size"]) == (1, 2)
    assert r1["samples_per_rank"] == [420]
    assert sum(r2["samples_per_rank"]) == 420 and min(r2["samples_per_rank"]) > 0
    for key in ("n_train", "n_test", "exported_samples", "tuning_rows"):
        assert r1[key] == r2[key]
    assert r1["tuning_rows"] == 200 < r1["n_train"]
    assert r1["promotion"]["n_samples"] == r2["promotion"]["n_samples"] > 0
    assert abs(r1["objectives"]["proposed"]["value"] - r2["objectives"]["proposed"]["value"]) < 1e-9


def test_a_corrupt_bag_on_one_process_ends_the_job_without_a_model(bags, tmp_path):
    paths, _ = bags
    bad = tmp_path / "c"
    shutil.copytree(paths[2], bad)
    for f in bad.glob("*.mcap"):  # its metadata and summary open: the damage is found by reading
        data = bytearray(f.read_bytes())
        data[len(data) // 2 - 200 : len(data) // 2 + 200] = b"\xff" * 400
        f.write_bytes(bytes(data))
    out = tmp_path / "model.npz"
    res = _torchrun([str(paths[0]), str(paths[1]), str(bad), *OPTIONS, "--out", str(out)], tmp_path)
    assert res.returncode != 0
    assert "rank 1: BagError" in res.stderr and "corrupt or truncated" in res.stderr
    assert not out.exists() and not (tmp_path / "model.npz.report.json").exists()


def test_what_does_not_run_across_processes_is_refused_on_every_process(bags, tmp_path):
    paths, _ = bags
    res = _torchrun(
        [*map(str, paths), *OPTIONS, "--objective", "holdout", "--out", str(tmp_path / "m.npz")], tmp_path
    )
    assert res.returncode != 0
    # every process refuses, and names each process's reason
    assert res.stderr.count("error: rank 0: ValueError: objective(s) ['holdout'] cannot be tuned") == 2
    res = _torchrun([str(paths[0]), *OPTIONS, "--out", str(tmp_path / "m.npz")], tmp_path)
    assert res.returncode != 0 and "1 bag(s) for 2 processes" in res.stderr


def test_two_processes_continue_from_a_serving_model_as_one_does(bags, tmp_path):
    """--init: the serving model's classes come first and its held-out samples join the training
    data after every bag's row (on the last process); both processes check the same file."""
    paths, X = bags
    serving = IncrementalRLSC(lambdas=[0.1, 1.0], alpha="auto", validation_every=3)
    rng = np.random.default_rng(0)
    for i in range(60):  # a class the bags lack ("ten"), and some the bags have
        label = ("ten", "digit0", "digit1")[i % 3]
        x = X[i] if label != "ten" else rng.uniform(0, 1, size=X.shape[1])
        serving.partial_fit(x[None], [label])
    serving.save(tmp_path / "serving.llm")
    a, _, (r1, r2), _ = _one_and_two(paths, X, ["--init", str(tmp_path / "serving.llm")], tmp_path)
    assert a.classes_.tolist()[:3] == ["ten", "digit0", "digit1"]
    assert r1["exported_samples"] == r2["exported_samples"] and r1["warnings"] == r2["warnings"]


def test_a_process_whose_share_was_all_taken_back_still_joins_the_job(bags, tmp_path):
    """--serving alone: the serving model unlearned every row of bag a (the first process's share).
    Both processes skip them, the job runs on the other share and gives the one-process model."""
    paths, X = bags
    serving = IncrementalRLSC(lambdas=[0.1, 1.0], alpha="auto", validation_every=3, keep_samples=400)
    serving.partial_fit(np.random.default_rng(0).uniform(size=(20, X.shape[1])), ["ten"] * 20)
    # taught under another name and unlearned: the rows are remembered, no class goes
    serving.partial_fit(X[:180], ["ten"] * 180)
    serving.unlearn(X[:180], ["ten"] * 180)
    serving.save(tmp_path / "serving.llm")
    a, b, reports, _ = _one_and_two(paths, X, ["--serving", str(tmp_path / "serving.llm")], tmp_path)
    for report in reports:
        assert sum(report["skipped"].values()) == 180, report["skipped"]
    assert reports[1]["samples_per_rank"][0] == 0, reports[1]["samples_per_rank"]  # the first: none left
    # the record travels with both candidates
    assert a.taken_back_.rows.size == b.taken_back_.rows.size == 180
