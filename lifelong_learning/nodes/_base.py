"""What every node of this package shares (imports rclpy: only for modules that run nodes).

- :class:`ParamSpec` / :meth:`NodeBase.declare_specs`: parameters declared with descriptions;
  the defaults in code equal those in ``config/<node>.yaml`` (a test checks it).
- :class:`RejectionCounter`: bad input is counted per reason and warned about at most once
  per ``warn_period_s`` per reason (with the count since the last warning), never raised.
- :class:`NodeStats` + diagnostics: input rates, update latency, rejected and dropped
  messages, published as ``diagnostic_msgs/DiagnosticArray`` on ``/diagnostics``; the level is
  the worst of :meth:`NodeBase.diagnostic_problems` (WARN while rejections or drops rise; ERROR
  while a learner's checkpoints fail).
- :class:`LearnerNode`: a node that holds a learned model: a lock-protected model with atomic
  swap (hot reload: a model file that fails to load leaves the old model serving), the
  ``~/save_model``, ``~/load_model`` and ``~/reset`` services, hot reload of the model files
  announced on ``model_topic`` (e.g. by the ``nystrom_tuner`` node), a checkpoint written
  atomically every ``checkpoint_interval_s`` and on shutdown (a failed one is retried), restored
  on start; the paths that requests and announcements name are confined to ``model_directory``.
- :func:`run_node`: the ``main()`` of every node executable (Ctrl-C / SIGTERM → final checkpoint).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String
from std_srvs.srv import Trigger

from lifelong_learning.core.files import (
    UnsafePathError,
    check_replaceable,
    confined_path,
    remove_stale_temporaries,
)
from lifelong_learning.core.losses import SequenceLossCounter
from lifelong_learning.core.model_file import (
    ModelFileError,
    is_model_file,
    load_model_file,
    read_model_kind,
    save_model_file,
)
from lifelong_learning.core.persistence import PersistentModel
from lifelong_learning.srv import LoadModel, SaveModel

#: where model files go unless a node is told otherwise (the nystrom_tuner writes there too)
DEFAULT_MODEL_DIRECTORY = "~/.ros/lifelong_learning"
#: temporary files in the model directory younger than this may belong to a writer in another
#: process (the tuner) and are left alone at start
STALE_TEMPORARY_AGE_S = 60.0


@dataclass(frozen=True)
class ParamSpec:
    """One declared ROS parameter: name, default (its type is the parameter's), description."""

    name: str
    default: Any
    description: str
    read_only: bool = False


class RejectionCounter:
    """Counts rejected inputs per reason; logs a warning at most once per period per reason."""

    def __init__(self, logger: Any, warn_period_s: float = 5.0):
        self._logger = logger
        self._period = float(warn_period_s)
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self._last_warn: dict[str, float] = {}
        self._since_warn: dict[str, int] = {}

    @property
    def total(self) -> int:
        """All rejections so far."""
        return sum(self.snapshot().values())

    def snapshot(self) -> dict[str, int]:
        """A copy of the counts per reason (safe while other threads reject)."""
        with self._lock:
            return dict(self.counts)

    def reject(self, reason: str, detail: str = "", warn: bool = True) -> None:
        """Count one rejection of ``reason``; warn if this reason has not warned recently.

        ``warn=False`` only counts (for callers that log the event themselves).
        """
        now = time.monotonic()
        with self._lock:
            self.counts[reason] = self.counts.get(reason, 0) + 1
            if not warn:
                return
            self._since_warn[reason] = self._since_warn.get(reason, 0) + 1
            if now - self._last_warn.get(reason, -1e18) < self._period:
                return
            n = self._since_warn[reason]
            self._since_warn[reason] = 0
            self._last_warn[reason] = now
        extra = f" ({n} since the last warning)" if n > 1 else ""
        self._logger.warning(f"rejected input [{reason}]{extra}: {detail}")


class NodeStats:
    """Running rates and latencies for diagnostics (thread-safe, O(1) memory)."""

    def __init__(self, window: int = 200):
        self._lock = threading.Lock()
        self._arrivals: dict[str, deque[float]] = {}
        self._latency: dict[str, deque[float]] = {}
        self._window = window
        self.counts: dict[str, int] = {}

    def arrived(self, stream: str) -> None:
        """Record one message on ``stream`` now."""
        with self._lock:
            self._arrivals.setdefault(stream, deque(maxlen=self._window)).append(time.monotonic())
            self.counts[stream] = self.counts.get(stream, 0) + 1

    def timed(self, what: str, seconds: float) -> None:
        """Record one duration of ``what`` (e.g. an update)."""
        with self._lock:
            self._latency.setdefault(what, deque(maxlen=self._window)).append(seconds)

    def summary(self) -> dict[str, str]:
        """Rates [Hz], message counts and latency percentiles [ms] as strings for diagnostics."""
        out: dict[str, str] = {}
        now = time.monotonic()
        with self._lock:
            for stream, ts in self._arrivals.items():
                recent = [t for t in ts if now - t <= 5.0]
                rate = (
                    (len(recent) - 1) / (recent[-1] - recent[0])
                    if len(recent) > 1 and recent[-1] > recent[0]
                    else 0.0
                )
                out[f"{stream} rate [Hz]"] = f"{rate:.1f}"
                out[f"{stream} messages"] = str(self.counts.get(stream, 0))
            for what, ds in self._latency.items():
                if ds:
                    s = sorted(ds)
                    out[f"{what} p50 [ms]"] = f"{1e3 * s[len(s) // 2]:.3f}"
                    out[f"{what} p99 [ms]"] = f"{1e3 * s[min(len(s) - 1, int(0.99 * len(s)))]:.3f}"
        return out


class NodeBase(Node):
    """A node with declared parameters, counted rejections, stats and diagnostics."""

    #: parameters every node of this package has
    COMMON_PARAMS: tuple[ParamSpec, ...] = (
        ParamSpec("warn_period_s", 5.0, "At most one warning per this many seconds per rejection reason."),
        ParamSpec(
            "diagnostics_period_s",
            1.0,
            "Period of diagnostic_msgs/DiagnosticArray on /diagnostics; 0 disables.",
        ),
    )

    def __init__(self, node_name: str, params: Sequence[ParamSpec] = (), **kwargs: Any):
        super().__init__(node_name, **kwargs)
        self.params = self.declare_specs((*self.COMMON_PARAMS, *params))
        self.rejections = RejectionCounter(self.get_logger(), self.params["warn_period_s"])
        self.stats = NodeStats()
        self.dropped = 0
        self.losses = SequenceLossCounter()  # messages published to us that we never processed
        # rejections, drops and losses at the previous diagnostics publication (what rose is a WARN)
        self._published_counts: dict[str, int] = {}
        self._published_dropped = 0
        self._published_lost: dict[str, int] = {}
        self._judged: tuple[dict[str, int], int, dict[str, int]] = ({}, 0, {})
        self._published_at = time.monotonic()
        self._diag_pub = None
        period = float(self.params["diagnostics_period_s"])
        if period > 0:
            self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
            self.create_timer(period, self._publish_diagnostics)

    def create_counted_subscription(
        self, msg_type: Any, topic: str, callback: Callable[[Any], None], qos: Any, stream: str, **kwargs: Any
    ) -> Any:
        """``create_subscription`` that also counts the messages of ``topic`` this node never
        processed, from the publishers' sequence numbers (:mod:`lifelong_learning.core.losses`): lost
        by DDS, or overwritten in the subscription's queue while the node was busy. Shown in
        diagnostics as ``<stream> lost``, WARN while it rises."""

        def on_message(msg: Any, info: Any) -> None:
            gid = info.get("publisher_gid") if isinstance(info, dict) else None
            key = bytes(gid["data"]) if isinstance(gid, dict) and "data" in gid else None
            self.losses.record(stream, key, info.get("publication_sequence_number") if key else None)
            callback(msg)

        return self.create_subscription(msg_type, topic, on_message, qos, **kwargs)

    def declare_specs(self, specs: Sequence[ParamSpec]) -> dict[str, Any]:
        """Declare ``specs`` (with descriptions) and return their current values by name."""
        values: dict[str, Any] = {}
        for spec in specs:
            desc = ParameterDescriptor(description=spec.description, read_only=spec.read_only)
            values[spec.name] = self.declare_parameter(spec.name, spec.default, desc).value
        return values

    def reject(self, reason: str, detail: str = "", warn: bool = True) -> None:
        """Count and (rate-limited, unless ``warn`` is false) warn about one rejected input. Never raises."""
        self.rejections.reject(reason, detail, warn)

    def diagnostic_values(self) -> dict[str, str]:
        """Key/values for diagnostics; subclasses extend it (call super())."""
        values = self.stats.summary()
        counts = self.rejections.snapshot()
        values["rejected"] = str(sum(counts.values()))
        for reason, n in sorted(counts.items()):
            values[f"rejected: {reason}"] = str(n)
        values["dropped"] = str(self.dropped)
        for stream, n in sorted(self.losses.snapshot().items()):
            values[f"{stream} lost"] = str(n)
        return values

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        """What is wrong now, as ``(DiagnosticStatus level, short text)``; subclasses extend it (super()).

        Here: WARN when inputs were rejected or messages dropped since the previous diagnostics
        publication. The published status takes the highest level and joins the texts.
        """
        problems: list[tuple[bytes, str]] = []
        counts, dropped_now, lost_now = self.rejections.snapshot(), self.dropped, self.losses.snapshot()
        self._judged = (counts, dropped_now, lost_now)  # the next baselines, once published
        elapsed = max(0.0, time.monotonic() - self._published_at)
        rose = {r: n - self._published_counts.get(r, 0) for r, n in sorted(counts.items())}
        rose = {r: n for r, n in rose.items() if n > 0}
        if rose:
            reasons = ", ".join(f"{r}: {n}" for r, n in rose.items())
            total = sum(rose.values())
            inputs = "input" if total == 1 else "inputs"
            problems.append(
                (DiagnosticStatus.WARN, f"{total} {inputs} rejected in the last {elapsed:.1f} s ({reasons})")
            )
        dropped = dropped_now - self._published_dropped
        if dropped > 0:
            problems.append(
                (
                    DiagnosticStatus.WARN,
                    f"{dropped} message{'s' if dropped != 1 else ''} dropped in the last {elapsed:.1f} s",
                )
            )
        lost = {k: n - self._published_lost.get(k, 0) for k, n in sorted(lost_now.items())}
        lost = {k: n for k, n in lost.items() if n > 0}
        if lost:
            streams = ", ".join(f"{k}: {n}" for k, n in lost.items())
            problems.append(
                (DiagnosticStatus.WARN, f"messages never processed in the last {elapsed:.1f} s ({streams})")
            )
        return problems

    def diagnostic_status(self) -> DiagnosticStatus:
        """This node's status now: its values, the highest level of its problems and their texts."""
        problems = self.diagnostic_problems()
        return DiagnosticStatus(
            level=max((level for level, _ in problems), default=DiagnosticStatus.OK),
            name=f"{self.get_name()}",
            hardware_id=self.get_fully_qualified_name(),
            message="; ".join(text for _, text in problems) or "running",
            values=[KeyValue(key=k, value=v) for k, v in self.diagnostic_values().items()],
        )

    def _publish_diagnostics(self) -> None:
        status = self.diagnostic_status()  # judges what rose against the last published counts
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [status]
        if self._diag_pub is not None:
            self._diag_pub.publish(msg)
        # the counts that status judged become the baselines: what came in meanwhile is judged next time
        self._published_counts, self._published_dropped, self._published_lost = self._judged
        self._published_at = time.monotonic()


class LearnerNode(NodeBase):
    """A node holding a learned model, with save/load/reset services and checkpoints.

    Subclasses set :attr:`model_class` (a :class:`~lifelong_learning.core.persistence.PersistentModel`:
    its ``kind`` is what the node loads, its model files are the node's checkpoints) and implement
    :meth:`new_model` and, when a loaded model can be of the right kind but unfit for this node
    (another dimension, other joints), :meth:`check_model`. They hold ``with self.model_lock:``
    around every use of ``self.model``, for the whole predict/update of one message, so that no
    message sees a half-swapped model.

    Hot reload (``~/load_model`` and the paths announced on ``model_topic``, one code path,
    :meth:`reload`): the file is read and the model built outside the lock (the old model keeps
    answering meanwhile), then swapped in under the lock. A file that fails (missing, corrupt,
    incompatible with this node) is a counted rejection ``"model reload failed"`` and the old
    model keeps serving. On the topic, a file of another kind than ``model_class.kind`` is
    ignored (info log; several learners listen to the same topic), and a file already loaded
    (same path and modification time) is not loaded again.

    Files (:meth:`confine`): the paths of ``~/save_model``, ``~/load_model`` and ``model_topic``
    are resolved under ``model_directory`` and refused outside it (unless
    ``allow_paths_outside_model_directory``); a save never replaces a symlink, a directory, a
    special file or a file that is not a model file. A refusal is the counted rejection
    ``"path refused"``. ``checkpoint_path`` (the operator's) may be anywhere but must be a
    regular file or missing; stale temporaries of killed writes are removed at start.
    """

    #: the learner this node serves
    model_class: ClassVar[type[PersistentModel]]

    LEARNER_PARAMS: tuple[ParamSpec, ...] = (
        ParamSpec(
            "checkpoint_path",
            "",
            "Model file written every checkpoint_interval_s and on shutdown, and restored on start; "
            "'' disables checkpoints. '~' expands to the home directory.",
        ),
        ParamSpec("checkpoint_interval_s", 30.0, "Seconds between checkpoints (0: only on shutdown)."),
        ParamSpec("restore_on_start", True, "Load checkpoint_path at start when it exists."),
        ParamSpec(
            "model_topic",
            "tuned_model",
            "std_msgs/String (reliable, transient local): paths of model files to hot-reload, e.g. "
            "from nystrom_tuner; files of another kind are ignored; '' disables.",
            read_only=True,
        ),
        ParamSpec(
            "model_directory",
            DEFAULT_MODEL_DIRECTORY,
            "The directory that ~/save_model, ~/load_model and the paths announced on model_topic "
            "are confined to: relative paths are taken under it, and a path that resolves outside "
            "it (symlinks and '..' followed) is refused and counted ('path refused'). '~' expands; "
            "'' = ~/.ros/lifelong_learning (the nystrom_tuner's default output_dir). Stale temporary "
            "files of killed writes in it are removed at start.",
            read_only=True,
        ),
        ParamSpec(
            "allow_paths_outside_model_directory",
            False,
            "Let ~/save_model, ~/load_model and model_topic use paths outside model_directory. "
            "Saves still never replace a symlink, a directory, a special file or a non-model file.",
            read_only=True,
        ),
    )

    def __init__(self, node_name: str, params: Sequence[ParamSpec] = (), **kwargs: Any):
        super().__init__(node_name, (*self.LEARNER_PARAMS, *params), **kwargs)
        self.model_lock = threading.RLock()
        self.model: Any = None
        self.model_version = 0  # bumped on every swap (reload or reset)
        self.updates_since_checkpoint = 0
        self.last_checkpoint: str = "never"
        self.last_reload: str = "never"
        self.ignored_model_files = 0  # announced files of another kind (meant for another node)
        self._loaded_file: tuple[str, int] | None = None  # (path, mtime_ns) of the serving model's file
        self.service_group = MutuallyExclusiveCallbackGroup()
        self.reload_group = MutuallyExclusiveCallbackGroup()
        path = str(self.params["checkpoint_path"])
        self.checkpoint_path: Path | None = Path(os.path.expanduser(path)) if path else None
        self.model_directory = Path(
            os.path.expanduser(str(self.params["model_directory"]) or DEFAULT_MODEL_DIRECTORY)
        )
        self.allow_outside = bool(self.params["allow_paths_outside_model_directory"])
        # the failure of the last checkpoint attempt; None when it succeeded
        self.checkpoint_error: str | None = None

    # ---------------------------------------------------------------- subclass hooks
    def new_model(self) -> PersistentModel:
        """A fresh, untrained model from the node's parameters."""
        raise NotImplementedError

    def check_model(self, model: PersistentModel) -> None:
        """Raise ValueError if ``model`` (of the right kind, read from a file) does not fit this node."""

    # ---------------------------------------------------------------- set-up
    def start_learner(self) -> None:
        """Create or restore the model, then the services and the checkpoint timer.

        Call at the end of the subclass ``__init__``, after its own parameters are read.

        Raises:
            UnsafePathError: ``checkpoint_path`` is a directory, a symlink or a special file
                (a ValueError: the node does not start, exit status 2).
        """
        self._prepare_files()
        restored = False
        if (
            self.checkpoint_path is not None
            and self.params["restore_on_start"]
            and self.checkpoint_path.exists()
        ):
            try:
                self.model = self.read_model(self.checkpoint_path)
                restored = True
                self.last_checkpoint = f"restored from {self.checkpoint_path}"
                self.get_logger().info(f"restored model from checkpoint {self.checkpoint_path}")
            except (ModelFileError, ValueError) as exc:
                aside = self.checkpoint_path.with_name(
                    f"{self.checkpoint_path.name}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}"
                )
                os.replace(self.checkpoint_path, aside)
                self.get_logger().error(f"checkpoint could not be restored ({exc}); moved aside to {aside}")
        if not restored:
            self.model = self.new_model()
        self.create_service(SaveModel, "~/save_model", self._on_save, callback_group=self.service_group)
        self.create_service(LoadModel, "~/load_model", self._on_load, callback_group=self.service_group)
        self.create_service(Trigger, "~/reset", self._on_reset, callback_group=self.service_group)
        interval = float(self.params["checkpoint_interval_s"])
        if self.checkpoint_path is not None and interval > 0:
            self.create_timer(interval, self.checkpoint, callback_group=self.service_group)
        topic = str(self.params["model_topic"])
        if topic:
            # transient local: a model announced before this node started is still delivered
            qos = QoSProfile(
                depth=5, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
            )
            self.create_subscription(
                String, topic, self._on_model_announced, qos, callback_group=self.reload_group
            )

    def _prepare_files(self) -> None:
        """Refuse a checkpoint path that is not a (possible) regular file; remove stale temporaries."""
        removed: list[Path] = []
        if self.checkpoint_path is not None:
            try:
                check_replaceable(self.checkpoint_path)
            except UnsafePathError as exc:
                raise UnsafePathError(f"checkpoint_path {self.params['checkpoint_path']!r}: {exc}") from exc
            removed += remove_stale_temporaries(self.checkpoint_path.parent, self.checkpoint_path.name)
        removed += remove_stale_temporaries(self.model_directory, min_age_s=STALE_TEMPORARY_AGE_S)
        for path in removed:
            self.get_logger().warning(f"removed {path}, left by a write that was killed")

    def confine(self, path: str | os.PathLike[str], for_writing: bool = False) -> Path:
        """``path`` as a service request or ``model_topic`` names it, checked (see ``model_directory``).

        Relative paths are taken under ``model_directory``; one that resolves outside it is refused
        unless ``allow_paths_outside_model_directory``. For writing, the path must also be
        missing or a model file of this node's kind (not a symlink, directory, special or other
        file, nor another learner's model, e.g. its checkpoint).

        Raises:
            UnsafePathError: the path is refused (not counted here: see :meth:`refuse_path`).
        """
        resolved = confined_path(path, self.model_directory, self.allow_outside)
        if for_writing:
            named = self.model_directory / Path(path).expanduser()  # as named: a symlink is refused
            kind = self.model_class.kind
            check_replaceable(named, lambda p: is_model_file(p, kind))
            check_replaceable(resolved, lambda p: is_model_file(p, kind))
        return resolved

    def refuse_path(self, message: str) -> str:
        """Count the refusal of a path as the rejection ``"path refused"``; returns the message."""
        self.reject("path refused", message)
        return message

    # ---------------------------------------------------------------- model I/O
    def read_model(self, path: str | os.PathLike[str]) -> PersistentModel:
        """Read, build and check a model from ``path`` (does not touch the serving model)."""
        model = self.model_class.from_model_file(load_model_file(path, kind=self.model_class.kind))
        self.check_model(model)
        return model

    def write_model(self, path: str | os.PathLike[str]) -> None:
        """Snapshot under the lock, write atomically outside it."""
        with self.model_lock:
            snap = self.model.to_model_file()
        save_model_file(path, snap)

    def swap_model(self, model: Any, loaded_file: tuple[str, int] | None = None) -> None:
        """Atomically replace the serving model (the checkpoint then differs from it).

        ``loaded_file``: ``(path, mtime_ns)`` of the file ``model`` was read from, if any.
        """
        with self.model_lock:
            self.model = model
            self.model_version += 1
            self.updates_since_checkpoint += 1
            self._loaded_file = loaded_file

    @staticmethod
    def _file_key(path: Path) -> tuple[str, int] | None:
        try:
            return str(path.resolve()), path.stat().st_mtime_ns
        except OSError:
            return None

    def reload(self, path: str | os.PathLike[str]) -> tuple[bool, str]:
        """Hot reload: read and build the model in ``path`` outside the lock, then swap it in.

        Returns ``(success, message)``. On failure the old model keeps serving, the failure
        is counted as the rejection ``"model reload failed"`` and logged as an error.
        """
        path = Path(path)
        key = self._file_key(path)
        try:
            model = self.read_model(path)  # outside the lock: the old model keeps serving
        except (ModelFileError, ValueError, OSError) as exc:
            return False, self._reload_failed(f"model reload from {path} failed, previous model kept: {exc}")
        self.swap_model(model, key)
        with self.model_lock:
            version = self.model_version
        self.last_reload = f"{path} at {time.strftime('%Y-%m-%d %H:%M:%S')}"
        message = f"loaded {path} (model version {version})"
        self.get_logger().info(message)
        return True, message

    def _reload_failed(self, message: str) -> str:
        """Count the failed reload (every one is logged as an error, not rate-limited)."""
        self.reject("model reload failed", message, warn=False)
        self.get_logger().error(message)
        return message

    def _on_model_announced(self, msg: String) -> None:
        text = msg.data.strip()
        if not text:
            self._reload_failed(f"empty model path announced on {self.params['model_topic']}")
            return
        try:
            path = self.confine(text)
        except UnsafePathError as exc:
            self.refuse_path(f"announced model refused: {exc}")
            return
        if self.checkpoint_path is not None and path == self.checkpoint_path.resolve():
            # an announcement is a new model; rolling back to the checkpoint is ~/load_model's job
            self.refuse_path(f"announced model refused: {path} is this node's own checkpoint")
            return
        try:
            file_kind = read_model_kind(path)
        except ModelFileError as exc:
            self._reload_failed(f"model reload from {path} failed, previous model kept: {exc}")
            return
        if file_kind != self.model_class.kind:
            self.ignored_model_files += 1
            self.get_logger().info(
                f"ignored announced model {path}: a {file_kind!r} model, "
                f"this node loads {self.model_class.kind!r}"
            )
            return
        key = self._file_key(path)
        with self.model_lock:
            loaded = key is not None and key == self._loaded_file
        if loaded:
            self.get_logger().info(f"announced model {path} is already the serving model")
            return
        self.reload(path)

    def checkpoint(self) -> bool:
        """Write the checkpoint if anything changed since the last one (or the last attempt failed).

        A failed write (disk full, no permission) leaves the model marked as changed: the next
        timer tick and the final checkpoint on shutdown try again; meanwhile
        :attr:`checkpoint_error` holds the failure and diagnostics report it at ERROR.
        Returns True when written.
        """
        if self.checkpoint_path is None:
            return False
        with self.model_lock:
            pending = self.updates_since_checkpoint
            if pending == 0 and self.checkpoint_error is None and self.checkpoint_path.exists():
                return False
            snap = self.model.to_model_file()
        try:
            save_model_file(self.checkpoint_path, snap)
        except (OSError, ModelFileError) as exc:
            first = self.checkpoint_error is None
            self.checkpoint_error = f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {exc}"
            retry = "will retry" if first else "still failing, will retry"
            self.get_logger().error(f"checkpoint to {self.checkpoint_path} failed ({retry}): {exc}")
            return False
        with self.model_lock:  # what was learned while writing stays pending
            self.updates_since_checkpoint = max(0, self.updates_since_checkpoint - pending)
        if self.checkpoint_error is not None:
            self.get_logger().info(f"checkpoint to {self.checkpoint_path} written again")
        self.checkpoint_error = None
        self.last_checkpoint = time.strftime("%Y-%m-%d %H:%M:%S")
        return True

    def _request_path(self, path: str, for_writing: bool) -> tuple[Path | None, str]:
        """The path a service request names ('' = the checkpoint path), or None and why not."""
        if not path:
            if self.checkpoint_path is None:
                return None, "no path given and no checkpoint_path configured"
            return self.checkpoint_path, ""
        try:
            return self.confine(path, for_writing), ""
        except UnsafePathError as exc:
            return None, self.refuse_path(f"path refused: {exc}")

    def _on_save(self, request: SaveModel.Request, response: SaveModel.Response) -> SaveModel.Response:
        path, why = self._request_path(request.path, for_writing=True)
        if path is None:
            response.success, response.message = False, why
            return response
        try:
            self.write_model(path)
            response.success, response.message = True, f"saved to {path}"
        except (OSError, ModelFileError, ValueError) as exc:
            response.success, response.message = False, f"save failed: {exc}"
        return response

    def _on_load(self, request: LoadModel.Request, response: LoadModel.Response) -> LoadModel.Response:
        path, why = self._request_path(request.path, for_writing=False)
        if path is None:
            response.success, response.message = False, why
            return response
        response.success, response.message = self.reload(path)
        return response

    def forget_inputs(self) -> None:
        """Subclass hook, called by ``~/reset`` with the model lock held: forget what the node keeps
        about its input streams besides the model (filters, stamps, statistics)."""

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self.model_lock:  # one step: no message sees the new stream state with the old model
            self.forget_inputs()
            self.swap_model(self.new_model())
        response.success, response.message = True, "model reset"
        self.get_logger().info("model reset")
        return response

    def diagnostic_values(self) -> dict[str, str]:
        values = super().diagnostic_values()
        values["last checkpoint"] = self.last_checkpoint
        values["last checkpoint error"] = self.checkpoint_error or "none"
        values["last reload"] = self.last_reload
        values["ignored model files"] = str(self.ignored_model_files)
        values["model version"] = str(self.model_version)
        return values

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        problems = super().diagnostic_problems()
        error = self.checkpoint_error
        if error is not None:
            text = f"checkpoint failing ({error}); last written: {self.last_checkpoint}"
            problems.append((DiagnosticStatus.ERROR, text))
        return problems

    def shutdown(self) -> None:
        """Final checkpoint; called by :func:`run_node` on exit."""
        if self.checkpoint():
            self.get_logger().info(f"final checkpoint written to {self.checkpoint_path}")


def run_node(factory: Callable[..., Node], args: Sequence[str] | None = None, threads: int = 2) -> int:
    """Run one node until Ctrl-C/SIGTERM; learner nodes write a final checkpoint on the way out.

    The ``main()`` of every node executable: :func:`lifelong_learning.nodes._runner.run_nodes`
    with one node (signals, callback failures and the final checkpoint are handled there).
    """
    from lifelong_learning.nodes._runner import run_nodes

    return run_nodes([factory], args, threads)
