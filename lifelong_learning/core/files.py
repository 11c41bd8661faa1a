"""Writes that matter, done atomically: a crash leaves either the old file or the new one.

:func:`atomic_path` yields a temporary path in the destination's directory for any writer (a
byte string, ``torch.onnx.export``, a YAML dump); on success the file is fsync'ed, renamed over
the destination (``os.replace``, atomic on POSIX) and the directory fsync'ed so that the rename
itself is durable; on failure the temporary file is removed and the destination is untouched. A process killed
mid-write leaves its temporary file (``.NAME.XXXXXXXX.tmp``) behind;
:func:`remove_stale_temporaries` removes those.

Paths that other processes choose (a service request, an announced model) go through
:func:`confined_path` (inside a configured directory, symlinks and ``..`` resolved) and, before a
write, :func:`check_replaceable` (never over a symlink, a directory, a special file or a file
that is not ours); both raise :class:`UnsafePathError`.

Files that other processes name are read only through :func:`open_regular` (a regular file, within
a size bound: a FIFO or a device is never opened for good), whole through :func:`read_regular_bytes`
and :func:`read_regular_text`; a path that another library will open (a bag's files for rosbags)
is checked first with :func:`check_regular`, which opens nothing. :func:`file_digest` identifies a
file by its SHA-256, and :func:`aside_path` names where a file that cannot be used is moved.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

#: the largest URDF read from a file or a ``robot_description`` message, by the tuner and by
#: inverse_dynamics (read whole; a URDF is text and names its meshes: the Panda's is 30 kB, a
#: humanoid's expanded robot_description about 1 MB)
MAX_URDF_BYTES = 4 << 20

#: what :func:`atomic_path` adds around the destination's name (``tempfile.mkstemp`` puts 8
#: characters of ``[a-z0-9_]`` between them)
_TMP_PREFIX = "."
_TMP_SUFFIX = ".tmp"
_TMP_RANDOM = r"[a-z0-9_]{8}"


class UnsafePathError(ValueError):
    """A path that must not be written or read: outside the allowed directory, or not a file of ours."""


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - some filesystems cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems do not support directory fsync
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path next to ``path``; what is written there replaces ``path`` atomically on exit.

    Example:
        >>> with atomic_path("/tmp/example.txt") as tmp:  # doctest: +SKIP
        ...     tmp.write_text("complete or absent")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f"{_TMP_PREFIX}{path.name}.", suffix=_TMP_SUFFIX, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_directory(path.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes | bytearray | memoryview) -> None:
    """Write ``data`` (any bytes-like object, e.g. a message's buffer) to ``path`` atomically
    (temporary file, fsync, rename, directory fsync)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def confined_path(
    path: str | os.PathLike[str], directory: str | os.PathLike[str], allow_outside: bool = False
) -> Path:
    """``path`` resolved, and refused unless it lies inside ``directory``.

    ``~`` is expanded in both; a relative ``path`` is taken under ``directory``; symlinks and
    ``..`` are resolved (in ``directory`` too), so neither can lead out of it.

    Args:
        path: the path asked for (e.g. by a service request).
        directory: the directory it must stay in (it need not exist).
        allow_outside: return the resolved path wherever it is.

    Raises:
        UnsafePathError: the resolved path is not inside the resolved ``directory`` (the
            message names both), or ``path`` is empty.
    """
    if not os.fspath(path):
        raise UnsafePathError("empty path")
    base = Path(directory).expanduser()
    candidate = Path(path).expanduser()
    if not candidate.is_absolute():
        candidate = base / candidate
    try:
        resolved = candidate.resolve()
        root = base.resolve()
    except (OSError, RuntimeError) as exc:  # a loop of links, a name too long
        raise UnsafePathError(f"{os.fspath(path)!r} cannot be resolved: {exc}") from exc
    if allow_outside:
        return resolved
    if resolved != root and root not in resolved.parents:
        raise UnsafePathError(f"{os.fspath(path)!r} resolves to {resolved}, outside the directory {root}")
    return resolved


def check_replaceable(path: str | os.PathLike[str], is_ours: Callable[[Path], bool] | None = None) -> None:
    """Refuse to write over anything at ``path`` but a regular file of ours.

    A missing ``path`` is fine. The last component is not followed (``lstat``): a symlink is
    refused even when it points to a file of ours.

    Args:
        path: where a writer will put its file.
        is_ours: called on an existing regular file; False refuses it (e.g. "is a readable
            model file of this format", so that no other file is ever replaced). None: any
            regular file may be replaced.

    Raises:
        UnsafePathError: ``path`` is a symlink, a directory, a FIFO, socket or device, or a
            regular file that ``is_ours`` rejects.
    """
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except NotADirectoryError as exc:
        raise UnsafePathError(f"{path}: a parent is not a directory") from exc
    except OSError as exc:  # a name too long, a loop of links, no permission: not writable here
        raise UnsafePathError(f"{path}: {exc.strerror or exc}") from exc
    if stat.S_ISLNK(mode):
        raise UnsafePathError(f"{path} is a symbolic link; refusing to write over it")
    if stat.S_ISDIR(mode):
        raise UnsafePathError(f"{path} is a directory; refusing to write over it")
    if not stat.S_ISREG(mode):
        raise UnsafePathError(f"{path} is a special file (FIFO, socket or device); refusing to write over it")
    if is_ours is not None and not is_ours(path):
        raise UnsafePathError(f"{path} exists and is not a file this writer made; refusing to replace it")


def stale_temporary_pattern(name: str | None = None) -> re.Pattern[str]:
    """The names :func:`atomic_path` gives its temporary files (for destination ``name``, or any)."""
    middle = re.escape(name) if name is not None else ".+"
    return re.compile(rf"{re.escape(_TMP_PREFIX)}{middle}\.{_TMP_RANDOM}{re.escape(_TMP_SUFFIX)}")


def remove_stale_temporaries(
    directory: str | os.PathLike[str], name: str | None = None, min_age_s: float = 0.0
) -> list[Path]:
    """Remove the temporary files that :func:`atomic_path` left in ``directory`` when killed mid-write.

    Only regular files named exactly as :func:`atomic_path` names them (``.NAME.XXXXXXXX.tmp``)
    are removed; symlinks, directories and any other name are left alone.

    Args:
        directory: where to look (``~`` expanded; a missing directory holds nothing).
        name: only the temporaries of this destination file name; None: of any.
        min_age_s: keep files modified more recently than this (a writer in another process
            may still be writing them).

    Returns:
        The paths removed.
    """
    directory = Path(directory).expanduser()
    pattern = stale_temporary_pattern(name)
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return removed
    now = time.time()
    for entry in entries:
        if not pattern.fullmatch(entry.name):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or now - st.st_mtime < min_age_s:
                continue
            os.unlink(entry.path)
        except FileNotFoundError:
            continue
        removed.append(Path(entry.path))
    return removed


def aside_path(path: Path, why: str) -> Path:
    """Where a file that cannot be used is moved aside: ``<name>.<why>-<YYYYmmdd-HHMMSS>`` beside it
    (``why``: ``unreadable``, ``incompatible``), so that it is neither lost nor used again."""
    return path.with_name(f"{path.name}.{why}-{time.strftime('%Y%m%d-%H%M%S')}")


def _check_regular(path: Path, st: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePathError(
            f"{path} is not a regular file (a directory, FIFO, socket or device); only files are read"
        )
    if st.st_size > max_bytes:
        raise UnsafePathError(f"{path} holds {st.st_size} bytes, more than the {max_bytes} allowed")


def check_regular(path: str | os.PathLike[str], max_bytes: int) -> os.stat_result:
    """Refuse ``path`` unless it is a regular file of at most ``max_bytes``, without opening it
    (``os.stat``, links followed): the check of a path that another library opens (a FIFO there
    would wait for a writer, a device never end). Returns the stat result.

    Raises:
        UnsafePathError: not a regular file, or larger than ``max_bytes``.
        OSError: missing, no permission.
    """
    path = Path(path)
    st = os.stat(path)
    _check_regular(path, st, max_bytes)
    return st


@contextmanager
def open_regular(path: str | os.PathLike[str], max_bytes: int) -> Iterator[BinaryIO]:
    """``path`` open for reading (binary), only when it is a regular file of at most ``max_bytes``.

    Checked before it is opened (``os.stat``: a FIFO would wait for a writer, ``/dev/zero`` never
    ends), opened with ``O_NONBLOCK`` (a path replaced by a FIFO after the check does not block the
    open) and checked again on the open descriptor (``os.fstat``: what is read is what was checked).
    The file may still grow while it is read: readers bound what they read (:func:`stream_digest`).

    Raises:
        UnsafePathError: not a regular file, or larger than ``max_bytes``.
        OSError: missing, no permission.
    """
    path = Path(path)
    check_regular(path, max_bytes)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        _check_regular(path, os.fstat(fd), max_bytes)
        os.set_blocking(fd, True)  # (a regular file ignores it; reads stay plain reads)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def read_regular_bytes(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`), never more than ``max_bytes``.

    Raises:
        UnsafePathError: not a regular file, larger than ``max_bytes``, or grown past them while read.
        OSError: missing, no permission.
    """
    with open_regular(path, max_bytes) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UnsafePathError(f"{path} grew past the {max_bytes} bytes allowed while it was read")
    return data


def read_regular_text(path: str | os.PathLike[str], max_bytes: int, encoding: str = "utf-8") -> str:
    """The text of the regular file ``path`` (:func:`read_regular_bytes`), decoded.

    Raises:
        UnsafePathError, OSError: as :func:`read_regular_bytes`. UnicodeDecodeError (a ValueError):
            not text in ``encoding``.
    """
    return read_regular_bytes(path, max_bytes).decode(encoding)


def stream_digest(f: BinaryIO, max_bytes: int) -> str:
    """The SHA-256 (hex) of what is left in ``f``, read in blocks.

    Raises:
        UnsafePathError: ``f`` holds more than ``max_bytes`` (nothing beyond them is read).
    """
    digest = hashlib.sha256()
    n = 0
    while block := f.read(min(1 << 20, max_bytes + 1 - n)):
        n += len(block)
        if n > max_bytes:
            raise UnsafePathError(f"the file grew past the {max_bytes} bytes allowed while it was read")
        digest.update(block)
    return digest.hexdigest()


def file_digest(path: str | os.PathLike[str], max_bytes: int) -> str | None:
    """The SHA-256 of a regular file's bytes, what identifies a model file; None when it is missing,
    unreadable, not a regular file (never waited on: :func:`open_regular`) or over ``max_bytes``
    (for model files, :data:`~lifelong_learning.core.model_file.MAX_MODEL_BYTES`)."""
    try:
        with open_regular(path, max_bytes) as f:
            return stream_digest(f, max_bytes)
    except (OSError, UnsafePathError):
        return None
