"""Class labels: integers or printable strings, 1 and "1" different classes."""

import numpy as np
import pytest

from lifelong_learning.learners.labels import check_label, label_key, labels_of


@pytest.mark.parametrize(
    ("given", "label"), [(3, 3), (np.int64(3), 3), ("mug", "mug"), (np.str_("a b"), "a b")]
)
def test_integers_and_printable_strings_are_labels(given, label):
    checked = check_label(given)
    assert checked == label and type(checked) is type(label)


@pytest.mark.parametrize("bad", [True, np.bool_(False), 1.5, None, "", "   ", "a\nb", "nul\x00", b"x", [1]])
def test_anything_else_is_refused_with_a_clear_error(bad):
    with pytest.raises(ValueError, match="label"):
        check_label(bad)


def test_the_type_is_part_of_the_key():
    assert label_key(1) != label_key("1")
    assert label_key(check_label(np.int32(1))) == label_key(1)


def test_labels_of_one_label_a_list_or_an_array():
    assert labels_of("cup", 1) == ["cup"]
    assert labels_of([1, "1"], 2) == [1, "1"]
    assert labels_of(np.array([[4], [5]]), 2) == [4, 5]
    with pytest.raises(ValueError, match="3 samples but 2 labels"):
        labels_of([1, 2], 3)
