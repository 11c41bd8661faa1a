"""sim.showing: objects shown to a still camera in a teaching room and a test room, with their true
boxes."""

from __future__ import annotations

import numpy as np
import pytest

from lifelong_learning.sim.objects import ObjectRenderer
from lifelong_learning.sim.showing import show_object, showing_dataset


@pytest.fixture(scope="module")
def renderer():
    with ObjectRenderer(3, seed=0) as r:
        yield r


def test_a_session_is_frames_with_the_true_box_of_a_moving_object(renderer):
    frames = show_object(renderer, 1, "teach", 6, size=(96, 128))
    assert len(frames) == 6
    for frame in frames:
        assert frame.image.shape == (96, 128, 3) and frame.image.dtype == np.uint8
        x, y, w, h = frame.box
        assert 0 <= x < x + w <= 128 and 0 <= y < y + h <= 96
        assert w * h < 0.5 * 96 * 128  # the object is a part of the frame, the room the rest
    assert len({f.box for f in frames}) > 1  # it moves
    # a still camera: outside the object's boxes the room does not change from frame to frame
    outside = np.ones((96, 128), dtype=bool)
    for frame in frames:
        x, y, w, h = frame.box
        outside[max(0, y - 20) : y + h + 20, max(0, x - 20) : x + w + 20] = False  # the hand, too
    assert outside.any()
    change = np.abs(frames[0].image[outside].astype(int) - frames[-1].image[outside].astype(int))
    assert change.mean() < 4 and np.percentile(change, 99) < 12  # the sensor's noise only


def test_sessions_are_repeatable_and_the_test_room_is_another_room(renderer):
    teach = show_object(renderer, 0, "teach", 2, size=(64, 80))
    again = show_object(renderer, 0, "teach", 2, size=(64, 80))
    test = show_object(renderer, 0, "test", 2, size=(64, 80))
    assert np.array_equal(teach[1].image, again[1].image) and teach[1].box == again[1].box
    assert np.abs(teach[0].image.astype(int) - test[0].image.astype(int)).mean() > 10
    other = show_object(renderer, 0, "test", 2, size=(64, 80), room_index=1)  # another test room
    assert np.array_equal(
        show_object(renderer, 0, "test", 2, size=(64, 80), room_index=0)[1].image, test[1].image
    )
    assert np.abs(other[0].image.astype(int) - test[0].image.astype(int)).mean() > 10


def test_a_lead_in_shows_the_room_before_the_object_comes(renderer):
    frames = show_object(renderer, 2, "test", 3, size=(64, 80), lead_in=2)
    assert [f.box is None for f in frames] == [True, True, False, False, False]
    assert [f.mask is None for f in frames] == [True, True, False, False, False]
    assert np.abs(frames[0].image.astype(int) - frames[1].image.astype(int)).mean() < 4


def test_the_objects_pixels_fill_its_box_and_differ_from_the_room(renderer):
    assert show_object(renderer, 1, "test", 1, size=(96, 128))[0].depth is None  # unless asked for
    frames = show_object(renderer, 1, "test", 4, size=(96, 128), lead_in=1, depth_camera=True)
    room = frames[0].image.astype(int)
    for frame in frames[1:]:
        x, y, w, h = frame.box
        ys, xs = np.nonzero(frame.mask)
        assert frame.mask.shape == (96, 128) and frame.mask.dtype == bool
        # the box is the mask's: it touches all four sides of it
        assert (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1) == (x, y, x + w, y + h)
        # the object's pixels show the object, the others (away from the hand) the room
        change = np.abs(frame.image.astype(int) - room).mean(axis=2)
        assert change[frame.mask].mean() > 10 > np.median(change[~frame.mask])
        # the stand-in depth camera: the object held up near, the room far, a few pixels without depth
        near = frame.depth < 1.0
        assert frame.depth.shape == (96, 128) and frame.depth.dtype == np.float32
        assert near[frame.mask].mean() > 0.95 and np.isnan(frame.depth).mean() < 0.05
        assert (near & ~frame.mask).sum() <= frame.mask.sum()  # the hand, at most
    assert np.nanmin(frames[0].depth) > 2.0  # the lead-in: the room alone


def test_bad_sessions_are_refused(renderer):
    with pytest.raises(ValueError, match="session"):
        show_object(renderer, 0, "lab", 2)
    with pytest.raises(ValueError, match="n_frames"):
        show_object(renderer, 0, "teach", 0)
    with pytest.raises(ValueError, match="room_index"):
        show_object(renderer, 0, "test", 2, room_index=-1)


def test_the_dataset_holds_both_sessions_of_every_object():
    data = showing_dataset(2, 2, size=(48, 64))
    assert sorted(data) == ["teach", "test"]
    assert [len(s) for s in data["teach"]] == [2, 2] and [len(s) for s in data["test"]] == [2, 2]
