"""Lifecycle transitions are reversible any number of times, and a finalized node serves nothing,
across processes.

Each learner node, in a process of its own with ``autostart``, learns, is taken through five
deactivate → cleanup → configure → activate cycles by a lifecycle manager's ``~/change_state``,
and must learn again after them (before: inverse_dynamics's learning thread, stopped by the first
cleanup, never ran again; every sample was counted ``learning queue full``). Then the shutdown
transition: the finalized node answers every service ``success: false`` with the reason, counts
it (``rejected: node finalized``) and changes nothing (before: it still answered ``~/predict`` and
loaded a model on ``~/load_model``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import DiagnosticsReader, call_service, first_call, node_argv, spin_until

from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, joint_states, panda_urdf_path


def same_answers(after: list[Any], before: list[Any]) -> bool:
    """Equal to 1e-12 of the largest magnitude: an answer is ``Z W`` or two triangular solves
    (learners/recursive_rls.py: ``predict``), whichever the model holds when it is asked, which
    depends on when its weights were last solved; the two differ in the last bit. A sample lost
    would change them by far more."""
    a, b = np.asarray(after, dtype=np.float64), np.asarray(before, dtype=np.float64)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= 1e-12 * max(np.max(np.abs(b)), 1e-300)))


pytestmark = pytest.mark.graph

NAMESPACE = "/cycles_test"
CYCLES = 5
FINALIZED = "node finalized"


class Managed:
    """The test's side of one managed learner node: lifecycle clients, diagnostics, its services."""

    def __init__(self, executor: Any, proc: Any, node: str, namespace: str = NAMESPACE) -> None:
        from lifecycle_msgs.srv import ChangeState, GetState
        from rclpy.node import Node

        self.executor, self.proc, self.name, self.namespace = executor, proc, node, namespace
        self.peer = Node(f"{node}_cycles_peer", namespace=namespace, context=executor.context)
        executor.add_node(self.peer)
        self.get_state = self.peer.create_client(GetState, self.service("get_state"))
        self.change = self.peer.create_client(ChangeState, self.service("change_state"))
        self.diag = DiagnosticsReader(self.peer)

    @property
    def status_name(self) -> str:
        return f"{self.namespace}/{self.name}"

    def service(self, name: str) -> str:
        return f"{self.namespace}/{self.name}/{name}"

    def client(self, srv_type: Any, name: str) -> Any:
        return self.peer.create_client(srv_type, self.service(name))

    def state(self) -> str:
        from lifecycle_msgs.srv import GetState

        return first_call(self.executor, self.get_state, GetState.Request()).current_state.label

    def transition(self, label: str, goes_to: str) -> None:
        """Request the transition ``label`` (configure, activate...) and wait for ``goes_to``; a lost
        first reply of change_state is recovered from the node's state (never repeated blindly)."""
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        ids = {
            "configure": Transition.TRANSITION_CONFIGURE,
            "activate": Transition.TRANSITION_ACTIVATE,
            "deactivate": Transition.TRANSITION_DEACTIVATE,
            "cleanup": Transition.TRANSITION_CLEANUP,
            "shutdown": Transition.TRANSITION_ACTIVE_SHUTDOWN,
        }
        assert spin_until(self.executor, self.change.service_is_ready, 30), self.proc.log()
        for _ in range(5):
            future = self.change.call_async(ChangeState.Request(transition=Transition(id=ids[label])))
            if spin_until(self.executor, future.done, 10):
                assert future.result().success, (label, self.proc.log())
                assert self.state() == goes_to
                return
            assert spin_until(self.executor, lambda: self.state() in ("unconfigured", "inactive", "active",
                                                                      "finalized"), 30)  # fmt: skip
            if self.state() == goes_to:
                return
        pytest.fail(f"{label} not answered in 5 tries:\n{self.proc.log()}")

    def cycles(self, n: int) -> None:
        for _ in range(n):
            self.transition("deactivate", "inactive")
            self.transition("cleanup", "unconfigured")
            self.transition("configure", "inactive")
            self.transition("activate", "active")

    def count(self, key: str) -> int:
        return self.diag.count(self.status_name, key)

    def settled_count(self, key: str) -> int:
        """``key`` once everything answered is learned: the learning queue empty in two statuses in
        a row, published after this call, that agree on ``key`` (no input arrives meanwhile)."""
        seen: list[tuple[int, int]] = []
        while len(seen) < 2 or seen[-1] != seen[-2] or seen[-1][1] != 0:
            assert len(seen) < 100, seen
            value = self.fresh_count(key)
            seen.append((value, self.count("learning queue")))
        return seen[-1][0]

    def fresh_count(self, key: str) -> int:
        """``key`` in a status published after this call (the latest may be older than the last change)."""
        statuses = self.diag.statuses(self.status_name)
        start = len(statuses)
        assert spin_until(self.executor, lambda: len(statuses) > start + 1, 10), self.proc.log()
        return self.count(key)

    def finalized_refuses(self, calls: dict[str, tuple[Any, Any]]) -> None:
        """Shut the node down, then assert that each of ``calls`` (service: (client, request)) is
        answered ``success: false`` saying the node is finalized, counted once each, and that the
        model did not change (its version in diagnostics)."""
        self.transition("shutdown", "finalized")
        version = self.fresh_count("model version")
        before = self.diag.rejected(self.status_name, FINALIZED)
        for name, (client, request) in calls.items():
            res = call_service(self.executor, client, request, 20.0)
            assert not res.success, (name, res.message)
            assert "finalized" in res.message, (name, res.message)
        want = before + len(calls)
        counted = lambda: self.diag.rejected(self.status_name, FINALIZED) == want  # noqa: E731
        assert spin_until(self.executor, counted, 10), (self.diag.values(self.status_name), self.proc.log())
        assert self.fresh_count("model version") == version
        assert self.proc.alive()


