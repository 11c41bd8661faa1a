"""The answer for a frame and for a showing, and the novelty score (learners/showing.py, novelty.py)."""

import numpy as np
import pytest

from lifelong_learning.learners import IncrementalRLSC
from lifelong_learning.learners.novelty import SCORES
from lifelong_learning.learners.showing import (
    RULES,
    FrameAnswer,
    ShowingAnswer,
    answer_frame,
    answer_showing,
    best_guesses,
    evidence,
    judge_showing,
)

D = 12


def objects(rng, label, n, spread=0.4):
    centre = np.zeros(D)
    centre[3 * label : 3 * label + 3] = 3.0
    return centre + spread * rng.normal(size=(n, D))


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    X = np.vstack([objects(rng, c, 40) for c in range(3)])
    y = np.repeat(["mug", "duck", "teddy"], 40)
    order = rng.permutation(len(y))
    return IncrementalRLSC(lambdas=[0.1, 1.0, 10.0], alpha="auto").partial_fit(X[order], y[order])


def test_a_showing_of_a_taught_object_is_named_with_its_frames_evidence(model):
    rng = np.random.default_rng(1)
    frames = objects(rng, 1, 10, spread=1.5)  # noisy frames: some are wrong one by one
    single = model.predict(frames)
    answer = answer_showing(model, frames)
    assert isinstance(answer, ShowingAnswer) and answer.label == "duck"
    _, confidence, novelty = answer  # (label, confidence, novelty), in that order
    assert 0.0 < confidence <= 1.0 and novelty >= 0.0
    assert np.mean(single == "duck") <= 1.0
    for rule in RULES:
        p = evidence(model, frames, rule)
        assert p.shape == (3,) and np.isclose(p.sum(), 1.0) and model.classes_[np.argmax(p)] == "duck"
    guesses = best_guesses(model, frames, k=2)
    assert guesses[0][0] == "duck" and guesses[0][1] >= guesses[1][1]


def test_a_never_taught_object_is_more_novel_than_taught_ones_and_unknown_at_the_threshold(model):
    rng = np.random.default_rng(2)
    known = objects(rng, 0, 20)
    new = objects(rng, 3, 20)  # directions no class spans
    for score in SCORES:
        assert model.novelty_score(new, score).mean() > model.novelty_score(known, score).mean(), score
    threshold = float(np.quantile(model.novelty_score(known), 0.95))
    assert answer_showing(model, new, novelty_threshold=threshold).label == ""
    assert answer_showing(model, known, novelty_threshold=threshold).label == "mug"
    frame = answer_frame(model, new[0], novelty_threshold=threshold)
    assert (
        isinstance(frame, FrameAnswer) and frame.label == "" and frame.top_label in ("mug", "duck", "teddy")
    )
    assert sorted(frame.labels) == ["duck", "mug", "teddy"] and len(frame.scores) == 3


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("score", SCORES)
def test_a_showing_judged_once_gives_its_answer_and_guesses_from_one_evaluation(
    model, monkeypatch, rule, score
):
    rng = np.random.default_rng(3)
    frames = np.vstack([objects(rng, 2, 6, spread=1.5), objects(rng, 3, 3)])  # some frames unlike any
    threshold = float(np.quantile(model.novelty_score(frames, score), 0.5))
    # what the answer must be, from the model's own evidence and novelty score of the frames
    p = evidence(model, frames, rule)
    novelty = float(model.novelty_score(frames, score).mean())
    named = p.max() >= 0.3 and (novelty <= threshold or model.calibration_[1] == 0)
    expected = (str(model.classes_[np.argmax(p)]) if named else "", float(p.max()), novelty)
    guesses = best_guesses(model, frames, 3, rule)
    calls = []
    scores = model.decision_function
    monkeypatch.setattr(model, "decision_function", lambda X: calls.append(len(X)) or scores(X))
    answer, judged = judge_showing(model, frames, 3, 0.3, threshold, rule, score)
    assert answer.label == expected[0] and judged == guesses
    assert np.allclose(answer[1:], expected[1:], rtol=1e-12, atol=0.0)
    # the node asks both of every frame's showing: the classifier scores its frames once
    assert calls == [len(frames)]
    assert answer == answer_showing(model, frames, 0.3, threshold, rule, score)
    with pytest.raises(ValueError, match="rule"):
        judge_showing(model, frames, 3, rule="median")


def test_an_empty_model_answers_unknown_and_a_showing_needs_a_frame():
    empty = IncrementalRLSC(n_features=D)
    assert answer_showing(empty, np.ones((3, D))) == ShowingAnswer("", 0.0, 0.0)
    assert answer_frame(empty, np.ones(D)).label == ""
    assert best_guesses(empty, np.ones((2, D))) == []
    with pytest.raises(ValueError):
        answer_showing(empty, np.zeros((0, D)))
    one = IncrementalRLSC().partial_fit(np.ones((2, D)), ["a", "a"])
    assert np.all(one.novelty_score(np.ones((2, D))) == 0.0)  # one class: certain of everything


def test_the_mahalanobis_score_is_the_distance_to_the_nearest_class_mean_in_the_metric_of_a():
    rng = np.random.default_rng(3)
    X = np.vstack([objects(rng, c, 15) for c in range(2)])
    y = np.repeat([0, 1], 15)
    clf = IncrementalRLSC(lambdas=0.5).partial_fit(X, y)
    A = X.T @ X + 0.5 * np.eye(D)
    means = [X[y == c].mean(axis=0) for c in (0, 1)]
    z = objects(rng, 2, 3)
    want = [30 * min((r - m) @ np.linalg.solve(A, r - m) for m in means) for r in z]
    np.testing.assert_allclose(clf.novelty_score(z, "mahalanobis"), want, rtol=1e-9)
    lev = [30 * r @ np.linalg.solve(A, r) for r in z]
    np.testing.assert_allclose(clf.novelty_score(z, "leverage"), lev, rtol=1e-9)
    with pytest.raises(ValueError):
        clf.novelty_score(z, "no such score")
