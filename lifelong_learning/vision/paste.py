"""Taught frames pasted onto rooms seen before: teaching-time augmentation against the room (no ROS
imports).

A robot taught an object in one room and asked about it in another learns the room with the object:
the crop around a held object is mostly room, and a linear classifier on CNN features takes the
room's colours for the object's (docs/benchmarks/recognition-showing.md: most wrong answers name an
object taught in a room like the test room). Pasting the object onto other backgrounds while it is
taught ("cut, paste and learn", Dwibedi et al., ICCV 2017) makes the room an unreliable cue. Here the
cut comes from the motion crop (:class:`~lifelong_learning.vision.crop.MotionCrop`): the pixels that
move against the still background, the object and the hand that holds it; the backgrounds are the
empty rooms of the scenes the camera saw before (:attr:`MotionCrop.room`), nothing from outside.

A pasted frame is ``m · frame + (1 − m) · room``: ``m`` the foreground mask grown by ``grow`` of its
(shrunk) pixels, brought to the frame's size and softened by a Gaussian of ``soften`` × the shrink
factor; the room resized to the frame, mirrored at random; only the square box cut from the frame
is blended. Measured on the benchmark's world: docs/benchmarks/recognition-showing.md.
"""

from __future__ import annotations

from collections import OrderedDict

import cv2
import numpy as np

from lifelong_learning.vision.crop import Box, cut

#: rooms kept (the most recent scenes')
ROOMS = 16
#: a room is kept at most this wide (pixels; brought back to the frame's size when pasted onto), so
#: that the rooms of a large camera stay small: 16 of 640×480 are 15 MB
ROOM_WIDTH = 640


class RoomPaster:
    """Pastes a frame's foreground onto rooms of other scenes (module docstring).

    Args:
        rooms: most rooms kept, one per scene (the oldest scene's goes first).
        grow: the foreground mask is grown by this many of its pixels (it is found on a shrunk frame,
            and its edge misses the object's rim).
        soften: the mask's edge is blurred by a Gaussian of this × the shrink factor (pixels).
        seed: of the choice of rooms and mirroring.
    """

    def __init__(self, rooms: int = ROOMS, grow: int = 1, soften: float = 0.75, seed: int = 0) -> None:
        if rooms < 1 or grow < 0 or not soften >= 0:
            raise ValueError(f"need rooms >= 1, grow >= 0, soften >= 0; got {rooms}, {grow}, {soften}")
        self.max_rooms, self.grow, self.soften = int(rooms), int(grow), float(soften)
        self._rooms: OrderedDict[int, np.ndarray] = OrderedDict()
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self._rooms)

    def saw(self, scene: int, room: np.ndarray | None) -> None:
        """Keep ``room`` (uint8 H×W×3, not copied: the caller gives up its copy; shrunk to
        :data:`ROOM_WIDTH`) as scene ``scene``'s; None: nothing to keep."""
        if room is None or scene in self._rooms:
            return
        if room.shape[1] > ROOM_WIDTH:
            height = max(1, round(room.shape[0] * ROOM_WIDTH / room.shape[1]))
            room = cv2.resize(room, (ROOM_WIDTH, height), interpolation=cv2.INTER_AREA)
        self._rooms[scene] = room
        while len(self._rooms) > self.max_rooms:
            self._rooms.popitem(last=False)

    def paste(
        self,
        frame: np.ndarray,
        foreground: np.ndarray | None,
        scene: int,
        copies: int = 1,
        box: Box | None = None,
    ) -> list[np.ndarray]:
        """``frame`` (uint8 H×W×3) pasted onto ``copies`` rooms of scenes other than ``scene`` (uint8
        each), cut by ``box`` (None: whole): only that part is blended; ``foreground``: the bool mask
        of what moves in it, on a frame shrunk by an integer factor. None or an empty mask, or no
        other scene's room yet: no copy."""
        others = [room for key, room in self._rooms.items() if key != scene]
        if foreground is None or not foreground.any() or not others or copies < 1:
            return []
        height, width = frame.shape[:2]
        mask = foreground.astype(np.uint8)
        if self.grow:
            mask = cv2.dilate(mask, np.ones((2 * self.grow + 1, 2 * self.grow + 1), np.uint8))
        mask = cv2.resize(mask.astype(np.float32), (width, height), interpolation=cv2.INTER_LINEAR)
        shrink = height / foreground.shape[0]
        if self.soften > 0:
            mask = cv2.GaussianBlur(mask, (0, 0), self.soften * shrink)
        mask = np.clip(cut(mask, box), 0.0, 1.0)[:, :, None]
        picture = cut(frame, box)
        out = []
        for index in self._rng.choice(len(others), size=copies, replace=len(others) < copies):
            room = others[int(index)]
            if room.shape[:2] != (height, width):
                room = cv2.resize(room, (width, height), interpolation=cv2.INTER_AREA)
            if self._rng.uniform() < 0.5:
                room = room[:, ::-1]
            out.append((mask * picture + (1.0 - mask) * cut(room, box)).round().astype(np.uint8))
        return out
