"""The main job: the whole lifelong loop over DDS against a simulated robot and camera.

Processes (each a real ROS 2 node over Fast DDS, as on a robot):

- ``feature_extractor`` and ``object_recognition``: a simulated camera (pybullet renderings,
  :mod:`lifelong_learning.sim.objects`) shows objects one after the other while a scripted
  teacher names them on ``teacher_label``; one object is shown only briefly (the rare
  class). After each object, unlabelled views of every object taught so far are shown and
  the ``prediction`` answers scored against the truth the demo knows.
- ``inverse_dynamics``: the simulated Panda (MuJoCo, :mod:`lifelong_learning.sim.panda`)
  publishes ``joint_states`` with measured efforts, stamped with the simulation time of each
  sample (as a robot driver stamps the measurement time); a 1 kg payload is grasped part-way,
  and a person pushes the arm a few times before that (:mod:`~lifelong_learning.demo.contact`).
  The node learns online and answers each message with predicted torques, scored per joint
  against the measured effort next to the URDF's own RNEA, and with its external torque
  estimate and contact flags, scored against the pushes.
- ``bag_recorder`` records the learners' topics to an MCAP bag in the run folder.
- ``nystrom_tuner``: after the online phase the demo closes the bag's current file
  (``~/split_bagfile``), asks the tuner to retrain both learners from the bag, and the nodes
  hot-reload the models it announces on ``tuned_model``.

Phases: online learning → bag split → evaluation trajectory (payload attached, learning
frozen) answered by the online model → retraining → the same evaluation trajectory answered
by the retrained model, and every object shown again → the lifelong loop closing by itself
(a heavier payload, drift, a job the tuner sends itself, shadow, swap:
:mod:`~lifelong_learning.demo.lifelong_loop`) → report.

This module starts and stops the node processes and runs the phases in order;
:mod:`~lifelong_learning.demo.config` says what the demo does (``DemoConfig``),
:mod:`~lifelong_learning.demo.driver` is the demo's own node (sensors out, answers in),
:mod:`~lifelong_learning.demo.scenarios` what it plays in each phase and how it scores the
answers, :mod:`~lifelong_learning.demo.report` writes the report.
"""

from __future__ import annotations

import functools
import os
import platform
import random
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rosbags.highlevel import AnyReader

from lifelong_learning.demo import scenarios
from lifelong_learning.demo.config import DemoConfig
from lifelong_learning.demo.driver import LABELED_FEATURES, DemoDriver, running_driver
from lifelong_learning.demo.lifelong_loop import LoopWatcher, autonomous_cycle, cycle_log
from lifelong_learning.demo.live_metrics import read_live_metrics
from lifelong_learning.demo.report import write_report
from lifelong_learning.demo.scenarios import Stage
from lifelong_learning.io.bags import typestore
from lifelong_learning.nodes.catalog import default_config_file
from lifelong_learning.nodes.supervisor import NodeProcess, middleware_environment, node_command, stop_all
from lifelong_learning.sim.objects import ObjectRenderer
from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_path

NODES = ("feature_extractor", "object_recognition", "inverse_dynamics", "nystrom_tuner", "bag_recorder")

#: seconds each node may take to stop (final checkpoint, bag closed) before it is killed
STOP_TIMEOUT_S = 30.0
#: seconds the demo waits for every node to report, in all (:meth:`DemoRun.wait_for_nodes`)
NODES_UP_TIMEOUT_S = 150.0
#: seconds after which a node that has not reported while others have is started again, once (a
#: node is up in 4-9 s on 2 cores, loaded or not)
RESTART_AFTER_S = 60.0
#: lines of a node's log quoted when it did not come up
LOG_TAIL_LINES = 40


def private_graph(say: Any) -> dict[str, str]:
    """The demo's ROS graph, apart from any robot's: discovery on this machine only (a simulated
    Panda's joint states must never reach a real robot's controller), on a domain of its own unless
    ``ROS_DOMAIN_ID`` is set (to watch it with ``ros2`` tools, set it before the demo)."""
    env = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    domain = os.environ.get("ROS_DOMAIN_ID") or str(random.SystemRandom().randint(1, 101))
    env["ROS_DOMAIN_ID"] = domain
    say(f"ROS graph: domain {domain}, discovery on this machine only")
    return env


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a node's log, indented ('(empty)' when it wrote nothing)."""
    text = path.read_text(errors="replace").rstrip() if path.exists() else ""
    return "\n".join("    " + line for line in text.splitlines()[-lines:]) or "    (empty)"


