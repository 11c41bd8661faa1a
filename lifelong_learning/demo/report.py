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

from lifelong_learning.demo.contact import contact_section, plot_contact
from lifelong_learning.demo.lifelong_loop import cycle_section, plot_cycle
from lifelong_learning.demo.live_metrics import live_metrics_section, plot_live_metrics


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path, dpi: int = 110) -> Path:
    """Lay out, write and close ``fig``; returns ``path``."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    _plt().close(fig)
    return path


def plot_recognition(results: dict[str, Any], out: Path) -> Path | None:
    rounds = results.get("recognition", {}).get("rounds", [])
    if not rounds:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    x = [r["n_taught"] for r in rounds]
    ax.plot(x, [100 * r["accuracy"] for r in rounds], "o-", label="all taught objects, per frame")
    showing = [
        (r["n_taught"], 100 * r["showing_accuracy"]) for r in rounds if r.get("showing_accuracy") is not None
    ]
    if showing:
        ax.plot(*zip(*showing, strict=True), "^-", label="all taught objects, per showing")
    rare = [(r["n_taught"], 100 * r["rare_accuracy"]) for r in rounds if r.get("rare_accuracy") is not None]
    if rare:
        ax.plot(*zip(*rare, strict=True), "s--", label="the rarely shown object")
    after = results["recognition"].get("after_retraining")
    if after:
        n = results["recognition"]["n_objects"]
        ax.plot([n + 0.25], [100 * after["accuracy"]], "*", color="C2", ms=12, label="all, after retraining")
        if after.get("rare_accuracy") is not None:
            ax.plot(
                [n + 0.25],
                [100 * after["rare_accuracy"]],
                "x",
                color="C2",
                ms=9,
                label="rare, after retraining",
            )
    ax.set_xlabel("objects taught so far")
    ax.set_ylabel("accuracy on unlabelled views [%]")
    ax.set_ylim(-2, 102)
    ax.set_xticks(x)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left")
    ax.set_title("Object recognition while a teacher names objects")
    return _save(fig, out / "recognition_accuracy.png", dpi=110)


def _timeline(dyn: dict[str, Any]) -> dict[str, tuple[list[float], list[list[float]]]]:
    """Windows of every series on one time axis: online phase, then the evaluation trajectory
    answered by the online model, then the same trajectory answered by the retrained model."""
    series: dict[str, tuple[list[float], list[list[float]]]] = {"rnea": ([], []), "online": ([], [])}
    for w in dyn["windows"]:
        for key in ("rnea", "online"):
            series[key][0].append(w["t_end"])
            series[key][1].append(w[key])
    ev = dyn.get("evaluation")
    if ev:
        series["retrained"] = ([], [])
        t_online, t_retrained = dyn["duration_s"], dyn["duration_s"] + ev["duration_s"]
        for w in ev["windows"]:
            for key, offset in (("rnea", t_online), ("online", t_online)):
                series[key][0].append(offset + w["t_end"])
                series[key][1].append(w[key])
        for w in ev["windows"]:
            for key in ("rnea", "retrained"):
                series[key][0].append(t_retrained + w["t_end"])
                series[key][1].append(w[key])
    return series


def plot_dynamics(results: dict[str, Any], out: Path) -> Path | None:
    dyn = results.get("dynamics", {})
    if not dyn.get("windows"):
        return None
    plt = _plt()
    names = dyn["joint_names"]
    series = _timeline(dyn)
    ev = dyn.get("evaluation")
    n = len(names)
    cols = 4
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(12, 2.6 * rows), sharex=True, squeeze=False)
    styles = {
        "rnea": ("k.", "RNEA (URDF as is)"),
        "online": ("C0.", "online SP node"),
        "retrained": ("C2o", "after retraining (hot-reloaded)"),
    }
    for j in range(rows * cols):
        ax = axes[j // cols][j % cols]
        if j >= n:
            ax.axis("off")
            continue
        for key, (t, vals) in series.items():
            style, label = styles[key]
            ax.semilogy(t, [v[j] for v in vals], style, label=label, ms=3)
        if dyn.get("payload_at") is not None:
            ax.axvline(dyn["payload_at"], color="C3", alpha=0.5, lw=1)
        if ev:
            ax.axvline(dyn["duration_s"], color="0.5", ls=":", lw=1)
            ax.axvline(dyn["duration_s"] + ev["duration_s"], color="C2", ls=":", lw=1)
        ax.set_title(names[j], fontsize=9)
        ax.grid(alpha=0.3, which="both")
        if j % cols == 0:
            ax.set_ylabel("nMSE")
        if j // cols == rows - 1:
            ax.set_xlabel("robot time [s]")
    handles, labels = axes[0][0].get_legend_handles_labels()
    last = axes[rows - 1][cols - 1]
    if n < rows * cols:
        last.legend(handles, labels, loc="center", fontsize=8)
    else:
        axes[0][0].legend(fontsize=7, loc="upper right")
    title = "Torque nMSE per joint over time (red: 1 kg payload grasped"
    if ev:
        title += "; grey: learning frozen, evaluation trajectory; green: same trajectory after retraining"
    fig.suptitle(title + ")", fontsize=10)
    return _save(fig, out / "dynamics_nmse.png", dpi=100)


def plot_evaluation(results: dict[str, Any], out: Path) -> Path | None:
    dyn = results.get("dynamics", {})
    ev = dyn.get("evaluation")
    if not ev:
        return None
    plt = _plt()
    names = dyn["joint_names"]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for k, (key, label) in enumerate(
        (("rnea", "RNEA (URDF)"), ("online", "online SP (frozen)"), ("retrained", "after retraining"))
    ):
        ax.bar(x + (k - 1) * 0.27, ev[key], width=0.27, label=label, color=("0.4", "C0", "C2")[k])
    ax.set_xticks(x, [n.replace("panda_", "") for n in names], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("torque nMSE")
    ax.grid(alpha=0.3, which="both", axis="y")
    ax.legend(fontsize=8)
    ax.set_title(f"Evaluation trajectory ({ev['duration_s']:.0f} s, 1 kg payload, learning frozen)")
    return _save(fig, out / "dynamics_evaluation.png", dpi=110)


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
    return _save(fig, out / "latency.png", dpi=110)


def _pct(v: list[float], q: float) -> float:
    return float(np.percentile(v, q)) if v else float("nan")


def _retraining_section(results: dict[str, Any]) -> list[str]:
    bag, jobs = results.get("bag"), results.get("retraining")
    if not bag and not jobs:
        return []
    lines = ["## Bag and retraining", ""]
    if bag:
        if bag.get("error"):
            lines += [f"Bag `{bag.get('path')}`: {bag['error']}", ""]
        else:
            lines += [
                f"bag_recorder wrote `{bag['path']}` ({len(bag['files'])} MCAP file(s), "
                f"{bag['bytes'] / 1e6:.1f} MB); read back with rosbags' AnyReader after the run:",
                "",
                "| topic | type | messages | decoded |",
                "|---|---|---:|---:|",
            ]
            for topic, t in sorted(bag["topics"].items()):
                lines.append(f"| {topic} | {t['type']} | {t['messages']} | {t['decoded']} |")
            lines.append("")
    for job in jobs or []:
        reload, gate = job.get("reload", {}), job["promotion"]
        lines += [
            f"- **{job['task']}**: tuned in {job['seconds']:.0f} s → `{Path(job['model']).name}`; "
            + "; ".join(
                f"{name}: {r['metric']} {r['value']:.4g} (λ {r['lam']:.2g}, {r['epochs']} epochs"
                + (
                    f", forgetting {r['forgetting']} chosen on the bag's most recent part"
                    if "forgetting" in r
                    else ""
                )
                + ")"
                for name, r in job["objectives"].items()
            )
            + (
                f"; `{reload['node']}` hot-reloaded it {reload['seconds_after_announcement']:.1f} s after "
                f"the job finished (model version {' → '.join(map(str, reload['model_version']))})"
                if reload
                else (
                    "; it runs in shadow on `object_recognition`, judged on what is taught next"
                    if gate["promoted"] and job["task"] == "classification"
                    else ""
                )
            ),
            f"  - promotion gate ({gate['n_samples']} samples of {gate['data']}): candidate "
            f"{gate['metric']} {gate['candidate_error']:.4g}, {gate['serving']} "
            + ("(none)" if gate["serving_error"] is None else f"{gate['serving_error']:.4g}")
            + f" → **{'promoted' if gate['promoted'] else 'not promoted: the online model kept serving'}**"
            + (" (forced)" if gate["forced"] else ""),
        ]
    lines.append("")
    return lines + _shadow_lines(results.get("dynamics") or {})


def _shadow_lines(dyn: dict[str, Any]) -> list[str]:
    """The report's lines on the shadow window (none when the demo ran without one)."""
    shadow = dyn.get("shadow")
    if not shadow:
        return []

    def number(v: Any) -> str:
        return "undefined" if v is None else f"{v:.4g}"

    return [
        f"**Shadow window on the robot** ({shadow['window_s']:g} s, learning on; the rule: the "
        "package's docs/serving.md): the retrained "
        f"model's prequential nMSE {number(shadow['candidate_error'])} against the online model's "
        f"{number(shadow['serving_error'])} over the same {shadow['samples']} samples → "
        + (
            "**promoted** (swapped in)"
            if shadow["promoted"]
            else f"**{shadow['outcome']}**: the online model kept serving"
        )
        + ".",
        "",
    ]


