"""The benchmark's world for showings: crops of objects shown in a teaching room and a test room,
and of objects never taught, cached under ``runs/bench_cache/`` (no ROS imports).

Per seed, the first ``taught`` objects of the catalogue are each shown for ``teach`` frames in their
teaching room and ``test`` frames in another room; the next ``new`` objects are shown only in a test
room (never taught). Every frame is cut by the motion crop (a fresh background per session, primed by
``lead_in`` frames of the empty room) as the feature_extractor node cuts it, and the square crop kept
resized to ``CROP_SIZE`` pixels (the CNN sees 224×224 of a centre square of it anyway), so that every
backbone and every augmentation of the benchmarks starts from the same pictures.

:func:`pasted_world`: each teaching frame of the taught objects pasted onto the empty room of an
earlier teaching session (the feature_extractor node's ``paste_copies``: lifelong_learning/vision/paste.py
with the motion crop's foreground and rooms), cut by the same box as the frame.
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
from lifelong_learning.vision.paste import RoomPaster

ROOT = Path(__file__).resolve().parents[1]
#: side of the stored square crops (pixels)
CROP_SIZE = 160
#: the benchmarks' world per seed: objects taught, objects never taught, frames of a teaching
#: session (10 s at 15 Hz) and of a test session
TAUGHT, NEW, TEACH, TEST = 50, 10, 150, 12


@dataclass(frozen=True)
class World:
    """Crops of one seed's world: uint8 ``(objects, frames, CROP_SIZE, CROP_SIZE, 3)`` each."""

    teach: np.ndarray  # the taught objects in their teaching rooms
    test: np.ndarray  # the taught objects in their test rooms
    new: np.ndarray  # the never-taught objects in their (test) rooms


def _stored(picture: np.ndarray) -> np.ndarray:
    """The centre square of a cut picture (the whole frame when no box was found), resized."""
    side = min(picture.shape[:2])
    top, left = (picture.shape[0] - side) // 2, (picture.shape[1] - side) // 2
    square = picture[top : top + side, left : left + side]
    return cv2.resize(square, (CROP_SIZE, CROP_SIZE), interpolation=cv2.INTER_AREA)


def motion_crops(
    frames: list, lead_in: int, paster: RoomPaster | None = None, scene: int = 0, copies: int = 1
) -> np.ndarray:
    """The motion crop of each frame after the ``lead_in`` frames of the room, resized square; with
    ``paster``: instead, each frame pasted onto a room of another scene (the frame itself where the
    node pastes nothing), and this session's room kept as scene ``scene``'s; ``copies`` > 1: that many
    pastes of each frame (onto different rooms where enough were seen), ``(frames, copies, ...)``."""
    motion = MotionCrop()
    for frame in frames[:lead_in]:
        motion.box(frame.image)
    out = []
    for frame in frames[lead_in:]:
        box = motion.box(frame.image)
        square = None if box is None else square_box(box, frame.image.shape)
        picture = cut(frame.image, square)
        if paster is None:
            out.append(_stored(picture))
            continue
        paster.saw(scene, motion.room)
        pasted = (
            paster.paste(frame.image, motion.foreground, scene, copies=copies, box=square)
            if square is not None
            else []
        )
        pictures = [_stored(p) for p in pasted] or [_stored(picture)] * copies
        out.append(pictures[0] if copies == 1 else np.stack(pictures))
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


def pasted_world(
    seed: int, taught: int, new: int, teach: int, lead_in: int = 5, copies: int = 1
) -> np.ndarray:
    """uint8 ``(taught, teach, CROP_SIZE, CROP_SIZE, 3)``: each teaching frame pasted onto the room of an
    earlier teaching session (of the last ``vision.paste.ROOMS`` ones; object 0's frames and those without a
    foreground stay as they are), cached; ``copies`` > 1 (the node's ``paste_copies``): that many pastes
    of each frame (onto different rooms where enough were seen), ``(taught, teach, copies, ...)``."""
    more = "" if copies == 1 else f"-copies{copies}"
    name = f"showing-pasted-{taught}+{new}x{teach}-lead{lead_in}{more}-seed{seed}.npz"
    cache = ROOT / "runs" / "bench_cache" / name
    if cache.is_file():
        with np.load(cache) as f:
            return f["teach"]
    t0 = time.perf_counter()
    paster = RoomPaster(seed=seed)
    parts = []
    with ObjectRenderer(taught + new, seed) as renderer:  # the catalogue of world()
        for index in range(taught):
            frames = show_object(renderer, index, "teach", teach, seed=seed, lead_in=lead_in)
            parts.append(motion_crops(frames, lead_in, paster, scene=index, copies=copies))
    out = np.stack(parts)
    each = "" if copies == 1 else f" ({copies} a frame)"
    print(f"seed {seed}: teaching frames pasted{each} in {time.perf_counter() - t0:.0f} s")
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, teach=out)
    return out
