"""What every node of this package shares (imports rclpy: only for modules that run nodes).

- :class:`ParamSpec` / :meth:`NodeBase.declare_specs`: parameters declared with descriptions;
  the defaults in code equal those in ``config/<node>.yaml`` (a test checks it).
- :class:`RejectionCounter`: bad input is counted per reason and warned about at most once
  per ``warn_period_s`` per reason (with the count since the last warning), never raised.
- :class:`NodeStats` + diagnostics: input rates, update latency, rejected and dropped
  messages, published as ``diagnostic_msgs/DiagnosticArray`` on ``/diagnostics``; the level is
  the worst of :meth:`NodeBase.diagnostic_problems` (WARN while rejections or drops rise; ERROR
  while a learner's checkpoints fail).

A node that holds a learned model is a :class:`~lifelong_learning.nodes.learner.LearnerNode`;
the ``main()`` of every node executable is :func:`~lifelong_learning.nodes.runner.run_node`.
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
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.clock import JumpThreshold, TimeJump
from rclpy.duration import Duration
from rclpy.event_handler import SubscriptionEventCallbacks, UnsupportedEventTypeError
from rclpy.exceptions import InvalidHandle
from rclpy.node import Node
from rclpy.qos_overriding_options import QoSOverridingOptions
from rclpy.serialization import deserialize_message

from lifelong_learning.core.losses import SequenceLossCounter, TransportLossCounter

#: the task part of every node's diagnostic status name, ``<node's fully qualified name>: health``
DIAGNOSTIC_TASK = "health"


def status_node(status_name: str) -> str:
    """The node's fully qualified name (without the leading '/') in a status name of this package."""
    return status_name.rsplit(f": {DIAGNOSTIC_TASK}", 1)[0]


#: a jump back of the node's clock by more than this (a ``/clock`` reset under ``use_sim_time``:
#: a simulator reset, a bag replayed again) is logged and counted
CLOCK_JUMP_BACK_S = 0.1
#: jumps back less than this many seconds (wall clock) after the previous one belong to the same
#: reset: the time of two ``/clock`` publishers alternating (a simulator and a bag played with
#: ``--clock``, a stale simulator) jumps back at every other tick, and is one reset, logged once
CLOCK_RESET_QUIET_S = 1.0
#: jumps back within one reset after which the node logs, once, that the clock keeps jumping back
CLOCK_STUTTER_JUMPS = 3
#: why an input message is refused when the bytes that arrived are no message of its type
UNDECODABLE = "undecodable message"
#: what is said about messages lost in transport on a stream that names no remedy of its own
GENERIC_LOSS_REMEDY = (
    "the middleware reports them lost on the way (best effort does not resend): a lossy network "
    "link, or a sender whose messages are too large for its transport"
)


def model_home() -> Path:
    """The package's directory under the ROS home: ``$ROS_HOME/lifelong_learning`` (``~/.ros`` when
    ``ROS_HOME`` is unset, as ROS 2 itself does): model files, checkpoints, bags by default."""
    return Path(os.environ.get("ROS_HOME") or "~/.ros").expanduser() / "lifelong_learning"


def directory_or_default(value: str, below: str = "") -> Path:
    """A directory parameter's path: ``value`` ('~' expanded), or :func:`model_home` / ``below`` when ''."""
    if value:
        return Path(os.path.expanduser(value))
    return model_home() / below if below else model_home()


