"""The demo's autonomous retraining cycle: the lifelong loop closes by itself.

After the retrained models serve, the demo sets the tuner's ``auto_retrain`` parameter (the driver
sends no goal) and the robot works on with learning on, holding its 1 kg payload; then it grasps
a heavier one (``loop_payload_kg``). What follows is the nodes' doing alone:

1. inverse_dynamics' live prequential error rises; its drift alarm goes off (``~/drift``, WARN);
2. the tuner waits for ``retrain_bag_files`` bag files closed after the alarm (the recorder's
   ``~/file_closed``), saves the serving model (``~/save_model``) and sends itself a goal
   (``tuning_progress``: ``auto_retrain``, then the job's ``done`` with the gate's decision);
3. the promoted candidate runs in shadow on the robot (``~/shadow``) and is swapped in only if it
   wins there; the drift alarm clears; the live error falls.

The demo watches those events, drives the robot until the cycle has ended and
``loop_after_s`` more seconds have shown the error after it (or ``loop_max_s`` are up), and puts
the timeline, the job, the shadow verdict and the live error before the grasp, under drift and
after the swap into ``results["dynamics"]["lifelong_loop"]``. The loop: docs/lifelong-loop.md.
"""

from __future__ import annotations

import json
import math
import threading
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from lifelong_learning.msg import LearningMetrics
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation

DRIFT, SHADOW, METRICS = (
    "/inverse_dynamics/drift",
    "/inverse_dynamics/shadow",
    "/inverse_dynamics/learning_metrics",
)
PROGRESS = "/tuning_progress"
#: seconds of live error averaged for each figure of the report
SPAN_S = 3.0


class LoopWatcher:
    """What the nodes publish during the cycle, stamped with the wall time it arrived."""

    def __init__(self, driver: Any) -> None:
        self.lock = threading.Lock()
        self.t0 = time.time()
        self.events: list[dict[str, Any]] = []
        self.live: list[tuple[float, float, int]] = []  # (t, mean prequential error, model version)
        latched = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        driver.create_subscription(DiagnosticStatus, DRIFT, self._on_drift, latched)
        driver.create_subscription(String, SHADOW, self._on_shadow, latched)
        driver.create_subscription(String, PROGRESS, self._on_progress, 50)
        driver.create_subscription(LearningMetrics, METRICS, self._on_metrics, 50)

    def start(self) -> None:
        """From now on (events latched before are dropped)."""
        with self.lock:
            self.t0 = time.time()
            self.events.clear()
            self.live.clear()

    def _add(self, kind: str, **detail: Any) -> None:
        with self.lock:
            self.events.append({"t": round(time.time() - self.t0, 2), "event": kind, **detail})

    def _on_drift(self, msg: DiagnosticStatus) -> None:
        raised = msg.level == DiagnosticStatus.WARN
        self._add("drift raised" if raised else "drift cleared", detail=msg.message)

    def _on_shadow(self, msg: String) -> None:
        event = json.loads(msg.data)
        kind = f"{event.get('role', 'trial')} {event.get('outcome', '?')}"
        keep = ("candidate_error", "serving_error", "samples", "promoted", "reason", "model")
        self._add(kind, **{k: event[k] for k in keep if k in event})

    def _on_progress(self, msg: String) -> None:
        event = json.loads(msg.data)
        state = event.get("state")
        if state == "auto_retrain":
            self._add(
                "tuner sent itself a goal", **{k: event.get(k) for k in ("reason", "bags", "validation_bags")}
            )
        elif state in ("done", "failed", "rejected", "cancelled"):
            promotion = event.get("promotion") or {}
            self._add(f"job {state}", promoted=promotion.get("promoted"), reason=promotion.get("reason"),
                      candidate_error=promotion.get("candidate_error"),
                      serving_error=promotion.get("serving_error"))  # fmt: skip

    def _on_metrics(self, msg: LearningMetrics) -> None:
        if msg.mean_prequential_error >= 0:
            with self.lock:
                self.live.append(
                    (time.time() - self.t0, float(msg.mean_prequential_error), int(msg.model_version))
                )

    def first(self, kind: str) -> dict[str, Any] | None:
        with self.lock:
            return next((e for e in self.events if e["event"] == kind), None)

    def now(self) -> float:
        return time.time() - self.t0


