"""What a rosbag2 directory may hold before it is opened, and opening it (:func:`open_bag`).

rosbags reads a bag's ``metadata.yaml`` whole and opens the storage files it names: a FIFO there
would block the reader (and the thread that called it) for good, ``/dev/zero`` never end. So a bag
is opened only through :func:`open_bag`, after :func:`check_bag` (``os.stat`` and the directory
listing: nothing is opened, cheap enough for a goal callback): ``metadata.yaml`` a regular file of
at most :data:`MAX_METADATA_BYTES`, every entry a regular file or a directory. What stays open to
a race is a file replaced between the check and rosbags' open, by someone who can write the bag.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lifelong_learning.core.files import UnsafePathError, check_regular

#: the most a bag's ``metadata.yaml`` may hold (rosbags reads it whole): rosbag2 writes about
#: 1 kB plus 0.5 kB per topic and per storage file
MAX_METADATA_BYTES = 1 << 20
#: the most entries a bag directory may hold (``metadata.yaml`` and its storage files; each is
#: checked before the bag is opened)
MAX_BAG_ENTRIES = 10_000
#: storage files read on their own (a closed file of a split bag: rosbags opens them without the
#: bag's metadata.yaml; an MCAP file carries its schemas, a rosbag2 sqlite3 file its metadata table)
STORAGE_SUFFIXES = (".mcap", ".db3")
#: the largest storage file read on its own (the recorder's files are split by size or duration)
MAX_STORAGE_FILE_BYTES = 1 << 40
#: the largest recorded message read by default (a LabeledFeatures of 1280 float32 is 5 kB, a
#: JointState of 100 joints about 4 kB): a larger one is skipped before it is deserialized
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20


class BagError(ValueError):
    """A bag is missing, corrupt or truncated, lacks a topic, or holds inconsistent data."""


class UnsafeBagError(BagError, UnsafePathError):
    """A bag directory holding what must not be opened: a FIFO, socket or device, an oversized
    ``metadata.yaml``, too many entries."""


def check_bag(path: str | os.PathLike[str]) -> None:
    """BagError unless ``path`` is a directory that a reader can open without blocking or reading
    without end: its ``metadata.yaml`` a regular file of at most :data:`MAX_METADATA_BYTES`, its
    entries (at most :data:`MAX_BAG_ENTRIES`) regular files or directories; or one storage file
    (:data:`STORAGE_SUFFIXES`, a regular file: a closed file of a split bag, as the lifelong loop
    names them). Only ``os.stat`` and the directory listing: nothing is opened (cheap enough for a
    goal callback)."""
    path = Path(path)
    if path.suffix in STORAGE_SUFFIXES and not path.is_dir():
        _check_file(path, MAX_STORAGE_FILE_BYTES, f"no such bag file: {path}", f"{path}:")
        return
    if not path.is_dir():
        why = "not a bag directory" if path.exists() else "no such bag (not a bag directory)"
        raise BagError(f"{why}: {path}")
    _check_file(
        path / "metadata.yaml",
        MAX_METADATA_BYTES,
        f"{path}: no metadata.yaml, not a rosbag2 directory",
        f"{path}: metadata.yaml",
    )
    try:
        with os.scandir(path) as entries:
            for n, entry in enumerate(entries):
                if n >= MAX_BAG_ENTRIES:
                    raise UnsafeBagError(f"{path}: more than {MAX_BAG_ENTRIES} entries, not a bag directory")
                mode = entry.stat().st_mode  # links followed, as the reader follows them
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    raise UnsafeBagError(
                        f"{path}: {entry.name} is not a regular file (a FIFO, socket or device); "
                        "only files are read"
                    )
    except OSError as exc:  # a dangling link, no permission
        raise BagError(f"{path}: unreadable entry ({exc.strerror or exc}: {exc.filename})") from exc


def _check_file(path: Path, max_bytes: int, missing: str, what: str) -> None:
    """BagError unless ``path`` is a regular file of at most ``max_bytes`` (``os.stat`` only)."""
    try:
        check_regular(path, max_bytes)
    except FileNotFoundError as exc:
        raise BagError(missing) from exc
    except UnsafePathError as exc:
        raise UnsafeBagError(str(exc)) from exc
    except OSError as exc:
        raise BagError(f"{what} unreadable ({exc.strerror or exc})") from exc


@contextmanager
def open_bag(path: str | os.PathLike[str]) -> Iterator[Any]:
    """The bag ``path`` (a directory, or one storage file) open (a :class:`rosbags.rosbag2.Reader`),
    once :func:`check_bag` passed.

    Raises:
        BagError: what :func:`check_bag` refuses; rosbags' own errors pass through.
    """
    from rosbags.rosbag2 import Reader

    check_bag(path)
    with Reader(Path(path)) as reader:
        yield reader
