"""Shadow evaluation and canary of inverse_dynamics in its own process on a real DDS graph, fed
simulated Panda motion (MuJoCo) as joint states: a worse candidate
(learned from sign-flipped torques) sent as tuned_model_data is never served and is dropped after
its shadow window; a better one (learned from more of the robot's motion) is swapped in after its
window; after a forced swap to a worse model (shadow off at run time), the node rolls back by
itself. Each model is judged on motion it never saw (another trajectory seed)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import (
    IMMEDIATE_SWAP,
    DiagnosticsReader,
    JointStateStream,
    call_service,
    first_call,
    latched_qos,
    model_file_message,
    node_argv,
    set_double,
    spin_until,
)

from lifelong_learning.dynamics import SemiparametricInverseDynamics
from lifelong_learning.sim.panda import (
    JOINT_NAMES,
    PandaSimulation,
    joint_states,
    panda_urdf_path,
    panda_urdf_text,
)

pytestmark = pytest.mark.graph

NODE = "inverse_dynamics"


def trained(log: dict[str, np.ndarray], sign: float) -> SemiparametricInverseDynamics:
    model = SemiparametricInverseDynamics(panda_urdf_text(), JOINT_NAMES, n_features=30)
    model.update(log["q"], log["qd"], log["qdd"], sign * log["tau"])
    return model


class Graph:
    """The test's side: joint states streamed in, models sent as bytes, the node's ~/shadow events,
    diagnostics and ~/predict read back."""

    def __init__(self, executor: Any, states: list[dict]) -> None:
        from lifelong_learning.msg import ModelFile
        from lifelong_learning.srv import PredictTorques
        from rclpy.node import Node
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String

        self.executor = executor
        self.node = Node("shadow_test_peer", context=executor.context)
        executor.add_node(self.node)
        latched = latched_qos()
        self.models = self.node.create_publisher(ModelFile, "tuned_model_data", latched)
        self.joint_stream = JointStateStream(
            executor, self.node.create_publisher(JointState, "joint_states", 100), states
        )
        self.events: list[dict] = []
        self.node.create_subscription(
            String, f"/{NODE}/shadow", lambda m: self.events.append(json.loads(m.data)), latched
        )
        self.diag = DiagnosticsReader(self.node)
        self.predict = self.node.create_client(PredictTorques, f"/{NODE}/predict")

    def stream(self, until: Any, timeout: float) -> bool:
        """Publish joint states (100 Hz motion, cycled) until ``until()``."""
        return self.joint_stream.until(until, timeout)

    def send(self, model: SemiparametricInverseDynamics, folder: Path, name: str) -> None:
        self.models.publish(model_file_message(model, folder, name))

    def event(self, outcome: str) -> dict | None:
        return next((e for e in reversed(self.events) if e["outcome"] == outcome), None)

    def values(self) -> dict[str, str]:
        return self.diag.values(NODE)

    def answer(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        from lifelong_learning.srv import PredictTorques

        request = PredictTorques.Request(
            name=JOINT_NAMES, position=q.tolist(), velocity=qd.tolist(), acceleration=qdd.tolist()
        )
        res = call_service(self.executor, self.predict, request)
        assert res.success, res.message
        return np.asarray(res.effort)


def set_parameter(graph: Graph, name: str, value: float) -> None:
    set_double(graph.executor, graph.node, f"/{NODE}", name, value)


def test_shadow_drops_a_worse_candidate_promotes_a_better_one_and_the_canary_rolls_back(
    executor, start_process, tmp_path
):
    from lifelong_learning.srv import PredictTorques

    sim = PandaSimulation()
    live = sim.run(30.0, seed=11, log_every=5)  # what the node sees (100 Hz)
    train = sim.run(20.0, seed=3, log_every=5)  # what the candidates learned (never shown to the node)
    worse, better = trained(train, -1.0), trained(train, 1.0)
    tuner = tmp_path / "tuner"
    tuner.mkdir()
    proc = start_process(
        node_argv(
            NODE,
            *("-p", f"urdf_path:={panda_urdf_path()}", "-p", f"joint_names:={JOINT_NAMES}".replace("'", "")),
            *("-p", "n_features:=30", "-p", f"model_directory:={tmp_path / 'models'}"),
            *("-p", "diagnostics_period_s:=0.25", "-p", "metrics_window_s:=1.0"),
            *("-p", "shadow_margin:=0.05", *IMMEDIATE_SWAP),  # shadow and canary off at start
        )
    )
    graph = Graph(executor, list(joint_states(live, rate_hz=100.0)))
    probe = [live[k][1500] for k in ("q", "qd", "qdd")]  # a state of the motion, its true torque known
    truth = live["tau"][1500]
    request = PredictTorques.Request(name=JOINT_NAMES, position=probe[0].tolist())
    request.velocity, request.acceleration = probe[1].tolist(), probe[2].tolist()
    first = first_call(executor, graph.predict, request)
    assert first.success, first.message
    # Shadow off: a bad model (learned from sign-flipped torques) is swapped in at once.
    graph.send(trained(sim.run(10.0, seed=7, log_every=5), -1.0), tuner, "bad.model")
    assert graph.stream(lambda: graph.values().get("model version") == "1", 30), proc.log()
    set_parameter(graph, "shadow_window_s", 1.0)
    set_parameter(graph, "canary_window_s", 1.0)

    # A better candidate (the URDF prior and 20 s of other motion): in shadow for 1 s beside the
    # serving bad one, then swapped in; the replaced model then runs in canary, is worse: kept.
    graph.send(better, tuner, "better.model")
    assert graph.stream(lambda: graph.event("promoted") is not None, 60), proc.log()
    promoted = graph.event("promoted")
    assert promoted["candidate_error"] < 0.95 * promoted["serving_error"], promoted
    assert promoted["model"].endswith("better.model") and promoted["samples"] > 50
    assert graph.stream(lambda: graph.values().get("model version") == "2", 10), graph.values()
    assert graph.stream(lambda: graph.event("kept") is not None, 30), proc.log()

    # A worse candidate: it runs in shadow (learning too), never answers, is dropped after 1 s.
    graph.send(worse, tuner, "flipped.model")
    assert graph.stream(lambda: len([e for e in graph.events if e["outcome"] == "started"]) == 2, 30)
    flipped = worse.predict(*probe)
    answered = graph.answer(*probe)
    assert np.linalg.norm(answered - truth) < 0.2 * np.linalg.norm(flipped - truth)
    assert graph.stream(lambda: graph.event("dropped") is not None, 30), proc.log()
    dropped = graph.event("dropped")
    assert dropped["model"].endswith("flipped.model") and not dropped["promoted"]
    assert dropped["candidate_error"] > dropped["serving_error"] > 0 and dropped["samples"] > 50
    verdicts = "dropped 1, kept 1, promoted 1"
    assert graph.stream(lambda: graph.values().get("shadow verdicts") == verdicts, 10), graph.values()
    assert graph.values()["model version"] == "2"  # never served
    assert np.linalg.norm(graph.answer(*probe) - truth) < 0.2 * np.linalg.norm(flipped - truth)

    # Shadow off at run time: a worse model is swapped in at once; its canary rolls it back.
    set_parameter(graph, "shadow_window_s", 0.0)
    graph.send(trained(sim.run(10.0, seed=5, log_every=5), -1.0), tuner, "forced.model")
    assert graph.stream(lambda: graph.event("rolled back") is not None, 30), proc.log()
    rolled = graph.event("rolled back")
    assert rolled["candidate_error"] < 0.95 * rolled["serving_error"] and rolled["rolled_back"], rolled
    assert graph.stream(lambda: graph.values().get("automatic rollbacks") == "1", 10), graph.values()
    values = graph.values()
    assert values["model version"] == "4", values  # bad (1), promoted (2), forced (3), rolled back (4)
    assert np.linalg.norm(graph.answer(*probe) - truth) < 0.2 * np.linalg.norm(flipped - truth)
    assert proc.alive()


def test_drift_alarm_warns_and_publishes_on_drift(rclpy_context, executor):
    """Item 4, the node's side: a live error above drift_factor × its level after warm-up for
    drift_window_s → ~/drift (DiagnosticStatus WARN with the figures) and a WARN in diagnostics.
    The node runs in this process; its metrics window is filled with errors of a known level."""
    from diagnostic_msgs.msg import DiagnosticStatus
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from lifelong_learning.core.prequential import PrequentialRegression
    from lifelong_learning.nodes.inverse_dynamics import InverseDynamicsNode

    params = {"urdf_path": panda_urdf_path(), "joint_names": JOINT_NAMES, "n_features": 30}
    params.update(diagnostics_period_s=0.0, metrics_period_s=0.0, metrics_window_s=1.0)
    params.update(drift_factor=2.0, drift_window_s=0.1)
    node = InverseDynamicsNode(
        context=rclpy_context, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]
    )
    peer = Node("drift_test_peer", context=rclpy_context)
    executor.add_node(peer)
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    latched = QoSProfile(
        depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    alarms: list[DiagnosticStatus] = []
    peer.create_subscription(DiagnosticStatus, f"/{NODE}/drift", alarms.append, latched)
    rng = np.random.default_rng(0)

    def live_error(level: float) -> None:
        """The node's metrics window: 200 samples whose prequential nMSE is about ``level``."""
        tau = rng.normal(size=(200, 7))
        acc = PrequentialRegression(7, 1.0, ("model", "baseline"))
        acc.add(
            node.metrics.now(), tau, model=tau + np.sqrt(level) * rng.normal(size=tau.shape), baseline=tau
        )
        with node.metrics.lock:
            node.metrics.accumulator = acc

    try:
        monitor = node.shadow
        monitor.drift.rebase(time.monotonic() - 10.0)
        live_error(0.01)
        monitor._drift_read = -np.inf
        monitor._check_drift()
        assert np.isnan(monitor.drift.reference)  # errors defined for less than the warm-up (1 s)
        time.sleep(1.05)
        live_error(0.01)
        monitor._drift_read = -np.inf
        monitor._check_drift()
        assert 0.005 < monitor.drift.reference < 0.02
        assert node.shadow.diagnostic_problems() == []
        live_error(0.2)  # 20 × the level: a payload grasped, wear
        for _ in range(3):  # above the threshold for drift_window_s (0.1 s), read every 0.5 s
            monitor._drift_read = -np.inf
            monitor._check_drift()
            time.sleep(0.06)
        assert spin_until(executor, lambda: bool(alarms), 10)
        assert alarms[0].level == DiagnosticStatus.WARN and "above 2 ×" in alarms[0].message
        figures = {kv.key: float(kv.value) for kv in alarms[0].values}
        assert figures["error"] > 10 * figures["reference"] and figures["factor"] == 2.0
        problems = node.diagnostic_problems()
        assert any(level == DiagnosticStatus.WARN and text.startswith("drift:") for level, text in problems)
        assert node.diagnostic_values()["drift"].startswith("ALARM")
        live_error(0.01)  # back to its level: cleared
        monitor._drift_read = -np.inf
        monitor._check_drift()
        assert not monitor.drift.raised and len(alarms) == 1
    finally:
        node.destroy_node()
