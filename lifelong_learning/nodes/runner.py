"""Run several nodes in one process until Ctrl-C or SIGTERM, with final checkpoints.

:func:`run_nodes` is the main loop of ``lifelong-learning up`` (every node in one process)
and works for a single node as well:

- every node is spun by an executor of its own, the one it has in its executable (a
  SingleThreadedExecutor; the tuner, whose goals run in a callback, a MultiThreadedExecutor of
  its ``EXECUTOR_THREADS``): a node executable on its main thread, each node of ``up`` (several
  in one process) on a thread of its own. A node's callbacks thus run as in its executable, and
  a long callback of one node never blocks another node's callbacks (they still share the GIL).
  rclpy's MultiThreadedExecutor costs far more per message: at 1 kHz joint states (10 s)
  inverse_dynamics answered 4,769 of 10,000 on one, 10,000 on a SingleThreadedExecutor
  (benchmarks/bench_control_rate.py, docs/benchmarks/control-rate.md); ``LIFELONG_LEARNING_EXECUTOR``
  puts every node on one executor of the kind it names instead;
- an exception raised by a callback does not stop the process: it is counted on the node
  whose callback raised (``reject("internal error", ...)``), logged with its traceback, and
  the nodes keep serving;
- SIGINT (Ctrl-C), SIGTERM and SIGHUP (unless ignored, as under ``nohup``) are handled
  alike. rclpy's own handlers (SIGINT and SIGTERM in Kilted) are not installed: they shut the
  context down at once, so that the final checkpoint would be logged by a dead context, and a
  second Ctrl-C would interrupt it with KeyboardInterrupt. Instead the first signal ends
  spinning, every :class:`~lifelong_learning.nodes.learner.LearnerNode` writes its final
  checkpoint (:meth:`shutdown`) while the context is still valid, then the nodes are destroyed.
  Further signals while this happens are ignored (``ros2 launch`` and a terminal both send
  SIGINT on Ctrl-C); the checkpoint writes are atomic, so even SIGKILL cannot corrupt a file;
- a node executable (:func:`run_node`) leaves as soon as its nodes are destroyed and the
  middleware is shut down: the interpreter's own finalization (collecting the modules of torch,
  scipy, numba...) is skipped. It did nothing for the node, and under load it was most of the
  stop: 1-2.5 s of a feature_extractor's on a loaded 2-core machine. The phases of its stop that wait on
  other threads or on the middleware have deadlines kept by watchdogs that need no Python lock
  (``faulthandler``'s, and a timer of the C library's): a phase that hangs, even inside the
  middleware with the interpreter's lock held (where no Python signal handler can run), ends the
  process with the stack of every thread on stderr instead of a process that ignores Ctrl-C until
  it is killed. The wait for the callbacks ends it with status 1 (its checkpoint was not written);
  the launch files here give ``ros2 launch`` room for all of it before its SIGKILL
  (launch_support.STOP_TIMEOUTS: 30 s instead of launch's 10);
  the teardown (:data:`TEARDOWN_S`), which begins once every checkpoint is written and every bag
  closed (:func:`_finish`), with status 0: in the test suite here Fast DDS once took 12 s to delete
  a feature_extractor's publisher, and a bag_recorder's teardown once went past launch's SIGKILL
  after its bag was closed: a node that had lost nothing was reported dead.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import NoReturn

import rclpy
from rclpy.context import Context
from rclpy.exceptions import NameValidationException, ParameterException
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.logging import get_logger
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from lifelong_learning.core.process import exit_after, leave
from lifelong_learning.core.realtime import make_realtime
from lifelong_learning.nodes.base import NodeBase
from lifelong_learning.nodes.learner import LearnerNode
from lifelong_learning.nodes.supervisor import STOP_SIGNALS, StopSignals, stop_signals

__all__ = [
    "EXECUTOR_VARIABLE",
    "FINISH_CALLBACKS_S",
    "STOP_SIGNALS",
    "TEARDOWN_S",
    "leave",
    "make_executor",
    "make_executors",
    "owner_of",
    "run_node",
    "run_nodes",
    "stop_signals",
]


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


def _spin_all(
    plan: Sequence[tuple[Executor, list[Node]]],
    nodes: Sequence[Node],
    stop: StopSignals,
    spinners: list[threading.Thread],
    failures: list[BaseException],
) -> None:
    """Spin every executor of ``plan`` (:func:`make_executors`) until a stop is requested: one
    executor on this thread (with real-time scheduling when its node asks), several on a thread
    each (appended to ``spinners``) while this one waits. A spinning thread that ends on an
    error it cannot survive appends it to ``failures`` and stops every node."""
    for executor, served in plan:
        for node in served:
            executor.add_node(node)
    _apply_realtime(nodes, plan[0][0])  # this thread's; with several nodes, reported as not applied
    if len(plan) == 1:
        _spin(plan[0][0], nodes, stop)
        return
    for executor, served in plan:
        spinner = threading.Thread(
            target=_spin_until_stopped, args=(executor, served, stop, failures),
            name=f"spin-{served[0].get_name()}", daemon=True,
        )  # fmt: skip
        spinners.append(spinner)
        spinner.start()
    while not stop.event.wait(0.25) and rclpy.ok():
        pass


def _spin_until_stopped(
    executor: Executor, nodes: Sequence[Node], stop: StopSignals, failures: list[BaseException]
) -> None:
    """:func:`_spin` on a thread of its own. Whatever ends it (the context shut down from outside,
    an error outside any callback, recorded in ``failures``) ends every spinning thread."""
    try:
        _spin(executor, nodes, stop)
    except ExternalShutdownException:
        pass
    except Exception as exc:  # not a callback's (those are counted and survived in _spin)
        failures.append(exc)
        get_logger("run_nodes").error(
            f"spinning {', '.join(n.get_name() for n in nodes)} failed, stopping:\n{traceback.format_exc()}"
        )
    finally:
        stop.event.set()


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
        node.realtime, node.realtime_threads = applied.describe(), applied
        logger.info(f"real-time scheduling: {node.realtime}")


#: seconds the callbacks running when a stop begins get to end (then the checkpoints are written anyway)
FINISH_CALLBACKS_S = 10.0
#: seconds that destroying the nodes and shutting the middleware down may take in a node executable
#: (0.1-0.3 s when nothing hangs). What the nodes run and write themselves ends before it
#: (:func:`_finish`).
TEARDOWN_S = 3.0
#: seconds between the stacks written at a deadline and the end of the process, when it ends with 0
DUMP_S = 0.5


@contextmanager
def _deadline(seconds: float | None, status: int = 1) -> Iterator[None]:
    """While in the block (``seconds`` not None): past ``seconds``, the stack of every thread is
    written to stderr and the process ends with ``status`` (with 0, :data:`DUMP_S` later, by
    :func:`~lifelong_learning.core.process.exit_after`; where that is not available, with 1).
    ``faulthandler``'s watchdog and the C library's timer take no Python lock, so they act also
    when this thread is stuck in C code holding the interpreter's lock. Without a stderr that has a
    file descriptor: no deadline."""
    armed, disarm = False, None
    if seconds is not None:
        if status == 0:
            disarm = exit_after(seconds + DUMP_S, 0)
        try:
            faulthandler.dump_traceback_later(seconds, exit=disarm is None, file=sys.__stderr__)
            armed = True
        except (AttributeError, ValueError, OSError):  # no sys.__stderr__, or no descriptor behind it
            pass
    try:
        yield
    finally:
        if armed:
            faulthandler.cancel_dump_traceback_later()
        if disarm is not None:
            disarm()


def _finish_callbacks(
    executors: Sequence[Executor], spinners: Sequence[threading.Thread], timeout_s: float = FINISH_CALLBACKS_S
) -> None:
    """Let callbacks already running finish before the final checkpoints.

    A stop was requested, but a callback taken before it may still be updating a model: on a
    spinning thread (``spinners``, which end after their current callback) or on a
    MultiThreadedExecutor's pool thread. A checkpoint written now would lose its sample. A
    callback that hangs longer than ``timeout_s`` in all is left behind (logged) rather than
    blocking the checkpoints forever.
    """
    deadline = time.monotonic() + timeout_s
    for spinner in spinners:
        spinner.join(max(0.0, deadline - time.monotonic()))
    done = [
        threading.Thread(target=executor.shutdown, daemon=True, name="executor-shutdown")
        for executor in executors
    ]
    for thread in done:
        thread.start()
    for thread in done:
        thread.join(max(0.0, deadline - time.monotonic()))
    if any(thread.is_alive() for thread in [*spinners, *done]):
        get_logger("run_nodes").warning(
            f"a callback is still running after {timeout_s:g} s; writing the checkpoints anyway"
        )


def _finish(nodes: Sequence[Node]) -> None:
    """The final checkpoint of every learner node, then what every node runs and writes itself ended
    (:meth:`NodeBase.finish`: a bag closed); one that fails does not prevent the others."""
    for node in nodes:
        steps = [("final checkpoint", node.shutdown)] if isinstance(node, LearnerNode) else []
        if isinstance(node, NodeBase):
            steps.append(("finish", node.finish))
        for what, step in steps:
            try:
                step()
            except Exception:
                print(f"[ERROR] {what} of {node.get_name()} failed:", file=sys.stderr)
                traceback.print_exc()


#: environment variable that chooses the executor of a process: ``single``, ``events`` or ``multi``
EXECUTOR_VARIABLE = "LIFELONG_LEARNING_EXECUTOR"
EXECUTORS = ("single", "events", "multi")


def make_executors(threads: int | None, nodes: Sequence[Node]) -> list[tuple[Executor, list[Node]]]:
    """The executors of a process and the nodes each spins: one per node, as in the node's own
    executable (a SingleThreadedExecutor, or a MultiThreadedExecutor of the node's
    ``EXECUTOR_THREADS`` when it needs more), unless :data:`EXECUTOR_VARIABLE` is set or
    ``threads`` is given: then one executor for every node (:func:`make_executor`).

    Raises:
        ValueError: an unknown value of :data:`EXECUTOR_VARIABLE`.
    """
    if threads is None and not os.environ.get(EXECUTOR_VARIABLE, "").strip():
        return [(_own_executor(node), [node]) for node in nodes]
    return [(make_executor(threads, len(nodes), nodes[0].context if nodes else None), list(nodes))]


class _MultiThreadedExecutor(MultiThreadedExecutor):
    """rclpy's MultiThreadedExecutor, shut down in a safe order: the callbacks already handed to its
    threads end first, and only then is the executor's guard condition destroyed.

    ``Executor.shutdown`` in rclpy destroys that guard condition at once, while a callback running
    on a pool thread triggers it once it has taken its data: that callback then fails with
    ``InvalidHandle: cannot use Destroyable because destruction was requested``, and as no
    ``spin_once`` reads its outcome any more, rclpy prints "The following exception was never
    retrieved" when the task is collected (the nystrom_tuner, idle, at 3 of 12 stops here with a
    20 ms diagnostics period; also under ``ros2 launch``).

    The pool is rclpy's private ``_executor``: rclpy has no public way to wait for it (``shutdown``'s
    ``wait_for_threads`` waits only after the guard condition is gone). Read with ``getattr``, so an
    rclpy without it shuts down as before. The rclpy privates this package uses, and why:
    ``docs/architecture.md`` (rclpy's private parts).
    """

    def shutdown(self, timeout_sec: float | None = None, *, wait_for_threads: bool = True) -> bool:
        pool = getattr(self, "_executor", None)  # rclpy's thread pool (a ThreadPoolExecutor)
        if pool is not None and wait_for_threads:
            pool.shutdown(wait=True)  # nothing is submitted any more: the spinning has stopped
        return super().shutdown(timeout_sec, wait_for_threads=wait_for_threads)


def _own_executor(node: Node) -> Executor:
    """The executor a node would have in its executable (``EXECUTOR_THREADS``, default 1)."""
    n = int(getattr(node, "EXECUTOR_THREADS", 1))
    if n <= 1:
        return SingleThreadedExecutor(context=node.context)
    return _MultiThreadedExecutor(num_threads=n, context=node.context)


def make_executor(threads: int | None, n_nodes: int, context: Context | None = None) -> Executor:
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

        return EventsExecutor(context=context)
    if kind == "single" or (not kind and threads == 1):
        return SingleThreadedExecutor(context=context)
    return _MultiThreadedExecutor(num_threads=threads or 2 * max(1, n_nodes), context=context)


def run_nodes(
    factories: Sequence[Callable[[], Node]],
    args: Sequence[str] | None = None,
    threads: int | None = None,
    *,
    deadlines: bool = False,
) -> int:
    """Create the nodes and spin them in one process until SIGINT/SIGTERM; returns the exit status.

    Args:
        factories: one callable per node, called without arguments after ``rclpy.init`` (the
            node classes themselves, typically).
        args: command-line arguments for ``rclpy.init`` (``--ros-args`` ... applies to every
            node of the process; a params file configures the nodes it names).
        threads: None (the default): each node's own executor (:func:`make_executors`), each
            node on its own thread when there are several. Given: one executor for every
            node, single-threaded for 1, else a MultiThreadedExecutor of that many threads
            (at 100 Hz joint states the inverse_dynamics node answered >= 90 % in every run of
            test/nodes/test_robot_ready.py on a SingleThreadedExecutor, on a 2-thread
            MultiThreadedExecutor 236 and 414 of 500 in two runs).
        deadlines: this call owns its process (a node executable): the stop's waits for the
            callbacks and its teardown get :data:`FINISH_CALLBACKS_S` (with some slack) and
            :data:`TEARDOWN_S` before the process is ended with every thread's stack (status 1,
            and 0 for the teardown; the module docstring says why). Off in a process that runs
            other things (tests).

    Returns 0 after a clean stop, 1 when a node's spinning thread failed (outside any callback:
    the others are stopped, with their final checkpoints), 2 when a node cannot start because of
    its configuration
    (``ValueError`` / ``OSError`` from its constructor, or rclpy's parameter and name errors: a
    parameter of the wrong type, an invalid topic name; a clear message, no traceback, and
    the nodes already created are destroyed without a checkpoint).
    """
    stop = StopSignals("run_nodes", "writing the final checkpoints").install()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    nodes: list[Node] = []
    executors: list[Executor] = []
    spinners: list[threading.Thread] = []
    failures: list[BaseException] = []  # what ended a spinning thread (exit status 1)
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
            except _rclpy.RCLError as exc:  # the middleware refused the node (e.g. security asked for)
                print(
                    f"[ERROR] cannot start the node: {_middleware_refusal(exc)}", file=sys.stderr, flush=True
                )
                return 2
        started = True
        try:
            plan = make_executors(threads, nodes)
        except ValueError as exc:
            print(f"[ERROR] cannot start the node: {exc}", file=sys.stderr, flush=True)
            return 2
        executors.extend(executor for executor, _ in plan)
        _spin_all(plan, nodes, stop, spinners, failures)
        if stop.signal_name:
            print(f"[run_nodes] {stop.signal_name} received: stopping", file=sys.stderr, flush=True)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        stop.event.set()  # from here on, signals are ignored (see StopSignals)
        for node in nodes:
            if isinstance(node, NodeBase):
                node.stopping()
        if executors:
            with _deadline(FINISH_CALLBACKS_S + 2.0 if deadlines else None):
                _finish_callbacks(executors, spinners)
        if started:
            _finish(nodes)  # as long as the disk takes: no deadline
        # everything is written: a teardown stuck in the middleware ends the process with 0
        with _deadline(TEARDOWN_S if deadlines else None, status=0):
            for node in nodes:
                node.destroy_node()
            rclpy.try_shutdown()
        stop.restore()
    return 1 if failures else 0


def _middleware_refusal(exc: BaseException) -> str:
    """Why the middleware refused to create a node, in words (DDS security asked for and missing)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if os.environ.get("ROS_SECURITY_ENABLE", "").lower() == "true":
        return (
            f"{text}. ROS_SECURITY_ENABLE is true but this middleware cannot provide DDS security (the "
            "Fast DDS of the PyPI wheels is built without it): the node does not run unsecured; "
            "see docs/robot.md#who-may-talk-to-the-nodes"
        )
    return text


def run_node(
    factory: Callable[..., Node], args: Sequence[str] | None = None, threads: int | None = None
) -> NoReturn:
    """Run one node until Ctrl-C/SIGTERM; learner nodes write a final checkpoint on the way out.

    The ``main()`` of every node executable: :func:`run_nodes` with one node and its stop's
    deadlines (signals, callback failures and the final checkpoint are handled there), then the
    process ends with its exit status (:func:`leave`: no interpreter finalization, which under
    load took most of a stop's time).
    """
    leave(run_nodes([factory], args, threads, deadlines=True))
