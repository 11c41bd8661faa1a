"""Issue 12, done when: tuning on two trajectories picks length-scales that predict a third better
than tuning on one. With several bags, the default objective for inverse dynamics, holdout-bags,
holds each bag out in turn and chooses the hyperparameters on a trajectory the fit has not seen."""

import pytest
import torch

import lifelong_learning.retraining.pipeline as pipeline
from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.dynamics import SemiparametricInverseDynamics, estimate_accelerations
from lifelong_learning.io.bags import write_joint_states
from lifelong_learning.retraining.pipeline import run_job
from lifelong_learning.sim.arm import UR5_JOINT_NAMES, Ur5Simulation, ur5_urdf_path, ur5_urdf_text


@pytest.fixture
def one_thread():
    """One torch thread, as benchmarks/bench_retraining_objectives.py runs (the tuned values
    depend on the order of floating-point sums)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _fitted_on(log, feature_map, lam):
    """The semiparametric model with a tuned feature map and per-sample λ, replayed on ``log`` as
    the job's export replays a bag (10 samples at a time, no forgetting, residual λ × 1)."""
    qdd = estimate_accelerations(log["t"], log["qd"])
    model = SemiparametricInverseDynamics(
        ur5_urdf_text(),
        UR5_JOINT_NAMES,
        mode="semiparametric",
        feature_map=feature_map,
        lam_residual=log["t"].size * lam,
    )
    for s in range(0, log["t"].size, 10):
        model.update(log["q"][s : s + 10], log["qd"][s : s + 10], qdd[s : s + 10], log["tau"][s : s + 10])
    return model


def _error(model, log):
    qdd = estimate_accelerations(log["t"], log["qd"])
    return float(normalized_mse(log["tau"], model.predict(log["q"], log["qd"], qdd)).mean())


def test_tuning_on_two_trajectories_predicts_a_third_better_than_tuning_on_one(
    tmp_path, monkeypatch, one_thread, make_job
):
    """A simulated UR5 (inertial errors, rotor inertia, friction; the learner has the plain URDF)
    logs trajectories A and B (20 s each); C is new. The job (default objective) tunes on bag A
    alone, then on bags A and B. Each job's hyperparameters (centres, length-scales, λ) are fitted on
    the same data, bag A, so that only they differ, and predict C: those tuned on two trajectories
    predict it better (C nMSE 0.0084 against 0.0139), and better than proposed's, the default before,
    tuned on the same two (0.0115). docs/benchmarks/retraining-objectives.md, seeds 0 to 50 (this is
    seed 0): holdout-bags tuned on two better than on one on 4 of 6 (two equal), better than proposed
    on two on 6 of 6; proposed on one trajectory was the worst on every seed (it interpolates)."""
    A, B, C = (Ur5Simulation().run(20.0, seed=k, log_every=5) for k in (0, 1, 2))
    for name, log in (("A", A), ("B", B)):
        write_joint_states(tmp_path / name, log["t"], UR5_JOINT_NAMES, log["q"], log["qd"], log["tau"])
    groups = []
    fit_run = pipeline.fit_run

    def spy(job, run, X, Y, bags, *args, **kwargs):
        groups.append(bags)
        return fit_run(job, run, X, Y, bags, *args, **kwargs)

    monkeypatch.setattr(pipeline, "fit_run", spy)
    errors, exported = {}, {}
    for label, bags, objectives in (
        ("one", ["A"], None),
        ("two", ["A", "B"], None),
        ("two, proposed", ["A", "B"], ("proposed",)),
    ):
        out = tmp_path / f"{label}.llm"
        small = {"centers": 40, "epochs": 30, "forgetting": (1.0,), "residual_regularization": (1.0,)}
        report = run_job(make_job(*bags, out=out.name, urdf=ur5_urdf_path(), objectives=objectives, **small))
        name = report["exported_objective"]
        assert name == (objectives or ("holdout-bags",))[0]  # holdout-bags: the default for dynamics
        exported[label] = SemiparametricInverseDynamics.load(out)
        errors[label] = _error(
            _fitted_on(A, exported[label].feature_map, report["objectives"][name]["lam"]), C
        )
    # the bags reach the objective: bag B starts after bag A's rows (all of them training rows)
    assert groups[0] == [0] and len(groups[1]) == 2 and groups[1][1] >= 0.9 * A["t"].size
    assert errors["two"] < 0.9 * errors["one"], errors
    assert errors["two"] < 0.9 * errors["two, proposed"], errors
    # and the models the jobs export (the second learned from both bags) rank the same way
    assert _error(exported["two"], C) < _error(exported["one"], C)
