"""Control-rate speed of the inverse_dynamics node: 1 kHz joint states from another process.

The installed node runs in its own process (``python -m lifelong_learning.nodes.inverse_dynamics``,
the shipped config, the Panda URDF, learning on). This process plays the robot: it publishes the
joint states of a MuJoCo Panda trajectory (position, velocity and measured effort) at ``--rate`` Hz
for ``--seconds`` s, pre-serialized so that publishing costs little, and receives the predicted
torques on a raw subscription (no deserialization: the stamp is read from the CDR bytes).

Printed per executor (``LIFELONG_LEARNING_EXECUTOR`` of the node process):

- answered: joint states whose stamp came back as predicted torques, of those sent;
- publish → answer published: the answer's DDS source timestamp minus the time this process
  published the joint state (the transport to the node plus everything in the node: an upper
  bound of the node's receive-to-publish time), p50 and p99 over the whole run;
- the node's own diagnostics at the end: ``receive to publish`` p50/p99 (the middleware's reception
  time to after publishing, last 200 samples), ``answer`` (the callback), the learning blocks,
  samples learned, and the messages lost in the subscription's queue.

The floor measured in the same run: one ``predict`` of the model in this process (the compute an
answer needs), and the time to publish one pre-serialized message.

Usage: ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_control_rate.py [--seconds 5] [--rate 1000]
[--executors single,events,multi] [--realtime-priority 50] [--no-learning | --learning-elsewhere]
[--pin CPU] [--latencies FILE] [--beside NODES] [--param NAME:=VALUE ...] [--shadow]
[--out docs/benchmarks/control-rate.md]``

``--shadow``: a model in shadow beside the serving one for the whole measured run: the
node runs with ``shadow_window_s`` one hour; after a second of joint states (the joints decided, a
model learned) its serving model is saved (``~/save_model``) and announced on ``tuned_model``, so
that a model of the same size predicts and learns every learned block beside it
(docs/serving.md#shadow-evaluation-canary-and-drift-alarm).

``--executors`` takes ``single``, ``events``, ``multi`` (the variable set to that), ``default``
(unset: the process chooses, one SingleThreadedExecutor per node) and ``echo``: a node that only
republishes each joint state as its answer, in the node's place (the floor of the transport and of
rclpy's executor here; the node's diagnostics are then absent).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from harness import Latencies, NodeUnderTest, load_average, percentiles  # benchmarks/harness

REPO = Path(__file__).resolve().parents[1]
WARMUP_S = 1.0  # joint states sent before the measured ones


def trajectory(seconds: float, rate_hz: float) -> list[dict[str, Any]]:
    from lifelong_learning.sim.panda import PandaSimulation, joint_states

    log = PandaSimulation().run(min(seconds, 20.0) + 1.0, seed=7)
    return [dict(s) for s in joint_states(log, rate_hz=rate_hz)]


def floor_costs(states: list[dict[str, Any]]) -> dict[str, float]:
    """The model's predict and prepare+learn of one sample in this process (median, ms)."""
    from lifelong_learning.dynamics import SemiparametricInverseDynamics
    from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_path

    model = SemiparametricInverseDynamics(panda_urdf_path(), JOINT_NAMES, n_features=500)
    q = np.array([s["position"] for s in states[:400]])
    qd = np.array([s["velocity"] for s in states[:400]])
    tau = np.array([s["effort"] for s in states[:400]])
    qdd = np.zeros_like(q)
    model.update(q[:200], qd[:200], qdd[:200], tau[:200])
    pred, learn = [], []
    for i in range(200, 400):
        t0 = time.perf_counter()
        prepared = model.prepare(q[i], qd[i], qdd[i])
        t1 = time.perf_counter()
        model.commit(model.stage(prepared, tau[i]))
        t2 = time.perf_counter()
        pred.append(t1 - t0)
        learn.append(t2 - t1)
    return {"predict_ms": 1e3 * float(np.median(pred)), "learn_ms": 1e3 * float(np.median(learn))}