def _header(results: dict[str, Any]) -> list[str]:
    """The title, the command, machine and time of the run, and what ran over DDS."""
    return [
        "# lifelong_learning demo report",
        "",
        f"Run: `{results.get('command', 'lifelong-learning demo')}` on {results.get('machine', '?')}, "
        f"{results.get('started', '')}, {results.get('wall_s', float('nan')):.0f} s wall time.",
        "",
        "Everything below crossed a real DDS graph: each learner ran as its own ROS 2 process; the "
        "simulated robot (MuJoCo Panda) and the simulated camera (pybullet renderings) published "
        "like hardware drivers would; bag_recorder recorded the learners' topics to a bag, from which "
        "nystrom_tuner retrained both learners after the online phase, and the nodes hot-reloaded the "
        "models it announced. Numbers are from this run only.",
        "",
    ]


def _percent(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f}"


def _recognition_rows(rec: dict[str, Any]) -> list[str]:
    """The table of accuracy per frame and per showing after each round (and after retraining)."""
    lines = [
        "| objects taught | per frame [%] | per showing [%] | rare object, per frame [%] | "
        "rare object, per showing [%] | test frames | answered |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rounds = [(str(r["n_taught"]), r) for r in rec["rounds"]]
    if rec.get("after_retraining"):
        rounds.append((f"{rec['n_objects']}, after retraining from the bag", rec["after_retraining"]))
    for name, r in rounds:
        cells = [_percent(r.get(k)) for k in ("accuracy", "showing_accuracy", "rare_accuracy")]
        cells.append(_percent(r.get("rare_showing_accuracy")))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['n_test']} | {r['n_answered']} |")
    return lines


