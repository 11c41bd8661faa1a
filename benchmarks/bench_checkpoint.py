"""Benchmark: the object_recognition checkpoint's size, save and load time, before and after state version 2.

The node's learner with its default parameters (5 λ candidates, α 'auto', a 300-sample validation
buffer) on ``--dim``-d features (non-negative float32 features of norm ~15, like EfficientNet-Lite0's),
``--classes`` classes, ``--samples`` labeled samples. Written twice:

- **state version 1** (the older format): one full float64 ``d × d`` Cholesky factor and
  right-hand side per λ, validation features in float64 (the file is built from today's state the way
  the old code wrote it, and read by today's code);
- **state version 2**: one packed factor (the smallest λ's), the others rebuilt on load; validation
  features in float32 where exact.

Also the largest change of any λ engine's predictions after the round trip, relative to its largest
|score|.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_checkpoint.py [--dim 1280 --classes 20 --samples 1800]

Writes docs/benchmarks/checkpoint.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from harness import cpu_model  # benchmarks/harness (sys.path[0] is benchmarks/)

from lifelong_learning.core.model_file import ModelFile, save_model_file
from lifelong_learning.learners import IncrementalRLSC
from lifelong_learning.nodes.object_recognition import PARAMS

ROOT = Path(__file__).resolve().parents[1]
ONLINE_PARAMS = ("lambdas", "alpha", "alpha_grid", "validation_every", "min_class_count", "max_validation")


def cnn_like(rng: np.random.Generator, n: int, n_classes: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative, correlated float32 features of norm ~15, like EfficientNet-Lite0's."""
    protos = np.maximum(rng.normal(0.2, 0.5, size=(n_classes, d)), 0.0)
    y = rng.integers(0, n_classes, n)
    X = np.maximum(protos[y] + rng.normal(0.0, 0.3, size=(n, d)), 0.0).astype(np.float32)
    return X.astype(np.float64), y


def state_version_1(clf: IncrementalRLSC) -> ModelFile:
    """The model file the code before state version 2 wrote: every engine's full factor, float64."""
    meta, arrays = clf.to_state()
    meta = {k: v for k, v in meta.items() if k not in ("factor_of", "calibration")}
    arrays = {k: v for k, v in arrays.items() if not k.startswith("engine")}
    arrays["val_X"] = clf._val_X.copy()
    for j, rls in enumerate(clf._engines):
        _, a = rls.to_state()  # "R" (d × d) and "B"
        arrays.update({f"engine{j}/{k}": v for k, v in a.items()})
    return ModelFile(kind=clf.kind, meta={**meta, "state_version": 1}, arrays=arrays)


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    """The best of ``repeat`` wall times of ``fn()``, and its result."""
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def max_change(a: IncrementalRLSC, b: IncrementalRLSC, X: np.ndarray) -> float:
    """Largest change of any engine's predictions, relative to its largest |score|."""
    return max(
        float(np.abs(ea.predict(X) - eb.predict(X)).max() / np.abs(ea.predict(X)).max())
        for ea, eb in zip(a._engines, b._engines, strict=True)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=1280)
    ap.add_argument("--classes", type=int, default=20)
    ap.add_argument("--samples", type=int, default=1800)
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/checkpoint.md"))
    args = ap.parse_args()
    defaults = {spec.name: spec.default for spec in PARAMS if spec.name in ONLINE_PARAMS}
    X, y = cnn_like(np.random.default_rng(0), args.samples + 200, args.classes, args.dim)
    clf = IncrementalRLSC(**defaults)
    t0 = time.perf_counter()
    for start in range(0, args.samples, 100):
        clf.partial_fit(X[start : start + 100], [f"object{c}" for c in y[start : start + 100]])
    learn_s = time.perf_counter() - t0
    probe = X[args.samples :]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, write in (
            ("state version 1 (before)", lambda p: save_model_file(p, state_version_1(clf))),
            ("state version 2 (after)", clf.save),
        ):
            path = Path(tmp) / "m.llm"
            save_s, _ = timed(lambda: write(path))  # noqa: B023 - used at once
            load_s, loaded = timed(lambda: IncrementalRLSC.load(path))  # noqa: B023
            rows.append((name, path.stat().st_size / 1e6, save_s, load_s, max_change(clf, loaded, probe)))
            print(rows[-1], flush=True)
    lines = [
        "# Checkpoint of object_recognition: size, save and load time",
        "",
        f"Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_checkpoint.py --dim {args.dim} "
        f"--classes {args.classes} --samples {args.samples}`  ",
        f"Machine: {cpu_model()}, one BLAS thread.",
        "",
        f"The node's learner with its default parameters ({len(defaults['lambdas'])} λ candidates "
        f"{defaults['lambdas']}, α auto, validation buffer of {defaults['max_validation']}), "
        f"{args.dim}-d float32 features, {args.classes} classes, {args.samples} labeled samples "
        f"({clf.n_validation_} held out; learned in {learn_s:.0f} s). Save = build the model file and "
        "write it atomically (fsync) to a local disk; load = read, validate and rebuild (best of 3). "
        "Change = the largest change of any λ engine's predictions on 200 new samples after the round "
        "trip, relative to its largest |score| (state version 2 rebuilds 4 of the 5 factors).",
        "",
        "| format | size [MB] | save [s] | load [s] | change after round trip |",
        "|---|---:|---:|---:|---:|",
        *(f"| {n} | {mb:.1f} | {s:.3f} | {ld:.3f} | {ch:.1e} |" for n, mb, s, ld, ch in rows),
        "",
        "State version 2 stores the smallest λ's Cholesky factor as its packed upper triangle "
        "(d(d+1)/2 float64), one right-hand side (d × classes float64) and the validation features in "
        "float32 (they arrived as float32: exact); the other λ's factors are rebuilt on load from "
        "RᵀR + (λ − λ_min)I. Float32 factors were not used: they would change predictions by ~1e-7 "
        "relative, not exact.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(Path(args.out).read_text())


if __name__ == "__main__":
    main()