def _mean_error(live: list[tuple[float, float, int]], start: float, end: float) -> float:
    values = [e for t, e, _ in live if start <= t <= end]
    return float(np.mean(values)) if values else math.nan


def _finished(watcher: LoopWatcher) -> dict[str, Any] | None:
    """The event that ends the cycle: the shadow verdict of the loop's candidate, or a job that
    promoted nothing (None while the cycle runs)."""
    with watcher.lock:
        sent = [e for e in watcher.events if e["event"] == "tuner sent itself a goal"]
        if not sent:
            return None
        after = [e for e in watcher.events if e["t"] >= sent[0]["t"]]
    for e in after:
        if e["event"].startswith("shadow ") and e["event"] not in ("shadow started",):
            return e
        if e["event"] == "job done" and not e.get("promoted"):
            return e
        if e["event"] in ("job failed", "job rejected", "job cancelled"):
            return e
    return None


def cycle_log(cfg: Any, log_every: int) -> dict[str, np.ndarray]:
    """The robot's motion through the cycle (``loop_max_s`` of it; the cycle uses what it needs):
    the 1 kg payload held, ``loop_payload_kg`` grasped at ``loop_grasp_s``. ``log_every``: simulation
    steps per joint state. Seconds of computing: the demo makes it while an earlier phase drives."""
    return PandaSimulation().run(
        cfg.loop_max_s, seed=cfg.seed + 4000, log_every=log_every, initial_payload=1.0,
        payload_mass=cfg.loop_payload_kg, payload_at=cfg.loop_grasp_s,
    )  # fmt: skip


def autonomous_cycle(
    stage: Any, watcher: LoopWatcher, set_parameter: Any, log: dict[str, np.ndarray]
) -> dict[str, Any]:
    """Run the cycle (see the module docstring) on the motion ``log`` (:func:`cycle_log`); returns
    ``results["dynamics"]["lifelong_loop"]``. ``set_parameter(node, name, value)`` sets a node's
    parameter."""
    cfg = stage.cfg
    set_parameter("inverse_dynamics", "learning", True)
    set_parameter("nystrom_tuner", "auto_retrain", True)
    watcher.start()
    stage.say(
        f"lifelong loop: auto_retrain on; the robot works on, grasps {cfg.loop_payload_kg:g} kg at "
        f"{cfg.loop_grasp_s:g} s; no goal is sent by the demo from here on"
    )
    names, t = list(JOINT_NAMES), log["t"] - log["t"][0]
    stamps = time.time_ns() + np.round(t * 1e9).astype(np.int64)
    t_start, end, published = time.monotonic(), None, 0
    for i in range(t.size):
        delay = t_start + t[i] - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        stage.driver.publish_joint_state(names, log["q"][i], log["qd"][i], log["tau"][i], int(stamps[i]))
        published += 1
        if i % 100 == 0:
            stage.check_alive()
            end = end or _finished(watcher)
            if end is not None and watcher.now() >= end["t"] + cfg.loop_after_s:
                break
    set_parameter("nystrom_tuner", "auto_retrain", False)
    set_parameter("inverse_dynamics", "learning", False)
    return _summary(stage, watcher, end, published / cfg.joint_state_hz)


def _summary(stage: Any, watcher: LoopWatcher, end: dict[str, Any] | None, seconds: float) -> dict[str, Any]:
    cfg = stage.cfg
    with watcher.lock:
        events, live = list(watcher.events), list(watcher.live)
    drift = next((e for e in events if e["event"] == "drift raised"), None)
    sent = next((e for e in events if e["event"] == "tuner sent itself a goal"), None)
    job = next(
        (e for e in events if sent is not None and e["event"].startswith("job ") and e["t"] >= sent["t"]),
        None,
    )
    verdict = end if end is not None and end["event"].startswith("shadow ") else None
    promoted = bool(verdict and verdict.get("promoted"))
    grasp = cfg.loop_grasp_s
    result = {
        "payload_kg": [1.0, cfg.loop_payload_kg],
        "grasp_s": grasp,
        "robot_seconds": seconds,
        "timeline": events,
        "job": job,
        "goal": sent,
        "shadow": verdict,
        "promoted": promoted,
        "cycle_complete": end is not None,
        "live_error": {
            "before_grasp": _mean_error(live, grasp - SPAN_S, grasp),
            "at_drift": _mean_error(live, drift["t"] - SPAN_S, drift["t"]) if drift else math.nan,
            "after_swap": _mean_error(live, seconds - SPAN_S, seconds) if promoted else math.nan,
        },
        "live": {
            "t": [x[0] for x in live],
            "error": [x[1] for x in live],
            "model_version": [x[2] for x in live],
        },
    }
    e = result["live_error"]
    stage.say(
        "lifelong loop: "
        + ("no drift alarm" if drift is None else f"drift at {drift['t']:.0f} s")
        + ("" if sent is None else f", goal sent at {sent['t']:.0f} s")
        + ("" if job is None else f", {job['event']} (promoted by the gate: {job.get('promoted')})")
        + ("" if verdict is None else f", {verdict['event']}")
        + f"; live error before the grasp {e['before_grasp']:.4g}, at the alarm {e['at_drift']:.4g}, "
        f"after the swap {e['after_swap']:.4g}"
    )
    return result


