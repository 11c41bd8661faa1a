"""The inverse-dynamics retraining job streams its bags: memory bounded by the block and the sample,
not by the bags; what it learns from a log that fits one block is what the whole-log job learned."""

import tracemalloc

import numpy as np
import pytest

import lifelong_learning.retraining.pipeline as pipeline
from lifelong_learning.dynamics import SemiparametricInverseDynamics
from lifelong_learning.io.bags import write_joint_states
from lifelong_learning.retraining.pipeline import run_job
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation


def _job(make_job, bag, **kw):
    """A small inverse-dynamics job of the simulated Panda on ``bag``, into ``<bag>.llm``."""
    small = {"centers": 10, "epochs": 2, "forgetting": (1.0,), "residual_regularization": (1.0,)}
    return make_job(bag, out=f"{bag}.llm", replay_block=50, **small, **kw)


def test_peak_memory_does_not_grow_with_the_bag(tmp_path, monkeypatch, make_job):
    """A bag of 3200 joint states and one of 800, read in blocks of 200 rows with a sample of 200:
    the larger job's peak (Python and NumPy allocations, tracemalloc) stays within 25 % of the
    smaller one's (measured: 3.6 vs 3.5 MB; the whole-log job before streaming: 20.3 vs 5.3 MB),
    no tuning sees more than the sample, and no update, prediction or read more than a block."""
    log = PandaSimulation().run(32.0, seed=3, log_every=5)
    for n in (800, 3200):
        write_joint_states(
            tmp_path / f"b{n}", log["t"][:n], JOINT_NAMES, log["q"][:n], log["qd"][:n], log["tau"][:n]
        )
    limits = {"block": 200, "sample_rows": 200}
    run_job(_job(make_job, "b800", **limits))  # imports, type store, caches: not the job's memory
    peaks = {}
    for n in (800, 3200):
        tracemalloc.start()
        report = run_job(_job(make_job, f"b{n}", **limits))
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert report["n_train"] > 0.7 * 3200  # read, and trained on, in blocks of 200 rows
    assert peaks[3200] < 1.25 * peaks[800], peaks

    rows = {"tune": 0, "update": 0, "predict": 0}
    fit_run = pipeline.fit_run
    update, predict = SemiparametricInverseDynamics.update, SemiparametricInverseDynamics.predict

    def spy(name, f):
        def wrapped(*args, **kwargs):
            first = args[2] if name == "tune" else args[1]  # fit_run(job, run, X, ...); method(self, q, ...)
            rows[name] = max(rows[name], np.shape(first)[0])
            return f(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(pipeline, "fit_run", spy("tune", fit_run))
    monkeypatch.setattr(SemiparametricInverseDynamics, "update", spy("update", update))
    monkeypatch.setattr(SemiparametricInverseDynamics, "predict", spy("predict", predict))
    report = run_job(_job(make_job, "b3200", **limits))
    assert rows == {"tune": 200, "update": 200, "predict": 200}, rows
    assert SemiparametricInverseDynamics.load(tmp_path / "b3200.llm").n_samples == report["exported_samples"]


def test_a_log_read_in_small_blocks_gives_the_model_of_the_whole_log(tmp_path, make_job):
    """Blocks of 250 rows with a sample that holds every row: the same skipped counts, splits,
    baselines, tuned hyperparameters and scores as one block (q̈ continues across blocks; only the
    spike and velocity tests, whose windows stop at a block's ends, could differ)."""
    log = PandaSimulation().run(12.0, seed=4, log_every=5, payload_mass=1.0, payload_at=6.0)
    log["tau"][300, 2] += 40.0  # one glitch, in the second block
    write_joint_states(tmp_path / "bag", log["t"], JOINT_NAMES, log["q"], log["qd"], log["tau"])
    one = run_job(_job(make_job, "bag"))
    small = run_job(_job(make_job, "bag", block=250))
    assert small["skipped"] == one["skipped"] and small["skipped"]["spike (against its neighbours)"] >= 1
    assert (small["n_train"], small["n_test"]) == (one["n_train"], one["n_test"])
    for name, value in one["baselines"].items():
        assert small["baselines"][name] == pytest.approx(value, rel=1e-9)
    a, b = one["objectives"]["holdout-bags"], small["objectives"]["holdout-bags"]
    assert b["lam"] == pytest.approx(a["lam"], rel=1e-6) and b["value"] == pytest.approx(a["value"], rel=1e-6)
    np.testing.assert_allclose(b["lengthscale"], a["lengthscale"], rtol=1e-6)


def test_a_classification_job_streams_its_bags_too(tmp_path, monkeypatch, make_job):
    """Labeled features (512 values) of 800 and of 3200 messages, read in blocks of 200 rows with
    samples of 200: the larger job's peak (tracemalloc) stays within 25 % of the smaller one's,
    no tuning and no feature-map pass sees more than a block, and the model learned every sample.
    (The MCAP reader holds one chunk of the file, a few MB: both bags are larger than a chunk.)"""
    from lifelong_learning.io.bags import write_labeled_features
    from lifelong_learning.learners import IncrementalRLSC
    from lifelong_learning.learners.nystrom_features import NystromFeatureMap

    rng = np.random.default_rng(0)
    for n in (800, 3200):
        y = rng.integers(0, 4, size=n)
        X = np.eye(4, 512)[y] * 8.0 + rng.normal(scale=0.5, size=(n, 512))
        write_labeled_features(tmp_path / f"f{n}", X, [f"obj{v}" for v in y])

    def job(n):
        small = {"centers": 10, "epochs": 2, "block": 200, "sample_rows": 200}
        return make_job(f"f{n}", task="classification", out=f"f{n}.llm", **small)

    run_job(job(800))  # imports and caches: not the job's memory
    peaks = {}
    for n in (800, 3200):
        tracemalloc.start()
        report = run_job(job(n))
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[3200] < 1.25 * peaks[800], peaks
    assert report["tuning_rows"] == 200 and report["n_train"] > 2000
    assert report["objectives"]["proposed"]["value"] < 5.0  # % wrong on the test split
    assert IncrementalRLSC.load(tmp_path / "f3200.llm").n_samples == report["exported_samples"] == 3200

    rows = {"tune": 0, "transform": 0}
    fit_run, transform = pipeline.fit_run, NystromFeatureMap.transform

    def spy(name, f, at):
        def wrapped(*args, **kwargs):
            rows[name] = max(rows[name], np.shape(args[at])[0])
            return f(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(pipeline, "fit_run", spy("tune", fit_run, 2))  # fit_run(job, run, X, ...)
    monkeypatch.setattr(NystromFeatureMap, "transform", spy("transform", transform, 1))
    run_job(job(3200))
    assert rows["tune"] == 200 and 100 < rows["transform"] <= 200, rows  # blocks of the file, sparse rows
