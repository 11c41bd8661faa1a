"""The object held up to the camera, found in a depth image: its pixels, its box, and refusals."""

import numpy as np
import pytest

from lifelong_learning.vision.crop import Box
from lifelong_learning.vision.depth import GREY, depth_metres, greyed, nearest_object, registered


def held_object(rng: np.random.Generator) -> np.ndarray:
    """Depth (m) of a room 2.5 m away, an object 0.6 m away at rows 40-89, columns 100-159, a hand
    just below it, a little sensor noise, and holes (NaN) where the camera saw nothing."""
    depth = 2.5 + rng.normal(0.0, 0.01, (200, 300))
    depth[40:90, 100:160] = 0.6 + rng.normal(0.0, 0.005, (50, 60))
    depth[90:110, 120:140] = 0.65  # the hand holding it
    depth[rng.uniform(size=depth.shape) < 0.02] = np.nan
    return depth.astype(np.float32)


def test_the_nearest_blob_with_the_hand_is_the_object():
    depth = held_object(np.random.default_rng(0))
    box, mask = nearest_object(depth, near=0.2, far=1.5, band=0.3)
    assert box == Box(100, 40, 60, 70)
    assert mask.shape == depth.shape and mask[60, 130] and mask[100, 130] and not mask[10, 10]
    assert mask.sum() > 0.9 * (50 * 60 + 20 * 20)  # holes and all: the blob is the object and the hand


def test_a_speck_nearer_than_the_object_does_not_take_its_place():
    depth = held_object(np.random.default_rng(1))
    depth[5:7, 5:7] = 0.3  # four stray pixels nearer than the object
    box, _ = nearest_object(depth, near=0.2, far=1.5, band=0.3)
    assert box == Box(100, 40, 60, 70)


def test_the_person_behind_a_small_object_is_left_out():
    depth = np.full((200, 300), 2.5, dtype=np.float32)
    depth[20:200, 60:240] = 1.1  # the person holding it, in range, most of the view
    depth[80:90, 140:150] = 0.6  # a small object held 0.5 m in front: 100 pixels, 0.3 % of the view
    box, mask = nearest_object(depth, near=0.2, far=1.5, band=0.3)
    assert box == Box(140, 80, 10, 10) and mask.sum() == 100


def test_a_depth_image_of_another_view_is_refused():
    with pytest.raises(ValueError, match="not registered"):
        registered(np.zeros((100, 100), dtype=np.float32), (200, 300))


def test_nothing_in_range_gives_no_object():
    depth = np.full((50, 60), 2.5, dtype=np.float32)
    assert nearest_object(depth, near=0.2, far=1.5, band=0.3) is None
    depth[:] = np.nan
    assert nearest_object(depth, near=0.2, far=1.5, band=0.3) is None
    depth[10:12, 10:12] = 0.6  # 4 pixels: below min_pixels
    assert nearest_object(depth, near=0.2, far=1.5, band=0.3) is None


@pytest.mark.parametrize(
    ("encoding", "pixels", "metres"),
    [
        ("16UC1", np.array([[600, 0]], dtype=np.uint16), [0.6, np.nan]),
        ("mono16", np.array([[2500, 1]], dtype=np.uint16), [2.5, 0.001]),
        ("32FC1", np.array([[0.6, np.inf]], dtype=np.float32), [0.6, np.nan]),
        ("32FC1", np.array([[-1.0, np.nan]], dtype=np.float32), [np.nan, np.nan]),
    ],
)
def test_depth_is_read_in_metres_with_no_depth_as_nan(encoding, pixels, metres):
    np.testing.assert_allclose(depth_metres(pixels, encoding), np.array([metres], dtype=np.float32))


def test_other_encodings_and_shapes_are_refused():
    with pytest.raises(ValueError, match="depth encoding"):
        depth_metres(np.zeros((2, 2), dtype=np.uint8), "mono8")
    with pytest.raises(ValueError, match="one channel"):
        depth_metres(np.zeros((2, 2, 3), dtype=np.uint16), "16UC1")


def test_depth_of_another_resolution_is_scaled_to_the_frame_and_the_room_greyed():
    depth = held_object(np.random.default_rng(2))[::2, ::2]  # 100 x 150, the same view
    scaled = registered(depth, (200, 300, 3))
    assert scaled.shape == (200, 300)
    box, mask = nearest_object(scaled, near=0.2, far=1.5, band=0.3)
    assert abs(box.x - 100) <= 2 and abs(box.y - 40) <= 2
    picture = np.random.default_rng(3).integers(0, 255, (200, 300, 3), dtype=np.uint8)
    out = greyed(picture, mask)
    assert (out[~mask] == GREY).all() and np.array_equal(out[mask], picture[mask])
    assert registered(scaled, (200, 300)) is scaled
