"""The batch objective a learner reports (learners/batch_objective.py): an nMSE of the batch fit of
everything learned, equal to the identity's weighted online errors over the targets' spread; for a
classifier per class from its counts; undefined, with the reason, where it cannot be known."""

import numpy as np
import pytest

from lifelong_learning.learners import RecursiveRLS
from lifelong_learning.learners.auto_forgetting import AutoForgettingRLS
from lifelong_learning.learners.batch_objective import (
    FEW_ROWS,
    NO_SPREAD,
    NOT_KEPT,
    NOT_SOLVED,
    engine_objective,
    model_objective,
    serving_engine,
)
from lifelong_learning.learners.prequential_identity import prequential_identity
from lifelong_learning.learners.rlsc import IncrementalRLSC


def test_an_engines_figure_is_the_identity_over_the_targets_spread():
    rng = np.random.default_rng(0)
    Z, U = rng.standard_normal((300, 8)), rng.standard_normal((300, 1)) * 2.0 + 5.0
    rls = RecursiveRLS(8, 1, lam=0.5)
    rls.update(Z, U)
    identity = prequential_identity(Z, U, lam=0.5)
    spread = float(((U - U.mean()) ** 2).sum())
    got = engine_objective(rls)
    assert got.values[0] == pytest.approx(identity.weighted_online_loss / spread, rel=1e-10)
    assert got.mean == got.values[0] and got.undefined == ()


def test_a_classifiers_figure_is_per_class_from_its_counts():
    """0/1 indicators: Σu² = Σu = the class's training samples; the engine of the λ in use."""
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(0, 1, (40, 5)), rng.normal(2, 1, (20, 5))])
    y = ["a"] * 40 + ["b"] * 20
    clf = IncrementalRLSC(lambdas=[0.1, 10.0], validation_every=6)
    order = rng.permutation(60)
    clf.partial_fit(X[order], [y[i] for i in order])
    counts = clf.class_counts_.astype(float)
    engine = serving_engine(clf)
    Z = rng.normal(size=(4, 5))  # the engine decision_function answers with (recoding: α = 0 here)
    np.testing.assert_allclose(engine.predict(Z), clf.decision_function(Z), rtol=1e-12)
    n, total, squares = engine.target_moments()  # what the engine kept: the counts
    assert n == counts.sum() and np.array_equal(total, counts) and np.array_equal(squares, counts)
    got = model_objective(clf)
    expected = engine.batch_objective(target_sq=counts) / (counts - counts**2 / n)
    np.testing.assert_allclose(got.values, expected, rtol=1e-12)
    # no intercept: at most the all-zero model's Σu² (above 1 where λ is large and the class frequent)
    assert np.all((got.values > 0) & (got.values <= 1.0 / (1.0 - counts / n)))
    assert model_objective(IncrementalRLSC()) is None  # no class yet


def test_what_cannot_be_known_is_said():
    rng = np.random.default_rng(2)
    Z = rng.standard_normal((20, 4))
    rls = RecursiveRLS(4, 2, lam=1.0)
    rls.update(Z, np.column_stack([np.ones(20), rng.standard_normal(20)]))  # output 0 constant
    got = engine_objective(rls)
    assert np.isnan(got.values[0]) and np.isfinite(got.values[1]) and got.undefined == ((0, NO_SPREAD),)
    one = RecursiveRLS(4, 1, lam=1.0)
    one.update(Z[:1], [[1.0]])
    assert engine_objective(one).undefined == ((0, FEW_ROWS),)
    summed = RecursiveRLS(4, 1, lam=1.0)
    summed.add_sums(Z.T @ Z, Z.T @ Z[:, :1], 20)
    assert engine_objective(summed).undefined == ((0, NOT_KEPT),)
    loaded = RecursiveRLS.from_state(*rls.to_state())  # its weights not solved since it was read
    assert engine_objective(loaded, solve=False).undefined == ((0, NOT_SOLVED), (1, NOT_SOLVED))
    assert np.isfinite(engine_objective(loaded).values[1])
    auto = AutoForgettingRLS(4, 2, lam=1.0)
    auto.update(Z, rng.standard_normal((20, 2)))
    assert np.all(np.isfinite(engine_objective(auto).values))  # the engine that serves
