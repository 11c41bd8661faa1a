"""``lifelong-learning room-directions``: the room's directions learned from a real rosbag2 bag."""

import shutil
import subprocess

import numpy as np

from lifelong_learning.io.bags import write_labeled_features
from lifelong_learning.vision.room_directions import RoomDirections

D = 32


def recorded(path, rng, rooms=3, labels=4, frames=6, noise=0.05):
    """A bag of ``labels`` objects shown in each of ``rooms`` rooms, one session after the other (1 s
    between frames, every label's session in a room before the next room); the rooms differ along
    two planted directions (three rooms: two independent moves)."""
    planted = np.linalg.qr(rng.normal(size=(D, 2)))[0].T
    centres = 3.0 * rng.normal(size=(labels, D))
    offsets = 5.0 * rng.normal(size=(rooms, 2)) @ planted
    X, y = [], []
    for r in range(rooms):
        for c in range(labels):
            X.append(centres[c] + offsets[r] + noise * rng.normal(size=(frames, D)))
            y += [f"object {c}"] * frames
    write_labeled_features(path, np.vstack(X), y, period_ns=10**9)
    return planted


def room_directions(*args, cwd):
    exe = shutil.which("lifelong-learning")
    assert exe, "lifelong-learning is not on PATH (source install/setup.bash)"
    return subprocess.run([exe, "room-directions", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_the_rooms_directions_are_learned_from_a_bag(tmp_path):
    planted = recorded(tmp_path / "bag", np.random.default_rng(0))
    out = tmp_path / "room.npz"
    res = room_directions(tmp_path / "bag", "--out", out, "--directions", 2, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (
        "2 room directions of 32-d features (100 % of the moves), from 12 sessions of 4 labels" in res.stdout
    )
    room = RoomDirections.load(out, dim=D)
    np.testing.assert_allclose(np.linalg.norm(room.directions @ planted.T, axis=0), 1.0, atol=1e-3)
    # the feature_extractor's defaults, unless the user says otherwise: recorded, and checked on loading
    assert (room.network, room.normalisation) == ("efficientnet-lite0", "sqrt_l2")
    assert "for efficientnet-lite0 features normalised sqrt_l2" in res.stdout
    res = room_directions(
        tmp_path / "bag", "--out", out, "--directions", 2, "--network", "efficientnet-lite2",
        "--feature-normalisation", "l2", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    room = RoomDirections.load(out, dim=D, network="efficientnet-lite2", normalisation="l2")
    assert (room.network, room.normalisation) == ("efficientnet-lite2", "l2")
    res = room_directions(tmp_path / "bag", "--out", out, "--feature-normalisation", "cube", cwd=tmp_path)
    assert res.returncode == 2 and "invalid choice: 'cube'" in res.stderr
    out.unlink()
    for network in ("", "efficientnet-lite9", "mine.pkl", " mine.onnx"):  # no network the node could have
        res = room_directions(tmp_path / "bag", "--out", out, "--network", network, cwd=tmp_path)
        assert res.returncode == 2 and "--network must be one of" in res.stderr and not out.exists()
    res = room_directions(tmp_path / "bag", "--out", out, "--network", "/opt/robot/mine.onnx", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert RoomDirections.load(out, dim=D, network="mine.onnx").network == "/opt/robot/mine.onnx"


def test_one_session_per_label_or_no_bag_gives_a_clear_error_and_no_file(tmp_path):
    recorded(tmp_path / "bag", np.random.default_rng(1), rooms=1)
    out = tmp_path / "room.npz"
    # every label shown in one room only: one session each, nothing moves
    res = room_directions(tmp_path / "bag", "--out", out, cwd=tmp_path)
    assert res.returncode == 2 and "no room directions" in res.stderr and not out.exists()
    res = room_directions(tmp_path / "missing", "--out", out, cwd=tmp_path)
    assert res.returncode == 2 and "cannot read the bags" in res.stderr and not out.exists()
    for option, value in (("--session-gap-s", 0), ("--session-gap-s", "nan"), ("--directions", 0)):
        res = room_directions(tmp_path / "bag", "--out", out, option, value, cwd=tmp_path)
        assert res.returncode == 2 and "--session-gap-s must be > 0" in res.stderr and not out.exists()


def test_directions_beyond_what_the_moves_span_are_not_made_up(tmp_path):
    # two rooms: every label moves along the one direction between them, and nothing else moves
    recorded(tmp_path / "bag", np.random.default_rng(2), rooms=2, labels=3, noise=0.0)
    out = tmp_path / "room.npz"
    res = room_directions(tmp_path / "bag", "--out", out, cwd=tmp_path)  # 10 asked
    assert res.returncode == 0, res.stderr
    assert "1 room direction of 32-d features (100 % of the moves), from 6 sessions of 3 labels" in res.stdout
    assert RoomDirections.load(out).directions.shape == (1, D)


def test_a_stray_frame_after_a_gap_is_no_session_and_an_unwritable_file_is_an_error(tmp_path):
    rng = np.random.default_rng(3)
    # 'mug' in 6 frames 1 s apart, then once more 60 s later (another bag): a session of one frame
    write_labeled_features(tmp_path / "first", rng.normal(size=(6, D)), ["mug"] * 6, period_ns=10**9)
    write_labeled_features(tmp_path / "later", rng.normal(size=(1, D)), ["mug"], start_ns=10**18 + 60 * 10**9)
    bags, out = (tmp_path / "first", tmp_path / "later"), tmp_path / "room.npz"
    res = room_directions(*bags, "--out", out, cwd=tmp_path)  # the stray frame is left out: nothing moves
    assert res.returncode == 2 and "no room directions" in res.stderr and not out.exists()
    res = room_directions(*bags, "--out", out, "--min-session-frames", 1, cwd=tmp_path)
    assert res.returncode == 0 and "1 room direction" in res.stdout, res.stderr
    res = room_directions(*bags, "--out", tmp_path, "--min-session-frames", 1, cwd=tmp_path)  # a directory
    assert res.returncode == 2 and "cannot write" in res.stderr
