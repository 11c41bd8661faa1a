"""The demo's pushes: a person pushes the simulated Panda a few times during the
robot phase, and the report shows what ``inverse_dynamics`` made of it.

**Pushes** (:func:`push_schedule`): ``DemoConfig.pushes`` forces on random links (``panda_link3`` …
``panda_link7``, at the link's centre of mass, a random direction), each 0.3-1 s long, applied with
MuJoCo's ``xfrc_applied`` (:class:`~lifelong_learning.sim.arm.Push`). They start once the model has
learned ``push_after_s`` seconds and end ``PAYLOAD_CLEAR_S`` before the payload grasp. None comes
after it: the grasp is itself an unmodelled load that the node flags as a contact, learns nothing
from until ``contact_max_s`` (10 s), then learns it (a payload explains it: dynamics/payload.py)
with the samples held since the grasp, and its thresholds stay those of a model
still learning the payload for tens of seconds more (up to 20 N m on joint 2 in an offline run of
the demo's trajectory: a 7 N m push there went unseen). Each force's size is set so that its largest joint
torque ``max_j |Jᵀ F|_j`` at the push's start (on the desired trajectory: the controller tracks it
within millimetres) is a target drawn from ``push_torque`` N m: a few N m, above the node's
thresholds once it has learned (``contact_k`` 6 robust standard deviations plus
``contact_min_torque`` 2.5 N m) and under the wrists' 12 N m effort limits.

**Truth.** The simulator logs ``Jᵀ F`` (``mj_applyFT``) per sample. The node publishes ``external_torque``
= measured − predicted, and ``M q̈ + c + g = τ_m + Jᵀ F`` makes that ``−Jᵀ F`` for a perfect
model (:mod:`lifelong_learning.dynamics.contact`): the estimate is scored against ``−Jᵀ F``.

**Scoring** (:func:`contact_results`): the ``contact`` flags (std_msgs/Bool, no header: one per
``external_torque`` message, published in the same order) are paired with the stamps of
``external_torque``; an onset is a flag going true. Per push: detected when an onset falls in
``[start, end + DETECT_GRACE_S]``, its latency (onset stamp − start, in the samples' time; the
joint states come at ``joint_state_hz``, so its resolution is one period), the RMSE of the
estimate against ``−Jᵀ F`` over the push's samples (all joints), the true peak joint torque. An
onset neither in a push's window nor within ``PAYLOAD_WINDOW_S`` of the grasp is a false alarm;
onsets at the grasp are reported apart. The robot phase's nMSE windows leave out the samples of
each push and ``AFTER_PUSH_S`` after it (:func:`free_rows`): they score the model on the arm's
own motion, which the pushes are not.

No ROS imports: the report re-makes the plot and the table from ``results.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from lifelong_learning.demo.config import DemoConfig
from lifelong_learning.sim.arm import ArmSimulation, Push

#: the links pushed
LINKS = tuple(f"panda_link{i}" for i in range(3, 8))
#: every push ends at least this long before the payload grasp [s]
PAYLOAD_CLEAR_S = 3.0
#: push lengths [s]
PUSH_SECONDS = (0.3, 1.0)
#: the most force a push may take to reach its target torque [N]
MAX_FORCE_N = 80.0
#: an onset this long after a push's end still counts as its detection [s]
DETECT_GRACE_S = 0.1
#: the report's close-up of a push: this long before and after it [s]
CLOSEUP_S = 0.7
#: samples this long after a push are out of the nMSE windows (the controller's transient) [s]
AFTER_PUSH_S = 0.5
#: onsets this long after the grasp are the grasp's (its load, learned as a payload after contact_max_s 10 s),
#: not false alarms [s]
PAYLOAD_WINDOW_S = 15.0


def _allowed(duration: float, payload_at: float | None, after: float) -> list[tuple[float, float]]:
    """The intervals in which a push may start: from ``after`` until it would end less than
    :data:`PAYLOAD_CLEAR_S` before the grasp (or 1.5 s before the run's end)."""
    end = duration - 1.5
    if payload_at is not None:
        end = min(end, payload_at - PAYLOAD_CLEAR_S)
    end -= PUSH_SECONDS[1]
    return [(after, end)] if end > after else []


def push_schedule(
    sim: ArmSimulation,
    trajectory_seed: int,
    duration: float,
    payload_at: float | None,
    n: int,
    after_s: float,
    torque: tuple[float, float],
    seed: int,
) -> list[Push]:
    """``n`` pushes spread evenly over the allowed intervals (see the module docstring), each on a
    random link in a random direction, sized to a target peak joint torque drawn from ``torque``.
    ``trajectory_seed``: the trajectory the arm will track (the forces are sized on it)."""
    spans = _allowed(duration, payload_at, after_s)
    total = sum(b - a for a, b in spans)
    if n <= 0 or total <= 0:
        return []
    rng = np.random.default_rng(seed)
    traj = sim.trajectory(trajectory_seed)
    data = mujoco.MjData(sim.model)
    pushes = []
    for k in range(n):
        x = total * (k + 0.5) / n  # evenly along the allowed time
        for a, b in spans:
            if x <= b - a:
                start = a + x
                break
            x -= b - a
        length = rng.uniform(*PUSH_SECONDS)
        link = str(rng.choice(LINKS))
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        target = rng.uniform(*torque)
        body = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_BODY, link)
        data.qpos[:] = traj(start)[0]
        mujoco.mj_kinematics(sim.model, data)
        mujoco.mj_comPos(sim.model, data)
        jacp = np.zeros((3, sim.model.nv))
        mujoco.mj_jac(sim.model, data, jacp, None, data.xipos[body], body)
        per_newton = float(np.abs(jacp.T @ direction).max())
        magnitude = min(MAX_FORCE_N, target / max(per_newton, 1e-6))
        force = tuple(float(v) for v in magnitude * direction)
        pushes.append(Push(round(start, 3), round(start + length, 3), link, force))  # type: ignore[arg-type]
    return pushes


