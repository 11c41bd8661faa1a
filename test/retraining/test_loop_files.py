"""The files the lifelong loop may train on (retraining/loop_files.py), on a real split bag written
by the recorder's writer: its closed files pass with their own times, topics and digests; a file
outside the bag directory, a link leaving it, a file the recorder did not write or list, a copy
under another name, one whose contents disagree with its metadata, a FIFO, a cut file: refused,
each with its reason."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import pytest
import yaml

from lifelong_learning.io.bags import typestore
from lifelong_learning.io.recorder import SplitBagWriter
from lifelong_learning.retraining.loop_files import UntrustedFileError, check_closed_file

JS = "sensor_msgs/msg/JointState"
T0 = 1_700_000_000 * 10**9


def joint_state(i: int) -> bytes:
    store = typestore()
    stamp = store.types["builtin_interfaces/msg/Time"](sec=T0 // 10**9 + i, nanosec=0)
    header = store.types["std_msgs/msg/Header"](stamp=stamp, frame_id="")
    import numpy as np

    msg = store.types[JS](header=header, name=["a"], position=np.array([0.1 * i]),
                          velocity=np.array([1.0]), effort=np.array([2.0 * i]))  # fmt: skip
    return store.serialize_cdr(msg, JS)


@pytest.fixture
def bag(tmp_path: Path) -> Path:
    """``<tmp>/bags/run`` with three closed files of 10 joint states each, 0.1 s apart."""
    path = tmp_path / "bags" / "run"
    with SplitBagWriter(path, max_bagfile_size=1000) as writer:
        writer.add_topic("/joint_states", JS)
        for i in range(30):
            writer.write("/joint_states", T0 + i * 10**8, joint_state(i))
    return path


def refused(path: Path | str, root: Path) -> str:
    with pytest.raises(UntrustedFileError) as info:
        check_closed_file(path, root)
    return info.value.reason


def test_the_recorders_closed_files_pass_with_their_own_times_topics_and_digests(bag: Path) -> None:
    root = bag.parent
    files = sorted(bag.glob("run_*.mcap"), key=lambda p: int(p.stem.split("_")[1]))
    assert len(files) >= 3
    facts = [check_closed_file(f, root) for f in files]
    assert all(f.topics == frozenset({"/joint_states"}) and f.count > 0 for f in facts)
    assert facts[0].first == pytest.approx(T0 * 1e-9)
    for earlier, later in itertools.pairwise(facts):
        assert earlier.last < later.first  # one after the other, by their own stamps
    assert len({f.digest for f in facts}) == len(facts)
    assert check_closed_file(files[0], bag).path == str(files[0])  # the bag itself as the root


def test_files_outside_the_bag_directory_or_linked_out_of_it_are_refused(bag: Path, tmp_path: Path) -> None:
    root = bag.parent
    first = next(bag.glob("run_0.mcap"))
    outside = tmp_path / "elsewhere" / "run"
    outside.mkdir(parents=True)
    shutil.copy(first, outside / "run_0.mcap")
    assert refused(outside / "run_0.mcap", root) == "bag file outside bag_directory"
    assert refused("/etc/hostname", root) == "bag file outside bag_directory"
    (bag / "run_7.mcap").symlink_to(outside / "run_0.mcap")  # a link that leaves the directory
    assert refused(bag / "run_7.mcap", root) == "bag file outside bag_directory"
    assert refused(root / ".." / "elsewhere" / "run" / "run_0.mcap", root) == "bag file outside bag_directory"
    assert refused("run/run_0.mcap", root) == "bag file not absolute"
    assert refused(bag / "run_99.mcap", root) == "bag file missing"


def test_files_the_recorder_did_not_write_are_refused(bag: Path) -> None:
    root = bag.parent
    first = bag / "run_0.mcap"
    shutil.copy(first, bag / "copy.mcap")  # another name
    assert refused(bag / "copy.mcap", root) == "bag file not the recorder's"
    shutil.copy(first, bag / "run_50.mcap")  # the recorder's naming, but not listed in metadata.yaml
    assert refused(bag / "run_50.mcap", root) == "bag file not the recorder's"
    other = root / "other"
    other.mkdir()
    shutil.copy(first, other / "run_0.mcap")  # named for another bag than the one it lies in
    assert refused(other / "run_0.mcap", root) == "bag file not the recorder's"
    # listed, but its contents are not what the metadata says of it (another file's bytes)
    shutil.copy(bag / "run_1.mcap", first)
    assert refused(first, root) == "bag file not the recorder's"


def test_special_cut_and_empty_files_are_refused(bag: Path) -> None:
    root = bag.parent
    second = bag / "run_1.mcap"
    second.write_bytes(second.read_bytes()[:200])  # cut: the summary is gone
    assert refused(second, root) == "bag file unreadable"
    third = bag / "run_2.mcap"
    third.unlink()
    os.mkfifo(third)  # a FIFO where a listed file was: never opened
    assert refused(third, root) == "bag file not a regular file"
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())
    assert meta["rosbag2_bagfile_information"]["relative_file_paths"][:3] == [
        "run_0.mcap", "run_1.mcap", "run_2.mcap"
    ]  # fmt: skip
