"""Reproduction of Machart et al., "Stochastic Low-Rank Kernel Learning for Regression" (SLKL):
Table 2's sinc column and Figures 1-3.

Table 2 (sinc): 1000 training points uniform in [−5, 5]², target sin‖x‖/‖x‖ plus white Gaussian
noise at 10 dB SNR, 1000 noiseless test points, Gaussian kernel σ² = 1 (Table 1), λ = 1, ν = 0.01,
ε = 1e-4, M ∈ {256, 512, 1000}, 20 runs: KRR on all n (KRRn), KRR on the M points (KRRM), the kernel
of uniform weights on the M rank-1 terms (Unif), SLKL; test MSE ± std and m₀.
Figure 1: the objective over the iterations (ν = 0.01, M = 1000, 20 runs). Figure 2: m₀ against M
for several ν. Figure 3: m₀ over the iterations (ν = 0.01, M = 1000).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_slkl.py [--runs 20] [--fig2-runs 3] [--tight-runs 3]

Writes docs/benchmarks/slkl.md, slkl.json and slkl-figure{1,2,3}.png.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from harness import describe_machine, git_head, load_average  # noqa: E402 - benchmarks/harness

from lifelong_learning.nystrom import SLKL  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LAM, NU, TOL, LS = 1.0, 0.01, 1e-4, 1.0  # σ² = 1: length-scale σ = 1
MS = (256, 512, 1000)
FIG2_MS, FIG2_NUS = (64, 128, 256, 512, 1000), (0.001, 0.01, 0.1)
#: Table 2's sinc column as published (MSE, its ± and m₀; KRRn: "0.009 ± 09" as printed)
PUBLISHED = {
    "KRRn": {256: "0.009", 512: "0.009", 1000: "0.009"},
    "KRRM": {256: "0.0146 ± 1e-3", 512: "0.0124 ± 7e-4", 1000: "0.0099 ± 0"},
    "Unif": {256: "0.0124 ± 1e-4", 512: "0.0124 ± 3e-5", 1000: "0.0124 ± 0"},
    "SLKL": {256: "0.0106 ± 4e-4", 512: "0.0103 ± 2e-4", 1000: "0.0104 ± 1e-4"},
    "m0": {256: "83", 512: "108", 1000: "139"},
}


def sinc_data(seed: int = 0) -> dict[str, np.ndarray | float]:
    """Training rows with noise at 10 dB SNR (noise power = mean f² / 10, as MATLAB's
    ``awgn(f, 10, 'measured')``), noiseless test rows."""
    rng = np.random.default_rng(seed)

    def sinc(X: np.ndarray) -> np.ndarray:
        r = np.linalg.norm(X, axis=1)
        return np.sin(r) / r

    X, Xt = rng.uniform(-5, 5, size=(1000, 2)), rng.uniform(-5, 5, size=(1000, 2))
    f = sinc(X)
    noise_var = float((f**2).mean()) / 10.0
    y = f + np.sqrt(noise_var) * rng.normal(size=f.size)
    return {"X": X, "y": y, "Xt": Xt, "ft": sinc(Xt), "noise_var": noise_var, "signal_var": float(f.var())}


def gauss(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * ((A[:, None] - B[None]) ** 2).sum(-1) / LS**2)


def baselines(data: dict, idx: np.ndarray) -> dict[str, float]:
    """Test MSE of KRR on all n, KRR on the M points ``idx``, and KRR on the kernel of uniform
    weights K̃ = μ Σ_m c_m c_mᵀ, with μ = 1 (with all columns this is the paper's §2.1 KKᵀ) and with
    μ = 1/M (a convex combination, as §2.1's Kumar et al.): the paper gives no scale."""
    X, y, Xt, ft = data["X"], data["y"], data["Xt"], data["ft"]
    K = gauss(X, X)
    krrn = gauss(Xt, X) @ np.linalg.solve(K + LAM * np.eye(len(y)), y)
    KM = K[np.ix_(idx, idx)]
    krrm = gauss(Xt, X[idx]) @ np.linalg.solve(KM + LAM * np.eye(idx.size), y[idx])
    C, Ct = K[:, idx], gauss(Xt, X[idx])  # ridge with λ on the features √μ C
    fits = {"KRRn": krrn, "KRRM": krrm}
    for name, mu in (("Unif (μ=1)", 1.0), ("Unif (μ=1/M)", 1.0 / idx.size)):
        fits[name] = mu * Ct @ np.linalg.solve(mu * C.T @ C + LAM * np.eye(idx.size), C.T @ y)
    return {name: float(((p - ft) ** 2).mean()) for name, p in fits.items()}


def one_run(data: dict, M: int, nu: float, run: int, keep_history: bool) -> dict:
    """SLKL with seed ``run`` (its M candidates and coordinates) and the baselines on the same M points."""
    t0 = time.perf_counter()
    model = SLKL(n_candidates=M, lengthscale=LS, lam=LAM, nu=nu, tol=TOL, seed=run, device="cpu").fit(
        data["X"], data["y"]
    )
    seconds = time.perf_counter() - t0
    idx = np.sort(np.random.default_rng(run).choice(len(data["y"]), size=M, replace=False))  # SLKL's draw
    assert np.array_equal(model.centers_, data["X"][idx])
    out = {
        "M": M,
        "nu": nu,
        "run": run,
        "SLKL": float(((model.predict(data["Xt"])[:, 0] - data["ft"]) ** 2).mean()),
        "m0": model.n_active_,
        "iterations": model.n_iter_,
        "seconds": seconds,
    }
    if keep_history:
        out["objective"] = model.objective_.tolist()
        out["m0_history"] = model.n_active_history_.tolist()
    return out


def table(data: dict, runs: int) -> list[dict]:
    rows = []
    for M in MS:
        for run in range(runs):
            row = one_run(data, M, NU, run, keep_history=M == 1000)
            idx = np.sort(np.random.default_rng(run).choice(len(data["y"]), size=M, replace=False))
            rows.append({**row, **baselines(data, idx)})
            print(
                f"M={M} run={run}: SLKL {row['SLKL']:.5f} m0={row['m0']} ({row['seconds']:.2f} s)", flush=True
            )
    return rows


def tighter(data: dict, runs: int, tol: float = 1e-6) -> list[dict]:
    """SLKL at M = 1000, ν = 0.01 with a tighter stopping test (m₀ still falls when ε = 1e-4 stops)."""
    rows = []
    for run in range(runs):
        model = SLKL(n_candidates=1000, lengthscale=LS, lam=LAM, nu=NU, tol=tol, seed=run, device="cpu")
        model.fit(data["X"], data["y"])
        mse = float(((model.predict(data["Xt"])[:, 0] - data["ft"]) ** 2).mean())
        rows.append({"run": run, "tol": tol, "m0": model.n_active_, "iterations": model.n_iter_, "SLKL": mse})
        print(f"ε={tol} run={run}: m0={model.n_active_} after {model.n_iter_} iterations", flush=True)
    return rows


def figure2(data: dict, runs: int) -> list[dict]:
    rows = []
    for nu in FIG2_NUS:
        for M in FIG2_MS:
            for run in range(runs):
                r = one_run(data, M, nu, run, keep_history=False)
                rows.append({k: r[k] for k in ("M", "nu", "run", "m0", "SLKL", "seconds")})
            print(f"ν={nu} M={M}: m0 {np.mean([r['m0'] for r in rows[-runs:]]):.1f}", flush=True)
    return rows


def pm(values: list[float], fmt: str = ".4f") -> str:
    spread = np.std(values)
    return f"{np.mean(values):{fmt}} ± " + (f"{spread:.1e}" if spread > 1e-9 * abs(np.mean(values)) else "0")


def plots(rows: list[dict], fig2: list[dict], out_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in rows if r["M"] == 1000]
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in runs:
        ax.plot(np.arange(1, len(r["objective"]) + 1), r["objective"], lw=0.8)
    ax.set(
        xlabel="iteration",
        ylabel="F(μ)",
        xscale="log",
        yscale="log",
        title="Figure 1: objective, sinc, ν = 0.01, M = 1000",
    )
    fig.tight_layout()
    fig.savefig(out_dir / "slkl-figure1.png", dpi=110)
    fig, ax = plt.subplots(figsize=(6, 4))
    for nu in FIG2_NUS:
        means = [np.mean([r["m0"] for r in fig2 if r["M"] == M and r["nu"] == nu]) for M in FIG2_MS]
        ax.plot(FIG2_MS, means, marker="o", label=f"ν = {nu:g}")
    ax.set(xlabel="M", ylabel="m₀ (mean over runs)", title="Figure 2: m₀ against M, sinc")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "slkl-figure2.png", dpi=110)
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in runs:
        ax.plot(r["m0_history"], lw=0.8)
    ax.set(xlabel="iteration", ylabel="m₀", title="Figure 3: m₀ over the iterations, ν = 0.01, M = 1000")
    fig.tight_layout()
    fig.savefig(out_dir / "slkl-figure3.png", dpi=110)
    plt.close("all")


def markdown(
    data: dict,
    rows: list[dict],
    fig2: list[dict],
    tight: list[dict],
    args: argparse.Namespace,
    seconds: float,
) -> str:
    nv = data["noise_var"]
    lines = [
        "# SLKL (Machart et al.): Table 2, sinc column, and Figures 1-3",
        "",
        f"Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_slkl.py --runs {args.runs} "
        f"--fig2-runs {args.fig2_runs} --tight-runs {args.tight_runs}` (torch on 1 thread)  ",
        f"Machine: {describe_machine()}; torch {torch.__version__}, CPU  ",
        f"Git: {git_head()}, load average before: {args.load}; total time {seconds:.0f} s",
        "",
        "Setup as the paper's §5.1 and Table 1: 1000 training points uniform in [−5, 5]², target",
        "sin‖x‖/‖x‖, 1000 noiseless test points, Gaussian kernel with σ² = 1 (length-scale 1),",
        f"λ = 1, ν = {NU}, ε = {TOL} (the corrected stopping test, `lifelong_learning/nystrom/slkl.py`).",
        "What the paper leaves unsaid, and what is assumed here:",
        "",
        "- **the noise**: 10 dB SNR read as MATLAB's `awgn(f, 10, 'measured')`: noise variance = "
        f"mean f² / 10 = {nv:.5f} (the target's variance is {data['signal_var']:.4f} on these points; "
        "its mean is near 0, so reading SNR on the variance changes nothing);",
        "- **the runs**: one data set (seed 0); the 20 runs differ by the seed of the M candidate columns "
        "and of the coordinates (the paper's KRRn has no spread, so its data did not change between runs); "
        "KRRM uses the same M points as SLKL in each run;",
        "- **Unif**: the paper gives no scale for the uniform weights; both μ_m = 1 (with all columns, its "
        "§2.1 KKᵀ) and μ_m = 1/M (a convex combination, as the Kumar et al. it cites) are reported;",
        "- **the MSE**: against the noiseless test targets, as §5.1 describes the test set. The published "
        f"errors are close to the noise variance ({nv:.4f}), which a noiseless test set cannot give a KRR of "
        "this data (ours: about 5 % of it), so the paper's figures most likely include the noise (noisy test "
        "targets, or the training error). The column *+ σ²* adds the noise variance, i.e. the MSE expected "
        "against noisy test targets, for the comparison.",
        "",
        "## Table 2, sinc",
        "",
        "| method | M | ours: MSE (noiseless targets) | ours + σ² | published |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in ("KRRn", "KRRM", "Unif (μ=1)", "Unif (μ=1/M)", "SLKL"):
        for M in MS:
            vals = [r[name] for r in rows if r["M"] == M]
            published = PUBLISHED[name.split(" ")[0]][M]
            lines.append(f"| {name} | {M} | {pm(vals, '.5f')} | {np.mean(vals) + nv:.4f} | {published} |")
    for M in MS:
        m0 = [r["m0"] for r in rows if r["M"] == M]
        it = [r["iterations"] for r in rows if r["M"] == M]
        sec = [r["seconds"] for r in rows if r["M"] == M]
        lines.append(
            f"| m₀ | {M} | {np.mean(m0):.1f} ± {np.std(m0):.1f} (iterations {np.mean(it):.0f}, "
            f"{np.mean(sec):.2f} s a run) | | {PUBLISHED['m0'][M]} |"
        )
    lines += _comparison_lines(data, rows, tight)
    lines += _figure_lines(rows, fig2)
    return "\n".join(lines) + "\n"


def _comparison_lines(data: dict, rows: list[dict], tight: list[dict]) -> list[str]:
    """How the figures compare with the published ones, from the measured values."""
    nv = data["noise_var"]

    def mean(name: str, M: int) -> float:
        return float(np.mean([r[name] for r in rows if r["M"] == M]))

    def gap(name: str, added: float) -> str:
        published = PUBLISHED[name.split(" ")[0]]
        return "/".join(
            f"{100 * ((mean(name, M) + added) / float(published[M].split()[0]) - 1):+.0f} %" for M in MS
        )

    m0 = {M: mean("m0", M) for M in MS}
    gaps = ", ".join(f"{100 * (m0[M] / float(PUBLISHED['m0'][M]) - 1):+.0f} %" for M in MS)
    lines = [
        "",
        "How the figures compare:",
        "",
        f"- **m₀** comes out at {m0[256]:.0f}, {m0[512]:.0f} and {m0[1000]:.0f} against the published "
        f"83, 108 and 139 ({gaps}). At ε = 1e-4 m₀ is still falling when the runs stop (Figure 3: "
        "the test bounds the objective's decrease, not m₀'s).",
    ]
    if tight:
        t_m0 = [r["m0"] for r in tight]
        t_it = [r["iterations"] for r in tight]
        lines.append(
            f"  With ε = {tight[0]['tol']:g} ({len(tight)} runs, M = 1000) m₀ ends at {np.mean(t_m0):.0f} ± "
            f"{np.std(t_m0):.0f} after {np.mean(t_it):.0f} iterations, test MSE "
            f"{np.mean([r['SLKL'] for r in tight]):.5f}."
        )
    lines += [
        "- **the MSE**: no one reading of the paper's test set gives all its numbers. With the noise added "
        f"(*+ σ²*), ours against the published (M = 256, 512, 1000): KRRn {gap('KRRn', nv)}, KRRM "
        f"{gap('KRRM', nv)}, SLKL {gap('SLKL', nv)}, Unif (μ = 1/M) {gap('Unif (μ=1/M)', nv)}. Without it, "
        f"Unif with μ = 1/M is {gap('Unif (μ=1/M)', 0.0)} from the published 0.0124 (both flat in M), and "
        "the others are about 20 times below theirs.",
        "- **the conclusions** hold: SLKL is better than KRRM for M < n "
        f"({mean('SLKL', 256):.5f} against {mean('KRRM', 256):.5f} at M = 256), as good as KRRn, far better "
        "than the uniform convex combination, with m₀ a fraction of M that grows with M.",
    ]
    return lines


def _figure_lines(rows: list[dict], fig2: list[dict]) -> list[str]:
    runs = [r for r in rows if r["M"] == 1000]
    first = np.mean([r["objective"][0] for r in runs])
    last = [r["objective"][-1] for r in runs]
    its, m0 = [r["iterations"] for r in runs], [r["m0"] for r in runs]
    lines = [
        "",
        "## Figure 1: the objective over the iterations (ν = 0.01, M = 1000)",
        "",
        "![objective](slkl-figure1.png)",
        "",
        f"Every run starts at F(0) = ‖y‖² = {first:.2f} and ends at {np.mean(last):.4f} ± "
        f"{np.std(last):.1e} after {np.mean(its):.0f} ± {np.std(its):.0f} iterations; the curves nearly "
        "coincide after the first hundred, as in the paper's Figure 1 (which gives no numbers).",
        "",
        "## Figure 2: m₀ against M (mean over runs)",
        "",
        "![m0 against M](slkl-figure2.png)",
        "",
        "| ν | " + " | ".join(f"M = {M}" for M in FIG2_MS) + " |",
        "|---|" + "---:|" * len(FIG2_MS),
    ]
    for nu in FIG2_NUS:
        cells = [np.mean([r["m0"] for r in fig2 if r["M"] == M and r["nu"] == nu]) for M in FIG2_MS]
        lines.append(f"| {nu:g} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    peak = [max(r["m0_history"]) for r in runs]
    lines += [
        "",
        "As in the paper, m₀ stays well below M, grows with M and falls as ν grows (the paper's Figure 2 "
        "gives the trend, not the values).",
        "",
        "## Figure 3: m₀ over the iterations (ν = 0.01, M = 1000)",
        "",
        "![m0 over iterations](slkl-figure3.png)",
        "",
        f"m₀ rises to {np.mean(peak):.0f} ± {np.std(peak):.0f} and settles at "
        f"{np.mean(m0):.0f} ± {np.std(m0):.0f}: coordinates enter early and some leave once others "
        "explain their part of the targets.",
        "",
        "## Boston and abalone",
        "",
        "Not run: neither data set can be had offline here (scikit-learn no longer ships Boston, abalone "
        "never was in it, and this machine has no network).",
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="runs per M for Table 2 and Figures 1, 3")
    ap.add_argument("--fig2-runs", type=int, default=3, help="runs per (M, ν) for Figure 2")
    ap.add_argument("--tight-runs", type=int, default=3, help="runs at ε = 1e-6 (M = 1000)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "slkl.md"))
    args = ap.parse_args()
    args.load = load_average()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    data = sinc_data(0)
    rows = table(data, args.runs)
    fig2 = figure2(data, args.fig2_runs)
    tight = tighter(data, args.tight_runs)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    plots(rows, fig2, out.parent)
    text = markdown(data, rows, fig2, tight, args, time.perf_counter() - t0)
    out.write_text(text)
    slim = [{k: v for k, v in r.items() if k not in ("objective", "m0_history")} for r in rows]
    results = {"table": slim, "figure2": fig2, "tighter": tight}
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    print(text)


if __name__ == "__main__":
    main()