def demo_pushes(cfg: DemoConfig, sim: ArmSimulation, payload_at: float | None) -> list[Push]:
    """The robot phase's pushes (:func:`push_schedule` with the configuration's numbers; the arm
    tracks the trajectory of ``cfg.seed``)."""
    return push_schedule(
        sim,
        cfg.seed,
        cfg.robot_seconds,
        payload_at,
        cfg.pushes,
        cfg.push_after_s,
        cfg.push_torque,
        cfg.seed + 28,
    )


def recorded_results(
    log: dict[str, np.ndarray],
    stamps: np.ndarray,
    record: tuple[list[tuple[int, np.ndarray]], list[tuple[bool, int]]],
    pushes: list[Push],
    payload_at: float | None,
    joint_names: list[str],
) -> dict[str, Any]:
    """:func:`contact_results` from what the demo's driver received (``record``:
    ``DemoDriver.contact_record``) for the joint states stamped ``stamps`` (one per ``log`` row)."""
    external, flags = record
    by_stamp = {s: e for s, e in external if e.shape == (len(joint_names),)}
    paired, how = pair_flags(external, flags)
    missing = np.full(len(joint_names), np.nan)
    estimate = np.array([by_stamp.get(int(s), missing) for s in stamps])
    flag = np.array([float(paired[int(s)]) if int(s) in paired else np.nan for s in stamps])
    t = log["t"] - log["t"][0]
    out = contact_results(t, log["external"], estimate, flag, pushes, payload_at, joint_names)
    out["pairing"] = how
    out["received"] = {"external_torque": len(external), "contact": len(flags)}
    return out


def onsets_on(
    record: tuple[list[tuple[int, np.ndarray]], list[tuple[bool, int]]], stamps: np.ndarray
) -> dict[str, int]:
    """The contact onsets the node flagged on the joint states stamped ``stamps`` (``record``:
    ``DemoDriver.contact_record``), and how many of them had a flag: on a trajectory without
    pushes (the evaluation) every onset is a false alarm."""
    paired, _ = pair_flags(*record)
    flag = np.array([float(paired[int(s)]) if int(s) in paired else np.nan for s in stamps])
    t = (np.asarray(stamps, dtype=np.int64) - int(stamps[0])) * 1e-9
    return {"onsets": int(_onsets(t, flag).size), "flagged": int(np.sum(~np.isnan(flag)))}