def bag_summary(path: Path) -> dict[str, Any]:
    """Every topic of the recorded bag read back with rosbags' AnyReader."""
    if not (path / "metadata.yaml").exists():
        return {"path": str(path), "error": "no metadata.yaml: the bag was not closed"}
    topics: dict[str, dict[str, Any]] = {}
    with AnyReader([path], default_typestore=typestore()) as reader:
        for conn in reader.connections:
            topics.setdefault(conn.topic, {"type": conn.msgtype, "messages": 0, "decoded": 0})
        for conn, _, raw in reader.messages():
            entry = topics[conn.topic]
            entry["messages"] += 1
            reader.deserialize(raw, conn.msgtype)
            entry["decoded"] += 1
    files = sorted(p.name for p in path.iterdir() if p.suffix in (".mcap", ".db3"))
    size = sum((path / f).stat().st_size for f in files)
    return {"path": str(path), "files": files, "bytes": size, "topics": topics}


class DemoRun:
    """One demo run writing into ``out`` (a run folder)."""

    def __init__(self, cfg: DemoConfig, out: Path, progress: bool = True):
        self.cfg = cfg
        self.out = out
        self.progress = progress
        self.procs: list[NodeProcess] = []
        self.notes: list[str] = []
        self.bag = out / "bag"  # the bag_recorder's output

    # ------------------------------------------------------------------ processes
    def start_node(self, name: str, *params: str) -> None:
        """Start ``name`` as its own process with its config file and ``-p`` overrides."""
        default = default_config_file(name)
        argv = node_command(name, [default] if default is not None else [], params)
        self.procs.append(self._spawn(name, argv))

    def _spawn(self, name: str, argv: list[str]) -> NodeProcess:
        # One BLAS thread per node: five processes share the machine, and oversubscribed
        # OpenBLAS threads make the small per-message solves much slower.
        env = {"OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
        return NodeProcess(argv, name=name, log_path=self.out / f"{name}.log", env=env)

    def restart_nodes(self, names: list[str], why: str) -> None:
        """Stop the nodes ``names`` together (SIGINT, killed after :data:`STOP_TIMEOUT_S`) and start
        each again with the same command line. A first log is kept as ``<name>.first.log``; the
        report's notes say why, how the first process ended and how its log ends (a node stuck in a
        callback prints every thread's stack when it is stopped: nodes/runner.py). The recorder's
        bag folder, which it refuses to write into if it exists, is removed first: nothing was
        recorded before every node came up.

        Raises:
            ValueError: a name that is no node of this run.
        """
        old = {proc.name: proc for proc in self.procs}
        unknown = [name for name in names if name not in old]
        if unknown:
            raise ValueError(f"no node {unknown} in this run (its nodes: {sorted(old)})")
        killed = stop_all([old[name] for name in names], timeout=STOP_TIMEOUT_S)
        for name in names:
            first, proc = self.out / f"{name}.first.log", old[name]
            (self.out / f"{name}.log").replace(first)
            if name == "bag_recorder":
                shutil.rmtree(self.bag, ignore_errors=True)
            self.procs[self.procs.index(proc)] = self._spawn(name, proc.argv)
            ended = "killed" if proc in killed else f"exit status {proc.returncode}"
            self.notes.append(
                f"{name} was started again: {why}; its first process ({ended}) logged to {first.name}, "
                f"which ends:\n{log_tail(first)}"
            )

    def start_nodes(self) -> None:
        """Every node of the demo, each with its files in the run folder."""
        urdf = panda_urdf_path()
        models = self.out / "models"  # the tuner writes there; the learners load only from there
        self.start_node("feature_extractor", f"crop:={self.cfg.crop}", "annotate:=true")
        self.start_node(
            "object_recognition",
            f"checkpoint_path:={self.out / 'object_recognition.llm'}",
            f"model_directory:={models}",
            "ask_after_s:=0.5",  # a demo showing lasts about 1.5 s
            "question_interval_s:=2.0",
        )
        self.start_node(
            "inverse_dynamics",
            f"urdf_path:={urdf}",
            "joint_names:=[" + ",".join(JOINT_NAMES) + "]",
            f"checkpoint_path:={self.out / 'inverse_dynamics.llm'}",
            f"model_directory:={models}",
            f"realtime_priority:={self.cfg.realtime_priority}",
            f"shadow_window_s:={float(self.cfg.shadow_seconds)}",  # the retrained model in shadow first
            f"metrics_window_s:={float(self.cfg.metrics_window_s)}",
            f"drift_window_s:={float(self.cfg.drift_window_s)}",
        )
        self.start_node(
            "nystrom_tuner",
            f"output_dir:={models}",
            f"urdf_path:={urdf}",
            # the lifelong loop's goals (auto_retrain, set on in its phase) take the node's defaults
            f"default_centers:={self.cfg.tune_centers}",
            f"default_epochs:={self.cfg.tune_epochs}",
            f"retrain_bag_files:={self.cfg.loop_bag_files}",
            "retrain_min_period_s:=20.0",
            f"bag_directory:={self.bag}",  # the loop trains only on files in it
        )
        # Files close every bag_file_s (the lifelong loop retrains on closed files) and on
        # ~/split_bagfile: the demo splits before retraining, so the tuner sees the whole online phase.
        self.start_node(
            "bag_recorder",
            f"output:={self.bag}",
            f"max_bagfile_duration_s:={float(self.cfg.bag_file_s)}",
        )

    def stop_nodes(self) -> None:
        """Ctrl-C every node (final checkpoints, the bag closed); kill any that hangs."""
        for proc in stop_all(self.procs, timeout=STOP_TIMEOUT_S):
            self.notes.append(
                f"{proc.name} did not stop on SIGINT within {STOP_TIMEOUT_S:.0f} s and was killed"
            )
        self.procs = []

    def check_alive(self) -> None:
        """RuntimeError (naming its log) when a node process has exited."""
        for proc in self.procs:
            if not proc.alive():
                raise RuntimeError(f"node {proc.name} exited with {proc.returncode}; see {proc.log_path}")

    def say(self, text: str) -> None:
        """Print progress (unless ``progress`` is off)."""
        if self.progress:
            print(f"[demo {time.strftime('%H:%M:%S')}] {text}", flush=True)

    def wait_for_nodes(
        self, driver: DemoDriver, timeout: float = NODES_UP_TIMEOUT_S, restart_after: float = RESTART_AFTER_S
    ) -> None:
        """Until every node reports diagnostics, the sensor topics have subscribers and the bag
        recorder records every topic it was given.

        The recorder subscribes to a topic only once the graph shows its publisher (as ``ros2 bag
        record`` does), so without the last condition the first object's labelled frames could
        be learned but not recorded (seen once in CI, on a loaded machine).

        A node whose diagnostics have not arrived ``restart_after`` s after the start, while other
        nodes' have, is started again, once (:meth:`restart_nodes`; seen once in CI: object_recognition
        alive and silent for 120 s while the others reported within seconds). Raises RuntimeError
        after ``timeout`` s, saying what the graph shows of each node not up and how its log ends.
        """
        self.say("waiting for the nodes to come up (the CNN loads, numba compiles)")
        start = time.monotonic()
        deadline = start + timeout
        up: set[str] = set()
        waiting = "?"
        restarted = False
        while time.monotonic() < deadline:
            self.check_alive()
            up = set(NODES) & driver.nodes_reporting()
            if not restarted and up and time.monotonic() - start > restart_after:
                restarted = True
                silent = sorted(set(NODES) - up)
                seen = "; ".join(f"{name}: {driver.graph_view(name)}" for name in silent)
                why = f"no diagnostics from it {restart_after:.0f} s after the start ({seen})"
                self.say(f"starting {', '.join(silent)} again: {why}")
                self.restart_nodes(silent, why)
            waiting = driver.diagnostics_now().get("bag_recorder", {}).get("topics waiting", "?")
            if (
                up == set(NODES)
                and waiting == "none"
                and driver.image_pub.get_subscription_count() > 0
                and driver.joint_pub.get_subscription_count() > 1  # the learner and the recorder
                and driver.label_pub.get_subscription_count() > 1
                and driver.count_subscribers(LABELED_FEATURES) > 1
            ):
                self.say("all nodes up: " + ", ".join(NODES))
                return
            time.sleep(0.2)
        missing = "".join(
            f"\n{proc.name} ({driver.graph_view(proc.name)}), its log ends:\n{log_tail(proc.log_path)}"
            for proc in self.procs
            if proc.name not in up and proc.log_path is not None
        )
        restarts = "".join(f"\n{note}" for note in self.notes if " was started again: " in note)
        raise RuntimeError(
            f"nodes not up after {timeout:.0f} s (up: {sorted(up)}; topics the recorder waits for: "
            f"{waiting}); logs in {self.out}{missing}{restarts}"
        )

    # ------------------------------------------------------------------ run
    def run(self) -> Path:
        """Run every phase and write the report; returns its path."""
        t0 = time.monotonic()
        self.out.mkdir(parents=True, exist_ok=True)
        self.say(f"run folder {self.out}")
        results: dict[str, Any] = {
            "command": " ".join(["lifelong-learning", "demo", *sys.argv[2:]]),
            "machine": f"{platform.node()} ({os.cpu_count()} cores)",
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "notes": self.notes,
        }
        # the shipped Fast DDS profile for camera-sized frames (unless one is set), as `up` and
        # scripts/env.sh apply it: for the node processes and this one's driver (before rclpy.init)
        os.environ.update(middleware_environment())
        os.environ.update(private_graph(self.say))
        try:
            self.start_nodes()
            with running_driver(self.say) as driver:
                self.wait_for_nodes(driver)
                self.phases(Stage(self.cfg, driver, self.out, self.say, self.check_alive), results)
        finally:
            self.stop_nodes()
        results["bag"] = {**results.get("bag", {}), **bag_summary(self.out / "bag")}
        if "dynamics" in results:
            results["dynamics"]["live_metrics"] = read_live_metrics(self.out / "bag")
        results["wall_s"] = time.monotonic() - t0
        report = write_report(results, self.out)
        self.say(f"report: {report}")
        return report

    def phases(self, stage: Stage, results: dict[str, Any]) -> None:
        """Online learning, bag split, evaluation, retraining, evaluation again; fills ``results``."""
        watcher = LoopWatcher(stage.driver)  # early: events latched before the cycle are not its own
        cfg = self.cfg
        with ObjectRenderer(cfg.n_objects + cfg.new_objects + cfg.asked_objects, cfg.seed) as renderer:
            # 1. online learning: the robot and the camera at the same time
            robot = threading.Thread(target=scenarios.robot_online, args=(stage, results), daemon=True)
            robot.start()
            scenarios.teach_objects(stage, renderer, results)
            robot.join()
            self.check_alive()
            # 2. the bag is readable up to now
            scenarios.split_bag(stage, results)
            # 3. evaluation trajectory, online model (learning frozen from here on)
            scenarios.set_learning(stage, False)
            evaluation = scenarios.evaluation_log(self.cfg)
            online_eval = scenarios.drive(stage, evaluation, "evaluation, online model")
            # 4. retrain from the bag; the nodes hot-reload the announced models
            scenarios.retrain(stage, results)
            # the robot's motion for phase 6, computed while phase 5 drives and shows in real time
            simulating = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cycle-log")
            motion = simulating.submit(cycle_log, self.cfg, scenarios.stride(self.cfg))
            simulating.shutdown(wait=False)
            # 5. the same evaluation trajectory and every object, retrained models
            retrained_eval = scenarios.drive(stage, evaluation, "evaluation, retrained model")
            scenarios.recognition_after_retraining(stage, renderer, results)
            scenarios.evaluation_results(self.cfg, evaluation, online_eval, retrained_eval, results)
            dynamics_job = next(j for j in results["retraining"] if j["task"] == "inverse-dynamics")
            results["dynamics"]["evaluation"]["served_after_retraining"] = (
                "the retrained model, promoted by the gate"
                + (", won its shadow window" if "shadow" in dynamics_job else "")
                + " and hot-reloaded"
                if dynamics_job["reload"]
                else "the online model: the retrained one lost its shadow window"
                if "shadow" in dynamics_job
                else "the online model: the gate did not promote the retrained one"
            )
        # 6. the lifelong loop closes by itself: a heavier payload, drift, a job the tuner sends
        # itself, the candidate in shadow, swapped in
        flag = functools.partial(scenarios.set_flag, stage)
        results["dynamics"]["lifelong_loop"] = autonomous_cycle(stage, watcher, flag, motion.result())
        results["diagnostics"] = stage.driver.fresh_diagnostics(NODES)
