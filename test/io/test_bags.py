"""rosbag2 reading (MCAP and sqlite3) of LabeledFeatures and JointState; clear errors."""

import pathlib

import numpy as np
import pytest

from lifelong_learning.io.bags import (
    STORAGES,
    BagError,
    read_joint_states,
    write_joint_states,
    write_labeled_features,
)
from lifelong_learning.io.interfaces import MESSAGE_DEFINITIONS
from lifelong_learning.io.labeled_features import read_labeled_features

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_embedded_definitions_equal_msg_files():
    files = {p.stem: p.read_text() for p in (REPO / "msg").glob("*.msg")}
    assert files, "msg/ directory not found"
    assert MESSAGE_DEFINITIONS == files


@pytest.mark.parametrize("storage", STORAGES)
def test_joint_states_raw_samples_per_bag(tmp_path, storage):
    """Bags give raw samples and where each bag starts; q̈ from them with the node's filter."""
    from lifelong_learning.dynamics.acceleration import estimate_accelerations

    t = np.arange(200) * 0.002
    q = np.column_stack([np.sin(3 * t), np.cos(2 * t)])
    qd = np.column_stack([3 * np.cos(3 * t), -2 * np.sin(2 * t)])
    tau = 0.5 * q
    write_joint_states(tmp_path / "js", t, ["a", "b"], q, qd, tau, storage=storage)
    data = read_joint_states(tmp_path / "js", joint_names=["b", "a"])
    assert data.joint_names == ["b", "a"] and data.starts == [0]
    assert not hasattr(data, "qdd")
    np.testing.assert_allclose(data.q, q[:, ::-1])
    np.testing.assert_allclose(data.tau, tau[:, ::-1])
    np.testing.assert_allclose(data.t - data.t[0], t, atol=1e-9)
    qdd = estimate_accelerations(data.t, data.qd, starts=data.starts)
    true_qdd = np.column_stack([-4 * np.cos(2 * t), -9 * np.sin(3 * t)])
    assert np.abs(qdd[20:] - true_qdd[20:]).max() < 0.05
    # A second bag recorded earlier (time goes back between bags): the filter restarts there.
    write_joint_states(
        tmp_path / "js2", t, ["a", "b"], q, qd, tau, storage=storage, start_ns=10**18 - 5 * 10**9
    )
    both = read_joint_states([tmp_path / "js", tmp_path / "js2"], joint_names=["b", "a"])
    assert both.starts == [0, 200] and both.t.size == 400
    qdd2 = estimate_accelerations(both.t, both.qd, starts=both.starts)
    np.testing.assert_allclose(qdd2[:200], qdd, atol=1e-9)
    np.testing.assert_allclose(qdd2[200:], estimate_accelerations(t, qd[:, ::-1]), atol=1e-6)
    with pytest.raises(BagError, match="lacks joint"):
        read_joint_states(tmp_path / "js", joint_names=["a", "c"])
    with pytest.raises(BagError, match="type"):
        read_labeled_features(tmp_path / "js", topic="/joint_states")


