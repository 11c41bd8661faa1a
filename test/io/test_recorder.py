"""SplitBagWriter: split rosbag2 bags (MCAP and sqlite3) read completely by rosbags' Reader and
AnyReader and by lifelong_learning.io.bags; splits by size, duration and on request; metadata.yaml
rewritten atomically and listing only closed files, also after SIGKILL; refused types and a
failing file."""

import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import Reader
from ruamel.yaml import YAML

from lifelong_learning.io.bags import read_joint_states, typestore
from lifelong_learning.io.labeled_features import read_labeled_features
from lifelong_learning.io.recorder import PARTIAL_DIR, STORAGES, RecorderError, SplitBagWriter

LF = "lifelong_learning/msg/LabeledFeatures"
JS = "sensor_msgs/msg/JointState"
T0 = 1_700_000_000 * 10**9


def labeled(i):
    store = typestore()
    stamp = store.types["builtin_interfaces/msg/Time"](sec=T0 // 10**9 + i, nanosec=0)
    header = store.types["std_msgs/msg/Header"](stamp=stamp, frame_id="camera")
    data = np.arange(6, dtype=np.float32) + i
    return store.serialize_cdr(store.types[LF](header=header, data=data, label=f"obj{i % 3}"), LF)


def joint_state(i, effort=True):
    store = typestore()
    stamp = store.types["builtin_interfaces/msg/Time"](sec=T0 // 10**9 + i, nanosec=0)
    header = store.types["std_msgs/msg/Header"](stamp=stamp, frame_id="")
    msg = store.types[JS](
        header=header,
        name=["a", "b"],
        position=np.array([0.1 * i, -0.1 * i]),
        velocity=np.array([1.0, -1.0]),
        effort=np.array([2.0 * i, 3.0]) if effort else np.array([], dtype=np.float64),
    )
    return store.serialize_cdr(msg, JS)


def write_both(writer, start, n, step_ns=10**9):
    """n LabeledFeatures on /lf and n JointStates on /js, one pair per step; returns what was written."""
    out = []
    for i in range(start, start + n):
        for topic, raw in (("/lf", labeled(i)), ("/js", joint_state(i))):
            writer.write(topic, T0 + i * step_ns, raw)
            out.append((topic, T0 + i * step_ns, raw))
    return out


def read_all(path):
    """(topic, timestamp, raw) of every message, via AnyReader (which also deserializes each)."""
    with AnyReader([path]) as reader:
        out = []
        for conn, stamp, raw in reader.messages():
            reader.deserialize(raw, conn.msgtype)
            out.append((conn.topic, stamp, bytes(raw)))
    return out


def metadata(path):
    return YAML(typ="safe").load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]


@pytest.mark.parametrize("storage", sorted(STORAGES))
def test_splits_by_size_and_reads_back_everything(tmp_path, storage):
    bag = tmp_path / "run"
    with SplitBagWriter(bag, storage=storage, max_bagfile_size=1000) as writer:
        writer.add_topic("/lf", LF)
        writer.add_topic("/js", JS)
        written = write_both(writer, 0, 30)
    suffix = STORAGES[storage][1]
    meta = metadata(bag)
    names = meta["relative_file_paths"]
    assert len(names) >= 4
    assert names == [f"run_{k}{suffix}" for k in range(len(names))]
    assert sorted(p.name for p in bag.iterdir()) == sorted([*names, "metadata.yaml"])  # partial/ removed
    assert meta["message_count"] == 60
    assert [f["path"] for f in meta["files"]] == names
    assert sum(f["message_count"] for f in meta["files"]) == 60
    assert {t["topic_metadata"]["name"]: t["message_count"] for t in meta["topics_with_message_count"]} == {
        "/lf": 30,
        "/js": 30,
    }
    # every closed file but the last reached the limit: ~1000 bytes of messages each
    sizes = [f.message_count for f in writer.files]
    assert max(sizes[:-1]) - min(sizes[:-1]) <= 2
    assert read_all(bag) == written
    with Reader(bag) as reader:
        assert reader.message_count == 60
        assert sum(1 for _ in reader.messages()) == 60
        assert {c.topic: c.msgcount for c in reader.connections} == {"/lf": 30, "/js": 30}
    features = read_labeled_features(bag)
    np.testing.assert_array_equal(features.X[:, 0], np.arange(30))
    assert features.labels == [f"obj{i % 3}" for i in range(30)]
    joints = read_joint_states(bag)
    np.testing.assert_allclose(joints.tau[:, 0], 2.0 * np.arange(30))


def test_splits_by_duration_on_write_and_on_tick(tmp_path):
    bag = tmp_path / "dur"
    writer = SplitBagWriter(bag, max_bagfile_duration_s=2.0)
    writer.open()
    writer.add_topic("/lf", LF)
    for i in range(7):  # 0.5 s apart: a file spans [t, t + 2 s)
        writer.write("/lf", T0 + i * 500_000_000, labeled(i))
    assert [f.message_count for f in writer.files] == [4]
    assert writer.tick(T0 + 3_900_000_000) is None  # the open file started at 2.0 s
    done = writer.tick(T0 + 4_000_000_000)
    assert done is not None and done.name == "dur_1.mcap" and done.message_count == 3
    assert writer.tick(T0 + 10**12) is None  # nothing open: no empty file
    assert metadata(bag)["relative_file_paths"] == ["dur_0.mcap", "dur_1.mcap"]
    assert len(read_all(bag)) == 7
    writer.close()
    assert metadata(bag)["relative_file_paths"] == ["dur_0.mcap", "dur_1.mcap"]


@pytest.mark.parametrize("storage", sorted(STORAGES))
def test_split_on_request_lists_only_closed_files_and_writes_no_empty_file(tmp_path, storage):
    bag = tmp_path / "req"
    writer = SplitBagWriter(bag, storage=storage)
    writer.open()
    assert metadata(bag)["relative_file_paths"] == []  # a valid, empty bag from the start
    assert read_all(bag) == []
    writer.add_topic("/lf", LF)
    writer.add_topic("/js", JS)
    assert writer.split() is None
    first = write_both(writer, 0, 5)
    done = writer.split()
    assert done.message_count == 10 and done.topic_counts == {"/lf": 5, "/js": 5}
    second = write_both(writer, 5, 3)
    # the open file is not listed: readers see exactly the closed ones
    assert read_all(bag) == first
    partial = list((bag / PARTIAL_DIR).rglob("*" + STORAGES[storage][1]))
    assert [p.name for p in partial] == [f"req_1{STORAGES[storage][1]}"]
    assert writer.status()["current_messages"] == 6
    writer.close()
    writer.close()  # idempotent
    assert read_all(bag) == first + second
    assert not (bag / PARTIAL_DIR).exists()
    with pytest.raises(RecorderError, match="closed"):
        writer.write("/lf", T0, labeled(0))


def test_metadata_is_replaced_atomically(tmp_path):
    """A reader polling metadata.yaml while 50 files are closed never sees a torn file, and every
    file it lists is complete and readable."""
    bag = tmp_path / "atomic"
    writer = SplitBagWriter(bag)
    writer.open()
    writer.add_topic("/lf", LF)
    stop = threading.Event()
    seen, errors = [], []

    def poll():
        yaml = YAML(typ="safe")
        while not stop.is_set():
            try:
                info = yaml.load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
                seen.append(len(info["relative_file_paths"]))
                assert all((bag / name).exists() for name in info["relative_file_paths"])
            except Exception as exc:  # any failure is what the test looks for
                errors.append(repr(exc))

    thread = threading.Thread(target=poll)
    thread.start()
    try:
        for i in range(50):
            writer.write("/lf", T0 + i, labeled(i))
            writer.split()
    finally:
        stop.set()
        thread.join()
    assert errors == []
    assert len(seen) > 10 and seen == sorted(seen)
    assert [p.name for p in bag.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    assert len(read_all(bag)) == 50
    writer.close()


@pytest.mark.parametrize("storage", sorted(STORAGES))
def test_writes_splits_and_ticks_from_several_threads(tmp_path, storage):
    """As in a multi-threaded executor (sqlite3 objects refuse other threads: the writer hops)."""
    bag = tmp_path / "threads"
    writer = SplitBagWriter(bag, storage=storage, max_bagfile_size=3000)
    writer.open()
    writer.add_topic("/lf", LF)
    errors = []

    def work(k):
        try:
            for i in range(50):
                writer.write("/lf", T0 + 1000 * i + k, labeled(4 * i + k))
                if i % 20 == 19:
                    writer.split()
                writer.tick(T0)
        except Exception as exc:  # any failure is what the test looks for
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    closer = threading.Thread(target=writer.close)
    closer.start()
    closer.join()
    assert errors == []
    assert len(writer.files) > 4
    features = read_labeled_features(bag)
    assert sorted(features.X[:, 0]) == list(range(200))


KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {testdir!r})
    from test_recorder import labeled, joint_state, write_both
    from lifelong_learning.io.recorder import SplitBagWriter
    writer = SplitBagWriter({bag!r}, storage={storage!r}, max_bagfile_size=10**9)
    writer.open()
    writer.add_topic("/lf", "lifelong_learning/msg/LabeledFeatures")
    writer.add_topic("/js", "sensor_msgs/msg/JointState")
    write_both(writer, 0, 4)
    writer.split()
    write_both(writer, 4, 4)
    writer.split()
    write_both(writer, 8, 200)  # in the open file when killed
    print("written", flush=True)
    time.sleep(60)
    """
)


@pytest.mark.parametrize("storage", sorted(STORAGES))
def test_killed_writer_leaves_closed_files_readable(tmp_path, storage):
    bag = tmp_path / "killed"
    script = KILLED_WRITER.format(testdir=os.path.dirname(__file__), bag=str(bag), storage=storage)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=tmp_path, text=True)
    try:
        assert proc.stdout.readline().strip() == "written"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    suffix = STORAGES[storage][1]
    assert metadata(bag)["relative_file_paths"] == [f"killed_0{suffix}", f"killed_1{suffix}"]
    messages = read_all(bag)
    assert len(messages) == 16 and {m[0] for m in messages} == {"/lf", "/js"}
    np.testing.assert_array_equal(read_labeled_features(bag).X[:, 0], np.arange(8))
    assert read_joint_states(bag).q.shape == (8, 2)
    # the unfinished file stays aside, unlisted
    assert (bag / PARTIAL_DIR / "killed_2" / f"killed_2{suffix}").exists()


def test_message_with_empty_array_is_stored_as_given(tmp_path):
    bag = tmp_path / "empty"
    raw = joint_state(1, effort=False)
    with SplitBagWriter(bag) as writer:
        writer.add_topic("/gripper", JS)
        writer.write("/gripper", T0, raw)
    with AnyReader([bag]) as reader:
        ((conn, _, data),) = list(reader.messages())
        assert bytes(data) == raw
        msg = reader.deserialize(data, conn.msgtype)
    assert list(msg.name) == ["a", "b"] and len(msg.effort) == 0


def make_ament_prefix(root):
    """An install prefix with package my_pkg (msg Thing nesting Inner and geometry_msgs/Point)."""
    (root / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (root / "share" / "ament_index" / "resource_index" / "packages" / "my_pkg").write_text("")
    msg = root / "share" / "my_pkg" / "msg"
    msg.mkdir(parents=True)
    (msg / "Thing.msg").write_text("Inner[] inners\ngeometry_msgs/Point where\nstring name\n")
    (msg / "Inner.msg").write_text("int32 ANSWER=42\nfloat64[] values\n")


def test_unknown_type_found_through_the_ament_index(tmp_path, monkeypatch):
    make_ament_prefix(tmp_path / "prefix")
    monkeypatch.setenv(
        "AMENT_PREFIX_PATH", f"{tmp_path / 'prefix'}{os.pathsep}{os.environ.get('AMENT_PREFIX_PATH', '')}"
    )
    bag = tmp_path / "custom"
    with SplitBagWriter(bag) as writer:
        writer.add_topic("/thing", "my_pkg/msg/Thing")
        store = writer.store
        Inner, Thing = store.types["my_pkg/msg/Inner"], store.types["my_pkg/msg/Thing"]
        Point = store.types["geometry_msgs/msg/Point"]
        msg = Thing(inners=[Inner(values=np.array([1.0, 2.0]))], where=Point(x=1.0, y=2.0, z=3.0), name="x")
        writer.write("/thing", T0, store.serialize_cdr(msg, "my_pkg/msg/Thing"))
        with pytest.raises(RecorderError, match="package 'no_such_pkg' is not in the ament index"):
            writer.add_topic("/nope", "no_such_pkg/msg/Nope")
        with pytest.raises(RecorderError, match=r"cannot read .*Missing\.msg"):
            writer.add_topic("/missing", "my_pkg/msg/Missing")
        with pytest.raises(RecorderError, match="is recorded as my_pkg/msg/Thing"):
            writer.add_topic("/thing", LF)
        with pytest.raises(RecorderError, match="different definitions"):
            writer.add_topic("/lf", LF, type_hash="RIHS01_" + "0" * 64)
        assert "/nope" not in writer.topics and "/lf" not in writer.topics
    # the bag carries the definitions: a reader with the standard store alone decodes it
    with AnyReader([bag]) as reader:
        ((conn, _, raw),) = list(reader.messages())
        back = reader.deserialize(raw, conn.msgtype)
    assert back.name == "x" and back.where.z == 3.0 and list(back.inners[0].values) == [1.0, 2.0]


def test_a_file_that_fails_is_given_up_and_closed_files_stay(tmp_path):
    import shutil

    bag = tmp_path / "fail"
    writer = SplitBagWriter(bag)
    writer.open()
    writer.add_topic("/lf", LF)
    writer.add_topic("/js", JS)
    first = write_both(writer, 0, 3)
    writer.split()
    write_both(writer, 3, 2)
    shutil.rmtree(bag / PARTIAL_DIR)  # the open file vanishes under the writer
    with pytest.raises(RecorderError, match="4 messages are lost"):
        writer.split()
    assert writer.status()["messages_lost"] == 4
    third = write_both(writer, 5, 2)  # recording goes on in a new file
    writer.close()
    assert metadata(bag)["relative_file_paths"] == ["fail_0.mcap", "fail_2.mcap"]
    assert read_all(bag) == first + third


def test_bad_arguments(tmp_path):
    (tmp_path / "exists").mkdir()
    with pytest.raises(FileExistsError, match="never appended to"):
        SplitBagWriter(tmp_path / "exists").open()
    with pytest.raises(ValueError, match="storage"):
        SplitBagWriter(tmp_path / "x", storage="rosbag1")
    with pytest.raises(ValueError, match=">= 0"):
        SplitBagWriter(tmp_path / "x", max_bagfile_size=-1)
    writer = SplitBagWriter(tmp_path / "y")
    with pytest.raises(RecorderError, match="not opened"):
        writer.add_topic("/lf", LF)
    writer.open()
    with pytest.raises(RecorderError, match="not a recorded topic"):
        writer.write("/lf", T0, labeled(0))
    writer.close()
