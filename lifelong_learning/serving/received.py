"""Models received as bytes (a tuner on another machine, no shared filesystem): checked, stored.

A model file that arrives as a message is taken only when it is no larger than the node allows
and its SHA-256 is the one the message states (a damaged or truncated transfer changes nothing);
it is then written atomically under a name made safe (:func:`received_file_name`) in the node's
own folder, and loaded like any hot reload. The file of the last model loaded this way stays: a
latched message delivered again after a restart is recognised by it (:meth:`ReceivedModels.redelivered`).
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

from lifelong_learning.core.files import UnsafePathError, atomic_write_bytes, check_replaceable, file_digest
from lifelong_learning.serving.report import CHECKSUM_MISMATCH, RELOAD_FAILED, TOO_LARGE

#: the default of ``max_model_bytes``: the largest model file a learner takes from ``model_data_topic``
DEFAULT_MAX_RECEIVED_MODEL_BYTES = 512 * 1024**2

_RECEIVED_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def received_file_name(name: str, sha256: str) -> str:
    """The file name a model received as bytes is stored under: the last component of the sender's
    ``name``, characters other than ``[A-Za-z0-9._-]`` replaced by ``_``, leading dots removed (no
    hidden file, no ``..``), at most 100 characters; ``model-<sha256 prefix>.model`` when nothing is
    left. It never names anything but a file directly in the folder it is joined to."""
    base = _RECEIVED_NAME_UNSAFE.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1])[:100].lstrip(".")
    return base or f"model-{sha256[:16]}.model"


class ReceivedModelRefusedError(Exception):
    """A received model not taken; nothing changed.

    ``reason``: the rejection to count; ``detail``: its log text; ``outcome``: what the node's
    diagnostics say about the last model received; ``digest``: its SHA-256 ('' if not computed);
    ``warn``: the rejection is logged as a warning when counted (bad input from the sender), else
    (False) it is a failure of this node's (it could not be stored), logged as an error.
    """

    def __init__(self, reason: str, detail: str, outcome: str, digest: str = "", warn: bool = True) -> None:
        super().__init__(detail)
        self.reason, self.detail, self.outcome, self.digest = reason, detail, outcome, digest
        self.warn = warn


class ReceivedModels:
    """The folder the models received as bytes are stored in, and what was received last."""

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = int(max_bytes)
        self.loaded = 0  # received, verified and loaded
        self.last = "none"  # the last one received and its outcome, for diagnostics

    def check_size(self, size: int, what: str) -> None:
        """Refuse a model of ``size`` bytes over :attr:`max_bytes` (before anything holds its bytes).

        Raises:
            ReceivedModelRefusedError: too large (``"model too large"``).
        """
        if size > self.max_bytes:
            raise ReceivedModelRefusedError(
                TOO_LARGE,
                f"{what}: {size} bytes, max_model_bytes is {self.max_bytes}; model kept",
                f"refused: {size} bytes, over max_model_bytes ({self.max_bytes})",
            )

    def verify(self, name: str, data: bytes | memoryview, sha256: str, what: str) -> str:
        """The SHA-256 of ``data`` when it may be taken: within :attr:`max_bytes`, the stated digest.

        Raises:
            ReceivedModelRefusedError: too large (``"model too large"``) or damaged
                (``"model checksum mismatch"``).
        """
        self.check_size(len(data), what)
        digest = hashlib.sha256(data).hexdigest()
        if digest != sha256.strip().lower():
            raise ReceivedModelRefusedError(
                CHECKSUM_MISMATCH,
                f"{what}: the SHA-256 of its {len(data)} bytes is {digest}, the message says "
                f"{sha256[:80]!r} (damaged or incomplete); the serving model is unchanged",
                "refused: model checksum mismatch",
                digest,
            )
        return digest

    def path_for(self, name: str, digest: str) -> Path:
        """Where the model the sender calls ``name`` is stored."""
        return self.folder / received_file_name(name, digest)

    def store(self, path: Path, data: bytes | memoryview, digest: str, what: str) -> None:
        """Write ``data`` atomically at ``path`` (never through a symlink or over a non-file).

        Raises:
            ReceivedModelRefusedError: it cannot be stored (``"model reload failed"``).
        """
        try:
            check_replaceable(path)
            atomic_write_bytes(path, data)
        except (OSError, UnsafePathError) as exc:
            raise ReceivedModelRefusedError(
                RELOAD_FAILED,
                f"{what} could not be stored as {path}, previous model kept: {exc}",
                f"refused: cannot be stored ({exc})",
                digest,
                warn=False,
            ) from exc

    def redelivered(self, path: Path, digest: str, restored_mtime_ns: int | None) -> bool:
        """Whether these bytes are a latched re-delivery (after a restart or a new configure) of the
        model received last, which the restored checkpoint already holds: ``path`` holds exactly
        them and the checkpoint (restored at ``restored_mtime_ns``) was written after it. Without a
        restored checkpoint the node starts afresh, and loads the model again."""
        try:
            if restored_mtime_ns is None or path.is_symlink() or not path.is_file():
                return False
            if path.stat().st_mtime_ns > restored_mtime_ns:
                return False
        except OSError:
            return False
        return file_digest(path, self.max_bytes) == digest

    def record(self, name: str, digest: str, outcome: str) -> None:
        """Remember the last model received and its outcome, for diagnostics."""
        sha = f" (sha256 {digest[:12]})" if digest else ""
        self.last = f"{name!r}{sha} at {time.strftime('%Y-%m-%d %H:%M:%S')}: {outcome}"

    def remove_all_but(self, keep: Path) -> None:
        """Remove the files of models received before ``keep`` (the previous models keep what served).

        Raises:
            OSError: the folder could not be read (what could be removed is removed).
        """
        for other in self.folder.iterdir():
            if (
                other != keep
                and not other.name.startswith(".")
                and not other.is_symlink()
                and other.is_file()
            ):
                other.unlink(missing_ok=True)
