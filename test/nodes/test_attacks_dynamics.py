"""Attacks on the inverse_dynamics node's joint states, from another process.

One inverse_dynamics process (the Panda URDF, taught 80 clean joint states of a simulated Panda)
serves every test of this module, in file order. Each test sends one kind of bad joint state and
asserts that the node is alive and not wedged (good joint states after it are answered), that
the refusal is counted (its count in the node's ``/diagnostics`` values rose), and that the
model's predictions on fixed probe states (``~/predict``) did not change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import (
    DiagnosticsReader,
    call_service,
    first_call,
    new_context,
    new_executor,
    node_argv,
    spin_until,
    spin_while_rising,
    stop_after_nodes,
)

from lifelong_learning.nodes.supervisor import NodeProcess
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, joint_states, panda_urdf_path

pytestmark = pytest.mark.graph

NODE = "inverse_dynamics"
PERIOD = 0.01


@dataclass
class Target:
    """The node under attack, the peer that talks to it, and the simulated states it is fed."""

    executor: Any
    peer: Any
    proc: NodeProcess
    states: list[dict[str, Any]]
    diag: DiagnosticsReader  # the node's statuses and counters
    torques: list[Any] = field(default_factory=list)
    stamp: float = 100.0
    next_state: int = 0

    def message(self, stamp: float | None = None, change: Callable[[Any], None] | None = None) -> Any:
        """The next simulated state as a JointState, stamped ``stamp`` (default: one period later)."""
        from sensor_msgs.msg import JointState

        state = self.states[self.next_state % len(self.states)]
        self.next_state += 1
        if stamp is None:
            self.stamp += PERIOD
            stamp = self.stamp
        msg = JointState(
            name=list(state["name"]),
            position=list(state["position"]),
            velocity=list(state["velocity"]),
            effort=list(state["effort"]),
        )
        msg.header.stamp.sec = int(stamp)
        msg.header.stamp.nanosec = round((stamp - int(stamp)) * 1e9)
        if change is not None:
            change(msg)
        return msg

    def send(self, msg: Any, answered: bool = True) -> None:
        """Publish ``msg``; with ``answered``, wait for its predicted torques."""
        n = len(self.torques)
        self.peer.joint_states.publish(msg)
        if answered:
            assert spin_until(self.executor, lambda: len(self.torques) > n, 10), self.proc.log()

    def good(self, n: int) -> None:
        """``n`` clean joint states, each answered (a node that is wedged fails here)."""
        for _ in range(n):
            self.send(self.message())

    def wait_value(self, key: str, at_least: int) -> None:
        assert spin_until(self.executor, lambda: self.diag.count(NODE, key) >= at_least, 10), (
            key,
            self.diag.count(NODE, key),
            self.proc.log(),
        )

    def settle(self) -> None:
        """Wait until the node has learned what it answered (it learns after answering, on a thread
        of its own): diagnostics that count every answer received here and an empty learning queue."""
        answered = len(self.torques)
        assert spin_until(
            self.executor,
            lambda: (
                self.diag.count(NODE, "joint states answered") >= answered
                and self.diag.count(NODE, "learning queue") == 0
            ),
            10,
        ), (
            self.diag.count(NODE, "joint states answered"),
            answered,
            self.diag.count(NODE, "learning queue"),
            self.proc.log(),
        )

    def probes(self) -> np.ndarray:
        """``~/predict`` on five fixed states."""
        from lifelong_learning.srv import PredictTorques

        out = []
        for state in self.states[200:205]:
            req = PredictTorques.Request(
                name=list(state["name"]),
                position=list(state["position"]),
                velocity=list(state["velocity"]),
                acceleration=[0.5] * len(state["name"]),
            )
            res = call_service(self.executor, self.peer.predict, req, 20.0)
            assert res.success, res.message
            out.append(res.effort)
        return np.array(out)


@pytest.fixture(scope="module")
def target(built_interfaces: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    from lifelong_learning.srv import PredictTorques
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from std_srvs.srv import Trigger

    folder: Path = tmp_path_factory.mktemp("attacks_dynamics")
    argv = node_argv(
        NODE,
        *("-p", f"urdf_path:={panda_urdf_path()}", "-p", "joint_names:=[" + ",".join(JOINT_NAMES) + "]"),
        *("-p", "n_features:=50", "-p", "diagnostics_period_s:=0.2", "-p", "warn_period_s:=0.0"),
    )
    log = PandaSimulation().run(3.0, seed=3)
    states = list(joint_states(log, rate_hz=100.0))
    with new_context() as context, new_executor(context) as executor:
        peer = Node("attack_dynamics_peer", context=context)
        peer.joint_states = peer.create_publisher(JointState, "joint_states", 100)
        peer.predict = peer.create_client(PredictTorques, f"/{NODE}/predict")
        peer.reset = peer.create_client(Trigger, f"/{NODE}/reset")
        executor.add_node(peer)
        proc = NodeProcess(argv, log_path=folder / "inverse_dynamics.log")
        t = Target(executor, peer, proc, states, DiagnosticsReader(peer))
        peer.create_subscription(JointState, "predicted_torque", t.torques.append, 100)
        try:
            ready = spin_until(
                executor,
                lambda: (
                    peer.predict.service_is_ready()
                    and peer.joint_states.get_subscription_count() > 0
                    and peer.count_publishers("predicted_torque") > 0
                ),
                60,
            )
            assert ready, proc.log()
            first_call(executor, peer.predict, PredictTorques.Request())  # answers (a refusal) once matched
            # best effort across processes: the first states may go before both directions matched
            while not t.torques and t.next_state < 100:
                peer.joint_states.publish(t.message())
                spin_until(executor, lambda: bool(t.torques), 0.3)
            assert t.torques, proc.log()
            t.good(80)  # the q̈ filter full, the outlier test past its warm-up
            t.wait_value("joint_states messages", 81)
            yield t
        finally:
            stop_after_nodes(executor, proc)


def unchanged_after(target: Target, attack: Callable[[], None]) -> None:
    """Run ``attack`` and assert the probe predictions did not change, then that the node is alive
    and answers good joint states again."""
    target.settle()
    before = target.probes()
    attack()
    target.settle()  # whatever the attack queued for learning has been learned (or refused) by now
    np.testing.assert_array_equal(target.probes(), before)
    assert target.proc.alive()
    target.good(3)


def test_in_limit_effort_spike_is_answered_but_not_learned(target):
    key = "not learned: residual outlier"
    n = target.diag.count(NODE, key)

    def spike(msg):
        msg.effort[0] += 50.0  # within the 87 N·m limit, far beyond the errors of the model

    unchanged_after(
        target, lambda: (target.send(target.message(change=spike)), target.wait_value(key, n + 1))
    )


def test_effort_glitch_is_answered_but_not_learned(target):
    key = "rejected: effort beyond limit"
    n = target.diag.count(NODE, key)

    def glitch(msg):
        msg.effort[1] = 1e6

    unchanged_after(
        target, lambda: (target.send(target.message(change=glitch)), target.wait_value(key, n + 1))
    )


def test_velocity_glitch_is_refused_and_the_node_goes_on(target):
    key = "rejected: velocity beyond limit"
    n = target.diag.count(NODE, key)

    def glitch(msg):
        msg.velocity[1] = 1e300

    unchanged_after(
        target,
        lambda: (target.send(target.message(change=glitch), answered=False), target.wait_value(key, n + 1)),
    )


def test_malformed_joint_states_are_refused(target):
    def nan(msg):
        msg.position[2] = float("nan")

    def short(msg):
        msg.effort = msg.effort[:3]

    def duplicate(msg):
        msg.name[1] = msg.name[0]

    def missing(msg):
        msg.name, msg.position, msg.velocity, msg.effort = (
            a[:6] for a in (msg.name, msg.position, msg.velocity, msg.effort)
        )

    cases = {
        "rejected: non-finite values": nan,
        "rejected: array lengths": short,
        "rejected: duplicate joint names": duplicate,
        "rejected: missing joints": missing,
    }
    before = {key: target.diag.count(NODE, key) for key in cases}

    def attack():
        for change in cases.values():
            target.send(target.message(change=change), answered=False)
        for key, n in before.items():
            target.wait_value(key, n + 1)

    unchanged_after(target, attack)


def test_one_far_future_stamp_does_not_wedge_the_stream(target):
    keys = ("acceleration filter restarts: stamp gap", "acceleration filter restarts: stamp jumped back")
    before = [target.diag.count(NODE, k) for k in keys]

    def attack():
        target.send(target.message(stamp=2.0**31 - 2))  # answered: a new stretch of the stream
        target.send(target.message())  # the normal stamps again: answered, not refused
        for k, n in zip(keys, before, strict=True):
            target.wait_value(k, n + 1)

    unchanged_after(target, attack)


def test_a_simulator_reset_restarts_the_filter(target):
    key = "acceleration filter restarts: stamp jumped back"
    n = target.diag.count(NODE, key)
    target.stamp -= 5.0

    def attack():
        target.send(target.message())
        target.wait_value(key, n + 1)

    start = len(target.diag.statuses(NODE))
    unchanged_after(target, attack)
    # the WARN is published once, in the first status after the restart: every status since counts
    since = target.diag.statuses(NODE)[start:]
    assert any("acceleration filter restarted" in s.message for s in since), [s.message for s in since]


def test_a_small_step_back_is_refused(target):
    key = "rejected: stamp not increasing"
    n = target.diag.count(NODE, key)
    target.good(10)

    def attack():
        target.send(target.message(stamp=target.stamp - 0.05), answered=False)
        target.wait_value(key, n + 1)

    unchanged_after(target, attack)


def test_gaps_count_the_missed_joint_states(target):
    key = "joint states missed (stamp gaps)"
    target.good(12)
    n = target.diag.count(NODE, key)
    target.stamp += 4 * PERIOD  # four states never arrive
    start = len(target.diag.statuses(NODE))
    target.good(1)
    target.wait_value(key, n + 4)
    target.good(3)
    assert (
        target.diag.count(NODE, key) == n + 4
    )  # exactly the four: refused messages earlier were seen, not missed
    # the WARN goes out once, in the first status after the count rose (later ones may be OK again)
    assert spin_until(
        target.executor,
        lambda: any("missed" in s.message and s.level == b"\x01" for s in target.diag.statuses(NODE)[start:]),
        5,
    ), [s.message for s in target.diag.statuses(NODE)[start:]]


def test_a_flood_is_counted_not_lost_silently(target):
    """Joint states far faster than the node learns: what it does not process is counted from the
    publisher's sequence numbers (overwritten in its queue or lost by DDS), WARN while it rises.

    Counted at the node (its ``joint_states messages`` and ``joint_states lost``): the predicted
    torques of a flood can themselves be lost on their way back to this test."""
    key, seen = "joint_states lost", "joint_states messages"
    before = target.diag.count(NODE, seen)
    target.good(3)  # the baseline: diagnostics published after those three
    assert spin_until(target.executor, lambda: target.diag.count(NODE, seen) >= before + 3, 20)
    lost, processed = target.diag.count(NODE, key), target.diag.count(NODE, seen)
    sent = 2000
    for _ in range(sent):
        target.peer.joint_states.publish(target.message())
    target.good(3)  # later sequence numbers: losses at the flood's tail show too

    def accounted() -> int:
        return (target.diag.count(NODE, seen) - processed) + (target.diag.count(NODE, key) - lost)

    # The node works through the flood at the machine's pace: waited for while the count rises. A
    # loss shows only as a gap before a later message (best effort: the last ones may be lost too),
    # so whenever the count stalls one more message follows.
    trailing = 0
    while not spin_while_rising(target.executor, accounted, sent + 3 + trailing, stall_s=5.0):
        assert trailing < 20, (accounted(), sent + 3 + trailing, target.proc.log())
        target.send(target.message(), answered=False)
        trailing += 1
    assert target.diag.count(NODE, key) > lost
    assert any("never processed" in s.message for s in target.diag.statuses(NODE)[-40:])
    assert target.proc.alive()


def test_reset_forgets_the_stream(target):
    from std_srvs.srv import Trigger

    key = "acceleration filter restarts: stamp jumped back"
    target.good(3)
    n, m = target.diag.count(NODE, key), target.diag.count(NODE, "joint_states messages")
    assert call_service(target.executor, target.peer.reset, Trigger.Request(), 20.0).success
    target.stamp -= 20.0  # earlier than anything before the reset: a new stream, no restart
    target.good(12)
    target.wait_value("joint_states messages", m + 12)  # diagnostics from after the reset
    assert target.diag.count(NODE, key) == n


def test_an_absurd_predict_request_is_refused(target):
    """Issue 29 item 10: ``~/predict`` with a position of 1e300 answered success. The service now
    checks what the joint-state stream checks (finite, within the joint limits widened by
    limit_margin) and refuses absurd accelerations: ``success: false``, the reason, counted."""
    from lifelong_learning.srv import PredictTorques

    state = target.states[200]

    def request(**change: Any) -> Any:
        fields = {
            "name": list(state["name"]),
            "position": list(state["position"]),
            "velocity": list(state["velocity"]),
            "acceleration": [0.5] * len(state["name"]),
        }
        for key, (joint, value) in change.items():
            fields[key][joint] = value
        return PredictTorques.Request(**fields)

    cases = [
        ("position beyond limit", request(position=(0, 1e300))),
        ("position beyond limit", request(position=(3, -40.0))),
        ("velocity beyond limit", request(velocity=(1, 1e300))),
        ("acceleration beyond limit", request(acceleration=(2, 1e300))),
    ]

    def attack() -> None:
        for reason, req in cases:
            before = target.diag.rejected(NODE, reason)
            res = call_service(target.executor, target.peer.predict, req, 20.0)
            assert not res.success and reason in res.message, res.message
            assert list(res.effort) == []
            counted = lambda r=reason, n=before: target.diag.rejected(NODE, r) > n  # noqa: E731
            assert spin_until(target.executor, counted, 10), (reason, target.proc.log())

    unchanged_after(target, attack)
    assert call_service(target.executor, target.peer.predict, request(), 20.0).success
