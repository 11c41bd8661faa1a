"""The nystrom_tuner's limits: how fast hostile goals are answered, whether a burst is
answered in full, and what one huge message in a bag costs the tuner's memory.

A ``nystrom_tuner`` process (``max_queued_goals`` 4, ``max_bags`` 1000) is sent, from a peer:

- goals naming special files (a FIFO and ``/dev/zero`` as URDF, three bags whose ``metadata.yaml``
  is a FIFO at once, a FIFO storage file, a FIFO model to continue from, ``/dev/zero`` as serving
  model): the time until each is answered;
- a goal naming ``--copies`` copies of one bag: the time until it is answered;
- a burst of ``--burst`` goals sent at once: how many are answered, how many accepted, the time
  until the last answer (the accepted ones are cancelled);
- a classification goal on a bag holding one message of ``--message-mb`` MB among 200 small ones:
  the tuner's resident memory before the goal (after a warm-up goal) and its peak after, with
  ``max_message_bytes`` at its default (the message is skipped) and at 1e9 (it is read, as before
  the bound), each in a tuner of its own.

Needs the built environment (``source scripts/env.sh``):

    python benchmarks/bench_tuner_limits.py [--burst 100] [--copies 10000] [--message-mb 256]

Printed and written to ``docs/benchmarks/tuner-limits.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from harness import NodeUnderTest, describe_machine  # benchmarks/harness (sys.path[0] is benchmarks/)

from lifelong_learning.io.bags import LABELED_FEATURES_TYPE, typestore, write_labeled_features

REPO = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(0)
X = np.vstack([RNG.normal(0, 1, (20, 4)), RNG.normal(3, 1, (20, 4))])
LABELS = ["a"] * 20 + ["b"] * 20


def memory_mb(pid: int) -> tuple[float, float]:
    """(resident, peak resident) memory of process ``pid`` in MB (/proc/<pid>/status)."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


class Tuner:
    """A tuner process under test and an action client of it (keeps a burst: depth 1000)."""

    def __init__(self, bench: NodeUnderTest) -> None:
        from lifelong_learning.action import TuneModel
        from rclpy.action import ActionClient
        from rclpy.qos import QoSProfile

        self.bench = bench
        deep = QoSProfile(depth=1000)
        self.client = ActionClient(
            bench.peer, TuneModel, "/nystrom_tuner/tune", goal_service_qos_profile=deep,
            cancel_service_qos_profile=deep,
        )  # fmt: skip
        bench.wait_for(self.client.server_is_ready, 60, "the ~/tune action server")
        self.goal_type = TuneModel.Goal

    def goal(self, bags: list[str], **fields: Any) -> Any:
        return self.goal_type(**{"task": "classification", "centers": 8, "epochs": 3, "bags": bags, **fields})

    def answers(self, goals: list[Any], timeout: float = 120.0) -> tuple[list[Any], list[float]]:
        """Send ``goals`` at once: the answers (None: none in time) and the seconds until each."""
        t0 = time.perf_counter()
        sent = [self.client.send_goal_async(g) for g in goals]
        at: list[float | None] = [None] * len(sent)

        def all_answered() -> bool:
            for i, f in enumerate(sent):
                if at[i] is None and f.done():
                    at[i] = time.perf_counter() - t0
            return all(a is not None for a in at)

        self.bench.spin_until(all_answered, timeout, period=0.001)
        return [f.result() if f.done() else None for f in sent], [
            a if a is not None else float("nan") for a in at
        ]

    def finish(self, handles: list[Any], cancel: bool = False) -> None:
        """Wait for the results of the accepted ``handles`` (cancelled first when ``cancel``)."""
        accepted = [h for h in handles if h is not None and h.accepted]
        if cancel:
            for h in accepted:
                h.cancel_goal_async()
        results = [h.get_result_async() for h in accepted]
        self.bench.wait_for(lambda: all(r.done() for r in results), 300, "the goals' results")


def special_files(tuner: Tuner, root: Path) -> list[tuple[str, float, bool]]:
    """(goal, seconds until answered, accepted) for goals naming special files, sent at once."""
    os.mkfifo(root / "robot.urdf")
    bags = []
    for i, special in enumerate(["metadata.yaml"] * 3 + ["extra.mcap"]):
        write_labeled_features(root / f"special{i}", X, LABELS)
        (root / f"special{i}" / special).unlink(missing_ok=True)
        os.mkfifo(root / f"special{i}" / special)
        bags.append(str(root / f"special{i}"))
    good = [str(root / "good")]
    named = {
        "FIFO as urdf_path": tuner.goal(good, task="inverse-dynamics", urdf_path=str(root / "robot.urdf")),
        "/dev/zero as urdf_path": tuner.goal(good, task="inverse-dynamics", urdf_path="/dev/zero"),
        **{f"bag with a FIFO metadata.yaml ({i + 1} of 3)": tuner.goal([bags[i]]) for i in range(3)},
        "bag with a FIFO storage file": tuner.goal([bags[3]]),
        "FIFO as init_model": tuner.goal(good, init_model=str(root / "robot.urdf")),
        "/dev/zero as serving_model": tuner.goal(good, serving_model="/dev/zero"),
    }
    handles, seconds = tuner.answers(list(named.values()))
    return [(k, s, bool(h and h.accepted)) for k, s, h in zip(named, seconds, handles, strict=True)]


