"""Multi-view pictures of simulated objects: a CPU pybullet scene (no ROS imports).

The stand-in for the iCubWorld setting of the thesis (ch. 7): a camera looks at one object
at a time from changing viewpoints. Objects are pybullet_data meshes (duck, teddy, mug,
lego, torus, ...) and many ``random_urdfs`` blobs, each with its own random colour,
size and axis stretch; every view changes the viewpoint (yaw, pitch, distance, a little
off-centre), the light (direction, ambient/diffuse strength) and the table colour.
Blobs of similar colours look alike, so recognition is far from 100 % accurate.

Rendering is pybullet's ``ER_TINY_RENDERER`` in DIRECT mode (CPU, no display) and fully
deterministic for a given seed.

Quick use::

    images, labels = render_object_views(n_objects=30, views_per_object=20, size=(96, 96), seed=0)
    # images: uint8 (600, 96, 96, 3) RGB; labels: int64 (600,) in 0..29

    for frame in camera_frames(object_index=3, n_objects=30, size=(480, 640), seed=0, n_frames=100):
        ...  # uint8 (480, 640, 3) RGB; the viewpoint moves smoothly from frame to frame
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

# Named meshes in pybullet_data (path relative to pybullet_data.getDataPath()).
NAMED_MESHES = (
    "duck.obj",
    "teddy2_VHACD_CHs.obj",
    "soccerball.obj",
    "cube.obj",
    "torus/torus_textured.obj",
    "lego/lego.obj",
    "jenga/jenga.obj",
    "objects/mug.obj",
    "bunny.obj",
    "sphere_smooth.obj",
    "toys/cylinder.obj",
    "toys/prism.obj",
    "toys/concave_box.obj",
    "toys/shape_sorter.obj",
)
N_RANDOM_URDF_MESHES = 1000  # random_urdfs/000 .. 999
#: the objects' colours (RGB, 0..1), each varied a little: a small palette makes colour alone a poor
#: cue, many objects share a hue
PALETTE = np.array(
    [
        [0.8, 0.2, 0.2],
        [0.2, 0.6, 0.2],
        [0.2, 0.3, 0.8],
        [0.85, 0.75, 0.2],
        [0.6, 0.6, 0.6],
        [0.55, 0.35, 0.2],
    ]
)


@dataclass(frozen=True)
class ObjectSpec:
    """One object's fixed appearance: which mesh, and how it is coloured, sized and posed."""

    name: str
    mesh_path: str
    rgba: tuple[float, float, float, float]
    stretch: tuple[float, float, float]
    orientation_rpy: tuple[float, float, float]


def object_catalog(n_objects: int, seed: int = 0) -> list[ObjectSpec]:
    """The first ``n_objects`` objects of the catalogue for ``seed``.

    The catalogue starts with the named meshes in a seed-dependent order, then random_urdfs
    blobs. Object ``i`` of the catalogue does not depend on ``n_objects``.
    """
    import pybullet_data

    if not 1 <= n_objects <= len(NAMED_MESHES) + N_RANDOM_URDF_MESHES:
        raise ValueError(f"n_objects must be in 1..{len(NAMED_MESHES) + N_RANDOM_URDF_MESHES}")
    data_path = pybullet_data.getDataPath()
    rng = np.random.default_rng([seed, 7919])
    named = [NAMED_MESHES[i] for i in rng.permutation(len(NAMED_MESHES))]
    blobs = [f"random_urdfs/{i:03d}/{i:03d}.obj" for i in rng.permutation(N_RANDOM_URDF_MESHES)]
    meshes = (named + blobs)[:n_objects]
    palette = PALETTE
    specs = []
    for mesh in meshes:
        colour = np.clip(palette[rng.integers(len(palette))] + rng.normal(0.0, 0.06, 3), 0.05, 0.95)
        stretch = rng.uniform(0.75, 1.3, 3)
        rpy = rng.uniform(-math.pi, math.pi, 3) if mesh.startswith("random_urdfs") else (0.0, 0.0, 0.0)
        specs.append(
            ObjectSpec(
                name=os.path.splitext(os.path.basename(mesh))[0]
                if not mesh.startswith("random_urdfs")
                else f"blob{os.path.basename(mesh)[:3]}",
                mesh_path=os.path.join(data_path, mesh),
                rgba=(*map(float, colour), 1.0),
                stretch=tuple(map(float, stretch)),
                orientation_rpy=tuple(map(float, rpy)),
            )
        )
    return specs