def learning_load(
    states: list[dict[str, Any]], rate_hz: float, ready: Any, go: Any, stop: Any, done: Any
) -> None:
    """What the node's learning thread does, in a process of its own (``--learning-elsewhere``): from
    ``go`` to ``stop``, every sample that a ``rate_hz`` stream has delivered since the last block is
    prepared and learned as one block (``stage`` + ``commit``), at most one block per the node's
    ``LEARNING_INTERVAL_S``, as the learning thread does. An emulation of learning out of the
    answering process: the updated weights are not sent back."""
    from lifelong_learning.dynamics import SemiparametricInverseDynamics
    from lifelong_learning.nodes.inverse_dynamics_params import LEARNING_INTERVAL_S
    from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_path

    model = SemiparametricInverseDynamics(panda_urdf_path(), JOINT_NAMES, n_features=500)
    q = np.array([s["position"] for s in states])
    qd = np.array([s["velocity"] for s in states])
    tau = np.array([s["effort"] for s in states])
    model.update(q[:200], qd[:200], np.zeros_like(q[:200]), tau[:200])  # compiled and warm
    ready.set()
    go.wait()
    start, taken, blocks = time.perf_counter(), 0, 0
    while not stop.is_set():
        began = time.perf_counter()
        due = int((began - start) * rate_hz)
        if due <= taken:
            time.sleep(0.0005)
            continue
        rows = np.arange(taken, due) % len(states)
        prepared = model.prepare(q[rows], qd[rows], np.zeros((rows.size, q.shape[1])))
        model.commit(model.stage(prepared, tau[rows], solve_weights=True))
        taken, blocks = due, blocks + 1
        time.sleep(max(0.0, began + LEARNING_INTERVAL_S - time.perf_counter()))
    done.put((taken, blocks))


def thinning_accuracy(seconds: float, seeds: Sequence[int], rates: Sequence[float]) -> str:
    """``--accuracy``: what ``learn_max_hz`` costs in accuracy, judged on motion the model never saw.

    Per seed: a MuJoCo Panda trajectory at 1 kHz (``seconds`` long, a 1 kg payload grasped at 60 %
    of it) is learned sample by sample as the node does (its guard with ``learn_max_hz``, the
    residual outlier test, the shipped config's model), then the model predicts a new 15 s
    trajectory (another seed, the payload held throughout; q̈ estimated from the velocities).
    Printed: the torque nMSE there (mean over joints), the samples learned and the CPU time of
    learning (the guard, the test's prediction and the update)."""
    from lifelong_learning.core.metrics import normalized_mse
    from lifelong_learning.dynamics import SemiparametricInverseDynamics
    from lifelong_learning.dynamics.acceleration import estimate_accelerations
    from lifelong_learning.dynamics.guard import RefusedSampleError, SampleGuard
    from lifelong_learning.dynamics.plausibility import JointLimits
    from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text

    urdf = panda_urdf_text()
    limits = JointLimits.from_urdf(urdf, JOINT_NAMES)
    shipped = yaml.safe_load((REPO / "config" / "inverse_dynamics.yaml").read_text())
    p = next(iter(shipped.values()))["ros__parameters"]
    kwargs = {
        "mode": p["mode"], "prior": p["prior"], "n_features": p["n_features"], "bandwidth": p["bandwidth"],
        "lam_parametric": p["lam_parametric"], "lam_residual": p["lam_residual"],
        "friction": tuple(t for t in p["friction_terms"] if t),
        "coulomb_smoothing": p["coulomb_smoothing_velocity"],
        "lam_friction": p["lam_friction"], "forgetting": p["forgetting"], "seed": p["seed"],
    }  # fmt: skip
    lines = [
        f"\n### learn_max_hz: accuracy on a new trajectory ({seconds:g} s at 1 kHz learned per seed)\n",
        "| seed | learn_max_hz | samples learned | learning CPU [s] | nMSE, new trajectory |",
        "|---:|---:|---:|---:|---:|",
    ]
    for seed in seeds:
        sim = PandaSimulation(timestep=0.001)
        log = sim.run(seconds, seed=seed, payload_mass=1.0, payload_at=0.6 * seconds)
        new = PandaSimulation(timestep=0.001).run(15.0, seed=seed + 1000, payload_mass=1.0, payload_at=0.0)
        qdd_new = estimate_accelerations(new["t"], new["qd"])
        for hz in rates:
            model = SemiparametricInverseDynamics(urdf, JOINT_NAMES, **kwargs)
            guard = SampleGuard(
                limits, outlier_k=p["outlier_k"], outlier_window=p["outlier_window"], learn_max_hz=hz
            )
            t0 = time.process_time()
            for i in range(log["t"].size):
                q, qd, tau = log["q"][i], log["qd"][i], log["tau"][i]
                try:
                    admitted = guard.admit(log["t"][i], q, qd, tau)
                except RefusedSampleError:
                    continue
                if admitted.learn and guard.residual_refusal(tau, model.predict(q, qd, admitted.qdd)) is None:
                    model.update(q, qd, admitted.qdd, tau)
            cpu = time.process_time() - t0
            score = float(normalized_mse(new["tau"], model.predict(new["q"], new["qd"], qdd_new)).mean())
            lines.append(f"| {seed} | {hz:g} | {model.n_samples} | {cpu:.1f} | {score:.4f} |")
            print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