def message_bag(path: Path, megabytes: int) -> None:
    """200 LabeledFeatures of 64 values and, in the middle, one of ``megabytes`` MB."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = typestore()
    msg, header, stamp = (
        store.types[t] for t in (LABELED_FEATURES_TYPE, "std_msgs/msg/Header", "builtin_interfaces/msg/Time")
    )
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/labeled_features", LABELED_FEATURES_TYPE, typestore=store)
        for i in range(200):
            data = (
                np.ones((megabytes << 20) // 4, np.float32)
                if i == 100
                else RNG.normal(size=64).astype(np.float32)
            )
            m = msg(header=header(stamp=stamp(sec=i, nanosec=0), frame_id=""), data=data, label=str(i % 3))
            writer.write(conn, 10**18 + i, store.serialize_cdr(m, LABELED_FEATURES_TYPE))


def message_memory(root: Path, megabytes: int, limit: int | None) -> dict[str, Any]:
    """The tuner's memory around a goal on the bag with one huge message (``limit``: max_message_bytes)."""
    params = {"output_dir": str(root / "models"), "device": "cpu"}
    if limit is not None:
        params["max_message_bytes"] = limit
    with NodeUnderTest(
        "nystrom_tuner", params_files=[REPO / "config" / "nystrom_tuner.yaml"], params=params
    ) as bench:
        tuner = Tuner(bench)
        handles, _ = tuner.answers([tuner.goal([str(root / "good")])])  # warm-up: torch, the type store
        tuner.finish(handles)
        pid = bench.process.proc.pid
        before, _ = memory_mb(pid)
        handles, _ = tuner.answers([tuner.goal([str(root / "huge")])])
        tuner.finish(handles)
        after, peak = memory_mb(pid)
    return {"before": before, "peak": peak, "after": after}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--burst", type=int, default=100)
    ap.add_argument("--copies", type=int, default=10_000)
    ap.add_argument("--message-mb", type=int, default=256)
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks" / "tuner-limits.md")
    args = ap.parse_args()
    lines = ["# nystrom_tuner limits", "", describe_machine(), ""]
    with tempfile.TemporaryDirectory(prefix="bench_tuner_limits_") as tmp:
        root = Path(tmp)
        write_labeled_features(root / "good", X, LABELS)
        write_labeled_features(root / "long", RNG.normal(size=(3000, 8)), [str(i % 5) for i in range(3000)])
        params = {"output_dir": str(root / "models"), "device": "cpu", "patience": 1_000_000}
        with NodeUnderTest(
            "nystrom_tuner", params_files=[REPO / "config" / "nystrom_tuner.yaml"], params=params
        ) as bench:
            tuner = Tuner(bench)
            rows = special_files(tuner, root)
            lines += [
                "## Goals naming special files (sent at once)",
                "",
                "| goal | answered after | accepted |",
                "|---|---|---|",
            ]
            lines += [f"| {k} | {s * 1e3:.1f} ms | {a} |" for k, s, a in rows]
            (handle,), (seconds,) = tuner.answers([tuner.goal([str(root / "good")] * args.copies)])
            accepted = bool(handle and handle.accepted)
            copies = f"A goal naming {args.copies} copies of one bag: answered after {seconds * 1e3:.1f} ms"
            lines += ["", f"{copies}, accepted: {accepted}.", ""]
            long_goal = tuner.goal([str(root / "long")], centers=300, epochs=1000)
            handles, seconds = tuner.answers([long_goal] * args.burst)
            answered = [h for h in handles if h is not None]
            lines += [
                f"A burst of {args.burst} goals: {len(answered)} answered, "
                f"{sum(h.accepted for h in answered)} accepted (max_queued_goals 4: one runs, 4 wait), "
                f"the last answer after {np.nanmax(seconds) * 1e3:.0f} ms.",
                "",
            ]
            tuner.finish(handles, cancel=True)
        message_bag(root / "huge", args.message_mb)
        lines += [f"## One message of {args.message_mb} MB among 200 small ones (MCAP)", ""]
        lines += ["| max_message_bytes | tuner resident before | peak | after |", "|---|---|---|---|"]
        for limit in (None, 1_000_000_000):
            m = message_memory(root, args.message_mb, limit)
            label = "1048576 (default): skipped" if limit is None else f"{limit}: read"
            lines.append(f"| {label} | {m['before']:.0f} MB | {m['peak']:.0f} MB | {m['after']:.0f} MB |")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
