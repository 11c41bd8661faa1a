"""The bag files the lifelong loop may train on: what an announcement names, checked on disk.

The recorder announces every storage file it closes (lifelong_learning/BagFileClosed); on a ROS 2
graph without DDS security any peer can publish such an announcement, naming any file. So the
loop takes nothing from the message but the path, and :func:`check_closed_file` takes the rest
from the disk, refusing (:class:`UntrustedFileError`, with a short ``reason`` to count) a file

- **outside the recorder's bag directory** (``bag_root``): the path resolved, symlinks and ``..``
  followed; a link that leaves the directory is refused like a path that does;
- **not the recorder's**: not a regular ``.mcap`` / ``.db3`` file (``os.stat`` first: a FIFO or a
  device is never opened), not named as it names its files (``<bag>/<bag>_<index>.<ext>``, the
  rosbag2 convention), not listed in its bag's ``metadata.yaml`` (rewritten by the recorder after
  every closed file), or whose messages (count, first and last stamp, read from the file itself)
  are not what that metadata says of it;
- **empty**.

What it returns (:class:`FileFacts`) is what the loop chooses by: the file's own time range (its
first and last message's receive stamps), its topics and its SHA-256 (a byte copy of another file
under another name is the same data, not new data). A file the recorder wrote can still be
replaced by someone who can write the bag directory; that is the operating system's to prevent.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from lifelong_learning.core.files import UnsafePathError, file_digest, read_regular_text
from lifelong_learning.io.bag_files import (
    MAX_METADATA_BYTES,
    MAX_STORAGE_FILE_BYTES,
    STORAGE_SUFFIXES,
    BagError,
    open_bag,
)

#: a storage file of the recorder: ``<bag name>_<index>.<ext>``
_NAME = re.compile(r"^(?P<bag>.+)_(?P<index>\d+)(?P<ext>\.mcap|\.db3)$")


class UntrustedFileError(ValueError):
    """A file the loop does not train on: ``reason`` (counted) and the details (the message)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class FileFacts:
    """A closed storage file as read from the disk: times in seconds (receive stamps)."""

    path: str
    bag: str
    first: float
    last: float
    count: int
    topics: frozenset[str]
    digest: str

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "first": self.first, "last": self.last, "count": self.count}


def _inside(path: Path, root: Path) -> Path:
    """``path`` resolved, if it lies inside ``root`` (resolved); UntrustedFileError otherwise."""
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # missing, a link loop
        raise UntrustedFileError("bag file missing", f"{path}: {exc}") from exc
    if not resolved.is_relative_to(root):
        raise UntrustedFileError(
            "bag file outside bag_directory", f"{path} (resolved {resolved}) is not inside {root}"
        )
    return resolved


def _listed(resolved: Path) -> dict[str, object]:
    """The entry of ``resolved`` in its bag's ``metadata.yaml`` (UntrustedFileError if none)."""
    import yaml

    metadata = resolved.parent / "metadata.yaml"
    try:
        info = yaml.safe_load(read_regular_text(metadata, MAX_METADATA_BYTES))
    except (OSError, UnsafePathError, ValueError, yaml.YAMLError) as exc:
        raise UntrustedFileError("bag file not the recorder's", f"{metadata}: {exc}") from exc
    bag = (info or {}).get("rosbag2_bagfile_information", info) if isinstance(info, dict) else None
    entries = bag.get("files") if isinstance(bag, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("path") == resolved.name:
            return entry
    raise UntrustedFileError(
        "bag file not the recorder's", f"{resolved.name} is not listed in {metadata} (not a closed file)"
    )


def _nanoseconds(entry: dict[str, object], key: str, inner: str) -> int:
    value = entry.get(key)
    return int(value.get(inner, -1)) if isinstance(value, dict) else -1


def check_closed_file(path: str | os.PathLike[str], bag_root: str | os.PathLike[str]) -> FileFacts:
    """The facts of the closed storage file ``path`` if the recorder under ``bag_root`` wrote it.

    Raises:
        UntrustedFileError: see the module docstring; ``reason`` says which check refused it.
    """
    given = Path(path)
    if not given.is_absolute():
        raise UntrustedFileError("bag file not absolute", f"{given!s}")
    root = Path(bag_root).expanduser().resolve()
    resolved = _inside(given, root)
    name = _NAME.match(resolved.name)
    if name is None or name["ext"] not in STORAGE_SUFFIXES or name["bag"] != resolved.parent.name:
        raise UntrustedFileError(
            "bag file not the recorder's", f"{resolved.name}: not named <bag>_<index>.mcap|.db3 in its bag"
        )
    entry = _listed(resolved)
    from rosbags.rosbag2 import ReaderError

    try:
        with open_bag(resolved) as reader:  # os.stat first: a regular file within the size bound
            count = int(reader.message_count)
            first, last = int(reader.start_time), int(reader.end_time)
            topics = frozenset(c.topic for c in reader.connections)
    except UnsafePathError as exc:
        raise UntrustedFileError("bag file not a regular file", str(exc)) from exc
    except (ReaderError, BagError, OSError, ValueError, KeyError) as exc:  # a corrupt or cut file
        raise UntrustedFileError("bag file unreadable", f"{resolved}: {type(exc).__name__}: {exc}") from exc
    if count <= 0:
        raise UntrustedFileError("bag file empty", f"{resolved}: no messages")
    # rosbags' end_time is one past the last stamp
    listed = (
        int(entry.get("message_count", -1) or 0),
        _nanoseconds(entry, "starting_time", "nanoseconds_since_epoch"),
        _nanoseconds(entry, "duration", "nanoseconds"),
    )
    if listed != (count, first, last - 1 - first):
        raise UntrustedFileError(
            "bag file not the recorder's",
            f"{resolved}: {count} messages from {first} to {last - 1} ns, its metadata says "
            f"{listed[0]} from {listed[1]} for {listed[2]} ns",
        )
    digest = file_digest(resolved, MAX_STORAGE_FILE_BYTES) or ""
    return FileFacts(
        str(resolved), str(resolved.parent), first * 1e-9, (last - 1) * 1e-9, count, topics, digest
    )
