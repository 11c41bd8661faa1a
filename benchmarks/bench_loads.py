"""Benchmark: loads the contact thresholds do not settle, on a simulated Panda (no ROS).

The plant is the package's MuJoCo Panda (:mod:`lifelong_learning.sim.panda`) tracking random smooth
trajectories under its computed-torque controller; joint states at 100 Hz (the drives' torque as the
measured effort, q̈ from the node's acceleration filter); the learner has the node's defaults
(``SemiparametricInverseDynamics``: 500 random features, ``forgetting: auto``), learned
test-then-update in blocks of 5 samples (50 ms, the node's ``learning_period_s``).

1. **Payload or push** (:mod:`lifelong_learning.dynamics.payload`): after 20 s of free motion
   learned, 10 s under a load the model does not learn (held); the held residuals are fitted by a
   change of the last link's inertial parameters and judged as the node judges them
   (``contact_payload_share`` 0.9, ``contact_slow_torque`` 0.3 N m, the model's error scale
   1.4826 × the median absolute residual of its last 1000 free samples). Loads: payloads of 0.3, 1
   and 3 kg at the flange (MuJoCo's payload body), constant or rising torques added to the measured
   effort of joints 2 (and 4), steady forces on links 3, 4 and 7 (``xfrc_applied``).
2. **A slow lean** (:mod:`lifelong_learning.dynamics.slow_load`): the node's learn-or-hold rule
   offline (the contact detector and the slow-load detector with the node's defaults, references
   frozen after learned blocks as the node does, held samples not learned): 20 s of free motion,
   then a torque rising ``--ramp`` N m/s on joint 2 for 80 s. Reported: when it was held and how
   large it was then, and how much the predictions moved on free-motion probes (another
   trajectory, q̈ = 0.5 rad/s² on every joint, as ``test/nodes/test_contact_loads.py`` asks
   ``~/predict``) against the same run without the lean, with the slow-load detector and without
   it (``contact_slow_torque: 0``: the contact detector alone).
3. **False holds**: the same rule on 140 s of free motion, and on 40 s in one half of the joint
   ranges then 40 s in the other (a new region: the reference must not take it for a load); and
   how the reference's leverage tells the new region: a model that learned 38 s of the first half,
   frozen, its leverage on the next 2 s and on the other half, in units of the median leverage of
   the 5 samples it learned last (what the node compares with ``COVERAGE``).
4. **Cost** per sample on the learning thread: judging against the reference (one block of 5), the
   block's learning, freezing a reference, and the payload fit's accumulation per held sample (on
   the answering thread).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_loads.py [--out docs/benchmarks/contact.md]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from harness import describe_machine, provenance_line  # benchmarks/harness (sys.path[0] is benchmarks/)

from lifelong_learning.dynamics import SemiparametricInverseDynamics
from lifelong_learning.dynamics.contact import ContactDetector, ContactSettings
from lifelong_learning.dynamics.guard import SampleGuard
from lifelong_learning.dynamics.payload import PayloadFit
from lifelong_learning.dynamics.plausibility import MAD_TO_SIGMA, JointLimits
from lifelong_learning.dynamics.slow_load import ONSET, SlowLoadDetector, SlowLoadSettings
from lifelong_learning.sim.arm import Push, SinusoidTrajectory
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text

RATE = 100.0
BLOCK = 5
URDF = panda_urdf_text()
LOADS = {
    "payload 0.3 kg": {"payload": 0.3},
    "payload 1 kg": {"payload": 1.0},
    "payload 3 kg": {"payload": 3.0},
    "+1 N m on joint 2": {"bias": {1: 1.0}},
    "+4 N m on joint 2": {"bias": {1: 4.0}},
    "0.5 N m rising 0.05 N m/s on joint 2": {"ramp": (1, 0.5, 0.05)},
    "+3 N m on joint 2, −2 N m on joint 4": {"bias": {1: 3.0, 3: -2.0}},
    "10 N on link 4 (y)": {"push": ("panda_link4", (0.0, 10.0, 0.0))},
    "11 N on link 3 (x, y)": {"push": ("panda_link3", (10.0, 5.0, 0.0))},
    "15 N at the hand (x)": {"push": ("panda_link7", (15.0, 0.0, 0.0))},
    "10 N down at the hand": {"push": ("panda_link7", (0.0, 0.0, -10.0))},
}


def samples(log: dict, bias: np.ndarray | None = None) -> list[tuple]:
    """``(t, q, q̇, q̈, τ)`` per sample at RATE, q̈ from the node's acceleration filter (the first
    ones, while it fills, left out); ``bias`` added to the measured torques."""
    sim_rate = 1.0 / (log["t"][1] - log["t"][0])
    step = max(1, round(sim_rate / RATE))
    guard = SampleGuard(JointLimits.from_urdf(URDF, JOINT_NAMES), outlier_k=0.0)
    out = []
    for i in range(0, log["t"].size, step):
        tau = log["tau"][i] + (0.0 if bias is None else bias[i])
        admitted = guard.admit(log["t"][i], log["q"][i], log["qd"][i], tau)
        if admitted.learn:
            out.append((log["t"][i], log["q"][i], log["qd"][i], admitted.qdd, tau))
    return out


def stack(rows: list[tuple]) -> tuple[np.ndarray, ...]:
    return tuple(np.array([r[k] for r in rows]) for k in range(5))


def learned(rows: list[tuple]) -> tuple[SemiparametricInverseDynamics, np.ndarray]:
    """A model that learned ``rows`` test-then-update in blocks; its residuals before learning."""
    model = SemiparametricInverseDynamics(URDF, JOINT_NAMES, forgetting="auto")
    residuals = []
    for i in range(0, len(rows), BLOCK):
        _, q, qd, qdd, tau = stack(rows[i : i + BLOCK])
        prepared = model.prepare(q, qd, qdd)
        residuals.append(tau - prepared.torque)
        model.commit(model.stage(prepared, tau, solve_weights=True))
    return model, np.concatenate(residuals)


def payload_or_push(sim: PandaSimulation) -> list[dict]:
    """Part 1: each load's verdict."""
    rows = []
    for name, load in LOADS.items():
        kw = {"payload_mass": load["payload"], "payload_at": 20.0} if "payload" in load else {}
        if "push" in load:
            kw["pushes"] = [Push(20.0, 30.0, load["push"][0], load["push"][1])]
        log = sim.run(30.0, seed=5, **kw)
        bias = np.zeros_like(log["tau"])
        on = log["t"] >= 20.0
        for j, value in load.get("bias", {}).items():
            bias[on, j] = value
        if "ramp" in load:
            j, start, rate = load["ramp"]
            bias[on, j] = start + rate * (log["t"][on] - 20.0)
        data = samples(log, bias)
        free = [r for r in data if r[0] < 20.0]
        model, residuals = learned(free)
        _, q, qd, qdd, tau = stack([r for r in data if r[0] >= 20.0])
        prepared = model.prepare(q, qd, qdd)
        fit = PayloadFit(model.regressor)
        fit.add(prepared.columns, tau - prepared.torque)
        scale = MAD_TO_SIGMA * np.median(np.abs(residuals[-1000:]), axis=0)
        verdict = fit.verdict(scale, np.full(7, 0.3), 0.9)
        worst = int(np.argmax(verdict.unexplained))
        rows.append(
            {
                "load": name,
                "explained": verdict.explained,
                "share": verdict.fraction,
                "mass": verdict.mass,
                "why": verdict.why_not,
                "worst": JOINT_NAMES[worst],
                "left": verdict.unexplained[worst],
                "change": verdict.change[worst],
            }
        )
        print(name, verdict.describe(JOINT_NAMES), flush=True)
    return rows


