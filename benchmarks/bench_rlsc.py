"""Benchmark of incremental RLSC (thesis ch. 7, Algorithm 2) → docs/benchmarks/rlsc.md.

(a) Thesis Table 7.1 protocol: T−1 balanced classes, the T-th arrives online; total and
    rare-class test accuracy of naive RLSC (N, α = 0), batch rebalanced RLS retrained from
    scratch (RB, eq. 7.22) and Algorithm 2 (RC, α by the §7.6.3 heuristic), on sklearn
    digits (raw pixels) and on EfficientNet-Lite0 features of pybullet multi-view renders.
(b) Update cost per labeled sample vs one BLAS rank-1 update (dsyr) and vs a batch re-solve.
(c) Node latency over DDS (features in → prediction out), when --node is given.

Run single-threaded for timings:
    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 \
        python benchmarks/bench_rlsc.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from harness import Latencies, NodeUnderTest, describe_machine, git_head  # benchmarks/harness (sys.path[0])
from scipy.linalg import cho_factor, cho_solve
from scipy.linalg.blas import dsyr

from lifelong_learning.learners import IncrementalRLSC

REPO = Path(__file__).resolve().parents[1]
N_IMB = (1, 5, 10, 50, 100, 500)
LAMBDAS = np.logspace(-3, 4, 8)


# ---------------------------------------------------------------------------- data sets
def digits_data() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


def object_features(path: Path, n_objects: int, views: int) -> tuple[np.ndarray, np.ndarray]:
    """EfficientNet-Lite0 features of pybullet renders, cached in ``path`` (.npz)."""
    if path.is_file():
        with np.load(path) as f:
            if f["X"].shape[0] == n_objects * views:
                return f["X"].astype(np.float64), f["y"]
    from lifelong_learning.sim.objects import render_object_views
    from lifelong_learning.vision.feature_extractor import FeatureExtractor

    t0 = time.perf_counter()
    images, labels = render_object_views(n_objects=n_objects, views_per_object=views, size=(128, 128), seed=0)
    t1 = time.perf_counter()
    X = FeatureExtractor(backend="onnxruntime", num_threads=1).extract_batch(images)
    print(f"rendered {len(images)} views in {t1 - t0:.0f} s, features in {time.perf_counter() - t1:.0f} s")
    np.savez(path, X=X, y=labels)
    return X.astype(np.float64), labels


# ---------------------------------------------------------------------------- (a) accuracy
def hold_out_split(labels: np.ndarray, every: int) -> np.ndarray:
    """The samples IncrementalRLSC holds out from a stream (its rule, replicated for RB)."""
    held = np.zeros(labels.size, dtype=bool)
    trained: set = set()
    for i, lab in enumerate(labels):
        if (i + 1) % every == 0 and lab in trained:
            held[i] = True
        else:
            trained.add(lab)
    return held


def rebalanced_normal_equations(X, y, classes):
    """Eq. 7.22: W = (XᵀΣX + λI)⁻¹XᵀΣY, Σ_ii = 1/ρ̂(y_i); returns (XᵀΣX, XᵀΣY)."""
    col = {c: i for i, c in enumerate(classes)}
    idx = np.array([col[c] for c in y])
    counts = np.bincount(idx, minlength=len(classes))
    w = y.size / counts[idx]
    Y = np.zeros((y.size, len(classes)))
    Y[np.arange(y.size), idx] = 1.0
    Xw = X * w[:, None]
    return Xw.T @ X, Xw.T @ Y


def table_protocol(
    X, y, n_bal, n_test, n_trials, seed, rare_choice, selection_every=0, methods=("N", "RB", "RC")
):
    """Thesis §7.6.1: returns {method: {n_imb: (total acc list, rare acc list)}}, checkpoints.

    ``selection_every``: the incremental models' (IncrementalRLSC), 0 = every λ exact."""
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    per_class = min(np.bincount(y))
    n_val = n_bal // 5
    max_imb = per_class - n_test
    checkpoints = [min(n, max_imb) for n in N_IMB]
    checkpoints = sorted(set(checkpoints))
    out = {m: {n: ([], []) for n in checkpoints} for m in ("N", "RB", "RC")}
    chosen = {n: [] for n in checkpoints}
    for trial in range(n_trials):
        rare = classes[trial % classes.size] if rare_choice == "cycle" else classes[-1]
        bal_idx, test_idx, rare_idx = [], [], None
        for c in classes:
            idx = rng.permutation(np.flatnonzero(y == c))
            test_idx.append(idx[:n_test])
            if c == rare:
                rare_idx = idx[n_test : n_test + max_imb]
            else:
                bal_idx.append(idx[n_test : n_test + n_bal + n_val])
        bal = rng.permutation(np.concatenate(bal_idx))
        test = np.concatenate(test_idx)
        is_rare = y[test] == rare
        # N and RC share every learned quantity (engines, validation buffer): one model,
        # evaluated with α = 0 (N) and α = "auto" (RC).
        model = IncrementalRLSC(lambdas=LAMBDAS, alpha="auto", selection_every=selection_every)
        model.partial_fit(X[bal], y[bal])
        held = hold_out_split(y[bal], 6)
        Xb_tr, yb_tr, Xb_val, yb_val = X[bal][~held], y[bal][~held], X[bal][held], y[bal][held]
        for k, i in enumerate(rare_idx, start=1):
            model.partial_fit(X[i], y[i])
            if k not in checkpoints:
                continue
            for name, alpha in (("N", 0.0), ("RC", "auto")):
                if name not in methods:
                    continue
                if model.alpha != alpha:  # (a shared-factor model selects again when α changes)
                    model.set_params(alpha=alpha)
                pred = model.predict(X[test])
                out[name][k][0].append(np.mean(pred == y[test]))
                out[name][k][1].append(np.mean(pred[is_rare] == rare))
            chosen[k].append((model.lambda_, model.alpha_))
            if "RB" not in methods:
                continue
            # RB: batch, from scratch, λ on the balanced validation samples.
            Xtr = np.vstack([Xb_tr, X[rare_idx[:k]]])
            ytr = np.concatenate([yb_tr, y[rare_idx[:k]]])
            gram, rhs = rebalanced_normal_equations(Xtr, ytr, classes)
            best = None
            for lam in LAMBDAS:
                W = cho_solve(cho_factor(gram + lam * np.eye(gram.shape[0])), rhs)
                acc = np.mean(classes[np.argmax(Xb_val @ W, axis=1)] == yb_val)
                if best is None or acc > best[0]:
                    best = (acc, W)
            pred = classes[np.argmax(X[test] @ best[1], axis=1)]
            out["RB"][k][0].append(np.mean(pred == y[test]))
            out["RB"][k][1].append(np.mean(pred[is_rare] == rare))
    return out, checkpoints, chosen


