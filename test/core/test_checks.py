"""as_rows / same_rows: the one input check of the numerical code."""

import numpy as np
import pytest

from lifelong_learning.core.checks import as_rows, same_rows


def test_one_dimensional_is_a_row_except_for_width_one():
    assert as_rows([1, 2, 3], 3).shape == (1, 3)
    assert as_rows([1, 2, 3], 1).shape == (3, 1)  # targets of a one-output model
    assert as_rows([[1.0, 2.0]]).dtype == np.float64


@pytest.mark.parametrize(
    ("x", "width", "message"),
    [
        (np.zeros((2, 3)), 4, "must have 4 columns"),
        (np.zeros((2, 2, 2)), None, "1-D or 2-D"),
        (np.zeros((2, 0)), None, "no columns"),
        ([1.0, np.nan], 2, "NaN or Inf"),
        ([1.0, np.inf], 2, "NaN or Inf"),
    ],
)
def test_refusals_name_the_argument(x, width, message):
    with pytest.raises(ValueError, match=message) as info:
        as_rows(x, width, "qd", "joints ['a', 'b']" if width else "")
    assert "qd" in str(info.value)


def test_same_rows():
    assert same_rows({"a": np.zeros((3, 1)), "b": np.zeros((3, 2))}) == 3
    with pytest.raises(ValueError, match="different numbers of rows"):
        same_rows({"a": np.zeros((3, 1)), "b": np.zeros((2, 1))})
