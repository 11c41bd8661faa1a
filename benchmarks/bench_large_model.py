"""A model file over the size limit arriving on ``model_data_topic``: memory and answers.

The installed ``inverse_dynamics`` node runs in its own process (the shipped config, the Panda
URDF, learning on, ``max_model_bytes`` at its default of 512 MiB). This process plays the robot as
``bench_control_rate.py`` does: pre-serialized MuJoCo Panda joint states at ``--rate`` Hz, the
predicted torques received on a raw subscription. A third process, in a session of its own, plays
the tuner: it publishes one ``lifelong_learning/ModelFile`` of ``--mib`` MiB (600: over the limit)
of the node's own kind, latched (reliable, transient local, depth 1), when told to.
``--sender-nice 19`` puts it (and its scheduling group: autogroups make a process's nice count
only within its session) behind everything else, as a tuner on another machine would be: it then
takes only the CPU this machine leaves idle. ``--elsewhere`` is the control: the node listens on
another topic and the message goes to a sink process, so that what remains is the machine's own
share of a 600 MiB transfer (the sender's and the receiver's copies on the same cores).

Phases, joint states flowing throughout: a warm-up (not counted), ``--quiet`` s with no model
(the quiet run), then the model is published and the arrival lasts until the node has counted it
(``rejected: model too large``, or ``models received`` / another rejection; diagnostics every
0.25 s) or the sink has it, and the sender's publish has returned; then ``--settle`` s after.

Printed and written (``--out`` appends a section):

- the node's resident memory (``VmRSS`` of its process, sampled every 5 ms): before the model
  (the median of the last second of the quiet run), the peak during the arrival, and after
  (the median of the last second of the settle time); ``VmHWM`` at the end (the process's peak,
  start included); ``RssAnon`` and ``RssShmem`` before and after (the sender's shared-memory
  segment, mapped by the node, is ``RssShmem``);
- the joint states' publish → answer published latency (the answer's DDS source timestamp minus the
  publish time here) p50/p99/max, and how many were answered, for those published in the quiet run,
  during the arrival, and in the arrival's last second (the node's take of the message and its
  refusal: the part of the arrival that is the node's own work);
- the node's outcome: its rejection counters and ``last model received``.

Usage: ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_large_model.py [--mib 600] [--rate 1000]
[--quiet 5] [--settle 3] [--sender-nice 19] [--elsewhere] [--param NAME:=VALUE ...]
[--trace FILE] [--out docs/benchmarks/large-model.md]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from harness import Latencies, NodeUnderTest, percentiles, provenance_line  # benchmarks/harness

REPO = Path(__file__).resolve().parents[1]
WARMUP_S = 1.0
RSS_PERIOD_S = 0.005
ARRIVAL_TIMEOUT_S = 120.0
#: the node's diagnostics values reported
OUTCOME_KEYS = (
    "rejected",
    "models received",
    "last model received",
    "ignored model files",
    "joint_states lost",
)
KIND = "semiparametric_inverse_dynamics"  # the node's own: checked, not ignored


# ---------------------------------------------------------------------------- the sender (a tuner)
def send_model(nbytes: int, nice: int) -> int:
    """``--send-model N`` (a process of its own): one ModelFile of ``N`` bytes, latched, published when
    a line ``go`` arrives on stdin; prints ``ready``, ``published <t>`` and ``acked <t>``
    (``time.time()``), and keeps the message latched until stdin closes. At ``nice`` (its own
    session's scheduling group too: with autogroups, a process's nice counts only within its group)."""
    import array
    import hashlib

    import rclpy
    from lifelong_learning.msg import ModelFile
    from rclpy.duration import Duration
    from rclpy.node import Node

    os.nice(nice)  # before the middleware's threads start: they inherit it
    try:
        Path("/proc/self/autogroup").write_text(str(nice))
    except OSError:
        pass
    rclpy.init()
    node = Node("large_model_sender")
    pub = node.create_publisher(ModelFile, "tuned_model_data", latched_qos())
    data = array.array("B", bytes(range(256))) * (nbytes // 256) + array.array("B", bytes(nbytes % 256))
    msg = ModelFile(kind=KIND, name="huge.model", sha256=hashlib.sha256(data).hexdigest())
    msg.data = data
    del data
    deadline = time.monotonic() + 60
    while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    print(f"published {time.time():.6f}", flush=True)
    pub.publish(msg)
    acked = pub.wait_for_all_acked(Duration(seconds=ARRIVAL_TIMEOUT_S))
    print(f"acked {time.time():.6f} {acked}", flush=True)
    sys.stdin.read()  # latched until the benchmark is done
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def sink() -> int:
    """``--sink`` (a process of its own, for ``--elsewhere``): takes the messages on the model topic
    raw and drops them, printing ``ready`` and ``received <t> <bytes>``; ends when stdin closes."""
    import rclpy
    from lifelong_learning.msg import ModelFile
    from rclpy.node import Node

    rclpy.init()
    node = Node("large_model_sink")

    def received(raw: bytes) -> None:
        print(f"received {time.time():.6f} {len(raw)}", flush=True)

    node.create_subscription(ModelFile, "tuned_model_data", received, latched_qos(), raw=True)
    print("ready", flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), rclpy.try_shutdown()), daemon=True).start()
    try:
        rclpy.spin(node)
    except Exception:
        pass
    return 0


def latched_qos() -> Any:
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )


class Helper:
    """A process of this script (the sender, the sink) in a session of its own; its output lines."""

    def __init__(self, *args: str) -> None:
        here = str(Path(__file__).resolve().parent)
        env = dict(os.environ)  # the private domain of NodeUnderTest
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def said(self, word: str) -> str | None:
        return next((line for line in self.lines if line.startswith(word)), None)

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


# ---------------------------------------------------------------------------- the node's memory
class MemorySampler:
    """``VmRSS`` of process ``pid`` every :data:`RSS_PERIOD_S` s, in a thread: ``(time.time(), kB)``."""

    def __init__(self, pid: int) -> None:
        self.path = Path(f"/proc/{pid}/status")
        self.samples: list[tuple[float, int]] = []
        self.snapshots: dict[str, dict[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss", daemon=True)

    def read(self, key: str = "VmRSS") -> int:
        for line in self.path.read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        raise KeyError(key)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.time(), self.read()))
            except (OSError, KeyError):
                return
            time.sleep(RSS_PERIOD_S)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(2)

    def snapshot(self, name: str) -> None:
        """Keep the memory fields of /proc/<pid>/status now (kB) under ``name``."""
        keys = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")
        self.snapshots[name] = {k: self.read(k) for k in keys}

    def between(self, start: float, end: float) -> list[int]:
        return [kb for t, kb in self.samples if start <= t <= end]


def mb(kb: float) -> float:
    return kb * 1024 / 1e6


# ---------------------------------------------------------------------------- the run
def node_under_test(args: argparse.Namespace, extra: dict[str, Any]) -> NodeUnderTest:
    from lifelong_learning.sim.panda import panda_urdf_path

    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_large_model_{os.getpid()}"
    params = {
        "urdf_path": str(panda_urdf_path()),
        "model_directory": str(folder / "models"),
        "diagnostics_period_s": 0.25,
        "checkpoint_interval_s": 0.0,
        **extra,
    }
    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    config = [REPO / "config" / "inverse_dynamics.yaml"]
    return NodeUnderTest(
        "inverse_dynamics",
        params_files=config,
        params=params,
        env=env,
        folder=folder,
        peer_name="large_model_bench",
    )


def arrived(values: dict[str, str]) -> bool:
    """Whether the node has dealt with the model: refused (any reason) or loaded."""
    return values.get("models received", "0") != "0" or any(
        k.startswith("rejected: model") and v != "0" for k, v in values.items()
    )


class Graph:
    """The node under test, this process's publisher of joint states and subscriptions (answers,
    diagnostics), the sender, and with ``--elsewhere`` the sink."""

    def __init__(self, bench: NodeUnderTest, args: argparse.Namespace) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        self.latencies = Latencies(clock=time.time_ns)
        self.node: dict[str, str] = {}
        self.pub = bench.peer.create_publisher(JointState, "joint_states", QoSProfile(depth=100))
        bench.peer.create_subscription(
            JointState, "predicted_torque", self._on_answer,
            QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE), raw=True,
        )  # fmt: skip
        bench.peer.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)
        self.sink = Helper("--sink") if args.elsewhere else None
        self.sender = Helper(
            "--send-model", str(int(args.mib * 1024**2)), "--sender-nice", str(args.sender_nice)
        )
        bench.wait_for(
            lambda: self.pub.get_subscription_count() > 0 and bool(self.node),
            90,
            "joint_states and diagnostics",
        )
        bench.wait_for(lambda: self.sender.said("ready") is not None, 120, "the sender ready")

    def _on_answer(self, raw: bytes, info: Any) -> None:
        sec, nsec = struct.unpack_from("<iI", raw, 4)  # CDR: 4-byte encapsulation, then header.stamp
        self.latencies.receive(sec * 1_000_000_000 + nsec, at=int(info["source_timestamp"]))

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.name.startswith("inverse_dynamics"):
                self.node.update({kv.key: kv.value for kv in status.values})

    def arrived(self) -> bool:
        """Whether the model has arrived where it was sent and the sender's publish has returned."""
        done = self.sink.said("received") is not None if self.sink is not None else arrived(self.node)
        return done and self.sender.said("acked") is not None

    def close(self) -> None:
        for helper in (self.sender, self.sink):
            if helper is not None:
                helper.close()