def _recognition_section(results: dict[str, Any], plot: Path | None) -> list[str]:
    """Accuracy per frame and per showing after each object taught (and after retraining), objects
    never taught, objects taught by answering the robot's questions, with the plot."""
    rec = results.get("recognition")
    if not rec:
        return []
    lines = ["## Object recognition", ""]
    lines += [
        f"{rec['n_objects']} objects shown to a still camera one after the other, each by a person in "
        f"its teaching room; the teacher names each while it is shown ({rec['labeled_per_object']} "
        f"labelled frames; the rare object `{rec.get('rare_object')}` only {rec['rare_labeled']}); after "
        "some, every object taught so far is shown unlabelled in its test room (another background, "
        "clutter, light and poses: lifelong_learning/sim/showing.py) and the answers scored: each frame's "
        "`prediction`, and each object's showing by the per-showing answer after its last frame "
        '(`""`, I don\'t know, counts as wrong). '
        f"feature_extractor's crop: `{rec.get('crop', 'none')}`, network: `{rec.get('network', '?')}`"
        + (f", pasted: {rec['pasted']}" if rec.get("pasted") else "")
        + " (what each crop, network and pasting gains: docs/benchmarks/recognition-scale.md, "
        "docs/benchmarks/recognition-showing.md).",
        "",
        *_recognition_rows(rec),
    ]
    new = rec.get("never_taught")
    if new:
        lines += [
            "",
            f"**Never taught**: {new['objects']} objects of the catalogue never taught, shown in test rooms: "
            f"{new['showings_unknown']} of {new['objects']} showings and {new['frames_unknown']} of "
            f'{new["frames"]} frames answered `""` (I don\'t know); {new["questions"]} question(s) asked.',
        ]
    asked = rec.get("asked")
    if asked:
        lines += [
            "",
            f"**Taught by answering the robot's questions**: {asked['objects']} new objects shown without "
            f"a word; the robot asked {asked['questions']} time(s) on `~/query`, the teacher answered on "
            f"`~/answer` and {asked['frames_learned']} frames were learned; then "
            f"{_percent(asked['showing_accuracy'])} % of their showings in test rooms named right.",
        ]
    lines += ["", "![recognition](recognition_accuracy.png)" if plot else "", ""]
    if rec.get("info"):
        lines += [f"Classifier state at the end: {rec['info']}", ""]
    return lines