def test_missing_corrupt_and_truncated_bags(tmp_path):
    with pytest.raises(BagError, match="no such bag"):
        read_labeled_features(tmp_path / "nothing")
    X = np.ones((50, 4), dtype=np.float32)
    for storage, ext in (("mcap", "mcap"), ("sqlite3", "db3")):
        bag = tmp_path / storage
        write_labeled_features(bag, X, ["x"] * 50, storage=storage)
        (f,) = bag.glob(f"*.{ext}")
        data = f.read_bytes()
        f.write_bytes(data[: len(data) // 2])  # truncated
        with pytest.raises(BagError, match="corrupt or truncated"):
            read_labeled_features(bag)
        f.write_bytes(b"\x00garbage" * 100)  # corrupt
        with pytest.raises(BagError, match="corrupt or truncated"):
            read_labeled_features(bag)


def test_several_joint_state_topics_are_not_mixed(tmp_path):
    """A robot bag holds joint_states and the node's predicted_torque (also a JointState)."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    from lifelong_learning.io.bags import JOINT_STATE_TYPE, typestore

    store = typestore()
    Msg, Header, Time = (
        store.types[t] for t in (JOINT_STATE_TYPE, "std_msgs/msg/Header", "builtin_interfaces/msg/Time")
    )
    names = ["j1", "j2"]
    with Writer(tmp_path / "bag", version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        states = writer.add_connection("/joint_states", JOINT_STATE_TYPE, typestore=store)
        torques = writer.add_connection("/predicted_torque", JOINT_STATE_TYPE, typestore=store)
        for i in range(20):
            ns = 10**18 + i * 10**7
            header = Header(stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id="")
            full = Msg(
                header=header,
                name=names,
                position=np.full(2, 0.1 * i),
                velocity=np.ones(2),
                effort=np.ones(2),
            )
            only_effort = Msg(
                header=header, name=names, position=np.zeros(0), velocity=np.zeros(0), effort=np.full(2, 5.0)
            )
            writer.write(states, ns, store.serialize_cdr(full, JOINT_STATE_TYPE))
            writer.write(torques, ns, store.serialize_cdr(only_effort, JOINT_STATE_TYPE))
    with pytest.raises(BagError, match=r"several .*JointState topics.*/joint_states.*/predicted_torque"):
        read_joint_states(tmp_path / "bag")
    js = read_joint_states(tmp_path / "bag", topic="/joint_states")
    assert js.q.shape == (20, 2) and np.allclose(js.tau, 1.0)


def _joint_state_bag(path, messages):
    """A bag of /joint_states holding ``messages``: JointState fields as dicts, or raw bytes."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    from lifelong_learning.io.bags import JOINT_STATE_TYPE, typestore

    store = typestore()
    Msg, Header, Time = (
        store.types[t] for t in (JOINT_STATE_TYPE, "std_msgs/msg/Header", "builtin_interfaces/msg/Time")
    )
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/joint_states", JOINT_STATE_TYPE, typestore=store)
        for i, m in enumerate(messages):
            ns = 10**18 + i * 10**7
            if isinstance(m, bytes):
                writer.write(conn, ns, m)
                continue
            stamp = m.pop("stamp", ns)
            header = Header(stamp=Time(sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id="")
            fields = {k: np.asarray(m[k], dtype=np.float64) for k in ("position", "velocity", "effort")}
            writer.write(
                conn, ns, store.serialize_cdr(Msg(header=header, name=m["name"], **fields), JOINT_STATE_TYPE)
            )


def test_one_bad_joint_state_is_skipped_and_counted_per_reason(tmp_path):
    """Each kind of malformed message once in a bag of good ones: only it is left out."""

    def good(i):
        return {"name": ["a", "b"], "position": [0.01 * i, 0.0], "velocity": [1.0, 0.0], "effort": [i, -i]}

    messages = [good(i) for i in range(30)]
    messages[3] = b"\x00\x01\x00\x00 not a JointState"  # does not deserialize
    messages[5] = {**good(5), "effort": [1.0]}  # wrong array length
    messages[7] = {**good(7), "velocity": [np.nan, 0.0]}  # NaN
    messages[9] = {**good(9), "name": ["a", "c"]}  # lacks joint b
    messages[11] = {**good(11), "name": ["a", "a"]}  # duplicate names
    messages[13] = {**good(13), "stamp": (2**31 - 2) * 10**9}  # far-future stamp
    messages[15] = {**good(15), "stamp": 10**18 + 12 * 10**7}  # an earlier message's stamp again
    _joint_state_bag(tmp_path / "bag", messages)
    data = read_joint_states(tmp_path / "bag")
    assert dict(data.skipped) == {
        "corrupt message": 1,
        "wrong array lengths": 1,
        "non-finite values": 1,
        "missing joint": 1,
        "duplicate joint names": 1,
        "stamp out of order": 2,
    }
    kept = [i for i in range(30) if i not in (3, 5, 7, 9, 11, 13, 15)]
    np.testing.assert_allclose(data.tau[:, 0], kept)
    assert np.all(np.diff(data.t) > 0) and data.t[-1] < 1.0  # the far-future stamp is not kept
    assert "corrupt message on '/joint_states'" in data.skipped.details["corrupt message"]
    assert "lacks joint 'b'" in data.skipped.details["missing joint"]


def test_a_message_above_max_message_bytes_is_skipped_before_it_is_deserialized(tmp_path, monkeypatch):
    """One huge recorded message costs that message only: skipped and counted, never deserialized."""
    from lifelong_learning.io import bags

    def good(i):
        return {"name": ["a", "b"], "position": [0.01 * i, 0.0], "velocity": [1.0, 0.0], "effort": [i, -i]}

    messages = [good(i) for i in range(30)]
    messages[10] = {**good(10), "name": ["a", "b", *(f"j{k}" for k in range(5000))]}  # about 50 kB
    _joint_state_bag(tmp_path / "joints", messages)
    data = read_joint_states(tmp_path / "joints", max_message_bytes=10_000)
    assert dict(data.skipped) == {"message too large": 1}
    assert "max_message_bytes 10000" in data.skipped.details["message too large"]
    assert data.t.size == 29
    # a LabeledFeatures of 10000 values among vectors of 3: skipped, and never deserialized
    from rosbags.rosbag2 import Writer

    store = bags.typestore()
    msg, header = store.types[bags.LABELED_FEATURES_TYPE], store.types["std_msgs/msg/Header"]
    stamp = store.types["builtin_interfaces/msg/Time"](sec=1, nanosec=0)
    with Writer(tmp_path / "features", version=9) as writer:
        conn = writer.add_connection("/labeled_features", bags.LABELED_FEATURES_TYPE, typestore=store)
        for i, n in enumerate([3, 3, 10_000, 3, 3]):
            data = np.ones(n, dtype=np.float32)
            raw = store.serialize_cdr(
                msg(header=header(stamp=stamp, frame_id=""), data=data, label="x"), msg.__msgtype__
            )
            writer.write(conn, i + 1, raw)
    deserialized: list[int] = []
    real = type(store).deserialize_cdr
    monkeypatch.setattr(
        type(store),
        "deserialize_cdr",
        lambda self, raw, t: deserialized.append(len(raw)) or real(self, raw, t),
    )
    features = read_labeled_features(tmp_path / "features", max_message_bytes=1000)
    assert features.X.shape == (4, 3) and dict(features.skipped) == {"message too large": 1}
    assert len(deserialized) == 4 and max(deserialized) < 1000


def test_increasing_rows_keeps_the_longest_increasing_run():
    from lifelong_learning.io.bags import increasing_rows

    t = np.array([1, 2, 10**12, 3, 4, 0, 5, 5, 6])
    np.testing.assert_array_equal(increasing_rows(t), [1, 1, 0, 1, 1, 0, 0, 1, 1])  # one of the equal 5s
    assert increasing_rows(np.arange(5)).all() and increasing_rows(np.zeros(0)).size == 0
    big = 10**18 + np.arange(4)  # nanoseconds: exact, no float rounding
    assert increasing_rows(big).all()


def test_special_files_in_a_bag_are_refused(tmp_path):
    import os

    write_labeled_features(tmp_path / "bag", np.ones((4, 3)), ["x"] * 4)
    os.mkfifo(tmp_path / "bag" / "extra.mcap")
    with pytest.raises(BagError, match=r"extra\.mcap is not a regular file"):
        read_labeled_features(tmp_path / "bag")
    (tmp_path / "file").write_text("x")
    with pytest.raises(BagError, match="not a bag directory"):
        read_labeled_features(tmp_path / "file")


def test_stamp_jumps_cut_a_bag_into_stretches_and_drop_short_ones(tmp_path):
    t = np.arange(100) * 0.01
    t[[40, 41]] += 5.0  # two corrupt stamps 5 s ahead (written, and read, after the others)
    t[60:] += 3.0  # a driver pause of 3 s
    t = np.concatenate([t, [t[-1] + 1e6]])  # and one far-future stamp at the end
    q = np.column_stack([np.arange(t.size), np.zeros(t.size)]).astype(float)
    write_joint_states(tmp_path / "b", t, ["a", "b"], q, q, q)
    js = read_joint_states(tmp_path / "b")
    # the pause starts a second stretch (q̈ is not estimated across it); the corrupt stamps make
    # stretches of two and of one, too short for a q̈ window: skipped
    assert js.starts == [0, 58]
    assert js.q[:, 0].tolist() == [*range(40), *range(42, 100)]
    assert dict(js.skipped) == {"stamp jump": 3}
    # without jumps a bag is one stretch, however short
    write_joint_states(tmp_path / "short", t[:5], ["a", "b"], q[:5], q[:5], q[:5])
    assert read_joint_states(tmp_path / "short").starts == [0]


def _glitched_bags(tmp_path):
    """Two bags of 3000 and 700 stamps with a far-future stamp, a driver pause and five stamps
    ahead of their neighbours (the test above's glitches, in a longer log)."""
    t = np.arange(3000) * 0.01
    t[500] += 1e4  # read last: it ends the bag as a stretch of one
    t[1000:] += 3.0  # a pause: a new stretch
    t[1500:1505] += 0.5  # out of order against the 50 messages after them
    q = np.column_stack([np.arange(t.size), np.zeros(t.size)]).astype(float)
    write_joint_states(tmp_path / "b", t, ["a", "b"], q, q, q)
    write_joint_states(tmp_path / "c", t[:700], ["a", "b"], q[:700], q[:700], q[:700])
    return [tmp_path / "b", tmp_path / "c"]


@pytest.mark.parametrize("block", [1000, 333, 10])
def test_a_stream_gives_bounded_blocks_and_what_the_whole_read_gives(tmp_path, monkeypatch, block):
    """JointStateStream: blocks of at most `block` rows, each of one stretch of one bag, a window
    of at most two blocks waiting for the stamp decision, and, concatenated, exactly the rows,
    stretches and skipped counts of read_joint_states (which holds each bag whole)."""
    import lifelong_learning.io.bags as bags_module
    from lifelong_learning.io.bags import JointStateStream

    paths = _glitched_bags(tmp_path)
    whole = read_joint_states(paths)
    assert whole.starts == [0, 999, 2994] and whole.bag_starts == [0, 2994]
    assert dict(whole.skipped) == {"stamp out of order": 5, "stamp jump": 2}
    held = []
    append = bags_module._Rows.append

    def spy(self, ns, row):
        append(self, ns, row)
        held.append(self.n)

    monkeypatch.setattr(bags_module._Rows, "append", spy)
    stream = JointStateStream(paths, block=block)
    blocks = list(stream)
    assert max(b.t.size for b in blocks) <= block and max(held) <= 2 * block
    sizes = np.cumsum([0] + [b.t.size for b in blocks[:-1]])
    assert [int(s) for s, b in zip(sizes, blocks, strict=True) if b.new_stretch] == whole.starts
    assert [b.bag for b in blocks] == sorted(b.bag for b in blocks) and {b.bag for b in blocks} == {0, 1}
    for name in ("t", "q", "qd", "tau"):
        streamed = np.concatenate([getattr(b, name) for b in blocks])
        np.testing.assert_array_equal(streamed, getattr(whole, name))
    assert dict(stream.skipped) == dict(whole.skipped) and stream.rows == whole.t.size
    assert stream.bag_joints == [["a", "b"], ["a", "b"]]


def test_a_bag_whose_joint_states_lack_the_joints_says_so(tmp_path):
    t = np.arange(20) * 0.01
    q = np.zeros((20, 2))
    write_joint_states(tmp_path / "one", t, ["a", "b"], q, q, q)
    write_joint_states(tmp_path / "other", t, ["x", "y"], q, q, q)
    with pytest.raises(BagError, match=r"other: its joint states lack joints \['a', 'b'\].*another robot"):
        read_joint_states([tmp_path / "one", tmp_path / "other"])
    with pytest.raises(BagError, match=r"lack joints \['b'\].*\(given\); it has \['a', 'x'\]"):
        write_joint_states(tmp_path / "ax", t, ["a", "x"], q, q, q)
        read_joint_states(tmp_path / "ax", joint_names=["a", "b"])
