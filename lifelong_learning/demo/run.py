"""The main job: the lifelong learners running online over DDS against a simulated robot.

Processes (each a real ROS 2 node over Fast DDS, as on a robot):

- ``feature_extractor`` and ``object_recognition``: a simulated camera (pybullet renderings,
  :mod:`lifelong_learning.sim.objects`) shows objects one after the other while a scripted
  teacher names them on ``teacher_label``; one object is shown only briefly (the rare
  class). After each object, unlabelled views of every object taught so far are shown and
  the ``predictions`` scored against the truth the demo knows.
- ``inverse_dynamics``: the simulated Panda (MuJoCo, :mod:`lifelong_learning.sim.panda`)
  publishes ``joint_states`` with measured efforts; a 1 kg payload is grasped part-way. The
  node learns online and answers each message with predicted torques, scored per joint
  against the measured effort next to the URDF's own RNEA.

This module drives the run (rclpy); :mod:`lifelong_learning.demo.report` writes the report.
"""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lifelong_learning.demo.report import write_report

# Topic names (relative, remappable), as in config/*.yaml.
IMAGE, TEACHER_LABEL, PREDICTIONS = "image", "teacher_label", "prediction"
JOINT_STATES, PREDICTED_TORQUES = "joint_states", "predicted_torque"


@dataclass
class DemoConfig:
    """What the demo does; the defaults finish in under 5 minutes on a 2-core machine."""

    n_objects: int = 6
    labeled_frames: int = 20
    rare_labeled_frames: int = 3
    test_frames_per_object: int = 5
    image_size: tuple[int, int] = (240, 320)  # height, width
    camera_hz: float = 8.0
    robot_seconds: float = 90.0
    joint_state_hz: float = 100.0
    payload_at_fraction: float = 0.6
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
        )


def _config_dir() -> Path:
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("lifelong_learning")) / "config"
    except Exception:
        return Path(__file__).resolve().parents[2] / "config"


