"""The benchmark's world for showings: crops of objects shown in a teaching room and a test room,
and of objects never taught, cached under ``runs/bench_cache/`` (no ROS imports).

Per seed, the first ``taught`` objects of the catalogue are each shown for ``teach`` frames in their
teaching room and ``test`` frames in another room; the next ``new`` objects are shown only in a test
room (never taught). Every frame is cut by the motion crop (a fresh background per session, primed by
``lead_in`` frames of the empty room) as the feature_extractor node cuts it, and the square crop kept
resized to ``CROP_SIZE`` pixels (the CNN sees 224×224 of a centre square of it anyway), so that every
backbone and every augmentation of the benchmarks starts from the same pictures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from lifelong_learning.sim.objects import ObjectRenderer
from lifelong_learning.sim.showing import show_object
from lifelong_learning.vision.crop import MotionCrop, cut, square_box

ROOT = Path(__file__).resolve().parents[1]
#: side of the stored square crops (pixels)
CROP_SIZE = 160


@dataclass(frozen=True)
class World:
    """Crops of one seed's world: uint8 ``(objects, frames, CROP_SIZE, CROP_SIZE, 3)`` each."""

    teach: np.ndarray  # the taught objects in their teaching rooms
    test: np.ndarray  # the taught objects in their test rooms
    new: np.ndarray  # the never-taught objects in their (test) rooms


def motion_crops(frames: list, lead_in: int) -> np.ndarray:
    """The motion crop of each frame after the ``lead_in`` frames of the room, resized square."""
    motion = MotionCrop()
    for frame in frames[:lead_in]:
        motion.box(frame.image)
    out = []
    for frame in frames[lead_in:]:
        box = motion.box(frame.image)
        picture = cut(frame.image, None if box is None else square_box(box, frame.image.shape))
        side = min(picture.shape[:2])  # the centre square (the whole frame when no box was found)
        top, left = (picture.shape[0] - side) // 2, (picture.shape[1] - side) // 2
        square = picture[top : top + side, left : left + side]
        out.append(cv2.resize(square, (CROP_SIZE, CROP_SIZE), interpolation=cv2.INTER_AREA))
    return np.stack(out)


def world(seed: int, taught: int, new: int, teach: int, test: int, lead_in: int = 5) -> World:
    """The crops of one seed (cached)."""
    name = f"showing-world-{taught}+{new}x{teach}+{test}-lead{lead_in}-seed{seed}.npz"
    cache = ROOT / "runs" / "bench_cache" / name
    if cache.is_file():
        with np.load(cache) as f:
            return World(f["teach"], f["test"], f["new"])
    t0 = time.perf_counter()
    parts: dict[str, list[np.ndarray]] = {"teach": [], "test": [], "new": []}
    with ObjectRenderer(taught + new, seed) as renderer:
        for index in range(taught + new):
            sessions = (("teach", teach), ("test", test)) if index < taught else (("test", test),)
            for session, n in sessions:
                frames = show_object(renderer, index, session, n, seed=seed, lead_in=lead_in)
                key = session if index < taught else "new"
                parts[key].append(motion_crops(frames, lead_in))
    out = World(*(np.stack(parts[k]) for k in ("teach", "test", "new")))
    print(f"seed {seed}: world rendered and cut in {time.perf_counter() - t0:.0f} s")
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, teach=out.teach, test=out.test, new=out.new)
    return out
