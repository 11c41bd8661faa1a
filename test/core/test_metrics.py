"""normalized_mse: the one nMSE, its zero-variance rule and a given variance."""

import numpy as np
import pytest

from lifelong_learning.core.metrics import normalized_mse


def test_matches_the_definition_per_column():
    rng = np.random.default_rng(0)
    y = rng.normal(size=(100, 3)) * [1.0, 5.0, 0.1]
    pred = y + rng.normal(size=y.shape) * 0.1
    expected = ((y - pred) ** 2).mean(0) / y.var(0)
    np.testing.assert_allclose(normalized_mse(y, pred), expected)
    assert normalized_mse(y, y.mean(0) * np.ones_like(y)) == pytest.approx([1.0, 1.0, 1.0])


def test_zero_variance_column_is_its_mse_and_given_variance_is_used():
    y = np.column_stack([np.zeros(4), np.arange(4.0)])
    pred = y + 0.5
    out = normalized_mse(y, pred)
    assert out[0] == pytest.approx(0.25)  # constant column: plain MSE
    assert out[1] == pytest.approx(0.25 / np.var(np.arange(4.0)))
    np.testing.assert_allclose(normalized_mse(y, pred, variance=[2.0, 4.0]), [0.125, 0.0625])


def test_one_dimensional_empty_and_mismatched():
    assert normalized_mse([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == pytest.approx([0.0])
    assert np.isnan(normalized_mse(np.zeros((0, 2)), np.zeros((0, 2)))).all()
    with pytest.raises(ValueError, match="shape"):
        normalized_mse(np.zeros((3, 2)), np.zeros((3, 1)))