def echo_node() -> int:
    """``--executors echo`` runs this in the node's place: the floor of an answer over DDS on this
    machine. A node in its own process (rclpy, a SingleThreadedExecutor) republishes each joint
    state's bytes, unread, as the answer, with the node's QoS (best effort in, depth 100 each)."""
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    rclpy.init()
    node = Node("control_rate_echo")
    out = node.create_publisher(JointState, "predicted_torque", 100)
    best_effort = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT)
    node.create_subscription(JointState, "joint_states", out.publish, best_effort, raw=True)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    rclpy.try_shutdown()
    return 0


def pin_answering_path(pid: int, cpu: int) -> None:
    """``--pin CPU``: the node's answering path (its main thread, which spins the executor, and the
    middleware's ``dds.*`` threads) on ``cpu`` alone; its other threads (learning) and every thread
    of this process (the publisher) on the other CPUs. An emulation of a core set aside for the
    control path (``isolcpus``/cpusets on a robot), except that other processes may still use it."""
    from lifelong_learning.core.realtime import MIDDLEWARE_THREAD_PREFIXES, thread_names

    allowed = os.sched_getaffinity(0)
    rest = allowed - {cpu}
    if not rest or cpu not in allowed:
        raise SystemExit(
            f"--pin {cpu}: needs that CPU and another one (this process may use {sorted(allowed)})"
        )
    for tid, name in thread_names(pid).items():
        answering = tid == pid or name.startswith(MIDDLEWARE_THREAD_PREFIXES)
        os.sched_setaffinity(tid, {cpu} if answering else rest)
    for tid in thread_names():
        os.sched_setaffinity(tid, rest)


class LearningElsewhere:
    """``--learning-elsewhere``: :func:`learning_load` in a spawned process, ready when made."""

    def __init__(self, states: list[dict[str, Any]], rate_hz: float) -> None:
        import multiprocessing

        spawn = multiprocessing.get_context("spawn")
        ready, self.go, self._stop, self._done = spawn.Event(), spawn.Event(), spawn.Event(), spawn.Queue()
        self.process = spawn.Process(
            target=learning_load, args=(states, rate_hz, ready, self.go, self._stop, self._done), daemon=True
        )
        self.process.start()
        if not ready.wait(120):
            raise RuntimeError(f"the learning process did not start (exit code {self.process.exitcode})")

    def finish(self) -> tuple[int, int]:
        """Stop learning; the samples and blocks learned."""
        self._stop.set()
        self.process.join(30)
        if self.process.exitcode != 0:
            raise RuntimeError(f"the learning process failed (exit code {self.process.exitcode})")
        return self._done.get(timeout=5)

    def kill(self) -> None:
        self.process.kill()
        self.process.join(5)