def hold_rule(rows: list[tuple], slow_on: bool) -> dict:
    """The node's learn-or-hold rule on ``rows``: the model after them, holds and when."""
    model = SemiparametricInverseDynamics(URDF, JOINT_NAMES, forgetting="auto")
    contact = ContactDetector(7, ContactSettings(max_s=1e9))
    slow = SlowLoadDetector(7, SlowLoadSettings())  # (updated only with ``slow_on``)
    reference, onsets, held, judge_s, learn_s = None, [], 0, 0.0, 0.0
    for i in range(0, len(rows), BLOCK):
        t, q, qd, qdd, tau = stack(rows[i : i + BLOCK])
        prepared = model.prepare(q, qd, qdd)
        block = contact.update_block(t, tau - prepared.torque, record=np.full(t.size, not slow.holding))
        free = block.learn & (not slow.holding)
        if slow_on and reference is not None and block.learn.any():
            t0 = time.perf_counter()
            judged = prepared.take(list(np.flatnonzero(block.learn)))
            predicted, leverage = model.predict_frozen(reference, judged)
            events = slow.update(t[block.learn], tau[block.learn] - predicted, leverage)
            onsets += [e.t for e in events if e.kind == ONSET]
            judge_s += time.perf_counter() - t0
            if slow.holding:
                free &= t < slow.held_since
        keep = list(np.flatnonzero(free))
        held += t.size - len(keep)
        if keep:
            t0 = time.perf_counter()
            part = prepared.take(keep)
            model.commit(model.stage(part, tau[keep], solve_weights=True))
            learn_s += time.perf_counter() - t0
            if slow_on and slow.wants_reference:
                reference = model.freeze()
                slow.reference_taken(t[keep[-1]], model.predict_frozen(reference, part)[1])
    return {
        "model": model,
        "onsets": onsets,
        "held": held,
        "judge_s": judge_s,
        "learn_s": learn_s,
        "slow": slow,
    }