@dataclass(frozen=True)
class ParamSpec:
    """One declared ROS parameter: name, default (its type is the parameter's), description.

    ``bounds``: the inclusive range of a numeric parameter (an int or float range in its
    descriptor: rclpy refuses a value outside it, from a params file at start and at run time).
    ``minimum_nonzero``: a value in (0, ``minimum_nonzero``) is refused too, so that 0 keeps its
    meaning (off, or every one) and an absurd period or size (``1e-9`` s, ``5e-324`` Hz) is not
    taken: a ROS range cannot say "0 or at least m", so :meth:`problem` says it, and
    :class:`NodeBase` applies it at start (the node does not start: exit status 2) and at run
    time (the change is refused with the reason).
    ``at_run_time``: the node applies a change while it runs (:meth:`NodeBase.apply_parameter`);
    every other parameter is read-only, so that setting it at run time is refused with a reason
    instead of succeeding and changing nothing.
    ``also_auto``: the string ``auto`` is a value too (a dynamically typed parameter: rclpy checks
    ``bounds`` on numbers, the node reads ``auto``), e.g. ``forgetting: auto``.
    """

    name: str
    default: Any
    description: str
    bounds: tuple[float, float] | None = None
    at_run_time: bool = False
    minimum_nonzero: float | None = None
    also_auto: bool = False

    def __post_init__(self) -> None:
        if self.minimum_nonzero is not None:
            low, high = self.bounds if self.bounds is not None else (None, None)
            if low != 0 or not 0 < self.minimum_nonzero <= high:
                raise ValueError(f"parameter {self.name}: minimum_nonzero needs bounds from 0 above it")
            if self.default != 0 and self.default < self.minimum_nonzero:
                raise ValueError(f"parameter {self.name}: its default is below minimum_nonzero")

    def range_text(self) -> str:
        """The values allowed, in words: ``[0, 3600]`` or ``0 or [0.01, 3600]`` ('' if unbounded)."""
        if self.bounds is None:
            return ""
        low, high = self.bounds
        auto = " or auto" if self.also_auto else ""
        if self.minimum_nonzero is not None:
            return f"0 or [{self.minimum_nonzero:g}, {high:g}]{auto}"
        return f"[{low:g}, {high:g}]{auto}"

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is outside the parameter's range (None when it is not, or not a number)."""
        if self.bounds is None or isinstance(value, bool) or not isinstance(value, int | float):
            return None
        low, high = self.bounds
        inside = low <= value <= high and not (
            self.minimum_nonzero is not None and 0 < value < self.minimum_nonzero
        )
        return None if inside else f"{self.name} is {value!r}, outside its range {self.range_text()}"

    def descriptor(self) -> ParameterDescriptor:
        """The parameter's descriptor: description, read-only unless applied at run time, range."""
        desc = ParameterDescriptor(
            description=self.description, read_only=not self.at_run_time, dynamic_typing=self.also_auto
        )
        if self.bounds is not None:
            low, high = self.bounds
            numeric = 0.0 if self.also_auto and self.default == "auto" else self.default  # auto: doubles
            if isinstance(numeric, bool) or not isinstance(numeric, int | float):
                raise TypeError(f"parameter {self.name}: bounds need a numeric default")
            if isinstance(numeric, int):
                desc.integer_range = [IntegerRange(from_value=int(low), to_value=int(high), step=1)]
            else:
                desc.floating_point_range = [
                    FloatingPointRange(from_value=float(low), to_value=float(high), step=0.0)
                ]
            desc.additional_constraints = self.range_text().replace("[", "in [", 1)
        return desc


class RejectionCounter:
    """Counts rejected inputs per reason; logs a warning at most once per period per reason."""

    def __init__(self, logger: Any, warn_period_s: float = 5.0, what: str = "rejected input"):
        self._logger = logger
        self.period = float(warn_period_s)
        self.what = what  # the log line's start: "<what> [<reason>]: <detail>"
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

    def reject(self, reason: str, detail: str = "", warn: bool = True, count: int = 1) -> None:
        """Count ``count`` (one) rejections of ``reason``; warn if this reason has not warned recently.

        ``warn=False`` only counts (for callers that log the event themselves).
        """
        now = time.monotonic()
        with self._lock:
            self.counts[reason] = self.counts.get(reason, 0) + count
            if not warn:
                return
            self._since_warn[reason] = self._since_warn.get(reason, 0) + count
            if now - self._last_warn.get(reason, -1e18) < self.period:
                return
            n = self._since_warn[reason]
            self._since_warn[reason] = 0
            self._last_warn[reason] = now
        extra = f" ({n} since the last warning)" if n > 1 else ""
        self._logger.warning(f"{self.what} [{reason}]{extra}: {detail}")


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