def node_under_test(executor: str, args: argparse.Namespace, extra: dict[str, Any]) -> NodeUnderTest:
    """inverse_dynamics in its own process (``up`` with ``--beside``; the echo node for ``echo``)."""
    from lifelong_learning.sim.panda import panda_urdf_path

    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_control_rate_{os.getpid()}_{executor}"
    params = {
        "urdf_path": str(panda_urdf_path()),
        "model_directory": str(folder),
        "diagnostics_period_s": 0.5,
        "checkpoint_interval_s": 0.0,
        "learning": not (args.no_learning or args.learning_elsewhere),
        "realtime_priority": args.realtime_priority,
        **extra,
    }
    # "default": the variable unset, the process chooses (one SingleThreadedExecutor per node)
    kind = "" if executor == "default" else executor
    env = {"LIFELONG_LEARNING_EXECUTOR": kind, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    common = {"env": env, "folder": folder, "peer_name": "control_rate_bench"}
    beside = [n.strip() for n in args.beside.split(",") if n.strip()]
    if beside:  # `lifelong-learning up`: inverse_dynamics and the others in one process
        files = {
            "object_recognition": {"model_directory": str(folder)},
            "bag_recorder": {"output": str(folder / "bag")},
            "nystrom_tuner": {"output_dir": str(folder / "tuned")},
            "inverse_dynamics": params,
        }
        folder.mkdir(parents=True, exist_ok=True)
        up_yaml = folder / "up.yaml"  # JSON is YAML
        chosen = ["inverse_dynamics", *beside]
        up_yaml.write_text(json.dumps({name: {"ros__parameters": files.get(name, {})} for name in chosen}))
        argv = [
            sys.executable,
            "-m",
            "lifelong_learning.cli",
            "up",
            str(up_yaml),
            "--nodes",
            ",".join(chosen),
        ]
        return NodeUnderTest(argv=argv, name="up", **common)
    if executor == "echo":  # the child runs this script without its folder on sys.path (PYTHONSAFEPATH)
        here = str(Path(__file__).resolve().parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
        return NodeUnderTest(
            argv=[sys.executable, str(Path(__file__).resolve()), "--echo-node"], name="echo", **common
        )
    config = [REPO / "config" / "inverse_dynamics.yaml"]
    return NodeUnderTest("inverse_dynamics", params_files=config, params=params, **common)


def serialized(states: list[dict[str, Any]], n: int, rate_hz: float) -> tuple[list[bytes], list[int]]:
    """``n`` joint states of the trajectory, serialized, and their stamps (ns): far from the
    trajectory's own, one period apart."""
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState

    base = 1_000_000 * 1_000_000_000
    period_ns = round(1e9 / rate_hz)
    payloads, stamps = [], []
    for i in range(n):
        s = states[i % len(states)]
        msg = JointState(name=list(s["name"]), position=list(s["position"]), velocity=list(s["velocity"]),
                         effort=list(s["effort"]))  # fmt: skip
        stamp = base + i * period_ns
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
        payloads.append(serialize_message(msg))
        stamps.append(stamp)
    return payloads, stamps


def run_one(
    executor: str, states: list[dict[str, Any]], args: argparse.Namespace, extra: dict[str, Any]
) -> dict:
    """One executor: the node under test fed ``args.rate`` Hz for ``args.seconds`` s; the figures."""
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Bool

    bench = node_under_test(executor, args, extra)
    loader = None
    with bench:
        latencies = Latencies(clock=time.time_ns)  # publish time → the answer's source timestamp (ns)
        diagnostics: list[Any] = []

        def on_answer(raw: bytes, info: Any) -> None:
            sec, nsec = struct.unpack_from("<iI", raw, 4)  # CDR: 4-byte encapsulation, then header.stamp
            latencies.receive(sec * 1_000_000_000 + nsec, at=int(info["source_timestamp"]))

        pub = bench.peer.create_publisher(JointState, "joint_states", QoSProfile(depth=100))
        bench.peer.create_subscription(
            JointState, "predicted_torque", on_answer,
            QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE), raw=True,
        )  # fmt: skip
        contact_messages: list[int] = []
        if args.contact_subscribers:  # a safety node's: the contact outputs are built and published
            for msg_type, topic in ((JointState, "external_torque"), (Bool, "contact")):
                bench.peer.create_subscription(
                    msg_type, topic, lambda raw, info: contact_messages.append(1),
                    QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE), raw=True,
                )  # fmt: skip
        bench.peer.create_subscription(
            DiagnosticArray,
            "/diagnostics",
            lambda m: diagnostics.extend(s for s in m.status if s.name.startswith("inverse_dynamics")),
            50,
        )
        try:
            loader = LearningElsewhere(states, args.rate) if args.learning_elsewhere else None
            has_diagnostics = executor != "echo"
            bench.spin_until(
                lambda: pub.get_subscription_count() > 0 and (bool(diagnostics) or not has_diagnostics), 90
            )
            if pub.get_subscription_count() == 0:
                raise RuntimeError(f"{bench.name}: no subscription to joint_states in 90 s:\n{bench.log()}")
            if args.pin is not None:
                pin_answering_path(bench.process.pid, args.pin)
            # a running node: the first second (first calls, caches) is not counted
            warm = int(WARMUP_S * args.rate)
            payloads, stamps = serialized(states, 2 * warm + int(args.seconds * args.rate), args.rate)
            if args.shadow:  # a second of joint states, then a model in shadow for the rest
                with bench.spinning():
                    for i in bench.paced(warm, args.rate, spin=False):
                        pub.publish(payloads[i])
                    time.sleep(0.5)
                put_model_in_shadow(bench, diagnostics)
            payloads, stamps = payloads[warm:], stamps[warm:]
            with bench.spinning():
                if loader is not None:
                    loader.go.set()
                publish_cost = []
                start = time.perf_counter()
                for i in bench.paced(len(payloads), args.rate, spin=False):  # a driver's CPU is not ours
                    latencies.send(stamps[i])
                    t0 = time.perf_counter()
                    pub.publish(payloads[i])
                    publish_cost.append(time.perf_counter() - t0)
                late = time.perf_counter() - (start + (len(payloads) - 1) / args.rate)
                learned_elsewhere = loader.finish() if loader is not None else None
                time.sleep(1.5)  # the last answers
                diagnostics.clear()
                deadline = time.monotonic() + 5
                while not diagnostics and time.monotonic() < deadline:
                    time.sleep(0.1)
        finally:
            if loader is not None:
                loader.kill()
    node = {kv.key: kv.value for kv in diagnostics[-1].values} if diagnostics else {}
    return summary(executor, latencies, stamps[warm:], node, args.latencies) | {
        "publish_us": 1e6 * float(np.median(publish_cost)),
        "sender_late_ms": 1e3 * late,
        "learned_elsewhere": learned_elsewhere,  # (samples, blocks) of --learning-elsewhere
        # external_torque and contact messages received (--contact-subscribers)
        "contact_messages": len(contact_messages),
    }


