"""The demo's report: plots (matplotlib, Agg) and a markdown page with the numbers behind them.

No ROS imports: it works on the plain arrays the demo collected, so it can be re-made from
``results.json`` alone (``python -m lifelong_learning.demo.report RUN_DIR``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_recognition(results: dict[str, Any], out: Path) -> Path | None:
    rounds = results.get("recognition", {}).get("rounds", [])
    if not rounds:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    x = [r["n_taught"] for r in rounds]
    ax.plot(x, [100 * r["accuracy"] for r in rounds], "o-", label="all taught objects")
    rare = [(r["n_taught"], 100 * r["rare_accuracy"]) for r in rounds if r.get("rare_accuracy") is not None]
    if rare:
        ax.plot(*zip(*rare, strict=True), "s--", label="the rarely shown object")
    ax.set_xlabel("objects taught so far")
    ax.set_ylabel("accuracy on unlabelled views [%]")
    ax.set_ylim(-2, 102)
    ax.set_xticks(x)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left")
    ax.set_title("Object recognition while a teacher names objects")
    fig.tight_layout()
    path = out / "recognition_accuracy.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_dynamics(results: dict[str, Any], out: Path) -> Path | None:
    dyn = results.get("dynamics", {})
    windows = dyn.get("windows", [])
    if not windows:
        return None
    plt = _plt()
    names = dyn["joint_names"]
    t = np.array([w["t_end"] for w in windows])
    n = len(names)
    cols = 4
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(12, 2.6 * rows), sharex=True, squeeze=False)
    for j in range(rows * cols):
        ax = axes[j // cols][j % cols]
        if j >= n:
            ax.axis("off")
            continue
        for key, style, label in (("rnea", "k--", "RNEA (URDF as is)"), ("online", "C0-", "online SP node")):
            vals = [w[key][j] for w in windows]
            ax.semilogy(t, vals, style, label=label)
        if dyn.get("payload_at") is not None:
            ax.axvline(dyn["payload_at"], color="C3", alpha=0.5, lw=1)
        ax.set_title(names[j], fontsize=9)
        ax.grid(alpha=0.3, which="both")
        if j % cols == 0:
            ax.set_ylabel("nMSE")
        if j // cols == rows - 1:
            ax.set_xlabel("time [s]")
    axes[0][0].legend(fontsize=7, loc="upper right")
    fig.suptitle("Inverse dynamics: torque nMSE per joint over time (red line: 1 kg payload grasped)")
    fig.tight_layout()
    path = out / "dynamics_nmse.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_latency(results: dict[str, Any], out: Path) -> Path | None:
    series = {k: v for k, v in results.get("latency_ms", {}).items() if v}
    if not series:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.boxplot(list(series.values()), whis=(1, 99), showfliers=False)
    ax.set_xticks(range(1, len(series) + 1), list(series))
    ax.set_ylabel("latency [ms] (whiskers: p1-p99)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both")
    ax.set_title("End-to-end latency over DDS, input published → answer received")
    fig.tight_layout()
    path = out / "latency.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _pct(v: list[float], q: float) -> float:
    return float(np.percentile(v, q)) if v else float("nan")


def write_report(results: dict[str, Any], out: Path) -> Path:
    """Write ``results.json``, the plots and ``report.md`` into ``out``; returns the report path."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=float))
    plots = [plot_recognition(results, out), plot_dynamics(results, out), plot_latency(results, out)]
    lines = [
        "# lifelong_learning demo report",
        "",
        f"Run: `{results.get('command', 'lifelong-learning demo')}` on {results.get('machine', '?')}, "
        f"{results.get('started', '')}, {results.get('wall_s', float('nan')):.0f} s wall time.",
        "",
        "Everything below crossed a real DDS graph: each learner ran as its own ROS 2 process; the "
        "simulated robot (MuJoCo Panda) and the simulated camera (pybullet renderings) published "
        "like hardware drivers would. Numbers are from this run only.",
        "",
    ]
    rec = results.get("recognition")
    if rec:
        lines += ["## Object recognition", ""]
        lines += [
            f"{rec['n_objects']} objects shown to the camera one after the other; the teacher names each "
            f"while it is shown ({rec['labeled_per_object']} labelled frames; the rare object "
            f"`{rec.get('rare_object')}` only {rec['rare_labeled']}); after each, unlabelled views of every "
            "object taught so far are shown and the predictions scored.",
            "",
            "| objects taught | accuracy [%] | rare object accuracy [%] | test frames | answered |",
            "|---:|---:|---:|---:|---:|",
        ]
        for r in rec["rounds"]:
            rare = "" if r.get("rare_accuracy") is None else f"{100 * r['rare_accuracy']:.1f}"
            acc = 100 * r["accuracy"]
            lines.append(f"| {r['n_taught']} | {acc:.1f} | {rare} | {r['n_test']} | {r['n_answered']} |")
        lines += ["", "![recognition](recognition_accuracy.png)" if plots[0] else "", ""]
        if rec.get("info"):
            lines += [f"Classifier state at the end: {rec['info']}", ""]
    dyn = results.get("dynamics")
    if dyn:
        lines += ["## Inverse dynamics", ""]
        lines += [
            f"The simulated Panda tracked random joint trajectories under computed-torque control and "
            f"published joint_states at {dyn['rate_hz']:.0f} Hz for {dyn['duration_s']:.0f} s"
            + (
                f"; a 1 kg payload was grasped at t = {dyn['payload_at']:.0f} s"
                if dyn.get("payload_at")
                else ""
            )
            + ". The inverse_dynamics node learned online from the measured efforts and answered each "
            "message it received with predicted torques (joint_states are best-effort: some are dropped "
            "under load). nMSE = MSE over a window / variance of the measured torque over the whole run, "
            "per joint, in the last window before the payload and in the last window of the run:",
            "",
            "| joint | RNEA, before payload | online SP, before payload | RNEA, end | online SP, end |",
            "|---|---:|---:|---:|---:|",
        ]
        for j, name in enumerate(dyn["joint_names"]):
            lines.append(
                f"| {name} | {dyn['before_payload_rnea'][j]:.3f} | {dyn['before_payload_online'][j]:.3f} | "
                f"{dyn['final_rnea'][j]:.3f} | {dyn['final_online'][j]:.3f} |"
            )
        lines += [
            "",
            f"Messages published {dyn['published']}, answered {dyn['answered']}.",
            "",
            "![dynamics](dynamics_nmse.png)" if plots[1] else "",
            "",
        ]
    lat = results.get("latency_ms", {})
    if lat:
        lines += ["## Latency", "", "| path | p50 [ms] | p99 [ms] | n |", "|---|---:|---:|---:|"]
        for k, v in lat.items():
            lines.append(f"| {k} | {_pct(v, 50):.2f} | {_pct(v, 99):.2f} | {len(v)} |")
        lines += ["", "![latency](latency.png)" if plots[2] else "", ""]
    diag = results.get("diagnostics", {})
    if diag:
        lines += ["## Node diagnostics at the end", ""]
        for node, values in diag.items():
            lines.append(f"- **{node}**: " + ", ".join(f"{k} = {v}" for k, v in values.items()))
        lines.append("")
    if results.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in results["notes"]] + [""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


if __name__ == "__main__":
    run = Path(sys.argv[1])
    print(write_report(json.loads((run / "results.json").read_text()), run))
