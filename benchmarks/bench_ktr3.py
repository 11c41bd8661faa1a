"""Reproduction of the experiment of Jun, Cutkosky and Orabona's KTR³ poster: excess risk against n,
log-log, for KTR³ and plain kernel ridge regression, with λ chosen per n (the one minimizing the
average excess risk over the seeds, as the poster does), and the fitted slopes against the theory.

Spline regression on [0, 1] (uniform inputs): the periodic kernel
``k(x, x') ∝ 1 + 2 Σ_{m≥1} m^(−1/b) cos(2πm(x − x'))`` has eigenvalues ``m^(−1/b)`` (``Tr L_K^b`` at
the edge of finite), computed exactly by Bernoulli polynomials; the target
``f*(x) = Σ_m m^(−s) √2 cos(2πm x)`` with ``s = β/b + 1/2 + 0.05`` lies in ``L_K^β(L²)`` and barely
more (source condition ``β``). Cases: (a) ``b = 1/8, β = 7/16`` (the poster's); (b) the hard regime
``b = 1/4, β = 1/4`` (``2β + b < 1``: earlier bounds give ``n^(−2β) = n^(−1/2)``); (c) ``b = β = 1/2``,
where the low-noise rate differs. Each with noise (σ = 0.5) and without (Bayes risk 0).

KTR³'s expected excess risk over ``k`` (what Theorem 1 bounds) is estimated per data set by a
stratified sample of prefixes ``k`` (one per ``n/64`` rows; all of them for ``n ≤ 64``), each prefix
from one Cholesky factor (``lifelong_learning.nystrom.ktr3.kernel_ridge_prefixes``), truncated to
the training targets' range; the risk is the L² distance to ``f*`` on a 2048-point grid of [0, 1].

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_ktr3.py [--seeds 8] [--max-log2n 10]

Writes docs/benchmarks/ktr3.md, ktr3.json and ktr3.png.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from fractions import Fraction  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from harness import describe_machine, git_head, load_average  # noqa: E402 - benchmarks/harness

from lifelong_learning.nystrom.ktr3 import kernel_ridge_prefixes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: (name, b, β) of the cases
CASES = (
    ("a", Fraction(1, 8), Fraction(7, 16)),
    ("b", Fraction(1, 4), Fraction(1, 4)),
    ("c", Fraction(1, 2), Fraction(1, 2)),
)
NOISE = 0.5
LAMS = np.logspace(-12, -1, 12)
GRID = 2048
TERMS = 20_000  # of the target's series (the rest is below 1e-9 in L²)
STRATA = 64
#: Bernoulli polynomials B_2k(t), coefficients from t^0 up
BERNOULLI = {
    2: (1 / 6, -1.0, 1.0),
    4: (-1 / 30, 0.0, 1.0, -2.0, 1.0),
    8: (-1 / 30, 0.0, 2 / 3, 0.0, -7 / 3, 0.0, 14 / 3, -4.0, 1.0),
}


def kernel(A: np.ndarray, B: np.ndarray, alpha: int) -> np.ndarray:
    """``k(x, x') = (1 + 2 Σ m^(−α) cos(2πm(x − x'))) / (1 + 2ζ(α))`` for even ``α`` (sup k = 1), by
    ``Σ_{m≥1} cos(2πmt)/m^(2j) = (−1)^(j+1) (2π)^(2j) B_2j(t) / (2 (2j)!)`` on ``t ∈ [0, 1)``."""
    t = np.mod(A[:, None] - B[None, :], 1.0)
    j = alpha // 2
    scale = (-1) ** (j + 1) * (2 * math.pi) ** alpha / (2 * math.factorial(alpha))
    series = scale * np.polynomial.polynomial.polyval(t, BERNOULLI[alpha])
    zeta = scale * BERNOULLI[alpha][0]  # Σ m^(−α), at t = 0
    return (1 + 2 * series) / (1 + 2 * zeta)


def target(x: np.ndarray, s: float) -> np.ndarray:
    """``f*(x) = Σ_{m ≤ TERMS} m^(−s) √2 cos(2πm x)``."""
    out = np.zeros_like(x)
    for start in range(1, TERMS + 1, 2000):
        m = np.arange(start, min(start + 2000, TERMS + 1))
        out += (np.sqrt(2) * m ** (-s) * np.cos(2 * math.pi * np.outer(x, m))).sum(1)
    return out


def one_seed(alpha: int, s: float, noise: float, seed: int, ns: list[int], f_grid: np.ndarray) -> dict:
    """Excess risks ``{n: (KRR (λ,), KTR³ (λ,))}`` of one data set (nested over n) for every λ."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, max(ns))
    y_all = target(x, s) + noise * rng.normal(size=x.size)
    grid = (np.arange(GRID) + 0.5) / GRID
    out = {}
    for n in ns:
        X, y = x[:n], y_all[:n]
        K, Kg = torch.as_tensor(kernel(X, X, alpha)), kernel(grid, X, alpha)
        width = max(1, n // STRATA)
        ks = sorted({int(a + rng.integers(0, width)) for a in range(0, n, width)} - {n})
        low, high = y.min(), y.max()
        krr, ktr = np.full(len(LAMS), np.nan), np.full(len(LAMS), np.nan)
        for i, lam in enumerate(LAMS):
            try:
                fits = kernel_ridge_prefixes(K, torch.as_tensor(y[:, None]), n * lam, [*ks, n])
            except torch.linalg.LinAlgError:
                continue
            krr[i] = np.mean((Kg @ fits[n].numpy()[:, 0] - f_grid) ** 2)
            prefix = [np.clip(Kg[:, :k] @ fits[k].numpy()[:, 0], low, high) for k in ks]
            ktr[i] = np.mean([np.mean((p - f_grid) ** 2) for p in prefix])
        out[n] = (krr, ktr)
    return out


def run_case(b: Fraction, beta: Fraction, noise: float, seeds: int, ns: list[int]) -> dict:
    """Per n: the λ minimizing the mean excess risk over seeds, for KRR and for KTR³, and that risk."""
    alpha, s = int(1 / b), float(beta / b) + 0.5 + 0.05
    f_grid = target((np.arange(GRID) + 0.5) / GRID, s)
    per_seed = [one_seed(alpha, s, noise, seed, ns, f_grid) for seed in range(seeds)]
    rows = []
    for n in ns:
        row = {"n": n}
        for j, name in enumerate(("KRR", "KTR3")):
            mean = np.nanmean([r[n][j] for r in per_seed], axis=0)
            i = int(np.nanargmin(mean))
            spread = np.std([r[n][j][i] for r in per_seed])
            row[name] = {"risk": float(mean[i]), "std": float(spread), "lam": float(LAMS[i])}
        rows.append(row)
    return {"alpha": alpha, "s": s, "rows": rows}


def slope(rows: list[dict], name: str) -> float:
    n = np.array([r["n"] for r in rows], dtype=float)
    risk = np.array([r[name]["risk"] for r in rows])
    return float(np.polyfit(np.log(n), np.log(risk), 1)[0])


def theory(b: Fraction, beta: Fraction, noisy: bool) -> tuple[float, float]:
    """(Theorem 1's exponent for KTR³, the earlier bounds' ``min(2β/(2β+b), 2β)``) as decay rates."""
    if noisy:
        return float(2 * beta / (2 * beta + b)), float(min(2 * beta / (2 * beta + b), 2 * beta))
    return float(2 * beta / min(2 * beta + b, 1)), float("nan")


def markdown(results: dict, args: argparse.Namespace, seconds: float) -> str:
    lines = [
        "# KTR³ (Jun, Cutkosky, Orabona): excess risk against n, and the fitted rates",
        "",
        f"Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_ktr3.py --seeds {args.seeds} "
        f"--max-log2n {args.max_log2n}` (torch on 1 thread)  ",
        f"Machine: {describe_machine()}; torch {torch.__version__}, CPU  ",
        f"Git: {git_head()}, load average before: {args.load}; total time {seconds:.0f} s",
        "",
        "The poster's experiment (its panel (a) b = 1/8, β = 7/16, and a hard-regime pair (b)), as the "
        "module docstring of `benchmarks/bench_ktr3.py` sets it up: a periodic spline kernel with "
        "eigenvalues m^(−1/b), a target of source condition β, inputs uniform on [0, 1], n = 32 … "
        f"{2**args.max_log2n} nested draws, {args.seeds} seeds, λ ∈ 10^-12 … 10^-1 (12 values) chosen per n "
        "as the one of least mean excess risk (as the poster does, separately for each method). The "
        f"noisy cases have Gaussian noise σ = {NOISE}; the low-noise ones none (Bayes risk 0). What the "
        "poster leaves unsaid and is chosen here: the noise level, the target's exact coefficients "
        "(m^−s, s = β/b + 1/2 + 0.05: the source condition holds with little room), the range of n and "
        "of λ, the number of seeds, and λ = 0 (not in the grid: the Gram matrices are numerically "
        "singular, the minimum-norm fit is then a matter of the pseudo-inverse's cut-off).",
        "",
        "Fitted slopes are least-squares fits of log excess risk on log n over every n; the theory's "
        "rates are Theorem 1's exponents (KTR³: 2β/(2β+b) with noise, 2β/min(2β+b, 1) without; earlier "
        "bounds: n^(−2β) when 2β + b < 1). The poster shows its panels as plots without numbers, so the "
        "published figures beside ours are its stated rates.",
        "",
        "| case | b | β | noise | KTR³ slope | KRR slope | Theorem 1 (KTR³) | earlier bound |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for res in results.values():
        name, b, beta, noisy = res["case"], res["b"], res["beta"], res["noisy"]
        rate, older = theory(Fraction(b), Fraction(beta), noisy)
        older_text = f"−{older:.3f}" if noisy else "none"
        lines.append(
            f"| ({name}) | {b} | {beta} | {'σ = 0.5' if noisy else 'none'} | "
            f"{slope(res['rows'], 'KTR3'):.3f} | {slope(res['rows'], 'KRR'):.3f} | "
            f"−{rate:.3f} | {older_text} |"
        )
    lines += [*_reading(results), "", "![excess risk against n](ktr3.png)", ""]
    for res in results.values():
        lines += [
            f"### ({res['case']}) b = {res['b']}, β = {res['beta']}, "
            + ("noisy" if res["noisy"] else "no noise"),
            "",
            "| n | KRR excess risk | λ | KTR³ expected excess risk | λ |",
            "|---:|---:|---:|---:|---:|",
        ]
        for r in res["rows"]:
            lines.append(
                f"| {r['n']} | {r['KRR']['risk']:.3e} ± {r['KRR']['std']:.1e} | {r['KRR']['lam']:.0e} | "
                f"{r['KTR3']['risk']:.3e} ± {r['KTR3']['std']:.1e} | {r['KTR3']['lam']:.0e} |"
            )
        lines.append("")
    return "\n".join(lines)


def _reading(results: dict) -> list[str]:
    """What the slopes say, from the measured values."""

    def fitted(key: str, method: str) -> float:
        return slope(results[key]["rows"], method)

    def ratio(key: str) -> float:
        rows = results[key]["rows"]
        return float(np.mean([r["KTR3"]["risk"] / r["KRR"]["risk"] for r in rows]))

    return [
        "",
        "What the slopes say:",
        "",
        f"- **hard regime (b)**, with noise: KTR³'s excess risk falls as n^{fitted('b-noisy', 'KTR3'):.2f} "
        "(Theorem 1: n^-0.667; the earlier bounds: n^-0.5); plain KRR, with its λ chosen the same way, as "
        f"n^{fitted('b-noisy', 'KRR'):.2f} (the poster conjectures KRR has the same bound).",
        f"- **(a)** and **(c)** with noise: KTR³ n^{fitted('a-noisy', 'KTR3'):.2f} and "
        f"n^{fitted('c-noisy', 'KTR3'):.2f} against the theory's n^-0.875 and n^-0.667.",
        "- **KTR³ against KRR**: its expected risk averages the prefixes f_0, …, f_(n−1), and the early ones "
        "(f_0 = 0 has risk ‖f*‖²) put a floor of order ‖f*‖²/n under it: its constant is above KRR's "
        f"(on average {ratio('a-noisy'):.0f}, {ratio('b-noisy'):.0f} and {ratio('c-noisy'):.0f} times KRR's "
        "risk in (a), (b), (c) with noise) and without noise its rate cannot pass n^-1 (measured "
        f"n^{fitted('a-noiseless', 'KTR3'):.2f}, n^{fitted('b-noiseless', 'KTR3'):.2f}, "
        f"n^{fitted('c-noiseless', 'KTR3'):.2f}; the low-noise rates of the theory are -0.875, -0.667, -1).",
        "- **without noise** KRR (λ at the grid's smallest, 1e-12: the least regularization wins, as the "
        "poster remarks for a Bayes risk of 0) falls far faster than any of these worst-case rates "
        f"(n^{fitted('a-noiseless', 'KRR'):.1f} … n^{fitted('b-noiseless', 'KRR'):.1f}): these targets, "
        "though barely of source condition β, are smooth, and interpolating them converges fast.",
    ]


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(12, 7), sharex=True)
    for col, (name, b, beta) in enumerate(CASES):
        for row, noisy in enumerate((True, False)):
            res, ax = results[f"{name}-{'noisy' if noisy else 'noiseless'}"], axes[row, col]
            n = np.array([r["n"] for r in res["rows"]])
            for method, marker in (("KTR3", "o"), ("KRR", "s")):
                ax.loglog(n, [r[method]["risk"] for r in res["rows"]], marker=marker, label=method)
            rate = theory(b, beta, noisy)[0]
            first = res["rows"][0]["KTR3"]["risk"]
            ax.loglog(n, first * (n / n[0]) ** (-rate), "k--", lw=0.8, label=f"n^-{rate:.2f}")
            ax.set_title(f"({name}) b={b}, β={beta}, {'σ=0.5' if noisy else 'no noise'}", fontsize=9)
            ax.legend(fontsize=7)
    for ax in axes[1]:
        ax.set_xlabel("n")
    for ax in axes[:, 0]:
        ax.set_ylabel("excess risk")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--max-log2n", type=int, default=10, help="largest n = 2^this (from 32)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "ktr3.md"))
    args = ap.parse_args()
    args.load = load_average()
    torch.set_num_threads(1)
    ns = [2**e for e in range(5, args.max_log2n + 1)]
    t0 = time.perf_counter()
    results = {}
    for name, b, beta in CASES:
        for noisy in (True, False):
            t = time.perf_counter()
            res = run_case(b, beta, NOISE if noisy else 0.0, args.seeds, ns)
            res.update(case=name, b=str(b), beta=str(beta), noisy=noisy)
            results[f"{name}-{'noisy' if noisy else 'noiseless'}"] = res
            print(
                f"({name}) noisy={noisy}: KTR3 slope {slope(res['rows'], 'KTR3'):.3f} "
                f"({time.perf_counter() - t:.0f} s)",
                flush=True,
            )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(results, out.with_suffix(".png"))
    text = markdown(results, args, time.perf_counter() - t0)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    print(text)


if __name__ == "__main__":
    main()
