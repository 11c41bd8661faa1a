"""The promotion gate: a retrained model serves only if it beats the serving one on held-out data."""

import math

import numpy as np
import pytest

from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.retraining.promotion import (
    ERROR_RATE,
    NMSE,
    decide,
    gate_classifier,
    gate_inverse_dynamics,
)
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text


def test_the_margin_decides_and_force_is_recorded():
    kw = {"metric": NMSE, "serving": "serving", "n_samples": 10, "margin": 0.1}
    assert decide(0.089, 0.1, **kw).promoted  # 11 % better
    refused = decide(0.095, 0.1, **kw)  # 5 % better: within the margin
    assert not refused.promoted and "not better" in refused.reason and not refused.forced
    forced = decide(0.2, 0.1, force=True, **kw)
    assert forced.promoted and forced.forced and forced.reason.startswith("forced:")
    assert not decide(math.nan, 0.1, **kw).promoted and not decide(math.inf, 0.1, **kw).promoted
    assert decide(0.5, None, **kw).promoted  # nothing to compare with
    assert not decide(0.0, 0.0, **kw).promoted  # equal, even perfect: no gain worth a swap
    with pytest.raises(ValueError, match="margin"):
        decide(0.1, 0.1, metric=NMSE, serving="s", n_samples=1, margin=1.0)


@pytest.fixture(scope="module")
def panda():
    sim = PandaSimulation()
    return sim.run(12.0, seed=1, log_every=5), sim.run(4.0, seed=3, log_every=5)


def _parts(log):
    return log["q"], log["qd"], log["qdd"], log["tau"]


def test_a_learned_dynamics_model_beats_the_urdf_and_a_deliberately_bad_one_is_refused(panda, tmp_path):
    train, held_out = panda
    good = SemiparametricInverseDynamics(panda_urdf_text(), JOINT_NAMES, n_features=100)
    good.update(*_parts(train))
    decision = gate_inverse_dynamics(good, None, _parts(held_out))
    assert decision.promoted, decision.reason
    assert decision.serving == "RNEA (URDF)" and decision.metric == NMSE
    good.save(tmp_path / "serving.llm")
    bad = SemiparametricInverseDynamics(panda_urdf_text(), JOINT_NAMES, n_features=100)
    q, qd, qdd, tau = _parts(train)
    bad.update(q, qd, qdd, -tau)  # learned from torques of the wrong sign
    refused = gate_inverse_dynamics(bad, str(tmp_path / "serving.llm"), _parts(held_out))
    assert not refused.promoted and refused.candidate_error > refused.serving_error
    assert refused.serving_error == pytest.approx(decision.candidate_error)


def test_a_serving_model_for_other_joints_is_an_error(panda, tmp_path):
    _, held_out = panda
    full = SemiparametricInverseDynamics(panda_urdf_text(), JOINT_NAMES, n_features=20)
    full.save(tmp_path / "serving.llm")
    arm = SemiparametricInverseDynamics(panda_urdf_text(), joint_names=full.joint_names[:6], n_features=20)
    q, qd, qdd, tau = (a[:, :6] for a in _parts(held_out))
    with pytest.raises(ValueError, match="models joints"):
        gate_inverse_dynamics(arm, str(tmp_path / "serving.llm"), (q, qd, qdd, tau))


def test_classifiers_are_compared_by_error_rate(tmp_path):
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 1, (40, 5)), rng.normal(2.5, 1, (40, 5))])
    labels = np.array(["a"] * 40 + ["b"] * 40, dtype=object)
    serving = IncrementalRLSC(lambdas=1.0)
    serving.partial_fit(X[::2], labels[::2])
    serving.save(tmp_path / "serving.llm")
    confused = IncrementalRLSC(lambdas=1.0)
    confused.partial_fit(X[::2], labels[::2][::-1])  # labels reversed
    decision = gate_classifier(confused, str(tmp_path / "serving.llm"), (X[1::2], labels[1::2]))
    assert decision.metric == ERROR_RATE and not decision.promoted
    assert decision.candidate_error > 0.5 > decision.serving_error
    assert gate_classifier(serving, None, (X[1::2], labels[1::2])).promoted


def test_a_serving_classifier_is_scored_on_the_held_out_samples_as_if_it_had_not_learned_them(tmp_path):
    """The serving model learned online the recent samples the gate holds out, among them views of
    a that the teacher called b: as it is, it answers them from memory (λ small); without them, as
    the candidate, which never learned them, it does not. The gate scores it without them."""
    rng = np.random.default_rng(1)
    d = 100  # more dimensions than samples: λ small, it interpolates what it learned
    older = np.vstack([rng.normal(0, 1, (40, d)), rng.normal(0.5, 1, (40, d))])
    labels = np.array(["a"] * 40 + ["b"] * 40, dtype=object)
    recent = rng.normal(0, 1, (10, d))  # views of a, called b
    recent_labels = np.array(["b"] * 10, dtype=object)
    serving = IncrementalRLSC(lambdas=1e-6, alpha=1.0, keep_samples=200)
    serving.partial_fit(
        np.vstack([older, recent]).astype(np.float32).astype(np.float64), [*labels, *recent_labels]
    )
    serving.save(tmp_path / "serving.llm")
    assert np.mean(serving.predict(recent) == "b") == 1.0  # memorized
    candidate = IncrementalRLSC(lambdas=1e-6, alpha=1.0).partial_fit(older, labels)
    held_out = (recent.astype(np.float32).astype(np.float64), recent_labels)
    decision = gate_classifier(candidate, str(tmp_path / "serving.llm"), held_out, margin=0.0)
    assert "without 10 of the 10 held-out samples (those it keeps)" in decision.serving
    assert decision.serving_error == decision.candidate_error > 0.0 and not decision.promoted  # as it is: 0
    unseen, n = serving.without(*held_out)
    assert n == 10 and np.allclose(
        unseen.decision_function(older), candidate.decision_function(older), atol=1e-6
    )
    assert serving.without(rng.normal(0, 1, (3, d)), ["a"] * 3)[1] == 0  # rows it never learned
    assert serving.without(held_out[0], ["a"] * 10)[1] == 0  # learned, but as b
