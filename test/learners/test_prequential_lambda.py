"""λ chosen on the stream (learners/prequential_lambda.py): the rule keeps the serving candidate
within the margin, else moves to the most regularized near the best; the regression race serves the
engine whose prediction of each block before learning it was best, and every engine learns every
row; the classifier races every (λ, α), learns every sample (none held out) and answers with the
serving candidate's recoded scores."""

import math

import numpy as np
import pytest

from lifelong_learning.learners import RecursiveRLS
from lifelong_learning.learners.model_selection import recoding
from lifelong_learning.learners.prequential_lambda import (
    PrequentialLambdaClassifier,
    PrequentialLambdaRLS,
    choose,
)


def test_the_rule_keeps_a_near_tie_and_takes_the_most_regularized_near_the_best():
    order = ["big", "mid", "small"]  # most regularized first
    assert choose({"big": 1.0, "mid": 0.99, "small": 0.5}, "mid", order, 0.02) == "small"
    assert choose({"big": 0.505, "mid": 0.9, "small": 0.5}, "mid", order, 0.02) == "big"  # within 2 %
    assert choose({"big": 1.0, "mid": 0.5, "small": 0.495}, "mid", order, 0.02) == "mid"  # it stays
    assert choose({"big": math.nan, "mid": math.nan}, "big", order, 0.02) == "big"


def test_the_regression_race_serves_the_engine_that_predicted_the_stream_best():
    """Rows from a linear model with little noise: the smallest λ predicts them best; every engine
    learned every row (each equals a plain engine of its λ)."""
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((600, 6))
    U = Z @ rng.standard_normal((6, 2)) + 0.01 * rng.standard_normal((600, 2))
    race = PrequentialLambdaRLS(6, 2, [1e-3, 1.0, 1e3], window=200)
    assert race.lam == 1e3  # the most regularized until the stream says
    for i in range(0, 600, 5):
        race.update(Z[i : i + 5], U[i : i + 5])
    errors = race.errors()
    assert race.lam == 1e-3 and errors[1e-3] < errors[1.0] < errors[1e3]
    plain = RecursiveRLS(6, 2, lam=1.0)
    plain.update(Z, U)
    np.testing.assert_allclose(race.engines[1].weights, plain.weights, rtol=1e-9)
    np.testing.assert_allclose(race.predict(Z[:3]), race.engines[0].predict(Z[:3]))
    with pytest.raises(ValueError):
        PrequentialLambdaRLS(6, 2, [1.0, 1.0])


def test_the_classifier_learns_every_sample_and_races_lambda_and_alpha():
    rng = np.random.default_rng(1)
    centres = rng.normal(scale=3.0, size=(3, 5))
    y = rng.integers(0, 3, 240)
    X = centres[y] + rng.normal(size=(240, 5))
    labels = [f"c{v}" for v in y]
    clf = PrequentialLambdaClassifier([0.1, 10.0, 1e4], alphas=(0.0, 1.0), window=100)
    clf.partial_fit(X, labels)
    assert all(m.n_samples == 240 and m.n_validation_ == 0 for m in clf.models)  # none held out
    assert clf.scores.samples == 239  # every sample but the first scored before it was learned
    report = clf.scores.report(float(clf.n_samples))
    errors = [report.means[n] for n in clf.names]
    assert errors[clf.serving] <= min(errors) / (1.0 - clf.switch_margin)  # the best, to the margin
    i = clf.lambdas.index(clf.lambda_)
    expected = (
        clf.models[i].decision_function(X[:4]) * recoding(clf.models[0].class_counts_, clf.alpha_)[None, :]
    )
    np.testing.assert_allclose(clf.decision_function(X[:4]), expected)
    assert np.mean(clf.predict(X) == np.array(labels, dtype=object)) > 0.9