def paced_run(bench: NodeUnderTest, graph: Graph, args: argparse.Namespace) -> tuple[dict[str, float], Any]:
    """The joint states at ``args.rate`` through the phases (warm-up, quiet, arrival, settle); the
    phases' start times and the node's memory samples."""
    from bench_control_rate import serialized, trajectory

    total_s = WARMUP_S + args.quiet + ARRIVAL_TIMEOUT_S + args.settle
    payloads, stamps = serialized(trajectory(10.0, args.rate), int(total_s * args.rate), args.rate)
    times: dict[str, float] = {}
    with MemorySampler(bench.process.pid) as memory, bench.spinning():
        start = time.time()
        for i in bench.paced(len(payloads), args.rate, spin=False):
            now = time.time()
            if i == int(WARMUP_S * args.rate):
                times["quiet"] = now
            if "go" not in times and now >= start + WARMUP_S + args.quiet:
                times["go"] = now
                memory.snapshot("before")
                graph.sender.go()
            if "go" in times and "arrived" not in times and graph.arrived():
                times["arrived"] = now
            if "arrived" in times and now >= times["arrived"] + args.settle:
                break
            graph.latencies.send(stamps[i])
            graph.pub.publish(payloads[i])
        memory.snapshot("after")
        time.sleep(1.0)  # the last answers
        memory.snapshot("end")
    if "arrived" not in times:
        raise RuntimeError(f"the model was not dealt with in {ARRIVAL_TIMEOUT_S:g} s:\n{bench.log()}")
    return times, memory


