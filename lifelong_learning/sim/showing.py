"""Objects shown to a still camera in changing rooms: the harder recognition world (no ROS imports).

iCubWorld, on which thesis ch. 7 evaluates, records a person showing each object to the robot: the
object turns and moves in the person's hand in front of a still camera, and a later session of the
same object is recorded elsewhere. Here a *session* of one object is:

- a room: a procedural background (two-colour gradient, low-frequency shading, fine noise) with
  clutter (rectangles and ellipses of the objects' own palette, so colour alone is a poor cue),
  under its own light (brightness and tint);
- the object (rendered by :class:`~lifelong_learning.sim.objects.ObjectRenderer` with the session's
  light direction and strength), at a session distance, turning frame to frame (yaw, pitch) and moving
  across the view along a smooth path;
- partly hidden in about half the sessions' frames by the hand that holds it (a skin-tone ellipse over
  the lower part of the object);
- with the sensor's noise (σ = 2 grey levels per pixel and frame).

Each frame comes with the object's true box and pixels (from the renderer's segmentation mask), what a
detector would give, and a stand-in for a depth camera registered to it: the object and the hand
0.6 m away, the room 2.5 m (σ = 5 mm of noise, 2 % of pixels without depth; its noise is drawn apart,
so the pictures are those of a session without it). The teaching session and the test session
of an object draw their room, light, distance, start pose and path from different seeds: the robot is
taught in one room and used in another.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from lifelong_learning.sim.objects import PALETTE, ObjectRenderer, Viewpoint

#: teaching and test sessions of an object: the second element of their seeds
SESSIONS = {"teach": 0, "test": 1}
#: the clutter's colours (RGB, 0..1): the objects' palette, white and black
CLUTTER_PALETTE = np.vstack([PALETTE, [[0.9, 0.9, 0.85], [0.15, 0.15, 0.18]]])


@dataclass(frozen=True)
class ShownFrame:
    """One camera frame of a session: uint8 (height, width, 3) RGB, the object's true box
    ``(x, y, width, height)`` in pixels (None when the object is out of view), and its pixels, bool
    (height, width) (None in the lead-in frames: no object; the hand drawn over the object stays in it),
    and the stand-in depth image, float32 (height, width) metres, NaN where it has none."""

    image: np.ndarray
    box: tuple[int, int, int, int] | None
    mask: np.ndarray | None = None
    depth: np.ndarray | None = None


def room(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    """A random room behind the object: float32 (height, width, 3) RGB in 0..1."""
    height, width = size
    top, bottom = rng.uniform(0.15, 0.9, 3), rng.uniform(0.15, 0.9, 3)
    rows = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]
    picture = (1.0 - rows) * top + rows * bottom
    shading = cv2.resize(rng.uniform(0.7, 1.3, (6, 8)).astype(np.float32), (width, height), cv2.INTER_CUBIC)
    picture = picture * shading[:, :, None]
    for _ in range(int(rng.integers(3, 9))):  # clutter
        colour = tuple(
            float(v)
            for v in np.clip(
                CLUTTER_PALETTE[rng.integers(len(CLUTTER_PALETTE))] + rng.normal(0.0, 0.08, 3), 0.0, 1.0
            )
        )
        cx, cy = int(rng.uniform(0, width)), int(rng.uniform(0, height))
        a, b = int(rng.uniform(0.04, 0.2) * width), int(rng.uniform(0.04, 0.2) * height)
        if rng.uniform() < 0.5:
            cv2.rectangle(picture, (cx - a, cy - b), (cx + a, cy + b), colour, -1)
        else:
            cv2.ellipse(picture, (cx, cy), (a, b), float(rng.uniform(0, 180)), 0, 360, colour, -1)
    picture += rng.normal(0.0, 0.02, picture.shape).astype(np.float32)
    return np.clip(picture, 0.0, 1.0)


def _hand(
    picture: np.ndarray, box: tuple[int, int, int, int], rng: np.random.Generator, near: np.ndarray
) -> None:
    """Draw the hand holding the object over the lower part of its box (in place), and mark it in
    ``near`` (uint8, what the depth camera sees near)."""
    x, y, w, h = box
    tone = np.clip(np.array([0.85, 0.62, 0.5]) * rng.uniform(0.6, 1.1) + rng.normal(0, 0.03, 3), 0, 1)
    cover = rng.uniform(0.25, 0.45)
    centre = (int(x + w * rng.uniform(0.3, 0.7)), int(y + h * (1.0 - cover / 2.0)))
    axes = (max(1, int(w * rng.uniform(0.3, 0.5))), max(1, int(h * cover)))
    angle = float(rng.uniform(-30, 30))
    cv2.ellipse(picture, centre, axes, angle, 0, 360, tuple(map(float, tone)), -1)
    cv2.ellipse(near, centre, axes, angle, 0, 360, 1, -1)


#: the stand-in depth camera: the object held up, the room behind it (m), its noise (m), and the share of
#: pixels without depth
HELD_M, ROOM_M, DEPTH_NOISE_M, DEPTH_HOLES = 0.6, 2.5, 0.005, 0.02


def _depth(near: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The stand-in depth image (m, NaN: no depth) of a frame whose ``near`` pixels are held up."""
    depth = np.where(near > 0, HELD_M, ROOM_M) + rng.normal(0.0, DEPTH_NOISE_M, near.shape)
    depth[rng.uniform(size=near.shape) < DEPTH_HOLES] = np.nan
    return depth.astype(np.float32)