def _dynamics_section(results: dict[str, Any], plot: Path | None, evaluation_plot: Path | None) -> list[str]:
    """Torque nMSE per joint before the payload and at the end, the messages answered, the plot,
    then the evaluation trajectory (:func:`_evaluation_section`)."""
    dyn = results.get("dynamics")
    if not dyn:
        return []
    lines = ["## Inverse dynamics", ""]
    lines += [
        f"The simulated Panda tracked random joint trajectories under computed-torque control and "
        f"published joint_states at {dyn['rate_hz']:.0f} Hz for {dyn['duration_s']:.0f} s"
        + (f"; a 1 kg payload was grasped at t = {dyn['payload_at']:.0f} s" if dyn.get("payload_at") else "")
        + ". The inverse_dynamics node learned online from the measured efforts and answered each "
        "message it received with predicted torques (joint_states are best-effort: some are dropped "
        "under load). nMSE = MSE over a window / variance of the measured torque over the whole run, "
        "per joint, in the last window before the payload and in the last window of the run"
        + (
            " (the pushes below, and 0.5 s after each, left out)"
            if dyn.get("contact", {}).get("pushes")
            else ""
        )
        + ":",
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
        f"Messages published {dyn['published']}, answered {dyn['answered']}."
        + (
            f" The simulated driver published {dyn['publisher_lag_ms']['p50']:.1f} ms (p50) and "
            f"{dyn['publisher_lag_ms']['p99']:.1f} ms (p99) after each sample's time stamp."
            if dyn.get("publisher_lag_ms")
            else ""
        ),
        "",
        "![dynamics](dynamics_nmse.png)" if plot else "",
        "",
    ]
    return lines + _evaluation_section(dyn, evaluation_plot)


