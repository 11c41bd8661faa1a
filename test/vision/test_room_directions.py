"""The room's directions projected out of the features (vision/room_directions.py)."""

import os
from pathlib import Path

import numpy as np
import pytest

from lifelong_learning.vision.normalisation import SCALE
from lifelong_learning.vision.room_directions import RoomDirections

D = 40


def world(rng, labels=6, rooms=3, frames=8, noise=0.05):
    """Features of ``labels`` objects, each seen in every room: an object's centre, plus its room's
    offset along two planted directions, plus noise. Returns (X, labels, sessions, planted)."""
    planted = np.linalg.qr(rng.normal(size=(D, 2)))[0].T  # 2 × D orthonormal
    centres = 4.0 * rng.normal(size=(labels, D))
    offsets = 6.0 * rng.normal(size=(rooms, 2)) @ planted
    X, y, g = [], [], []
    for c in range(labels):
        for r in range(rooms):
            X.append(centres[c] + offsets[r] + noise * rng.normal(size=(frames, D)))
            y += [f"object {c}"] * frames
            g += [f"room {r}"] * frames
    return np.vstack(X), y, g, planted


def test_the_planted_room_directions_are_found_and_projected_out():
    rng = np.random.default_rng(0)
    X, labels, sessions, planted = world(rng)
    room = RoomDirections.fit(X, labels, sessions, 2)
    assert room.directions.shape == (2, D) and room.labels == 6 and room.sessions == 18
    # the same plane: the planted directions lie in it
    np.testing.assert_allclose(np.linalg.norm(room.directions @ planted.T, axis=0), 1.0, atol=1e-3)
    P = room.project(X)
    assert P.dtype == np.float32 and np.allclose(np.linalg.norm(P, axis=1), SCALE, rtol=1e-5)
    assert np.abs(P @ room.directions.T).max() < 1e-4
    # an object's features in two rooms: far apart before, together after; two objects stay apart
    a, b, other = X[0], X[8], X[24]  # object 0 in rooms 0 and 1; object 1 in room 0
    pa, pb, po = room.project(np.stack([a, b, other]))
    assert np.linalg.norm(a - b) > 2.0 and np.linalg.norm(pa - pb) < 0.1 * np.linalg.norm(pa - po)


def test_labels_seen_once_move_nowhere_and_too_many_directions_are_refused():
    rng = np.random.default_rng(1)
    X, labels, sessions, _ = world(rng, labels=3, rooms=2)
    once = np.vstack([X, 5.0 + rng.normal(size=(4, D))])  # a label seen in one session only
    room = RoomDirections.fit(once, [*labels, *["alone"] * 4], [*sessions, *["room 9"] * 4], 3)
    assert room.labels == 3 and room.sessions == 6
    with pytest.raises(ValueError, match="span 3"):  # 3 labels in 2 sessions: 3 moves
        RoomDirections.fit(X, labels, sessions, 4)
    assert RoomDirections.fit(X, labels, sessions, 4, fewer=True).directions.shape == (3, D)
    with pytest.raises(ValueError, match="nothing moves"):
        RoomDirections.fit(X, labels, ["room 0"] * len(X), 1, fewer=True)
    # sessions that do not move (the same features in both rooms) span nothing: no axis is made up
    F = rng.normal(size=(4, D))
    with pytest.raises(ValueError, match="span 0"):
        RoomDirections.fit(np.vstack([F, F]), list("pqrs") * 2, ["a"] * 4 + ["b"] * 4, 1, fewer=True)
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        RoomDirections.fit(bad, labels, sessions, 1)
    with pytest.raises(ValueError, match="one label and one session per row"):
        RoomDirections.fit(X, labels[:-1], sessions, 1)
    with pytest.raises(ValueError, match="features have 39 values"):
        room.project(np.ones(D - 1))


