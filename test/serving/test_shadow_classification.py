"""Shadow evaluation and canary of a classifier (serving/shadow.py's ClassificationScores), with real
IncrementalRLSC learners on Gaussian class clusters (as object_recognition uses them): the
error compared is the error rate over the trial's taught samples, each predicted by both models
before either learns it; a model in a trial that cannot take a sample fails with its reason."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lifelong_learning.learners.recognition_gate import RecognitionGate
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.nodes.recognition_shadow import DRIFT_FLOOR, RecognitionOps
from lifelong_learning.serving.shadow import (
    CANARY,
    DROPPED,
    FAILED,
    KEPT,
    PROMOTED,
    ROLLED_BACK,
    SHADOW,
    ClassificationScores,
    DriftAlarm,
    Trial,
)

D = 8
LABELS = ("cup", "ball", "box")
CENTERS = np.random.default_rng(0).normal(scale=1.2, size=(3, D))


def samples(n: int, seed: int, centers: np.ndarray = CENTERS) -> list[tuple[np.ndarray, str]]:
    """``n`` samples of the three classes in turn, unit-variance clusters that overlap a little."""
    rng = np.random.default_rng(seed)
    return [(centers[k % 3] + rng.normal(size=D), LABELS[k % 3]) for k in range(n)]


def trained(n: int, seed: int, permute: bool = False) -> IncrementalRLSC:
    model = IncrementalRLSC(lambdas=1.0)
    for x, label in samples(n, seed):
        model.partial_fit(x, [LABELS[(LABELS.index(label) + 1) % 3] if permute else label])
    return model


OPS = RecognitionOps(RecognitionGate(max_classes=3))


def run(trial: Trial, serving: IncrementalRLSC, n: int = 400, dt: float = 0.01, seed: int = 50):
    """Feed ``n`` taught samples as the node does: the serving model predicts, learns, then the
    trial's model predicts and learns; the verdict and the index of the sample that ended it."""
    for k, (x, label) in enumerate(samples(n, seed)):
        before = OPS.predict(serving, x) if len(serving.classes_) else None
        serving.partial_fit(x, [label])
        verdict = trial.feed(k * dt, x, label, before)
        if verdict is not None:
            return verdict, k
    return None, n


def trial(role: str, other: IncrementalRLSC, **kw) -> Trial:
    args = {"window_s": 2.0, "samples": 0, "margin": 0.1, "predict": OPS.predict, "learn": OPS.learn}
    args.update(kw)
    return Trial(role, other, ClassificationScores(), 0.0, **args)


def test_scores_are_the_error_rate_over_samples_and_no_prediction_is_an_error():
    scores = ClassificationScores()
    assert math.isnan(scores.errors()[0]) and scores.errors()[3] == "no samples"
    for truth, serving, other in (("a", "a", "b"), ("a", None, "a"), ("b", "b", ""), ("a", "a", "a")):
        scores.add(0.0, truth, serving, other)
    assert scores.errors() == (0.5, 0.25, 4, "")
    assert ClassificationScores.checked("a", "b") == "a"
    with pytest.raises(ValueError, match="not a label"):
        ClassificationScores.checked(np.array([1.0]), "a")


def test_a_better_candidate_is_promoted_and_a_permuted_one_dropped():
    serving = IncrementalRLSC(lambdas=1.0)  # knows nothing yet: errs while it learns the classes
    better, k = run(trial(SHADOW, trained(600, 1)), serving)
    assert better is not None and better.outcome == PROMOTED and k == 200  # 2 s of samples 10 ms apart
    assert better.candidate_error < 0.9 * better.serving_error and better.samples == 201
    assert "error rate over 201 samples" in better.reason

    worse_model = trained(600, 2, permute=True)
    learned = serving.n_samples
    worse, _ = run(trial(SHADOW, worse_model), serving, seed=60)
    assert worse is not None and worse.outcome == DROPPED and not worse.other_wins
    assert worse.candidate_error > 0.5 > 0.2 > worse.serving_error, worse
    assert worse_model.n_samples == 600 + 201  # the candidate learned every sample of its window
    assert serving.n_samples == learned + 201  # the serving model learned every sample, as ever


def test_canary_rolls_back_a_worse_new_model_and_keeps_a_better_one():
    new_bad = trained(600, 3, permute=True)  # swapped in: the replaced (good) model runs in canary
    verdict, _ = run(trial(CANARY, trained(600, 4)), new_bad)
    assert verdict is not None and verdict.outcome == ROLLED_BACK and verdict.other_wins
    new_good = trained(600, 5)
    verdict, _ = run(trial(CANARY, trained(20, 6, permute=True)), new_good)
    assert verdict is not None and verdict.outcome == KEPT and "replaced" in verdict.reason


def test_a_candidate_with_another_feature_size_or_a_class_too_many_fails_with_its_reason():
    serving = trained(60, 7)
    other_size = IncrementalRLSC(lambdas=1.0)
    other_size.partial_fit(np.ones(D + 2), ["cup"])
    verdict, k = run(trial(SHADOW, other_size), serving)
    assert verdict is not None and verdict.outcome == FAILED and k == 0
    assert "candidate in shadow failed: ValueError" in verdict.reason

    foreign = IncrementalRLSC(lambdas=1.0)
    for j, label in enumerate(("mug", "pen", "car")):
        foreign.partial_fit(np.full(D, float(j)), [label])
    verdict, _ = run(trial(SHADOW, foreign), serving)  # a 4th class: beyond max_classes = 3
    assert verdict is not None and verdict.outcome == FAILED and "too many classes" in verdict.reason
    assert len(foreign.classes_) == 3


def test_a_candidate_that_knows_no_class_predicts_nothing_and_is_not_promoted():
    verdict, _ = run(trial(SHADOW, IncrementalRLSC(lambdas=1.0), samples=3), trained(300, 8))
    assert verdict is not None and verdict.outcome == DROPPED and verdict.candidate_error == 1.0


def test_drift_reference_floor_takes_an_error_of_zero():
    assert DRIFT_FLOOR > 0
    alarm = DriftAlarm(factor=3.0, window_s=1.0, floor=DRIFT_FLOOR)
    alarm.update(0.0, 0.0)  # no mistake in the window: the floor is the reference
    assert alarm.reference == DRIFT_FLOOR
    assert not alarm.update(1.0, 0.05)  # one mistake in twenty: below 3 × 2 %
    assert not alarm.update(2.0, 0.5) and alarm.update(3.0, 0.5)
    unfloored = DriftAlarm(factor=3.0, window_s=1.0)
    unfloored.update(0.0, 0.0)
    assert math.isnan(unfloored.reference)  # regression: waits for an error above 0
    with pytest.raises(ValueError, match="floor"):
        DriftAlarm(factor=3.0, window_s=1.0, floor=1.0)


def test_a_pasted_copy_is_learned_by_the_model_in_trial_without_being_scored():
    other = trained(60, 3)
    t = trial(SHADOW, other)
    seen = int(other.seen_counts_.sum())
    x, label = samples(1, 9)[0]
    before = other.decision_function(x)[0].copy()
    assert t.learn(x, label) is None
    assert t.samples == 0  # not scored
    assert not np.allclose(other.decision_function(x)[0], before)  # learned
    assert int(other.seen_counts_.sum()) == seen + 1
    verdict = t.learn(np.ones(D + 1), label)  # a copy the candidate cannot take: the trial fails
    assert (
        verdict is not None and verdict.outcome == FAILED and "candidate in shadow failed" in verdict.reason
    )
    assert t.learn(x, label) is None  # an ended trial ignores what it is given
