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

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.clock import JumpThreshold, TimeJump
from rclpy.duration import Duration
from rclpy.exceptions import InvalidHandle
from rclpy.node import Node
from rclpy.qos_overriding_options import QoSOverridingOptions

from lifelong_learning.core.losses import SequenceLossCounter

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
        :func:`~lifelong_learning.nodes.runner.run_nodes` applies it when the node has its process
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