def put_model_in_shadow(bench: NodeUnderTest, diagnostics: list[Any]) -> None:
    """Save the node's serving model and announce it on ``tuned_model``: with ``shadow_window_s``
    long, it runs in shadow; waits until the node's diagnostics say so."""
    from lifelong_learning.srv import SaveModel
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    client = bench.peer.create_client(SaveModel, "/inverse_dynamics/save_model")
    if not bench.spin_until(client.service_is_ready, 30):
        raise RuntimeError(f"no ~/save_model:\n{bench.log()}")
    future = client.call_async(SaveModel.Request(path="shadow-candidate.model"))
    if not bench.spin_until(future.done, 30) or not future.result().success:
        raise RuntimeError(f"~/save_model failed: {future.result()}\n{bench.log()}")
    latched = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    announce = bench.peer.create_publisher(String, "tuned_model", latched)
    announce.publish(String(data="shadow-candidate.model"))

    def in_shadow() -> bool:
        values = {kv.key: kv.value for kv in diagnostics[-1].values} if diagnostics else {}
        return values.get("model in shadow", "none").startswith("shadow")

    if not bench.spin_until(in_shadow, 30):
        raise RuntimeError(f"the model did not enter shadow:\n{bench.log()}")


def summary(
    executor: str, latencies: Latencies, stamps: list[int], node: dict[str, str], latencies_out: Path | None
) -> dict[str, Any]:
    """The measured messages (``stamps``): answered, latency percentiles (ms), the node's diagnostics."""
    answered = [st for st in stamps if st in latencies.latency]
    p50, p99, p999 = percentiles((latencies.latency[st] * 1e-6 for st in answered), (50, 99, 99.9))
    if latencies_out is not None:  # per measured message: [published, answer published or null] (ns)
        answer = {st: latencies.sent[st] + latencies.latency[st] for st in answered}
        pairs = [[latencies.sent[st], answer.get(st)] for st in stamps]
        latencies_out.write_text(json.dumps(pairs))
    return {
        "executor": executor,
        "sent": len(stamps),
        "answered": len(answered),
        "p50_ms": p50,
        "p99_ms": p99,
        "p999_ms": p999,
        "node": {k: v for k, v in node.items() if any(w in k for w in (
            "receive to publish", "answer", "block", "learned", "lost", "queue", "not learned",
            "real-time", "contact", "shadow", "forgetting", "slow load"))},
    }  # fmt: skip


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, dict[str, Any]]:
    """The options, and the extra node parameters of ``--param`` (typed as in a params file)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--executors", default="single,events,multi")
    parser.add_argument("--out", type=Path, default=None)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--no-learning", action="store_true", help="the node answers only (learning:=false)")
    where.add_argument(
        "--learning-elsewhere",
        action="store_true",
        help="the node answers only, and another process learns every sample as the node's learning "
        "thread would (an emulation of learning out of the answering process)",
    )
    parser.add_argument(
        "--pin", type=int, default=None, metavar="CPU",
        help="the node's answering path on this CPU alone; its learning and this process on the others",
    )  # fmt: skip
    parser.add_argument(
        "--beside", default="", metavar="NODES",
        help="comma-separated nodes to run beside inverse_dynamics in one process (`lifelong-learning up`)",
    )  # fmt: skip
    parser.add_argument(
        "--param", action="append", default=[], metavar="NAME:=VALUE",
        help="another inverse_dynamics parameter (repeatable), typed as in a params file: "
        "learn_max_hz:=250.0 (a double needs the point)",
    )  # fmt: skip
    parser.add_argument(
        "--latencies", type=Path, default=None, metavar="FILE",
        help="write every measured message's publish and answer times (ns, JSON) to FILE",
    )  # fmt: skip
    parser.add_argument(
        "--realtime-priority", type=int, default=0, help="the node realtime_priority (0: normal)"
    )
    parser.add_argument(
        "--accuracy", type=float, default=0.0, metavar="SECONDS",
        help="no ROS: the accuracy cost of learn_max_hz (0, 250, 100) on a new trajectory, learning "
        "SECONDS of 1 kHz motion per seed (seeds 0 1 2)",
    )  # fmt: skip
    parser.add_argument(
        "--contact-subscribers", action="store_true",
        help="subscribe to external_torque and contact too (as a safety node would): they are published",
    )  # fmt: skip
    parser.add_argument(
        "--shadow", action="store_true",
        help="a model in shadow beside the serving one for the whole measured run (shadow_window_s)",
    )  # fmt: skip
    parser.add_argument("--echo-node", action="store_true", help=argparse.SUPPRESS)  # runs echo_node()
    args = parser.parse_args(argv)
    if args.beside and (args.pin is not None or "echo" in args.executors):
        parser.error("--beside runs `up`: --pin and --executors echo need the node alone in its process")
    extra: dict[str, Any] = {}
    for item in args.param:
        name, sep, value = item.partition(":=")
        if not sep or not name:
            parser.error(f"--param {item!r}: expected NAME:=VALUE")
        extra[name] = yaml.safe_load(value)  # typed as in a params file
    if args.shadow:
        if args.no_learning or args.learning_elsewhere or "echo" in args.executors:
            parser.error("--shadow needs the node learning (a model in shadow learns what it learns)")
        extra.setdefault("shadow_window_s", 3600.0)
    return args, extra


def describe(r: dict[str, Any], args: argparse.Namespace) -> str:
    """The run's executor and options, as the table's first column names them."""
    return (
        r["executor"]
        + (f" (`up` with {args.beside})" if args.beside else "")
        + "".join(f", {item}" for item in args.param)
        + (" (learning off)" if args.no_learning else "")
        + (" (learning in another process)" if args.learning_elsewhere else "")
        + (f", SCHED_FIFO {args.realtime_priority}" if args.realtime_priority else "")
        + (", external_torque and contact subscribed" if args.contact_subscribers else "")
        + (", a model in shadow" if args.shadow else "")
    )


def table(rows: list[dict[str, Any]], floor: dict[str, float], args: argparse.Namespace, load: str) -> str:
    """The markdown section appended to ``--out``."""
    lines = [
        "| executor | sent | answered | % | publish → answer published p50 [ms] | p99 [ms] | "
        "node receive→publish p50 / p99 [ms] (last 200) | node answer p50 / p99 [ms] | "
        "learned | answered per callback | lost in queue |",
        "|---|---:|---:|---:|---:|---:|---|---|---:|---|---:|",
    ]
    for r in rows:
        v = r["node"]
        share = 100 * r["answered"] / r["sent"]
        rtp = f"{v.get('receive to publish p50 [ms]', '?')} / {v.get('receive to publish p99 [ms]', '?')}"
        answer = f"{v.get('answer p50 [ms]', '?')} / {v.get('answer p99 [ms]', '?')}"
        cells = [
            r["executor"], r["sent"], r["answered"], f"{share:.1f}", f"{r['p50_ms']:.2f}",
            f"{r['p99_ms']:.2f}", rtp, answer,
            v.get("samples learned", "?"), v.get("answered per callback", "?"),
            v.get("joint_states lost", "0"),
        ]  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return (
        f"\n### {args.rate:g} Hz for {args.seconds:g} s (load average before: {load})\n\n"
        "Floor in the same run: the model's `prepare` (the answer's compute) "
        f"{floor['predict_ms']:.3f} ms, "
        f"`stage` + `commit` of one sample {floor['learn_ms']:.3f} ms (median, this process).\n\n"
        + "\n".join(lines)
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(argv)
    if args.echo_node:
        return echo_node()
    if args.accuracy > 0:
        text = thinning_accuracy(args.accuracy, [0, 1, 2], [0.0, 250.0, 100.0])
        if args.out is not None:
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(text)
        return 0
    load = load_average()
    states = trajectory(args.seconds, args.rate)
    floor = floor_costs(states)
    print(f"floor: predict {floor['predict_ms']:.3f} ms, learn {floor['learn_ms']:.3f} ms (one sample)")
    rows = []
    for kind in [k.strip() for k in args.executors.split(",") if k.strip()]:
        r = run_one(kind, states, args, extra)
        r["executor"] = describe(r, args)
        rows.append(r)
        print(
            f"{kind}: answered {r['answered']}/{r['sent']} ({100 * r['answered'] / r['sent']:.1f} %), "
            f"publish→answer p50 {r['p50_ms']:.2f} ms p99 {r['p99_ms']:.2f} ms p99.9 {r['p999_ms']:.2f} ms, "
            f"sender late {r['sender_late_ms']:.1f} ms; node: {r['node']}"
            + (
                f"; learned elsewhere (samples, blocks): {r['learned_elsewhere']}"
                if r["learned_elsewhere"]
                else ""
            )
            + (f"; contact messages received: {r['contact_messages']}" if args.contact_subscribers else ""),
            flush=True,
        )
    if args.out is not None:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(table(rows, floor, args, load))
    return 0


if __name__ == "__main__":
    sys.exit(main())
