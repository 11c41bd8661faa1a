"""The main job: the whole lifelong loop over DDS against a simulated robot and camera.

Processes (each a real ROS 2 node over Fast DDS, as on a robot):

- ``feature_extractor`` and ``object_recognition``: a simulated camera (pybullet renderings,
  :mod:`lifelong_learning.sim.objects`) shows objects one after the other while a scripted
  teacher names them on ``teacher_label``; one object is shown only briefly (the rare
  class). After each object, unlabelled views of every object taught so far are shown and
  the ``prediction`` answers scored against the truth the demo knows.
- ``inverse_dynamics``: the simulated Panda (MuJoCo, :mod:`lifelong_learning.sim.panda`)
  publishes ``joint_states`` with measured efforts, stamped with the simulation time of each
  sample (as a robot driver stamps the measurement time); a 1 kg payload is grasped part-way.
  The node learns online and answers each message with predicted torques, scored per joint
  against the measured effort next to the URDF's own RNEA.
- ``bag_recorder`` records the learners' topics to an MCAP bag in the run folder.
- ``nystrom_tuner``: after the online phase the demo closes the bag's current file
  (``~/split_bagfile``), asks the tuner to retrain both learners from the bag, and the nodes
  hot-reload the models it announces on ``tuned_model``.

Phases: online learning → bag split → evaluation trajectory (payload attached, learning
frozen) answered by the online model → retraining → the same evaluation trajectory answered
by the retrained model, and every object shown again → report.

This module drives the run (rclpy); :mod:`lifelong_learning.demo.report` writes the report.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.demo.report import write_report

# Topic names (relative, remappable), as in config/*.yaml.
IMAGE, TEACHER_LABEL, PREDICTIONS = "image", "teacher_label", "prediction"
JOINT_STATES, PREDICTED_TORQUES = "joint_states", "predicted_torque"
TUNING_PROGRESS, TUNED_MODEL = "tuning_progress", "tuned_model"
NODES = ("feature_extractor", "object_recognition", "inverse_dynamics", "nystrom_tuner", "bag_recorder")


@dataclass
class DemoConfig:
    """What the demo does; the defaults finish in under 5 minutes on a 2-core machine."""

    n_objects: int = 8
    labeled_frames: int = 20
    rare_labeled_frames: int = 3
    test_frames_per_object: int = 5
    image_size: tuple[int, int] = (240, 320)  # height, width
    camera_hz: float = 8.0
    robot_seconds: float = 90.0
    eval_seconds: float = 15.0
    joint_state_hz: float = 100.0
    payload_at_fraction: float = 0.6
    tune_centers: int = 200
    tune_epochs: int = 40
    seed: int = 0

    @classmethod
    def quick(cls) -> DemoConfig:
        """A short run for CI (about a minute)."""
        return cls(
            n_objects=3,
            labeled_frames=10,
            rare_labeled_frames=2,
            test_frames_per_object=3,
            image_size=(120, 160),
            robot_seconds=20.0,
            eval_seconds=5.0,
            tune_centers=50,
            tune_epochs=10,
        )


def _config_dir() -> Path:
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("lifelong_learning")) / "config"
    except Exception:
        return Path(__file__).resolve().parents[2] / "config"


def _stamp_ns(stamp: Any) -> int:
    return int(stamp.sec) * 10**9 + int(stamp.nanosec)


def nmse_windows(
    t: np.ndarray, tau: np.ndarray, predictions: dict[str, np.ndarray], window: int
) -> list[dict[str, Any]]:
    """Per-joint nMSE of each prediction series in consecutive windows of ``window`` samples.

    nMSE = mean squared error over the window / variance of ``tau`` over the whole trajectory.
    Rows of NaN (unanswered messages) are left out; a window with none answered gives NaN.
    """
    var = np.var(tau, axis=0)
    out = []
    for start in range(0, len(t) - window + 1, window):
        sl = slice(start, start + window)
        w: dict[str, Any] = {"t_end": float(t[sl][-1])}
        for name, pred in predictions.items():
            w[name] = nmse(tau[sl], pred[sl], variance=var)
        out.append(w)
    return out


def nmse(tau: np.ndarray, pred: np.ndarray, variance: np.ndarray | None = None) -> list[float]:
    """Per-joint nMSE over the answered rows of ``pred`` (normalized by ``variance``, default the
    variance of ``tau``); NaN when no row was answered."""
    ok = ~np.isnan(pred).any(axis=1)
    var = np.var(tau, axis=0) if variance is None else variance
    return normalized_mse(tau[ok], pred[ok], variance=var).tolist()


class DemoRun:
    """One demo run writing into ``out`` (a run folder)."""

    def __init__(self, cfg: DemoConfig, out: Path, progress: bool = True):
        self.cfg = cfg
        self.out = out
        self.progress = progress
        self.procs: list[tuple[str, subprocess.Popen[bytes], Any]] = []
        self.notes: list[str] = []
        self.lock = threading.Lock()
        self.predictions: dict[int, tuple[str, float]] = {}  # stamp ns → (label, receive time)
        self.torques: dict[int, tuple[np.ndarray, float]] = {}
        self.diagnostics: dict[str, dict[str, str]] = {}
        self.tuning: list[dict[str, Any]] = []  # tuning_progress messages with state done/failed
        self.announced: list[str] = []  # tuned_model paths
        self._last_progress = 0.0

    # ------------------------------------------------------------------ processes
    def start_node(self, name: str, *params: str) -> None:
        """Start ``name`` as its own process with its config file and ``-p`` overrides."""
        argv = [
            sys.executable,
            "-m",
            f"lifelong_learning.nodes.{name}",
            "--ros-args",
            "--params-file",
            str(_config_dir() / f"{name}.yaml"),
        ]
        for p in params:
            argv += ["-p", p]
        log = open(self.out / f"{name}.log", "wb")
        # One BLAS thread per node: five processes share the machine, and oversubscribed
        # OpenBLAS threads make the small per-message solves much slower.
        env = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.out, start_new_session=True, env=env
        )
        self.procs.append((name, proc, log))

    def stop_nodes(self) -> None:
        """Ctrl-C every node (final checkpoints, the bag closed); kill any that hangs."""
        for _, proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for name, proc, log in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                self.notes.append(f"{name} did not stop on SIGINT within 30 s and was killed")
            log.close()

    def _check_alive(self) -> None:
        for name, proc, _ in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"node {name} exited with {proc.returncode}; see {self.out / (name + '.log')}"
                )

    def say(self, text: str) -> None:
        if self.progress:
            print(f"[demo {time.strftime('%H:%M:%S')}] {text}", flush=True)

    # ------------------------------------------------------------------ run
    def run(self) -> Path:
        """Run every phase and write the report; returns its path."""
        import rclpy
        from rclpy.executors import MultiThreadedExecutor

        from lifelong_learning.sim.panda import JOINT_NAMES as ARM_JOINTS
        from lifelong_learning.sim.panda import panda_urdf_path

        t0 = time.monotonic()
        self.out.mkdir(parents=True, exist_ok=True)
        self.say(f"run folder {self.out}")
        urdf = panda_urdf_path()
        self.start_node("feature_extractor")
        self.start_node("object_recognition", f"checkpoint_path:={self.out / 'object_recognition.llm'}")
        self.start_node(
            "inverse_dynamics",
            f"urdf_path:={urdf}",
            "joint_names:=[" + ",".join(ARM_JOINTS) + "]",
            f"checkpoint_path:={self.out / 'inverse_dynamics.llm'}",
        )
        self.start_node("nystrom_tuner", f"output_dir:={self.out / 'models'}", f"urdf_path:={urdf}")
        # Files close on ~/split_bagfile (and on the size/duration limits): the demo splits once,
        # before retraining, so the tuner sees exactly the online phase.
        self.start_node("bag_recorder", f"output:={self.out / 'bag'}", "max_bagfile_duration_s:=600.0")
        rclpy.init()
        node = self._make_driver()
        executor = MultiThreadedExecutor(num_threads=2)
        executor.add_node(node)
        spin = threading.Thread(target=executor.spin, daemon=True)
        spin.start()
        results: dict[str, Any] = {
            "command": " ".join(["lifelong-learning", "demo", *sys.argv[2:]]),
            "machine": f"{platform.node()} ({os.cpu_count()} cores)",
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "notes": self.notes,
        }
        try:
            self._wait_for_nodes(node)
            renderer_ctx = self._renderer()
            with renderer_ctx as renderer:
                # 1. online learning: the robot and the camera at the same time
                robot = threading.Thread(target=self._robot_online, args=(node, results), daemon=True)
                robot.start()
                self._camera(node, renderer, results)
                robot.join()
                self._check_alive()
                # 2. the bag is readable up to now
                self._split_bag(node, results)
                # 3. evaluation trajectory, online model (learning frozen from here on)
                self._set_learning(node, False)
                evaluation = self._evaluation_log()
                online_eval = self._drive(node, evaluation, "evaluation, online model")
                # 4. retrain from the bag; the nodes hot-reload the announced models
                self._retrain(node, results)
                # 5. the same evaluation trajectory and every object, retrained models
                retrained_eval = self._drive(node, evaluation, "evaluation, retrained model")
                self._recognition_after_retraining(node, renderer, results)
                self._evaluation_results(evaluation, online_eval, retrained_eval, results)
            time.sleep(1.5)  # last diagnostics
            with self.lock:
                results["diagnostics"] = dict(self.diagnostics)
        finally:
            self.stop_nodes()
            executor.shutdown()
            node.destroy_node()
            rclpy.try_shutdown()
        results["bag"] = {**results.get("bag", {}), **self._bag_summary(self.out / "bag")}
        results["wall_s"] = time.monotonic() - t0
        report = write_report(results, self.out)
        self.say(f"report: {report}")
        return report

    def _renderer(self) -> Any:
        from lifelong_learning.sim.objects import ObjectRenderer

        return ObjectRenderer(self.cfg.n_objects, self.cfg.seed)

    def _make_driver(self) -> Any:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.node import Node
        from rclpy.qos import DurabilityPolicy, QoSProfile, qos_profile_sensor_data
        from sensor_msgs.msg import Image, JointState
        from std_msgs.msg import String

        from lifelong_learning.msg import Prediction

        node = Node("demo_driver")
        node.image_pub = node.create_publisher(Image, IMAGE, qos_profile_sensor_data)
        node.label_pub = node.create_publisher(String, TEACHER_LABEL, 10)
        # Reliable, as ros2_control's joint_state_broadcaster publishes; the node itself
        # subscribes best-effort (sensor data) and the recorder reliably.
        node.joint_pub = node.create_publisher(JointState, JOINT_STATES, 100)

        def on_prediction(msg: Prediction) -> None:
            with self.lock:
                self.predictions[_stamp_ns(msg.header.stamp)] = (msg.label, time.time())

        def on_torques(msg: JointState) -> None:
            with self.lock:
                self.torques[_stamp_ns(msg.header.stamp)] = (np.array(msg.effort), time.time())

        def on_diag(msg: DiagnosticArray) -> None:
            with self.lock:
                for s in msg.status:
                    self.diagnostics[s.name] = {kv.key: kv.value for kv in s.values}

        def on_progress(msg: String) -> None:
            try:
                info = json.loads(msg.data)
            except ValueError:
                return
            if info.get("state") in ("done", "failed"):
                with self.lock:
                    self.tuning.append(info)
            elif time.monotonic() - self._last_progress > 5.0:
                self._last_progress = time.monotonic()
                eta = info.get("eta_s")
                self.say(
                    f"tuner: {info.get('objective')} epoch {info.get('epoch')}/{info.get('epochs')}"
                    + (f", about {eta:.0f} s left" if eta is not None else "")
                )

        def on_model(msg: String) -> None:
            with self.lock:
                self.announced.append(msg.data)

        latched = QoSProfile(depth=5, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        node.create_subscription(Prediction, PREDICTIONS, on_prediction, 100)
        node.create_subscription(JointState, PREDICTED_TORQUES, on_torques, 1000)
        node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 50)
        node.create_subscription(String, TUNING_PROGRESS, on_progress, 50)
        node.create_subscription(String, TUNED_MODEL, on_model, latched)
        return node

    def _wait_for_nodes(self, node: Any, timeout: float = 120.0) -> None:
        self.say("waiting for the nodes to come up (the CNN loads, numba compiles)")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            with self.lock:
                up = set(NODES) & set(self.diagnostics)
            if (
                up == set(NODES)
                and node.image_pub.get_subscription_count() > 0
                and node.joint_pub.get_subscription_count() > 0
            ):
                self.say("all nodes up: " + ", ".join(NODES))
                return
            time.sleep(0.2)
        raise RuntimeError(f"nodes not up after {timeout:.0f} s (up: {sorted(up)}); logs in {self.out}")

    def _call(self, node: Any, srv_type: Any, name: str, request: Any, timeout: float = 30.0) -> Any:
        """Call a service from this (non-executor) thread; RuntimeError on timeout."""
        client = node.create_client(srv_type, name)
        try:
            if not client.wait_for_service(timeout_sec=timeout):
                raise RuntimeError(f"service {name} not available")
            future = client.call_async(request)
            deadline = time.monotonic() + timeout
            while not future.done():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"service {name} did not answer within {timeout:.0f} s")
                time.sleep(0.02)
            return future.result()
        finally:
            node.destroy_client(client)

    def _model_version(self, name: str) -> int:
        with self.lock:
            return int(self.diagnostics.get(name, {}).get("model version", "-1"))

    # ------------------------------------------------------------------ camera + teacher
    def _publish_frame(self, node: Any, frame: np.ndarray) -> int:
        from sensor_msgs.msg import Image

        from lifelong_learning.vision.image_conversion import numpy_to_image

        msg = numpy_to_image(frame, "rgb8", message=Image())
        now = time.time_ns()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 10**9)
        msg.header.frame_id = "camera"
        node.image_pub.publish(msg)
        return now

    def _show(
        self, node: Any, renderer: Any, objects: list[int], frames: int, rng: Any
    ) -> list[tuple[int, int]]:
        """Show ``frames`` random views of each object at the camera rate; (stamp, object) pairs."""
        from lifelong_learning.sim.objects import random_viewpoint

        period = 1.0 / self.cfg.camera_hz
        sent = []
        for obj in objects:
            for _ in range(frames):
                t = time.monotonic()
                frame = renderer.render(obj, random_viewpoint(rng), self.cfg.image_size)
                sent.append((self._publish_frame(node, frame), obj))
                time.sleep(max(0.0, period - (time.monotonic() - t)))
        return sent

    def _score(self, sent: list[tuple[int, int]], names: list[str], rare: int) -> dict[str, Any]:
        """Wait (≤ 5 s) for the answers to ``sent`` and score them against the truth."""
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            with self.lock:
                if all(s in self.predictions for s, _ in sent):
                    break
            time.sleep(0.05)
        with self.lock:
            answers = {s: self.predictions.get(s) for s, _ in sent}
        correct = [answers[s] is not None and answers[s][0] == names[o] for s, o in sent]
        rare_ok = [c for (_, o), c in zip(sent, correct, strict=True) if o == rare]
        return {
            "accuracy": float(np.mean(correct)),
            "rare_accuracy": float(np.mean(rare_ok)) if rare_ok else None,
            "n_test": len(sent),
            "n_answered": sum(a is not None for a in answers.values()),
            "latencies": [1e3 * (answers[s][1] - s / 1e9) for s, _ in sent if answers[s] is not None],
        }

    def _camera(self, node: Any, renderer: Any, results: dict[str, Any]) -> None:
        from std_msgs.msg import String

        from lifelong_learning.sim.objects import object_catalog

        cfg = self.cfg
        names = [o.name for o in object_catalog(cfg.n_objects, cfg.seed)]
        rare = cfg.n_objects // 2
        rng = np.random.default_rng([cfg.seed, 7])
        rounds, latencies = [], []
        for k in range(cfg.n_objects):
            n_lab = cfg.rare_labeled_frames if k == rare else cfg.labeled_frames
            self.say(f"teacher: this is '{names[k]}' ({n_lab} labelled frames)")
            node.label_pub.publish(String(data=names[k]))
            time.sleep(0.5)
            self._show(node, renderer, [k], n_lab, rng)
            time.sleep(0.5)
            node.label_pub.publish(String(data=""))
            time.sleep(0.5)
            sent = self._show(node, renderer, list(range(k + 1)), cfg.test_frames_per_object, rng)
            r = self._score(sent, names, rare)
            latencies += r.pop("latencies")
            rounds.append({"n_taught": k + 1, **r})
            self.say(f"recognition after {k + 1} objects: {100 * r['accuracy']:.0f}% of {len(sent)} views")
        results["recognition"] = {
            "names": names,
            "n_objects": cfg.n_objects,
            "labeled_per_object": cfg.labeled_frames,
            "rare_object": names[rare],
            "rare_labeled": cfg.rare_labeled_frames,
            "rounds": rounds,
        }
        results.setdefault("latency_ms", {})["image → prediction"] = latencies

    def _recognition_after_retraining(self, node: Any, renderer: Any, results: dict[str, Any]) -> None:
        cfg = self.cfg
        rec = results["recognition"]
        rng = np.random.default_rng([cfg.seed, 8])
        sent = self._show(node, renderer, list(range(cfg.n_objects)), cfg.test_frames_per_object, rng)
        r = self._score(sent, rec["names"], cfg.n_objects // 2)
        r.pop("latencies")
        rec["after_retraining"] = r
        self.say(f"recognition with the retrained model: {100 * r['accuracy']:.0f}% of {len(sent)} views")

    # ------------------------------------------------------------------ robot
    def _stride(self) -> int:
        return max(1, round(1.0 / (self.cfg.joint_state_hz * 0.002)))  # PandaSimulation timestep 2 ms

    def _drive(self, node: Any, log: dict[str, np.ndarray], what: str) -> dict[str, Any]:
        """Publish ``log`` as joint_states in real time; collect the torques answered.

        Each message is stamped with its sample's simulation time (offset to now), so the
        node's acceleration estimate sees the true sample spacing even when the machine is busy.
        """
        from sensor_msgs.msg import JointState

        from lifelong_learning.sim.panda import JOINT_NAMES

        names = list(JOINT_NAMES)
        t = log["t"] - log["t"][0]
        stamps = time.time_ns() + np.round(t * 1e9).astype(np.int64)
        sent = np.zeros(t.size)  # wall time of each publish (the stamp is the sample's time)
        t_start = time.monotonic()
        self.say(f"robot ({what}): {t[-1]:.0f} s at {self.cfg.joint_state_hz:.0f} Hz")
        for i in range(t.size):
            delay = t_start + t[i] - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            msg = JointState(
                name=names,
                position=log["q"][i].tolist(),
                velocity=log["qd"][i].tolist(),
                effort=log["tau"][i].tolist(),
            )
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamps[i]), 10**9)
            sent[i] = time.time()
            node.joint_pub.publish(msg)
        time.sleep(1.0)
        with self.lock:
            got = [self.torques.get(int(s)) for s in stamps]
        pred = np.array([g[0] if g is not None else np.full(len(names), np.nan) for g in got])
        answered = int(sum(g is not None for g in got))
        self.say(f"robot ({what}): {answered}/{t.size} joint states answered")
        return {
            "pred": pred,
            "answered": answered,
            "published": int(t.size),
            "latencies": [1e3 * (g[1] - s) for g, s in zip(got, sent, strict=True) if g is not None],
            "publish_lag_ms": [1e3 * (s - ns / 1e9) for s, ns in zip(sent, stamps, strict=True)],
        }

    def _robot_online(self, node: Any, results: dict[str, Any]) -> None:
        from lifelong_learning.dynamics.regressor import RigidBodyRegressor
        from lifelong_learning.sim.panda import PandaSimulation, panda_urdf_text

        cfg = self.cfg
        sim = PandaSimulation()
        payload_at = cfg.payload_at_fraction * cfg.robot_seconds
        log = sim.run(
            cfg.robot_seconds,
            seed=cfg.seed,
            log_every=self._stride(),
            payload_mass=1.0,
            payload_at=payload_at,
        )
        names = list(sim.joint_names)
        rnea = RigidBodyRegressor(panda_urdf_text(), names).rnea(log["q"], log["qd"], log["qdd"])
        online = self._drive(node, log, "online learning")
        window = max(50, len(log["t"]) // 30)
        windows = nmse_windows(log["t"], log["tau"], {"rnea": rnea, "online": online["pred"]}, window)
        before = [w for w in windows if w["t_end"] < payload_at]
        results["dynamics"] = {
            "joint_names": names,
            "rate_hz": cfg.joint_state_hz,
            "duration_s": cfg.robot_seconds,
            "payload_at": payload_at,
            "windows": windows,
            "final_rnea": windows[-1]["rnea"],
            "final_online": windows[-1]["online"],
            "before_payload_online": (before[-1] if before else windows[0])["online"],
            "before_payload_rnea": (before[-1] if before else windows[0])["rnea"],
            "published": online["published"],
            "answered": online["answered"],
        }
        results.setdefault("latency_ms", {})["joint_states → torques"] = online["latencies"]
        lag = online["publish_lag_ms"]
        results["dynamics"]["publisher_lag_ms"] = {
            "p50": float(np.percentile(lag, 50)),
            "p99": float(np.percentile(lag, 99)),
        }

    def _evaluation_log(self) -> dict[str, np.ndarray]:
        from lifelong_learning.sim.panda import PandaSimulation

        sim = PandaSimulation()
        return sim.run(
            self.cfg.eval_seconds,
            seed=self.cfg.seed + 1000,
            log_every=self._stride(),
            payload_mass=1.0,
            payload_at=0.0,
        )

    def _set_learning(self, node: Any, on: bool) -> None:
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParameters

        value = ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=on)
        req = SetParameters.Request(parameters=[Parameter(name="learning", value=value)])
        res = self._call(node, SetParameters, "/inverse_dynamics/set_parameters", req)
        if not res.results or not res.results[0].successful:
            raise RuntimeError(f"could not set inverse_dynamics learning={on}: {res}")
        self.say(f"inverse_dynamics: learning {'on' if on else 'frozen'}")

    def _evaluation_results(
        self,
        log: dict[str, np.ndarray],
        online: dict[str, Any],
        retrained: dict[str, Any],
        results: dict[str, Any],
    ) -> None:
        from lifelong_learning.dynamics.regressor import RigidBodyRegressor
        from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_text

        rnea = RigidBodyRegressor(panda_urdf_text(), list(JOINT_NAMES)).rnea(log["q"], log["qd"], log["qdd"])
        tau = log["tau"]
        window = max(50, len(log["t"]) // 10)
        series = {"rnea": rnea, "online": online["pred"], "retrained": retrained["pred"]}
        results["dynamics"]["evaluation"] = {
            "duration_s": self.cfg.eval_seconds,
            "seed": self.cfg.seed + 1000,
            "rnea": nmse(tau, rnea),
            "online": nmse(tau, online["pred"]),
            "retrained": nmse(tau, retrained["pred"]),
            "answered_online": online["answered"],
            "answered_retrained": retrained["answered"],
            "published": online["published"],
            "windows": nmse_windows(log["t"], tau, series, window),
        }

    # ------------------------------------------------------------------ bag + retraining
    def _split_bag(self, node: Any, results: dict[str, Any]) -> None:
        from std_srvs.srv import Trigger

        res = self._call(node, Trigger, "/bag_recorder/split_bagfile", Trigger.Request())
        if not res.success:
            raise RuntimeError(f"bag split failed: {res.message}")
        self.say(f"bag recorder: {res.message}")
        results["bag"] = {"split": res.message}

    def _tune(self, node: Any, task: str) -> dict[str, Any]:
        from lifelong_learning.sim.panda import panda_urdf_path
        from lifelong_learning.srv import TuneModel

        with self.lock:
            n_before = len(self.tuning)
        req = TuneModel.Request(
            bags=[str(self.out / "bag")],
            task=task,
            centers=self.cfg.tune_centers,
            epochs=self.cfg.tune_epochs,
            urdf_path=panda_urdf_path() if task == "inverse-dynamics" else "",
        )
        t0 = time.monotonic()
        res = self._call(node, TuneModel, "/nystrom_tuner/tune", req)
        if not res.accepted:
            raise RuntimeError(f"tuner refused the {task} job: {res.message}")
        self.say(f"tuner: {res.message}")
        deadline = time.monotonic() + 600.0
        while time.monotonic() < deadline:
            self._check_alive()
            with self.lock:
                if len(self.tuning) > n_before:
                    info = self.tuning[n_before]
                    break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"{task} tuning did not finish within 600 s")
        if info["state"] != "done":
            raise RuntimeError(f"{task} tuning failed: {info.get('error')}")
        seconds = time.monotonic() - t0
        self.say(f"tuner: {task} model written to {info['out_path']} after {seconds:.0f} s")
        return {"task": task, "seconds": seconds, "model": info["out_path"], "objectives": info["report"]}

    def _retrain(self, node: Any, results: dict[str, Any]) -> None:
        """Tune both learners from the bag; wait until each node has hot-reloaded its model."""
        jobs = []
        for task, learner in (
            ("classification", "object_recognition"),
            ("inverse-dynamics", "inverse_dynamics"),
        ):
            version = self._model_version(learner)
            job = self._tune(node, task)
            t0 = time.monotonic()
            while self._model_version(learner) <= version and time.monotonic() - t0 < 60.0:
                self._check_alive()
                time.sleep(0.1)
            new = self._model_version(learner)
            if new <= version:
                raise RuntimeError(f"{learner} did not reload the announced model {job['model']}")
            job["reload"] = {
                "node": learner,
                "model_version": [version, new],
                "seconds_after_announcement": time.monotonic() - t0,
            }
            with self.lock:
                job["reload"]["last_reload"] = self.diagnostics.get(learner, {}).get("last reload", "")
            self.say(f"{learner} hot-reloaded the tuned model (model version {version} → {new})")
            jobs.append(job)
        results["retraining"] = jobs

    @staticmethod
    def _bag_summary(path: Path) -> dict[str, Any]:
        """Every topic of the recorded bag read back with rosbags' AnyReader."""
        from rosbags.highlevel import AnyReader

        from lifelong_learning.io.bags import typestore

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
