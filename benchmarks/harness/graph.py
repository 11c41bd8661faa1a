"""A node under test in its own process, a peer node in this one, and the latency of its answers.

The node runs on the package's process supervisor
(:class:`~lifelong_learning.nodes.supervisor.NodeProcess`: its own session, its output in a log
file, SIGINT to stop and SIGKILL after a timeout), on a private ROS graph (:func:`private_domain`),
so that other nodes on this host stay out of the measurement. The peer is a plain rclpy node
with a one-thread executor; the benchmark creates its publishers and subscriptions, and spins
it with :meth:`NodeUnderTest.spin_for`, :meth:`NodeUnderTest.spin_until`,
:meth:`NodeUnderTest.paced`, or in a background thread (:meth:`NodeUnderTest.spinning`).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np


def private_domain() -> str:
    """A private ROS graph for this process and the nodes it starts; returns its domain id.

    ``ROS_DOMAIN_ID`` is drawn at random in 1..101 unless it is set already (a caller's choice
    is kept), and discovery is limited to this host (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``).
    Call it before ``rclpy.init`` and before starting the nodes (:class:`NodeUnderTest` does).
    """
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 101)))
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    return os.environ["ROS_DOMAIN_ID"]


def param_args(params: Mapping[str, Any]) -> list[str]:
    """``name:=value`` for each parameter, as ``--ros-args -p`` takes them (booleans lower case,
    sequences as ``[a,b]``)."""

    def text(value: Any) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, (list, tuple)):
            return "[" + ",".join(text(v) for v in value) + "]"
        return str(value)

    return [f"{name}:={text(value)}" for name, value in params.items()]


def percentiles(values: Iterable[float], qs: Sequence[float] = (50, 99)) -> tuple[float, ...]:
    """The ``qs`` percentiles of ``values`` (linear interpolation); NaNs when there are none."""
    a = np.asarray(list(values), dtype=float)
    if a.size == 0:
        return tuple(float("nan") for _ in qs)
    return tuple(float(v) for v in np.percentile(a, qs))


class Latencies:
    """Requests sent and their answers, by key (a stamp, a frame id): the latency of each answer.

    :meth:`send` records the time a request left (``clock()``, default ``time.perf_counter``),
    :meth:`receive` the time its first answer arrived (now, or ``at``); an answer to a request
    not sent (or cleared) is ignored.
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.sent: dict[Hashable, float] = {}
        self.latency: dict[Hashable, float] = {}

    def send(self, key: Hashable) -> None:
        """Request ``key`` leaves now."""
        self.sent[key] = self.clock()

    def receive(self, key: Hashable, at: float | None = None) -> None:
        """The answer to ``key`` arrived now (or at ``at``, same clock)."""
        sent = self.sent.get(key)
        if sent is not None and key not in self.latency:
            self.latency[key] = (self.clock() if at is None else at) - sent

    def clear(self) -> None:
        """Forget every request and answer (after a warm-up)."""
        self.sent.clear()
        self.latency.clear()

    @property
    def answered(self) -> int:
        """How many requests have their answer."""
        return len(self.latency)

    def percentiles(self, qs: Sequence[float] = (50, 99)) -> tuple[float, ...]:
        """The latency percentiles ``qs`` (seconds; NaNs before any answer)."""
        return percentiles(self.latency.values(), qs)