def _evaluation_section(dyn: dict[str, Any], plot: Path | None) -> list[str]:
    """The same new trajectory answered by the online and by the retrained model, with the plot."""
    ev = dyn.get("evaluation")
    if not ev:
        return []
    lines = [
        "### Online versus retrained, on the same trajectory",
        "",
        f"After the online phase the node's learning was frozen and a new trajectory "
        f"({ev['duration_s']:.0f} s, payload attached, seed {ev['seed']}) was played twice: once "
        "answered by the model learned online, once by the model serving after retraining "
        f"({ev.get('served_after_retraining', 'the retrained one')}). nMSE over the whole "
        "trajectory (normalized by its torque variance). "
        "Both models learned from one trajectory and this one is new, so the table measures "
        "generalization; the tuner's own test split (the last 20% of the bag's trajectory) is "
        "under *Bag and retraining*.",
        "",
        "| joint | RNEA (URDF) | online SP | after retraining |",
        "|---|---:|---:|---:|",
    ]
    for j, name in enumerate(dyn["joint_names"]):
        lines.append(f"| {name} | {ev['rnea'][j]:.3f} | {ev['online'][j]:.3f} | {ev['retrained'][j]:.3f} |")
    lines += [
        f"| **mean** | {np.nanmean(ev['rnea']):.3f} | {np.nanmean(ev['online']):.3f} "
        f"| {np.nanmean(ev['retrained']):.3f} |",
        "",
        f"Answered {ev['answered_online']} (online) and {ev['answered_retrained']} (retrained) of "
        f"{ev['published']} messages.",
        "",
        "![evaluation](dynamics_evaluation.png)" if plot else "",
        "",
    ]
    return lines


def _latency_section(results: dict[str, Any], plot: Path | None) -> list[str]:
    """Percentiles of each end-to-end latency over DDS, with the plot."""
    lat = results.get("latency_ms", {})
    if not lat:
        return []
    lines = [
        "## Latency",
        "",
        "From the publication of the input to the reception of the answer, both in the demo's process "
        "(which also runs the simulator and waits for its own executor); *published*: to the time the "
        "node published the answer (its DDS source timestamp), what a controller subscribed to it sees "
        "less its own delays.",
        "",
        "| path | p50 [ms] | p99 [ms] | n |",
        "|---|---:|---:|---:|",
    ]
    for k, v in lat.items():
        lines.append(f"| {k} | {_pct(v, 50):.2f} | {_pct(v, 99):.2f} | {len(v)} |")
    lines += ["", "![latency](latency.png)" if plot else "", ""]
    return lines


def _diagnostics_and_notes(results: dict[str, Any]) -> list[str]:
    """Every node's diagnostics at the end, then the run's notes."""
    lines = []
    diag = results.get("diagnostics", {})
    if diag:
        lines += ["## Node diagnostics at the end", ""]
        for node, values in diag.items():
            lines.append(f"- **{node}**: " + ", ".join(f"{k} = {v}" for k, v in values.items()))
        lines.append("")
    if results.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in results["notes"]] + [""]
    return lines


def write_report(results: dict[str, Any], out: Path) -> Path:
    """Write ``results.json``, the plots and ``report.md`` into ``out``; returns the report path."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=float))
    recognition, dynamics = plot_recognition(results, out), plot_dynamics(results, out)
    latency, evaluation = plot_latency(results, out), plot_evaluation(results, out)
    live = plot_live_metrics(results, out, _plt())
    contact = plot_contact(results, out, _plt())
    cycle = plot_cycle(results, out, _plt())
    lines = [
        *_header(results),
        *_recognition_section(results, recognition),
        *_dynamics_section(results, dynamics, evaluation),
        *live_metrics_section(results, live),
        *contact_section(results, contact),
        *_retraining_section(results),
        *cycle_section(results, cycle),
        *_latency_section(results, latency),
        *_diagnostics_and_notes(results),
    ]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


if __name__ == "__main__":
    run = Path(sys.argv[1])
    print(write_report(json.loads((run / "results.json").read_text()), run))
