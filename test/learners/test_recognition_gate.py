"""RecognitionGate: the limits on feature norms, labels and classes shared by the node and the benchmark."""

from __future__ import annotations

import numpy as np
import pytest

from lifelong_learning.learners import IncrementalRLSC
from lifelong_learning.learners.recognition_gate import NORM_WINDOW, RecognitionGate, label_problem


def taught(n: int = 30, d: int = 8, scale: float = 3.0) -> tuple[IncrementalRLSC, RecognitionGate]:
    rng = np.random.default_rng(0)
    model, gate = IncrementalRLSC(lambdas=[0.1, 1.0], alpha="auto"), RecognitionGate(max_classes=4)
    for i in range(n):
        x = scale * rng.normal(size=d) / np.sqrt(d)  # norms ≈ scale
        label = "abc"[i % 3]
        assert gate.check_labeled(x, label, model) is None
        model.partial_fit(x, [label])
        gate.accepted(x)
    return model, gate


def test_absolute_bound_applies_from_the_first_sample_and_to_every_input():
    model, gate = IncrementalRLSC(), RecognitionGate(max_feature_norm=100.0)
    x = np.zeros(8)
    x[0] = 3e38  # finite float32, and absurd
    refusal = gate.check_labeled(x, "mug", model)
    assert refusal is not None and refusal.reason == "feature norm too large"
    assert "max_feature_norm = 100" in refusal.detail
    x[0] = 99.0
    assert gate.check_labeled(x, "mug", model) is None  # below it: fine while nothing is known
    x[0] = 1e200
    assert gate.check_features(x, 8).reason == "feature norm too large"  # the norm overflows: still refused


def test_relative_bound_follows_the_median_of_accepted_samples_once_enough_are_known():
    model, gate = taught(n=19)
    big = np.full(8, 50.0 / np.sqrt(8))  # norm 50, ≈ 17 × the median 3
    assert gate.check_labeled(big, "a", model) is None  # 19 < norm_min_samples = 20
    model, gate = taught(n=20)
    median = gate.median_norm
    assert 2.0 < median < 4.0 and gate.norm_limit == pytest.approx(10 * median)
    refusal = gate.check_labeled(big, "a", model)
    assert refusal.reason == "feature norm too large" and "feature_norm_factor = 10" in refusal.detail
    assert gate.check_features(big, 8).reason == "feature norm too large"  # inputs to classify too
    ok = np.full(8, 9.0 * median / np.sqrt(8))
    assert gate.check_labeled(ok, "a", model) is None
    # Refused samples never enter the median: only accepted() does.
    for _ in range(100):
        gate.check_labeled(big, "a", model)
    assert gate.median_norm == median
    gate.reset()
    assert gate.median_norm is None and gate.norm_limit == gate.max_feature_norm
    assert RecognitionGate(feature_norm_factor=0).norm_limit == 1000.0


def test_the_window_keeps_the_recent_norms():
    gate = RecognitionGate(norm_min_samples=5)
    for _ in range(NORM_WINDOW):
        gate.accepted(np.ones(4))  # norm 2
    for _ in range(NORM_WINDOW // 2 + 1):
        gate.accepted(4 * np.ones(4))  # norm 8: the camera changed, the median follows
    assert gate.n_norms == NORM_WINDOW and gate.median_norm == 8.0


def test_dimension_and_finiteness_come_first():
    model, gate = taught()
    assert gate.check_features(np.ones(9), 8).reason == "wrong feature dimension"
    assert gate.check_features(np.zeros(0), None).reason == "wrong feature dimension"
    assert gate.check_labeled(np.full(8, np.nan), "a", model).reason == "features not finite"
    assert gate.check_features(np.array([np.inf] + [0.0] * 7), 8).reason == "features not finite"


@pytest.mark.parametrize(
    ("label", "why"),
    [
        ("", "empty"),
        ("x" * 65, "65 characters"),
        ("mu\x00g", "U+0000"),
        ("bell\x07", "U+0007"),
        ("two\nlines", "U+000A"),
        ("tab\tbed", "U+0009"),
        ("no\u00a0break", "U+00A0"),  # a non-ASCII space
        ("zero\u200bwidth", "U+200B"),  # a format character
    ],
)
def test_label_rule(label, why):
    assert why in label_problem(label, 64)


def test_labels_that_pass():
    for label in ("mug", "a mug", "x" * 64, "Tasse (grün), ø 8 cm", "杯子", "🙂"):
        assert label_problem(label, 64) is None, label


def test_class_limit_refuses_new_classes_only():
    model, gate = taught()
    assert gate.check_label("d", model) is None  # the 4th class
    model.partial_fit(np.ones(8), ["d"])
    refusal = gate.check_label("e", model)
    assert refusal.reason == "too many classes" and "class 5, max_classes = 4" in refusal.detail
    assert gate.check_label("a", model) is None  # known classes keep learning


def test_check_model_refuses_what_the_gate_would_refuse():
    model, gate = taught()
    gate.check_model(model)
    model.partial_fit(np.ones((2, 8)), ["d", "e"])
    with pytest.raises(ValueError, match="5 classes"):
        gate.check_model(model)
    for label in ("y" * 65, " padded"):
        odd = IncrementalRLSC(lambdas=1.0)
        odd.partial_fit(np.eye(2), ["a", label])
        with pytest.raises(ValueError, match="refused label"):
            gate.check_model(odd)


def test_seed_from_the_validation_buffer():
    model, _ = taught(n=60)
    gate = RecognitionGate()
    assert gate.seed(model) == model.n_validation_ > 0
    X, _ = model.validation_samples()
    assert gate.median_norm == pytest.approx(float(np.median(np.linalg.norm(X, axis=1))))
    assert gate.seed(model) == 0  # only an empty window is seeded


def test_bad_settings():
    for kwargs in (
        {"max_feature_norm": 0.0},
        {"max_feature_norm": float("inf")},
        {"feature_norm_factor": 0.5},
        {"max_classes": 0},
        {"max_label_length": 0},
        {"norm_min_samples": 0},
    ):
        with pytest.raises(ValueError):
            RecognitionGate(**kwargs)
