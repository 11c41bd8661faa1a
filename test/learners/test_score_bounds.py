"""Class scores bounded to what 0/1 targets allow (learners/truncation.py): each recoded score in
[0, its recoding weight], counted; off, nothing changes."""

import numpy as np

from lifelong_learning.learners.model_selection import recoding
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.learners.truncation import ScoreBounds


def test_scores_are_bounded_per_class_to_the_recoded_range_of_their_targets():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.3, (30, 4)), rng.normal(3, 0.3, (10, 4))])
    clf = IncrementalRLSC(lambdas=0.01, alpha=1.0)
    clf.partial_fit(X, ["a"] * 30 + ["b"] * 10)
    far = np.full((1, 4), 12.0)  # beyond class b: its plain score runs above 1
    scores = clf.decision_function(far)[0]
    upper = recoding(clf.class_counts_, clf.alpha_)
    assert np.any((scores > upper) | (scores < 0))
    bounds = ScoreBounds(enabled=True)
    out = bounds.scores(clf, scores)
    assert np.all((out >= 0) & (out <= upper)) and bounds.clipped == int(np.sum(out != scores))
    assert bounds.diagnostics() == {"scores truncated": str(bounds.clipped)}
    off = ScoreBounds()
    assert off.scores(clf, scores) is scores and off.diagnostics() == {}