def _mesh_centre_and_radius(path: str) -> tuple[np.ndarray, float]:
    """Bounding-box centre and half-diagonal of an OBJ mesh's vertices (``v x y z`` lines)."""
    with open(path, encoding="utf-8", errors="replace") as file:
        vertices = np.array(
            [[float(value) for value in line.split()[1:4]] for line in file if line.startswith("v ")]
        )
    low, high = vertices.min(axis=0), vertices.max(axis=0)
    return (low + high) / 2.0, float(np.linalg.norm(high - low) / 2.0)


@dataclass(frozen=True)
class Viewpoint:
    """Camera and light for one picture (angles in degrees, distance in object radii)."""

    yaw: float
    pitch: float
    distance: float
    target_offset: tuple[float, float, float]
    light_direction: tuple[float, float, float]
    ambient: float
    diffuse: float
    table_rgb: tuple[float, float, float]


def random_viewpoint(rng: np.random.Generator) -> Viewpoint:
    """An independent random viewpoint (for datasets)."""
    azimuth, elevation = rng.uniform(0, 2 * math.pi), rng.uniform(0.3, 1.3)
    return Viewpoint(
        yaw=float(rng.uniform(0, 360)),
        pitch=float(rng.uniform(-65, -10)),
        distance=float(rng.uniform(2.2, 3.6)),
        target_offset=tuple(map(float, rng.normal(0.0, 0.12, 3))),
        light_direction=(
            math.cos(azimuth) * math.cos(elevation),
            math.sin(azimuth) * math.cos(elevation),
            math.sin(elevation),
        ),
        ambient=float(rng.uniform(0.25, 0.7)),
        diffuse=float(rng.uniform(0.3, 0.8)),
        table_rgb=tuple(map(float, rng.uniform(0.25, 0.9, 3))),
    )