def torque_probe(state: dict) -> Any:
    """A ``~/predict`` request for the joint state ``state`` at rest acceleration."""
    from lifelong_learning.srv import PredictTorques

    return PredictTorques.Request(name=list(state["name"]), position=list(state["position"]),
                                  velocity=list(state["velocity"]), acceleration=[0.0] * 7)  # fmt: skip


def model_services(node: Managed, save_to: str, load_from: str) -> dict[str, tuple[Any, Any]]:
    from lifelong_learning.srv import LoadModel, SaveModel
    from std_srvs.srv import Trigger

    return {
        "load_model": (node.client(LoadModel, "load_model"), LoadModel.Request(path=load_from)),
        "save_model": (node.client(SaveModel, "save_model"), SaveModel.Request(path=save_to)),
        "reset": (node.client(Trigger, "reset"), Trigger.Request()),
        "rollback": (node.client(Trigger, "rollback"), Trigger.Request()),
    }


def test_inverse_dynamics_learns_after_five_cycles_and_serves_nothing_finalized(
    executor, start_process, ros_home: Path
):
    from lifelong_learning.srv import PredictTorques
    from sensor_msgs.msg import JointState

    models = ros_home / "lifelong_learning"  # the default model_directory; checkpoint_path: auto
    argv = node_argv(
        "inverse_dynamics",
        *("-p", f"urdf_path:={panda_urdf_path()}", "-p", "joint_names:=[" + ",".join(JOINT_NAMES) + "]"),
        *("-p", "n_features:=50", "-p", "diagnostics_period_s:=0.2", "-p", "warn_period_s:=0.0"),
        *("-p", "learn_max_hz:=0.0", "-p", "outlier_k:=0.0", "-r", f"__ns:={NAMESPACE}"),
    )
    proc = start_process(argv)
    node = Managed(executor, proc, "inverse_dynamics")
    states = list(joint_states(PandaSimulation().run(4.0, seed=7), rate_hz=100.0))
    publisher = node.peer.create_publisher(JointState, "joint_states", 100)
    torques: list[Any] = []
    node.peer.create_subscription(JointState, "predicted_torque", torques.append, 100)
    predict = node.client(PredictTorques, "predict")
    sent = iter(range(len(states)))

    def feed(n: int, wait_for_answers: bool = True) -> None:
        """Publish ``n`` joint states, each once its predecessor was answered (best effort; without
        ``wait_for_answers``: at once, then 2 s for answers that must not come)."""
        for _ in range(n):
            k = next(sent)
            state = states[k]
            msg = JointState(name=list(state["name"]), position=list(state["position"]),
                             velocity=list(state["velocity"]), effort=list(state["effort"]))  # fmt: skip
            msg.header.stamp.sec = int(state["stamp"]) + 100
            msg.header.stamp.nanosec = round((state["stamp"] % 1.0) * 1e9)
            answered = len(torques)
            publisher.publish(msg)
            if wait_for_answers:
                spin_until(executor, lambda answered=answered: len(torques) > answered, 1.0)
        if not wait_for_answers:
            spin_until(executor, lambda: False, 2.0)

    assert first_call(executor, predict, PredictTorques.Request()) is not None  # a refusal, once matched
    assert spin_until(executor, lambda: publisher.get_subscription_count() > 0, 30), proc.log()
    feed(40)
    assert spin_until(executor, lambda: node.count("samples learned") >= 20, 10), node.diag.values(
        node.status_name
    )
    learned = node.settled_count("samples learned")
    probes = [torque_probe(states[k]) for k in (0, 17, 33)]
    before = [call_service(executor, predict, probe).effort for probe in probes]

    # With the shipped defaults (checkpoint_path: auto) nothing learned is lost (the same answers to
    # rounding: see same_answers).
    node.cycles(CYCLES)
    assert node.fresh_count("samples learned") == learned, node.diag.values(node.status_name)
    assert same_answers([call_service(executor, predict, probe).effort for probe in probes], before)
    # ... nor by a restart of the process
    proc.stop()
    proc = node.proc = start_process(argv)
    after = [first_call(executor, predict, probe).effort for probe in probes]
    assert same_answers(after, before), proc.log()
    assert spin_until(executor, lambda: publisher.get_subscription_count() > 0, 30), proc.log()
    feed(40)
    assert spin_until(executor, lambda: node.count("samples learned") >= learned + 20, 10), (
        node.diag.values(node.status_name),
        proc.log(),
    )
    assert node.count("not learned: learning queue full") == 0, node.diag.values(node.status_name)

    calls = model_services(node, "after.model", "checkpoints/cycles_test/inverse_dynamics.llm")
    probe = probes[0]
    assert call_service(executor, predict, probe).success
    node.finalized_refuses({**calls, "predict": (predict, probe)})
    assert not (models / "after.model").exists()
    answered = len(torques)
    feed(5, wait_for_answers=False)
    assert len(torques) == answered  # finalized: inputs not answered


