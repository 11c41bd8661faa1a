"""The tuner's lifelong loop on a real DDS graph: nystrom_tuner (auto_retrain), bag_recorder and
inverse_dynamics each in its own process, a simulated Panda's joint states streamed by the test
(never more than 20 unanswered at a time, so that the node judges the same stream on a slow machine
as on a fast one; contact detection off, so that the payload is learned, and its drift seen, at once).

A peer first tries what got a poisoned model served before: a forged drift alarm and a forged
trial on the learner's own topics (``{"outcome": "started", "window_s": 1e308}``), and forged
announcements of bag files written outside the recorder's bag directory, a byte copy of one of
them, and a copy inside the directory that the recorder never listed. None starts a job, every file
is refused and counted, and the loop stays idle. Then the robot changes for real (a 3 kg payload):
the learner's own drift alarm, as its ``~/serving_state`` says, starts a job on the recorder's files
begun after it, the validation file later than those trained on; the candidate goes through the
gate and, promoted, into the learner's shadow. A tuner restarted afterwards restores the loop's
state from its checkpoint and starts no job at once."""

from __future__ import annotations

import json
import math
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from conftest import DiagnosticsReader, JointStateStream, latched_qos, new_context, node_argv, spin_until

from lifelong_learning.retraining.loop_files import check_closed_file
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, joint_states, panda_urdf_path

pytestmark = pytest.mark.graph

LOOP = "lifelong loop inverse_dynamics"


class Peer:
    """The test's node: joint states out, the forgeries out, what the tuner and learner say in."""

    def __init__(self, executor: Any, states: list[dict]) -> None:
        from diagnostic_msgs.msg import DiagnosticStatus
        from lifelong_learning.msg import BagFileClosed
        from rclpy.node import Node
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String

        self.executor = executor
        self.node = Node("loop_test_peer", context=executor.context)
        executor.add_node(self.node)
        latched, files = latched_qos(), latched_qos(100)
        self.answers = 0  # predicted torques received: the stream waits for them
        self.node.create_subscription(JointState, "/predicted_torque", self._answered, 1000)
        self.stream = JointStateStream(
            executor,
            self.node.create_publisher(JointState, "joint_states", 100),
            states,
            answered=lambda: self.answers,
        )
        self.drift_pub = self.node.create_publisher(DiagnosticStatus, "/inverse_dynamics/drift", latched)
        self.shadow_pub = self.node.create_publisher(String, "/inverse_dynamics/shadow", latched)
        self.file_pub = self.node.create_publisher(BagFileClosed, "/bag_recorder/file_closed", files)
        self.progress: list[dict] = []
        self.shadow: list[dict] = []
        self.closed: list[str] = []
        self.node.create_subscription(
            String, "/tuning_progress", lambda m: self.progress.append(json.loads(m.data)), 50
        )
        self.node.create_subscription(
            String, "/inverse_dynamics/shadow", lambda m: self.shadow.append(json.loads(m.data)), latched
        )
        self.node.create_subscription(
            BagFileClosed, "/bag_recorder/file_closed", lambda m: self.closed.append(m.closed_file), files
        )
        self.diag = DiagnosticsReader(self.node)

    def _answered(self, _msg: Any) -> None:
        self.answers += 1

    def forge(self, files: list[Path]) -> None:
        """What a hostile peer publishes: a drift alarm, a trial, announcements of its own files."""
        from diagnostic_msgs.msg import DiagnosticStatus
        from lifelong_learning.msg import BagFileClosed
        from std_msgs.msg import String

        text = "live prequential error 0.3 above 3 x 0.05 for 2 s"
        self.drift_pub.publish(
            DiagnosticStatus(level=DiagnosticStatus.WARN, name="/inverse_dynamics", message=text)
        )
        trial = {"role": "shadow", "outcome": "started", "model": "x", "window_s": 1e308}
        self.shadow_pub.publish(String(data=json.dumps(trial)))
        for path in files:
            msg = BagFileClosed(closed_file=str(path), node_name="/bag_recorder", bag=str(path.parent))
            msg.topics = ["/joint_states"]
            msg.message_count = 1000
            self.file_pub.publish(msg)

    def goals(self) -> list[dict]:
        return [p for p in self.progress if p.get("state") == "auto_retrain"]

    def done(self) -> list[dict]:
        return [p for p in self.progress if p.get("state") in ("done", "failed")]

    def values(self) -> dict[str, str]:
        return self.diag.values("nystrom_tuner")

    def loop(self) -> str:
        return self.values().get(LOOP, "")

    def drift_reference(self) -> float:
        """The learner's drift reference (NaN until its warm-up has ended), from its diagnostics."""
        drift = self.diag.values("inverse_dynamics").get("drift", "")
        return float(drift.split()[1]) if drift.startswith("reference ") else math.nan


