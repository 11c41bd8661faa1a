"""vision.paste: a taught frame's moving foreground pasted onto the empty rooms of other scenes, and
the rooms and foreground the motion crop keeps for it."""

from __future__ import annotations

import numpy as np
import pytest
from test_crop import room, with_square

from lifelong_learning.vision.crop import Box, MotionCrop
from lifelong_learning.vision.paste import RoomPaster


def test_the_motion_crop_keeps_each_scenes_empty_room_and_the_moving_foreground():
    rng = np.random.default_rng(3)
    first, second = room(rng), room(np.random.default_rng(4))
    crop = MotionCrop(history=5, min_history=3, shrink=2, hold=3)
    empty = [with_square(first, Box(0, 0, 0, 0), rng) for _ in range(3)]
    for frame in empty:
        crop.box(frame)
    assert crop.room is None and crop.scene == 0  # judged at the first frame checked against the room
    truth = Box(40, 40, 24, 24)
    box = crop.box(with_square(first, truth, rng))
    assert box is not None and crop.room is not None
    assert np.array_equal(crop.room, empty[0])  # the scene's first frame, in colour and whole
    ys, xs = np.nonzero(crop.foreground)  # on the frame shrunk by 2
    assert 2 * ys.min() >= truth.y - 2 and 2 * ys.max() <= truth.y + truth.height + 2
    assert 2 * xs.min() >= truth.x - 2 and 2 * xs.max() <= truth.x + truth.width + 2
    still = with_square(first, truth, rng)
    for _ in range(4):
        held = crop.box(still)
    assert held is not None and crop.foreground is None  # a held box: no foreground to paste
    crop.box(second)  # another scene: its background afresh, its own room
    assert crop.scene == 1 and crop.room is None
    for _ in range(2):
        crop.box(with_square(second, Box(0, 0, 0, 0), rng))
    crop.box(with_square(second, truth, rng))
    assert crop.room is not None and np.array_equal(crop.room, second)


def test_a_scene_whose_first_frame_holds_a_moving_object_keeps_no_room():
    rng = np.random.default_rng(5)
    background = room(rng)
    crop = MotionCrop(history=5, min_history=3, shrink=2)
    for k in range(6):
        crop.box(with_square(background, Box(10 + 15 * k, 40, 24, 24), rng))
    assert crop.room is None


def test_the_foreground_is_pasted_onto_a_room_of_another_scene():
    rng = np.random.default_rng(6)
    here, there = room(rng), room(np.random.default_rng(7))
    truth = Box(40, 32, 32, 32)
    frame = with_square(here, truth, rng)
    foreground = np.zeros((60, 80), dtype=bool)  # the frame shrunk by 2
    foreground[16:32, 20:36] = True
    paster = RoomPaster(grow=0, soften=0.0)
    assert paster.paste(frame, foreground, scene=0) == []  # no room seen yet
    paster.saw(0, here)
    assert paster.paste(frame, foreground, scene=0) == []  # only this scene's own room
    assert (
        paster.paste(frame, None, scene=1) == [] and paster.paste(frame, np.zeros_like(foreground), 1) == []
    )
    paster.saw(1, there)
    paster.saw(1, here)  # a scene keeps its first room
    pasted = paster.paste(frame, foreground, scene=0, copies=3)
    assert len(pasted) == 3
    inside = (slice(truth.y + 2, truth.y + truth.height - 2), slice(truth.x + 2, truth.x + truth.width - 2))
    rim = (slice(truth.y - 2, truth.y + truth.height + 2), slice(truth.x - 2, truth.x + truth.width + 2))
    for picture in pasted:  # (the mask brought to the frame's size blends a pixel or two at its edge)
        assert picture.shape == frame.shape and picture.dtype == np.uint8
        assert np.array_equal(picture[inside], frame[inside])  # the object as it was
        outside = _blanked(picture, rim)
        assert np.array_equal(outside, _blanked(there, rim)) or np.array_equal(
            outside, _blanked(there[:, ::-1], rim)
        )  # the other scene's room around it, mirrored or not


def _blanked(picture: np.ndarray, inside: tuple[slice, slice]) -> np.ndarray:
    out = picture.copy()
    out[inside] = 0
    return out


def test_the_mask_is_grown_and_softened_and_rooms_are_bounded():
    frame = np.full((120, 160, 3), 200, dtype=np.uint8)
    foreground = np.zeros((30, 40), dtype=bool)  # the frame shrunk by 4
    foreground[10:20, 15:25] = True
    paster = RoomPaster(rooms=2, grow=1, soften=0.75, seed=1)
    for scene in range(4):
        paster.saw(scene, np.full((60, 80, 3), 10 * scene, dtype=np.uint8))  # resized to the frame
    assert len(paster) == 2  # the two newest scenes' rooms
    big = RoomPaster()
    big.saw(0, np.zeros((2160, 3840, 3), dtype=np.uint8))  # a 4K camera's room is kept small
    assert big._rooms[0].shape == (360, 640, 3)
    (picture,) = paster.paste(frame, foreground, scene=3)
    assert picture[60, 80].tolist() == [200, 200, 200]  # the object's middle
    assert picture[0, 0].tolist() == [20, 20, 20]  # scene 2's room, the only other one kept
    edge = picture[60, 95:110, 0].astype(int)  # from the object outward: a soft fall to the room
    assert edge[0] > 150 and edge[-1] < 40 and np.all(np.diff(edge) <= 0)
    with pytest.raises(ValueError):
        RoomPaster(rooms=0)
    with pytest.raises(ValueError):
        RoomPaster(soften=float("nan"))


def test_a_paste_cut_by_a_box_is_that_part_of_the_whole_paste():
    rng = np.random.default_rng(9)
    frame, rooms = room(rng), [room(np.random.default_rng(k)) for k in (10, 11)]
    foreground = np.zeros((30, 40), dtype=bool)  # the frame shrunk by 4
    foreground[8:20, 12:24] = True
    whole, part = RoomPaster(seed=5), RoomPaster(seed=5)
    for scene, picture in enumerate(rooms, start=1):
        whole.saw(scene, picture)
        part.saw(scene, picture)
    box = Box(40, 24, 64, 64)
    for _ in range(4):  # the same rooms and mirrorings drawn by both
        expected = [copy[24:88, 40:104] for copy in whole.paste(frame, foreground, scene=0, copies=2)]
        got = part.paste(frame, foreground, scene=0, copies=2, box=box)
        assert len(got) == 2 and all(np.array_equal(g, e) for g, e in zip(got, expected, strict=True))
