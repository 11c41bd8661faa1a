"""Crop a camera frame to the object before the CNN (no ROS imports).

The iCubWorld pipeline that thesis ch. 7 builds on does not feed the whole frame to the CNN: the robot
looks at what it is shown and cuts a box around it, so that the features describe the object rather
than the room. Measured on the simulated world of :mod:`lifelong_learning.sim.showing` (teaching and
test in different rooms), the crop matters more than the learner: docs/benchmarks/recognition-scale.md.

Where the box comes from (``crop`` of the feature_extractor node):

- ``roi``: given with the frame (``sensor_msgs/RegionOfInterest``: a detector, a tracker, the
  simulator's ground truth); :func:`roi_box` checks it against the frame.
- ``motion`` (:class:`MotionCrop`): what moves against a still background while a person shows the
  object. The background is the per-pixel median of the last ``history`` grey frames, shrunk by
  ``shrink``; a pixel is foreground when it differs from it by more than ``k`` times the frame's robust
  noise scale (1.4826 × the median absolute difference, floored at ``min_difference``); the box spans the
  2nd to 98th percentiles of the foreground pixels' coordinates. No box until ``min_history`` frames
  were seen, when too little moves (the object held still: the last box is kept for ``hold`` frames)
  or when most of the frame changes by more than ``k × min_difference`` (the camera moved, another
  scene: its background is learned afresh). Besides the box it keeps, for
  :mod:`~lifelong_learning.vision.paste`, each frame's ``foreground`` (the mask, shrunk), the
  ``scene`` (a count of backgrounds learned afresh) and the scene's ``room``: its first frame in
  colour, when that frame proves to be the background (nothing moved in it against the median of
  the first ``min_history`` frames).
- ``saliency`` (:func:`saliency_box`): what stands out from the background, by the spectral residual
  (Hou and Zhang, CVPR 2007) of each colour channel of a 64×64 picture, summed: with ``F`` a
  channel's Fourier transform, ``R = log|F| − h₃ ∗ log|F|`` (``h₃`` a 3×3 mean filter) and
  ``S = g ∗ |F⁻¹[exp(R + i·arg F)]|²`` (``g`` a Gaussian); the box spans the pixels whose saliency
  is above ``k`` times its mean.
- ``depth``: the nearest blob of a registered depth image, its pixels kept and the rest grey
  (:mod:`lifelong_learning.vision.depth`).

Every box becomes a square around the region, widened by ``margin`` on each side and kept inside the
frame (:func:`square_box`): the CNN's input is square, and a little context helps. No box: the whole
frame, as before.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import cv2
import numpy as np

#: values of the ``crop`` parameter
CROP_MODES = ("none", "roi", "motion", "saliency", "depth")


class Box(NamedTuple):
    """A box in pixels, as sensor_msgs/RegionOfInterest gives it: top-left corner and size."""

    x: int
    y: int
    width: int
    height: int


def roi_box(x: int, y: int, width: int, height: int, shape: tuple[int, ...]) -> Box | None:
    """The part of a region of interest inside a frame of ``shape`` (height, width, ...).

    A region of all zeros means the whole frame (sensor_msgs/RegionOfInterest's convention): None.

    Raises:
        ValueError: a negative field, or a region with no pixel inside the frame.
    """
    if min(x, y, width, height) < 0:
        raise ValueError(f"a region of interest has no negative field, got {(x, y, width, height)}")
    if width == 0 and height == 0 and x == 0 and y == 0:
        return None
    frame_h, frame_w = int(shape[0]), int(shape[1])
    x1, y1 = min(x + width, frame_w), min(y + height, frame_h)
    if x >= x1 or y >= y1:
        raise ValueError(f"the region {(x, y, width, height)} has no pixel in the {frame_w}x{frame_h} frame")
    return Box(int(x), int(y), int(x1 - x), int(y1 - y))


def square_box(box: Box, shape: tuple[int, ...], margin: float = 0.2) -> Box:
    """The square around ``box``, widened by ``margin`` × its longer side on each side, moved (not
    cut) to stay inside a frame of ``shape``, and no larger than the frame's shorter side."""
    frame_h, frame_w = int(shape[0]), int(shape[1])
    side = round(max(box.width, box.height) * (1.0 + 2.0 * margin))
    side = max(1, min(side, frame_h, frame_w))
    cx, cy = box.x + box.width / 2.0, box.y + box.height / 2.0
    x = round(min(max(cx - side / 2.0, 0.0), frame_w - side))
    y = round(min(max(cy - side / 2.0, 0.0), frame_h - side))
    return Box(x, y, side, side)


def cut(image: np.ndarray, box: Box | None) -> np.ndarray:
    """The part of ``image`` in ``box`` (a view, no copy); the whole image for None."""
    if box is None:
        return image
    return image[box.y : box.y + box.height, box.x : box.x + box.width]


def _spread(ys: np.ndarray, xs: np.ndarray, scale: float) -> Box:
    """The box of the 2nd to 98th percentiles of pixel coordinates, in the full frame's pixels."""
    y0, y1 = np.percentile(ys, [2.0, 98.0])
    x0, x1 = np.percentile(xs, [2.0, 98.0])
    x, y = int(x0 * scale), int(y0 * scale)
    return Box(x, y, max(1, int((x1 + 1) * scale) - x), max(1, int((y1 + 1) * scale) - y))


def _grey(image: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """``image`` (uint8 H×W×3 or H×W) as float32 grey of ``shape`` (height, width), area-averaged."""
    grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY) if image.ndim == 3 else image
    return cv2.resize(grey, (shape[1], shape[0]), interpolation=cv2.INTER_AREA).astype(np.float32)


class MotionCrop:
    """The box of what moves against a still background (the module docstring gives the rule).

    Args:
        history: frames whose per-pixel median is the background (boxes from ``min_history`` on).
        shrink: the frames are looked at shrunk by this factor (cost and noise).
        k: foreground: a difference above ``k`` × the frame's robust noise scale.
        min_difference: the noise scale's floor, in grey levels.
        min_fraction, max_fraction: the share of the frame that must move for a box (less: the
            object is held still; more: the camera moved).
        hold: frames the last box is kept while too little moves.
    """

    def __init__(
        self,
        history: int = 15,
        min_history: int = 3,
        shrink: int = 4,
        k: float = 4.0,
        min_difference: float = 6.0,
        min_fraction: float = 0.002,
        max_fraction: float = 0.5,
        hold: int = 30,
    ) -> None:
        if not 2 <= min_history <= history or shrink < 1 or k <= 0 or min_difference < 0 or hold < 0:
            raise ValueError(
                "need 2 <= min_history <= history, shrink >= 1, k > 0, min_difference >= 0, hold >= 0"
            )
        if not 0.0 <= min_fraction < max_fraction <= 1.0:
            raise ValueError(
                f"need 0 <= min_fraction < max_fraction <= 1, got {min_fraction}, {max_fraction}"
            )
        self.shrink, self.k, self.min_difference, self.hold = (
            int(shrink),
            float(k),
            float(min_difference),
            hold,
        )
        self.min_fraction, self.max_fraction = float(min_fraction), float(max_fraction)
        self._frames: deque[np.ndarray] = deque(maxlen=int(history))
        self.min_history = int(min_history)
        self._last: Box | None = None
        self._held = 0
        #: the last frame's foreground (bool, the frame shrunk by ``shrink``) when its box was found in
        #: it (None: no background yet, too little moved, a held box)
        self.foreground: np.ndarray | None = None
        #: backgrounds learned afresh so far (a new camera or scene starts the next one)
        self.scene = 0
        #: the scene's empty room (uint8 H×W×3, its first frame), once that frame proved to be background
        self.room: np.ndarray | None = None
        self._first: np.ndarray | None = None  # the scene's first frame, until it is judged

    def reset(self) -> None:
        """Forget the background (a new camera, a new scene)."""
        self._frames.clear()
        self._last, self._held = None, 0
        self.scene += 1
        self.room = self._first = None

    def box(self, image: np.ndarray) -> Box | None:
        """The moving object's box in ``image`` (uint8 H×W×3), or None (the whole frame); ``image``
        joins the background's history."""
        height, width = image.shape[:2]
        small_shape = (max(1, height // self.shrink), max(1, width // self.shrink))
        grey = _grey(image, small_shape)
        if self._frames and self._frames[0].shape != grey.shape:
            self.reset()  # another camera: another background
        ready = len(self._frames) >= self.min_history
        found, self.foreground = None, None
        if ready:
            background = np.median(np.stack(self._frames), axis=0)
            difference = np.abs(grey - background)
            if np.mean(difference > self.k * self.min_difference) > self.max_fraction:
                self.reset()  # another scene (the camera moved): learn its background afresh
            else:
                noise = max(self.min_difference, 1.4826 * float(np.median(difference)))
                moving = difference > self.k * noise
                ys, xs = np.nonzero(moving)
                if ys.size >= self.min_fraction * difference.size:
                    found, self.foreground = _spread(ys, xs, height / small_shape[0]), moving
                self._judge_room(background, noise)
        if not self._frames:
            self._first = image.copy()
        self._frames.append(grey)
        if found is not None:
            self._last, self._held = found, 0
            return found
        if self._last is not None and self._held < self.hold:
            self._held += 1
            return self._last
        return None

    def _judge_room(self, background: np.ndarray, noise: float) -> None:
        """The scene's first frame becomes its ``room`` if nothing in it moved against ``background``."""
        colour, self._first = self._first, None
        if (
            colour is not None
            and np.mean(np.abs(self._frames[0] - background) > self.k * noise) < self.min_fraction
        ):
            self.room = colour


#: the side of the picture the spectral residual is computed on (Hou and Zhang use 64)
SALIENCY_SIDE = 64


def _spectral_residual(channel: np.ndarray) -> np.ndarray | None:
    """The spectral residual saliency of one float32 square channel (module docstring); None when
    the channel has no structure at all."""
    spectrum = np.fft.fft2(channel)
    amplitude = np.abs(spectrum)
    if float(amplitude.ravel()[1:].max(initial=0.0)) <= 1e-6 * max(float(amplitude[0, 0]), 1.0):
        return None
    log_amplitude = np.log(amplitude + 1e-9)
    residual = log_amplitude - cv2.blur(log_amplitude, (3, 3), borderType=cv2.BORDER_REFLECT)
    return np.abs(np.fft.ifft2(np.exp(residual + 1j * np.angle(spectrum)))) ** 2


def saliency_box(image: np.ndarray, k: float = 3.0) -> Box | None:
    """The box of the salient region of ``image`` (uint8 H×W×3) by the spectral residual (module
    docstring) of each colour channel, summed (an object may differ from the room in colour only),
    or None when nothing stands out (a flat picture)."""
    height, width = image.shape[:2]
    small = cv2.resize(image, (SALIENCY_SIDE, SALIENCY_SIDE), interpolation=cv2.INTER_AREA).astype(np.float32)
    maps = [m for c in range(small.shape[2]) if (m := _spectral_residual(small[:, :, c])) is not None]
    if not maps:
        return None
    saliency = cv2.GaussianBlur(np.sum(maps, axis=0), (0, 0), 2.5)
    mean = float(saliency.mean())
    if not np.isfinite(mean) or mean <= 0.0:
        return None
    ys, xs = np.nonzero(saliency > k * mean)
    if ys.size == 0:
        return None
    box = _spread(ys, xs, 1.0)
    sx, sy = width / SALIENCY_SIDE, height / SALIENCY_SIDE
    return Box(int(box.x * sx), int(box.y * sy), max(1, int(box.width * sx)), max(1, int(box.height * sy)))