class NodeUnderTest:
    """A node in its own process and a peer node here, on a private graph; a context manager.

    ``node``: a node of this package (``python -m lifelong_learning.nodes.<node> --ros-args``
    with ``params_files``, then ``params``: :func:`~lifelong_learning.nodes.supervisor.node_command`);
    or ``argv``, any command (``lifelong-learning up``, a stand-in node), called ``name`` in
    messages (default: the node, or the program). ``env``: variables added
    to the child's environment. Its output goes to ``node.log`` in ``folder`` (default: a new
    temporary folder, removed on exit unless the block raised: then the error's notes name it),
    shown when it fails to come up (:meth:`wait_for`). On entry: the private domain, the process,
    an rclpy context of its own (:attr:`context`) and the peer node ``peer_name`` in it
    (:attr:`peer`); on exit, in reverse: the peer's executor, the peer, the context and the
    process (SIGINT, SIGKILL after ``stop_timeout`` s), each step also when one before it failed.
    """

    #: seconds :meth:`spinning` waits for its thread to stop after the block (a RuntimeError if it
    #: still spins: a callback of the peer blocks), and the peer's executor for its callbacks on exit
    SPIN_JOIN_S = 5.0

    def __init__(
        self,
        node: str | None = None,
        *,
        params_files: Iterable[str | os.PathLike[str]] = (),
        params: Mapping[str, Any] | None = None,
        argv: Sequence[str] | None = None,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        peer_name: str = "bench_peer",
        folder: Path | None = None,
        stop_timeout: float = 15.0,
    ) -> None:
        if (node is None) == (argv is None):
            raise ValueError("give exactly one of node and argv")
        if node is not None:
            from lifelong_learning.nodes.supervisor import node_command

            argv = node_command(node, params_files, param_args(params or {}))
        self.argv = list(argv)
        self.name = name or node or Path(self.argv[0]).name
        self.env, self.folder, self.peer_name, self.stop_timeout = (
            dict(env or {}),
            folder,
            peer_name,
            stop_timeout,
        )
        self.process: Any = None  # NodeProcess, once started
        self.context: Any = None  # rclpy Context of the peer
        self.peer: Any = None  # rclpy Node
        self.executor: Any = None
        self.temporary_folder = False  # whether folder is this object's, to remove on exit

    def __enter__(self) -> NodeUnderTest:
        from lifelong_learning.nodes.supervisor import NodeProcess

        private_domain()
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix=f"bench_{self.name}_"))
            self.temporary_folder = True
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.process = NodeProcess(
                self.argv, name=self.name, log_path=self.folder / "node.log", env=self.env
            )
            import rclpy
            from rclpy.context import Context
            from rclpy.executors import SingleThreadedExecutor

            self.context = Context()
            rclpy.init(context=self.context)
            self.peer = rclpy.create_node(self.peer_name, context=self.context)
            self.executor = SingleThreadedExecutor(context=self.context)
            self.executor.add_node(self.peer)
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self._close_peer()
        finally:
            try:
                if self.process is not None:
                    self.stop()
            finally:
                self._remove_folder(error)

    def _close_peer(self) -> None:
        """The peer's executor shut down, the peer destroyed, then its context: each step also
        when one before it raised."""
        try:
            if self.executor is not None:
                self.executor.shutdown(timeout_sec=self.SPIN_JOIN_S)
        finally:
            try:
                if self.peer is not None:
                    self.peer.destroy_node()
            finally:
                if self.context is not None:
                    import rclpy

                    rclpy.try_shutdown(context=self.context)

    def _remove_folder(self, error: BaseException | None) -> None:
        """The temporary folder removed; kept when the block raised (``error``), and named in its notes."""
        if not self.temporary_folder or self.folder is None:
            return
        if error is None:
            shutil.rmtree(self.folder, ignore_errors=True)
        elif hasattr(error, "add_note"):  # Python >= 3.11
            error.add_note(f"{self.name}'s output: {self.folder / 'node.log'} (kept)")

    def stop(self) -> int:
        """Stop the node's process now (SIGINT; SIGKILL after the timeout); its exit status."""
        return self.process.stop(timeout=self.stop_timeout)

    def log(self, tail: int = 3000) -> str:
        """The last ``tail`` characters of the node's output."""
        return self.process.log()[-tail:]

    # ------------------------------------------------------------------ spinning the peer
    def spin_for(self, seconds: float) -> None:
        """Spin the peer for ``seconds`` (callbacks run as they come)."""
        end = time.perf_counter() + seconds
        while (remaining := end - time.perf_counter()) > 0:
            self.executor.spin_once(timeout_sec=remaining)

    def spin_until(self, predicate: Callable[[], bool], timeout: float, period: float = 0.05) -> bool:
        """Spin the peer until ``predicate()`` holds (checked at least every ``period`` s) or
        ``timeout`` s have passed; whether it holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            self.executor.spin_once(timeout_sec=period)
        return predicate()

    def wait_for(
        self, predicate: Callable[[], bool], timeout: float, what: str, period: float = 0.05
    ) -> None:
        """:meth:`spin_until` (``predicate()`` checked at least every ``period`` s); a RuntimeError
        with the node's output if ``what`` is not so in time."""
        if not self.spin_until(predicate, timeout, period):
            state = "running" if self.process.alive() else f"exited with {self.process.returncode}"
            raise RuntimeError(f"{self.name}: {what}: not within {timeout:g} s ({state}):\n{self.log()}")

    def paced(self, n: int, rate_hz: float, spin: bool = True) -> Iterator[int]:
        """0, 1, ..., n − 1, the k-th at ``k / rate_hz`` s from the start: the peer spins while it
        waits (``spin``), or this thread sleeps (a background thread spins the peer)."""
        start = time.perf_counter()
        for k in range(n):
            wait = start + k / rate_hz - time.perf_counter()
            if wait > 0 and spin:
                self.spin_for(wait)
            elif wait > 0:
                time.sleep(wait)
            yield k

    @contextmanager
    def spinning(self) -> Iterator[None]:
        """The peer spins in a background thread while in this block. A RuntimeError after it when
        the thread still spins :attr:`SPIN_JOIN_S` s later (a callback blocks): the peer is not
        this thread's to use then."""
        stop = threading.Event()

        def spin() -> None:
            while not stop.is_set():
                self.executor.spin_once(timeout_sec=0.05)

        thread = threading.Thread(target=spin, name="bench-peer", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(self.SPIN_JOIN_S)
            if thread.is_alive():
                raise RuntimeError(
                    f"{self.name}: the peer still spins {self.SPIN_JOIN_S:g} s after the spinning block "
                    "(a callback of the peer blocks)"
                )
