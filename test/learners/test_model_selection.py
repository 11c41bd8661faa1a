"""Recoding and the §7.6.3 choice of λ and α on validation scores, by hand on small numbers."""

import numpy as np

from lifelong_learning.learners.calibration import T_DEFAULT
from lifelong_learning.learners.model_selection import (
    MIN_CALIBRATION_SAMPLES,
    RECODING_SHRINK,
    SelectionRule,
    calibrate,
    recoding,
)


def rule(lambdas=(0.1, 1.0, 10.0), alpha="auto", grid=(0.0, 0.5, 1.0), min_class_count=2, alpha_init=0.5):
    return SelectionRule(np.array(lambdas), alpha, np.array(grid), min_class_count, alpha_init)


def test_recoding_scales_each_class_by_k_over_its_count_to_the_alpha():
    counts = np.array([10, 10, 0, 10])  # a class without training sample counts as 1
    np.testing.assert_allclose(recoding(counts, 1.0), [3.0, 3.0, 30.0, 3.0])
    np.testing.assert_allclose(recoding(counts, 0.5), np.sqrt([3.0, 3.0, 30.0, 3.0]))
    np.testing.assert_array_equal(recoding(counts, 0.0), [1.0, 1.0, 1.0, 1.0])


def test_a_class_taught_more_than_the_median_is_shrunk_by_at_most_the_shrink_exponent():
    counts = np.array([30, 10, 0])  # median 10: the class of 30 is shrunk by (10/30)^min(α, 0.25)
    np.testing.assert_allclose(recoding(counts, 1.0), [4.0 * (1 / 3) ** RECODING_SHRINK, 4.0, 40.0])
    np.testing.assert_allclose(recoding(counts, 0.2), [4.0**0.2 * (1 / 3) ** 0.2, 4.0**0.2, 40.0**0.2])
    # however often it is taught, its weight against the median class falls as (m/k_t)^0.25, not as m/k_t
    many = recoding(np.array([10_000, 10, 10, 1]), 1.0)
    assert np.isclose(many[0] / many[1], 1000.0**-RECODING_SHRINK)
    assert np.all(np.diff(recoding(np.array([1, 5, 10, 20, 400]), 1.0)) < 0)  # more samples: less weight


def test_a_shrink_of_one_is_the_thesis_recoding_and_zero_never_shrinks():
    counts = np.array([400, 20, 10, 3, 0])
    k = counts.sum()
    for alpha in (0.3, 1.0):
        np.testing.assert_allclose(recoding(counts, alpha, 1.0), (k / np.maximum(counts, 1)) ** alpha)
    never = recoding(counts, 1.0, 0.0)  # above the median (10): held at the median class's weight
    np.testing.assert_allclose(never[:2], [k / 10, k / 10])
    np.testing.assert_allclose(never[2:], k / np.array([10, 3, 1]))


def test_the_median_of_an_even_number_of_classes_is_the_midpoint_and_edge_cases_hold():
    # two classes: the median is 825; the larger is shrunk against it, the smaller keeps k/k_t
    np.testing.assert_allclose(
        recoding(np.array([1500, 150]), 1.0), [1650 / 825 * (825 / 1500) ** RECODING_SHRINK, 1650 / 150]
    )
    # four classes: median 15 between 10 and 20; 20 and 40 are above it
    got = recoding(np.array([5, 10, 20, 40]), 0.5)
    np.testing.assert_allclose(
        got, [(75 / 5) ** 0.5, (75 / 10) ** 0.5, *((75 / 15) ** 0.5 * (15 / np.array([20, 40])) ** 0.25)]
    )
    assert recoding(np.array([], dtype=int), 1.0).size == 0
    np.testing.assert_allclose(recoding(np.array([7]), 1.0), [1.0])  # one class: k / k_1


def test_ties_go_to_the_larger_lambda_and_no_data_to_the_middle_one():
    r = rule(lambdas=(10.0, 0.1, 1.0))
    assert r.lambdas[r.best_lambda(np.array([0.5, 0.9, 0.9]))] == 1.0
    assert r.lambdas[r.best_lambda(np.array([0.9, 0.9, 0.5]))] == 10.0
    assert r.lambdas[r.best_lambda(np.full(3, np.nan))] == 1.0
    assert rule(lambdas=(3.0,)).best_lambda(np.array([np.nan])) == 0


def test_alpha_is_the_largest_that_keeps_the_well_represented_accuracy():
    # two classes, class 1 rare (1 training sample, not well-represented): recoding lifts it
    val_y, counts = np.array([0, 0, 1]), np.array([9, 1])
    scores = np.array([[1.0, 0.0], [1.0, 0.2], [0.6, 0.5]])  # class 1 wins at α ≥ 0.5 only
    r = rule(lambdas=(1.0,))
    sel = r.choose([scores], val_y, counts)
    assert sel.lambda_index == 0 and sel.alpha == 0.5  # α = 1 loses the second class-0 sample
    np.testing.assert_allclose(sel.accuracy, [1.0])
    assert (sel.inverse_temperature, sel.calibration_samples) == (T_DEFAULT, 0)  # too few to calibrate


def test_a_candidate_not_scored_is_never_chosen():
    val_y, counts = np.array([0, 1]), np.array([5, 5])
    good = np.array([[1.0, 0.0], [0.0, 1.0]])
    sel = rule(alpha=0.0).choose([None, None, good], val_y, counts)
    assert sel.lambda_index == 2
    assert np.isnan(sel.accuracy[0]) and sel.accuracy[2] == 1.0


def test_without_validation_samples_alpha_init_and_the_middle_lambda():
    sel = rule().choose([np.zeros((0, 2))] * 3, np.zeros(0, dtype=np.int64), np.array([3, 3]))
    assert (sel.lambda_index, sel.alpha) == (1, 0.5) and np.all(np.isnan(sel.accuracy))
    before = rule(alpha=0.25).unselected(2)
    assert (before.lambda_index, before.alpha, before.calibration_samples) == (2, 0.25, 0)


def test_calibration_needs_enough_samples_and_two_classes():
    rng = np.random.default_rng(0)
    n = MIN_CALIBRATION_SAMPLES
    val_y = rng.integers(0, 2, size=n)
    scores = np.eye(2)[val_y] * 0.3 + rng.normal(scale=0.1, size=(n, 2))
    t, used = calibrate(scores, 0.0, val_y, np.array([4, 4]))
    assert used == n and t > 1.0  # RLSC scores are small: sharpened
    assert calibrate(scores[:-1], 0.0, val_y[:-1], np.array([4, 4])) == (T_DEFAULT, 0)
    assert calibrate(scores, 0.0, val_y, np.array([8])) == (T_DEFAULT, 0)
    assert calibrate(None, 0.0, val_y, np.array([4, 4])) == (T_DEFAULT, 0)