class DemoRun:
    """One demo run writing into ``out`` (a run folder)."""

    def __init__(self, cfg: DemoConfig, out: Path, progress: bool = True):
        self.cfg = cfg
        self.out = out
        self.progress = progress
        self.procs: list[Any] = []
        self.notes: list[str] = []
        self.lock = threading.Lock()
        self.predictions: dict[int, tuple[str, float]] = {}  # stamp ns → (label, receive time)
        self.torques: dict[int, tuple[np.ndarray, float]] = {}
        self.diagnostics: dict[str, dict[str, str]] = {}

    # ------------------------------------------------------------------ processes
    def start_node(self, name: str, *params: str) -> None:
        import subprocess

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
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.out, start_new_session=True
        )
        self.procs.append((name, proc, log))

    def stop_nodes(self) -> None:
        import signal

        for _, proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for name, proc, log in self.procs:
            try:
                proc.wait(20)
            except Exception:
                proc.kill()
                self.notes.append(f"{name} did not stop on SIGINT within 20 s and was killed")
            log.close()

    def say(self, text: str) -> None:
        if self.progress:
            print(f"[demo {time.strftime('%H:%M:%S')}] {text}", flush=True)

    # ------------------------------------------------------------------ run
    def run(self) -> Path:
        import rclpy
        from rclpy.executors import MultiThreadedExecutor

        t0 = time.monotonic()
        self.out.mkdir(parents=True, exist_ok=True)
        from lifelong_learning.sim.panda import JOINT_NAMES as ARM_JOINTS
        from lifelong_learning.sim.panda import panda_urdf_path

        self.say(f"run folder {self.out}")
        self.start_node("feature_extractor")
        self.start_node("object_recognition", f"checkpoint_path:={self.out / 'object_recognition.llm'}")
        self.start_node(
            "inverse_dynamics",
            f"urdf_path:={panda_urdf_path()}",
            "joint_names:=[" + ",".join(ARM_JOINTS) + "]",
            f"checkpoint_path:={self.out / 'inverse_dynamics.llm'}",
        )
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
            robot = threading.Thread(target=self._robot, args=(node, results), daemon=True)
            robot.start()
            self._camera(node, results)
            robot.join()
            time.sleep(1.5)  # last diagnostics
            results["diagnostics"] = dict(self.diagnostics)
        finally:
            self.stop_nodes()
            executor.shutdown()
            node.destroy_node()
            rclpy.try_shutdown()
        results["wall_s"] = time.monotonic() - t0
        report = write_report(results, self.out)
        self.say(f"report: {report}")
        return report

    def _make_driver(self) -> Any:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.node import Node
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import Image, JointState
        from std_msgs.msg import String

        from lifelong_learning.msg import Prediction

        node = Node("demo_driver")
        node.image_pub = node.create_publisher(Image, IMAGE, qos_profile_sensor_data)
        node.label_pub = node.create_publisher(String, TEACHER_LABEL, 10)
        node.joint_pub = node.create_publisher(JointState, JOINT_STATES, qos_profile_sensor_data)

        def on_prediction(msg: Prediction) -> None:
            key = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            with self.lock:
                self.predictions[key] = (msg.label, time.time())

        def on_torques(msg: JointState) -> None:
            key = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            with self.lock:
                self.torques[key] = (np.array(msg.effort), time.time())

        def on_diag(msg: DiagnosticArray) -> None:
            for s in msg.status:
                with self.lock:
                    self.diagnostics[s.name] = {kv.key: kv.value for kv in s.values}

        node.create_subscription(Prediction, PREDICTIONS, on_prediction, 100)
        node.create_subscription(JointState, PREDICTED_TORQUES, on_torques, qos_profile_sensor_data)
        node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 50)
        return node

    def _wait_for_nodes(self, node: Any, timeout: float = 120.0) -> None:
        self.say("waiting for the nodes to come up (the CNN loads, numba compiles)")
        deadline = time.monotonic() + timeout
        wanted = {"feature_extractor", "object_recognition", "inverse_dynamics"}
        while time.monotonic() < deadline:
            for name, proc, _ in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"node {name} exited with {proc.returncode}; see {self.out / (name + '.log')}"
                    )
            with self.lock:
                up = wanted & set(self.diagnostics)
            if (
                up == wanted
                and node.image_pub.get_subscription_count() > 0
                and node.joint_pub.get_subscription_count() > 0
            ):
                self.say("all nodes up")
                return
            time.sleep(0.2)
        raise RuntimeError(f"nodes not up after {timeout:.0f} s; logs in {self.out}")

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

    def _camera(self, node: Any, results: dict[str, Any]) -> None:
        from std_msgs.msg import String

        from lifelong_learning.sim.objects import ObjectRenderer, object_catalog, random_viewpoint

        cfg = self.cfg
        names = [o.name for o in object_catalog(cfg.n_objects, cfg.seed)]
        rare = cfg.n_objects // 2
        period = 1.0 / cfg.camera_hz
        rng = np.random.default_rng([cfg.seed, 7])
        rounds, latencies = [], []
        with ObjectRenderer(cfg.n_objects, cfg.seed) as renderer:
            for k in range(cfg.n_objects):
                n_lab = cfg.rare_labeled_frames if k == rare else cfg.labeled_frames
                self.say(f"teacher: this is '{names[k]}' ({n_lab} labelled frames)")
                node.label_pub.publish(String(data=names[k]))
                time.sleep(0.5)
                for _ in range(n_lab):
                    t = time.monotonic()
                    self._publish_frame(node, renderer.render(k, random_viewpoint(rng), cfg.image_size))
                    time.sleep(max(0.0, period - (time.monotonic() - t)))
                time.sleep(0.5)
                node.label_pub.publish(String(data=""))
                time.sleep(0.5)
                sent: list[tuple[int, int]] = []
                for obj in range(k + 1):
                    for _ in range(cfg.test_frames_per_object):
                        t = time.monotonic()
                        sent.append(
                            (
                                self._publish_frame(
                                    node, renderer.render(obj, random_viewpoint(rng), cfg.image_size)
                                ),
                                obj,
                            )
                        )
                        time.sleep(max(0.0, period - (time.monotonic() - t)))
                deadline = time.monotonic() + 5.0
                while time.monotonic() < deadline:
                    with self.lock:
                        if all(s in self.predictions for s, _ in sent):
                            break
                    time.sleep(0.05)
                with self.lock:
                    answers = {s: self.predictions.get(s) for s, _ in sent}
                correct = [answers[s] is not None and answers[s][0] == names[o] for s, o in sent]
                rare_ok = [c for (s, o), c in zip(sent, correct, strict=True) if o == rare]
                latencies += [1e3 * (answers[s][1] - s / 1e9) for s, _ in sent if answers[s] is not None]
                r = {
                    "n_taught": k + 1,
                    "accuracy": float(np.mean(correct)),
                    "rare_accuracy": float(np.mean(rare_ok)) if rare_ok else None,
                    "n_test": len(sent),
                    "n_answered": sum(a is not None for a in answers.values()),
                }
                rounds.append(r)
                self.say(
                    f"recognition after {k + 1} objects: {100 * r['accuracy']:.0f}% of {len(sent)} views"
                )
        results["recognition"] = {
            "n_objects": cfg.n_objects,
            "labeled_per_object": cfg.labeled_frames,
            "rare_object": names[rare],
            "rare_labeled": cfg.rare_labeled_frames,
            "rounds": rounds,
        }
        results.setdefault("latency_ms", {})["image → prediction"] = latencies

    # ------------------------------------------------------------------ robot
    def _robot(self, node: Any, results: dict[str, Any]) -> None:
        from sensor_msgs.msg import JointState

        from lifelong_learning.dynamics.regressor import RigidBodyRegressor
        from lifelong_learning.sim.panda import PandaSimulation, panda_urdf_text

        cfg = self.cfg
        sim = PandaSimulation()
        payload_at = cfg.payload_at_fraction * cfg.robot_seconds
        stride = max(1, round(1.0 / (cfg.joint_state_hz * sim.model.opt.timestep)))
        log = sim.run(
            cfg.robot_seconds, seed=cfg.seed, log_every=stride, payload_mass=1.0, payload_at=payload_at
        )
        names = list(sim.joint_names)
        rbd = RigidBodyRegressor(panda_urdf_text(), names)
        rnea = rbd.rnea(log["q"], log["qd"], log["qdd"])
        self.say(
            f"robot: simulated {cfg.robot_seconds:.0f} s, "
            f"publishing joint_states at {cfg.joint_state_hz:.0f} Hz"
        )
        stamps = np.zeros(len(log["t"]), dtype=np.int64)
        t_start = time.monotonic()
        for i in range(len(log["t"])):
            target = t_start + log["t"][i] - log["t"][0]
            delay = target - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            msg = JointState(
                name=names,
                position=log["q"][i].tolist(),
                velocity=log["qd"][i].tolist(),
                effort=log["tau"][i].tolist(),
            )
            now = time.time_ns()
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 10**9)
            stamps[i] = now
            node.joint_pub.publish(msg)
        time.sleep(1.0)
        with self.lock:
            got = {s: self.torques.get(int(s)) for s in stamps}
        answered = np.array([got[s] is not None for s in stamps])
        pred = np.array([got[s][0] if got[s] is not None else np.full(len(names), np.nan) for s in stamps])
        tau = log["tau"]
        window = max(50, len(stamps) // 30)
        windows = []
        for start in range(0, len(stamps) - window + 1, window):
            sl = slice(start, start + window)
            ok = answered[sl]
            var = np.var(tau, axis=0) + 1e-12  # nMSE: normalized by the whole run's torque variance
            online = (
                np.mean((pred[sl][ok] - tau[sl][ok]) ** 2, axis=0) / var
                if ok.any()
                else np.full(len(names), np.nan)
            )
            windows.append(
                {
                    "t_end": float(log["t"][sl][-1]),
                    "rnea": (np.mean((rnea[sl] - tau[sl]) ** 2, axis=0) / var).tolist(),
                    "online": online.tolist(),
                }
            )
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
            "published": len(stamps),
            "answered": int(answered.sum()),
        }
        results.setdefault("latency_ms", {})["joint_states → torques"] = [
            1e3 * (got[s][1] - s / 1e9) for s in stamps if got[s] is not None
        ]
        self.say(f"robot: {int(answered.sum())}/{len(stamps)} joint states answered")
