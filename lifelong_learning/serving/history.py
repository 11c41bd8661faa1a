"""The models a learner served before: the files that ``~/rollback`` goes back through.

Every replacement of the serving model first writes the model it replaces here, so that a bad
hot reload or a ``~/reset`` by mistake can be undone with exactly what served. The folder holds
at most ``keep`` of them, named so that their order survives a restart.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from lifelong_learning.core.model_file import ModelFile, save_model_file


class ModelHistory:
    """The models a learner node served before, newest last: files in one folder, at most ``keep``.

    Each is a model file written atomically, named ``<seq>.before-<why>.<YYYYmmdd-HHMMSS>.model``:
    ``seq`` (one more than the newest's) orders them, ``why`` says what replaced the model
    (``reload``: a hot reload, a received model or ``~/load_model``; ``reset``). :meth:`push`
    adds one, :meth:`prune` removes the oldest beyond ``keep``; ``~/rollback`` loads the newest and
    removes it. The model a rollback replaces is written to :attr:`rolled_back` (one file, the last
    rollback's), which is not a rollback target: ``~/load_model`` brings it back. Files of other
    names in the folder are never touched. Not thread-safe: the node serializes its replacements.
    """

    ROLLED_BACK_NAME = "rolled-back.model"
    _WHY = re.compile(r"[a-z]+")
    _NAME = re.compile(rf"(\d{{6,}})\.before-({_WHY.pattern})\.(\d{{8}}-\d{{6}})\.model")

    def __init__(self, folder: Path, keep: int) -> None:
        self.folder = folder
        self.keep = int(keep)

    @property
    def rolled_back(self) -> Path:
        """Where the model replaced by the last rollback is kept."""
        return self.folder / self.ROLLED_BACK_NAME

    def files(self) -> list[Path]:
        """The previous models (regular files named as :meth:`push` names them), oldest first."""
        try:
            entries = list(os.scandir(self.folder))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found: list[tuple[int, Path]] = []
        for entry in entries:
            match = self._NAME.fullmatch(entry.name)
            if match is not None and entry.is_file(follow_symlinks=False):
                found.append((int(match.group(1)), Path(entry.path)))
        return [path for _, path in sorted(found)]

    def push(self, snapshot: ModelFile, why: str) -> Path:
        """Write ``snapshot`` as the newest previous model (atomically); its path.

        Raises:
            ValueError: ``why`` is not lowercase letters (``[a-z]+``): :meth:`files` would not
                list the file, so that no rollback would find it and no prune remove it.
            OSError / ModelFileError: not written (disk full, no permission); nothing changed.
        """
        if not self._WHY.fullmatch(why):
            raise ValueError(f"why must be lowercase letters ([a-z]+), got {why!r}")
        files = self.files()
        last = self._NAME.fullmatch(files[-1].name) if files else None
        seq = int(last.group(1)) + 1 if last is not None else 1
        path = self.folder / f"{seq:06d}.before-{why}.{time.strftime('%Y%m%d-%H%M%S')}.model"
        save_model_file(path, snapshot)
        return path

    def prune(self) -> list[Path]:
        """Remove the oldest previous models beyond ``keep``; the paths removed."""
        files = self.files()
        removed = files[: max(0, len(files) - self.keep)]
        for path in removed:
            path.unlink(missing_ok=True)
        return removed
