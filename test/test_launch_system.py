"""The launch files run by the real launch system (``launch.LaunchService``), as ``ros2 launch`` would.

A launch runs in a process of its own (test/run_launch_file.py: each file included with
``IncludeLaunchDescription`` and its launch arguments): the bring-up alone, and the four
single-purpose files together, each in a namespace of its own (one start and one stop of their
five nodes instead of four). Each test checks, in that one run, that the nodes of every file come
up in the namespace given, with the parameters and remappings the arguments set, that they answer,
and that the whole launch stops cleanly on SIGINT: exit status 0, every node's process finished
cleanly, no traceback and no "exception was never retrieved" in the output. The static checks of
the same files are test/test_launch_files.py.

``launch`` and ``launch_ros`` have no wheels: their upstream sources are in
../shared/vendor/ros2-launch, and scripts/bootstrap.sh (scripts/install_launch.sh) installs
them when that folder is there; without it these tests skip, saying so.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import REPO, first_call, spin_until

from lifelong_learning.nodes.supervisor import NodeProcess

#: where scripts/install_launch.sh installs the launch system from (LL_LAUNCH_SOURCES overrides, for both)
VENDOR = Path(os.environ.get("LL_LAUNCH_SOURCES") or REPO.parent / "shared" / "vendor" / "ros2-launch")
RUNNER = REPO / "test" / "run_launch_file.py"
#: seconds the launch system waits after a SIGINT before it sends its nodes SIGTERM (launch's default)
LAUNCH_SIGTERM_S = 5.0
#: what a clean stop never prints ("exception was never retrieved": an rclpy task that failed unread)
NEVER_PRINTED = ("Traceback", "exception was never retrieved", "terminate called", "[ERROR]")

pytestmark = [
    pytest.mark.graph,
    pytest.mark.serial,
    pytest.mark.skipif(
        not VENDOR.is_dir(),
        reason=f"no {VENDOR}: the ROS 2 launch system's sources (launch and launch_ros have no wheels; "
        "scripts/install_launch.sh installs them from there)",
    ),
]


@pytest.fixture(scope="module")
def launch_system(built_interfaces: None) -> None:
    """The sources are there: the launch system must be installed (by scripts/bootstrap.sh)."""
    missing = [m for m in ("launch", "launch_ros", "osrf_pycommon") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(f"{VENDOR} is there but {missing} not installed: run scripts/bootstrap.sh (make build)")


@pytest.fixture
def launch(
    launch_system: None, start_process: Callable[..., NodeProcess]
) -> Iterator[Callable[..., NodeProcess]]:
    """``launch(file, name=value, ...)``: the launch file running in its own process."""

    def start(file: str, **arguments: Any) -> NodeProcess:
        return start_process([sys.executable, str(RUNNER), *launch_argv(file, arguments)])

    yield start


def launch_argv(file: str, arguments: dict[str, Any]) -> list[str]:
    """``file`` and its launch arguments as test/run_launch_file.py takes them."""
    return [file, *(f"{k}:={v}" for k, v in arguments.items())]


def params_file(folder: Path, parameters: dict[str, dict[str, Any]], name: str = "params") -> Path:
    """A ROS 2 params file setting ``parameters`` of each node (keyed ``/**/<node>``)."""
    import yaml

    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({f"/**/{node}": {"ros__parameters": p} for node, p in parameters.items()}))
    return path


class Peer:
    """The test's node: what it sees of the graph, and the clients and subscriptions it made."""

    def __init__(self, executor: Any, context: Any) -> None:
        from rclpy.node import Node

        self.executor = executor
        self.node = Node("launch_test_peer", context=context)
        executor.add_node(self.node)

    def wait_for_nodes(self, namespace: str, names: set[str], process: NodeProcess) -> None:
        """Spin until every node of ``names`` is in the graph in ``namespace``; when one never comes, its
        process is asked for its stacks (SIGABRT: the tests run nodes with PYTHONFAULTHANDLER) for the
        failure's message."""

        def missing() -> set[str]:
            return names - {n for n, ns in self.node.get_node_names_and_namespaces() if ns == namespace}

        if spin_until(self.executor, lambda: not missing(), 60):
            return
        absent = missing()
        for name in absent:  # launch logs "[<name>-<n>]: process started with pid [<pid>]"
            for pid in re.findall(rf"\[{name}-\d+\]: process started with pid \[(\d+)\]", process.log()):
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGABRT)

        def died() -> bool:
            return all(re.search(rf"\[{n}-\d+\]: process has died", process.log()) for n in absent)

        spin_until(self.executor, died, 10)
        raise AssertionError(f"not in the graph after 60 s: {sorted(absent)}\n{process.log()[-20000:]}")

    def parameter(self, node: str, name: str) -> Any:
        """The value of parameter ``name`` of ``node`` (fully qualified), from its get_parameters."""
        from rcl_interfaces.srv import GetParameters
        from rclpy.parameter import parameter_value_to_python

        client = self.node.create_client(GetParameters, f"{node}/get_parameters")
        (value,) = first_call(self.executor, client, GetParameters.Request(names=[name])).values
        return parameter_value_to_python(value)

    def subscribers(self, topic: str) -> set[str]:
        """The fully qualified names of the nodes subscribed to ``topic``."""
        return {
            f"{i.node_namespace.rstrip('/')}/{i.node_name}"
            for i in self.node.get_subscriptions_info_by_topic(topic)
        }

    def answers_joint_states(self, topic: str, torque_topic: str, process: NodeProcess) -> None:
        """Publish a simulated Panda's joint states on ``topic`` until torques come on ``torque_topic``
        (best effort across processes: the first ones may go before both ends matched)."""
        from sensor_msgs.msg import JointState

        from lifelong_learning.sim.panda import PandaSimulation, joint_states

        torques: list[Any] = []
        self.node.create_subscription(JointState, torque_topic, torques.append, 10)
        publisher = self.node.create_publisher(JointState, topic, 10)
        assert spin_until(self.executor, lambda: publisher.get_subscription_count() > 0, 60), process.log()
        states = list(joint_states(PandaSimulation().run(1.0, seed=1), rate_hz=100.0))
        for state in states:
            msg = JointState(**{k: list(state[k]) for k in ("name", "position", "velocity", "effort")})
            stamp = float(state["stamp"])
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp), int(stamp % 1 * 1e9)
            publisher.publish(msg)
            if spin_until(self.executor, lambda: bool(torques), 0.2):
                break
        assert torques, process.log()
        assert len(torques[0].effort) == 7 and np.isfinite(torques[0].effort).all()


