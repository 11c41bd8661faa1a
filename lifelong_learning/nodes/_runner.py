"""Run several nodes in one process until Ctrl-C or SIGTERM, with final checkpoints.

:func:`run_nodes` is the main loop of ``lifelong-learning up`` (every node in one process)
and works for a single node as well:

- one executor serves every node: a SingleThreadedExecutor for one node (the node executables:
  it keeps up with 100 Hz joint states where a MultiThreadedExecutor did not), a
  MultiThreadedExecutor for several (`up`);
- an exception raised by a callback does not stop the process: it is counted on the node
  whose callback raised (``reject("internal error", ...)``), logged with its traceback, and
  the nodes keep serving;
- SIGINT (Ctrl-C), SIGTERM and SIGHUP (unless ignored, as under ``nohup``) are handled
  alike. rclpy's own handlers (SIGINT and SIGTERM in Kilted) are not installed: they shut the
  context down at once, so that the final checkpoint would be logged by a dead context, and a
  second Ctrl-C would interrupt it with KeyboardInterrupt. Instead the first signal ends
  spinning, every :class:`~lifelong_learning.nodes._base.LearnerNode` writes its final
  checkpoint (:meth:`shutdown`) while the context is still valid, then the nodes are destroyed.
  Further signals while this happens are ignored (``ros2 launch`` and a terminal both send
  SIGINT on Ctrl-C); the checkpoint writes are atomic, so even SIGKILL cannot corrupt a file.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from types import TracebackType

import rclpy
from rclpy.exceptions import NameValidationException, ParameterException
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.logging import get_logger
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from lifelong_learning.core.realtime import make_realtime
from lifelong_learning.nodes._base import LearnerNode, NodeBase
from lifelong_learning.nodes.supervisor import STOP_SIGNALS, StopSignals, stop_signals

__all__ = ["EXECUTOR_VARIABLE", "STOP_SIGNALS", "make_executor", "owner_of", "run_nodes", "stop_signals"]


def owner_of(tb: TracebackType | None, nodes: Sequence[Node]) -> Node | None:
    """The node whose method raised: the outermost frame of ``tb`` whose ``self`` is one of ``nodes``."""
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if any(owner is node for node in nodes):
            return owner
        tb = tb.tb_next
    return nodes[0] if len(nodes) == 1 else None


def _spin(executor: Executor, nodes: Sequence[Node], stop: StopSignals) -> None:
    """Spin until a stop is requested; a failing callback is counted on its node, never fatal."""
    recent: deque[BaseException] = deque(maxlen=64)
    while not stop.event.is_set() and rclpy.ok():
        try:
            executor.spin_once(timeout_sec=0.25)
        except (KeyboardInterrupt, ExternalShutdownException):
            raise
        except Exception as exc:  # a bug in one callback must not stop the robot
            # The model is untouched by a failed callback (learners validate before they
            # change state); count it on its node, log it with its traceback, keep serving.
            # rclpy may hand a task to the thread pool twice (yielded again before it
            # started), and then raises its exception twice: count each failure once.
            if any(exc is seen for seen in recent):
                continue
            recent.append(exc)
            owner = owner_of(exc.__traceback__, nodes)
            if isinstance(owner, NodeBase):
                owner.reject("internal error", f"{type(exc).__name__}: {exc}")
            logger = owner.get_logger() if owner is not None else get_logger("run_nodes")
            logger.error(f"callback failed, node keeps running:\n{traceback.format_exc()}")


def _apply_realtime(nodes: Sequence[Node], executor: Executor) -> None:
    """Real-time scheduling for a node that asks for it (:meth:`NodeBase.realtime_request`), on
    this thread (the one that spins the executor) and the middleware's threads. Only for a node
    alone in its process on a single-threaded executor: otherwise the spinning thread also serves
    the other nodes, or is not the one that answers. Refused or not applicable: logged, in the
    node's diagnostics, and the node runs on at the normal policy."""
    for node in nodes:
        if not isinstance(node, NodeBase):
            continue
        priority, keep_normal = node.realtime_request()
        if priority <= 0:
            continue
        logger = node.get_logger()
        if len(nodes) > 1 or isinstance(executor, MultiThreadedExecutor):
            why = "the node shares its process" if len(nodes) > 1 else "a multi-threaded executor spins it"
            node.realtime = f"not applied: {why}"
            logger.warning(
                f"realtime_priority {priority} not applied ({why}): it needs the node alone in its "
                "process on a single-threaded executor (its executable, or `up --processes`)"
            )
            continue
        try:
            applied = make_realtime(priority, keep_normal)
        except OSError as exc:  # PermissionError: no rtprio allowance
            node.realtime = f"refused: {exc}"
            logger.warning(
                f"realtime_priority {priority} refused ({exc}): the node runs at the normal policy. "
                "Allow real-time priorities to this user (an rtprio limit in "
                "/etc/security/limits.conf, as for ros2_control) or set realtime_priority to 0."
            )
            continue
        node.realtime = applied.describe()
        logger.info(f"real-time scheduling: {node.realtime}")