def test_a_file_round_trips_and_bad_files_are_refused_without_running_code(tmp_path, monkeypatch):
    from lifelong_learning.core.model_file import ModelFile, save_model_file

    rng = np.random.default_rng(2)
    room = RoomDirections.fit(*world(rng)[:3], 2)
    path = tmp_path / "room.npz"
    room.save(path)
    monkeypatch.setenv("HOME", str(tmp_path))
    room.save("~/home.npz")  # '~' is the user's home, as when it is loaded
    assert np.array_equal(RoomDirections.load("~/home.npz").directions, room.directions)
    assert (tmp_path / "home.npz").is_file() and not (Path.cwd() / "~").exists()
    again = RoomDirections.load(path, dim=D)
    assert np.array_equal(again.directions, room.directions) and (again.sessions, again.labels) == (18, 6)
    assert 0.99 < again.explained == room.explained <= 1.0  # two planted directions: nearly all of it
    with pytest.raises(ValueError, match="are 40-d, the features 1280-d"):
        RoomDirections.load(path, dim=1280)
    refused = {
        "missing.npz": None,
        "garbage.npz": rng.bytes(500),
        "truncated.npz": path.read_bytes()[:300],  # a zip cut short: its directory is gone
    }
    for name, content in refused.items():
        if content is not None:
            (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=name):
            RoomDirections.load(tmp_path / name)
    np.savez(tmp_path / "plain.npz", directions=room.directions)  # numbers, but not a model file
    with pytest.raises(ValueError, match="no header"):
        RoomDirections.load(tmp_path / "plain.npz")
    save_model_file(tmp_path / "other.npz", ModelFile("rlsc", {}, {"directions": room.directions}))
    with pytest.raises(ValueError, match="rlsc"):
        RoomDirections.load(tmp_path / "other.npz")
    save_model_file(
        tmp_path / "skewed.npz", ModelFile("room_directions", {}, {"directions": 2 * room.directions})
    )
    with pytest.raises(ValueError, match="not orthonormal"):
        RoomDirections.load(tmp_path / "skewed.npz")
    fifo = tmp_path / "fifo.npz"
    os.mkfifo(fifo)  # opened, it would block the node's start forever
    with pytest.raises(ValueError, match="no such model file"):
        RoomDirections.load(fifo)
    monkeypatch.setattr("lifelong_learning.vision.room_directions.MAX_FILE_BYTES", 100)
    with pytest.raises(ValueError, match=r"room\.npz.*(declare|limit|more)"):  # members over the bound
        RoomDirections.load(path)


def test_a_file_records_its_feature_space_and_features_of_another_refuse_it(tmp_path):
    from lifelong_learning.core.model_file import ModelFile, load_model_file, save_model_file

    room = RoomDirections.fit(*world(np.random.default_rng(4))[:3], 2).in_space(
        "efficientnet-lite0", "sqrt_l2"
    )
    room.save(tmp_path / "room.npz")
    again = RoomDirections.load(tmp_path / "room.npz", D, "efficientnet-lite0", "sqrt_l2")
    assert (again.network, again.normalisation) == ("efficientnet-lite0", "sqrt_l2")
    with pytest.raises(
        ValueError, match="learned from efficientnet-lite0 features, these are efficientnet-lite1"
    ):
        RoomDirections.load(tmp_path / "room.npz", D, "efficientnet-lite1", "sqrt_l2")
    with pytest.raises(ValueError, match="normalised 'sqrt_l2', these are normalised 'none'"):
        RoomDirections.load(tmp_path / "room.npz", D, "efficientnet-lite0", "none")
    # a model file is the same network wherever it lies
    mine = room.in_space("/home/me/models/mine.onnx", "l2")
    mine.save(tmp_path / "mine.npz")
    assert RoomDirections.load(tmp_path / "mine.npz", D, "/opt/robot/mine.onnx", "l2").network.endswith(
        "mine.onnx"
    )
    with pytest.raises(ValueError, match=r"mine\.onnx features, these are /opt/robot/other\.onnx's"):
        RoomDirections.load(tmp_path / "mine.npz", D, "/opt/robot/other.onnx", "l2")
    # a file that records no space is compared by dimension only
    plain = load_model_file(tmp_path / "room.npz", "room_directions")
    meta = {k: v for k, v in plain.meta.items() if k not in ("network", "normalisation")}
    save_model_file(tmp_path / "old.npz", ModelFile("room_directions", meta, plain.arrays))
    old = RoomDirections.load(tmp_path / "old.npz", D, "efficientnet-lite1", "none")
    assert (old.network, old.normalisation) == ("", "") and np.array_equal(old.directions, room.directions)
    # a record that is not text is a corrupt file
    save_model_file(tmp_path / "odd.npz", ModelFile("room_directions", {**meta, "network": 3}, plain.arrays))
    with pytest.raises(ValueError, match=r"odd\.npz.*strings"):
        RoomDirections.load(tmp_path / "odd.npz")
    # ... and so is a normalisation the feature_extractor does not know
    save_model_file(
        tmp_path / "cube.npz", ModelFile("room_directions", {**meta, "normalisation": "cube"}, plain.arrays)
    )
    with pytest.raises(ValueError, match=r"cube\.npz.*normalisation must be one of"):
        RoomDirections.load(tmp_path / "cube.npz")
    for network, kind in (("", "sqrt_l2"), ("  ", "l2"), ("efficientnet-lite0", "cube")):
        with pytest.raises(ValueError, match="a feature space is a network and one of"):
            room.in_space(network, kind)
