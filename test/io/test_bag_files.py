"""What a bag directory may hold before it is opened (io/bag_files.py): a FIFO or a device among
its files, or an oversized metadata.yaml, is refused at once, before rosbags opens anything."""

import os
import threading

import numpy as np
import pytest

from lifelong_learning.core.files import UnsafePathError
from lifelong_learning.io import bag_files
from lifelong_learning.io.bag_files import BagError, UnsafeBagError, check_bag, open_bag
from lifelong_learning.io.bags import message_count, write_labeled_features


def _error_within(seconds: float, call) -> BaseException | None:
    """What ``call()`` raises (None if nothing), asserting it ends within ``seconds`` (on a thread of
    its own: a reader blocked on a FIFO fails the test instead of hanging it)."""
    raised: list = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    return raised[0] if raised else None


def _open(path) -> None:
    with open_bag(path):
        pass


@pytest.fixture
def bag(tmp_path):
    write_labeled_features(tmp_path / "bag", np.ones((4, 3)), ["x"] * 4)
    return tmp_path / "bag"


def test_a_good_bag_opens(bag):
    check_bag(bag)
    with open_bag(bag) as reader:
        assert [c.topic for c in reader.connections] == ["/labeled_features"]


@pytest.mark.parametrize("special", ["metadata.yaml", "extra.mcap"])
def test_a_fifo_in_a_bag_is_refused_before_it_is_opened(bag, special):
    (bag / special).unlink(missing_ok=True)
    os.mkfifo(bag / special)
    exc = _error_within(1.0, lambda: _open(bag))
    assert isinstance(exc, UnsafeBagError) and "not a regular file" in str(exc), exc
    assert isinstance(exc, BagError) and isinstance(exc, UnsafePathError)  # either caller's category
    assert _error_within(1.0, lambda: message_count(bag)) is None  # 0 for a bag that does not open


def test_a_device_in_a_bag_and_an_oversized_metadata_are_refused(bag):
    os.symlink("/dev/zero", bag / "zero.mcap")
    with pytest.raises(UnsafeBagError, match=r"zero\.mcap is not a regular file"):
        check_bag(bag)
    (bag / "zero.mcap").unlink()
    with open(bag / "metadata.yaml", "ab") as f:
        f.truncate(bag_files.MAX_METADATA_BYTES + 1)  # sparse
    with pytest.raises(UnsafeBagError, match="more than the 1048576 allowed"):
        check_bag(bag)


def test_a_directory_that_is_no_bag_is_refused(tmp_path, bag, monkeypatch):
    with pytest.raises(BagError, match="no such bag"):
        check_bag(tmp_path / "none")
    (tmp_path / "file").write_text("x")
    with pytest.raises(BagError, match="not a bag directory"):
        check_bag(tmp_path / "file")
    with pytest.raises(BagError, match=r"no metadata\.yaml"):
        check_bag(tmp_path)
    os.symlink(tmp_path / "gone", bag / "dangling.mcap")
    with pytest.raises(BagError, match="unreadable entry"):
        check_bag(bag)
    (bag / "dangling.mcap").unlink()
    monkeypatch.setattr(bag_files, "MAX_BAG_ENTRIES", 1)  # metadata.yaml and one storage file
    with pytest.raises(UnsafeBagError, match="more than 1 entries"):
        check_bag(bag)
