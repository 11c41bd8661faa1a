"""Shared fixtures.

Isolation of graph tests: the whole test session runs on one random ROS_DOMAIN_ID (0-101)
with discovery limited to localhost, set before anything imports rclpy, and inherited by
the node processes the tests start, so that parallel runs and robots on the network never
see each other.

Tests must exercise the *built* package (with its generated ``lifelong_learning.msg``), not
the source tree: with ``LL_REQUIRE_INSTALLED=1`` (set by ``make test``) the session fails at
once if ``lifelong_learning`` is imported from anywhere but a colcon install space.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(0, 101)))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")

REPO = Path(__file__).resolve().parents[1]


def pytest_sessionstart(session: pytest.Session) -> None:
    import lifelong_learning

    where = Path(lifelong_learning.__file__).resolve()
    if os.environ.get("LL_REQUIRE_INSTALLED") == "1" and "site-packages" not in where.parts:
        raise pytest.UsageError(
            f"lifelong_learning imported from {where}, not from a colcon install space: "
            "source install/setup.bash and run the `pytest` executable from the venv"
        )


def pytest_report_header(config: pytest.Config) -> list[str]:
    import lifelong_learning

    return [
        f"lifelong_learning from {Path(lifelong_learning.__file__).parent}",
        f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']} ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST",
    ]


@pytest.fixture(scope="session")
def built_interfaces() -> None:
    """Fail clearly (not skip) when the generated interfaces are missing."""
    try:
        import lifelong_learning.msg
        import lifelong_learning.srv  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"generated interfaces not importable ({exc}): build with colcon (make build) first")


@pytest.fixture
def rclpy_context(built_interfaces: None) -> Iterator[object]:
    """An initialized rclpy context for one test (shut down afterwards)."""
    import rclpy
    from rclpy.context import Context

    ctx = Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.try_shutdown(context=ctx)


@pytest.fixture
def executor(rclpy_context: object) -> Iterator[object]:
    """A single-threaded executor in the test's context; nodes added to it are destroyed after."""
    from rclpy.executors import SingleThreadedExecutor

    ex = SingleThreadedExecutor(context=rclpy_context)
    yield ex
    for node in list(ex.get_nodes()):
        ex.remove_node(node)
        node.destroy_node()
    ex.shutdown()


def spin_until(executor: object, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Spin ``executor`` until ``predicate()`` is true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        executor.spin_once(timeout_sec=0.05)  # type: ignore[attr-defined]
    return predicate()


@pytest.fixture
def spin() -> Callable[..., bool]:
    """The :func:`spin_until` helper as a fixture."""
    return spin_until


class NodeProcess:
    """A node running in its own process, as on a robot (stdout+stderr captured to a file)."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None):
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            cwd=log_path.parent,  # never the repo root: `python -m` would import the source tree
        )

    def log(self) -> str:
        """Everything the process printed so far."""
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = 2, timeout: float = 15.0) -> int:
        """Send ``sig`` (default SIGINT, like Ctrl-C) and wait; SIGKILL after ``timeout``."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode


@pytest.fixture
def start_process(tmp_path: Path, built_interfaces: None) -> Iterator[Callable[..., NodeProcess]]:
    """Start processes (e.g. ``[sys.executable, "-m", "lifelong_learning.nodes.x", "--ros-args", ...]``);
    all are stopped at the end of the test."""
    procs: list[NodeProcess] = []

    def start(argv: list[str], env: dict[str, str] | None = None) -> NodeProcess:
        p = NodeProcess(argv, tmp_path / f"proc{len(procs)}.log", env)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


def node_argv(node: str, *ros_args: str, params_file: bool = True) -> list[str]:
    """argv to run node ``node`` (module lifelong_learning.nodes.<node>) with its config file."""
    argv = [sys.executable, "-m", f"lifelong_learning.nodes.{node}", "--ros-args"]
    cfg = REPO / "config" / f"{node}.yaml"
    if params_file and cfg.exists():
        argv += ["--params-file", str(cfg)]
    return argv + list(ros_args)
