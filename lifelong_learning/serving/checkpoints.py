"""The checkpoint of a learner: the serving model written atomically, retried, restored at start.

A robot's learner must not lose what it learned to a crash, nor refuse to start over a damaged
file: a checkpoint is written atomically (a killed write leaves the last good one), a failed write
(disk full) is retried by the next one, and at start a checkpoint that cannot be read or does not
fit the node is moved aside with the reason in its name, logged, and a fresh model serves.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lifelong_learning.core.files import (
    UnsafePathError,
    aside_path,
    check_replaceable,
    remove_stale_temporaries,
)
from lifelong_learning.core.model_file import ModelFile, ModelFileError, save_model_file
from lifelong_learning.serving.report import Reporter


class Checkpoints:
    """The checkpoint file at :attr:`path` (None: checkpoints disabled) and the state of its writes.

    ``named``: the path as the operator wrote it (``checkpoint_path``), for error messages.
    One write at a time: callers hold :attr:`lock` around the snapshot and :meth:`write`.
    """

    def __init__(self, path: Path | None, report: Reporter, named: str = "") -> None:
        self.path = path
        self.named = named or (str(path) if path is not None else "")
        self.report = report
        self.lock = threading.Lock()
        #: the failure of the last write (with its time); None when it succeeded
        self.error: str | None = None
        #: when the last checkpoint was written, or where the model was restored from
        self.last = "never"
        #: size of the last checkpoint written or restored [bytes]
        self.nbytes: int | None = None
        #: how the restored checkpoint's hyperparameters differ from the node's parameters
        self.conflicts: list[str] = []
        #: modification time of the checkpoint restored at the last start (None: none restored)
        self.restored_mtime_ns: int | None = None

    def check_path(self) -> list[Path]:
        """Refuse a checkpoint path that is not a (possible) regular file; remove the temporaries
        that killed writes of it left. Returns the files removed.

        Raises:
            UnsafePathError: the path is a directory, a symlink or a special file.
        """
        if self.path is None:
            return []
        try:
            check_replaceable(self.path)
        except UnsafePathError as exc:
            raise UnsafePathError(f"checkpoint_path {self.named!r}: {exc}") from exc
        return remove_stale_temporaries(self.path.parent, self.path.name)

    def due(self) -> bool:
        """Whether a checkpoint is to be written even with nothing new: the last write failed, or
        there is none on disk."""
        return self.error is not None or (self.path is not None and not self.path.exists())

    def write(self, snapshot: ModelFile) -> bool:
        """Write ``snapshot`` atomically to :attr:`path`; True when written.

        A failure (disk full, no permission) is kept in :attr:`error` and logged as an error (the
        caller keeps the model marked as changed, so that the next attempt writes it); the first
        success after failures is logged too.
        """
        assert self.path is not None
        try:
            save_model_file(self.path, snapshot)
        except (OSError, ModelFileError) as exc:
            first = self.error is None
            self.error = f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {exc}"
            retry = "will retry" if first else "still failing, will retry"
            self.report.error(f"checkpoint to {self.path} failed ({retry}): {exc}")
            return False
        if self.error is not None:
            self.report.info(f"checkpoint to {self.path} written again")
        self.error = None
        self.last = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            self.nbytes = self.path.stat().st_size
        except OSError:
            self.nbytes = None
        return True

    def restore(
        self,
        read: Callable[[Path], Any],
        check: Callable[[Any], None],
        conflicts: Callable[[Any], list[str]],
        wanted: bool = True,
    ) -> Any | None:
        """The checkpoint's model, or None: none, not ``wanted`` (``restore_on_start`` false), or moved aside.

        ``read`` builds the model from the file (ModelFileError/ValueError: unreadable, moved aside
        as ``.unreadable-<time>``), ``check`` raises ValueError when it does not fit the node (moved
        aside as ``.incompatible-<time>``), ``conflicts`` lists how its hyperparameters differ from
        the parameters: the checkpoint wins (it holds what was learned), and each is logged.
        """
        path = self.path
        self.restored_mtime_ns = None
        if path is None or not wanted or not path.exists():
            return None
        try:
            mtime_ns = path.stat().st_mtime_ns
            model = read(path)
        except (ModelFileError, ValueError) as exc:
            self._move_aside("unreadable", exc)
            return None
        try:
            check(model)
        except ValueError as exc:
            self._move_aside("incompatible", exc)
            return None
        self.conflicts = conflicts(model)
        for conflict in self.conflicts:
            self.report.warning(
                f"checkpoint {path} conflicts with the parameters, the checkpoint wins: {conflict}"
            )
        self.nbytes = path.stat().st_size
        self.restored_mtime_ns = mtime_ns
        self.last = f"restored from {path}"
        self.report.info(f"restored model from checkpoint {path}")
        return model

    def _move_aside(self, why: str, exc: Exception) -> None:
        assert self.path is not None
        aside = aside_path(self.path, why)
        os.replace(self.path, aside)
        self.report.error(f"checkpoint {self.path} is {why} ({exc}); moved aside to {aside}")
