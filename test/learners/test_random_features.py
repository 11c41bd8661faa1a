"""Random Fourier features: kernel approximation, persistence, input checks."""

import numpy as np
import pytest

from lifelong_learning.learners.feature_map import FeatureMap, feature_map_from_state
from lifelong_learning.learners.random_features import RandomFourierFeatures


def test_inner_products_approximate_the_gaussian_kernel():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 4))
    sigma = 1.5
    phi = RandomFourierFeatures(4, 20000, bandwidth=sigma, seed=1)
    F = phi.transform(X)
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = np.exp(-d2 / (2 * sigma**2))
    assert np.abs(F @ F.T - K).max() < 0.05
    assert isinstance(phi, FeatureMap)


def test_state_round_trip_through_the_registry():
    phi = RandomFourierFeatures(3, 50, bandwidth=0.7, seed=3)
    meta, arrays = phi.to_state()
    back = feature_map_from_state(phi.kind, meta, arrays)
    X = np.random.default_rng(1).standard_normal((5, 3))
    np.testing.assert_array_equal(back.transform(X), phi.transform(X))
    assert back.n_features == 50 and back.n_inputs == 3


def test_same_seed_same_map_and_bad_input_rejected():
    a, b = RandomFourierFeatures(2, 10, seed=5), RandomFourierFeatures(2, 10, seed=5)
    np.testing.assert_array_equal(a.frequencies, b.frequencies)
    with pytest.raises(ValueError):
        a.transform(np.zeros((3, 3)))
    with pytest.raises(ValueError):
        a.transform([[np.nan, 0.0]])
    with pytest.raises(ValueError):
        RandomFourierFeatures(2, 10, bandwidth=0.0)
    with pytest.raises(ValueError):
        RandomFourierFeatures.from_state(
            {"bandwidth": 1.0}, {"frequencies": np.zeros((3, 2)), "phases": np.zeros(4)}
        )