def run(args: argparse.Namespace, extra: dict[str, Any]) -> dict[str, Any]:
    """One run: the figures (see the module's docstring)."""
    if args.elsewhere:  # the node listens elsewhere: the message goes to the sink
        extra = {**extra, "model_data_topic": "elsewhere_model_data"}
    bench = node_under_test(args, extra)
    with bench:
        graph = Graph(bench, args)
        try:
            times, memory = paced_run(bench, graph, args)
        finally:
            graph.close()
    if args.trace is not None:
        sent = sorted(graph.latencies.sent.items(), key=lambda kv: kv[1])
        trace = {
            "times": times,
            "sender": graph.sender.lines,
            "answers": [[t * 1e-9, graph.latencies.latency.get(k, -1) * 1e-6] for k, t in sent],
            "rss_kb": memory.samples,
        }
        args.trace.write_text(json.dumps(trace))
    return summary(graph, memory, times, int(args.mib * 1024**2))


def summary(graph: Graph, memory: MemorySampler, times: dict[str, float], nbytes: int) -> dict[str, Any]:
    """The figures of a run (memory in MB, latencies in ms)."""
    latencies = graph.latencies

    def window(start: float, end: float) -> dict[str, Any]:
        keys = [k for k, t in latencies.sent.items() if start * 1e9 <= t < end * 1e9]
        done = [latencies.latency[k] * 1e-6 for k in keys if k in latencies.latency]
        p50, p99 = percentiles(done, (50, 99))
        return {
            "sent": len(keys),
            "answered": len(done),
            "p50_ms": p50,
            "p99_ms": p99,
            "max_ms": max(done, default=0),
        }

    go, arrival_end = times["go"], times["arrived"]
    before = statistics.median(memory.between(go - 1.0, go))
    peak = max(memory.between(go, arrival_end + 1.0))
    end = memory.samples[-1][0]
    after = statistics.median(memory.between(end - 1.0, end))
    return {
        "mib": nbytes / 1024**2,
        "rss_before_mb": mb(before),
        "rss_peak_mb": mb(peak),
        "rss_after_mb": mb(after),
        "hwm_mb": mb(memory.snapshots["end"]["VmHWM"]),
        "status": memory.snapshots,
        "arrival_s": arrival_end - go,
        "quiet": window(times["quiet"], go),
        "arrival": window(go, arrival_end),
        "last_second": window(arrival_end - 1.0, arrival_end),
        "outcome": {k: v for k, v in graph.node.items() if k.startswith(OUTCOME_KEYS)},
        "sender": graph.sender.lines,
    }


