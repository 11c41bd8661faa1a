"""Benchmark: does retraining the object classifier beat the one learned online, on views it never saw?

Many classes, few samples each: per seed, ``--objects`` objects (pybullet renders of meshes shipped
in pybullet_data, a different object set and viewpoints per seed), ``--train-views`` random views
of each taught, ``--test-views`` other random views of each held out. Features: EfficientNet-Lite0
(onnxruntime, the node's default backend), cached under ``runs/bench_cache/``.

Compared on the held-out views (top-1 accuracy):

- **online**: the object_recognition node's learner with its default parameters (several λ chosen
  on a class-balanced validation buffer, recoding α 'auto'), fed one labeled sample at a time;
- **retrained**: the tuner's pipeline (``lifelong-learning tune --task classification``: Nyström
  kernel ridge regression, hyperparameters tuned by the objective) on a rosbag2 bag of the taught
  samples, exported as the node's model;
- **retrained --init online**: the same, continuing from the online model's file (its classes and
  its validation buffer).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition.py [--seeds 0 1 2] [--quick]

Writes docs/benchmarks/recognition.md (and .json).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from harness import cpu_model, per_seed_table, run_seeds  # benchmarks/harness (sys.path[0] is benchmarks/)

from lifelong_learning.io.bags import write_labeled_features
from lifelong_learning.learners import IncrementalRLSC
from lifelong_learning.nodes.object_recognition import PARAMS
from lifelong_learning.retraining.job import TuningJob
from lifelong_learning.retraining.pipeline import run_job
from lifelong_learning.sim.objects import object_catalog, render_object_views
from lifelong_learning.vision import FeatureExtractor

ROOT = Path(__file__).resolve().parents[1]
ONLINE_PARAMS = ("lambdas", "alpha", "alpha_grid", "validation_every", "min_class_count", "max_validation")


def features(n_objects: int, views: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """CNN features of ``views`` random renders of each of ``n_objects`` objects (cached)."""
    cache = ROOT / "runs" / "bench_cache" / f"objects-{n_objects}x{views}-seed{seed}.npz"
    if cache.is_file():
        with np.load(cache) as f:
            return f["X"].astype(np.float64), f["y"]
    t0 = time.perf_counter()
    images, labels = render_object_views(n_objects, views, size=(128, 128), seed=seed)
    X = FeatureExtractor(backend="onnxruntime", num_threads=1).extract_batch(images)
    print(f"seed {seed}: {len(images)} views rendered and featurized in {time.perf_counter() - t0:.0f} s")
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, X=X, y=labels)
    return X.astype(np.float64), labels


def online_model() -> IncrementalRLSC:
    """The node's learner with the node's default parameters."""
    defaults = {spec.name: spec.default for spec in PARAMS if spec.name in ONLINE_PARAMS}
    alpha = str(defaults.pop("alpha"))
    return IncrementalRLSC(alpha="auto" if alpha == "auto" else float(alpha), **defaults)


def accuracy(model: IncrementalRLSC, X: np.ndarray, names: np.ndarray) -> float:
    predicted = np.asarray(model.predict(X), dtype=object)
    return 100.0 * float(np.mean(predicted == names))


def one_seed(seed: int, args: argparse.Namespace) -> dict:
    X, y = features(args.objects, args.train_views + args.test_views, seed)
    catalog = object_catalog(args.objects, seed)
    names = np.array([catalog[i].name for i in y], dtype=object)
    view = np.tile(np.arange(args.train_views + args.test_views), args.objects)
    train, test = view < args.train_views, view >= args.train_views
    order = np.random.default_rng(seed).permutation(np.flatnonzero(train))  # taught in a random order
    out: dict = {"seed": seed}
    t0 = time.perf_counter()
    online = online_model()
    for i in order:
        online.partial_fit(X[i : i + 1], [names[i]])
    out["online (node defaults)"] = accuracy(online, X[test], names[test])
    out["online details"] = {"lambda": float(online.lambda_), "seconds": time.perf_counter() - t0}
    print(f"seed {seed}: online {out['online (node defaults)']:.1f} %", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        bag, serving = Path(tmp) / "bag", Path(tmp) / "serving.llm"
        write_labeled_features(bag, X[order], list(names[order]))
        online.save(serving)
        for label, init in (("retrained", None), ("retrained --init online", str(serving))):
            t0 = time.perf_counter()
            job = TuningJob(
                bags=[str(bag)],
                task="classification",
                out=str(Path(tmp) / "model.llm"),
                objectives=[args.objective],
                centers=args.centers,
                epochs=args.epochs,
                device="cpu",
                seed=seed,
                init=init,
            )
            result = run_job(job)["objectives"][args.objective]
            out[label] = accuracy(IncrementalRLSC.load(job.out), X[test], names[test])
            out[f"{label} details"] = {
                "lengthscale median": float(np.median(result["lengthscale"])),
                "seconds": time.perf_counter() - t0,
            }
            print(f"seed {seed}: {label} {out[label]:.1f} % ({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def markdown(results: list[dict], args: argparse.Namespace, seconds: float) -> str:
    lines = [
        "# Recognition: many objects, few views each, judged on views never seen",
        "",
        "Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition.py --seeds "
        f"{' '.join(map(str, args.seeds))} --objects {args.objects} --train-views {args.train_views} "
        f"--test-views {args.test_views} --centers {args.centers} --objective {args.objective}`  ",
        f"Machine: {cpu_model()}; torch {torch.__version__}, CPU. Total time {seconds:.0f} s.",
        "",
        f"Per seed: {args.objects} objects (a different set per seed), {args.train_views} random views of "
        f"each taught, {args.test_views} other random views of each held out; 128×128 renders → "
        "EfficientNet-Lite0 features (1280-d). Top-1 accuracy (%) on the held-out views. Online = the "
        "object_recognition node's learner with its default parameters, one sample at a time; retrained = "
        "the tuner's classification pipeline on a rosbag2 bag of the taught samples (Nyström KRR, "
        f"{args.centers} centres, objective `{args.objective}`), exported as the node's model.",
        "",
        *per_seed_table(results, ".1f"),
    ]
    lines += ["", "Details: λ the online learner chose; median tuned length-scale; time.", ""]
    for r in results:
        for key, d in r.items():
            if key.endswith("details"):
                what = ", ".join(f"{k} {v:.3g}" for k, v in d.items())
                lines.append(f"- seed {r['seed']}, {key[:-8]}: {what}")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--objects", type=int, default=40)
    ap.add_argument("--train-views", type=int, default=8)
    ap.add_argument("--test-views", type=int, default=16)
    ap.add_argument("--centers", type=int, default=320)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--objective", default="proposed")
    ap.add_argument("--quick", action="store_true", help="one seed, 30 objects")
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/recognition.md"))
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.objects = args.seeds[:1], 30
    torch.set_num_threads(1)
    run_seeds(
        args.seeds,
        lambda seed: one_seed(seed, args),
        lambda results, seconds: markdown(results, args, seconds),
        args.out,
    )


if __name__ == "__main__":
    main()
