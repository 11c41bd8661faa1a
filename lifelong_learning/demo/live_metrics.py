"""The live curves of the demo's report: inverse_dynamics' ``~/learning_metrics`` read from the bag.

``bag_recorder`` records ``inverse_dynamics/learning_metrics`` by default; this module reads the
messages back with rosbags (no rclpy), keeps the windows whose means are defined, and plots the
prequential error of the node against the URDF's rigid-body model alone (docs/metrics.md). The
series goes to ``results["dynamics"]["live_metrics"]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rosbags.highlevel import AnyReader

from lifelong_learning.io.bags import typestore

#: the topic as the demo's bag_recorder (namespace /) records it
TOPIC = "/inverse_dynamics/learning_metrics"
FIELDS = ("mean_prequential_error", "mean_baseline_error", "samples_learned", "forgetting", "model_version")


def read_live_metrics(bag: Path, topic: str = TOPIC) -> dict[str, list[float]]:
    """``t`` (seconds since the first message) and :data:`FIELDS` of every message of ``topic`` whose
    two means are defined (not -1); empty lists when the bag or the topic is missing."""
    series: dict[str, list[float]] = {"t": [], **{name: [] for name in FIELDS}}
    if not (bag / "metadata.yaml").exists():
        return series
    with AnyReader([bag], default_typestore=typestore()) as reader:
        connections = [c for c in reader.connections if c.topic == topic]
        if not connections:
            return series
        first = None
        for conn, _, raw in reader.messages(connections=connections):
            msg = reader.deserialize(raw, conn.msgtype)
            stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
            first = stamp if first is None else first
            if msg.mean_prequential_error < 0 or msg.mean_baseline_error < 0:
                continue
            series["t"].append(stamp - first)
            for name in FIELDS:
                series[name].append(float(getattr(msg, name)))
    return series


def plot_live_metrics(results: dict[str, Any], out: Path, plt: Any) -> Path | None:
    """``dynamics_live_metrics.png``: the two means over the run (None without data)."""
    live = results.get("dynamics", {}).get("live_metrics") or {}
    if not live.get("t"):
        return None
    fig, ax = plt.subplots(figsize=(9, 3.2))
    ax.semilogy(live["t"], live["mean_prequential_error"], "C0-", label="inverse_dynamics (prequential)")
    ax.semilogy(live["t"], live["mean_baseline_error"], "k-", label="URDF alone, same samples")
    ax.set_xlabel("wall time since the first message [s]")
    ax.set_ylabel("mean nMSE over the window")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title("Live prequential error, from ~/learning_metrics in the bag", fontsize=10)
    fig.tight_layout()
    path = out / "dynamics_live_metrics.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def live_metrics_section(results: dict[str, Any], plot: Path | None) -> list[str]:
    """The report's paragraph on the live curves."""
    live = results.get("dynamics", {}).get("live_metrics") or {}
    if not live.get("t"):
        return []
    pre, base = live["mean_prequential_error"], live["mean_baseline_error"]
    return [
        "### Live prequential error",
        "",
        f"What the node published on `~/learning_metrics` ({len(pre)} messages with a defined error in "
        "the bag): the mean over the joints of the nMSE of the torques it answered, each scored before "
        "the sample was learned, over its last `metrics_window_s`, and of what the URDF alone would have "
        f"answered. First: {pre[0]:.3g} against {base[0]:.3g}; last: {pre[-1]:.3g} against "
        f"{base[-1]:.3g} (forgetting {live['forgetting'][-1]:g}).",
        "",
        "![live metrics](dynamics_live_metrics.png)" if plot else "",
        "",
    ]