def _exposed(picture: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``picture`` (float 0..1) as the camera gives it: uint8, with sensor noise (σ = 2 levels)."""
    return np.clip(picture * 255.0 + rng.normal(0.5, 2.0, picture.shape), 0, 255).astype(np.uint8)


def _box_of(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    ys, xs = np.nonzero(mask)
    if ys.size == 0:
        return None
    return int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)


def show_object(
    renderer: ObjectRenderer,
    object_index: int,
    session: str,
    n_frames: int,
    size: tuple[int, int] = (240, 320),
    seed: int = 0,
    lead_in: int = 0,
    room_index: int = 0,
    depth_camera: bool = False,
) -> list[ShownFrame]:
    """``n_frames`` frames of a person showing object ``object_index`` of ``renderer``'s catalogue
    to a still camera in the room of ``session`` (``"teach"`` or ``"test"``, see :data:`SESSIONS`),
    after ``lead_in`` frames of the room before the object comes into view (their box None).
    ``room_index`` > 0: another showing of the same kind, in another room (light, pose, motion).
    ``depth_camera``: each frame with the stand-in depth image (``ShownFrame.depth``, else None)."""
    if session not in SESSIONS:
        raise ValueError(f"session must be one of {tuple(SESSIONS)}, got {session!r}")
    if n_frames < 1 or lead_in < 0 or room_index < 0:
        raise ValueError(
            f"n_frames must be >= 1, lead_in and room_index >= 0, got {n_frames}, {lead_in}, {room_index}"
        )
    height, width = int(size[0]), int(size[1])
    key = [seed, object_index, SESSIONS[session], 2750159] + ([room_index] if room_index else [])
    rng = np.random.default_rng(key)
    background = room(rng, (height, width))
    brightness = rng.uniform(0.6, 1.15)
    tint = rng.uniform(0.85, 1.15, 3)
    background = np.clip(background * brightness * tint, 0.0, 1.0)
    azimuth, elevation = rng.uniform(0, 2 * math.pi), rng.uniform(0.3, 1.3)
    light = (
        math.cos(azimuth) * math.cos(elevation),
        math.sin(azimuth) * math.cos(elevation),
        math.sin(elevation),
    )
    ambient, diffuse = float(rng.uniform(0.25, 0.7) * brightness), float(rng.uniform(0.3, 0.8))
    distance = float(rng.uniform(6.0, 8.5))
    yaw0, turn = float(rng.uniform(0, 360)), float(rng.uniform(6, 14) * rng.choice([-1, 1]))
    path = rng.uniform(0, 2 * math.pi, 2)  # phases of the horizontal and vertical motion
    reach = (rng.uniform(0.15, 0.3) * width, rng.uniform(0.1, 0.22) * height)
    held = rng.uniform() < 0.5  # the hand shows in this session
    depth_rng = np.random.default_rng([*key, 104723])  # apart: the pictures do not depend on it
    nothing = np.zeros((height, width), dtype=np.uint8)
    frames = [
        ShownFrame(
            _exposed(background, rng), None, depth=_depth(nothing, depth_rng) if depth_camera else None
        )
        for _ in range(lead_in)
    ]
    for frame in range(n_frames):
        viewpoint = Viewpoint(
            yaw=(yaw0 + turn * frame) % 360.0,
            pitch=-30.0 + 20.0 * math.sin(0.3 * frame + path[0]),
            distance=distance * (1.0 + 0.08 * math.sin(0.2 * frame)),
            target_offset=(0.0, 0.0, 0.0),
            light_direction=light,
            ambient=ambient,
            diffuse=diffuse,
            table_rgb=(0.5, 0.5, 0.5),
        )
        rgb, mask = renderer.render_with_mask(object_index, viewpoint, (height, width))
        shift = np.float32(
            [
                [1, 0, reach[0] * math.sin(0.17 * frame + path[0])],
                [0, 1, reach[1] * math.sin(0.23 * frame + path[1])],
            ]
        )
        rgb = cv2.warpAffine(rgb, shift, (width, height), flags=cv2.INTER_NEAREST)
        mask = cv2.warpAffine(mask.astype(np.uint8), shift, (width, height), flags=cv2.INTER_NEAREST) > 0
        picture = np.where(mask[:, :, None], rgb.astype(np.float32) / 255.0 * tint, background)
        box = _box_of(mask)
        near = mask.astype(np.uint8)
        if held and box is not None and rng.uniform() < 0.8:
            _hand(picture, box, rng, near)
        frames.append(
            ShownFrame(_exposed(picture, rng), box, mask, _depth(near, depth_rng) if depth_camera else None)
        )
    return frames


def showing_dataset(
    n_objects: int, frames_per_session: int, size: tuple[int, int] = (240, 320), seed: int = 0
) -> dict[str, list[list[ShownFrame]]]:
    """Every object's teaching and test sessions: ``{"teach": [frames of object 0, ...], "test": ...}``."""
    sessions: dict[str, list[list[ShownFrame]]] = {name: [] for name in SESSIONS}
    with ObjectRenderer(n_objects, seed) as renderer:
        for index in range(n_objects):
            for name in SESSIONS:
                sessions[name].append(show_object(renderer, index, name, frames_per_session, size, seed))
    return sessions