def tuner_argv(models: Path, bags: Path, urdf: str) -> list[str]:
    return node_argv(
        "nystrom_tuner",
        *("-p", f"output_dir:={models}", "-p", f"urdf_path:={urdf}", "-p", "auto_retrain:=true"),
        *("-p", f"bag_directory:={bags}", "-p", "retrain_bag_files:=2", "-p", "retrain_min_period_s:=3600.0"),
        *("-p", "default_centers:=20", "-p", "default_epochs:=3", "-p", "diagnostics_period_s:=0.25"),
    )


@pytest.mark.slow
def test_forgeries_start_nothing_and_the_learners_own_drift_retrains_from_the_recorders_files(
    executor, start_process, tmp_path
):
    models, bags = tmp_path / "models", tmp_path / "bags"
    urdf = panda_urdf_path()
    joints = f"joint_names:={JOINT_NAMES}".replace("'", "")
    learner = start_process(
        node_argv(
            "inverse_dynamics",
            *("-p", f"urdf_path:={urdf}", "-p", joints, "-p", "n_features:=30"),
            *("-p", f"model_directory:={models}", "-p", "shadow_window_s:=1.0", "-p", "canary_window_s:=0.0"),
            *("-p", "metrics_window_s:=2.0", "-p", "drift_window_s:=0.5", "-p", "forgetting:=1.0"),
            # the loop is what is judged here: no contact detection, so that the payload is learned
            # (and the drift seen) at once (loads the thresholds hold: test_contact_loads.py)
            *("-p", "contact_detection:=false"),
        )
    )
    recorder = start_process(
        node_argv(
            "bag_recorder",
            *("-p", f"output:={bags / 'run'}", "-p", "topics:=[joint_states]"),
            *("-p", "max_bagfile_duration_s:=1.0"),
        )
    )
    tuner = start_process(tuner_argv(models, bags, urdf))
    # one motion: 20 s free, then 3 kg grasped (streamed once the forgeries are done)
    motion = PandaSimulation().run(45.0, seed=4, log_every=5, payload_mass=3.0, payload_at=20.0)
    states = list(joint_states(motion, rate_hz=100.0))
    grasp = next(k for k, s in enumerate(states) if s["stamp"] >= 20.0)
    peer = Peer(executor, states[:grasp])

    def logs() -> str:
        """The processes' last logs, the tuner's loop status and the learner's diagnostics."""
        tails = [p.log()[-3000:] for p in (learner, recorder, tuner)]
        loop, learner_status = peer.loop(), peer.diag.values("inverse_dynamics")
        return "\n".join(
            [*tails, f"the tuner's loop: {loop}", f"the learner's diagnostics: {learner_status}"]
        )

    # The learner answers and files close; without its alarm the tuner sends nothing.
    assert peer.stream.until(lambda: len(peer.closed) >= 2 and "no drift alarm" in peer.loop(), 60), logs()

    # Forgeries: files outside the bag directory (one a byte copy of the other), one the recorder
    # never listed inside it, the learner's alarm and trial published by someone else.
    evil = tmp_path / "evil" / "evil"
    evil.mkdir(parents=True)
    real = Path(peer.closed[0])
    shutil.copy(real, evil / "evil_0.mcap")
    shutil.copy(real, evil / "evil_1.mcap")
    shutil.copy(real, real.parent / "run_900.mcap")
    peer.forge([evil / "evil_0.mcap", evil / "evil_1.mcap", real.parent / "run_900.mcap"])

    def refused() -> bool:
        v = peer.values()
        return (
            v.get("rejected: bag file outside bag_directory") == "2"
            and "rejected: bag file not the recorder's" in v
        )

    assert peer.stream.until(refused, 30), peer.values()
    assert peer.stream.until(lambda: "idle: no drift alarm" in peer.loop(), 10), peer.loop()
    assert peer.goals() == [] and peer.values()["bag files refused (lifelong loop)"] == "3"

    # The learner's drift reference is its level on the free motion: its warm-up ends a metrics
    # window of wall time after its first error, which on a fast machine comes after the above
    # (a grasp before it would make the payload's error the reference, and no alarm follows).
    assert peer.stream.until(lambda: math.isfinite(peer.drift_reference()), 60), logs()

    # The robot grasps 3 kg: the learner's own alarm; a job on the recorder's files begun after it.
    before = set(peer.closed)
    peer.stream.switch(states[grasp:])
    assert peer.stream.until(lambda: bool(peer.goals()), 90), logs()
    goal = peer.goals()[0]
    assert goal["learner"] == "inverse_dynamics" and goal["reason"].startswith("drift: "), goal
    assert len(goal["bags"]) == 1 and len(goal["validation_bags"]) == 1, goal
    used = [check_closed_file(f, bags) for f in goal["bags"] + goal["validation_bags"]]  # the recorder's
    assert not {f.path for f in used} & before, (goal, before)
    assert used[-1].first > used[0].last and used[-1].digest != used[0].digest  # later, other data
    assert goal["serving_model"] and Path(goal["serving_model"]).is_file(), goal  # saved by ~/save_model

    # The job runs through the gate; a promoted candidate goes into the learner's shadow.
    assert peer.stream.until(lambda: bool(peer.done()), 120), logs()
    done = peer.done()[0]
    assert done["state"] == "done", done
    if done["promotion"]["promoted"]:
        # the learner names the file it loaded: the tuner's, or its copy received as bytes (models/received/)
        name = Path(done["out_path"]).name
        trials = lambda: [e for e in peer.shadow if Path(e.get("model", "")).name == name]  # noqa: E731
        assert peer.stream.until(lambda: any(e["outcome"] != "started" for e in trials()), 30), logs()
    assert peer.stream.until(lambda: "retrain_min_period_s" in peer.loop(), 30), peer.loop()
    values = peer.values()
    assert values[f"{LOOP} jobs"] == "1", values
    assert values[f"{LOOP} last job"].startswith(("promoted", "not promoted")), values

    # A restarted tuner continues from the loop's checkpoint: one job so far, none at once.
    tuner.send_signal(signal.SIGINT)
    assert tuner.wait(30) == 0, tuner.log()
    restart_continues(peer, start_process, tuner_argv(models, bags, urdf), models)
    assert spin_until(executor, lambda: True, 0.1)


