"""The serving core of a learner node: the model that answers, and every way it is replaced.

A robot's learner keeps answering while its model changes under it: it learns online, a tuner
sends a better model, an operator rolls back a bad one. :class:`ServingCore` holds the serving
model under one lock (a message sees the old model or the new one, never half of each), builds a
replacement outside the lock (the old model answers meanwhile), and keeps what it replaces so that
a rollback can bring it back. It imports no ROS: the node (:mod:`lifelong_learning.nodes.learner`)
wires parameters, services and topics to it. The design: ``docs/serving.md``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lifelong_learning.core.files import (
    UnsafePathError,
    aside_path,
    open_regular,
    remove_stale_temporaries,
    stream_digest,
)
from lifelong_learning.core.model_file import (
    MAX_MODEL_BYTES,
    ModelFileError,
    load_model_file,
    read_model_kind,
    save_model_file,
)
from lifelong_learning.core.persistence import PersistentModel
from lifelong_learning.serving.checkpoints import Checkpoints
from lifelong_learning.serving.history import ModelHistory
from lifelong_learning.serving.paths import ModelDirectory
from lifelong_learning.serving.received import (
    DEFAULT_MAX_RECEIVED_MODEL_BYTES,
    ReceivedModelRefusedError,
    ReceivedModels,
)
from lifelong_learning.serving.report import (
    PATH_REFUSED,
    RELOAD_FAILED,
    LogReporter,
    Outcome,
    RefusedError,
    Reporter,
)

#: temporary files in the model directory younger than this may belong to a writer in another
#: process (the tuner) and are left alone at start
STALE_TEMPORARY_AGE_S = 60.0

#: loads a model file into the node: ``(path, SHA-256 of its bytes or None) -> Outcome`` (a node
#: may load differently than :meth:`ServingCore.reload`, e.g. before its first model)
Loader = Callable[[Path, str | None], Outcome]


class ServingCore:
    """The serving model of a learner, its replacements, history, checkpoints and files.

    Args:
        model_class: the learner served; its ``kind`` is what is loaded, its files the checkpoints.
        model_directory: the folder request paths are confined to (:class:`ModelDirectory`); the
            history is in ``previous/<own>/`` under it, received models in ``received/<own>/``.
        own: the node's own sub-folder (its fully qualified name: two robots do not collide).
        keep_previous: how many replaced models :attr:`history` keeps (0: none, no rollback).
        checkpoint_path: the checkpoint file (None: no checkpoints); ``checkpoint_name`` the path
            as the operator wrote it, for messages.
        max_received_bytes: the largest model taken as bytes.
        allow_outside: paths outside ``model_directory`` are allowed.
        check: raises ValueError when a model (of the right kind) does not fit the node.
        on_swap: called with the new model under :attr:`lock` after every swap.
        report: where log lines and counted rejections go (default: :class:`LogReporter`).

    Every use of :attr:`model` holds :attr:`lock` (re-entrant) for the whole of one message's
    predict/update. One replacement runs at a time (reload, reset, rollback); its lock is taken
    before :attr:`lock`, and a checkpoint's before :attr:`lock`. Models announced (by the node's
    executor) and received (by the node's model receiver, on a thread of its own) may arrive at
    once: whether one is the serving model already and its load are one step under that lock.
    """

    def __init__(
        self,
        model_class: type[PersistentModel],
        *,
        model_directory: Path,
        own: Path,
        keep_previous: int,
        checkpoint_path: Path | None = None,
        checkpoint_name: str = "",
        max_received_bytes: int = DEFAULT_MAX_RECEIVED_MODEL_BYTES,
        allow_outside: bool = False,
        check: Callable[[Any], None] | None = None,
        on_swap: Callable[[Any], None] | None = None,
        catch_up: Callable[[Any, Any], Any] | None = None,
        report: Reporter | None = None,
    ) -> None:
        self.model_class = model_class
        self.kind = model_class.kind
        self.report: Reporter = report if report is not None else LogReporter()
        self.check = check if check is not None else (lambda model: None)
        self.on_swap = on_swap
        # a model read from a file, brought up to what the serving model took back since it was made
        # (learners/unlearning.py's caught_up), under the lock just before it replaces it
        self.catch_up = catch_up
        self.lock = threading.RLock()
        self.model: Any = None
        self.version = 0  # bumped on every swap
        self.updates_since_checkpoint = 0
        # samples the serving model learned here (online, or in the node's own checkpoint): what no
        # other file holds; the history pins the model that learned the most (ModelHistory.pinned)
        self.learned = 0
        # SHA-256 of the file the serving model was loaded from: the same model announced again, as a
        # path or as bytes (the tuner sends both), is not loaded twice
        self.loaded_file: str | None = None
        self.last_reload = "never"
        self.last_rollback = "never"
        self.ignored_model_files = 0  # announced or received files of another kind (for another node)
        self.directory = ModelDirectory(model_directory, self.kind, allow_outside)
        self.history = ModelHistory(model_directory / "previous" / own, keep_previous)
        self.received = ReceivedModels(model_directory / "received" / own, max_received_bytes)
        self.checkpoints = Checkpoints(checkpoint_path, self.report, checkpoint_name)
        self._replace_lock = threading.RLock()
        #: why no model may replace the serving one now ("": any may): set by :meth:`close` (the node's
        #: cleanup and shutdown) before what could still deliver a model is stopped
        self.closed = ""

    # ---------------------------------------------------------------- the serving model
    def close(self, why: str) -> None:
        """No model replaces the serving one any more (a reload, a promotion, a rollback, a reset, an
        edit, a first model read from a file are refused with ``why``) until :meth:`open`; waits for
        a replacement under way to end."""
        with self._replace_lock:
            self.closed = why

    def open(self) -> None:
        """Models may replace the serving one (configure)."""
        with self._replace_lock:
            self.closed = ""

    @contextmanager
    def replacing(self) -> Iterator[str]:
        """Hold off :meth:`close` while the caller replaces the serving model in steps of its own;
        yields why it may not ("" when it may)."""
        with self._replace_lock:
            yield self.closed

    def _check_open(self) -> None:
        """ValueError when closed (:meth:`close`; ``_replace_lock`` held)."""
        if self.closed:
            raise ValueError(self.closed)

    def read(self, path: str | os.PathLike[str]) -> Any:
        """Read, build and check the model in ``path`` (does not touch the serving model).

        Raises:
            ModelFileError / ValueError / OSError: unreadable, not a regular file (UnsafePathError),
                another kind, or unfit (``check``).
        """
        return self.read_with_digest(path)[0]

    def read_with_digest(self, path: str | os.PathLike[str], digest: str | None = None) -> tuple[Any, str]:
        """:meth:`read` the model in ``path``, and the SHA-256 of the very bytes it was built from
        (``digest``, when the caller knows it: not hashed again).

        Only a regular file of at most :data:`MAX_MODEL_BYTES` is opened
        (:func:`~lifelong_learning.core.files.open_regular`): a FIFO or a device that a request names
        is refused at once, never waited on, and what is hashed and loaded is one open file.

        Raises:
            UnsafePathError: not a regular file, or too large.
            ModelFileError / ValueError / OSError: unreadable, another kind, or unfit (``check``).
        """
        path = Path(path)
        try:
            with open_regular(path, MAX_MODEL_BYTES) as f:
                key = digest or stream_digest(f, MAX_MODEL_BYTES)
                f.seek(0)
                model = self.model_class.from_model_file(load_model_file(path, kind=self.kind, opened=f))
        except FileNotFoundError as exc:
            raise ModelFileError(f"{path}: no such model file") from exc
        self.check(model)
        return model, key

    def _build(self, path: Path) -> Any:
        return self.model_class.from_model_file(load_model_file(path, kind=self.kind))

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the serving model to ``path``: snapshot under the lock, atomic write outside it."""
        with self.lock:
            snapshot = self.model.to_model_file()
        save_model_file(path, snapshot)

    def swap(self, model: Any, loaded_file: str | None = None, learned: int = 0) -> None:
        """Atomically replace the serving model (the checkpoint then differs from it).

        ``loaded_file``: the SHA-256 of the file ``model`` was read from, if any; ``learned``: the
        samples ``model`` learned here before (a rolled-back model's), 0 for one read from a file.
        """
        with self.lock:
            self.model = model
            self.version += 1
            self.updates_since_checkpoint += 1
            self.loaded_file = loaded_file
            self.learned = learned
            if self.on_swap is not None:
                self.on_swap(model)

    def swap_loaded(self, model: Any, path: str | os.PathLike[str], digest: str | None) -> None:
        """:meth:`swap` in ``model``, read from ``path`` (whose bytes' SHA-256 is ``digest``, None if
        unknown: :meth:`read_with_digest`), keeping nothing for rollback: a node's first model, when
        the model decides what it serves (a version of its own, a reload in diagnostics).

        Raises:
            ValueError: closed (:meth:`close`); nothing changed.
        """
        with self._replace_lock:
            self._check_open()
            self.swap(model, digest)
        self.reloaded(path)

    def serve_first(self, model: Any) -> None:
        """Serve ``model`` where no model serves yet: built or restored by configure (or, in the
        node's first second, built again for more joints). No replacement: nothing is kept for
        rollback, the version and the changes to checkpoint stay as they are, and it was loaded
        from no file (a model announced or received next is loaded, whatever served before). What
        it holds was learned here (a restored checkpoint is the node's own)."""
        with self.lock:
            self.model = model
            self.loaded_file = None
            self.learned = int(getattr(model, "n_samples", 0))

    def release(self) -> str:
        """Serve no model any more (cleanup, after the final checkpoint), and forget what the core
        knew of it: the file it was loaded from (the same model delivered again after the next
        configure is loaded: another model serves then) and its changes not checkpointed.

        The released model is kept in the history first, as any replaced model (``~/rollback``
        serves it again after the next configure, also without checkpoints); a model that learned
        nothing is not. Returns the note on where it is kept (or why it is not)."""
        with self._replace_lock, self.lock:
            note = ""
            model = self.model
            if model is not None and self.history.keep > 0:
                try:
                    snapshot = model.to_model_file()
                    note = self.history.push(snapshot, "cleanup", model.n_samples, self.learned, 0).note
                except (ModelFileError, OSError) as exc:
                    note = f"; {self._not_kept(exc)}"
                    self.report.error(f"the released model is not kept: {self._not_kept(exc)}")
            self.model = None
            self.loaded_file = None
            self.updates_since_checkpoint = 0
            self.learned = 0
        for path in self.history.prune() if note else ():
            self.report.info(f"removed the previous model {path} (keep_previous_models)")
        return note

    def count_updates(self, n: int = 1) -> None:
        """Count ``n`` samples the serving model learned (once per callback): changes the next
        checkpoint writes, and what the model learned here (:attr:`learned`)."""
        with self.lock:
            self.updates_since_checkpoint += n
            self.learned += n

    def serving(self, digest: str | None) -> bool:
        """Whether the serving model was loaded from a file whose SHA-256 is ``digest``."""
        with self.lock:
            return digest is not None and digest == self.loaded_file

    def replace(
        self,
        model: Any,
        why: str,
        loaded_file: str | None = None,
        before_swap: Callable[[], None] | None = None,
        catch_up: bool = False,
    ) -> str:
        """Serve ``model`` in place of the serving model, which is first kept for rollback.

        Under the lock: with ``catch_up`` (a model read from a file: a reload, a promotion), the
        core's ``catch_up(model, serving)`` gives the model that is swapped in (ValueError: it may
        not replace the serving model; nothing changed); the serving model (if any, and unless the
        history keeps none) is written to the history (:meth:`ModelHistory.push`: exactly what
        served, no message in between; not when it learned nothing or is kept already), then
        ``before_swap`` runs and the model is swapped in; then the oldest previous models beyond
        the count are removed (not the pinned one: what the node learned). ``why`` names the
        replacement in the file's name (``reload``, ``reset``).

        Returns:
            A note for the caller's answer: which file keeps the replaced model, or why none does.

        Raises:
            OSError / ModelFileError: the serving model could not be written; nothing changed.
            ValueError: ``catch_up`` refused the model, or closed (:meth:`close`); nothing changed.
        """
        with self._replace_lock:
            self._check_open()
            with self.lock:
                if catch_up and self.catch_up is not None and self.model is not None:
                    model = self.catch_up(model, self.model)
                kept = None
                if self.model is not None and self.history.keep > 0:
                    serving = self.model
                    kept = self.history.push(
                        serving.to_model_file(), why, serving.n_samples, self.learned, model.n_samples
                    )
                if before_swap is not None:
                    before_swap()
                self.swap(model, loaded_file)
            for path in self.history.prune() if kept is not None and kept.path is not None else ():
                self.report.info(f"removed the previous model {path} (keep_previous_models)")
        return "" if kept is None else kept.note

    def _not_kept(self, exc: Exception) -> str:
        return (
            f"the serving model could not be kept for ~/rollback in {self.history.folder} ({exc}); "
            "free space there, or set keep_previous_models to 0 to replace models without keeping them"
        )

    def failed(self, message: str) -> Outcome:
        """A failed load: counted as ``"model reload failed"`` and logged as an error (every one)."""
        self.report.reject(RELOAD_FAILED, message, warn=False)
        self.report.error(message)
        return Outcome(False, message)

    # ---------------------------------------------------------------- replacements
    def reload(
        self, path: str | os.PathLike[str], digest: str | None = None, catch_up: bool = True
    ) -> Outcome:
        """Hot reload: read and build the model in ``path`` outside the lock (the old model keeps
        answering), then swap it in (:meth:`replace`: the replaced model is kept for rollback;
        caught up with the serving model unless ``catch_up`` is False).

        ``digest``: the SHA-256 of the file's bytes, when known (else those read are hashed). A
        path that is not a regular file (a FIFO, a device) is refused before it is opened. On
        failure the old model keeps serving and the failure is :meth:`failed`.
        """
        path = Path(path)
        try:
            model, key = self.read_with_digest(path, digest)
        except UnsafePathError as exc:
            return self.failed(f"model reload from {path} refused, previous model kept: {exc}")
        except (ModelFileError, ValueError, OSError) as exc:
            return self.failed(f"model reload from {path} failed, previous model kept: {exc}")
        try:
            kept = self.replace(model, "reload", key, catch_up=catch_up)
        except (ModelFileError, OSError) as exc:
            return self.failed(
                f"model reload from {path} refused, previous model kept: {self._not_kept(exc)}"
            )
        except ValueError as exc:
            return self.failed(f"model reload from {path} refused, previous model kept: {exc}")
        with self.lock:
            version = self.version
        self.reloaded(path)
        message = f"loaded {path} (model version {version}){kept}"
        self.report.info(message)
        return Outcome(True, message)

    def reloaded(self, path: str | os.PathLike[str]) -> None:
        """Note that the serving model was loaded from ``path`` now (diagnostics: ``last reload``)."""
        self.last_reload = f"{path} at {time.strftime('%Y-%m-%d %H:%M:%S')}"

    def reset(self, build: Callable[[], Any], before_swap: Callable[[], None] | None = None) -> Outcome:
        """Serve a new model from ``build()`` (ValueError: none can be built now); the old one is
        kept for rollback first. ``before_swap`` runs under the lock, in the same step as the swap
        (the node forgets its input streams: no message sees the new state with the old model)."""
        with self._replace_lock, self.lock:
            kept, refused = self._reset(build, before_swap)
        if refused:
            message = f"reset refused, the model is unchanged: {refused}"
            self.report.error(message)
            return Outcome(False, message)
        self.report.info(f"model reset{kept}")
        return Outcome(True, f"model reset{kept}")

    def _reset(self, build: Callable[[], Any], before_swap: Callable[[], None] | None) -> tuple[str, str]:
        """``(note on the kept model, '')`` when reset, ``('', why not)`` when refused."""
        if self.closed:
            return "", self.closed
        try:
            model = build()
        except ValueError as exc:  # e.g. no robot description yet
            return "", f"no new model can be built: {exc}"
        try:
            return self.replace(model, "reset", before_swap=before_swap), ""
        except (ModelFileError, OSError) as exc:
            return "", self._not_kept(exc)

    def edit(
        self,
        change: Callable[[Any], tuple[Any, str]],
        why: str,
        before_swap: Callable[[], None] | None = None,
    ) -> Outcome:
        """Serve an edited copy of the serving model (a class forgotten, a teaching episode undone, a
        class renamed); the serving model is kept for rollback first, as by any replacement.

        ``change(model)`` runs under the lock (nothing is learned meanwhile) and returns the new
        model, a copy (the serving model must stay as it is), and a note for the answer; a ValueError
        from it is a refusal: ``Outcome(False, why)``, nothing changed. ``why`` names the edit in the
        history (``[a-z]+``). What the serving model learned here carries over (:attr:`learned`).
        ``before_swap`` (what the caller keeps about the edit) runs under the lock in the swap's step,
        after the serving model was written to the history (when it is kept): never for an edit
        refused, nor for one whose serving model could not be written.
        """
        with self._replace_lock, self.lock:
            if self.model is None:
                return Outcome(False, "no model serves yet")
            if self.closed:
                return Outcome(False, f"refused, the model is unchanged: {self.closed}")
            learned = self.learned
            try:
                model, note = change(self.model)
            except ValueError as exc:
                return Outcome(False, f"{exc}; the model is unchanged")
            try:
                kept = self.replace(model, why, before_swap=before_swap)
            except (ModelFileError, OSError) as exc:
                return Outcome(False, f"refused, the model is unchanged: {self._not_kept(exc)}")
            self.learned = learned
        self.report.info(f"{note}{kept}")
        return Outcome(True, f"{note}{kept}")

    def rollback(self) -> Outcome:
        """Serve the most recent previous model again, and take it out of the history.

        The file is read and checked like a hot reload, outside the lock; under it, the serving
        model is written to :attr:`ModelHistory.rolled_back` (``~/load_model`` brings it back; it is
        no rollback target) and the previous one swapped in. Two rollbacks go two steps back.
        Nothing changes when there is nothing to roll back to, when no model serves yet, when the
        file does not fit the node now (left in place), is unreadable (moved aside: the next
        rollback goes one further back), or when the serving model cannot be written.
        """
        with self._replace_lock:
            if self.closed:
                return Outcome(False, f"rollback refused, the serving model is unchanged: {self.closed}")
            try:
                files = self._rollback_files()
                self._swap_back(self._read_previous(files[-1]), self.history.learned_of(files[-1]))
            except RefusedError as exc:
                return Outcome(False, str(exc))
            newest = files[-1]
            try:
                newest.unlink()
            except OSError as exc:  # it would be rolled back to again: say so
                self.report.error(f"could not remove {newest} from the previous models: {exc}")
            with self.lock:
                version = self.version
        left = f"{len(files) - 1} previous model{'s' if len(files) != 2 else ''} left"
        self.last_rollback = f"{time.strftime('%Y-%m-%d %H:%M:%S')}: to {newest.name}"
        message = (
            f"rolled back to {newest} (model version {version}); the model it replaced is saved as "
            f"{self.history.rolled_back} (~/load_model brings it back); {left}"
        )
        self.report.info(message)
        return Outcome(True, message)

    def _rollback_files(self) -> list[Path]:
        """The history, when a rollback can go back to its newest (RefusedError: why not)."""
        files = self.history.files() if self.history.keep > 0 else []
        if not files:
            why = (
                "keep_previous_models is 0, no previous model is kept"
                if self.history.keep == 0
                else f"no previous model in {self.history.folder} (one is kept whenever a hot reload, "
                "a received model or ~/reset replaces the serving model)"
            )
            raise RefusedError(f"nothing to roll back to: {why}; the serving model is unchanged")
        with self.lock:
            if self.model is None:
                raise RefusedError(
                    f"no model serves yet, nothing to roll back from; ~/load_model can load {files[-1]}"
                )
        return files

    def _read_previous(self, path: Path) -> Any:
        """The previous model in ``path``; RefusedError when it is unreadable (moved aside) or unfit."""
        try:
            return self.read(path)
        except ModelFileError as exc:
            aside = aside_path(path, "unreadable")
            try:
                os.replace(path, aside)
                moved = f"moved aside to {aside} (~/rollback again goes one further back)"
            except OSError as move_error:
                moved = f"it could not be moved aside ({move_error})"
            message = (
                f"the most recent previous model is unreadable ({exc}); {moved}; the serving model "
                "is unchanged"
            )
            self.report.error(message)
            raise RefusedError(message) from exc
        except (ValueError, OSError) as exc:
            raise RefusedError(
                f"the most recent previous model {path} does not fit this node now ({exc}); "
                "the serving model is unchanged"
            ) from exc

    def _swap_back(self, model: Any, learned: int) -> None:
        """Save the serving model as the rolled-back one and swap ``model`` (which learned ``learned``
        samples here) in, in one step."""
        try:
            with self.lock:
                save_model_file(self.history.rolled_back, self.model.to_model_file())
                self.swap(model, learned=learned)
        except (ModelFileError, OSError) as exc:
            raise RefusedError(
                f"rollback refused, the serving model is unchanged: it could not be saved ({exc})"
            ) from exc

    # ---------------------------------------------------------------- models announced and received
    def announced(self, text: str, where: str, load: Loader) -> Outcome | None:
        """A model file's path announced on ``where``: confined, checked, then ``load``-ed.

        Refused (``Outcome(False, why)``, counted): an empty path, one outside the model directory,
        the node's own checkpoint (rolling back to it is ``~/load_model``'s job), an unreadable file.
        Ignored (None): a file of another kind (several learners listen to the same topic), the
        serving model's file. Otherwise what ``load`` returns.
        """
        text = text.strip()
        if not text:
            return self.failed(f"empty model path announced on {where}")
        try:
            path = self._announced_path(text)
        except UnsafePathError as exc:
            return self.refuse_path(f"announced model refused: {exc}")
        try:  # one open file, only a regular one (a FIFO or a device is refused at once)
            with open_regular(path, MAX_MODEL_BYTES) as f:
                file_kind = read_model_kind(path, opened=f)
                f.seek(0)
                key = stream_digest(f, MAX_MODEL_BYTES) if file_kind == self.kind else ""
        except FileNotFoundError:
            return self.failed(f"model reload from {path} failed, previous model kept: no such model file")
        except UnsafePathError as exc:
            return self.failed(f"model reload from {path} refused, previous model kept: {exc}")
        except (ModelFileError, OSError) as exc:
            return self.failed(f"model reload from {path} failed, previous model kept: {exc}")
        if file_kind != self.kind:
            self._ignore(
                f"ignored announced model {path}: a {file_kind!r} model, this node loads {self.kind!r}"
            )
            return None
        with self._replace_lock:  # the same model received as bytes meanwhile is loaded once
            if self.serving(key):
                self.report.info(f"announced model {path} is already the serving model")
                return None
            return load(path, key)

    def _announced_path(self, text: str) -> Path:
        path = self.directory.confine(text)
        own = self.checkpoints.path
        if own is not None and path == own.resolve():
            raise UnsafePathError(f"{path} is this node's own checkpoint")
        return path

    def _ignore(self, message: str) -> None:
        self.ignored_model_files += 1
        self.report.info(message)

    def receive(
        self,
        kind: str,
        name: str,
        data: bytes | memoryview | None,
        sha256: str,
        where: str,
        load: Loader,
        size: int | None = None,
    ) -> Outcome | None:
        """A model file received as bytes on ``where``: checked, stored, then ``load``-ed.

        ``data`` is None when the node let the bytes go before the call: ``size`` of them, over
        ``max_model_bytes`` (read from the message's header before anything held its data): it is
        refused (or, of another kind, ignored) by that alone.

        Ignored (None): another kind, the serving model's bytes, or a latched re-delivery that the
        restored checkpoint holds already (:meth:`ReceivedModels.redelivered`). Refused
        (``Outcome(False, why)``, counted, nothing changes): too large, a checksum mismatch, not
        storable, or not loadable (its file is removed). Otherwise what ``load`` returns. The file
        of the model loaded last stays; the older ones are removed.
        """
        what = f"model {name!r} received on {where}"
        if kind != self.kind:
            self._ignore(f"ignored {what}: a {kind!r} model, this node loads {self.kind!r}")
            return None
        try:
            if data is None:
                self.received.check_size(int(size or 0), what)
                raise ValueError(f"{what}: no bytes, yet a size within max_model_bytes ({size})")
            digest = self.received.verify(name, data, sha256, what)
            if self.serving(digest):  # e.g. the tuner's path announcement of the same model came first
                self.report.info(f"{what} is the serving model already: not loaded again")
                return None
            path = self.received.path_for(name, digest)
            if self.received.redelivered(path, digest, self.checkpoints.restored_mtime_ns):
                self.report.info(
                    f"{what} was loaded before ({path}) and the checkpoint restored at start was written "
                    "after it (it holds that model, or what came after it): not loaded again"
                )
                return None
            self.received.store(path, data, digest, what)
        except ReceivedModelRefusedError as exc:
            self.received.record(name, exc.digest, exc.outcome)
            self.report.reject(exc.reason, exc.detail, warn=exc.warn)
            if not exc.warn:
                self.report.error(exc.detail)
            return Outcome(False, exc.detail)
        with self._replace_lock:  # received off the executor: the same model announced meanwhile
            if self.serving(digest):
                self.report.info(f"{what} is the serving model already: not loaded again")
                return None
            return self._load_received(path, name, digest, load)

    def _load_received(self, path: Path, name: str, digest: str, load: Loader) -> Outcome:
        outcome = load(path, digest)
        if not outcome.ok:  # refused: it leaves nothing behind
            path.unlink(missing_ok=True)
            self.received.record(name, digest, f"refused: {outcome.message}")
            return outcome
        self.received.loaded += 1
        self.received.record(name, digest, "loaded")
        try:
            self.received.remove_all_but(path)
        except OSError as exc:
            self.report.warning(f"could not remove older received models in {self.received.folder}: {exc}")
        return outcome

    def _reject(self, reason: str, detail: str) -> Outcome:
        self.report.reject(reason, detail)
        return Outcome(False, detail)

    # ---------------------------------------------------------------- files and checkpoints
    def refuse_path(self, message: str) -> Outcome:
        """Count the refusal of a path as ``"path refused"``."""
        return self._reject(PATH_REFUSED, message)

    def request_path(self, path: str, for_writing: bool) -> Path:
        """The path a service request names ('' = the checkpoint path), confined (:class:`ModelDirectory`).

        Raises:
            RefusedError: no path and no checkpoint, or the path is refused (counted).
        """
        if not path:
            if self.checkpoints.path is None:
                raise RefusedError("no path given and no checkpoint_path configured")
            return self.checkpoints.path
        try:
            return self.directory.confine(path, for_writing)
        except UnsafePathError as exc:
            raise RefusedError(self.refuse_path(f"path refused: {exc}").message) from exc

    def prepare_files(self) -> None:
        """Check the checkpoint path and remove the temporaries killed writes left (logged).

        Raises:
            UnsafePathError: ``checkpoint_path`` is a directory, a symlink or a special file.
        """
        removed = self.checkpoints.check_path()
        for folder in (self.directory.folder, self.history.folder, self.received.folder):
            removed += remove_stale_temporaries(folder, min_age_s=STALE_TEMPORARY_AGE_S)
        for path in removed:
            self.report.warning(f"removed {path}, left by a write that was killed")

    def restore(
        self, conflicts: Callable[[Any], list[str]] = lambda model: [], wanted: bool = True
    ) -> Any | None:
        """The checkpoint's model, checked, or None (see :meth:`Checkpoints.restore`)."""
        return self.checkpoints.restore(self._build, self.check, conflicts, wanted)

    def checkpoint(self) -> bool:
        """Write the checkpoint if anything changed since the last one (or the last attempt failed).

        A failed write leaves the model marked as changed: the next attempt writes it. Returns True
        when written. One write at a time: a call while another writes waits for it.
        """
        checkpoints = self.checkpoints
        if checkpoints.path is None:
            return False
        with checkpoints.lock:
            with self.lock:
                if self.model is None:  # not configured (or the model is still to come)
                    return False
                pending = self.updates_since_checkpoint
                if pending == 0 and not checkpoints.due():
                    return False
                snapshot = self.model.to_model_file()
            if not checkpoints.write(snapshot):
                return False
            with self.lock:  # what was learned while writing stays pending
                self.updates_since_checkpoint = max(0, self.updates_since_checkpoint - pending)
            return True
