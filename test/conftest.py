"""Shared fixtures.

Isolation of graph tests: the whole test session runs on one random ROS_DOMAIN_ID (1-101)
with discovery limited to localhost, set before anything imports rclpy, and inherited by
the node processes the tests start, so that robots on the network never see them. Under
``pytest -n N`` (pytest-xdist, as ``make test`` runs it) worker ``gwK`` runs on the session's
domain plus K (:func:`worker_domain`), so that two tests running at once never see each other's
nodes; Fast DDS's shared memory of ended processes is cleaned by the controlling process only,
before the workers start and after they end. Two test sessions at once are on different domains
unless their random draws meet (about 1 in 100 a pair of workers).

Tests must exercise the *built* package (with its generated ``lifelong_learning.msg``), not
the source tree: with ``LL_REQUIRE_INSTALLED=1`` (set by ``make test``) the session fails at
once if ``lifelong_learning`` is imported from anywhere but a colcon install space.

Graph helpers: :func:`spin_until` (fixture ``spin``), :func:`call_service` (fixture ``call``),
:class:`DiagnosticsReader` (what the nodes publish on /diagnostics, and their counters), node
processes through :mod:`lifelong_learning.nodes.supervisor` (fixture ``start_process``, command
lines from :func:`node_argv`), and retraining jobs from :func:`tuning_job` (fixture ``make_job``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hangs import RERUN_IF_IT_HANGS, forget_failures
from hangs import pytest_handlecrashitem as pytest_handlecrashitem  # the hooks, taken as this file's
from hangs import pytest_runtest_makereport as pytest_runtest_makereport
from hangs import pytest_runtest_protocol as pytest_runtest_protocol

from lifelong_learning.core.persistence import PersistentModel
from lifelong_learning.learners import RecursiveRLS
from lifelong_learning.nodes.supervisor import NodeProcess, node_command, stop_all
from lifelong_learning.retraining.job import TuningJob


def worker_domain(base: int, index: int) -> int:
    """The ROS domain of pytest-xdist's worker ``gw<index>`` in a session on domain ``base``: ``base``
    for ``gw0``, then the next ones, wrapping within 1-101 (never 0, the domain of every ROS process
    not told otherwise); a session put on 0 by hand gives its workers 0, 1, 2, ..."""
    if base == 0:
        return index % 102
    return 1 + (base - 1 + index) % 101


os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(1, 101)))
# pytest-xdist's worker id ("gw0", "gw1", ...), None in a run without workers or in the controller
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER is not None:
    # the controller's domain, inherited, is the base
    os.environ.setdefault("LL_TEST_DOMAIN_BASE", os.environ["ROS_DOMAIN_ID"])
    _base, _index = int(os.environ["LL_TEST_DOMAIN_BASE"]), int(_WORKER.removeprefix("gw"))
    os.environ["ROS_DOMAIN_ID"] = str(worker_domain(_base, _index))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ["PYTHONFAULTHANDLER"] = "1"  # a node process that hangs can be asked for its stacks (SIGABRT)
# the session's ROS home (model files, checkpoints, bags, logs by default), never the user's ~/.ros;
# each test gets one of its own (fixture ros_home)
os.environ["ROS_HOME"] = _SESSION_ROS_HOME = tempfile.mkdtemp(prefix="lifelong-learning-tests-ros-home-")

REPO = Path(__file__).resolve().parents[1]
_SHM_CLEANED = pytest.StashKey[str]()
_SHM_CLEANED_AT_START = pytest.StashKey[str]()


def clean_dead_shared_memory() -> str:
    """Remove the shared-memory files in /dev/shm of Fast DDS participants whose process is gone
    (killed, or ended without destroying its nodes), with Fast DDS's own ``fastdds shm clean``
    (its ``tools/fastdds/shm/clean.py``, loaded from beside the ``fastdds`` command: the command
    itself needs psutil, which the wheels do not bring); what it printed, or why nothing ran.

    Each such process leaves about 18 MB there with this package's profile (its 16 MiB segment
    and the default one), held in memory until removed: over a test session that starts and
    kills hundreds of node processes, and over sessions on one machine, that adds up. Like
    ``fastdds shm clean`` it removes the files of every participant on the machine whose lock no
    process holds; ``LL_KEEP_SHARED_MEMORY=1`` leaves them (another Fast DDS application starting on
    the machine at that very moment)."""
    import importlib.util
    import io
    import shutil

    if os.environ.get("LL_KEEP_SHARED_MEMORY") == "1":
        return "kept (LL_KEEP_SHARED_MEMORY=1)"
    command = shutil.which("fastdds")
    tool = (
        Path(command).resolve().parent.parent / "tools" / "fastdds" / "shm" / "clean.py" if command else None
    )
    if tool is None or not tool.is_file():
        return "no fastdds shm clean here"
    said = io.StringIO()
    try:
        spec = importlib.util.spec_from_file_location("fastdds_shm_clean", tool)
        module = importlib.util.module_from_spec(spec)
        with contextlib.redirect_stdout(said):
            spec.loader.exec_module(module)
            module.Clean().run(False)
    except Exception as exc:  # another Fast DDS's tool: the tests do not depend on it
        return f"not cleaned ({type(exc).__name__}: {exc})"
    return " ".join(said.getvalue().split())


def pytest_sessionstart(session: pytest.Session) -> None:
    import lifelong_learning

    where = Path(lifelong_learning.__file__).resolve()
    if os.environ.get("LL_REQUIRE_INSTALLED") == "1" and "site-packages" not in where.parts:
        raise pytest.UsageError(
            f"lifelong_learning imported from {where}, not from a colcon install space: "
            "source install/setup.bash and run the `pytest` executable from the venv"
        )
    if _WORKER is None:  # a worker's cleaning could take the files of another worker's starting node
        session.config.stash[_SHM_CLEANED_AT_START] = clean_dead_shared_memory()  # earlier sessions'


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import shutil

    shutil.rmtree(_SESSION_ROS_HOME, ignore_errors=True)  # this process's (the tests' own are in tmp_path's)
    if _WORKER is None:
        session.config.stash[_SHM_CLEANED] = clean_dead_shared_memory()
        forget_failures()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m serial`` alone (make test's second run), a test module whose text does not say
    ``mark.serial`` is not imported: none of its tests could be selected, and importing every module
    took 11 s of that run. Any other selection collects everything."""
    if (
        config.getoption("markexpr", "") == "serial"
        and collection_path.suffix == ".py"
        and collection_path.name.startswith("test_")
    ):
        return "mark.serial" not in collection_path.read_text(encoding="utf-8")
    return None


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects: every test collected is seen here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``pytest -n N``, the tests marked ``slow`` run first (stable sort, the others in their
    order): a long test started last would leave the other workers idle at the end. A test marked
    ``serial`` in a module that does not say ``mark.serial`` is refused (:func:`pytest_ignore_collect`
    would never collect it in the serial run)."""
    unseen = sorted(
        {
            item.nodeid.split("::")[0]
            for item in items
            if item.get_closest_marker("serial") is not None
            and "mark.serial" not in Path(str(item.fspath)).read_text(encoding="utf-8")
        }
    )
    if unseen:
        raise pytest.UsageError(f"marked serial without the words `mark.serial` in the module: {unseen}")
    if config.getoption("numprocesses", None) or _WORKER is not None:
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if _WORKER is not None:  # a test whose worker ends in it runs once more; a failed one does not
        for item in items:
            item.add_marker(RERUN_IF_IT_HANGS)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    for when, key in (("at the start", _SHM_CLEANED_AT_START), ("at the end", _SHM_CLEANED)):
        cleaned = config.stash.get(key, None)
        if cleaned:
            terminalreporter.write_line(f"Fast DDS shared memory of ended processes, {when}: {cleaned}")


def pytest_report_header(config: pytest.Config) -> list[str]:
    import lifelong_learning

    return [
        f"lifelong_learning from {Path(lifelong_learning.__file__).parent}",
        f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']} ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST"
        + (" (worker gwK: worker_domain(it, K))" if config.getoption("numprocesses", None) else ""),
    ]


@pytest.fixture(autouse=True)
def ros_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's ROS home (``ROS_HOME``: the nodes' model files, checkpoints and bags by default,
    and ROS logs) in a directory of its own beside the test's ``tmp_path``, for the test and the
    processes it starts: a node run with the shipped defaults never finds another test's
    checkpoint, nor the user's (a fixture of a wider scope gets the session's, below)."""
    home = tmp_path_factory.mktemp("ros_home")
    monkeypatch.setenv("ROS_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def built_interfaces() -> None:
    """Fail clearly (not skip) when the generated interfaces are missing."""
    try:
        import lifelong_learning.msg
        import lifelong_learning.srv  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"generated interfaces not importable ({exc}): build with colcon (make build) first")


