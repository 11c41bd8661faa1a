"""The pybullet object scene: deterministic by seed, varied across objects and views."""

import numpy as np
import pytest

from lifelong_learning.sim.objects import camera_frames, object_catalog, render_object_views


def test_rendering_is_deterministic_by_seed():
    images, labels = render_object_views(n_objects=3, views_per_object=2, size=(32, 40), seed=5)
    again, labels_again = render_object_views(n_objects=3, views_per_object=2, size=(32, 40), seed=5)
    other, _ = render_object_views(n_objects=3, views_per_object=2, size=(32, 40), seed=6)
    assert images.shape == (6, 32, 40, 3) and images.dtype == np.uint8
    np.testing.assert_array_equal(labels, [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(images, again)
    np.testing.assert_array_equal(labels, labels_again)
    assert not np.array_equal(images, other)


def test_catalogue_has_many_distinct_objects():
    catalog = object_catalog(40, seed=0)
    assert len({spec.mesh_path for spec in catalog}) == 40
    assert sum(spec.name.startswith("blob") for spec in catalog) >= 20
    assert object_catalog(10, seed=0) == catalog[:10]  # object i does not depend on n_objects
    with pytest.raises(ValueError):
        object_catalog(0)


def test_views_differ_and_objects_are_visible():
    images, _ = render_object_views(n_objects=2, views_per_object=3, size=(48, 48), seed=0)
    flat = images.reshape(len(images), -1).astype(float)
    distances = np.linalg.norm(flat[:, None] - flat[None], axis=2)
    assert np.all(distances[~np.eye(len(images), dtype=bool)] > 0)
    # the object stands out from the table: every picture has real contrast
    assert np.all(images.reshape(len(images), -1, 3).std(axis=1).max(axis=1) > 10)


def test_camera_frames_move_smoothly():
    frames = list(camera_frames(object_index=1, n_objects=5, size=(36, 48), seed=0, n_frames=3))
    assert len(frames) == 3 and frames[0].shape == (36, 48, 3)
    step = np.abs(frames[1].astype(int) - frames[0]).mean()
    far = render_object_views(n_objects=5, views_per_object=1, size=(36, 48), seed=0)[0][1]
    assert 0 < step < np.abs(far.astype(int) - frames[0]).mean()
    with pytest.raises(ValueError):
        next(camera_frames(object_index=9, n_objects=5, size=(36, 48)))