# --------------------------------------------------------------------------- report
def _number(v: Any) -> str:
    return "undefined" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"


def plot_cycle(results: dict[str, Any], out: Any, plt: Any) -> Any:
    """``lifelong_loop.png``: the live error through the cycle, the events marked (None without data)."""
    loop = results.get("dynamics", {}).get("lifelong_loop") or {}
    live = loop.get("live") or {}
    if not live.get("t"):
        return None
    fig, ax = plt.subplots(figsize=(9, 3.2))
    ax.semilogy(live["t"], live["error"], "C0-", label="inverse_dynamics, live prequential nMSE")
    marks = [("grasp", loop["grasp_s"], "k")]
    colours = {
        "drift raised": "C3",
        "tuner sent itself a goal": "C1",
        "job done": "C2",
        "shadow promoted": "C4",
    }
    marks += [(e["event"], e["t"], colours[e["event"]]) for e in loop["timeline"] if e["event"] in colours]
    for label, t, colour in marks:
        ax.axvline(t, color=colour, ls="--", lw=1, label=label)
    ax.set_xlabel("seconds since auto_retrain was set on")
    ax.set_ylabel("nMSE over the window")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title(
        "The lifelong loop: a heavier payload, drift, a job the tuner sent itself, shadow, swap", fontsize=10
    )
    fig.tight_layout()
    path = out / "lifelong_loop.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def cycle_section(results: dict[str, Any], plot: Any) -> list[str]:
    """The report's "Lifelong loop" section (none when the demo ran without the cycle)."""
    loop = results.get("dynamics", {}).get("lifelong_loop")
    if not loop:
        return []
    e = loop["live_error"]
    lines = [
        "## Lifelong loop: retraining by itself",
        "",
        f"The demo set nystrom_tuner's `auto_retrain` on and sent no goal; the robot worked on with "
        f"{loop['payload_kg'][0]:g} kg and grasped {loop['payload_kg'][1]:g} kg at {loop['grasp_s']:g} s "
        f"({loop['robot_seconds']:.0f} s driven). What the nodes did (seconds since `auto_retrain` was set):",
        "",
        "| t [s] | event | detail |",
        "|---:|---|---|",
    ]
    for ev in loop["timeline"]:
        detail = ev.get("detail") or ev.get("reason") or ""
        if ev["event"] == "tuner sent itself a goal":
            names = [p.rsplit("/", 1)[-1] for p in ev.get("bags") or []]
            detail = f"trains on {', '.join(names)}; validates on " + ", ".join(
                p.rsplit("/", 1)[-1] for p in ev.get("validation_bags") or []
            )
        lines.append(f"| {ev['t']:.1f} | {ev['event']} | {detail} |")
    verdict = loop.get("shadow") or {}
    lines += [
        "",
        f"Live prequential nMSE (mean over {SPAN_S:g} s): before the grasp {_number(e['before_grasp'])}, "
        f"at the drift alarm {_number(e['at_drift'])}, after the swap {_number(e['after_swap'])}. "
        + (
            f"In shadow the retrained candidate scored {_number(verdict.get('candidate_error'))} against the "
            f"serving model's {_number(verdict.get('serving_error'))} over {verdict.get('samples')} samples: "
            f"**{verdict['event'].split(' ', 1)[1]}**."
            if verdict
            else "**The cycle did not end in a shadow verdict** (see the timeline)."
        ),
        "",
    ]
    if plot:
        lines += [f"![lifelong loop]({plot.name})", ""]
    return lines