def table_markdown(title, out, checkpoints, chosen, note):
    lines = ["", f"### {title}", "", note, ""]
    lines.append(
        "| n_imb | total N | total RB | total RC | rare N | rare RB | rare RC | RC λ (median) | RC α (mean) |"
    )
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in checkpoints:
        cells = [str(k)]
        for part in (0, 1):
            for m in ("N", "RB", "RC"):
                v = 100 * np.array(out[m][k][part])
                cells.append(f"{v.mean():.1f} ± {v.std():.1f}")
        lam = np.median([c[0] for c in chosen[k]])
        alpha = np.mean([c[1] for c in chosen[k]])
        cells += [f"{lam:g}", f"{alpha:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- (b) cost
def update_cost(d, n_lambdas, T, n_pre, n_measure, seed=0):
    """Latency of partial_fit(one sample) in steady state, and of one dsyr per λ."""
    rng = np.random.default_rng(seed)
    lambdas = np.logspace(-2, 2, n_lambdas) if n_lambdas > 1 else 1.0
    clf = IncrementalRLSC(lambdas=lambdas, alpha="auto" if n_lambdas > 1 else 0.5)
    centres = rng.normal(size=(T, d))
    labels = rng.integers(0, T, n_pre + n_measure)
    labels[:T] = np.arange(T)
    Xs = centres[labels] + rng.normal(size=(labels.size, d))
    clf.partial_fit(Xs[:n_pre], labels[:n_pre])
    times = []
    for i in range(n_pre, n_pre + n_measure):
        t = time.perf_counter()
        clf.partial_fit(Xs[i], labels[i])
        times.append(time.perf_counter() - t)
    pred_times = []
    for i in range(min(n_measure, 50)):
        clf.partial_fit(Xs[n_pre + i], labels[n_pre + i])
        t = time.perf_counter()
        clf.predict(Xs[i])
        pred_times.append(time.perf_counter() - t)
    A = np.asfortranarray(np.eye(d))
    syr = []
    for i in range(n_measure):
        x = Xs[i]
        t = time.perf_counter()
        dsyr(1.0, x, a=A, overwrite_a=True)
        syr.append(time.perf_counter() - t)
    return {
        "median": float(np.median(times)),
        "p99": float(np.percentile(times, 99)),
        "dsyr": float(np.median(syr)),
        "predict": float(np.median(pred_times)),
        "n_val": clf.n_validation_,
    }


def batch_resolve_time(d, T, k, seed=0):
    """Time to solve W = (XᵀX + λI)⁻¹XᵀY from scratch on k samples (what a non-recursive
    learner pays per new sample)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(k, d))
    Y = np.eye(T)[rng.integers(0, T, k)]
    t = time.perf_counter()
    cho_solve(cho_factor(X.T @ X + np.eye(d)), X.T @ Y)
    return time.perf_counter() - t


# ---------------------------------------------------------------------------- (c) node
def node_latency(d: int, T: int, n_per_class: int, n_frames: int, rate_hz: float) -> str:
    """Start the installed node in its own process; features in → prediction out over DDS."""
    from lifelong_learning.msg import Features, LabeledFeatures, Prediction
    from rclpy.qos import QoSProfile, qos_profile_sensor_data

    config = [REPO / "config/object_recognition.yaml"]
    bench = NodeUnderTest(
        "object_recognition",
        params_files=config,
        params={"diagnostics_period_s": 0.0},
        peer_name="rlsc_bench_peer",
    )
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(T, d))

    def features(c: int) -> list[float]:
        return (centres[c] + rng.normal(size=d)).astype(np.float32).tolist()

    with bench:
        latencies, labels_out = Latencies(), {}

        def on_prediction(msg: Prediction) -> None:
            latencies.receive(msg.header.frame_id)
            labels_out[msg.header.frame_id] = msg.label

        feat_pub = bench.peer.create_publisher(Features, "features", qos_profile_sensor_data)
        lab_pub = bench.peer.create_publisher(LabeledFeatures, "labeled_features", QoSProfile(depth=100))
        bench.peer.create_subscription(Prediction, "prediction", on_prediction, 10)
        bench.wait_for(
            lambda: feat_pub.get_subscription_count() > 0 and lab_pub.get_subscription_count() > 0,
            60,
            "subscribed to features and labeled_features",
        )
        for i in bench.paced(T * n_per_class, rate_hz):  # teach
            lab_pub.publish(LabeledFeatures(data=features(i % T), label=f"obj{i % T}"))
        bench.spin_for(2.0)
        rows = []
        for phase, teach in (("predict only", False), ("predict + labeled stream at the same rate", True)):
            latencies.clear(), labels_out.clear()
            truth = {}
            for i in bench.paced(n_frames, rate_hz):
                c = int(rng.integers(T))
                msg = Features(data=features(c))
                msg.header.frame_id = f"{phase}{i}"
                truth[msg.header.frame_id] = f"obj{c}"
                latencies.send(msg.header.frame_id)
                feat_pub.publish(msg)
                if teach:
                    lab_pub.publish(LabeledFeatures(data=features(c), label=f"obj{c}"))
            bench.spin_for(2.0)
            p50, p99 = latencies.percentiles()
            acc = np.mean([labels_out[k] == truth[k] for k in labels_out]) if labels_out else float("nan")
            answered = f"{latencies.answered}/{n_frames}"
            rows.append(f"| {phase} | {answered} | {1e3 * p50:.2f} | {1e3 * p99:.2f} | {100 * acc:.1f} |")
            print(rows[-1])
    return (
        "\n## (c) Node latency over DDS\n\n"
        f"`object_recognition` (installed package, own process, default config: 5 λ, α auto) taught "
        f"{T} classes × {n_per_class} LabeledFeatures (d = {d}) at {rate_hz:g} Hz, "
        f"then {n_frames} Features at "
        f"{rate_hz:g} Hz from another process; latency = Features publish → Prediction received "
        "(Fast DDS, localhost).\n\n"
        "| phase | answered | p50 ms | p99 ms | accuracy % |\n|---|---:|---:|---:|---:|\n"
        + "\n".join(rows)
        + "\n"
    )


# ---------------------------------------------------------------------------- report
def accuracy_sections(args: argparse.Namespace, trials: int) -> list[str]:
    """(a): the Table 7.1 protocol on digits and (unless --skip-objects) on rendered objects."""
    sections = [
        "\n## (a) Thesis Table 7.1 protocol\n\n",
        "Balanced classes get n_bal training + n_bal/5 validation samples each, fed as one "
        "shuffled stream; the rare class then arrives one sample at a time and the test "
        "accuracy is measured at each n_imb. N and RC are `IncrementalRLSC` with the λ grid "
        f"{LAMBDAS.tolist()} (every 6th sample held out, best λ on validation); N has α = 0, "
        'RC α = "auto" (§7.6.3 heuristic, grid 0, 0.1, …, 1, well-represented = ≥ 20 training '
        "samples). RB (eq. 7.22) is retrained from scratch at each n_imb on the same training "
        "samples, λ chosen on the balanced validation samples. Mean ± std over trials. "
        "The RC λ column is the median over trials of the chosen λ.\n",
    ]
    X, y = digits_data()
    n_bal, n_test = (100, 50)
    t = time.perf_counter()
    out, cps, chosen = table_protocol(X, y, n_bal, n_test, trials, 0, "cycle")
    print(f"digits protocol: {time.perf_counter() - t:.0f} s")
    note = (
        f"sklearn digits, raw 8×8 pixels / 16 (d = 64), T = 10, n_bal = {n_bal}, "
        f"n_test = {n_test} per class, {trials} trials, rare class cycles over the digits. Digits has "
        f"only ~180 images per class, so n_imb is capped at {cps[-1]} (the thesis' 100 and 500 "
        "become that cap)."
    )
    sections.append(table_markdown("Digits", out, cps, chosen, note))
    print(sections[-1])
    if args.skip_objects:
        return sections
    try:
        n_obj, views = args.objects, 220
        Xo, yo = object_features(Path(args.features_cache), n_obj, views)
        n_bal_o, n_test_o = 100, 50
        t = time.perf_counter()
        out, cps, chosen = table_protocol(Xo, yo, n_bal_o, n_test_o, trials, 1, "cycle")
        print(f"objects protocol: {time.perf_counter() - t:.0f} s")
        note = (
            f"EfficientNet-Lite0 (ImageNet weights, onnxruntime) 1280-d pooled features of "
            f"pybullet renders (`lifelong_learning.sim.objects.render_object_views`, 128×128, "
            f"random viewpoint/light/table per view), T = {n_obj} objects, {views} views each, "
            f"n_bal = {n_bal_o}, n_test = {n_test_o}, {trials} trials, rare object cycles; n_imb "
            f"capped at {cps[-1]} by the views rendered."
        )
        sections.append(table_markdown("Rendered objects, CNN features", out, cps, chosen, note))
        print(sections[-1])
    except ImportError as exc:
        sections.append(f"\nObject features not run: {exc}\n")
    return sections


def cost_sections(quick: bool) -> list[str]:
    """(b): the update cost per labeled sample against dsyr and a batch re-solve."""
    sections = [
        "\n## (b) Update cost per labeled sample\n\n",
        "`partial_fit(x, y)` of one sample in steady state (T = 30 classes; with 5 λ "
        'candidates α = "auto", every 6th sample held out and the validation buffer of V '
        "samples kept exact), compared with one `scipy.linalg.blas.dsyr` rank-1 update of a "
        "d×d matrix per λ candidate measured in the same run, and with re-solving the batch "
        "problem from scratch at k = 5000 samples. Prediction = `predict` of one sample.\n\n",
        "| d | λ candidates | V | median ms | p99 ms | dsyr per λ ms | ratio to L·dsyr | "
        "predict ms | batch re-solve (k=5000) ms | batch / update |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    ]
    for d in (256, 1280) if quick else (256, 1280, 4096):
        k_batch = 5000
        solve = batch_resolve_time(d, 30, k_batch)
        for L in (1, 5):
            n_pre = {256: 1500, 1280: 1500, 4096: 300}[d] if not quick else 400
            n_meas = 300 if d < 4096 else 100
            r = update_cost(d, L, 30, n_pre, n_meas)
            ratio = r["median"] / (L * r["dsyr"])
            row = (
                f"| {d} | {L} | {r['n_val']} | {1e3 * r['median']:.3f} | {1e3 * r['p99']:.3f} | "
                f"{1e3 * r['dsyr']:.3f} | {ratio:.1f} | {1e3 * r['predict']:.3f} | "
                f"{1e3 * solve:.0f} | {solve / r['median']:.0f} |"
            )
            print(row)
            sections.append(row + "\n")
    return sections


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few trials, small d: a smoke run")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--skip-objects", action="store_true", help="digits only")
    parser.add_argument("--objects", type=int, default=30, help="pybullet objects (classes)")
    parser.add_argument("--features-cache", default="/tmp/rlsc_bench_object_features.npz")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--node", action="store_true", help="(c): needs the colcon-built package sourced")
    parser.add_argument("--out", default=str(REPO / "docs/benchmarks/rlsc.md"))
    args = parser.parse_args(argv)
    trials = 2 if args.quick else args.trials
    sections = [
        "# Incremental RLSC (thesis ch. 7, Algorithm 2)\n\n",
        "Command (after `source .venv/bin/activate`; for --node also `source install/setup.bash` of a "
        "colcon build): `OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 "
        f"{' '.join(['python', 'benchmarks/bench_rlsc.py', *sys.argv[1:]])}`  \n",
        f"Machine: {describe_machine()}  \n",
        f"Git: {git_head()}\n",
    ]
    if not args.skip_accuracy:
        sections += accuracy_sections(args, trials)
    if not args.skip_cost:
        sections += cost_sections(args.quick)
    if args.node:
        sections.append(node_latency(1280, 30, 5 if args.quick else 20, 100 if args.quick else 600, 30.0))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("".join(sections))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