class ObjectRenderer:
    """Renders one object at a time in a private pybullet DIRECT client.

    Use as a context manager (or call :meth:`close`) to free the client.
    """

    def __init__(self, n_objects: int, seed: int = 0) -> None:
        import pybullet

        self._pb = pybullet
        self.objects = object_catalog(n_objects, seed)
        self._client = pybullet.connect(pybullet.DIRECT)
        self._loaded: int | None = None
        self._body: int | None = None
        self._radius = 1.0

    def __enter__(self) -> ObjectRenderer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Disconnect the pybullet client (idempotent)."""
        if self._client is not None and self._client >= 0:
            self._pb.disconnect(physicsClientId=self._client)
        self._client = None

    def _load(self, object_index: int) -> None:
        if not 0 <= object_index < len(self.objects):
            raise ValueError(f"object_index must be in 0..{len(self.objects) - 1}, got {object_index}")
        if self._loaded == object_index:
            return
        pb, client = self._pb, self._client
        pb.resetSimulation(physicsClientId=client)
        spec = self.objects[object_index]
        centre, radius = _mesh_centre_and_radius(spec.mesh_path)
        scale = np.array(spec.stretch) / radius  # every object about unit size
        visual = pb.createVisualShape(
            pb.GEOM_MESH,
            fileName=spec.mesh_path,
            meshScale=scale.tolist(),
            rgbaColor=list(spec.rgba),
            visualFramePosition=(-centre * scale).tolist(),
            physicsClientId=client,
        )
        orientation = pb.getQuaternionFromEuler(spec.orientation_rpy)
        self._body = pb.createMultiBody(
            baseVisualShapeIndex=visual,
            basePosition=[0, 0, 0],
            baseOrientation=orientation,
            physicsClientId=client,
        )
        table = pb.createVisualShape(pb.GEOM_BOX, halfExtents=[20, 20, 0.01], physicsClientId=client)
        self._table = pb.createMultiBody(
            baseVisualShapeIndex=table,
            basePosition=[0, 0, -float(np.max(spec.stretch)) - 0.01],
            physicsClientId=client,
        )
        self._radius = float(np.linalg.norm(spec.stretch) / math.sqrt(3))
        self._loaded = object_index

    def render(self, object_index: int, viewpoint: Viewpoint, size: tuple[int, int]) -> np.ndarray:
        """One (height, width, 3) uint8 RGB picture of an object from a viewpoint."""
        return self.render_with_mask(object_index, viewpoint, size)[0]

    def render_with_mask(
        self, object_index: int, viewpoint: Viewpoint, size: tuple[int, int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """One (height, width, 3) uint8 RGB picture of an object from a viewpoint, and the
        (height, width) bool mask of the pixels that show the object (not the table)."""
        height, width = int(size[0]), int(size[1])
        if height < 8 or width < 8:
            raise ValueError(f"size must be at least 8x8, got {size}")
        self._load(object_index)
        pb, client = self._pb, self._client
        pb.changeVisualShape(self._table, -1, rgbaColor=[*viewpoint.table_rgb, 1.0], physicsClientId=client)
        view = pb.computeViewMatrixFromYawPitchRoll(
            cameraTargetPosition=list(viewpoint.target_offset),
            distance=viewpoint.distance * self._radius,
            yaw=viewpoint.yaw,
            pitch=viewpoint.pitch,
            roll=0.0,
            upAxisIndex=2,
            physicsClientId=client,
        )
        projection = pb.computeProjectionMatrixFOV(
            fov=50.0, aspect=width / height, nearVal=0.05, farVal=60.0, physicsClientId=client
        )
        _, _, rgba, _, segmentation = pb.getCameraImage(
            width,
            height,
            viewMatrix=view,
            projectionMatrix=projection,
            renderer=pb.ER_TINY_RENDERER,
            lightDirection=list(viewpoint.light_direction),
            lightAmbientCoeff=viewpoint.ambient,
            lightDiffuseCoeff=viewpoint.diffuse,
            lightSpecularCoeff=0.1,
            shadow=1,
            physicsClientId=client,
        )
        rgb = np.asarray(rgba, dtype=np.uint8).reshape(height, width, 4)[:, :, :3].copy()
        return rgb, np.asarray(segmentation).reshape(height, width) == self._body


def render_object_views(
    n_objects: int, views_per_object: int, size: tuple[int, int] = (96, 96), seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """A labelled multi-view dataset: every object from ``views_per_object`` random viewpoints.

    Returns:
        images: uint8 (n_objects * views_per_object, height, width, 3), RGB.
        labels: int64 (n_objects * views_per_object,), object index in 0..n_objects-1
            (names: ``object_catalog(n_objects, seed)[label].name``).
    """
    if views_per_object < 1:
        raise ValueError("views_per_object must be >= 1")
    rng = np.random.default_rng([seed, 104729])
    images = np.empty((n_objects * views_per_object, int(size[0]), int(size[1]), 3), dtype=np.uint8)
    labels = np.repeat(np.arange(n_objects, dtype=np.int64), views_per_object)
    with ObjectRenderer(n_objects, seed) as renderer:
        for row, label in enumerate(labels):
            images[row] = renderer.render(int(label), random_viewpoint(rng), size)
    return images, labels


def camera_frames(
    object_index: int,
    n_objects: int,
    size: tuple[int, int] = (480, 640),
    seed: int = 0,
    n_frames: int | None = None,
    degrees_per_frame: float = 3.0,
) -> Iterator[np.ndarray]:
    """A simulated camera watching one object: uint8 (height, width, 3) RGB frames.

    The viewpoint moves smoothly (the camera circles the object while its height and
    distance oscillate; the light drifts), like a person turning an object in front of
    the robot. Infinite when ``n_frames`` is None.
    """
    rng = np.random.default_rng([seed, object_index, 15485863])
    start = random_viewpoint(rng)
    with ObjectRenderer(n_objects, seed) as renderer:
        renderer._load(object_index)  # fail fast on a bad index
        frame = 0
        while n_frames is None or frame < n_frames:
            phase = frame * math.radians(degrees_per_frame)
            light_angle = 0.3 * phase
            viewpoint = Viewpoint(
                yaw=(start.yaw + frame * degrees_per_frame) % 360.0,
                pitch=-37.5 + 25.0 * math.sin(0.37 * phase),
                distance=2.9 + 0.6 * math.sin(0.23 * phase),
                target_offset=start.target_offset,
                light_direction=(math.cos(light_angle) * 0.6, math.sin(light_angle) * 0.6, 0.8),
                ambient=start.ambient,
                diffuse=start.diffuse,
                table_rgb=start.table_rgb,
            )
            yield renderer.render(object_index, viewpoint, size)
            frame += 1