class ClockResets:
    """Jumps back of a node's clock grouped into resets (thread-safe): a jump back more than
    ``quiet_s`` (wall clock) after the previous one starts a reset, those sooner belong to it."""

    def __init__(self, quiet_s: float = CLOCK_RESET_QUIET_S):
        self.quiet_s = quiet_s
        self._lock = threading.Lock()
        self.resets = 0  # resets so far
        self.jumps = 0  # jumps back so far (rclpy's jump callbacks)
        self._last = -float("inf")
        self._in_reset = 0

    def jumped(self, now: float) -> int:
        """Note one jump back at ``now`` (``time.monotonic()``); returns which jump of its reset it
        is (1: it starts a reset)."""
        with self._lock:
            self.jumps += 1
            if now - self._last > self.quiet_s:
                self.resets += 1
                self._in_reset = 0
            self._last = now
            self._in_reset += 1
            return self._in_reset

    def snapshot(self) -> tuple[int, int]:
        """``(resets, jumps)`` so far."""
        with self._lock:
            return self.resets, self.jumps


class NodeBase(Node):
    """A node with declared parameters, counted rejections, stats and diagnostics."""

    #: parameters every node of this package has
    COMMON_PARAMS: tuple[ParamSpec, ...] = (
        ParamSpec(
            "warn_period_s",
            5.0,
            "At most one warning per this many seconds per rejection reason; 0 warns of every one "
            "(settable at run time).",
            bounds=(0.0, 3600.0),
            at_run_time=True,
            minimum_nonzero=0.01,
        ),
        ParamSpec(
            "diagnostics_period_s",
            1.0,
            "Period of diagnostic_msgs/DiagnosticArray on /diagnostics; 0 disables (settable at run time).",
            bounds=(0.0, 3600.0),
            at_run_time=True,
            minimum_nonzero=0.01,
        ),
        ParamSpec(
            "input_timeout_s",
            5.0,
            "Diagnostics WARN when a stream that had messages (joint states, images, features) has had "
            "none for this long; 0 disables (settable at run time).",
            bounds=(0.0, 3600.0),
            at_run_time=True,
            minimum_nonzero=0.1,
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
        # before the declarations: a value out of range stops the node at start as at run time
        self.add_on_set_parameters_callback(self._check_parameters)
        self.params = self.declare_specs(list(self.specs.values()))
        self.rejections = RejectionCounter(self.get_logger(), self.params["warn_period_s"])
        # messages the middleware reports lost on the way (per stream), with what to do about it
        self.lost_in_transport = RejectionCounter(
            self.get_logger(), self.params["warn_period_s"], what="messages lost in transport"
        )
        # readings of the middleware's loss counter that it could not have counted (not added)
        self.loss_reports_refused = RejectionCounter(
            self.get_logger(), self.params["warn_period_s"], what="middleware loss reports refused"
        )
        self._loss_remedies: dict[str, str] = {}
        self._published_transport: dict[str, int] = {}
        self.stats = NodeStats()
        self.dropped = 0
        self.realtime = "off"  # what run_nodes did with realtime_request() (diagnostics of nodes that ask)
        # the threads run_nodes put on SCHED_FIFO (core.realtime.RealtimeThreads), None when it did not
        self.realtime_threads: Any = None
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
        self.clock_resets = ClockResets()
        self._published_clock = (0, 0)
        self._clock_jump_handle = self.get_clock().create_jump_callback(
            JumpThreshold(
                min_forward=None, min_backward=Duration(seconds=-CLOCK_JUMP_BACK_S), on_clock_change=False
            ),
            post_callback=self._on_clock_jump,
        )

    def _on_clock_jump(self, jump: TimeJump) -> None:
        """A jump back of ROS time (a ``/clock`` reset): logged once per reset and counted
        (:class:`ClockResets`: the jumps back of time alternating between two ``/clock`` publishers
        are one reset, and said once). The inputs' stamps go back with it and each stream's own
        rules take them up again (the inverse_dynamics guard restarts its acceleration filter);
        nothing learned is lost."""
        nth = self.clock_resets.jumped(time.monotonic())
        if nth == 1:
            self.get_logger().warning(
                f"the clock jumped back by {-jump.delta.nanoseconds * 1e-9:.3f} s (/clock reset: a simulator "
                "reset or a bag replayed again); inputs stamped with the new time are taken up, the model "
                "is kept"
            )
        elif nth == CLOCK_STUTTER_JUMPS:
            self.get_logger().warning(
                f"the clock keeps jumping back ({nth} jumps back less than {CLOCK_RESET_QUIET_S:g} s apart, "
                f"counted as one reset): /clock has {self.count_publishers('/clock')} publisher(s); with "
                "several (a simulator and a bag played with --clock, a stale simulator) time alternates "
                "between them: keep one"
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
        The value is already checked (type and ``bounds`` by rclpy, ``minimum_nonzero`` by
        :meth:`_check_parameters`).
        """
        self.params[name] = value
        if name == "warn_period_s":
            self.rejections.period = self.lost_in_transport.period = float(value)
            self.loss_reports_refused.period = float(value)
        elif name == "diagnostics_period_s":
            self._schedule_diagnostics(float(value))

    def _check_parameters(self, params: list[Any]) -> SetParametersResult:
        """rclpy's on-set callback, at declaration (start) and at every change (run time): a value
        outside its spec's range (:meth:`ParamSpec.problem`) is refused with the reason."""
        for prm in params:
            spec = self.specs.get(prm.name)
            problem = spec.problem(prm.value) if spec is not None else None
            if problem is not None:
                return SetParametersResult(successful=False, reason=problem)
        return SetParametersResult(successful=True)

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
        *,
        keep_bytes: bool = False,
        loss_remedy: str = "",
        **kwargs: Any,
    ) -> Any:
        """``create_subscription`` for an input stream: its QoS can be overridden by parameters, it
        counts the messages it never processed or could not decode, and it ignores input while the
        node is not :meth:`accepting` (a deactivated lifecycle node).

        - QoS overrides (rclpy's ``QoSOverridingOptions.with_default_policies()``): reliability,
          durability, history and depth of ``topic`` are read-only parameters
          ``qos_overrides.<topic>.subscription.<policy>``, set in a params file or on the command
          line (e.g. a camera driver that publishes reliable only).
        - Losses (:mod:`lifelong_learning.core.losses`): from the publishers' sequence numbers, the
          messages lost by DDS or overwritten in the subscription's queue while the node was busy;
          shown in diagnostics as ``<stream> lost``, WARN while it rises.
        - Losses in transport: the samples the middleware itself reports lost on the way (rmw's
          message-lost event: a sample, or fragments of one, that a matched publisher sent and never
          arrived whole; not those overwritten in the queue). Counted in ``<stream> lost in
          transport``, WARN in diagnostics and in the log (rate-limited) with ``loss_remedy``: what
          to do about it (camera frames: the sender's Fast DDS profile). The event's running total
          is read as :class:`~lifelong_learning.core.losses.TransportLossCounter` says: an increase
          larger than the publishers could have sent (Fast DDS miscounts some dropped fragmented
          samples as 2³¹ − 1) is not counted, but counted in ``<stream> loss reports refused``
          and logged.
        - Undecodable messages: the subscription takes the serialized bytes and decodes them here,
          so that bytes that are no ``msg_type`` (rclpy would drop them silently) are refused and
          counted (:data:`UNDECODABLE`). ``raw=True``: the callback gets the bytes, undecoded (the
          bag recorder); ``keep_bytes``: the callback gets ``(message, bytes)``.

        ``batch`` ≥ 1: the callback gets a list of up to ``batch`` ``(message, info)`` pairs, oldest
        first: the message the executor took and those already waiting in the subscription's
        queue, taken at once from its handle (rclpy's ``take_message``, what the executor itself
        calls). At control rates the executor's own work per message (a wait set, a task) costs
        more than a cheap callback; a backlog taken in one call costs it once, and the callback
        can answer the block with array operations. ``info`` is rclpy's message info (a dict with
        ``received_timestamp``, ns since the epoch: when the middleware received the message).
        """
        taken_from: list[Any] = []  # the subscription, once created
        undecoded = bool(kwargs.pop("raw", False))
        decode = None if undecoded else self._decoder(msg_type, topic)

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

        def on_message(data: Any, info: Any) -> None:
            items = waiting((data, info)) if batch >= 1 else [(data, info)]
            for _, item_info in items:
                record(item_info)
            if not self.accepting():
                return
            if decode is not None:
                items = [(msg, item_info) for raw, item_info in items if (msg := decode(raw)) is not None]
                if not items:
                    return
            if batch >= 1:
                callback(items)
            elif keep_bytes:
                callback(items[0][0], data)
            else:
                callback(items[0][0])

        self._loss_remedies[stream] = loss_remedy
        kwargs.setdefault("qos_overriding_options", QoSOverridingOptions.with_default_policies())
        kwargs.setdefault(
            "event_callbacks", SubscriptionEventCallbacks(message_lost=self._on_lost(stream, topic))
        )
        try:
            subscription = self.create_subscription(msg_type, topic, on_message, qos, raw=True, **kwargs)
        except UnsupportedEventTypeError:  # an RMW without the message-lost event: sequence numbers only
            kwargs["event_callbacks"] = None
            subscription = self.create_subscription(msg_type, topic, on_message, qos, raw=True, **kwargs)
        taken_from.append(subscription)
        return subscription

    def _decoder(self, msg_type: Any, topic: str) -> Callable[[bytes], Any]:
        """Bytes → a ``msg_type`` message, or None when they are none (refused: :data:`UNDECODABLE`)."""
        type_name = f"{msg_type.__module__.split('.')[0]}/{msg_type.__name__}"
        where = self.resolve_topic_name(topic)

        def decode(data: bytes) -> Any:
            try:
                return deserialize_message(data, msg_type)
            except (RuntimeError, ValueError, TypeError) as exc:
                self.reject(UNDECODABLE, f"{len(data)} bytes on {where} are no {type_name}: {exc}")
                return None

        return decode

    def _on_lost(self, stream: str, topic: str) -> Callable[[Any], None]:
        """The message-lost event callback of one subscription of ``stream``: counts what the
        event's running total can have counted (:class:`TransportLossCounter`), warns with the
        remedy, and counts and logs a reading it refuses."""
        counter = TransportLossCounter(time.monotonic())

        def lost(status: Any) -> None:
            before = counter.counted
            n, refused = counter.reading(status.total_count, time.monotonic())
            where = self.resolve_topic_name(topic)
            if refused:
                self.loss_reports_refused.reject(
                    stream,
                    f"the middleware's count of messages lost on {where} reads {status.total_count} "
                    f"(reported change {status.total_count_change}, {before} counted before): more than "
                    f"its publishers could have sent since its previous report; {n} counted",
                )
            if n > 0:
                remedy = self._loss_remedies.get(stream) or GENERIC_LOSS_REMEDY
                detail = (
                    f"{n} message(s) on {where} that a matched publisher sent never arrived whole: {remedy}"
                )
                self.lost_in_transport.reject(stream, detail, count=n)

        return lost

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
        resets, jumps = self.clock_resets.snapshot()
        if resets:
            values["clock resets"] = str(resets)
            values["clock jumps back"] = str(jumps)
        for stream, n in sorted(self.losses.snapshot().items()):
            values[f"{stream} lost"] = str(n)
        for stream, n in sorted(self.lost_in_transport.snapshot().items()):
            values[f"{stream} lost in transport"] = str(n)
        for stream, n in sorted(self.loss_reports_refused.snapshot().items()):
            values[f"{stream} loss reports refused"] = str(n)
        return values

    def diagnostic_problems(self) -> list[tuple[bytes, str]]:
        """What is wrong now, as ``(DiagnosticStatus level, short text)``; subclasses extend it (super()).

        The rules (documented in docs/diagnostics.md), judged over the time since the previous
        diagnostics publication:

        - rejected inputs: WARN; ERROR when they are at least half of the inputs that arrived
          (and at least 10): the node is answering little of what it is sent;
        - messages dropped from a full queue, or lost before the node processed them: WARN;
        - messages the middleware reports lost in transport: WARN, with the stream's remedy;
        - a stream of :attr:`MAIN_STREAMS` that had messages and has had none for
          ``input_timeout_s``: WARN (a driver stopped, a remapping broke);
        - the node's clock was reset (jumped back, a ``/clock`` reset under ``use_sim_time``):
          WARN, once; jumps back that go on within the reset (two ``/clock`` publishers): WARN
          while they do.

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
        problems += self._transport_problems(elapsed) + self._clock_problems(elapsed)
        problems += self._silent_streams()
        return problems

    def _transport_problems(self, elapsed: float) -> list[tuple[bytes, str]]:
        now = self.lost_in_transport.snapshot()
        rose = {k: n - self._published_transport.get(k, 0) for k, n in sorted(now.items())}
        self._published_transport = now
        return [
            (
                DiagnosticStatus.WARN,
                f"{n} {stream} message{'s' if n != 1 else ''} lost in transport in the last {elapsed:.1f} s: "
                + (self._loss_remedies.get(stream) or GENERIC_LOSS_REMEDY),
            )
            for stream, n in rose.items()
            if n > 0
        ]

    def _clock_problems(self, elapsed: float) -> list[tuple[bytes, str]]:
        (resets, jumps), (published_resets, published_jumps) = (
            self.clock_resets.snapshot(),
            self._published_clock,
        )
        self._published_clock = (resets, jumps)
        problems: list[tuple[bytes, str]] = []
        if resets > published_resets:
            problems.append(
                (
                    DiagnosticStatus.WARN,
                    f"the clock was reset ({resets - published_resets}x in the last {elapsed:.1f} s)",
                )
            )
        more = (jumps - published_jumps) - (resets - published_resets)
        if more > 0:
            problems.append(
                (
                    DiagnosticStatus.WARN,
                    f"the clock keeps jumping back ({more} more jumps back in the last {elapsed:.1f} s): "
                    "several /clock publishers?",
                )
            )
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
        :func:`~lifelong_learning.nodes.runner.run_nodes` applies it when the node has its process
        to itself (:mod:`lifelong_learning.core.realtime`) and reports the outcome in
        :attr:`realtime`."""
        return 0, []

    def stopping(self) -> None:
        """Called when the process stops, before its executor waits for running callbacks: a
        node whose callbacks can run long (a tuning job) tells them to end here."""

    def finish(self) -> None:
        """Called when the process stops, after the final checkpoints and before the nodes are
        destroyed: the node ends what it runs and writes itself (a bag is closed here), outside the
        teardown's deadline (nodes/runner.py). Called again by the node's ``destroy_node`` where it
        matters, so it must do nothing the second time."""

    def _publish_diagnostics(self) -> None:
        if self.realtime_threads is not None:  # middleware threads started or named since: SCHED_FIFO too
            self.realtime_threads.catch_up()
            self.realtime = self.realtime_threads.describe()
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