def free_rows(t: np.ndarray, pushes: list[Push]) -> np.ndarray:
    """Per sample: outside every push and the :data:`AFTER_PUSH_S` after it."""
    free = np.ones(t.size, dtype=bool)
    for p in pushes:
        free &= ~((t >= p.start) & (t < p.end + AFTER_PUSH_S))
    return free


def pair_flags(
    external: list[tuple[int, np.ndarray]], flags: list[tuple[bool, int]]
) -> tuple[dict[int, bool], str]:
    """The ``contact`` flag of each ``external_torque`` stamp.

    ``external``: (stamp ns, effort) in arrival order; ``flags``: (flag, externals received before
    it) in arrival order. Both topics carry one message per answered joint state in the same
    order; with as many flags as estimates they pair one to one ("by order"), otherwise each flag
    goes to the last estimate received before it ("by arrival")."""
    if len(external) == len(flags):
        return {s: f for (s, _), (f, _) in zip(external, flags, strict=True)}, "by order"
    out: dict[int, bool] = {}
    for flag, before in flags:
        if before > 0:
            out[external[before - 1][0]] = flag
    return out, "by arrival"


def _onsets(t: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """Stamps where the flag goes true (samples without a flag: NaN, skipped)."""
    known = ~np.isnan(flag)
    tk, fk = t[known], flag[known] > 0.5
    rises = np.flatnonzero(fk & ~np.concatenate([[False], fk[:-1]]))
    return tk[rises]


def contact_results(
    t: np.ndarray,
    true_external: np.ndarray,
    estimate: np.ndarray,
    flag: np.ndarray,
    pushes: list[Push],
    payload_at: float | None,
    joint_names: list[str],
) -> dict[str, Any]:
    """``results["dynamics"]["contact"]``: per push, the false alarms, the series of the plot.

    Args:
        t: the samples' times [s] (the robot phase's, from 0).
        true_external: ``Jᵀ F`` per sample (the simulator's).
        estimate: ``external_torque`` per sample (NaN rows: none received).
        flag: ``contact`` per sample (1/0, NaN: none received).
    """
    truth = -true_external  # what measured − predicted is for a perfect model
    onsets = _onsets(t, flag)
    rows, claimed = [], np.zeros(onsets.size, dtype=bool)
    for p in pushes:
        inside = (t >= p.start) & (t < p.end)
        peak = np.abs(true_external[inside]).max(axis=0) if inside.any() else np.zeros(len(joint_names))
        hit = (onsets >= p.start) & (onsets <= p.end + DETECT_GRACE_S)
        claimed |= hit
        answered = inside & ~np.isnan(estimate).any(axis=1)
        err = estimate[answered] - truth[answered]
        j = int(np.argmax(peak))
        near = (t >= p.start - CLOSEUP_S) & (t <= p.end + CLOSEUP_S)
        rows.append(
            {
                "start": p.start,
                "end": p.end,
                "link": p.body,
                "force_n": float(np.linalg.norm(p.force)),
                "peak_joint": joint_names[j],
                "true_peak_torque": float(peak.max()),
                "detected": bool(hit.any()),
                "latency_ms": float(1e3 * (onsets[hit][0] - p.start)) if hit.any() else None,
                "rmse": float(np.sqrt(np.mean(err**2))) if err.size else None,
                "answered": int(answered.sum()),
                "samples": int(inside.sum()),
                "closeup": {  # the push's own peak joint, CLOSEUP_S either side
                    "t": np.round(t[near], 3).tolist(),
                    "estimate": np.round(estimate[near, j], 3).tolist(),
                    "true": np.round(truth[near, j], 3).tolist(),
                    "contact": flag[near].tolist(),
                },
            }
        )
    at_grasp = np.zeros(onsets.size, dtype=bool)
    if payload_at is not None:
        at_grasp = ~claimed & (onsets >= payload_at) & (onsets <= payload_at + PAYLOAD_WINDOW_S)
    false = onsets[~claimed & ~at_grasp]
    joint = _most_pushed(true_external, joint_names)
    detected = [r for r in rows if r["detected"]]
    return {
        "pushes": rows,
        "detected": len(detected),
        "latency_ms": [r["latency_ms"] for r in detected],
        "false_alarms": len(false),
        "false_alarm_t": [round(float(x), 3) for x in false],
        "onsets_at_payload_grasp": int(at_grasp.sum()),
        "free_motion_s": _free_seconds(t, pushes, payload_at),
        "series": {
            "joint": joint_names[joint],
            "t": np.round(t, 3).tolist(),
            "estimate": np.round(estimate[:, joint], 3).tolist(),
            "true": np.round(truth[:, joint], 3).tolist(),
            "contact": flag.tolist(),
        },
    }


def _free_seconds(t: np.ndarray, pushes: list[Push], payload_at: float | None) -> float:
    """Seconds of the phase outside the pushes (and :data:`AFTER_PUSH_S` after each) and the grasp's
    :data:`PAYLOAD_WINDOW_S`: where an onset is a false alarm."""
    span = float(t[-1] - t[0]) if t.size else 0.0
    span -= sum(p.end - p.start + AFTER_PUSH_S for p in pushes)
    if payload_at is not None and t.size:
        span -= max(0.0, min(PAYLOAD_WINDOW_S, float(t[-1]) - payload_at))
    return max(span, 0.0)


def _most_pushed(true_external: np.ndarray, joint_names: list[str]) -> int:
    """The joint that took the most push torque (sum of |Jᵀ F| over the samples)."""
    if not true_external.size:
        return 0
    return int(np.argmax(np.abs(true_external).sum(axis=0)))


# --------------------------------------------------------------------------- report (no ROS)
def plot_contact(results: dict[str, Any], out: Path, plt: Any) -> Path | None:
    """``dynamics_contact.png``: the estimate against the truth on the most pushed joint over the
    robot phase, contacts the node flagged shaded, and a close-up of each push (on its own most
    loaded joint) below."""
    contact = results.get("dynamics", {}).get("contact") or {}
    series = contact.get("series")
    if not series or not series.get("t"):
        return None
    t, est, true, flag = (
        np.asarray(series[key], dtype=float) for key in ("t", "estimate", "true", "contact")
    )
    pushes = contact["pushes"]
    cols = max(1, len(pushes))
    fig = plt.figure(figsize=(max(9, 2.4 * cols), 5.6))
    grid = fig.add_gridspec(2, cols, height_ratios=[1.2, 1])
    top = fig.add_subplot(grid[0, :])
    _trace(top, t, est, true, flag)
    for k, p in enumerate(pushes):
        ax = fig.add_subplot(grid[1, k])
        c = p["closeup"]
        _trace(ax, *(np.asarray(c[key], dtype=float) for key in ("t", "estimate", "true", "contact")))
        found = f"found after {p['latency_ms']:.0f} ms" if p["detected"] else "missed"
        link = p["link"].replace("panda_", "")
        ax.set_title(f"{p['start']:.1f} s, {link}: {p['peak_joint'].replace('panda_', '')}", fontsize=7)
        ax.set_xlabel(f"{p['true_peak_torque']:.1f} N m, {found}", fontsize=7)
    for p in pushes:
        top.axvspan(p["start"], p["end"], color="0.85", lw=0, zorder=0)
    payload_at = results["dynamics"].get("payload_at")
    if payload_at is not None:
        top.axvline(payload_at, color="C3", alpha=0.6, lw=1, label="payload grasped")
    top.set_ylabel(f"{series['joint']} [N m]", fontsize=8)
    top.set_xlabel("robot time [s]", fontsize=8)
    top.legend(fontsize=7, loc="upper left", ncol=3)
    top.set_title(
        f"External torque on {series['joint']}: the node's estimate against the pushes "
        "(grey: push; orange: the node's contact flag; red: the payload grasped)",
        fontsize=9,
    )
    fig.tight_layout()
    path = out / "dynamics_contact.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _trace(ax: Any, t: np.ndarray, est: np.ndarray, true: np.ndarray, flag: np.ndarray) -> None:
    """The truth, the estimate and the contact flags (shaded) on ``ax``."""
    ax.plot(t, true, "k-", lw=1.2, label=r"push, $-J^T F$ (true)")
    ax.plot(t, est, "C0-", lw=0.8, label="external_torque (node)")
    _shade(ax, t, flag)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=7)


