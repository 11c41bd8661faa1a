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
  atomically every ``checkpoint_interval_s`` (on a thread of its own, off the callback path)
  and on shutdown (a failed one is retried), restored on start; the paths that requests and
  announcements name are confined to ``model_directory``. Every replacement of the serving model
  (hot reload, a model received as bytes on ``model_data_topic``, ``~/reset``) first keeps the
  replaced one on disk (:class:`ModelHistory`, at most ``keep_previous_models``), and
  ``~/rollback`` brings the most recent one back.
- :func:`run_node`: the ``main()`` of every node executable (Ctrl-C / SIGTERM → final checkpoint).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import JumpThreshold, TimeJump
from rclpy.duration import Duration
from rclpy.exceptions import InvalidHandle
from rclpy.lifecycle import LifecycleNodeMixin, LifecycleState, TransitionCallbackReturn
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.qos_overriding_options import QoSOverridingOptions
from rclpy.service import Service
from rclpy.subscription import Subscription
from std_msgs.msg import String
from std_srvs.srv import Trigger

from lifelong_learning.core.files import (
    UnsafePathError,
    atomic_write_bytes,
    check_replaceable,
    confined_path,
    remove_stale_temporaries,
)
from lifelong_learning.core.losses import SequenceLossCounter
from lifelong_learning.core.model_file import (
    MAX_MODEL_BYTES,
    ModelFile,
    ModelFileError,
    is_model_file,
    load_model_file,
    read_model_kind,
    save_model_file,
)
from lifelong_learning.core.persistence import PersistentModel
from lifelong_learning.core.realtime import normal_policy_here
from lifelong_learning.msg import ModelFile as ModelFileMessage
from lifelong_learning.srv import LoadModel, SaveModel

#: the task part of every node's diagnostic status name, ``<node's fully qualified name>: health``
DIAGNOSTIC_TASK = "health"


def status_node(status_name: str) -> str:
    """The node's fully qualified name (without the leading '/') in a status name of this package."""
    return status_name.rsplit(f": {DIAGNOSTIC_TASK}", 1)[0]


#: a jump back of the node's clock by more than this (a ``/clock`` reset under ``use_sim_time``:
#: a simulator reset, a bag replayed again) is logged and counted
CLOCK_JUMP_BACK_S = 0.1


#: where model files go unless a node is told otherwise (the nystrom_tuner writes there too)
DEFAULT_MODEL_DIRECTORY = "~/.ros/lifelong_learning"
#: temporary files in the model directory younger than this may belong to a writer in another
#: process (the tuner) and are left alone at start
STALE_TEMPORARY_AGE_S = 60.0


@dataclass(frozen=True)
class ParamSpec:
    """One declared ROS parameter: name, default (its type is the parameter's), description.

    ``bounds``: the inclusive range of a numeric parameter (an int or float range in its
    descriptor: rclpy refuses a value outside it, from a params file at start and at run time).
    ``at_run_time``: the node applies a change while it runs (:meth:`NodeBase.apply_parameter`);
    every other parameter is read-only, so that setting it at run time is refused with a reason
    instead of succeeding and changing nothing.
    """

    name: str
    default: Any
    description: str
    bounds: tuple[float, float] | None = None
    at_run_time: bool = False

    def descriptor(self) -> ParameterDescriptor:
        """The parameter's descriptor: description, read-only unless applied at run time, range."""
        desc = ParameterDescriptor(description=self.description, read_only=not self.at_run_time)
        if self.bounds is not None:
            low, high = self.bounds
            if isinstance(self.default, bool) or not isinstance(self.default, int | float):
                raise TypeError(f"parameter {self.name}: bounds need a numeric default")
            if isinstance(self.default, int):
                desc.integer_range = [IntegerRange(from_value=int(low), to_value=int(high), step=1)]
            else:
                desc.floating_point_range = [
                    FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)
                ]
            desc.additional_constraints = f"in [{low:g}, {high:g}]"
        return desc


