"""LabeledFeatures recordings read back for retraining (lifelong_learning.io.labeled_features)."""

import numpy as np
import pytest

from lifelong_learning.io.bags import STORAGES, BagError, write_labeled_features
from lifelong_learning.io.labeled_features import read_labeled_features


@pytest.mark.parametrize("storage", STORAGES)
def test_labeled_features_round_trip(tmp_path, storage):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 7)).astype(np.float32)
    labels = [f"obj{i % 3}" for i in range(30)]
    write_labeled_features(tmp_path / "bag", X, labels, storage=storage)
    data = read_labeled_features(tmp_path / "bag")
    np.testing.assert_array_equal(data.X, X.astype(np.float64))
    assert data.labels == labels
    assert np.all(np.diff(data.stamps) > 0)
    with pytest.raises(BagError, match="no topic '/other'"):
        read_labeled_features(tmp_path / "bag", topic="/other")


def test_mismatched_feature_dimensions(tmp_path):
    write_labeled_features(tmp_path / "a", np.zeros((3, 4)), ["x"] * 3)
    write_labeled_features(tmp_path / "b", np.zeros((3, 5)), ["y"] * 3)
    with pytest.raises(BagError, match="different lengths"):
        read_labeled_features([tmp_path / "a", tmp_path / "b"])
    bad = np.zeros((3, 4))
    bad[1, 2] = np.nan
    write_labeled_features(tmp_path / "c", bad, ["x", "y", ""], storage="sqlite3")
    data = read_labeled_features(tmp_path / "c")  # one NaN row and one empty label: skipped, counted
    assert data.X.shape == (1, 4) and data.labels == ["x"]
    assert dict(data.skipped) == {"non-finite values": 1, "empty label": 1}
    assert "NaN" in data.skipped.details["non-finite values"]
    # labels as the node learns them: stripped; unprintable ones (a NUL, a control character) skipped
    write_labeled_features(tmp_path / "e", np.zeros((4, 4)), [" mug ", "mu\x00g", "a\tb", "duck"])
    data = read_labeled_features(tmp_path / "e")
    assert data.labels == ["mug", "duck"] and dict(data.skipped) == {"unprintable label": 2}
    write_labeled_features(tmp_path / "f", np.zeros((2, 4)), ["x" * 65, "x" * 64])  # the node's 64
    assert dict(read_labeled_features(tmp_path / "f").skipped) == {"label too long": 1}
    write_labeled_features(tmp_path / "d", np.full((2, 4), np.nan), ["x"] * 2)
    with pytest.raises(BagError, match=r"no usable LabeledFeatures message.*2 non-finite values"):
        read_labeled_features(tmp_path / "d")


def test_labeled_features_are_read_a_block_at_a_time_and_a_stray_vector_sets_no_length(tmp_path):
    from lifelong_learning.io.bags import Skipped, message_count
    from lifelong_learning.io.labeled_features import LENGTH_WINDOW, labeled_feature_blocks

    X = np.arange(250 * 4, dtype=np.float64).reshape(250, 4)
    write_labeled_features(tmp_path / "a", X[:150], [f"c{i % 3}" for i in range(150)])
    write_labeled_features(tmp_path / "b", X[150:], [f"c{i % 3}" for i in range(150, 250)])
    seen: list[int] = []
    blocks = list(labeled_feature_blocks([tmp_path / "a", tmp_path / "b"], block=64, progress=seen.append))
    assert [len(b[1]) for b in blocks] == [64, 64, 64, 58]  # at most a block, across bags, in order
    np.testing.assert_array_equal(np.vstack([b[0] for b in blocks]), X)
    assert len(seen) == message_count([tmp_path / "a", tmp_path / "b"]) == 250
    # the first message of a bag has another length: the bag's is that of most of its first messages
    bag = tmp_path / "stray"
    from rosbags.rosbag2 import Writer

    from lifelong_learning.io.bags import LABELED_FEATURES_TYPE, typestore

    store = typestore()
    msg, header = store.types[LABELED_FEATURES_TYPE], store.types["std_msgs/msg/Header"]
    stamp = store.types["builtin_interfaces/msg/Time"](sec=1, nanosec=0)
    with Writer(bag, version=9) as writer:
        conn = writer.add_connection("/labeled_features", LABELED_FEATURES_TYPE, typestore=store)
        for i, n in enumerate([5] + [4] * (LENGTH_WINDOW + 10)):
            raw = store.serialize_cdr(
                msg(header=header(stamp=stamp, frame_id=""), data=np.ones(n, dtype=np.float32), label="x"),
                LABELED_FEATURES_TYPE,
            )
            writer.write(conn, i + 1, raw)
    skipped = Skipped()
    rows = np.vstack([b[0] for b in labeled_feature_blocks(bag, skipped=skipped)])
    assert rows.shape == (LENGTH_WINDOW + 10, 4) and dict(skipped) == {"wrong feature length": 1}


def _two_topic_bag(path, messages):
    """A bag of LabeledFeatures ``(topic, bag ns, frame ns, label, values)``, in that order."""
    from rosbags.rosbag2 import Writer

    from lifelong_learning.io.bags import LABELED_FEATURES_TYPE, typestore

    store = typestore()
    msg, header = store.types[LABELED_FEATURES_TYPE], store.types["std_msgs/msg/Header"]
    time = store.types["builtin_interfaces/msg/Time"]
    with Writer(path, version=9) as writer:
        conns = {}
        for topic, bag_ns, frame_ns, label, values in messages:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, LABELED_FEATURES_TYPE, typestore=store)
            stamp = time(sec=frame_ns // 10**9, nanosec=frame_ns % 10**9)
            data = np.asarray(values, np.float32)
            raw = store.serialize_cdr(
                msg(header=header(stamp=stamp, frame_id=""), data=data, label=label), LABELED_FEATURES_TYPE
            )
            writer.write(conns[topic], bag_ns, raw)


def test_a_frame_on_two_topics_is_read_once_and_counted(tmp_path):
    from lifelong_learning.io.labeled_features import REPEAT_WINDOW_NS

    s = 10**9
    taught, learned = "/labeled_features", "/object_recognition/learned_features"
    _two_topic_bag(
        tmp_path / "bag",
        [
            (learned, 1 * s, 100, "mug", [1, 2]),  # taught by a later label of its showing...
            (taught, 2 * s, 100, "mug", [1, 2]),  # ...then its labelled copy: a repeat
            (taught, 3 * s, 200, "mug", [1, 2]),  # the same values, another frame: a sample
            (taught, 4 * s, 200, "mug", [1, 2]),  # twice on one topic: the reader keeps both
            (learned, 5 * s, 200, "cup", [1, 2]),  # the frame again, another label: a repeat too
            (learned, 6 * s, 300, "mug", [3, 4]),  # a pasted copy (its frame's stamp, other values)
            (taught, 7 * s, 300, "mug", [5, 6]),
            (learned, 7 * s + REPEAT_WINDOW_NS + 1, 300, "mug", [5, 6]),  # past the window: a sample
        ],
    )
    data = read_labeled_features(tmp_path / "bag")
    assert data.labels == ["mug"] * 6
    np.testing.assert_array_equal(data.X[:, 0], [1, 1, 1, 3, 5, 5])
    assert dict(data.skipped) == {"frame already read on another topic": 2}
    assert "the frame stamped 100 again" in data.skipped.details["frame already read on another topic"]
    only = read_labeled_features(tmp_path / "bag", topic=taught)  # one topic: nothing repeats
    assert len(only.labels) == 4 and not only.skipped
