"""The object held up to the camera, cut by depth: its pixels kept, the room made grey (no ROS imports).

A person who shows the robot an object holds it in front of the room: in a depth image registered to
the colour frames (the same field of view, REP 118 units: millimetres for ``16UC1``/``mono16``, metres
for ``32FC1``), the object and the hand that holds it are the nearest pixels. :func:`nearest_object`
takes the valid depths within ``near..far``, the nearest of them (the ``min_pixels``-th nearest, so
that a few stray pixels do not set it, however little of the view the object fills), every pixel
within ``band`` behind that, and the largest connected region of those: the object's pixels and
their box. The person holding it, or a table, further than ``band`` behind it is left out.
:func:`greyed` keeps them and makes every other pixel grey, so that the CNN sees the object and not
the room it was taught in. What that buys, and costs: docs/benchmarks/recognition-mask.md.
"""

from __future__ import annotations

import cv2
import numpy as np

from lifelong_learning.vision.crop import Box

#: depth image encodings read: millimetres (integer) or metres (float)
DEPTH_ENCODINGS = {"16UC1": 1e-3, "mono16": 1e-3, "32FC1": 1.0}
#: the grey of the pixels that are not the object's (uint8, each channel)
GREY = 128


def depth_unit(encoding: str) -> float:
    """Metres per unit of a depth image ``encoding`` (checked before any pixel is read).

    Raises:
        ValueError: an encoding not in :data:`DEPTH_ENCODINGS`.
    """
    if encoding not in DEPTH_ENCODINGS:
        raise ValueError(f"depth encoding must be one of {tuple(DEPTH_ENCODINGS)}, got {encoding!r}")
    return DEPTH_ENCODINGS[encoding]


def depth_metres(pixels: np.ndarray, encoding: str) -> np.ndarray:
    """float32 metres of a depth image's ``pixels`` (height, width), NaN where there is no depth
    (0, or not finite).

    Raises:
        ValueError: an encoding not in :data:`DEPTH_ENCODINGS`, or pixels that are not one channel.
    """
    unit = depth_unit(encoding)
    if pixels.ndim != 2:
        raise ValueError(f"a depth image has one channel, got shape {pixels.shape}")
    metres = pixels.astype(np.float32) * np.float32(unit)
    metres[~np.isfinite(metres) | (metres <= 0)] = np.nan
    return metres


def nearest_object(
    depth: np.ndarray, near: float, far: float, band: float, min_pixels: int = 16
) -> tuple[Box, np.ndarray] | None:
    """The box and the bool mask (``depth``'s shape) of the nearest blob of ``depth`` (metres, NaN:
    none): the largest connected region of pixels within ``band`` behind the ``min_pixels``-th
    nearest valid depth in ``near..far``; None when fewer than ``min_pixels`` pixels are in range."""
    valid = np.isfinite(depth) & (depth >= near) & (depth <= far)
    if np.count_nonzero(valid) < min_pixels:
        return None
    nearest = float(np.partition(depth[valid], min_pixels - 1)[min_pixels - 1])
    close = (valid & (depth <= nearest + band)).astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(close, connectivity=8)
    if count < 2:
        return None
    largest = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    if stats[largest, cv2.CC_STAT_AREA] < min_pixels:
        return None
    x, y, w, h = (
        int(stats[largest, k])
        for k in (cv2.CC_STAT_LEFT, cv2.CC_STAT_TOP, cv2.CC_STAT_WIDTH, cv2.CC_STAT_HEIGHT)
    )
    return Box(x, y, w, h), labels == largest


#: how far (relative) the depth image's aspect ratio may be from the frame's: more is another view
ASPECT_TOLERANCE = 0.02


def registered(depth: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``depth`` at the colour frame's size (``shape[:2]``): a registered depth image of another
    resolution is scaled (nearest neighbour: no depth is made up between the object and the room).

    Raises:
        ValueError: an aspect ratio other than the frame's (a depth image not registered to it).
    """
    height, width = int(shape[0]), int(shape[1])
    if depth.shape == (height, width):
        return depth
    ratio = (depth.shape[1] / depth.shape[0]) / (width / height)
    if abs(ratio - 1.0) > ASPECT_TOLERANCE:
        raise ValueError(
            f"depth image of {depth.shape[1]}x{depth.shape[0]} is not registered to frames of "
            f"{width}x{height} (another aspect ratio): remap depth to the aligned depth topic"
        )
    return cv2.resize(depth, (width, height), interpolation=cv2.INTER_NEAREST)


def greyed(picture: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """A copy of ``picture`` with every pixel outside ``mask`` grey (:data:`GREY`)."""
    out = picture.copy()
    out[~mask] = GREY
    return out
