"""Feature normalisation before the learner (vision/normalisation.py)."""

import numpy as np
import pytest

from lifelong_learning.vision.normalisation import SCALE, normalised


def test_each_normalisation_against_its_formula():
    rng = np.random.default_rng(0)
    F = rng.uniform(0, 6, size=(5, 40)).astype(np.float32)
    assert np.array_equal(normalised(F, "none"), F)
    l2 = normalised(F, "l2")
    np.testing.assert_allclose(l2, SCALE * F / np.linalg.norm(F, axis=1, keepdims=True), rtol=1e-6)
    root = np.sqrt(F)
    want = SCALE * root / np.linalg.norm(root, axis=1, keepdims=True)
    np.testing.assert_allclose(normalised(F, "sqrt_l2"), want, rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(normalised(F[0], "sqrt_l2")), SCALE, rtol=1e-6)  # one vector


def test_brightness_scaling_is_removed_and_bad_input_is_handled():
    rng = np.random.default_rng(1)
    f = rng.uniform(0, 6, size=40)
    np.testing.assert_allclose(normalised(0.5 * f, "sqrt_l2"), normalised(f, "sqrt_l2"), rtol=1e-6)
    assert np.all(np.isfinite(normalised(np.zeros(40), "sqrt_l2")))  # no division by zero
    assert np.all(normalised(-np.ones(4), "sqrt_l2") == 0.0)  # negative activations taken as 0
    with pytest.raises(ValueError):
        normalised(f, "max")
