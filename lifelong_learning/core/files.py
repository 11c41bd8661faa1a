"""Writes that matter, done atomically: a crash leaves either the old file or the new one.

:func:`atomic_path` yields a temporary path in the destination's directory for any writer (a
byte string, ``torch.onnx.export``, a YAML dump); on success the file is fsync'ed, renamed over
the destination (``os.replace``, atomic on POSIX) and the directory fsync'ed so that the rename
itself is durable; on failure the temporary file is removed and the destination is untouched.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
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


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename, directory fsync)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))