@contextmanager
def new_context() -> Iterator[Any]:
    """A new initialized rclpy context, shut down on exit."""
    import rclpy
    from rclpy.context import Context

    ctx = Context()
    rclpy.init(context=ctx)
    try:
        yield ctx
    finally:
        rclpy.try_shutdown(context=ctx)


@contextmanager
def new_executor(context: Any) -> Iterator[Any]:
    """A single-threaded executor in ``context``; the nodes added to it are destroyed on exit."""
    from rclpy.executors import SingleThreadedExecutor

    ex = SingleThreadedExecutor(context=context)
    try:
        yield ex
    finally:
        destroy_nodes(ex)
        ex.shutdown()


def destroy_nodes(executor: Any) -> None:
    """Remove every node from ``executor`` and destroy it."""
    for node in list(executor.get_nodes()):
        executor.remove_node(node)
        node.destroy_node()


def stop_after_nodes(executor: Any, *processes: NodeProcess) -> None:
    """Destroy ``executor``'s nodes, then stop ``processes``: the test's readers are gone before the
    writers they matched leave, the order that keeps a fixture's end out of the Fast DDS deadlock
    :mod:`hangs` tells of (a peer's writer leaving while this process's reader of it has a
    timer running)."""
    try:
        destroy_nodes(executor)
    finally:
        for process in processes:
            process.stop()