def probes_of(sim: PandaSimulation) -> tuple[np.ndarray, ...]:
    """Free-motion probe states (another trajectory), q̈ = 0.5 rad/s² on every joint."""
    log = sim.run(10.0, seed=77, log_every=50)
    return log["q"], log["qd"], np.full_like(log["q"], 0.5)


def lean(sim: PandaSimulation, ramp: float) -> dict:
    """Part 2: 20 s free, then ``ramp`` N m/s on joint 2 for 80 s."""
    log = sim.run(100.0, seed=5)
    on = log["t"] >= 20.0
    bias = np.zeros_like(log["tau"])
    bias[on, 1] = ramp * (log["t"][on] - 20.0)
    clean, leaning = samples(log), samples(log, bias)
    probes = probes_of(sim)
    base = hold_rule(clean, True)["model"].predict(*probes)
    out = {"ramp": ramp}
    for label, slow_on in (("slow-load detector", True), ("contact detector alone", False)):
        run = hold_rule(leaning, slow_on)
        moved = np.abs(run["model"].predict(*probes) - base)
        onset = run["onsets"][0] if run["onsets"] else None
        out[label] = {
            "moved": float(moved.max()),
            "moved joint 2": float(moved[:, 1].max()),
            "onset": onset,
            "load at onset": None if onset is None else ramp * (onset - 20.0),
            "held": run["held"],
        }
        print(label, out[label], flush=True)
    return out


def false_holds(sim: PandaSimulation) -> list[dict]:
    """Part 3: holds on free motion, and on a new region."""
    lo, hi = sim.lower, sim.upper
    mid = (lo + hi) / 2
    first = sim.run(40.0, trajectory=SinusoidTrajectory(lo, mid, seed=1, fraction=0.8))
    second = sim.run(40.0, trajectory=SinusoidTrajectory(mid, hi, seed=2, fraction=0.8))
    second["t"] = second["t"] + 40.0
    regions = {k: np.concatenate([first[k], second[k]]) for k in ("t", "q", "qd", "tau")}
    rows = []
    for name, log in (
        ("140 s of free motion", sim.run(140.0, seed=5)),
        ("40 s in one half, 40 s in the other", regions),
    ):
        run = hold_rule(samples(log), True)
        slow = run["slow"]
        rows.append(
            {"stream": name, "holds": slow.holds, "held": run["held"], "references": slow.references,
             "retakes": slow.retakes, "judge_s": run["judge_s"], "learn_s": run["learn_s"]}
        )  # fmt: skip
        print(rows[-1], flush=True)
    rows[-1]["coverage"] = coverage(samples(regions))
    print(rows[-1]["coverage"], flush=True)
    return rows


def coverage(rows: list[tuple]) -> dict[str, np.ndarray]:
    """Part 3: leverage quantiles (10/50/90 %) of a reference frozen at 38 s, in units of what it
    learned last, on the next 2 s (the same region) and on the samples from 40 s (the other half)."""
    before = [r for r in rows if r[0] < 38.0]
    model, _ = learned(before)
    reference = model.freeze()
    _, q, qd, qdd, _ = stack(before[-BLOCK:])
    h_ref = float(np.median(model.predict_frozen(reference, model.prepare(q, qd, qdd))[1]))
    out = {}
    for name, lo, hi in (("the same region", 38.0, 40.0), ("the other half", 40.0, 80.0)):
        _, q, qd, qdd, _ = stack([r for r in rows if lo <= r[0] < hi])
        leverage = model.predict_frozen(reference, model.prepare(q, qd, qdd))[1]
        out[name] = np.quantile(leverage / h_ref, [0.1, 0.5, 0.9])
    return out