def stops_cleanly(process: NodeProcess, nodes: int) -> None:
    """Ctrl-C: the launch and its ``nodes`` node processes exit 0, nothing bad printed.

    A terminal sends SIGINT to its whole foreground process group, and the launch system relies
    on that: told of a SIGINT, it sends the nodes none of its own (it would reach them twice),
    waits, then escalates to SIGTERM. So the signal goes to the launch's process group (its own
    session: :class:`NodeProcess`), which holds the node processes too."""
    os.killpg(process.pid, signal.SIGINT)
    code = process.wait(LAUNCH_SIGTERM_S - 1.0)
    stuck = "" if code is not None else still_running(process.pid)  # before launch escalates
    code = process.wait(60) if code is None else code
    log = process.log() + stuck
    assert code == 0, log
    assert log.count("process has finished cleanly") == nodes, log
    for text in NEVER_PRINTED:
        assert text not in log, f"{text!r} printed:\n{log}"


def _thread(task: Path) -> str:
    """Name, state, kernel wait channel and kernel stack of the thread ``/proc/<pid>/task/<tid>``."""

    def read(name: str) -> str:
        try:
            return (task / name).read_text()
        except OSError:  # ended meanwhile, or not readable by this user
            return ""

    stat = read("stat")
    name, state = (
        (stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2]) if stat else ("?", "?")
    )
    stack = " < ".join(line.split()[-1] for line in read("stack").splitlines()[:6] if line.split())
    return f"{name!r} {state} wchan {read('wchan') or '-'} stack {stack or 'unreadable'}"


def still_running(session: int) -> str:
    """What the processes of ``session`` other than its leader are doing, from /proc: each one's
    command, state and, per thread, name, state, kernel wait channel and kernel stack (where
    readable). Said with a stop that was not clean, to tell a process stuck in its own code from
    one that was not running at all (stopped, or waiting in the kernel)."""
    lines = []
    for proc in sorted(Path("/proc").glob("[0-9]*"), key=lambda p: int(p.name)):
        try:
            stat = (proc / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[3]) != session or int(proc.name) == session:  # fields[3]: the session id
                continue
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            tasks = sorted((proc / "task").iterdir(), key=lambda p: int(p.name))
        except (OSError, ValueError, IndexError):  # it ended meanwhile
            continue
        lines.append(f"pid {proc.name} state {fields[0]}: {command[:160]}")
        lines += [f"  thread {task.name} {_thread(task)}" for task in tasks]
    if not lines:
        return ""
    return f"\n--- still running {LAUNCH_SIGTERM_S - 1.0:g} s after SIGINT ---\n" + "\n".join(lines)


