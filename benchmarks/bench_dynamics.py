"""Benchmark of the online inverse-dynamics learners on the simulated Panda (thesis §8.4).

(1) Thesis protocol: train on trajectory A (10,000 samples), then test-then-update on 10
    consecutive chunks of 1,000 samples of trajectory B; per-joint nMSE over time for the
    URDF's RNEA as is, P, NP and SP. Then a 1 kg payload appears (B continues): time for SP
    with forgetting to get back to its pre-payload error, vs SP without forgetting.
(2) Latency per sample (predict + update, 7 joints) of SP at several D, against one BLAS
    rank-1 update (scipy.linalg.blas.dsyr) of a D×D matrix measured in the same run.

Run: OMP_NUM_THREADS=1 ... python benchmarks/bench_dynamics.py [--quick]
Writes docs/benchmarks/dynamics.md and docs/benchmarks/dynamics.png.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from harness import Latencies, NodeUnderTest, describe_machine  # noqa: E402 - benchmarks/harness
from scipy.linalg.blas import dsyr  # noqa: E402

from lifelong_learning.dynamics import (  # noqa: E402
    RigidBodyRegressor,
    SemiparametricInverseDynamics,
    estimate_accelerations,
)
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def simulate(args):
    sim = PandaSimulation(timestep=0.002)
    dt = 0.002 * args.log_every
    n_a, n_b, n_p = args.train, args.chunks * args.chunk, args.payload_samples
    A = sim.run(n_a * dt, seed=1, log_every=args.log_every)
    B = sim.run(
        (n_b + n_p) * dt, seed=2, log_every=args.log_every, payload_mass=1.0, payload_at=n_b * dt - 1e-9
    )
    if args.estimated_acceleration:
        for log in (A, B):
            log["qdd"] = estimate_accelerations(log["t"], log["qd"])
    return A, B, dt


def test_then_update(model, B, n):
    pred = np.zeros((n, 7))
    for i in range(n):
        q, qd, qdd, tau = B["q"][i], B["qd"][i], B["qdd"][i], B["tau"][i]
        pred[i] = model.predict(q, qd, qdd)
        model.update(q, qd, qdd, tau)
    return pred


def experiment(args):
    urdf = panda_urdf_text()
    A, B, dt = simulate(args)
    n_b = args.chunks * args.chunk
    n_total = n_b + args.payload_samples
    # The thesis protocol: P is the rigid-body model alone (no friction terms) unless --friction.
    friction = ("viscous", "coulomb") if args.friction else ()
    kw = {
        "n_features": args.features,
        "bandwidth": args.bandwidth,
        "lam_residual": args.lam,
        "friction": friction,
    }
    models = {
        "P": SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode="parametric", friction=friction),
        "NP": SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode="nonparametric", **kw),
        "SP": SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode="semiparametric", **kw),
        f"SP β={args.forgetting}": SemiparametricInverseDynamics(
            urdf, JOINT_NAMES, mode="semiparametric", forgetting=args.forgetting, **kw
        ),
    }
    preds = {"RNEA (URDF)": RigidBodyRegressor(urdf, JOINT_NAMES).rnea(B["q"], B["qd"], B["qdd"])[:n_total]}
    for name, m in models.items():
        t0 = time.perf_counter()
        m.update(A["q"], A["qd"], A["qdd"], A["tau"])
        preds[name] = test_then_update(m, B, n_total)
        print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
    tau = B["tau"][:n_total]
    var = tau[:n_b].var(axis=0)  # per-joint variance of trajectory B before the payload
    # Normalized squared error per sample: its mean over any window is that window's nMSE
    # (lifelong_learning.core.metrics.normalized_mse with this variance; the variance is > 0 here).
    sq = {k: (p - tau) ** 2 / var for k, p in preds.items()}
    return sq, dt, var


def summarize(sq, args, dt):
    n_b, c, tr = args.chunks * args.chunk, args.chunk, args.transient
    rows = {}
    for name, e in sq.items():
        chunks = e[:n_b].reshape(args.chunks, c, 7)
        rows[name] = {
            "transient": chunks[:, :tr].mean(axis=(0, 1)),
            "steady": chunks[:, tr:].mean(axis=(0, 1)),
            "per_chunk": chunks.mean(axis=(1, 2)),
            "last_chunk": chunks[-1].mean(axis=0),
        }
    # payload: rolling mean nMSE (over joints and a window), time back to the pre-payload level
    w = args.window
    recovery = {}
    for name, e in sq.items():
        per_sample = e.mean(axis=1)
        pre = per_sample[n_b - c : n_b].mean()
        roll = np.convolve(per_sample, np.ones(w) / w, mode="valid")  # roll[i] = mean of [i, i+w)
        after = roll[n_b:]
        t_rec = None
        if after.size:
            peak = int(np.argmax(after))
            back = np.nonzero(after[peak:] <= args.recovery_factor * pre)[0]
            if back.size:
                t_rec = (peak + back[0] + w) * dt  # end of that window, from the payload
        recovery[name] = {
            "pre": pre,
            "peak": after.max() if len(after) else np.nan,
            "first10": per_sample[n_b : n_b + round(10.0 / dt)].mean(),
            "time": t_rec,
            "final": per_sample[-c:].mean(),
            "roll": roll,
        }
    return rows, recovery


def latency(args):
    urdf = panda_urdf_text()
    rng = np.random.default_rng(0)
    out = []
    for D in args.latency_features:
        m = SemiparametricInverseDynamics(urdf, JOINT_NAMES, n_features=D, forgetting=0.9995)
        reg = m.regressor
        n = args.latency_samples
        q = rng.uniform(reg.lower_limit, reg.upper_limit, (n + 20, 7))
        qd, qdd, tau = rng.standard_normal((3, n + 20, 7))
        times = []
        for i in range(n + 20):
            t0 = time.perf_counter()
            m.predict(q[i], qd[i], qdd[i])
            m.update(q[i], qd[i], qdd[i], tau[i])
            times.append(time.perf_counter() - t0)
        times = np.array(times[20:])
        A = np.asfortranarray(np.eye(D))
        x = rng.standard_normal(D)
        ts = []
        for _ in range(max(50, n)):
            t0 = time.perf_counter()
            A = dsyr(1e-6, x, a=A, lower=0, overwrite_a=1)
            ts.append(time.perf_counter() - t0)
        floor = np.median(ts)
        out.append((D, np.median(times), np.percentile(times, 99), floor))
        print(
            f"D={D}: median {np.median(times) * 1e3:.3f} ms, p99 {np.percentile(times, 99) * 1e3:.3f} ms, "
            f"dsyr {floor * 1e3:.4f} ms, ratio {np.median(times) / floor:.1f}",
            flush=True,
        )
    return out


def node_latency(args):
    """Node over DDS: publish sim joint states at args.node_rate Hz to the node executable (own
    process, SP with D = args.features, learning on); latency = reply receipt − publish time."""
    from sensor_msgs.msg import JointState

    from lifelong_learning.sim.panda import joint_states, panda_urdf_path

    rate, duration = args.node_rate, args.node_seconds
    log = PandaSimulation(timestep=1.0 / rate).run(duration + 1.0, seed=7)
    states = list(joint_states(log))
    params = {
        "urdf_path": panda_urdf_path(),
        "joint_names": list(JOINT_NAMES),
        "n_features": args.features,
        "diagnostics_period_s": 0.0,
    }
    with NodeUnderTest("inverse_dynamics", params=params, peer_name="bench_dynamics_peer") as bench:
        pub = bench.peer.create_publisher(JointState, "joint_states", 100)
        latencies = Latencies()
        bench.peer.create_subscription(
            JointState,
            "predicted_torque",
            lambda m: latencies.receive((m.header.stamp.sec, m.header.stamp.nanosec)),
            1000,
        )
        bench.wait_for(
            lambda: (
                bench.peer.count_subscribers("joint_states") > 0
                and bench.peer.count_publishers("predicted_torque") > 0
            ),
            60,
            "subscribed to joint_states and publishing predicted_torque",
        )
        time.sleep(1.0)
        backlog = []
        n = min(len(states), int(duration * rate))
        for k in bench.paced(n, rate):
            st = states[k]
            msg = JointState(
                name=st["name"], position=st["position"], velocity=st["velocity"], effort=st["effort"]
            )
            msg.header.stamp.sec = 1000 + k // 1000
            msg.header.stamp.nanosec = (k % 1000) * 1_000_000
            latencies.send((msg.header.stamp.sec, msg.header.stamp.nanosec))
            pub.publish(msg)
            if k % rate == 0:
                backlog.append(k - latencies.answered)
        bench.spin_until(lambda: latencies.answered >= n, 2.0, period=0.01)
    p50, p99 = latencies.percentiles()
    return {
        "rate": rate,
        "seconds": duration,
        "sent": n,
        "received": latencies.answered,
        "p50": p50,
        "p99": p99,
        "backlog_max": int(max(backlog)) if backlog else 0,
        "backlog_last": int(backlog[-1]) if backlog else 0,
    }


def plot(rows, recovery, args, dt, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    n_b, c = args.chunks * args.chunk, args.chunk
    for name, r in recovery.items():
        t = (np.arange(r["roll"].size) + args.window) * dt
        before = n_b - args.window + 1  # windows that end before the payload
        axes[0].semilogy(t[:before], r["roll"][:before], label=name, lw=1)
        axes[1].semilogy(t[n_b - c :] - n_b * dt, r["roll"][n_b - c :], label=name, lw=1)
    for k in range(1, args.chunks):
        axes[0].axvline(k * c * dt, color="0.85", lw=0.5)
    axes[0].set(
        xlabel="time on trajectory B (s)",
        ylabel=f"nMSE, mean of 7 joints, {args.window}-sample window",
        title=f"test-then-update on B (chunks of {c})",
    )
    axes[1].axvline(0, color="k", lw=0.8)
    axes[1].set(xlabel="time since the 1 kg payload (s)", title="payload appears at t = 0")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def protocol_lines(args, rows, dt, cmd):
    """The header, the protocol and the transient / steady-state tables."""
    J = " | ".join(f"j{i}" for i in range(1, 8))
    lines = [
        "# Online inverse dynamics on the simulated Panda (thesis ch. 8 protocol)",
        "",
        f"Command: `{cmd}`",
        "",
        f"Machine: {describe_machine()}",
        "",
        "Plant: MuJoCo Panda (dm-robotics-panda MJCF, gravcomp 0, damping + Coulomb friction) under",
        "computed-torque control tracking random sums of sinusoids; learner's model: example-robot-data",
        f"Panda URDF. Samples every {dt * 1e3:.0f} ms; q̈ "
        + (
            "estimated by the causal Savitzky–Golay filter."
            if args.estimated_acceleration
            else "from the simulator."
        ),
        f"Train on trajectory A ({args.train} samples, batch), then test-then-update on "
        f"{args.chunks} chunks of {args.chunk} samples of trajectory B, then "
        f"{args.payload_samples} samples with a 1 kg payload.",
        f"NP/SP: {args.features} random Fourier features, bandwidth {args.bandwidth}, λ = {args.lam}; "
        "P: URDF prior, λ = 0.01.",
        "nMSE = squared error / variance of the joint's torque on B (before the payload).",
        "",
        f"## Transient (first {args.transient} samples of each chunk) and steady state (the rest), "
        "nMSE averaged over chunks",
        "",
        f"| model | part | mean | {J} |",
        "|---|---|---|" + "---|" * 7,
    ]
    for name, r in rows.items():
        for part in ("transient", "steady"):
            v = r[part]
            lines.append(f"| {name} | {part} | {v.mean():.4f} | " + " | ".join(f"{x:.4f}" for x in v) + " |")
    lines += [
        "",
        "Mean nMSE per chunk:",
        "",
        "| model | " + " | ".join(str(k + 1) for k in range(args.chunks)) + " |",
        "|---|" + "---|" * args.chunks,
    ]
    for name, r in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{x:.4f}" for x in r["per_chunk"]) + " |")
    sp, np_, p = rows["SP"], rows["NP"], rows["P"]
    return [
        *lines,
        "",
        f"- SP vs NP in the transient: {sp['transient'].mean():.4f} vs {np_['transient'].mean():.4f} "
        f"({'SP better' if sp['transient'].mean() < np_['transient'].mean() else 'SP NOT better'}).",
        f"- SP vs P at steady state: {sp['steady'].mean():.4f} vs {p['steady'].mean():.4f} "
        f"({'SP better' if sp['steady'].mean() < p['steady'].mean() else 'SP NOT better'}).",
    ]


def payload_lines(args, recovery, dt):
    """The 1 kg payload: recovery of each model, and the plot."""
    lines = [
        "",
        "## 1 kg payload",
        "",
        f"Recovery time: from the payload to the end of the first {args.window}-sample "
        f"({args.window * dt:.0f} s) window, after the worst one, whose nMSE (mean of 7 joints) is back "
        f"within {args.recovery_factor} × its mean over the last chunk before the payload.",
        "",
        "| model | nMSE before | peak after | mean over the first 10 s after | recovery time (s) "
        "| nMSE over the last chunk |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in recovery.items():
        t = f"{r['time']:.2f}" if r["time"] is not None else f"not within {args.payload_samples * dt:.0f} s"
        lines.append(
            f"| {name} | {r['pre']:.4f} | {r['peak']:.4f} | {r['first10']:.4f} | {t} | {r['final']:.4f} |"
        )
    return [*lines, "", "![nMSE over time](dynamics.png)", ""]


def latency_lines(lat):
    """The latency per sample against the dsyr floor (none if not measured)."""
    if not lat:
        return []
    lines = [
        "## Latency per sample (SP, predict + update, 7 joints, forgetting 0.9995, one thread)",
        "",
        "Floor: one `scipy.linalg.blas.dsyr` rank-1 update of a D×D matrix, median, same run.",
        "",
        "| D | median (ms) | p99 (ms) | dsyr floor (ms) | median / floor |",
        "|---|---|---|---|---|",
    ]
    for D, med, p99, floor in lat:
        lines.append(f"| {D} | {med * 1e3:.3f} | {p99 * 1e3:.3f} | {floor * 1e3:.4f} | {med / floor:.1f} |")
    return [*lines, ""]


def node_lines(args, node):
    """The node over DDS (none if not measured)."""
    if not node:
        return []
    return [
        "## Node over DDS",
        "",
        f"The `inverse_dynamics` executable in its own process (SP, D = {args.features}, learning on, q̈ "
        f"estimated), fed simulated joint states at {node['rate']} Hz for {node['seconds']} s by a peer "
        "process (rmw_fastrtps_cpp, localhost); latency = receipt of the predicted torque − publish "
        "time. The node subscribes with sensor-data QoS (best effort, depth 5): when it falls behind "
        "it drops messages instead of queueing them.",
        "",
        "| sent | answered | p50 (ms) | p99 (ms) | max unanswered (dropped or queued) | at the end |",
        "|---|---|---|---|---|---|",
        f"| {node['sent']} | {node['received']} | {node['p50'] * 1e3:.2f} | {node['p99'] * 1e3:.2f} | "
        f"{node['backlog_max']} | {node['backlog_last']} |",
        "",
    ]


def write_markdown(path, args, rows, recovery, lat, dt, cmd, node=None):
    lines = protocol_lines(args, rows, dt, cmd) + payload_lines(args, recovery, dt)
    path.write_text("\n".join(lines + latency_lines(lat) + node_lines(args, node)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short runs (smoke test)")
    ap.add_argument("--log-every", type=int, default=5, help="simulation steps (2 ms) per sample")
    ap.add_argument("--features", type=int, default=500)
    ap.add_argument("--bandwidth", type=float, default=8.0)
    ap.add_argument("--lam", type=float, default=0.1)
    ap.add_argument("--forgetting", type=float, default=0.999)
    ap.add_argument(
        "--friction", action="store_true", help="P with viscous + Coulomb friction terms (the node's default)"
    )
    ap.add_argument(
        "--estimated-acceleration", action="store_true", help="q̈ from the node's filter, not the sim"
    )
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument(
        "--node", action="store_true", help="also measure the node over DDS (needs a colcon build)"
    )
    ap.add_argument("--node-rate", type=int, default=500)
    ap.add_argument(
        "--recovery-factor", type=float, default=1.5, help="recovered: windowed nMSE ≤ this × before"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "dynamics.md")
    args = ap.parse_args(argv)
    if args.quick:
        args.train, args.chunks, args.chunk, args.transient, args.payload_samples = 2000, 3, 400, 100, 1200
        args.window, args.latency_features, args.latency_samples = 200, [200, 500], 100
        args.node_seconds = 10
    else:
        args.train, args.chunks, args.chunk, args.transient, args.payload_samples = 10000, 10, 1000, 200, 6000
        args.window, args.latency_features, args.latency_samples = 500, [200, 500, 1000, 2000], 500
        args.node_seconds = 60
    sq, dt, _ = experiment(args)
    rows, recovery = summarize(sq, args, dt)
    for name, r in rows.items():
        print(f"{name}: transient {r['transient'].mean():.4f} steady {r['steady'].mean():.4f}")
    for name, r in recovery.items():
        print(f"{name}: payload pre {r['pre']:.4f} recovery {r['time']}")
    lat = [] if args.no_latency else latency(args)
    node = node_latency(args) if args.node else None
    if node:
        print(f"node: {node}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plot(rows, recovery, args, dt, args.out.with_suffix(".png"))
    cmd = "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python " + " ".join(
        ["benchmarks/bench_dynamics.py", *(argv if argv is not None else sys.argv[1:])]
    )
    write_markdown(args.out, args, rows, recovery, lat, dt, cmd, node)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
