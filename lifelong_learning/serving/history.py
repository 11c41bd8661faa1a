"""The models a learner served before: the files that ``~/rollback`` goes back through.

Every replacement of the serving model first writes the model it replaces here, so that a bad
hot reload or a ``~/reset`` by mistake can be undone with exactly what served. The folder holds
at most ``keep`` of them, named so that their order survives a restart.

What is kept must not be flushed by what is worthless (thirty ``~/reset`` calls, or forged
announcements, would otherwise leave only empty models to roll back to). The rule
(:meth:`ModelHistory.push`, :meth:`ModelHistory.prune`; ``docs/serving.md``):

- a model that learned nothing (``n_samples`` 0) is not kept when the model replacing it learned
  nothing either (a ``~/reset`` of a reset model, an empty model announced): rolling back would
  bring back nothing; replaced by a trained one (a tuned model over the rigid-body prior) it is
  kept, but only one such: keeping it removes the other untrained ones (``~/reset`` builds them);
- a model identical to a kept one (the same kind, scalars and arrays) is not kept twice: the kept
  file becomes the newest instead;
- the model that learned the most *here* (online, or restored from the node's own checkpoint: what
  no other file holds) is pinned: :meth:`prune` keeps it beyond ``keep``, so that at most
  ``keep + 1`` files are kept and the last rollback reaches it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lifelong_learning.core.model_file import ModelFile, save_model_file


def content_digest(snapshot: ModelFile) -> str:
    """A SHA-256 (hex) of what a model file holds (its kind, version, scalars and arrays, not the
    bytes of a file: two saves of one model differ in their zip's timestamps)."""
    digest = hashlib.sha256()
    head = {"kind": snapshot.kind, "version": snapshot.version, "meta": snapshot.meta}
    digest.update(json.dumps(head, sort_keys=True, default=str).encode())
    for name in sorted(snapshot.arrays):
        array = np.ascontiguousarray(snapshot.arrays[name])
        digest.update(f"\0{name}\0{array.dtype.str}\0{array.shape}\0".encode())
        digest.update(array.reshape(-1).view(np.uint8))  # the data, not copied
    return digest.hexdigest()


@dataclass(frozen=True)
class Previous:
    """One previous model's file, as its name describes it."""

    path: Path
    seq: int
    digest: str | None  # the first 16 hex digits of its content_digest (None: an older name)
    learned: int  # samples it learned here (online, or from the node's own checkpoint)
    untrained: bool  # it learned nothing at all (n_samples 0)


@dataclass(frozen=True)
class Kept:
    """What :meth:`ModelHistory.push` did: the file that keeps the model (None: not kept), and why."""

    path: Path | None
    note: str


class ModelHistory:
    """The models a learner node served before, newest last: files in one folder, at most ``keep``
    (and the pinned learned model beyond them).

    Each is a model file written atomically, named
    ``<seq>.before-<why>.<YYYYmmdd-HHMMSS>.<digest>[.learned-<n>|.untrained].model``: ``seq`` (one
    more than the newest's) orders them, ``why`` says what replaced the model (``reload``: a hot
    reload, a received model or ``~/load_model``; ``reset``), ``digest`` identifies its content,
    ``n`` is how many samples it learned here, ``untrained`` that it learned nothing. :meth:`push`
    adds one, :meth:`prune` removes the oldest beyond ``keep`` but the pinned one; ``~/rollback``
    loads the newest and removes it. The model a rollback replaces is written to
    :attr:`rolled_back` (one file, the last rollback's), which is not a rollback target:
    ``~/load_model`` brings it back. Files of other names in the folder are never touched (names
    of earlier versions, without the digest and the tail, are listed). Not thread-safe: the node
    serializes its replacements.
    """

    ROLLED_BACK_NAME = "rolled-back.model"
    DIGEST_CHARS = 16
    _WHY = re.compile(r"[a-z]+")
    _NAME = re.compile(
        rf"(\d{{6,}})\.before-({_WHY.pattern})\.(\d{{8}}-\d{{6}})"
        rf"(?:\.([0-9a-f]{{{DIGEST_CHARS}}}))?(?:\.learned-(\d+)|\.(untrained))?\.model"
    )

    def __init__(self, folder: Path, keep: int) -> None:
        self.folder = folder
        self.keep = int(keep)

    @property
    def rolled_back(self) -> Path:
        """Where the model replaced by the last rollback is kept."""
        return self.folder / self.ROLLED_BACK_NAME

    def entries(self) -> list[Previous]:
        """The previous models (regular files named as :meth:`push` names them), oldest first."""
        try:
            entries = list(os.scandir(self.folder))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found: list[Previous] = []
        for entry in entries:
            match = self._NAME.fullmatch(entry.name)
            if match is not None and entry.is_file(follow_symlinks=False):
                seq, _, _, digest, learned, untrained = match.groups()
                found.append(Previous(Path(entry.path), int(seq), digest, int(learned or 0), bool(untrained)))
        return sorted(found, key=lambda e: e.seq)

    def files(self) -> list[Path]:
        """The previous models' paths, oldest first."""
        return [e.path for e in self.entries()]

    def learned_of(self, path: Path) -> int:
        """The samples the previous model in ``path`` learned here (0 if its name does not say)."""
        match = self._NAME.fullmatch(path.name)
        return int(match.group(5) or 0) if match is not None else 0

    def pinned(self, entries: list[Previous] | None = None) -> Previous | None:
        """The previous model that learned the most here (the newest of equals); None if none did."""
        entries = self.entries() if entries is None else entries
        learned = [e for e in entries if e.learned > 0]
        return max(learned, key=lambda e: (e.learned, e.seq)) if learned else None

    def push(
        self, snapshot: ModelFile, why: str, samples: int, learned: int = 0, successor_samples: int = 1
    ) -> Kept:
        """Keep ``snapshot`` (a model of ``samples`` samples in all, ``learned`` of them learned here,
        replaced by a model of ``successor_samples``) as the newest previous model, unless the rule
        of the module docstring says otherwise.

        Raises:
            ValueError: ``why`` is not lowercase letters (``[a-z]+``): :meth:`files` would not
                list the file, so that no rollback would find it and no prune remove it.
            OSError / ModelFileError: not written (disk full, no permission); nothing changed.
        """
        if not self._WHY.fullmatch(why):
            raise ValueError(f"why must be lowercase letters ([a-z]+), got {why!r}")
        untrained = samples <= 0
        if untrained and successor_samples <= 0:
            return Kept(None, "; the model it replaced learned nothing, as the new one: not kept")
        digest = content_digest(snapshot)[: self.DIGEST_CHARS]
        entries = self.entries()
        seq = entries[-1].seq + 1 if entries else 1
        same = next((e for e in entries if e.digest == digest), None)
        learned = max(learned, same.learned if same is not None else 0)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        tail = ".untrained" if untrained else f".learned-{learned}" if learned > 0 else ""
        path = self.folder / f"{seq:06d}.before-{why}.{stamp}.{digest}{tail}.model"
        note = f"; the model it replaced is kept for ~/rollback as {path}"
        if same is not None:  # kept already: that file becomes the newest, not a second copy
            os.replace(same.path, path)
            return Kept(path, f"{note} (it was kept already: moved, not copied)")
        save_model_file(path, snapshot)
        if untrained:  # one untrained model is enough: ~/reset builds the others
            for entry in entries:
                if entry.untrained:
                    entry.path.unlink(missing_ok=True)
        return Kept(path, note)

    def prune(self) -> list[Path]:
        """Remove the oldest previous models beyond ``keep``, but never the pinned one; the paths
        removed."""
        entries = self.entries()
        pinned = self.pinned(entries)
        removed = [e.path for e in entries[: max(0, len(entries) - self.keep)] if e != pinned]
        for path in removed:
            path.unlink(missing_ok=True)
        return removed