@pytest.fixture
def peer(executor: Any, rclpy_context: Any) -> Peer:
    return Peer(executor, rclpy_context)


def test_the_bring_up_starts_every_node_in_its_namespace_with_the_arguments_given(launch, peer, tmp_path):
    """lifelong_learning.launch.py, recording on: five nodes in /robot1, a params file, remapped
    inputs (absolute topics), the URDF and joint names given as arguments."""
    from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_path

    params = params_file(
        tmp_path,
        {
            "feature_extractor": {"num_threads": 1},
            "object_recognition": {"max_classes": 7, "model_directory": str(tmp_path)},
            "inverse_dynamics": {"n_features": 50, "model_directory": str(tmp_path)},
            "nystrom_tuner": {"output_dir": str(tmp_path / "models"), "diagnostics_period_s": 0.02},
        },
    )
    process = launch(
        "lifelong_learning.launch.py",
        namespace="robot1",
        params_file=params,
        image="/cam1/image_raw",
        joint_states="/arm1/joint_states",
        urdf_path=panda_urdf_path(),
        joint_names=",".join(JOINT_NAMES),
        enable_recording="true",
        bag=tmp_path / "bag",
    )
    names = {"feature_extractor", "object_recognition", "inverse_dynamics", "nystrom_tuner", "bag_recorder"}
    peer.wait_for_nodes("/robot1", names, process)
    assert peer.parameter("/robot1/object_recognition", "max_classes") == 7  # the params file
    assert peer.parameter("/robot1/inverse_dynamics", "joint_names") == list(JOINT_NAMES)  # an argument
    assert peer.parameter("/robot1/nystrom_tuner", "urdf_path") == panda_urdf_path()
    assert spin_until(
        peer.executor, lambda: "/robot1/feature_extractor" in peer.subscribers("/cam1/image_raw"), 20
    ), process.log()
    peer.answers_joint_states("/arm1/joint_states", "/robot1/predicted_torque", process)
    assert object_recognition_answers(peer, "/robot1")
    assert spin_until(peer.executor, lambda: (tmp_path / "bag").is_dir(), 20), process.log()
    stops_cleanly(process, nodes=len(names))
    assert (tmp_path / "bag" / "metadata.yaml").is_file()  # the recorder closed its bag


def object_recognition_answers(peer: Peer, namespace: str) -> bool:
    from lifelong_learning.srv import GetClassifierInfo

    client = peer.node.create_client(GetClassifierInfo, f"{namespace}/object_recognition/info")
    info = first_call(peer.executor, client, GetClassifierInfo.Request())
    return bool(info.success) and list(info.classes) == []


@pytest.fixture
def launches(
    launch_system: None, start_process: Callable[..., NodeProcess]
) -> Iterator[Callable[..., NodeProcess]]:
    """``launches((file, {name: value, ...}), ...)``: the launch files together in one launch process."""

    def start(*files: tuple[str, dict[str, Any]]) -> NodeProcess:
        argv = [sys.executable, str(RUNNER)]
        for k, (file, arguments) in enumerate(files):
            argv += [*(["--"] if k else []), *launch_argv(file, arguments)]
        return start_process(argv)

    yield start