class RejectionCounter:
    """Counts rejected inputs per reason; logs a warning at most once per period per reason."""

    def __init__(self, logger: Any, warn_period_s: float = 5.0):
        self._logger = logger
        self.period = float(warn_period_s)
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
            if now - self._last_warn.get(reason, -1e18) < self.period:
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

    def last_arrival(self, stream: str) -> float | None:
        """``time.monotonic()`` of the latest message on ``stream``; None before the first."""
        with self._lock:
            ts = self._arrivals.get(stream)
            return ts[-1] if ts else None

    def arrivals(self) -> dict[str, int]:
        """Messages per stream so far."""
        with self._lock:
            return dict(self.counts)

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
        ParamSpec(
            "warn_period_s",
            5.0,
            "At most one warning per this many seconds per rejection reason (settable at run time).",
            bounds=(0.0, 3600.0),
            at_run_time=True,
        ),
        ParamSpec(
            "diagnostics_period_s",
            1.0,
            "Period of diagnostic_msgs/DiagnosticArray on /diagnostics; 0 disables (settable at run time).",
            bounds=(0.0, 3600.0),
            at_run_time=True,
        ),
        ParamSpec(
            "input_timeout_s",
            5.0,
            "Diagnostics WARN when a stream that had messages (joint states, images, features) has had "
            "none for this long; 0 disables (settable at run time).",
            bounds=(0.0, 3600.0),
            at_run_time=True,
        ),
    )

    #: streams whose silence is a problem once they have started (see ``input_timeout_s``)
    MAIN_STREAMS: ClassVar[tuple[str, ...]] = ()
    #: threads of the node's executor, in its executable and on its thread in ``up``: 1 = a
    #: SingleThreadedExecutor (its callbacks one at a time); more for a node whose callbacks must
    #: run beside a long one (the tuner's goal), in a reentrant callback group
    EXECUTOR_THREADS: ClassVar[int] = 1

    def __init__(self, node_name: str, params: Sequence[ParamSpec] = (), **kwargs: Any):
        super().__init__(node_name, **kwargs)
        self.specs = {spec.name: spec for spec in (*self.COMMON_PARAMS, *params)}
        self.params = self.declare_specs(list(self.specs.values()))
        self.rejections = RejectionCounter(self.get_logger(), self.params["warn_period_s"])
        self.stats = NodeStats()
        self.dropped = 0
        self.realtime = "off"  # what run_nodes did with realtime_request() (diagnostics of nodes that ask)
        self.losses = SequenceLossCounter()  # messages published to us that we never processed
        # rejections, drops and losses at the previous diagnostics publication (what rose is a WARN)
        self._published_counts: dict[str, int] = {}
        self._published_dropped = 0
        self._published_lost: dict[str, int] = {}
        self._published_arrivals: dict[str, int] = {}
        self._judged: tuple[dict[str, int], int, dict[str, int], dict[str, int]] = ({}, 0, {}, {})
        self._published_at = time.monotonic()
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diag_timer: Any = None
        self._schedule_diagnostics(float(self.params["diagnostics_period_s"]))
        self.add_post_set_parameters_callback(self._on_parameters_set)
        self.clock_jumps_back = self._published_clock_jumps = 0
        self._clock_jump_handle = self.get_clock().create_jump_callback(
            JumpThreshold(
                min_forward=None, min_backward=Duration(seconds=-CLOCK_JUMP_BACK_S), on_clock_change=False
            ),
            post_callback=self._on_clock_jump,
        )

    def _on_clock_jump(self, jump: TimeJump) -> None:
        """A jump back of ROS time (a ``/clock`` reset): logged once per jump and counted. The
        inputs' stamps go back with it and each stream's own rules take them up again (the
        inverse_dynamics guard restarts its acceleration filter); nothing learned is lost."""
        self.clock_jumps_back += 1
        self.get_logger().warning(
            f"the clock jumped back by {-jump.delta.nanoseconds * 1e-9:.3f} s (/clock reset: a simulator "
            "reset or a bag replayed again); inputs stamped with the new time are taken up, the model is kept"
        )

    def _schedule_diagnostics(self, period: float) -> None:
        if self._diag_timer is not None:
            self.destroy_timer(self._diag_timer)
            self._diag_timer = None
        if period > 0:
            self._diag_timer = self.create_timer(period, self._publish_diagnostics)

    def apply_parameter(self, name: str, value: Any) -> None:
        """Apply a run-time change of the parameter ``name`` (one declared ``at_run_time``).

        Subclasses extend it for their own run-time parameters (call super() for the others).
        The value is already checked (type and ``bounds``, by rclpy).
        """
        self.params[name] = value
        if name == "warn_period_s":
            self.rejections.period = float(value)
        elif name == "diagnostics_period_s":
            self._schedule_diagnostics(float(value))

    def _on_parameters_set(self, params: list[Any]) -> None:
        for prm in params:
            if prm.name in self.specs and self.specs[prm.name].at_run_time:
                self.apply_parameter(prm.name, prm.value)
                self.get_logger().info(f"parameter {prm.name} set to {prm.value!r} at run time")

    def create_counted_subscription(
        self,
        msg_type: Any,
        topic: str,
        callback: Callable[..., None],
        qos: Any,
        stream: str,
        batch: int = 0,
        **kwargs: Any,
    ) -> Any:
        """``create_subscription`` for an input stream: its QoS can be overridden by parameters, it
        counts the messages it never processed, and it ignores input while the node is not
        :meth:`accepting` (a deactivated lifecycle node).

        - QoS overrides (rclpy's ``QoSOverridingOptions.with_default_policies()``): reliability,
          durability, history and depth of ``topic`` are read-only parameters
          ``qos_overrides.<topic>.subscription.<policy>``, set in a params file or on the command
          line (e.g. a camera driver that publishes reliable only).
        - Losses (:mod:`lifelong_learning.core.losses`): from the publishers' sequence numbers, the
          messages lost by DDS or overwritten in the subscription's queue while the node was busy;
          shown in diagnostics as ``<stream> lost``, WARN while it rises.

        ``batch`` ≥ 1: the callback gets a list of up to ``batch`` ``(message, info)`` pairs, oldest
        first: the message the executor took and those already waiting in the subscription's
        queue, taken at once from its handle (rclpy's ``take_message``, what the executor itself
        calls). At control rates the executor's own work per message (a wait set, a task) costs
        more than a cheap callback; a backlog taken in one call costs it once, and the callback
        can answer the block with array operations. ``info`` is rclpy's message info (a dict with
        ``received_timestamp``, ns since the epoch: when the middleware received the message).
        """
        taken_from: list[Any] = []  # the subscription, once created

        def record(info: Any) -> None:
            gid = info.get("publisher_gid") if isinstance(info, dict) else None
            key = bytes(gid["data"]) if isinstance(gid, dict) and "data" in gid else None
            self.losses.record(stream, key, info.get("publication_sequence_number") if key else None)

        def waiting(first: tuple[Any, Any]) -> list[tuple[Any, Any]]:
            items = [first]
            if not taken_from:
                return items
            sub = taken_from[0]
            try:
                with sub.handle:
                    while len(items) < batch:
                        pair = sub.handle.take_message(sub.msg_type, sub.raw)
                        if pair is None:
                            break
                        items.append(pair)
            except InvalidHandle:  # destroyed meanwhile: what was taken is still handled
                pass
            return items

        def on_message(msg: Any, info: Any) -> None:
            items = waiting((msg, info)) if batch >= 1 else [(msg, info)]
            for _, item_info in items:
                record(item_info)
            if self.accepting():
                if batch >= 1:
                    callback(items)
                else:
                    callback(msg)

        kwargs.setdefault("qos_overriding_options", QoSOverridingOptions.with_default_policies())
        subscription = self.create_subscription(msg_type, topic, on_message, qos, **kwargs)
        taken_from.append(subscription)
        return subscription

    def create_overridable_publisher(self, msg_type: Any, topic: str, qos: Any, **kwargs: Any) -> Any:
        """``create_publisher`` whose QoS can be overridden by parameters (as for subscriptions)."""
        kwargs.setdefault("qos_overriding_options", QoSOverridingOptions.with_default_policies())
        return self.create_publisher(msg_type, topic, qos, **kwargs)

    def accepting(self) -> bool:
        """Whether input messages are processed now (a lifecycle node: only while active)."""
        return True

    def declare_specs(self, specs: Sequence[ParamSpec]) -> dict[str, Any]:
        """Declare ``specs`` (with descriptions) and return their current values by name."""
        values: dict[str, Any] = {}
        for spec in specs:
            values[spec.name] = self.declare_parameter(spec.name, spec.default, spec.descriptor()).value
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
        if self.clock_jumps_back:
            values["clock jumps back"] = str(self.clock_jumps_back)
        for stream, n in sorted(self.losses.snapshot().items()):
            values[f"{stream} lost"] = str(n)
        return values

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        """What is wrong now, as ``(DiagnosticStatus level, short text)``; subclasses extend it (super()).

        The rules (documented in docs/diagnostics.md), judged over the time since the previous
        diagnostics publication:

        - rejected inputs: WARN; ERROR when they are at least half of the inputs that arrived
          (and at least 10): the node is answering little of what it is sent;
        - messages dropped from a full queue, or lost before the node processed them: WARN;
        - a stream of :attr:`MAIN_STREAMS` that had messages and has had none for
          ``input_timeout_s``: WARN (a driver stopped, a remapping broke);
        - the node's clock jumped back (a ``/clock`` reset under ``use_sim_time``): WARN, once.

        The published status takes the highest level and joins the texts.
        """
        problems: list[tuple[bytes, str]] = []
        counts, dropped_now, lost_now = self.rejections.snapshot(), self.dropped, self.losses.snapshot()
        arrivals = self.stats.arrivals()
        self._judged = (counts, dropped_now, lost_now, arrivals)  # the next baselines, once published
        elapsed = max(0.0, time.monotonic() - self._published_at)
        rose = {r: n - self._published_counts.get(r, 0) for r, n in sorted(counts.items())}
        rose = {r: n for r, n in rose.items() if n > 0}
        if rose:
            reasons = ", ".join(f"{r}: {n}" for r, n in rose.items())
            total = sum(rose.values())
            arrived = sum(arrivals.values()) - sum(self._published_arrivals.values())
            inputs = "input" if total == 1 else "inputs"
            level = DiagnosticStatus.ERROR if total >= 10 and 2 * total >= arrived else DiagnosticStatus.WARN
            share = f" of {arrived}" if arrived >= total else ""
            problems.append(
                (level, f"{total}{share} {inputs} rejected in the last {elapsed:.1f} s ({reasons})")
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
        jumps = self.clock_jumps_back - self._published_clock_jumps
        self._published_clock_jumps = self.clock_jumps_back
        if jumps > 0:
            problems.append(
                (DiagnosticStatus.WARN, f"the clock jumped back ({jumps}x in the last {elapsed:.1f} s)")
            )
        problems += self._silent_streams()
        return problems

    def _silent_streams(self) -> list[tuple[bytes, str]]:
        timeout = float(self.params["input_timeout_s"])
        problems: list[tuple[bytes, str]] = []
        now = time.monotonic()
        for stream in self.MAIN_STREAMS if timeout > 0 else ():
            last = self.stats.last_arrival(stream)
            if last is not None and now - last >= timeout:
                problems.append((DiagnosticStatus.WARN, f"no {stream} for {now - last:.1f} s"))
        return problems

    @property
    def diagnostic_name(self) -> str:
        """The status name: the node's fully qualified name (namespace included, as
        diagnostic_updater prefixes it), so that two robots' nodes do not collide in an aggregator."""
        return f"{self.get_fully_qualified_name().lstrip('/')}: {DIAGNOSTIC_TASK}"

    def diagnostic_status(self) -> DiagnosticStatus:
        """This node's status now: its values, the highest level of its problems and their texts."""
        problems = self.diagnostic_problems()
        return DiagnosticStatus(
            level=max((level for level, _ in problems), default=DiagnosticStatus.OK),
            name=self.diagnostic_name,
            hardware_id=self.get_fully_qualified_name(),
            message="; ".join(text for _, text in problems) or self.idle_message(),
            values=[KeyValue(key=k, value=v) for k, v in self.diagnostic_values().items()],
        )

    def idle_message(self) -> str:
        """The status message when nothing is wrong."""
        return "running"

    def realtime_request(self) -> tuple[int, list[int]]:
        """The ``SCHED_FIFO`` priority this node wants for the thread that spins it and the
        middleware's threads (0: none), and the ids of its threads to keep at the normal policy.
        :func:`~lifelong_learning.nodes._runner.run_nodes` applies it when the node has its process
        to itself (:mod:`lifelong_learning.core.realtime`) and reports the outcome in
        :attr:`realtime`."""
        return 0, []

    def stopping(self) -> None:
        """Called when the process stops, before its executor waits for running callbacks: a
        node whose callbacks can run long (a tuning job) tells them to end here."""

    def _publish_diagnostics(self) -> None:
        status = self.diagnostic_status()  # judges what rose against the last published counts
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [status]
        self._diag_pub.publish(msg)
        # the counts that status judged become the baselines: what came in meanwhile is judged next time
        (self._published_counts, self._published_dropped, self._published_lost, self._published_arrivals) = (
            self._judged
        )
        self._published_at = time.monotonic()


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
    _NAME = re.compile(r"(\d{6,})\.before-([a-z]+)\.(\d{8}-\d{6})\.model")

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
            OSError / ModelFileError: not written (disk full, no permission); nothing changed.
        """
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


class LearnerNode(LifecycleNodeMixin, NodeBase):
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

    Models over ROS (``model_data_topic``, lifelong_learning/ModelFile, reliable, transient local,
    depth 1: a tuner on another machine, no shared filesystem): a file of another kind is ignored
    (``ignored model files``); one larger than ``max_model_bytes`` or whose SHA-256 is not the
    message's is refused, counted (``"model too large"``, ``"model checksum mismatch"``) and
    nothing changes; otherwise the bytes are written atomically to
    ``<model_directory>/received/<node>/<name>`` (only the name's last component, sanitized:
    :func:`received_file_name`) and loaded by :meth:`reload`, the hot reload's path: a model
    that does not fit the node (other joints, another robot, another feature size) is a
    ``"model reload failed"`` with the reason, its file removed, the serving model kept. The file
    of the last model loaded this way stays (the others are removed): the same bytes delivered
    again (the latched message, after a restart or a new configure) are not loaded again when
    the checkpoint restored at start was written after that file (it holds that model, or what
    was learned or rolled back since); a node that started afresh loads them.

    Rollback (:class:`ModelHistory` in ``<model_directory>/previous/<node>/``): every replacement
    of the serving model (:meth:`replace_model`: hot reload, received model, ``~/reset``, and
    ``~/load_model`` of the checkpoint, i.e. a restore over a model that serves) first
    writes the model it replaces there, under the model lock, so that the file is exactly what
    served; a replacement whose model cannot be written (disk full) is refused and nothing
    changes (``keep_previous_models`` 0 keeps none). At most ``keep_previous_models`` are kept, the
    oldest removed. ``~/rollback`` (std_srvs/Trigger) serves the most recent one again (read and
    checked like a hot reload, swapped under the model lock) and removes it from the history, so
    that two rollbacks in a row go two steps back, as an editor's undo does; the model it
    replaced is not a rollback target (a repeated or re-sent request never brings back the model
    just rolled away from) but is saved as ``rolled-back.model`` in the same folder, which
    ``~/load_model`` brings back. With nothing to roll back to it answers success false, saying
    why, and changes nothing.
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
        ParamSpec(
            "checkpoint_interval_s",
            30.0,
            "Seconds between checkpoints (0: only on shutdown and cleanup; settable at run time).",
            bounds=(0.0, 86400.0),
            at_run_time=True,
        ),
        ParamSpec(
            "restore_on_start",
            True,
            "Load checkpoint_path when the node is configured (at start with autostart) if it exists; "
            "the checkpoint's hyperparameters win over conflicting parameters (logged as a conflict).",
        ),
        ParamSpec(
            "autostart",
            True,
            "Configure and activate at start (true: works without a lifecycle manager); false: stay "
            "unconfigured until a lifecycle manager (nav2_lifecycle_manager, ros2 lifecycle set) "
            "configures and activates the node.",
        ),
        ParamSpec(
            "model_topic",
            "tuned_model",
            "std_msgs/String (reliable, transient local): paths of model files to hot-reload, e.g. "
            "from nystrom_tuner; files of another kind are ignored; '' disables.",
        ),
        ParamSpec(
            "model_directory",
            DEFAULT_MODEL_DIRECTORY,
            "The directory that ~/save_model, ~/load_model and the paths announced on model_topic "
            "are confined to: relative paths are taken under it, and a path that resolves outside "
            "it (symlinks and '..' followed) is refused and counted ('path refused'). '~' expands; "
            "'' = ~/.ros/lifelong_learning (the nystrom_tuner's default output_dir). Stale temporary "
            "files of killed writes in it are removed at start.",
        ),
        ParamSpec(
            "allow_paths_outside_model_directory",
            False,
            "Let ~/save_model, ~/load_model and model_topic use paths outside model_directory. "
            "Saves still never replace a symlink, a directory, a special file or a non-model file.",
        ),
        ParamSpec(
            "keep_previous_models",
            3,
            "Models kept on disk in <model_directory>/previous/<node>/ when the serving model is "
            "replaced (hot reload, received model, ~/reset), for ~/rollback; the oldest beyond this "
            "count are removed. 0 keeps none (and ~/rollback has nothing to roll back to).",
            bounds=(0, 100),
        ),
        ParamSpec(
            "model_data_topic",
            "tuned_model_data",
            "lifelong_learning/ModelFile (reliable, transient local, depth 1): model files as bytes, "
            "from a tuner without a shared filesystem; the SHA-256 and the model's fit are checked, "
            "then it is stored in <model_directory>/received/<node>/ and hot-reloaded; files of "
            "another kind are ignored; '' disables.",
        ),
        ParamSpec(
            "max_model_bytes",
            DEFAULT_MAX_RECEIVED_MODEL_BYTES,
            "The largest model file taken from model_data_topic, in bytes (512 MiB); larger ones are "
            "refused and counted ('model too large').",
            bounds=(1, MAX_MODEL_BYTES),
        ),
    )

    def __init__(self, node_name: str, params: Sequence[ParamSpec] = (), **kwargs: Any):
        NodeBase.__init__(self, node_name, (*self.LEARNER_PARAMS, *params), **kwargs)
        self.model_lock = threading.RLock()
        self.model: Any = None
        self.model_version = 0  # bumped on every swap (reload or reset)
        self.updates_since_checkpoint = 0
        self.last_checkpoint: str = "never"
        self.last_reload: str = "never"
        self.ignored_model_files = 0  # announced or received files of another kind (for another node)
        self.last_rollback: str = "never"
        self.models_received = 0  # received as bytes, verified and loaded
        self.last_model_received: str = "none"
        # SHA-256 of the file the serving model was loaded from: the same model announced again, as a
        # path or as bytes (the tuner sends both), is not loaded twice
        self._loaded_file: str | None = None
        self.service_group = MutuallyExclusiveCallbackGroup()
        self.reload_group = MutuallyExclusiveCallbackGroup()
        path = str(self.params["checkpoint_path"])
        self.checkpoint_path: Path | None = Path(os.path.expanduser(path)) if path else None
        self.model_directory = Path(
            os.path.expanduser(str(self.params["model_directory"]) or DEFAULT_MODEL_DIRECTORY)
        )
        self.allow_outside = bool(self.params["allow_paths_outside_model_directory"])
        # the node's own folders under model_directory, by fully qualified name (robots do not collide)
        own = Path(*self.get_fully_qualified_name().strip("/").split("/"))
        self.history = ModelHistory(
            self.model_directory / "previous" / own, int(self.params["keep_previous_models"])
        )
        self.received_directory = self.model_directory / "received" / own
        # one replacement of the serving model at a time (reload, reset, rollback); taken before model_lock
        self._replace_lock = threading.RLock()
        # the failure of the last checkpoint attempt; None when it succeeded
        self.checkpoint_error: str | None = None
        # what the restored checkpoint holds that differs from the parameters (the checkpoint wins)
        self.checkpoint_conflicts: list[str] = []
        self.checkpoint_bytes: int | None = None  # size of the last checkpoint written
        # lifecycle (rclpy's managed-node state machine and its services ~/change_state, ~/get_state)
        self.active = False
        self.ignored_inactive = 0  # input messages that arrived while the node was not active
        self._configured: list[Any] = []  # services, timers and subscriptions made by configure
        self._checkpoint_timer: Any = None
        # one checkpoint write at a time: the timer's (on its own thread) or the final one
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_writer: threading.Thread | None = None
        # modification time of the checkpoint restored by the last configure (None: none restored)
        self._restored_mtime_ns: int | None = None
        self._configure_error: Exception | None = None
        LifecycleNodeMixin.__init__(self, callback_group=self.service_group)

    # ---------------------------------------------------------------- subclass hooks
    def new_model(self) -> PersistentModel:
        """A fresh, untrained model from the node's parameters."""
        raise NotImplementedError

    def check_model(self, model: PersistentModel) -> None:
        """Raise ValueError if ``model`` (of the right kind, read from a file) does not fit this node."""

    def parameter_conflicts(self, model: PersistentModel) -> list[str]:
        """How a restored ``model``'s hyperparameters differ from this node's parameters, one text per
        difference (``"mode: checkpoint 'parametric', parameter 'semiparametric'"``); none by default."""
        return []

    def configure_learner(self) -> None:
        """Subclass hook of the configure transition, after the model services exist: build or
        restore the model (default :meth:`build_model`) and create the node's own services with
        :meth:`create_configured_service`. Raise ValueError/OSError to fail the transition."""
        self.build_model()

    # ---------------------------------------------------------------- lifecycle
    def start_learner(self) -> None:
        """Call at the end of the subclass ``__init__``: with ``autostart`` (the default), configure
        and activate now, as a lifecycle manager would; otherwise wait, unconfigured, for one.

        Raises:
            ValueError / OSError: the configuration failed (e.g. ``checkpoint_path`` is a directory
                or a symlink): the node does not start, exit status 2.
        """
        if not self.params["autostart"]:
            self.get_logger().info("autostart is false: unconfigured, waiting for a lifecycle manager")
            return
        if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            error = self._configure_error
            raise error if isinstance(error, ValueError | OSError) else ValueError("configure failed")
        self.trigger_activate()

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Configure: files checked, model services, checkpoint timer, model topic, then the model."""
        self._configure_error = None
        try:
            self._prepare_files()
            self.create_configured_service(SaveModel, "~/save_model", self._on_save)
            self.create_configured_service(LoadModel, "~/load_model", self._on_load)
            self.create_configured_service(Trigger, "~/reset", self._on_reset)
            self.create_configured_service(Trigger, "~/rollback", self._on_rollback)
            self._schedule_checkpoints(float(self.params["checkpoint_interval_s"]))
            # transient local: a model announced before this node started is still delivered (the
            # paths: the last 5; the bytes: the last 2, what the tuner keeps, one per kind in turn)
            self._subscribe_to_models(String, "model_topic", self._on_model_announced, depth=5)
            self._subscribe_to_models(ModelFileMessage, "model_data_topic", self._on_model_data, depth=2)
            self.configure_learner()
        except (ValueError, OSError) as exc:
            self._configure_error = exc
            self.get_logger().error(f"configure failed: {exc}")
            self._destroy_configured()
            return TransitionCallbackReturn.FAILURE
        self.get_logger().info("configured")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Activate: serve and learn from the input topics."""
        self.active = True
        self.get_logger().info("active: serving and learning")
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Deactivate: input messages are ignored (counted), the model is kept, services answer."""
        self.active = False
        self.get_logger().info("inactive: input topics ignored, model kept")
        return TransitionCallbackReturn.SUCCESS

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Clean up: final checkpoint, then the model and what configure created are dropped."""
        self.shutdown()
        self._destroy_configured()
        with self.model_lock:
            self.model = None
            self.forget_inputs()
        self.get_logger().info("cleaned up: model released (the checkpoint keeps it)")
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Shut down (from any state): the final checkpoint, if there is a model."""
        self.active = False
        self.shutdown()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A transition raised: back to unconfigured, model kept on disk by the last checkpoint."""
        self.active = False
        self.get_logger().error("a lifecycle transition failed; the node is unconfigured")
        self._destroy_configured()
        return TransitionCallbackReturn.SUCCESS

    def accepting(self) -> bool:
        """Only while active; messages that arrive otherwise are counted (``ignored while inactive``)."""
        if not self.active:
            self.ignored_inactive += 1
        return self.active

    def create_configured_service(self, srv_type: Any, name: str, callback: Callable[..., Any]) -> Any:
        """A service that exists while the node is configured (destroyed by cleanup)."""
        service = self.create_service(srv_type, name, callback, callback_group=self.service_group)
        self._configured.append(service)
        return service

    def _subscribe_to_models(
        self, msg_type: Any, param: str, callback: Callable[[Any], None], depth: int
    ) -> None:
        """A reliable, transient-local subscription on the topic parameter ``param`` names ('' = none)."""
        topic = str(self.params[param])
        if not topic:
            return
        qos = QoSProfile(
            depth=depth, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self._configured.append(
            self.create_subscription(msg_type, topic, callback, qos, callback_group=self.reload_group)
        )

    def _schedule_checkpoints(self, interval: float) -> None:
        if self._checkpoint_timer is not None:
            self.destroy_timer(self._checkpoint_timer)
            self._checkpoint_timer = None
        if self.checkpoint_path is not None and interval > 0:
            self._checkpoint_timer = self.create_timer(
                interval, self._checkpoint_off_the_callback_path, callback_group=self.service_group
            )

    def _checkpoint_off_the_callback_path(self) -> None:
        """The checkpoint timer: the snapshot (under the model lock) and the write run on a thread of
        their own, so that the executor goes on answering inputs meanwhile (a single-threaded
        executor would otherwise wait for the disk); a tick while the last write runs is skipped."""
        writer = self._checkpoint_writer
        if writer is not None and writer.is_alive():
            return
        self._checkpoint_writer = threading.Thread(
            target=self._background_checkpoint, name="checkpoint", daemon=True
        )
        self._checkpoint_writer.start()

    def _background_checkpoint(self) -> None:
        normal_policy_here()  # started by the executor's thread, which may run at a real-time priority
        self.checkpoint()

    def _destroy_configured(self) -> None:
        self._schedule_checkpoints(0.0)
        for entity in self._configured:
            if isinstance(entity, Service):
                self.destroy_service(entity)
            elif isinstance(entity, Subscription):
                self.destroy_subscription(entity)
        self._configured.clear()

    def apply_parameter(self, name: str, value: Any) -> None:
        super().apply_parameter(name, value)
        if name == "checkpoint_interval_s" and self._checkpoint_timer is not None:
            self._schedule_checkpoints(float(value))

    def build_model(self) -> None:
        """Restore the checkpoint (``restore_on_start``) or create a new model, and serve it.

        A checkpoint that cannot be read (corrupt, another format) or does not fit this node
        (:meth:`check_model`: other joints, robot, dimension) is moved aside with the reason in
        its name (``.unreadable-<time>`` / ``.incompatible-<time>``) and logged as an error; a
        fresh model serves. A readable, fitting checkpoint whose hyperparameters differ from the
        parameters is restored (it holds what was learned) and the conflicts are logged as
        warnings and shown in diagnostics: set ``restore_on_start`` false, or ``~/reset``, to
        start afresh with the parameters.
        """
        model = self.restore_checkpoint()
        with self.model_lock:
            self.model = model if model is not None else self.new_model()

    def restore_checkpoint(self) -> PersistentModel | None:
        """The checkpoint's model, or None (none, not wanted, or moved aside: see :meth:`build_model`)."""
        path = self.checkpoint_path
        self._restored_mtime_ns = None
        if path is None or not self.params["restore_on_start"] or not path.exists():
            return None
        try:
            mtime_ns = path.stat().st_mtime_ns
            model = self.model_class.from_model_file(load_model_file(path, kind=self.model_class.kind))
        except (ModelFileError, ValueError) as exc:
            self._move_aside(path, "unreadable", exc)
            return None
        try:
            self.check_model(model)
        except ValueError as exc:
            self._move_aside(path, "incompatible", exc)
            return None
        self.checkpoint_conflicts = self.parameter_conflicts(model)
        for conflict in self.checkpoint_conflicts:
            self.get_logger().warning(
                f"checkpoint {path} conflicts with the parameters, the checkpoint wins: {conflict}"
            )
        self.checkpoint_bytes = path.stat().st_size
        self._restored_mtime_ns = mtime_ns
        self.last_checkpoint = f"restored from {path}"
        self.get_logger().info(f"restored model from checkpoint {path}")
        return model

    def _move_aside(self, path: Path, why: str, exc: Exception) -> None:
        aside = path.with_name(f"{path.name}.{why}-{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(path, aside)
        self.get_logger().error(f"checkpoint {path} is {why} ({exc}); moved aside to {aside}")

    def _prepare_files(self) -> None:
        """Refuse a checkpoint path that is not a (possible) regular file; remove stale temporaries."""
        removed: list[Path] = []
        if self.checkpoint_path is not None:
            try:
                check_replaceable(self.checkpoint_path)
            except UnsafePathError as exc:
                raise UnsafePathError(f"checkpoint_path {self.params['checkpoint_path']!r}: {exc}") from exc
            removed += remove_stale_temporaries(self.checkpoint_path.parent, self.checkpoint_path.name)
        for folder in (self.model_directory, self.history.folder, self.received_directory):
            removed += remove_stale_temporaries(folder, min_age_s=STALE_TEMPORARY_AGE_S)
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

    def swap_model(self, model: Any, loaded_file: str | None = None) -> None:
        """Atomically replace the serving model (the checkpoint then differs from it).

        ``loaded_file``: the SHA-256 of the file ``model`` was read from, if any.
        """
        with self.model_lock:
            self.model = model
            self.model_version += 1
            self.updates_since_checkpoint += 1
            self._loaded_file = loaded_file

    @staticmethod
    def _file_key(path: Path) -> str | None:
        """The SHA-256 of the file's bytes (None if it cannot be read): what identifies a model file."""
        try:
            return hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            return None

    def replace_model(
        self,
        model: Any,
        why: str,
        loaded_file: str | None = None,
        before_swap: Callable[[], None] | None = None,
    ) -> str:
        """Serve ``model`` in place of the serving model, which is first kept for ``~/rollback``.

        Under the model lock: the serving model (if any, and unless ``keep_previous_models`` is 0)
        is written to the history (:meth:`ModelHistory.push`: exactly what served, no message in
        between), then ``before_swap`` runs (``~/reset``: :meth:`forget_inputs`) and the model is
        swapped in (:meth:`swap_model`); then the oldest previous models beyond the count are
        removed. ``why`` names the replacement in the file's name (``reload``, ``reset``).

        Returns:
            A note for the caller's answer: which file keeps the replaced model ('' if none).

        Raises:
            OSError / ModelFileError: the serving model could not be written; nothing changed.
        """
        with self._replace_lock:
            with self.model_lock:
                kept = None
                if self.model is not None and self.history.keep > 0:
                    kept = self.history.push(self.model.to_model_file(), why)
                if before_swap is not None:
                    before_swap()
                self.swap_model(model, loaded_file)
            for path in self.history.prune() if kept is not None else ():
                self.get_logger().info(f"removed the previous model {path} (keep_previous_models)")
        return "" if kept is None else f"; the model it replaced is kept for ~/rollback as {kept}"

    def _not_kept(self, exc: Exception) -> str:
        return (
            f"the serving model could not be kept for ~/rollback in {self.history.folder} ({exc}); "
            "free space there, or set keep_previous_models to 0 to replace models without keeping them"
        )

    def reload(self, path: str | os.PathLike[str], digest: str | None = None) -> tuple[bool, str]:
        """Hot reload: read and build the model in ``path`` outside the lock, then swap it in
        (:meth:`replace_model`: the replaced model is kept for ``~/rollback``).

        Returns ``(success, message)``. On failure the old model keeps serving, the failure
        is counted as the rejection ``"model reload failed"`` and logged as an error.
        """
        path = Path(path)
        key = digest or self._file_key(path)  # ``digest``: the SHA-256 of its bytes, when known
        try:
            model = self.read_model(path)  # outside the lock: the old model keeps serving
        except (ModelFileError, ValueError, OSError) as exc:
            return False, self._reload_failed(f"model reload from {path} failed, previous model kept: {exc}")
        try:
            kept = self.replace_model(model, "reload", key)
        except (ModelFileError, OSError) as exc:
            return False, self._reload_failed(
                f"model reload from {path} refused, previous model kept: {self._not_kept(exc)}"
            )
        with self.model_lock:
            version = self.model_version
        self.last_reload = f"{path} at {time.strftime('%Y-%m-%d %H:%M:%S')}"
        message = f"loaded {path} (model version {version}){kept}"
        self.get_logger().info(message)
        return True, message

    def rollback(self) -> tuple[bool, str]:
        """Serve the most recent previous model again (``~/rollback``); ``(success, message)``.

        The file is read and checked like a hot reload (:meth:`read_model`), outside the model
        lock; under it, the serving model is written to :attr:`ModelHistory.rolled_back` and the
        previous one swapped in; then its file leaves the history (the next rollback goes one
        further back). Nothing changes when there is nothing to roll back to, when no model serves
        yet, when the file does not fit the node now (other joints or dimension: left in place), is
        unreadable (moved aside as ``.unreadable-<time>``: the next rollback goes one further
        back), or when the serving model cannot be written.
        """
        with self._replace_lock:
            files = self.history.files() if self.history.keep > 0 else []
            if not files:
                why = (
                    "keep_previous_models is 0, no previous model is kept"
                    if self.history.keep == 0
                    else f"no previous model in {self.history.folder} (one is kept whenever a hot reload, "
                    "a received model or ~/reset replaces the serving model)"
                )
                return False, f"nothing to roll back to: {why}; the serving model is unchanged"
            newest = files[-1]
            with self.model_lock:
                serving = self.model is not None
            if not serving:
                return (
                    False,
                    f"no model serves yet, nothing to roll back from; ~/load_model can load {newest}",
                )
            try:
                model = self.read_model(newest)
            except ModelFileError as exc:
                aside = newest.with_name(f"{newest.name}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}")
                try:
                    os.replace(newest, aside)
                    moved = f"moved aside to {aside} (~/rollback again goes one further back)"
                except OSError as move_error:
                    moved = f"it could not be moved aside ({move_error})"
                message = (
                    f"the most recent previous model is unreadable ({exc}); {moved}; the serving model "
                    "is unchanged"
                )
                self.get_logger().error(message)
                return False, message
            except (ValueError, OSError) as exc:
                return False, (
                    f"the most recent previous model {newest} does not fit this node now ({exc}); "
                    "the serving model is unchanged"
                )
            rolled_back = self.history.rolled_back
            try:
                with self.model_lock:
                    save_model_file(rolled_back, self.model.to_model_file())
                    self.swap_model(model)
            except (ModelFileError, OSError) as exc:
                return (
                    False,
                    f"rollback refused, the serving model is unchanged: it could not be saved ({exc})",
                )
            try:
                newest.unlink()
            except OSError as exc:  # it would be rolled back to again: say so
                self.get_logger().error(f"could not remove {newest} from the previous models: {exc}")
            with self.model_lock:
                version = self.model_version
        left = f"{len(files) - 1} previous model{'s' if len(files) != 2 else ''} left"
        self.last_rollback = f"{time.strftime('%Y-%m-%d %H:%M:%S')}: to {newest.name}"
        message = (
            f"rolled back to {newest} (model version {version}); the model it replaced is saved as "
            f"{rolled_back} (~/load_model brings it back); {left}"
        )
        self.get_logger().info(message)
        return True, message

    def _on_rollback(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.rollback()
        if not response.success:
            self.get_logger().warning(f"~/rollback: {response.message}")
        return response

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
        self.reload(path, key)

    def _on_model_data(self, msg: ModelFileMessage) -> None:
        """A model file as bytes (``model_data_topic``): checked, stored, hot-reloaded (see the class)."""
        what = f"model {msg.name!r} received on {self.params['model_data_topic']}"
        if msg.kind != self.model_class.kind:
            self.ignored_model_files += 1
            self.get_logger().info(
                f"ignored {what}: a {msg.kind!r} model, this node loads {self.model_class.kind!r}"
            )
            return
        data = msg.data.tobytes() if hasattr(msg.data, "tobytes") else bytes(msg.data)
        limit = int(self.params["max_model_bytes"])
        if len(data) > limit:
            self._received(msg.name, "", f"refused: {len(data)} bytes, over max_model_bytes ({limit})")
            self.reject(
                "model too large", f"{what}: {len(data)} bytes, max_model_bytes is {limit}; model kept"
            )
            return
        digest = hashlib.sha256(data).hexdigest()
        if digest != msg.sha256.strip().lower():
            self._received(msg.name, digest, "refused: model checksum mismatch")
            self.reject(
                "model checksum mismatch",
                f"{what}: the SHA-256 of its {len(data)} bytes is {digest}, the message says "
                f"{msg.sha256[:80]!r} (damaged or incomplete); the serving model is unchanged",
            )
            return
        with self.model_lock:
            serving = digest == self._loaded_file
        if serving:  # e.g. the tuner's path announcement of the same model came first
            self.get_logger().info(f"{what} is the serving model already: not loaded again")
            return
        path = self.received_directory / received_file_name(msg.name, digest)
        if self._in_restored_checkpoint(path, digest):
            self.get_logger().info(
                f"{what} was loaded before ({path}) and the checkpoint restored at start was written after "
                "it (it holds that model, or what came after it): not loaded again"
            )
            return
        try:
            check_replaceable(path)
            atomic_write_bytes(path, data)
        except (OSError, UnsafePathError) as exc:
            self._received(msg.name, digest, f"refused: cannot be stored ({exc})")
            self._reload_failed(f"{what} could not be stored as {path}, previous model kept: {exc}")
            return
        ok, message = self.reload(path, digest)
        if not ok:  # refused: it leaves nothing behind
            path.unlink(missing_ok=True)
            self._received(msg.name, digest, f"refused: {message}")
            return
        self.models_received += 1
        self._received(msg.name, digest, "loaded")
        self._remove_received_but(path)

    def _remove_received_but(self, keep: Path) -> None:
        """Remove the files of models received before ``keep`` (the previous models keep what served)."""
        try:
            for other in self.received_directory.iterdir():
                if (
                    other != keep
                    and not other.name.startswith(".")
                    and not other.is_symlink()
                    and other.is_file()
                ):
                    other.unlink(missing_ok=True)
        except OSError as exc:
            self.get_logger().warning(
                f"could not remove older received models in {self.received_directory}: {exc}"
            )

    def _received(self, name: str, digest: str, outcome: str) -> None:
        """Record the last model received for diagnostics."""
        sha = f" (sha256 {digest[:12]})" if digest else ""
        self.last_model_received = f"{name!r}{sha} at {time.strftime('%Y-%m-%d %H:%M:%S')}: {outcome}"

    def _in_restored_checkpoint(self, path: Path, digest: str) -> bool:
        """Whether these bytes are a latched re-delivery (after a restart or a new configure) of the
        model received last, which the restored checkpoint already holds: ``path`` holds exactly
        them and the checkpoint was written after it. Without a restored checkpoint the node
        starts afresh, and loads the model again."""
        restored = self._restored_mtime_ns
        try:
            if restored is None or path.is_symlink() or not path.is_file():
                return False
            if path.stat().st_mtime_ns > restored:
                return False
            with open(path, "rb") as f:
                return hashlib.file_digest(f, "sha256").hexdigest() == digest
        except OSError:
            return False

    def checkpoint(self) -> bool:
        """Write the checkpoint if anything changed since the last one (or the last attempt failed).

        A failed write (disk full, no permission) leaves the model marked as changed: the next
        timer tick and the final checkpoint on shutdown try again; meanwhile
        :attr:`checkpoint_error` holds the failure and diagnostics report it at ERROR.
        Returns True when written. One write at a time: a call while the timer's write runs
        waits for it (the final checkpoint on shutdown then writes what came after).
        """
        if self.checkpoint_path is None:
            return False
        with self._checkpoint_lock:
            return self._write_checkpoint(self.checkpoint_path)

    def _write_checkpoint(self, path: Path) -> bool:
        with self.model_lock:
            if self.model is None:  # not configured (or the model is still to come)
                return False
            pending = self.updates_since_checkpoint
            if pending == 0 and self.checkpoint_error is None and path.exists():
                return False
            snap = self.model.to_model_file()
        try:
            save_model_file(path, snap)
        except (OSError, ModelFileError) as exc:
            first = self.checkpoint_error is None
            self.checkpoint_error = f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {exc}"
            retry = "will retry" if first else "still failing, will retry"
            self.get_logger().error(f"checkpoint to {path} failed ({retry}): {exc}")
            return False
        with self.model_lock:  # what was learned while writing stays pending
            self.updates_since_checkpoint = max(0, self.updates_since_checkpoint - pending)
        if self.checkpoint_error is not None:
            self.get_logger().info(f"checkpoint to {path} written again")
        self.checkpoint_error = None
        self.last_checkpoint = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            self.checkpoint_bytes = path.stat().st_size
        except OSError:
            self.checkpoint_bytes = None
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
        """A new model from the parameters; the old one is kept for ``~/rollback`` first."""
        why = kept = ""
        with self._replace_lock, self.model_lock:  # one step: no message sees the new stream state
            try:  # with the old model
                model = self.new_model()
            except ValueError as exc:  # e.g. no robot description yet
                why = f"no new model can be built: {exc}"
            if not why:
                try:
                    kept = self.replace_model(model, "reset", before_swap=self.forget_inputs)
                except (ModelFileError, OSError) as exc:
                    why = self._not_kept(exc)
        if why:
            response.success, response.message = False, f"reset refused, the model is unchanged: {why}"
            self.get_logger().error(response.message)
            return response
        response.success, response.message = True, f"model reset{kept}"
        self.get_logger().info(response.message)
        return response

    def diagnostic_values(self) -> dict[str, str]:
        values = super().diagnostic_values()
        values["lifecycle state"] = self._state_machine.current_state[1]
        values["ignored while inactive"] = str(self.ignored_inactive)
        values["checkpoint size [MB]"] = (
            "none written" if self.checkpoint_bytes is None else f"{self.checkpoint_bytes / 1e6:.2f}"
        )
        if self.checkpoint_conflicts:
            values["checkpoint conflicts (checkpoint wins)"] = "; ".join(self.checkpoint_conflicts)
        values["last checkpoint"] = self.last_checkpoint
        values["last checkpoint error"] = self.checkpoint_error or "none"
        values["last reload"] = self.last_reload
        values["ignored model files"] = str(self.ignored_model_files)
        values["model version"] = str(self.model_version)
        values["previous models kept"] = f"{len(self.history.files())} of {self.history.keep}"
        values["last rollback"] = self.last_rollback
        values["models received"] = str(self.models_received)
        values["last model received"] = self.last_model_received
        return values

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        problems = super().diagnostic_problems()
        error = self.checkpoint_error
        if error is not None:
            text = f"checkpoint failing ({error}); last written: {self.last_checkpoint}"
            problems.append((DiagnosticStatus.ERROR, text))
        return problems

    def idle_message(self) -> str:
        state = self._state_machine.current_state[1]
        return "running" if state == "active" else f"{state} (lifecycle)"

    def shutdown(self) -> None:
        """Final checkpoint; called by :func:`run_node` on exit."""
        if self.checkpoint():
            self.get_logger().info(f"final checkpoint written to {self.checkpoint_path}")

    def destroy_node(self) -> None:
        """Destroy the node and its lifecycle services. rclpy's ``destroy_node`` leaves those (they
        belong to the lifecycle state machine) in the graph until the node object is garbage
        collected: another node of the same name then shares ``~/get_state`` with a dead one."""
        super().destroy_node()
        machine = getattr(self, "_state_machine", None)  # None: the constructor failed before it
        if machine is not None:
            machine.destroy_when_not_in_use()


def run_node(
    factory: Callable[..., Node], args: Sequence[str] | None = None, threads: int | None = None
) -> int:
    """Run one node until Ctrl-C/SIGTERM; learner nodes write a final checkpoint on the way out.

    The ``main()`` of every node executable: :func:`lifelong_learning.nodes._runner.run_nodes`
    with one node (signals, callback failures and the final checkpoint are handled there).
    """
    from lifelong_learning.nodes._runner import run_nodes

    return run_nodes([factory], args, threads)