def cost(sim: PandaSimulation) -> dict:
    """Part 4: per-sample costs, medians of repeated timings."""
    rows = samples(sim.run(30.0, seed=5))
    model, _ = learned(rows[:2000])
    _, q, qd, qdd, tau = stack(rows[2000 : 2000 + BLOCK])
    prepared = model.prepare(q, qd, qdd)
    reference = model.freeze()
    fit = PayloadFit(model.regressor)

    def timed(fn, n=200) -> float:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    return {
        "judge per sample": timed(lambda: model.predict_frozen(reference, prepared)) / BLOCK,
        "learn per sample": timed(lambda: model.stage(prepared, tau, solve_weights=True), 50) / BLOCK,
        "freeze": timed(model.freeze, 50),
        "payload fit per sample": timed(lambda: fit.add(prepared.columns, tau - prepared.torque)) / BLOCK,
        "verdict": timed(lambda: fit.verdict(np.full(7, 0.05), np.full(7, 0.3), 0.9)),
    }


def report(parts: dict, args: argparse.Namespace, total: float) -> str:
    lines = [
        f"\n## {time.strftime('%Y-%m-%d')}: held loads, a slow lean, false holds, cost",
        "",
        f"`OPENBLAS_NUM_THREADS=1 python benchmarks/bench_loads.py` (100 Hz joint states, the node's "
        f"defaults). {provenance_line()}. Machine: {describe_machine()}. Total time {total:.0f} s.",
        "",
        "### A held load: payload or push",
        "",
        "| load (from 20 s on, 10 s held) | a payload? | share explained | fitted mass change [kg] | "
        "joint left with the most: RMS left / RMS of the load [N m] | why not |",
        "|---|---|---:|---:|---|---|",
    ]
    for r in parts["payload"]:
        lines.append(
            f"| {r['load']} | {'yes' if r['explained'] else 'no'} | {100 * r['share']:.1f} % | "
            f"{r['mass']:+.2f} | {r['worst']}: {r['left']:.2f} / {r['change']:.2f} | {r['why']} |"
        )
    lines += ["", "### A slow lean", ""]
    lines += [
        "| ramp on joint 2 | rule | held at | load then [N m] | samples not learned | predictions moved on "
        "probes, joint 2 / any joint [N m] |",
        "|---|---|---|---:|---:|---|",
    ]
    for r in parts["lean"]:
        for label in ("slow-load detector", "contact detector alone"):
            x = r[label]
            at = "never" if x["onset"] is None else f"{x['onset'] - 20.0:.1f} s into it"
            load = "" if x["load at onset"] is None else f"{x['load at onset']:.2f}"
            lines.append(
                f"| {r['ramp']:g} N m/s for 80 s | {label} | {at} | {load} | {x['held']} | "
                f"{x['moved joint 2']:.2f} / {x['moved']:.2f} |"
            )
    lines += [
        "",
        "### False holds",
        "",
        "| stream | slow loads held | samples not learned | references (retaken on trial) |",
        "|---|---:|---:|---|",
    ]
    for r in parts["false"]:
        lines.append(f"| {r['stream']} | {r['holds']} | {r['held']} | {r['references']} ({r['retakes']}) |")
    ratios = parts["false"][-1]["coverage"]
    lines += [
        "",
        "Leverage of a reference frozen after 38 s in the first half, in units of that of the samples it "
        "learned last (10 / 50 / 90 %; judged up to 10): "
        + "; ".join(f"{name} {' / '.join(f'{x:.1f}' for x in q)}" for name, q in ratios.items())
        + ".",
    ]
    c = parts["cost"]
    lines += [
        "",
        "### Cost",
        "",
        f"Per sample, median of repeated timings in this process: judging against the reference "
        f"{1e6 * c['judge per sample']:.0f} µs (learning thread; at most 50 judged a second of stamps), "
        f"learning {1e6 * c['learn per sample']:.0f} µs (a block of {BLOCK}), freezing a reference "
        f"{1e3 * c['freeze']:.2f} ms (at most every few seconds), the payload fit "
        f"{1e6 * c['payload fit per sample']:.1f} µs per held sample (answering thread), a verdict "
        f"{1e6 * c['verdict']:.0f} µs (once a second of a load held beyond contact_max_s).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    t0 = time.perf_counter()
    sim = PandaSimulation()
    parts = {
        "payload": payload_or_push(sim),
        "lean": [lean(sim, 0.05), lean(sim, 0.02)],
        "false": false_holds(sim),
        "cost": cost(sim),
    }
    text = report(parts, args, time.perf_counter() - t0)
    print(text)
    if args.out is not None:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