@pytest.fixture
def rclpy_context(built_interfaces: None) -> Iterator[object]:
    """An initialized rclpy context for one test (shut down afterwards)."""
    with new_context() as ctx:
        yield ctx


@pytest.fixture
def executor(rclpy_context: object) -> Iterator[object]:
    """A single-threaded executor in the test's context; nodes added to it are destroyed after."""
    with new_executor(rclpy_context) as ex:
        yield ex


def spin_until(executor: object, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Spin ``executor`` until ``predicate()`` is true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        executor.spin_once(timeout_sec=0.05)  # type: ignore[attr-defined]
    return predicate()


def spin_while_rising(executor: object, value: Callable[[], int], goal: int, stall_s: float = 30.0) -> bool:
    """Spin ``executor`` until ``value()`` reaches ``goal``; give up once it has not risen for
    ``stall_s`` seconds. For work whose pace is the machine's (a flood the node works through): a
    loaded machine gets there later, a stuck node fails (test/hangs.py bounds the whole test)."""
    best, since = value(), time.monotonic()
    while True:
        now_value = value()
        if now_value >= goal:
            return True
        if now_value > best:
            best, since = now_value, time.monotonic()
        elif time.monotonic() - since > stall_s:
            return False
        executor.spin_once(timeout_sec=0.05)  # type: ignore[attr-defined]


@pytest.fixture
def spin() -> Callable[..., bool]:
    """The :func:`spin_until` helper as a fixture."""
    return spin_until


def call_service(
    executor: Any,
    client: Any,
    request: Any,
    timeout: float = 20.0,
    *,
    answer_timeout: float | None = None,
    attempts: int = 1,
) -> Any:
    """Call ``client``'s service with ``request``, spinning ``executor`` until the answer; the response.

    Waits up to ``timeout`` s for the service to be offered (discovery is asynchronous), then up
    to ``answer_timeout`` s (default ``timeout``) for the answer. With ``attempts`` > 1 an
    unanswered request is withdrawn and sent again: after a server restarts, a request sent
    before the new server has matched is lost. Fails the test, naming the service, when it is
    not offered or does not answer.
    """
    wait = timeout if answer_timeout is None else answer_timeout
    for _ in range(attempts):
        if not spin_until(executor, client.service_is_ready, timeout):
            pytest.fail(f"service {client.service_name} not available within {timeout:g} s")
        future = client.call_async(request)
        if spin_until(executor, future.done, wait):
            return future.result()
        client.remove_pending_request(future)
    pytest.fail(f"service {client.service_name} did not answer ({attempts} request(s), {wait:g} s each)")


def first_call(executor: Any, client: Any, request: Any, timeout: float = 60.0) -> Any:
    """The first call to a server in a process that just started: :func:`call_service` that sends
    again every 3 s (up to ``timeout``). ``service_is_ready`` says the server's request reader has
    matched, not that its reply writer has matched our reader: a reply sent before that is lost.
    Use it for a request that may be repeated (a query, a refusal), before the test's own calls."""
    return call_service(executor, client, request, timeout, answer_timeout=3.0, attempts=int(timeout // 3))


@pytest.fixture
def call(executor: object) -> Callable[..., Any]:
    """:func:`call_service` on the test's executor: ``call(client, request, timeout=20.0, ...)``."""
    return functools.partial(call_service, executor)


#: a learner that swaps a received model in at once (no shadow window, no canary): for the tests of
#: the reload itself (the shipped defaults judge a received model in shadow first)
IMMEDIATE_SWAP = ("-p", "shadow_window_s:=0.0", "-p", "canary_window_s:=0.0")
#: the same, as the parameters of a node made in the test's process
IMMEDIATE_SWAP_PARAMS = {"shadow_window_s": 0.0, "canary_window_s": 0.0}


def make_dynamics_node(context: Any, urdf: bool = True, **params: Any) -> Any:
    """An InverseDynamicsNode in this process for the simulated Panda (its URDF file unless
    ``urdf`` is false: then from robot_description), 50 features, no periodic diagnostics nor
    rate-limited warnings; ``params`` override."""
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes.inverse_dynamics import InverseDynamicsNode
    from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_path

    defaults: dict[str, Any] = {
        "joint_names": JOINT_NAMES,
        "n_features": 50,
        "diagnostics_period_s": 0.0,
        "warn_period_s": 0.0,
    }
    if urdf:
        defaults["urdf_path"] = panda_urdf_path()
    overrides = [Parameter(k, value=v) for k, v in {**defaults, **params}.items()]
    return InverseDynamicsNode(context=context, parameter_overrides=overrides)


def offset_dynamics_model() -> tuple[Any, dict, Any]:
    """A nonparametric model (the residual alone) that learned torques offset by 100 N·m (its targets'
    range away from 0) on a Gaussian map, whose prediction falls to 0 far from the learned states."""
    import numpy as np

    from lifelong_learning.dynamics import SemiparametricInverseDynamics
    from lifelong_learning.learners.slkl_features import SLKLFeatureMap
    from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text

    log = PandaSimulation().run(1.0, seed=1, log_every=5)
    qdd = np.gradient(log["qd"], log["t"], axis=0)
    probe = SemiparametricInverseDynamics(panda_urdf_text(), JOINT_NAMES, mode="nonparametric", n_features=5)
    inputs = probe.normalized_state(log["q"], log["qd"], qdd)
    fmap = SLKLFeatureMap(inputs[::4], 1.0, np.ones(inputs[::4].shape[0]))
    model = SemiparametricInverseDynamics(
        panda_urdf_text(), JOINT_NAMES, mode="nonparametric", feature_map=fmap
    )
    model.update(log["q"], log["qd"], qdd, log["tau"] + 100.0)
    return model, log, qdd


def model_file_message(model: Any, folder: Path, name: str) -> Any:
    """A lifelong_learning/ModelFile carrying ``model``'s file (written in ``folder``, outside any
    node's model directory, and deleted: only the message has it), with its SHA-256."""
    import array
    import hashlib

    from lifelong_learning.msg import ModelFile

    path = folder / name
    model.save(path)
    data = path.read_bytes()
    path.unlink()
    msg = ModelFile(kind=model.kind, name=name, sha256=hashlib.sha256(data).hexdigest())
    msg.data = array.array("B", data)
    return msg


#: :func:`model_sender`'s process: it publishes each line of hex it reads as a serialized message,
#: once a reader has matched
MODEL_SENDER = """
import sys, time, rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from lifelong_learning.msg import ModelFile
rclpy.init()
node = rclpy.create_node("model_sender", start_parameter_services=False)
qos = QoSProfile(depth=2, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
pub = node.create_publisher(ModelFile, sys.argv[1], qos)
deadline = time.monotonic() + 20.0
while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
    rclpy.spin_once(node, timeout_sec=0.05)
print("matched" if pub.get_subscription_count() else "no reader within 20 s", flush=True)
for line in sys.stdin:
    pub.publish(bytes.fromhex(line.strip()))
    print("sent", flush=True)
"""


@contextmanager
def model_sender(topic: str) -> Iterator[Callable[[bytes], None]]:
    """A process that publishes serialized ``ModelFile`` messages on ``topic`` (RELIABLE,
    TRANSIENT_LOCAL, depth 2) once a reader has matched; yields ``send(raw)``, which returns once it
    is published. In a process of its own, so that a model data receiver's participant is the only
    one in the test's (destroying one of several participants in one process can hang inside Fast
    DDS: :mod:`hangs`)."""
    process = subprocess.Popen(
        [sys.executable, "-c", MODEL_SENDER, topic], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdin is not None and process.stdout is not None

    def send(raw: bytes) -> None:
        process.stdin.write(raw.hex() + "\n")
        process.stdin.flush()
        assert process.stdout.readline() == "sent\n"

    try:
        assert process.stdout.readline() == "matched\n"  # it waits for the receiver, then says so
        yield send
    finally:
        process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def set_double(executor: Any, peer: Any, node: str, name: str, value: float) -> None:
    """Set the double parameter ``name`` of the node ``node`` (its fully qualified name) through
    its ``set_parameters`` service, from the test's node ``peer``; fails the test when refused."""
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    client = peer.create_client(SetParameters, f"{node}/set_parameters")
    value_msg = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=float(value))
    request = SetParameters.Request(parameters=[Parameter(name=name, value=value_msg)])
    res = call_service(executor, client, request)
    assert res.results[0].successful, res.results[0].reason


def latched_qos(depth: int = 10) -> Any:
    """Reliable, transient local, keep-last ``depth``: the QoS of the nodes' event topics."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        depth=depth, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )


def predict_torques(executor: Any, client: Any, states: list[dict]) -> Any:
    """The torques ``client`` (an inverse_dynamics ``~/predict``) answers for joint states (dicts of
    ``sim.panda.joint_states``) at an acceleration of 0.5 rad/s² per joint, one row each."""
    import numpy as np
    from lifelong_learning.srv import PredictTorques

    out = []
    for state in states:
        req = PredictTorques.Request(
            name=list(state["name"]),
            position=list(state["position"]),
            velocity=list(state["velocity"]),
            acceleration=[0.5] * len(state["name"]),
        )
        res = call_service(executor, client, req, 20.0)
        assert res.success, res.message
        out.append(res.effort)
    return np.array(out)


class JointStateStream:
    """Publish recorded joint states (``sim.panda.joint_states`` dicts, cycled with increasing
    stamps) at about 200 a second of wall time, spinning ``executor`` between messages.

    ``answered`` (optional): how many of them the node has answered so far. Then no more than
    ``max_behind`` are on their way at a time: a node flooded faster than it answers drops joint
    states from its subscription's queue and learns late, and what it judges (drift, contacts) would
    depend on the machine's speed. Messages that get no answer within 0.5 s count as lost."""

    def __init__(
        self,
        executor: Any,
        publisher: Any,
        states: list[dict],
        answered: Callable[[], int] | None = None,
        max_behind: int = 20,
    ) -> None:
        self.executor, self.publisher, self.states, self.next = executor, publisher, states, 0
        self.offset, self.stamp = 0.0, -1.0  # added to the states' stamps; the last stamp sent
        self.answered, self.max_behind = answered, max_behind
        self.sent = self.lost = 0
        self._waiting_since: float | None = None

    def switch(self, states: list[dict]) -> None:
        """Go on with ``states`` (a robot that changed: another payload), stamps still increasing."""
        self.states, self.next = states, 0
        self.offset = self.stamp + 0.01 - states[0]["stamp"]

    def _wait(self) -> bool:
        """Whether to wait for answers before the next message (``answered`` given and too many on
        their way); after 0.5 s without enough answers, the missing ones count as lost."""
        if self.answered is None:
            return False
        behind = self.sent - self.answered() - self.lost
        if behind <= self.max_behind:
            self._waiting_since = None
            return False
        now = time.monotonic()
        if self._waiting_since is None:
            self._waiting_since = now
        if now - self._waiting_since < 0.5:
            return True
        self.lost += behind
        self._waiting_since = None
        return False

    def until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Stream until ``predicate()`` is true (or ``timeout`` seconds pass); its last value."""
        from sensor_msgs.msg import JointState

        deadline = time.monotonic() + timeout
        first, last = self.states[0]["stamp"], self.states[-1]["stamp"]
        while time.monotonic() < deadline:
            if predicate():
                return True
            if self._wait():
                self.executor.spin_once(timeout_sec=0.01)
                continue
            state = self.states[self.next % len(self.states)]
            lap = self.next // len(self.states)  # stamps keep increasing over laps
            stamp = self.offset + state["stamp"] + lap * (last - first + 0.01)
            self.stamp = stamp
            msg = JointState(name=state["name"], position=state["position"], velocity=state["velocity"])
            msg.effort = state["effort"]
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp), round((stamp - int(stamp)) * 1e9)
            self.publisher.publish(msg)
            self.next += 1
            self.sent += 1
            self.executor.spin_once(timeout_sec=0.005)
        return predicate()


class DiagnosticsReader:
    """What the nodes publish on ``/diagnostics``, as a node of the test receives it.

    Each node's statuses (diagnostic_msgs/DiagnosticStatus), newest last, are kept under the
    node's fully qualified name without the leading '/', as this package names its status
    (``robot1/inverse_dynamics: health`` is the status of ``robot1/inverse_dynamics``; a ``node``
    argument may keep the '/'). A status named otherwise is kept under its whole name.
    """

    def __init__(self, node: Any, depth: int = 50) -> None:
        """Subscribe ``node`` (the test's rclpy node) to ``/diagnostics``; spin its executor to read."""
        from diagnostic_msgs.msg import DiagnosticArray

        from lifelong_learning.nodes.base import status_node

        self._status_node = status_node
        self._statuses: dict[str, list[Any]] = {}
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_message, depth)

    def _on_message(self, msg: Any) -> None:
        for status in msg.status:
            self.statuses(self._status_node(status.name)).append(status)

    def statuses(self, node: str) -> list[Any]:
        """Every status of ``node`` received so far, newest last (the list itself: clear it to
        wait for ones published later)."""
        return self._statuses.setdefault(node.lstrip("/"), [])

    def latest(self, node: str) -> Any | None:
        """The newest status of ``node``; None before its first."""
        statuses = self.statuses(node)
        return statuses[-1] if statuses else None

    def values(self, node: str) -> dict[str, str]:
        """The key/values of the newest status of ``node`` (empty before its first)."""
        status = self.latest(node)
        return {kv.key: kv.value for kv in status.values} if status is not None else {}

    def count(self, node: str, key: str) -> int:
        """The counter ``key`` in the newest status of ``node`` as an int: 0 when that status has no
        such key (nothing counted yet), -1 before the node's first status, so that a count read
        then never equals one read after."""
        if self.latest(node) is None:
            return -1
        return int(self.values(node).get(key, "0"))

    def rejected(self, node: str, reason: str) -> int:
        """The count of inputs ``node`` refused for ``reason`` (its ``rejected: <reason>``)."""
        return self.count(node, f"rejected: {reason}")


@pytest.fixture
def start_process(tmp_path: Path, built_interfaces: None) -> Iterator[Callable[..., NodeProcess]]:
    """Start processes (e.g. :func:`node_argv`) logging to files in ``tmp_path``, which is also their
    working directory (never the repo root: ``python -m`` would import the source tree); all are
    stopped (SIGINT, SIGKILL after 15 s) at the end of the test."""
    procs: list[NodeProcess] = []

    def start(argv: list[str], env: dict[str, str] | None = None) -> NodeProcess:
        p = NodeProcess(argv, log_path=tmp_path / f"proc{len(procs)}.log", env=env)
        procs.append(p)
        return p

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 15.0
    for proc in procs:
        if proc.wait(max(0.0, deadline - time.monotonic())) is None:
            # a node that ignored Ctrl-C for 15 s: its threads' stacks (PYTHONFAULTHANDLER, on
            # SIGABRT) and its log are said before it is killed
            proc.send_signal(signal.SIGABRT)
            proc.wait(3.0)
            warnings.warn(f"killed after 15 s of SIGINT: {proc.argv[:4]}\n{proc.log()[-6000:]}", stacklevel=1)
    stop_all(procs, timeout=0.0)


def said(res: Any, tail: int = 3000) -> str:
    """What a finished command (a ``subprocess.CompletedProcess`` with text output) printed, for a
    failure message: the ends of its stdout and stderr and, when a process of it died of a fatal
    signal with ``PYTHONFAULTHANDLER`` on (set above), the stacks of its threads from the start of
    that report (the module list after them would push them out of the end)."""
    fatal = res.stderr.find("Fatal Python error")
    shown = fatal >= max(0, len(res.stderr) - tail)  # within the end of stderr already
    stacks = "" if fatal < 0 or shown else "\n--- fatal error report ---\n" + res.stderr[fatal : fatal + 6000]
    return res.stdout[-tail:] + res.stderr[-tail:] + stacks


def node_argv(node: str, *ros_args: str, params_file: bool = True) -> list[str]:
    """argv to run node ``node`` (module lifelong_learning.nodes.<node>) with its config file."""
    cfg = REPO / "config" / f"{node}.yaml"
    return node_command(node, [cfg] if params_file and cfg.exists() else [], ros_args=ros_args)


class RLSModel(RecursiveRLS, PersistentModel):
    """A RecursiveRLS that is a model file of its own kind: the smallest learner a node can serve."""

    kind = "test_rls"


def write_oversized_model_file(path: Path, kind: str, shape: tuple[int, ...] = (2**40,)) -> Path:
    """A small, otherwise valid model file of ``kind`` whose one array's npy header claims ``shape``
    (float64; the default claims 8 TiB) while the member holds 8 data bytes."""
    import io
    import json
    import zipfile

    import numpy as np

    header = {"format": "lifelong_learning.model", "version": 1, "kind": kind, "meta": {}}
    meta = io.BytesIO()
    np.lib.format.write_array(meta, np.frombuffer(json.dumps(header).encode(), np.uint8))
    huge = io.BytesIO()
    np.lib.format.write_array_header_1_0(huge, {"descr": "<f8", "fortran_order": False, "shape": shape})
    huge.write(np.zeros(1).tobytes())
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("__header__.npy", meta.getvalue())
        zf.writestr("weights.npy", huge.getvalue())
    return path


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``dir``: an XDG cache home holding the exported and the quantized default model (built here,
    once per session: export + calibration take seconds); ``fp32`` and ``int8``: extractors on them.

    (Here rather than in test/vision/conftest.py: a second module named ``conftest`` would shadow this
    one for the tests that import helpers from it.)"""
    from types import SimpleNamespace

    from lifelong_learning.vision import FeatureExtractor

    cache = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        fp32 = FeatureExtractor(precision="fp32", num_threads=1)
        int8 = FeatureExtractor(precision="int8", num_threads=1)
    return SimpleNamespace(dir=cache, fp32=fp32, int8=int8)


# ---------------------------------------------------------------- retraining jobs
MakeJob = Callable[..., TuningJob]


def tuning_job(
    directory: Path, *bags: str, task: str = "inverse-dynamics", out: str = "m.llm", **fields: Any
) -> TuningJob:
    """A TuningJob of the ``bags`` (names under ``directory``) that writes ``directory / out``, on
    the CPU. An inverse-dynamics job (the default task) takes the simulated Panda's URDF unless it
    names a URDF or a model to continue from; every other field is the job's default unless given."""
    fields.setdefault("device", "cpu")
    if task == "inverse-dynamics" and "urdf" not in fields and "init" not in fields:
        from lifelong_learning.sim.panda import panda_urdf_path

        fields["urdf"] = panda_urdf_path()
    return TuningJob(bags=[str(directory / b) for b in bags], task=task, out=str(directory / out), **fields)


@pytest.fixture
def make_job(tmp_path: Path) -> MakeJob:
    """:func:`tuning_job` in the test's ``tmp_path``: ``make_job("bag", centers=30, epochs=5)``."""

    def make(*bags: str, **fields: Any) -> TuningJob:
        return tuning_job(tmp_path, *bags, **fields)

    return make


@pytest.fixture
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread for the test: the offline methods' small matrices (tens of rows)
    gain nothing from a second thread, and on a loaded 2-core machine its hand-offs cost ~10 ms per
    product (measured: NYTRO's 200 iterations on 200 rows, 1.9 s on two threads, 0.02 s on one)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
