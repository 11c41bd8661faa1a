"""End to end: bags written here → ``lifelong-learning tune`` → model file the online learners load."""

import json

import numpy as np
import pytest

from lifelong_learning.cli import main
from lifelong_learning.io.bags import write_joint_states, write_labeled_features


def test_tune_classification_from_bag(tmp_path, capsys):
    from sklearn.datasets import load_digits

    from lifelong_learning.learners.rlsc import IncrementalRLSC

    X, y = load_digits(return_X_y=True)
    X, y = X[:400] / 16.0, [f"digit{v}" for v in y[:400]]
    write_labeled_features(tmp_path / "a", X[:200], y[:200], storage="mcap")
    write_labeled_features(tmp_path / "b", X[200:], y[200:], storage="sqlite3")
    out = tmp_path / "model.npz"
    rc = main(
        [
            "tune",
            str(tmp_path / "a"),
            str(tmp_path / "b"),
            "--task",
            "classification",
            "--objective",
            "proposed,gcv",
            "--centers",
            "60",
            "--epochs",
            "15",
            "--device",
            "cpu",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    clf = IncrementalRLSC.load(out)
    assert set(clf.classes_) == set(y)
    report = json.loads((tmp_path / "model.npz.report.json").read_text())
    assert set(report["objectives"]) == {"proposed", "gcv"}
    # 10 % of each class held out for the promotion gate, the rest split into train and test
    assert report["promotion"]["n_samples"] == 40 and report["promotion"]["promoted"]
    assert report["n_train"] + report["n_test"] == 360
    assert report["objectives"]["proposed"]["value"] < 25.0  # test error (%), chance is 90 %
    assert "| proposed |" in (tmp_path / "model.npz.report.md").read_text()
    # the exported classifier is refitted with the tuned hyperparameters on every sample, the gate's
    # after the gate scored it
    assert report["exported_samples"] == 400 and clf.n_samples == 400
    assert np.mean(clf.predict(X) == np.array(y, dtype=object)) > 0.8


def test_tune_inverse_dynamics_from_bag(tmp_path):
    from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics
    from lifelong_learning.sim.panda import PandaSimulation, panda_urdf_path

    log = PandaSimulation().run(3.0, seed=1, log_every=5)
    write_joint_states(
        tmp_path / "js", log["t"], PandaSimulation.joint_names, log["q"], log["qd"], log["tau"]
    )
    out = tmp_path / "dyn.npz"
    rc = main(
        [
            "tune",
            str(tmp_path / "js"),
            "--task",
            "inverse-dynamics",
            "--urdf",
            panda_urdf_path(),
            "--centers",
            "40",
            "--epochs",
            "10",
            "--device",
            "cpu",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    model = SemiparametricInverseDynamics.load(out)
    assert model.feature_map.kind == "nystrom" and model.feature_map.n_features == 40
    report = json.loads((tmp_path / "dyn.npz.report.json").read_text())
    # the default objective for inverse dynamics (one bag: validated on its most recent rows)
    assert report["exported_objective"] == "holdout-bags"
    assert np.isfinite(report["objectives"]["holdout-bags"]["value"])
    pred = model.predict(log["q"][:5], log["qd"][:5], log["qdd"][:5])
    assert pred.shape == (5, 7) and np.all(np.isfinite(pred))


@pytest.mark.parametrize("method", ["slkl", "nytro", "path"])
def test_tune_with_another_method_exports_its_map_for_the_learner_to_continue_from(tmp_path, method):
    """``--method``: the exported classifier holds the method's feature map (SLKL's m₀ ≤ M active
    centres, the Nyström map of NYTRO's and the path's centres) and the engine state of every sample;
    loaded, it predicts the digits and keeps learning."""
    from sklearn.datasets import load_digits

    from lifelong_learning.learners.rlsc import IncrementalRLSC

    X, y = load_digits(return_X_y=True)
    X, y = X[:300] / 16.0, [f"digit{v}" for v in y[:300]]
    write_labeled_features(tmp_path / "a", X, y)
    out = tmp_path / "model.npz"
    argv = ["tune", str(tmp_path / "a"), "--task", "classification", "--method", method, "--centers", "40"]
    assert main([*argv, "--device", "cpu", "--out", str(out), "--no-progress"]) == 0
    report = json.loads((tmp_path / "model.npz.report.json").read_text())
    assert report["method"] == method and report["exported_objective"] == method
    run = report["objectives"][method]
    clf = IncrementalRLSC.load(out)
    assert clf.feature_map.kind == ("slkl" if method == "slkl" else "nystrom")
    assert clf.feature_map.n_features == run["features"] <= 40 and clf.n_samples == 300
    assert run["value"] < 30.0 and np.mean(clf.predict(X) == np.array(y, dtype=object)) > 0.8
    clf.partial_fit(X[:1], y[:1])
    assert clf.n_samples == 301


def test_tune_inverse_dynamics_with_slkl(tmp_path):
    from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics
    from lifelong_learning.sim.panda import PandaSimulation, panda_urdf_path

    log = PandaSimulation().run(3.0, seed=1, log_every=5)
    write_joint_states(
        tmp_path / "js", log["t"], PandaSimulation.joint_names, log["q"], log["qd"], log["tau"]
    )
    out = tmp_path / "dyn.npz"
    argv = ["tune", str(tmp_path / "js"), "--task", "inverse-dynamics", "--urdf", panda_urdf_path()]
    assert main([*argv, "--method", "slkl", "--centers", "40", "--device", "cpu", "--out", str(out)]) == 0
    model = SemiparametricInverseDynamics.load(out)
    report = json.loads((tmp_path / "dyn.npz.report.json").read_text())
    assert model.feature_map.kind == "slkl"
    assert model.feature_map.n_features == report["objectives"]["slkl"]["features"] <= 40
    before = model.predict(log["q"][:5], log["qd"][:5], log["qdd"][:5])
    model.update(log["q"][:5], log["qd"][:5], log["qdd"][:5], log["tau"][:5])  # it keeps learning
    after = model.predict(log["q"][:5], log["qd"][:5], log["qdd"][:5])
    assert np.all(np.isfinite(after)) and not np.array_equal(before, after)


def test_tune_reports_bad_input(tmp_path, capsys):
    assert (
        main(["tune", str(tmp_path / "none"), "--task", "classification", "--out", str(tmp_path / "m")]) == 2
    )
    assert "no such bag" in capsys.readouterr().err
    write_labeled_features(tmp_path / "a", np.zeros((10, 2)), ["x"] * 10)
    assert (
        main(
            [
                "tune",
                str(tmp_path / "a"),
                "--task",
                "classification",
                "--objective",
                "magic",
                "--out",
                str(tmp_path / "m"),
            ]
        )
        == 2
    )
    with pytest.raises(SystemExit):
        main(["tune", str(tmp_path / "a"), "--task", "nope", "--out", "m"])
    bad_forgetting = ["tune", str(tmp_path / "a"), "--task", "classification", "--out", str(tmp_path / "m")]
    assert main([*bad_forgetting, "--forgetting", "0.99,fast"]) == 2
    assert "--forgetting takes comma-separated numbers" in capsys.readouterr().err
    assert main([*bad_forgetting, "--forgetting", "1.5"]) == 2
    assert "forgetting factors must be in (0, 1]" in capsys.readouterr().err
    for bad in ("10,0", "inf", "nan"):
        assert main([*bad_forgetting, "--residual-regularization", bad]) == 2
        assert "residual λ multipliers must be finite and > 0" in capsys.readouterr().err
    assert main([*bad_forgetting, "--lengthscale-range", "2", "1"]) == 2
    assert "lengthscale_range must be (a, b)" in capsys.readouterr().err
    assert main([*bad_forgetting, "--outlier-k", "0"]) == 2
    assert "outlier_k must be > 0" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("mine")  # --out never replaces a file that is not a model
    notes = ["tune", str(tmp_path / "a"), "--task", "classification", "--out", str(tmp_path / "notes.txt")]
    assert main(notes) == 2
    assert "not a file this writer made" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "mine"
