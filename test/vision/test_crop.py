"""vision.crop: boxes from a region of interest, from motion against a still background and from
saliency, made square inside the frame."""

from __future__ import annotations

import numpy as np
import pytest

from lifelong_learning.vision.crop import Box, MotionCrop, cut, roi_box, saliency_box, square_box


def overlap(found: Box | None, truth: Box) -> float:
    """The share of ``truth``'s area inside ``found``."""
    if found is None:
        return 0.0
    w = min(found.x + found.width, truth.x + truth.width) - max(found.x, truth.x)
    h = min(found.y + found.height, truth.y + truth.height) - max(found.y, truth.y)
    return max(0, w) * max(0, h) / (truth.width * truth.height)


def room(rng: np.random.Generator, shape=(120, 160)) -> np.ndarray:
    """A still, textured background."""
    base = rng.integers(40, 200, (shape[0] // 8, shape[1] // 8, 3)).astype(np.uint8)
    return np.kron(base, np.ones((8, 8, 1), dtype=np.uint8))


def with_square(background: np.ndarray, box: Box, rng: np.random.Generator) -> np.ndarray:
    frame = background.copy()
    frame[box.y : box.y + box.height, box.x : box.x + box.width] = rng.integers(0, 255, 3)
    noise = rng.integers(-3, 4, frame.shape)  # sensor noise
    return np.clip(frame.astype(int) + noise, 0, 255).astype(np.uint8)


def test_a_region_of_interest_is_clipped_to_the_frame_and_all_zeros_is_the_whole_frame():
    assert roi_box(0, 0, 0, 0, (480, 640, 3)) is None
    assert roi_box(600, 400, 100, 100, (480, 640, 3)) == Box(600, 400, 40, 80)
    with pytest.raises(ValueError, match="no pixel"):
        roi_box(700, 10, 5, 5, (480, 640, 3))
    with pytest.raises(ValueError, match="negative"):
        roi_box(-1, 0, 5, 5, (480, 640, 3))


def test_the_square_box_holds_the_region_with_its_margin_and_stays_inside_the_frame():
    square = square_box(Box(10, 20, 40, 20), (480, 640), margin=0.25)
    assert square.width == square.height == 60
    assert overlap(square, Box(10, 20, 40, 20)) == 1.0
    corner = square_box(Box(620, 470, 20, 10), (480, 640), margin=0.5)  # moved inside, not cut
    assert corner == Box(600, 440, 40, 40)
    assert square_box(Box(0, 0, 640, 480), (480, 640)).width == 480  # never above the shorter side
    image = np.zeros((480, 640, 3), dtype=np.uint8)
    assert cut(image, corner).shape == (40, 40, 3) and cut(image, None) is image


def test_motion_finds_an_object_moving_against_a_still_background():
    rng = np.random.default_rng(0)
    background = room(rng)
    crop = MotionCrop(history=8, min_history=3, shrink=2, hold=0)
    found = []
    for frame in range(12):
        truth = Box(20 + 8 * frame, 30 + 3 * frame, 24, 24)
        found.append((crop.box(with_square(background, truth, rng)), truth))
    assert all(box is None for box, _ in found[:3])  # the background's history fills first
    assert all(overlap(box, truth) > 0.8 for box, truth in found[3:]), found
    assert all(box.width * box.height < 4 * 24 * 24 for box, _ in found[3:])  # the object, not the room


def test_motion_keeps_the_last_box_while_the_object_is_held_still_and_starts_afresh_in_another_scene():
    rng = np.random.default_rng(1)
    background = room(rng)
    crop = MotionCrop(history=5, min_history=3, shrink=2, hold=3)
    for frame in range(6):
        last = crop.box(with_square(background, Box(10 + 10 * frame, 40, 20, 20), rng))
    assert last is not None
    still = with_square(background, Box(60, 40, 20, 20), rng)
    held = [crop.box(still) for _ in range(8)]  # it stops moving: the last box, for `hold` frames
    assert held[0] is not None
    assert held[-1] is None
    crop = MotionCrop(history=5, min_history=3, hold=30)
    for frame in range(5):
        last = crop.box(with_square(background, Box(10 + 10 * frame, 40, 20, 20), rng))
    assert last is not None
    other = room(np.random.default_rng(9))  # another scene: no box, and its background learned afresh
    assert crop.box(other) is None
    truths = [Box(40 + 10 * k, 40, 20, 20) for k in range(5)]
    found = [crop.box(with_square(other, truth, rng)) for truth in truths]
    assert found[:2] == [None, None]  # the new background's first frames
    assert all(overlap(box, truth) > 0.8 for box, truth in zip(found[2:], truths[2:], strict=True)), found


def test_motion_starts_afresh_with_another_frame_size_and_refuses_bad_settings():
    rng = np.random.default_rng(2)
    crop = MotionCrop(history=4, min_history=3)
    for _ in range(4):
        crop.box(room(rng))
    assert crop.box(room(rng, (64, 64))) is None  # a new background is being learned
    with pytest.raises(ValueError):
        MotionCrop(history=2, min_history=3)
    with pytest.raises(ValueError):
        MotionCrop(min_fraction=0.6, max_fraction=0.5)


def test_saliency_finds_what_stands_out_and_nothing_in_a_flat_picture():
    assert saliency_box(np.full((96, 128, 3), 90, dtype=np.uint8)) is None
    rng = np.random.default_rng(3)
    image = np.clip(rng.normal(100, 4, (96, 128, 3)), 0, 255).astype(np.uint8)
    truth = Box(80, 20, 16, 16)
    image[truth.y : truth.y + truth.height, truth.x : truth.x + truth.width] = (250, 30, 30)
    found = saliency_box(image)
    assert overlap(found, truth) > 0.5
    assert found.width * found.height < 0.25 * 96 * 128