def test_the_single_purpose_launch_files_each_in_a_namespace_of_their_own(launches, peer, tmp_path):
    """One launch of four files, each with its own arguments and namespace:

    - object_recognition.launch.py: both nodes in /robot2; compressed images from <image>/compressed;
      the params file applies;
    - inverse_dynamics.launch.py: /robot3/inverse_dynamics answers joint states on the topic given,
      with the URDF given; log_level:=warn leaves nothing at INFO from it;
    - nystrom_tuner.launch.py: /robot4/nystrom_tuner runs a small classification goal to its end, then
      stops cleanly (before, it printed "The following exception was never retrieved" at shutdown);
    - bag_recorder.launch.py: /robot5/bag_recorder records into the bag given, and closes it on SIGINT.
    """
    from lifelong_learning.action import TuneModel
    from rclpy.action import ActionClient

    from lifelong_learning.io.bags import write_labeled_features
    from lifelong_learning.sim.panda import panda_urdf_path

    recognition = params_file(
        tmp_path,
        {
            "feature_extractor": {"num_threads": 1},
            "object_recognition": {"max_classes": 5, "model_directory": str(tmp_path)},
        },
        name="recognition",
    )
    dynamics = params_file(
        tmp_path, {"inverse_dynamics": {"n_features": 50, "model_directory": str(tmp_path)}}, name="dynamics"
    )
    rng = np.random.default_rng(0)
    features = np.vstack([rng.normal(0, 1, (20, 4)), rng.normal(3, 1, (20, 4))])
    write_labeled_features(tmp_path / "tuner_bag", features, ["a"] * 20 + ["b"] * 20)
    # diagnostics every 20 ms: callbacks on the executor's threads at almost any moment of the stop
    tuner = params_file(
        tmp_path,
        {"nystrom_tuner": {"output_dir": str(tmp_path / "models"), "diagnostics_period_s": 0.02}},
        name="tuner",
    )
    process = launches(
        (
            "object_recognition.launch.py",
            {
                "namespace": "robot2",
                "params_file": recognition,
                "image": "/cam2/image_raw",
                "image_transport": "compressed",
            },
        ),
        (
            "inverse_dynamics.launch.py",
            {
                "namespace": "robot3",
                "params_file": dynamics,
                "joint_states": "/arm3/joint_states",
                "urdf_path": panda_urdf_path(),
                "log_level": "warn",
            },
        ),
        ("nystrom_tuner.launch.py", {"namespace": "robot4", "params_file": tuner}),
        ("bag_recorder.launch.py", {"namespace": "robot5", "output": tmp_path / "bag"}),
    )
    peer.wait_for_nodes("/robot2", {"feature_extractor", "object_recognition"}, process)
    peer.wait_for_nodes("/robot3", {"inverse_dynamics"}, process)
    peer.wait_for_nodes("/robot4", {"nystrom_tuner"}, process)
    peer.wait_for_nodes("/robot5", {"bag_recorder"}, process)

    # object_recognition.launch.py
    assert peer.parameter("/robot2/object_recognition", "max_classes") == 5
    assert peer.parameter("/robot2/feature_extractor", "num_threads") == 1
    assert spin_until(
        peer.executor,
        lambda: "/robot2/feature_extractor" in peer.subscribers("/cam2/image_raw/compressed"),
        20,
    ), process.log()
    assert object_recognition_answers(peer, "/robot2")

    # inverse_dynamics.launch.py
    assert peer.parameter("/robot3/inverse_dynamics", "n_features") == 50
    assert peer.parameter("/robot3/inverse_dynamics", "urdf_path") == panda_urdf_path()
    peer.answers_joint_states("/arm3/joint_states", "/robot3/predicted_torque", process)

    # nystrom_tuner.launch.py
    assert peer.parameter("/robot4/nystrom_tuner", "output_dir") == str(tmp_path / "models")
    client = ActionClient(peer.node, TuneModel, "/robot4/nystrom_tuner/tune")
    assert spin_until(peer.executor, client.server_is_ready, 60), process.log()
    goal = TuneModel.Goal(task="classification", bags=[str(tmp_path / "tuner_bag")], centers=8, epochs=3)
    sent = client.send_goal_async(goal)
    assert spin_until(peer.executor, sent.done, 60) and sent.result().accepted, process.log()
    result = sent.result().get_result_async()
    assert spin_until(peer.executor, result.done, 120), process.log()
    assert result.result().result.success, result.result().result.message
    assert Path(result.result().result.out_path).parent == tmp_path / "models"

    # bag_recorder.launch.py
    assert peer.parameter("/robot5/bag_recorder", "output") == str(tmp_path / "bag")
    assert spin_until(peer.executor, lambda: (tmp_path / "bag").is_dir(), 20), process.log()

    stops_cleanly(process, nodes=5)
    lines = process.log().splitlines()  # log_level:=warn: nothing at INFO from inverse_dynamics
    assert [line for line in lines if "[INFO] [" in line and "[robot3.inverse" in line] == []
    assert (tmp_path / "bag" / "metadata.yaml").is_file()  # the recorder closed its bag