def _finish_callbacks(executor: Executor, timeout_s: float = 10.0) -> None:
    """Let callbacks already handed to the thread pool finish before the final checkpoints.

    Spinning has stopped, but a callback taken before the stop may still be updating a model on
    a pool thread; a checkpoint written now would lose its sample. A callback that hangs longer
    than ``timeout_s`` is left behind (logged) rather than blocking the checkpoints forever.
    """
    done = threading.Thread(target=executor.shutdown, daemon=True, name="executor-shutdown")
    done.start()
    done.join(timeout_s)
    if done.is_alive():
        get_logger("run_nodes").warning(
            f"a callback is still running after {timeout_s:g} s; writing the checkpoints anyway"
        )


def _final_checkpoints(nodes: Sequence[Node]) -> None:
    """The final checkpoint of every learner node; one that fails does not prevent the others."""
    for node in nodes:
        if isinstance(node, LearnerNode):
            try:
                node.shutdown()
            except Exception:
                print(f"[ERROR] final checkpoint of {node.get_name()} failed:", file=sys.stderr)
                traceback.print_exc()


#: environment variable that chooses the executor of a process: ``single``, ``events`` or ``multi``
EXECUTOR_VARIABLE = "LIFELONG_LEARNING_EXECUTOR"
EXECUTORS = ("single", "events", "multi")


def make_executor(threads: int | None, n_nodes: int) -> Executor:
    """The executor of a process: :data:`EXECUTOR_VARIABLE` when set, else a SingleThreadedExecutor for
    ``threads == 1`` and a MultiThreadedExecutor (``threads``, default two per node) otherwise.

    Measured with ``benchmarks/bench_control_rate.py`` (inverse_dynamics fed 1 kHz joint states from
    another process on 2 cores; docs/benchmarks/control-rate.md): single-threaded and rclpy's
    experimental EventsExecutor both keep up, the MultiThreadedExecutor answers far fewer. The
    node executables therefore default to ``single``; ``events`` is there to measure again with a
    later rclpy.

    Raises:
        ValueError: an unknown value of :data:`EXECUTOR_VARIABLE`.
    """
    kind = os.environ.get(EXECUTOR_VARIABLE, "").strip().lower()
    if kind and kind not in EXECUTORS:
        raise ValueError(f"{EXECUTOR_VARIABLE}={kind!r}: choose one of {', '.join(EXECUTORS)}")
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor()
    if kind == "single" or (not kind and threads == 1):
        return SingleThreadedExecutor()
    return MultiThreadedExecutor(num_threads=threads or 2 * max(1, n_nodes))


def run_nodes(
    factories: Sequence[Callable[[], Node]],
    args: Sequence[str] | None = None,
    threads: int | None = None,
) -> int:
    """Create the nodes and spin them in one process until SIGINT/SIGTERM; returns the exit status.

    Args:
        factories: one callable per node, called without arguments after ``rclpy.init`` (the
            node classes themselves, typically).
        args: command-line arguments for ``rclpy.init`` (``--ros-args`` ... applies to every
            node of the process; a params file configures the nodes it names).
        threads: executor threads; 1 = a SingleThreadedExecutor (what a one-node executable uses:
            at 100 Hz joint states the inverse_dynamics node answered >= 90 % in every run of
            test/nodes/test_robot_ready.py, a 2-thread MultiThreadedExecutor 236 and 414 of 500 in
            two runs); default two per node.

    Returns 0 after a clean stop, 2 when a node cannot start because of its configuration
    (``ValueError`` / ``OSError`` from its constructor, or rclpy's parameter and name errors: a
    parameter of the wrong type, an invalid topic name; a clear message, no traceback, and
    the nodes already created are destroyed without a checkpoint).
    """
    stop = StopSignals("run_nodes", "writing the final checkpoints").install()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    nodes: list[Node] = []
    executor: Executor | None = None
    started = False
    try:
        for factory in factories:
            if stop.event.is_set():
                break
            try:
                nodes.append(factory())
            except (ValueError, OSError, ParameterException, NameValidationException) as exc:
                # bad parameters (values or types), invalid names, missing files: not a crash
                print(f"[ERROR] cannot start the node: {exc}", file=sys.stderr, flush=True)
                return 2
        started = True
        try:
            executor = make_executor(threads, len(nodes))
        except ValueError as exc:
            print(f"[ERROR] cannot start the node: {exc}", file=sys.stderr, flush=True)
            return 2
        for node in nodes:
            executor.add_node(node)
        _apply_realtime(nodes, executor)
        _spin(executor, nodes, stop)
        if stop.signal_name:
            print(f"[run_nodes] {stop.signal_name} received: stopping", file=sys.stderr, flush=True)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        stop.event.set()  # from here on, signals are ignored (see StopSignals)
        for node in nodes:
            if isinstance(node, NodeBase):
                node.stopping()
        if executor is not None:
            _finish_callbacks(executor)
        if started:
            _final_checkpoints(nodes)
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
        stop.restore()
    return 0
