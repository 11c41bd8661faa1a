"""Benchmark: is object_recognition's confidence calibrated, and what does an unknown_threshold buy?

The recognition benchmark's protocol and features (``bench_recognition.py``: per seed, ``--objects``
pybullet objects, ``--train-views`` views of each taught one sample at a time to the node's learner
with its default parameters, ``--test-views`` other views held out; EfficientNet-Lite0 features,
cached under ``runs/bench_cache/``). On the held-out views:

- expected calibration error (Guo et al. 2017, 10 bins) of the confidence before (the softmax of the
  raw scores, what Prediction.confidence was) and after (temperature scaling fitted on the learner's
  validation buffer, :mod:`lifelong_learning.learners.calibration`);
- coverage (share answered, the rest "unknown") and accuracy of the answers at several
  ``unknown_threshold`` values;
- open set: the same learner taught only the first ``--objects − --untaught`` objects; the share of
  the views of the untaught objects answered "unknown" (what the threshold is for) and of the taught
  objects' views wrongly answered "unknown".

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_calibration.py [--seeds 0 1 2]

Writes docs/benchmarks/calibration.md (and .json).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from bench_recognition import features, online_model  # benchmarks/ (sys.path[0])
from harness import cpu_model, run_seeds  # benchmarks/harness

from lifelong_learning.learners.calibration import expected_calibration_error, softmax
from lifelong_learning.sim.objects import object_catalog

ROOT = Path(__file__).resolve().parents[1]
THRESHOLDS = (0.0, 0.5, 0.7, 0.9)


def one_seed(seed: int, args: argparse.Namespace) -> dict:
    views = args.train_views + args.test_views
    X, y = features(args.objects, views, seed)
    catalog = object_catalog(args.objects, seed)
    names = np.array([catalog[i].name for i in y], dtype=object)
    view = np.tile(np.arange(views), args.objects)
    train, test = view < args.train_views, view >= args.train_views
    order = np.random.default_rng(seed).permutation(np.flatnonzero(train))
    t0 = time.perf_counter()
    clf = online_model()
    for i in order:
        clf.partial_fit(X[i : i + 1], [names[i]])
    scores = clf.decision_function(X[test])
    top = clf.classes_[scores.argmax(axis=1)]
    correct = np.asarray(top == names[test], dtype=float)
    conf = clf.proba_from_scores(scores).max(axis=1)
    raw = softmax(scores).max(axis=1)  # what Prediction.confidence was
    t, n_val = clf.calibration_
    out: dict = {
        "seed": seed,
        "accuracy": correct.mean(),
        "ECE before (softmax of the scores)": expected_calibration_error(
            softmax(scores).max(axis=1), correct
        ),
        "ECE after (temperature scaling)": expected_calibration_error(conf, correct),
        "mean confidence before": raw.mean(),
        "mean confidence after": conf.mean(),
    }
    for th in THRESHOLDS[1:]:
        answered = conf >= th
        out[f"coverage at {th:g}"] = answered.mean()
        out[f"accuracy at {th:g}"] = correct[answered].mean() if answered.any() else float("nan")
    # Open set: teach the first objects only; views of the others should be answered "unknown".
    taught_objects = np.isin(y, np.unique(y)[: args.objects - args.untaught])
    partial = online_model()
    for i in order[taught_objects[order]]:
        partial.partial_fit(X[i : i + 1], [names[i]])
    conf_open = partial.predict_proba(X[test]).max(axis=1)
    known = taught_objects[test]
    for th in THRESHOLDS[1:]:
        out[f"untaught answered unknown at {th:g}"] = (conf_open[~known] < th).mean()
        out[f"taught answered unknown at {th:g}"] = (conf_open[known] < th).mean()
    out["details"] = {
        "temperature": 1.0 / t,
        "validation samples": n_val,
        "lambda": clf.lambda_,
        "alpha": clf.alpha_,
        "seconds": time.perf_counter() - t0,
    }
    print(
        f"seed {seed}: " + ", ".join(f"{k} {v:.3f}" for k, v in out.items() if k not in ("seed", "details"))
    )
    return out


def markdown(results: list[dict], args: argparse.Namespace, seconds: float) -> str:
    def row(key: str, label: str, fmt: str = ".3f") -> str:
        values = [r[key] for r in results]
        cells = " | ".join(format(v, fmt) for v in values)
        return f"| {label} | {cells} | {format(float(np.nanmean(values)), fmt)} |"

    head = "| | " + " | ".join(f"seed {r['seed']}" for r in results) + " | mean |"
    rule = "|---|" + "---:|" * (len(results) + 1)
    lines = [
        "# Calibrated confidence of object_recognition, and the unknown answer",
        "",
        "Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_calibration.py --seeds "
        f"{' '.join(map(str, args.seeds))} --objects {args.objects} --train-views {args.train_views} "
        f"--test-views {args.test_views} --untaught {args.untaught}`  ",
        f"Machine: {cpu_model()}, CPU. Total time {seconds:.0f} s.",
        "",
        f"The recognition benchmark's protocol (docs/benchmarks/recognition.md): per seed {args.objects} "
        f"objects, {args.train_views} random views of each taught one at a time to the node's learner "
        f"(default parameters), {args.test_views} other views of each held out; EfficientNet-Lite0 "
        "features. Confidence *before* = the softmax of the raw scores (what Prediction.confidence was); "
        "*after* = temperature scaling fitted on the learner's validation buffer (the class-balanced "
        "held-out samples that also choose λ and α). ECE = expected calibration error, 10 bins (Guo "
        "et al. 2017): 0 is perfectly calibrated.",
        "",
        head,
        rule,
        row("accuracy", "accuracy (all answered)"),
        row("ECE before (softmax of the scores)", "ECE before (softmax of the scores)"),
        row("ECE after (temperature scaling)", "ECE after (temperature scaling)"),
        row("mean confidence before", "mean confidence before"),
        row("mean confidence after", "mean confidence after"),
        "",
        "Accuracy against coverage: with `unknown_threshold` = θ, answers of confidence < θ are "
        '"unknown" (label ""); coverage = share of the held-out views answered with a class, accuracy '
        "= of those answers.",
        "",
        head,
        rule,
    ]
    for th in THRESHOLDS[1:]:
        lines.append(row(f"coverage at {th:g}", f"coverage at θ = {th:g}"))
        lines.append(row(f"accuracy at {th:g}", f"accuracy at θ = {th:g}"))
    lines += [
        "",
        f"Open set: the learner taught only {args.objects - args.untaught} of the {args.objects} objects; "
        f'share of the held-out views answered "unknown", for the {args.untaught} untaught objects (higher '
        "is better) and for the taught ones (lower is better).",
        "",
        head,
        rule,
    ]
    for th in THRESHOLDS[1:]:
        lines.append(row(f"untaught answered unknown at {th:g}", f"untaught → unknown at θ = {th:g}"))
        lines.append(row(f"taught answered unknown at {th:g}", f"taught → unknown at θ = {th:g}"))
    lines += ["", "Details: fitted temperature T = 1/t, validation samples it was fitted on, λ, α, time.", ""]
    for r in results:
        d = r["details"]
        lines.append(f"- seed {r['seed']}: " + ", ".join(f"{k} {v:.3g}" for k, v in d.items()))
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--objects", type=int, default=40)
    ap.add_argument("--train-views", type=int, default=8)
    ap.add_argument("--test-views", type=int, default=16)
    ap.add_argument("--untaught", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/calibration.md"))
    args = ap.parse_args()
    run_seeds(
        args.seeds,
        lambda seed: one_seed(seed, args),
        lambda results, seconds: markdown(results, args, seconds),
        args.out,
        json_default=float,
    )


if __name__ == "__main__":
    main()
