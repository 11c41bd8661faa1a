"""Export to the online learners' model files reproduces the Nyström KRR exactly."""

import numpy as np

from lifelong_learning.nystrom import NystromKRR
from lifelong_learning.nystrom.export import (
    export_classifier,
    export_inverse_dynamics,
    one_hot,
    rigid_body_residuals,
)


def test_classifier_file_reproduces_nystrom_krr(tmp_path):
    from sklearn.datasets import load_digits

    from lifelong_learning.learners.rlsc import IncrementalRLSC

    X, y = load_digits(return_X_y=True)
    X, labels = X[:300] / 16.0, [str(v) for v in y[:300]]
    classes, E = one_hot(labels)
    model = NystromKRR(centers=50, lengthscale=3.0, lam=1e-5, device="cpu").fit(X, E)
    export_classifier(model, X, labels, tmp_path / "clf.npz")
    clf = IncrementalRLSC.load(tmp_path / "clf.npz")
    assert list(clf.classes_) == classes
    Xt = load_digits().data[300:350] / 16.0
    np.testing.assert_allclose(clf.decision_function(Xt), model.predict(Xt), atol=1e-8)


def test_classifier_export_refuses_bad_rows_and_writes_nothing(tmp_path):
    import pytest

    rng = np.random.default_rng(0)
    X, labels = rng.normal(size=(40, 3)), ["a", "b"] * 20
    model = NystromKRR(centers=10, lengthscale=1.0, lam=1e-3, device="cpu").fit(X, one_hot(labels)[1])
    bad = X.copy()
    bad[3, 1] = np.nan
    for rows, labs, match in (
        (bad, labels, "NaN|finite"),
        (X[:, :2], labels, "3"),
        (X, labels[:-1], "40 rows and 39 labels"),
        (X, ["a"] * 39 + [""], "label"),
    ):
        with pytest.raises(ValueError, match=match):
            export_classifier(model, rows, labs, tmp_path / "clf.npz")
    assert not (tmp_path / "clf.npz").exists()


def test_inverse_dynamics_file_reproduces_nystrom_residual(tmp_path):
    from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics
    from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text

    log = PandaSimulation().run(1.0, seed=2, log_every=5)
    urdf = panda_urdf_text()
    q, qd, qdd, tau = log["q"], log["qd"], log["qdd"], log["tau"]
    _, Xr, Yr = rigid_body_residuals(urdf, JOINT_NAMES, q, qd, qdd, tau)
    model = NystromKRR(centers=30, lengthscale=2.0, lam=1e-4, device="cpu").fit(Xr, Yr)
    export_inverse_dynamics(model, urdf, JOINT_NAMES, q, qd, qdd, tau, tmp_path / "dyn.npz", block=None)
    sp = SemiparametricInverseDynamics.load(tmp_path / "dyn.npz")
    parts = sp.predict(q[:20], qd[:20], qdd[:20], return_parts=True)
    np.testing.assert_allclose(parts["residual"], model.predict(Xr[:20]), atol=1e-7)


def test_inverse_dynamics_export_replays_the_samples_like_the_online_learner():
    """The default export is the online learner fed the samples in time order (blocks of 10) with the
    tuned Nyström map and a forgetting factor: the same state as updating it by hand."""
    from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics
    from lifelong_learning.nystrom.export import feature_map_of, regularization_of
    from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text

    log = PandaSimulation().run(1.0, seed=3, log_every=5)
    urdf = panda_urdf_text()
    q, qd, qdd, tau = log["q"], log["qd"], log["qdd"], log["tau"]
    _, Xr, Yr = rigid_body_residuals(urdf, JOINT_NAMES, q, qd, qdd, tau)
    model = NystromKRR(centers=20, lengthscale=3.0, lam=1e-3, device="cpu").fit(Xr, Yr)
    sp = export_inverse_dynamics(model, urdf, JOINT_NAMES, q, qd, qdd, tau, forgetting=0.999)
    by_hand = SemiparametricInverseDynamics(
        urdf,
        JOINT_NAMES,
        feature_map=feature_map_of(model),
        lam_residual=regularization_of(model, len(q)),
        forgetting=0.999,
    )
    for start in range(0, len(q), 10):
        block = slice(start, start + 10)
        by_hand.update(q[block], qd[block], qdd[block], tau[block])
    assert sp.forgetting == 0.999 and sp.n_samples == len(q)
    np.testing.assert_array_equal(sp.predict(q[:5], qd[:5], qdd[:5]), by_hand.predict(q[:5], qd[:5], qdd[:5]))


def test_classifier_sums_of_two_groups_of_rows_add_up_to_those_of_all_rows():
    from lifelong_learning.nystrom.export import classifier_from_sums, classifier_sums

    rng = np.random.default_rng(1)
    X, labels = rng.normal(size=(60, 3)), [("a", "b", "c")[i % 3] for i in range(60)]
    model = NystromKRR(centers=12, lengthscale=1.0, lam=1e-3, device="cpu").fit(X, one_hot(labels)[1])
    whole = export_classifier(model, X, labels, classes=["z"])
    first, second = classifier_sums(model, X[:25], labels[:25]), classifier_sums(model, X[25:], labels[25:])
    parts = classifier_from_sums(model, first + second, ["z"])
    assert parts.classes_.tolist() == whole.classes_.tolist() == ["z", "a", "b", "c"]
    np.testing.assert_allclose(parts.decision_function(X), whole.decision_function(X), rtol=1e-9, atol=1e-12)
    only_b = classifier_sums(model, X[1:2], labels[1:2])  # one label: columns merge by label
    merged = first + only_b
    assert merged.labels == ["a", "b", "c"] and merged.counts.tolist() == [9, 9, 8]
