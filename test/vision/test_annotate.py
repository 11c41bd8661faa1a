"""The annotated picture: the crop's box and the answer drawn on a copy of the frame (vision/annotate.py)."""

import numpy as np

from lifelong_learning.vision.annotate import KNOWN, UNKNOWN, annotated, caption
from lifelong_learning.vision.crop import Box


def test_the_box_and_the_answer_are_drawn_on_a_copy():
    frame = np.full((480, 640, 3), 90, dtype=np.uint8)
    out = annotated(frame, Box(200, 150, 120, 100), "mug", 0.87)
    assert out.shape == frame.shape and out.dtype == np.uint8 and np.all(frame == 90)
    assert tuple(out[200, 200]) == KNOWN and tuple(out[150, 260]) == KNOWN  # the box's left and top edges
    assert tuple(out[200, 260]) == (90, 90, 90)  # inside the box: the frame
    assert np.any(np.all(out[100:150, 200:320] == KNOWN, axis=-1))  # the caption's background above it
    assert caption("mug", 0.87) == "mug 87%" and caption("", 0.3) == "?"


def test_unknown_is_a_question_mark_and_no_answer_draws_only_the_box():
    frame = np.zeros((240, 320, 3), dtype=np.uint8)
    unknown = annotated(frame, Box(10, 60, 50, 50), "", 0.2)
    assert tuple(unknown[80, 10]) == UNKNOWN
    nothing = annotated(frame, None, None)
    assert np.array_equal(nothing, frame)


def test_an_unknown_backbone_is_refused_before_anything_loads():
    import pytest

    from lifelong_learning.vision import FeatureExtractor
    from lifelong_learning.vision.feature_extractor import BACKBONES, weights_file

    assert set(BACKBONES) == {"efficientnet-lite0", "efficientnet-lite1", "efficientnet-lite2"}
    with pytest.raises(ValueError, match="backbone must be one of"):
        FeatureExtractor(backbone="efficientnet-lite9")
    assert weights_file("efficientnet-lite0").is_file()
