"""Recording raw CDR messages into a split rosbag2 bag through ``rosbags`` (no ROS imports).

:class:`SplitBagWriter` implements what ``ros2 bag record -o NAME`` writes, for machines without
rosbag2: a bag directory ``NAME/`` holding the storage files ``NAME_0.mcap``, ``NAME_1.mcap``, ...
(``.db3`` with the sqlite3 storage) and one rosbag2 ``metadata.yaml`` (version 9) that lists them.
Messages are written as the serialized (CDR) bytes they arrived as; nothing is re-serialized.

Crash safety: the open file is written under ``NAME/partial/NAME_<k>/`` and moved into the bag
when closed; after every closed file ``metadata.yaml`` is rewritten atomically to list every
closed file, and only those, so a process killed at any moment leaves a bag that rosbags' readers
read completely up to the last closed file (why, and what the file left in ``partial/`` holds:
docs/design.md, io/recorder.py).

A file is closed when its message bytes reach ``max_bagfile_size`` (0: no limit), when
``max_bagfile_duration_s`` has passed since its first message (checked on every write and on
:meth:`SplitBagWriter.tick`; 0: no limit; this bounds what a crash can lose), on
:meth:`SplitBagWriter.split` and on :meth:`SplitBagWriter.close`. A file is only created when
a message is written to it: there are no empty files. Every file holds every topic known when
it was opened (and those added while it is open), like rosbag2's split files.

Message definitions come from a rosbags type store (default: ROS 2 Kilted + this package's
messages); :func:`ensure_message_type` adds a type the store lacks (and the types it nests) from
``share/<pkg>/msg/<Type>.msg`` found through the ament index. Memory stays bounded whatever the
message rate and file length, and writing is synchronous (what it costs: docs/design.md).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from rosbags.interfaces import Connection, Nodetype, Qos
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.metadata import dump_qos_v9
from rosbags.typesys import get_types_from_msg

from lifelong_learning.core.files import atomic_write_bytes

#: storage name → (rosbags plugin, file suffix)
STORAGES: dict[str, tuple[StoragePlugin, str]] = {
    "mcap": (StoragePlugin.MCAP, ".mcap"),
    "sqlite3": (StoragePlugin.SQLITE3, ".db3"),
}
#: sub-directory of the bag holding the file being written (not listed in metadata.yaml)
PARTIAL_DIR = "partial"
METADATA = "metadata.yaml"

_MSGTYPE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)/msg/([A-Za-z][A-Za-z0-9_]*)$")


class RecorderError(Exception):
    """A topic or type that cannot be recorded, or a storage file that could not be written."""


# ---------------------------------------------------------------------------- message types


def find_msg_definition(msgtype: str) -> str:
    """The text of ``share/<pkg>/msg/<Type>.msg`` for ``msgtype`` (``pkg/msg/Type``) from the ament index.

    Raises:
        RecorderError: not a message type name, no ament index, package or file not found.
    """
    match = _MSGTYPE.match(msgtype)
    if match is None:
        raise RecorderError(f"{msgtype!r} is not a message type name (pkg/msg/Type)")
    pkg, name = match.groups()
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        raise RecorderError(f"{msgtype}: unknown type and no ament index (ament_index_python)") from None
    try:
        share = get_package_share_directory(pkg)
    except (LookupError, ValueError, OSError) as exc:  # PackageNotFoundError is a KeyError
        raise RecorderError(f"{msgtype}: unknown type: package {pkg!r} is not in the ament index") from exc
    path = Path(share) / "msg" / f"{name}.msg"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecorderError(f"{msgtype}: unknown type: cannot read {path} ({exc})") from exc


def _nested_names(desc: tuple[Any, Any]) -> Iterator[str]:
    nodetype, rest = desc
    if nodetype == Nodetype.NAME:
        yield rest
    elif nodetype in (Nodetype.ARRAY, Nodetype.SEQUENCE):
        yield from _nested_names(rest[0])


def ensure_message_type(store: Any, msgtype: str) -> None:
    """Register ``msgtype`` in the rosbags type ``store`` unless it knows it already.

    The definition, and those of the types it nests that the store lacks, are read from the
    ``.msg`` files found through the ament index (:func:`find_msg_definition`).

    Raises:
        RecorderError: a definition is not found or does not parse.
    """
    found: dict[str, Any] = {}
    pending = [msgtype]
    while pending:
        name = pending.pop()
        if name in store.types or name in found:
            continue
        text = find_msg_definition(name)
        try:
            types = get_types_from_msg(text, name)
        except Exception as exc:  # rosbags raises its own parse errors
            raise RecorderError(f"{name}: definition does not parse ({exc})") from exc
        found.update(types)
        for _consts, fields in types.values():
            for _field, desc in fields:
                pending.extend(_nested_names(desc))
    if found:
        try:
            store.register(found)
        except Exception as exc:  # TypesysError on conflicting definitions
            raise RecorderError(f"{msgtype}: cannot register its definition ({exc})") from exc


# ---------------------------------------------------------------------------- the writer


def _on_io_thread(method: Callable[..., Any]) -> Callable[..., Any]:
    """With sqlite3, run ``method`` on the writer's I/O thread and return its result (or raise
    its error): sqlite3 objects may only be used in the thread that created them, and callers
    (executor threads) vary. MCAP calls run in the caller.
    """

    @functools.wraps(method)
    def run(self: SplitBagWriter, *args: Any, **kwargs: Any) -> Any:
        if self._io is None:
            return method(self, *args, **kwargs)
        try:
            future = self._io.submit(method, self, *args, **kwargs)
        except RuntimeError:  # the I/O thread ended with close()
            raise RecorderError(f"{self.path}: closed") from None
        return future.result()

    return run


@dataclass(frozen=True)
class BagFile:
    """One closed storage file of the bag: its name, time span and message counts per topic."""

    name: str
    start_ns: int
    duration_ns: int
    message_count: int
    topic_counts: dict[str, int]


@dataclass
class _Topic:
    name: str
    msgtype: str
    msgdef: str
    rihs01: str
    offered_qos: tuple[Qos, ...]
    closed_count: int = 0  # messages in closed files
    listed: bool = False  # part of a closed file: in metadata.yaml


@dataclass
class _OpenFile:
    name: str  # NAME_<k>
    writer: Writer
    connections: dict[str, Connection]
    start_ns: int = -1  # receive time of its first message
    message_bytes: int = 0
    message_count: int = 0
    topic_counts: dict[str, int] = field(default_factory=dict)


class SplitBagWriter:
    """Writes raw CDR messages of several topics into a rosbag2 bag split into several files.

    Thread-safe: every call may come from any thread (with sqlite3 the storage work runs on one
    thread of the writer's own, the caller waits for it). Use as a context manager or call :meth:`open`
    and :meth:`close`.

    Args:
        path: the bag directory to create (it must not exist).
        storage: ``"mcap"`` or ``"sqlite3"``.
        max_bagfile_size: close a file once its message bytes reach this (0: no limit).
        max_bagfile_duration_s: close a file this long after its first message, in the time of
            the message timestamps (0: no limit).
        typestore: rosbags type store for the message definitions (default: a new
            :func:`lifelong_learning.io.bags.new_typestore`); unknown types are added to it.
        ros_distro: written to metadata.yaml (default: ``$ROS_DISTRO`` or ``"rosbags"``).
        on_file_closed: called with each :class:`BagFile` once it is listed in metadata.yaml (on
            the thread that closed it, under the writer's lock: it must be quick and not raise).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        storage: str = "mcap",
        max_bagfile_size: int = 0,
        max_bagfile_duration_s: float = 0.0,
        typestore: Any = None,
        ros_distro: str | None = None,
        on_file_closed: Callable[[BagFile], None] | None = None,
    ) -> None:
        if storage not in STORAGES:
            raise ValueError(f"storage must be one of {sorted(STORAGES)}, got {storage!r}")
        if max_bagfile_size < 0 or max_bagfile_duration_s < 0:
            raise ValueError("max_bagfile_size and max_bagfile_duration_s must be >= 0 (0: no limit)")
        if typestore is None:
            from lifelong_learning.io.bags import new_typestore

            typestore = new_typestore()
        self.path = Path(path)
        self.storage = storage
        self.max_bagfile_size = int(max_bagfile_size)
        self.max_bagfile_duration_ns = round(float(max_bagfile_duration_s) * 1e9)
        self.store = typestore
        self.ros_distro = ros_distro or os.environ.get("ROS_DISTRO") or "rosbags"
        self.on_file_closed = on_file_closed
        self._plugin, self._suffix = STORAGES[storage]
        self._lock = threading.RLock()
        self._io = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="bag-writer")
            if storage == "sqlite3"
            else None
        )
        self._io_stopped = False
        self._close_lock = threading.Lock()
        self._topics: dict[str, _Topic] = {}
        self._file: _OpenFile | None = None
        self._next_index = 0
        self._opened = False
        self._closed = False
        self.files: list[BagFile] = []  #: closed files, listed in metadata.yaml
        self.messages_written = 0  #: messages handed to a storage file (closed or open)
        self.bytes_written = 0  #: their message bytes
        self.messages_lost = 0  #: messages of files that failed to close (disk full...)

    # ------------------------------------------------------------------ life cycle
    @_on_io_thread
    def open(self) -> None:
        """Create the bag directory and an empty (valid) metadata.yaml.

        Raises:
            FileExistsError: ``path`` exists (a bag is never appended to).
            OSError: the directory cannot be created.
        """
        with self._lock:
            if self._opened:
                raise RecorderError(f"{self.path}: already opened")
            if self.path.exists():
                raise FileExistsError(f"{self.path} exists already; a bag directory is never appended to")
            self.path.mkdir(parents=True)
            self._opened = True
            self._write_metadata()

    def close(self) -> None:
        """Close the open file (if any), rewrite metadata.yaml, remove the empty partial directory.

        Idempotent. Raises RecorderError if the last file could not be closed (it stays partial).
        """
        with self._close_lock:
            if self._io_stopped:
                return
            try:
                self._close()
            finally:
                if self._io is not None:
                    self._io.shutdown(wait=True)
                self._io_stopped = True

    @_on_io_thread
    def _close(self) -> None:
        with self._lock:
            if self._closed or not self._opened:
                self._closed = True
                return
            self._closed = True
            try:
                if self._file is not None:
                    self._close_file()
                else:
                    self._write_metadata()  # again, in case the last rewrite failed
            finally:
                with suppress(OSError):
                    (self.path / PARTIAL_DIR).rmdir()  # only when empty: partial files stay

    def __enter__(self) -> SplitBagWriter:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ topics and messages
    @_on_io_thread
    def add_topic(
        self,
        topic: str,
        msgtype: str,
        *,
        offered_qos: Sequence[Qos] = (),
        type_hash: str | None = None,
    ) -> None:
        """Record ``topic`` of ``msgtype`` (``pkg/msg/Type``); adding it again with that type is a no-op.

        Args:
            offered_qos: the publishers' QoS, stored with the topic (rosbag2's
                ``offered_qos_profiles``).
            type_hash: the publishers' RIHS01 type hash; a definition with another hash is
                refused (the bag would describe the bytes wrongly).

        Raises:
            RecorderError: the topic is recorded with another type, the type is unknown to the
                store and the ament index, or its hash differs from ``type_hash``.
        """
        with self._lock:
            self._check_writable()
            known = self._topics.get(topic)
            if known is not None:
                if known.msgtype != msgtype:
                    raise RecorderError(f"{topic} is recorded as {known.msgtype}; refusing type {msgtype}")
                return
            ensure_message_type(self.store, msgtype)
            try:
                msgdef, _ = self.store.generate_msgdef(msgtype, ros_version=2)
                rihs01 = self.store.hash_rihs01(msgtype)
            except Exception as exc:  # a nested type missing from a registered definition...
                raise RecorderError(f"{msgtype}: no usable definition ({exc})") from exc
            if type_hash and type_hash != rihs01:
                raise RecorderError(
                    f"{topic}: the publishers' {msgtype} has hash {type_hash}, the known definition "
                    f"{rihs01}: different definitions, not recorded"
                )
            entry = _Topic(topic, msgtype, msgdef, rihs01, tuple(offered_qos))
            self._topics[topic] = entry
            if self._file is not None:
                try:
                    self._file.connections[topic] = self._connect(self._file.writer, entry)
                except Exception as exc:
                    self._abort_file(exc)

    @property
    def topics(self) -> dict[str, str]:
        """Recorded topics → their message types."""
        with self._lock:
            return {t.name: t.msgtype for t in self._topics.values()}

    @_on_io_thread
    def write(self, topic: str, timestamp_ns: int, data: bytes | memoryview) -> None:
        """Write one serialized (CDR) message of ``topic`` received at ``timestamp_ns``.

        May close the current file first (duration limit) or after (size limit).

        Raises:
            RecorderError: unknown topic, writer closed, or the storage failed (the open file
                is then given up, counted in :attr:`messages_lost`; closed files are untouched).
        """
        with self._lock:
            self._check_writable()
            if topic not in self._topics:
                raise RecorderError(f"{topic} is not a recorded topic (add_topic first)")
            self._close_if_older(timestamp_ns)
            if self._file is None:
                self._open_file()
            f = self._file
            assert f is not None
            try:
                f.writer.write(f.connections[topic], timestamp_ns, data)
            except Exception as exc:
                self._abort_file(exc)
            if f.start_ns < 0:
                f.start_ns = timestamp_ns
            n = len(data)
            f.message_bytes += n
            f.message_count += 1
            f.topic_counts[topic] = f.topic_counts.get(topic, 0) + 1
            self.messages_written += 1
            self.bytes_written += n
            if self.max_bagfile_size and f.message_bytes >= self.max_bagfile_size:
                self._close_file()

    @_on_io_thread
    def tick(self, now_ns: int) -> BagFile | None:
        """Close the open file if the duration limit has passed at ``now_ns`` (the clock of the
        timestamps); call it periodically so that a quiet topic does not keep a file open."""
        with self._lock:
            if self._closed or not self._opened:
                return None
            return self._close_if_older(now_ns)

    @_on_io_thread
    def split(self) -> BagFile | None:
        """Close the open file now (the bag is then readable up to here); None if none was open."""
        with self._lock:
            self._check_writable()
            if self._file is None:
                return None
            return self._close_file()

    def status(self) -> dict[str, Any]:
        """A snapshot for diagnostics: files, current file, counts per topic."""
        with self._lock:
            f = self._file
            counts = {
                t.name: t.closed_count + (f.topic_counts.get(t.name, 0) if f else 0)
                for t in self._topics.values()
            }
            return {
                "path": str(self.path),
                "storage": self.storage,
                "files_closed": len(self.files),
                "current_file": f"{PARTIAL_DIR}/{f.name}/{f.name}{self._suffix}" if f else "",
                "current_messages": f.message_count if f else 0,
                "messages_written": self.messages_written,
                "bytes_written": self.bytes_written,
                "messages_lost": self.messages_lost,
                "topic_counts": counts,
            }

    # ------------------------------------------------------------------ internals
    def _check_writable(self) -> None:
        if not self._opened:
            raise RecorderError(f"{self.path}: not opened")
        if self._closed:
            raise RecorderError(f"{self.path}: closed")

    def _connect(self, writer: Writer, topic: _Topic) -> Connection:
        return writer.add_connection(
            topic.name,
            topic.msgtype,
            msgdef=topic.msgdef,
            rihs01=topic.rihs01,
            offered_qos_profiles=list(topic.offered_qos),
        )

    def _open_file(self) -> None:
        name = f"{self.path.name}_{self._next_index}"
        self._next_index += 1  # a failed file keeps its name: the next one never collides with it
        work = self.path / PARTIAL_DIR / name
        writer = Writer(work, version=9, storage_plugin=self._plugin)
        try:
            work.parent.mkdir(exist_ok=True)
            writer.open()
            connections = {t.name: self._connect(writer, t) for t in self._topics.values()}
        except Exception as exc:
            with suppress(Exception):
                writer.abort()
            with suppress(OSError):
                shutil.rmtree(work)
            raise RecorderError(f"cannot start {work}: {type(exc).__name__}: {exc}") from exc
        self._file = _OpenFile(name, writer, connections)

    def _abort_file(self, exc: BaseException) -> None:
        """Give up the open file after a storage error; raise RecorderError."""
        f, self._file = self._file, None
        assert f is not None
        with suppress(Exception):
            f.writer.abort()
        self.messages_lost += f.message_count
        raise RecorderError(
            f"writing {f.name}{self._suffix} failed ({type(exc).__name__}: {exc}); its "
            f"{f.message_count} messages are lost, the partial file stays in {self.path / PARTIAL_DIR}; "
            f"the next message starts a new file"
        ) from exc

    def _close_if_older(self, now_ns: int) -> BagFile | None:
        f = self._file
        if (
            f is not None
            and self.max_bagfile_duration_ns
            and f.start_ns >= 0
            and now_ns - f.start_ns >= self.max_bagfile_duration_ns
        ):
            return self._close_file()
        return None

    def _close_file(self) -> BagFile:
        """Finish the open file, move it into the bag, list it in metadata.yaml."""
        f = self._file
        assert f is not None
        work = f.writer.path
        filename = f"{f.name}{self._suffix}"
        try:
            f.writer.close()  # the storage file's footer/commit, and work/metadata.yaml
            with open(work / filename, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(work / filename, self.path / filename)
        except Exception as exc:
            self._abort_file(exc)
        self._file = None
        with suppress(OSError):
            (work / METADATA).unlink()
            work.rmdir()
        start = f.writer.min_timestamp if f.message_count else 0
        duration = max(0, f.writer.max_timestamp - f.writer.min_timestamp) if f.message_count else 0
        done = BagFile(filename, start, duration, f.message_count, dict(f.topic_counts))
        self.files.append(done)
        for name in f.connections:
            topic = self._topics[name]
            topic.listed = True
            topic.closed_count += f.topic_counts.get(name, 0)
        self._write_metadata()
        if self.on_file_closed is not None:
            self.on_file_closed(done)
        return done

    def _write_metadata(self) -> None:
        """Rewrite metadata.yaml atomically to list every closed file."""
        files = self.files
        total = sum(f.message_count for f in files)
        if total:
            start = min(f.start_ns for f in files if f.message_count)
            end = max(f.start_ns + f.duration_ns for f in files if f.message_count)
        else:
            start = end = 0
        info: dict[str, Any] = {
            "version": 9,
            "storage_identifier": self.storage,
            "relative_file_paths": [f.name for f in files],
            "duration": {"nanoseconds": end - start},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": total,
            "topics_with_message_count": [
                {
                    "topic_metadata": {
                        "name": t.name,
                        "type": t.msgtype,
                        "serialization_format": "cdr",
                        "offered_qos_profiles": dump_qos_v9(list(t.offered_qos)),
                        "type_description_hash": t.rihs01,
                    },
                    "message_count": t.closed_count,
                }
                for t in self._topics.values()
                if t.listed
            ],
            "compression_format": "",
            "compression_mode": "",
            "files": [
                {
                    "path": f.name,
                    "starting_time": {"nanoseconds_since_epoch": f.start_ns},
                    "duration": {"nanoseconds": f.duration_ns},
                    "message_count": f.message_count,
                }
                for f in files
            ],
            "custom_data": None,
            "ros_distro": self.ros_distro,
        }
        text = yaml.dump(
            {"rosbag2_bagfile_information": info},
            Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),  # libyaml: ~0.1 ms per listed file
            default_flow_style=False,
            sort_keys=False,
        )
        try:
            atomic_write_bytes(self.path / METADATA, text.encode("utf-8"))
        except OSError as exc:
            raise RecorderError(
                f"{self.path / METADATA}: rewrite failed ({exc}); it still lists the files before "
                f"the last one (retried at the next close)"
            ) from exc