def report(r: dict[str, Any], args: argparse.Namespace, extra: dict[str, Any]) -> str:
    """The markdown section ``--out`` appends."""
    q, a = r["quiet"], r["arrival"]
    params = "".join(f", `{k}:={v}`" for k, v in extra.items())
    where = " (control: the message to a sink process, the node not subscribed)" if args.elsewhere else ""
    command = shlex.join(["python", "benchmarks/bench_large_model.py", *sys.argv[1:]])
    before, after = r["status"]["before"], r["status"]["end"]
    note = f" ({args.note})" if args.note else ""
    lines = [
        f"\n### {r['mib']:g} MiB ModelFile{where}{note}, {args.rate:g} Hz joint states{params}\n",
        f"{provenance_line()}. Command: `{command}`\n",
        "| node VmRSS before [MB] | peak during arrival [MB] | after [MB] | VmHWM [MB] | "
        "RssAnon before → after [MB] | RssShmem before → after [MB] | arrival [s] |",
        "|---:|---:|---:|---:|---|---|---:|",
        f"| {r['rss_before_mb']:.0f} | {r['rss_peak_mb']:.0f} | {r['rss_after_mb']:.0f} | "
        f"{r['hwm_mb']:.0f} | {mb(before['RssAnon']):.0f} → {mb(after['RssAnon']):.0f} | "
        f"{mb(before['RssShmem']):.0f} → {mb(after['RssShmem']):.0f} | {r['arrival_s']:.2f} |",
        "",
        "| joint states | sent | answered | publish → answer p50 [ms] | p99 [ms] | max [ms] |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    last = ("the arrival's last second (the take, the refusal)", r["last_second"])
    for name, w in (("quiet run", q), ("during the arrival", a), last):
        cells = [
            name,
            w["sent"],
            w["answered"],
            f"{w['p50_ms']:.2f}",
            f"{w['p99_ms']:.2f}",
            f"{w['max_ms']:.1f}",
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    outcome = "; ".join(f"{k}: {v}" for k, v in r["outcome"].items())
    lines += ["", f"Node: {outcome}.", ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=float, default=600.0, help="the model file's size (MiB)")
    parser.add_argument("--rate", type=float, default=1000.0, help="joint states per second")
    parser.add_argument("--quiet", type=float, default=5.0, help="seconds measured before the model")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds measured after the arrival")
    parser.add_argument(
        "--sender-nice", type=int, default=0,
        help="the sender's nice value: 19 emulates a tuner on another machine (it gets only the CPU "
        "this one leaves idle); 0 (default) lets it compete with the node on this machine's cores",
    )  # fmt: skip
    parser.add_argument("--note", default="", help="words added to the heading of the --out section")
    parser.add_argument("--out", type=Path, default=None, help="append the report to this markdown file")
    parser.add_argument(
        "--param", action="append", default=[], metavar="NAME:=VALUE",
        help="another inverse_dynamics parameter (repeatable), typed as in a params file",
    )  # fmt: skip
    parser.add_argument(
        "--trace", type=Path, default=None, metavar="FILE",
        help="write the run's timeline (JSON): each joint state's publish time and latency, the memory",
    )  # fmt: skip
    parser.add_argument(
        "--elsewhere", action="store_true",
        help="a control: the node listens on another topic, and the message goes to a sink process on "
        "this machine (the machine's share of the arrival, without the node's)",
    )  # fmt: skip
    parser.add_argument("--send-model", type=int, default=0, help=argparse.SUPPRESS)  # runs send_model()
    parser.add_argument("--sink", action="store_true", help=argparse.SUPPRESS)  # runs sink()
    args = parser.parse_args(argv)
    extra: dict[str, Any] = {}
    for item in args.param:
        name, sep, value = item.partition(":=")
        if not sep or not name:
            parser.error(f"--param {item!r}: expected NAME:=VALUE")
        extra[name] = yaml.safe_load(value)
    return args, extra


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(argv)
    if args.send_model:
        return send_model(args.send_model, args.sender_nice)
    if args.sink:
        return sink()
    r = run(args, extra)
    q, a = r["quiet"], r["arrival"]
    print(
        f"{r['mib']:g} MiB: node VmRSS before {r['rss_before_mb']:.0f} MB, peak {r['rss_peak_mb']:.0f} MB, "
        f"after {r['rss_after_mb']:.0f} MB (VmHWM {r['hwm_mb']:.0f} MB); arrival {r['arrival_s']:.2f} s\n"
        f"quiet: answered {q['answered']}/{q['sent']}, p50 {q['p50_ms']:.2f} ms p99 {q['p99_ms']:.2f} ms "
        f"max {q['max_ms']:.1f} ms\n"
        f"arrival: answered {a['answered']}/{a['sent']}, p50 {a['p50_ms']:.2f} ms p99 {a['p99_ms']:.2f} ms "
        f"max {a['max_ms']:.1f} ms\narrival's last second: p99 {r['last_second']['p99_ms']:.2f} ms "
        f"max {r['last_second']['max_ms']:.1f} ms\nnode: {r['outcome']}\nsender: {r['sender']}",
        flush=True,
    )
    if args.out is not None:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(report(r, args, extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
