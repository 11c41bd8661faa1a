"""The folder a learner's model files are confined to.

The paths that ``~/save_model``, ``~/load_model`` and model announcements name come from other
programs: a path that resolves outside the node's ``model_directory`` (``..``, an absolute path, a
symlink) is refused, and a save never replaces what is not a model file of the node's kind, so
that a request cannot make the node read or overwrite arbitrary files.
"""

from __future__ import annotations

import os
from pathlib import Path

from lifelong_learning.core.files import check_replaceable, confined_path
from lifelong_learning.core.model_file import is_model_file


class ModelDirectory:
    """``folder``, the directory paths are confined to (unless ``allow_outside``), for models of ``kind``."""

    def __init__(self, folder: Path, kind: str, allow_outside: bool = False) -> None:
        self.folder = folder
        self.kind = kind
        self.allow_outside = bool(allow_outside)

    def confine(self, path: str | os.PathLike[str], for_writing: bool = False) -> Path:
        """``path`` as a request names it, checked.

        Relative paths are taken under :attr:`folder`; one that resolves outside it is refused
        unless :attr:`allow_outside`. For writing, the path must also be missing or a model file
        of :attr:`kind` (not a symlink, directory, special or other file, nor another learner's
        model, e.g. its checkpoint).

        Raises:
            UnsafePathError: the path is refused.
        """
        resolved = confined_path(path, self.folder, self.allow_outside)
        if for_writing:
            named = self.folder / Path(path).expanduser()  # as named: a symlink is refused
            check_replaceable(named, self._is_ours)
            check_replaceable(resolved, self._is_ours)
        return resolved

    def _is_ours(self, path: Path) -> bool:
        return is_model_file(path, self.kind)