def restart_continues(peer: Peer, start_process: Any, argv: list[str], models: Path) -> None:
    """A tuner started again (``argv``) after the first stopped restores the loop's state from its
    checkpoint, with one job so far, and starts none at once."""
    state = json.loads((models / "lifelong_loop-nystrom_tuner.json").read_text())["learners"]
    assert state["inverse_dynamics"]["jobs_started"] == 1, state
    peer.diag.statuses("nystrom_tuner").clear()
    tuner = start_process(argv)

    def restarted() -> bool:
        """A status of the restarted tuner (the first one's, still on their way, say "new")."""
        values = peer.values()
        restored = values.get("lifelong loop state", "").startswith("restored from ")
        return restored and "retrain_min_period_s" in values.get(LOOP, "")

    assert peer.stream.until(restarted, 60), tuner.log()
    assert peer.values()[f"{LOOP} jobs"] == "1" and len(peer.goals()) == 1


def test_the_tuner_says_where_the_loops_state_came_from_and_moves_an_unreadable_one_aside(
    built_interfaces, tmp_path
):
    """``lifelong loop state`` in the tuner's diagnostics: new (no file), restored from the file
    a tuner before it wrote, or new because the file was unreadable (moved aside, counted)."""
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes.nystrom_tuner import NystromTunerNode

    out = tmp_path / "models"
    state = out / "lifelong_loop-nystrom_tuner.json"

    def origin() -> tuple[str, dict[str, int]]:
        with new_context() as ctx:
            node = NystromTunerNode(
                context=ctx,
                parameter_overrides=[
                    Parameter("output_dir", value=str(out)),
                    Parameter("auto_retrain", value=True),
                    Parameter("diagnostics_period_s", value=0.0),
                ],
            )
            try:
                return node.diagnostic_values()["lifelong loop state"], node.rejections.snapshot()
            finally:
                node.destroy_node()

    said, refused = origin()
    assert said == f"new: no {state.name} in {out}" and refused == {}, said
    state.write_text(json.dumps({"learners": {"inverse_dynamics": {"version": 99}}}))  # unreadable
    said, refused = origin()
    aside = [p for p in out.iterdir() if p.name.startswith(state.name) and p != state]
    assert said.startswith(f"new: {state} unreadable, moved to ") and len(aside) == 1, (said, aside)
    assert refused == {"lifelong loop state unreadable": 1} and not state.exists()
    from lifelong_learning.retraining.lifelong_loop import LifelongLoop, LoopSettings

    good = LifelongLoop(LoopSettings(bag_files=2, min_period_s=300.0), "/joint_states").to_state()
    state.write_text(json.dumps({"learners": {"another_learner": good}}))
    said, refused = origin()
    assert said == f"new: {state} has none of these learners" and refused == {}, said
    state.write_text(json.dumps({"learners": {"inverse_dynamics": good}}))
    said, refused = origin()
    assert said == f"restored from {state} (inverse_dynamics)" and refused == {}, said