def test_object_recognition_learns_after_five_cycles_and_serves_nothing_finalized(
    executor, start_process, ros_home: Path
):
    from lifelong_learning.msg import LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo, Predict
    from rclpy.qos import QoSProfile
    from std_srvs.srv import Trigger

    models = ros_home / "lifelong_learning"  # the default model_directory; checkpoint_path: auto
    argv = node_argv(
        "object_recognition",
        *("-p", "lambdas:=[1.0]", "-p", "alpha:='0.0'", "-p", "diagnostics_period_s:=0.2"),
        *("-r", f"__ns:={NAMESPACE}"),
    )
    proc = start_process(argv)
    node = Managed(executor, proc, "object_recognition")
    labeled = node.peer.create_publisher(LabeledFeatures, "labeled_features", QoSProfile(depth=100))
    info = node.client(GetClassifierInfo, "info")
    rng = np.random.default_rng(0)

    def teach(n: int) -> int:
        """Teach ``n`` samples (reliable); the samples seen after."""
        assert spin_until(executor, lambda: labeled.get_subscription_count() > 0, 30), proc.log()
        before = first_call(executor, info, GetClassifierInfo.Request()).samples_seen
        for i in range(n):
            labeled.publish(LabeledFeatures(data=rng.normal(size=8).tolist(), label=("cup", "ball")[i % 2]))
        seen = lambda: call_service(executor, info, GetClassifierInfo.Request()).samples_seen  # noqa: E731
        assert spin_until(executor, lambda: seen() == before + n, 20), proc.log()
        return before + n

    predict = node.client(Predict, "predict")
    probes = [Predict.Request(data=rng.normal(size=8).tolist()) for _ in range(3)]

    def answers() -> list[tuple[str, list[float]]]:
        return [(a.label, list(a.scores)) for a in (first_call(executor, predict, p) for p in probes)]

    assert teach(6) == 6
    before = answers()
    # With the shipped defaults (checkpoint_path: auto) every prediction comes back (to rounding:
    # see same_answers).
    node.cycles(CYCLES)
    after = answers()
    assert [a for a, _ in after] == [b for b, _ in before]
    assert same_answers([s for _, s in after], [s for _, s in before])
    assert teach(6) == 12  # restored from the checkpoint, and learning again
    taught = answers()
    # ... also after the process restarts
    proc.stop()
    proc = node.proc = start_process(argv)
    assert answers() == taught, proc.log()
    # Without checkpoints, cleanup keeps the model it releases for ~/rollback.
    rollback = node.client(Trigger, "rollback")
    proc.stop()
    proc = node.proc = start_process([*argv, "-p", "checkpoint_path:=''"])
    assert first_call(executor, info, GetClassifierInfo.Request()).samples_seen == 0  # no checkpoint
    assert teach(6) == 6
    taught = answers()
    node.cycles(1)
    assert first_call(executor, info, GetClassifierInfo.Request()).samples_seen == 0
    assert call_service(executor, rollback, Trigger.Request()).success
    assert answers() == taught

    probe = probes[0]
    assert call_service(executor, predict, probe).success
    calls = model_services(node, "after.model", "checkpoints/cycles_test/object_recognition.llm")
    calls |= {"predict": (predict, probe), "info": (info, GetClassifierInfo.Request())}
    node.finalized_refuses(calls)
    assert not (models / "after.model").exists()