def _shade(ax: Any, t: np.ndarray, flag: np.ndarray) -> None:
    """Shade the runs of samples flagged in contact."""
    on = np.nan_to_num(flag) > 0.5
    edges = np.flatnonzero(np.diff(np.concatenate([[0], on.astype(int), [0]])))
    for a, b in zip(edges[::2], edges[1::2], strict=True):
        ax.axvspan(t[a], t[min(b, t.size - 1)], color="C1", alpha=0.3, lw=0)


def contact_section(results: dict[str, Any], plot: Path | None) -> list[str]:
    """The report's paragraph and table on the pushes."""
    contact = results.get("dynamics", {}).get("contact") or {}
    if "pushes" not in contact:
        return []
    pushes = contact["pushes"]
    at = ", ".join(f"{x:.1f}" for x in contact["false_alarm_t"])
    lines = [
        "### Pushes: external torque and contact detection",
        "",
        f"During the robot phase a person pushed the arm {len(pushes)} times (a force on a link, "
        "applied with MuJoCo's `xfrc_applied`; the controller does not know it). The node published "
        "`external_torque` (measured − predicted, the prediction made before the sample is learned) "
        "and `contact` for every joint state it answered; samples in contact are not learned, and the "
        "nMSE figures above leave out each push and the 0.5 s after it. The truth is `−Jᵀ F` "
        "(measured − predicted of a perfect model). Detected: a contact onset between the push's start "
        f"and {1e3 * DETECT_GRACE_S:.0f} ms after its end; latency in the samples' time (joint states "
        f"every {1e3 / results['dynamics']['rate_hz']:.0f} ms).",
        "",
        "| push | link | force [N] | true peak torque [N m] (joint) | detected | latency [ms] "
        "| RMSE of external_torque [N m] |",
        "|---|---|---:|---:|---|---:|---:|",
    ]
    for p in pushes:
        latency = "" if p["latency_ms"] is None else f"{p['latency_ms']:.0f}"
        rmse = "" if p["rmse"] is None else f"{p['rmse']:.2f}"
        lines.append(
            f"| {p['start']:.1f}-{p['end']:.1f} s | {p['link']} | {p['force_n']:.0f} | "
            f"{p['true_peak_torque']:.1f} ({p['peak_joint']}) | {'yes' if p['detected'] else 'no'} | "
            f"{latency} | {rmse} |"
        )
    lines += [
        "",
        f"Detected {contact['detected']} of {len(pushes)}; false alarms outside the pushes: "
        f"{contact['false_alarms']} in {contact['free_motion_s']:.0f} s of free motion"
        + (f" (at t = {at} s)" if at else "")
        + "; onsets at the payload grasp (an unmodelled 1 kg load, learned as a payload after "
        "`contact_max_s`): "
        f"{contact['onsets_at_payload_grasp']}"
        + "".join(
            f"; on the evaluation trajectory ({name} model, no pushes): {e['onsets']} onsets in "
            f"{e['flagged']} flagged joint states"
            for name, e in contact.get("evaluation", {}).items()
        )
        + f". Flags paired with the estimates {contact.get('pairing', '?')}.",
        "",
        "![contact](dynamics_contact.png)" if plot else "",
        "",
    ]
    return lines
