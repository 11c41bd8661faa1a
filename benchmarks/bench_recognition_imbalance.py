"""Benchmark: the thesis' imbalance protocol (Table 7.1) on CNN features of rendered objects.

One class is rare: it has 1, 5 or 20 training samples against ``--common`` (50) for each other
class; the samples arrive one at a time in a random order. Accuracy on held-out views of every
class (the rare class's and the mean per-class accuracy), for

- **no recoding**: the object_recognition node's learner with α = 0 (plain RLSC, λ chosen online
  on its validation buffer as the node does);
- **recoding**: the node's learner with its defaults (α 'auto', thesis §7.6.3);
- **recoding α=1**: full recoding, ``Γ = k·diag(k_t)⁻¹`` (eq. 7.21; a class above the median count
  shrunk more gently, ``learners/model_selection.py``), λ chosen online;
- **rebalancing**: batch RLSC on every training sample with the loss weighted by the inverse class
  frequency (each class weighs the same; λ the one the recoding learner chose): the thesis'
  rebalanced baseline;
- **SGD (log loss)**: scikit-learn ``SGDClassifier(loss="log_loss").partial_fit``, one sample at a
  time in the same order (all classes named at the first call, as partial_fit needs);
- **nearest class mean**: the running mean of each class's features, Euclidean distance.

Features: EfficientNet-Lite0 (onnxruntime, the node's default extractor) of pybullet renders of
the package's simulated objects (``lifelong_learning.sim.objects``: meshes of pybullet_data,
random viewpoints), ``--common`` + ``--test-views`` views per object, cached under
``runs/bench_cache/`` (the cache of ``bench_recognition.py``). Per seed, ``--rare-classes``
different objects take the rare role in turn.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_imbalance.py [--seeds 0 1 2] [--quick]

Writes docs/benchmarks/recognition-imbalance.md (and .json). No timed asserts: it prints what it measured.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
from bench_recognition import features, online_model  # benchmarks/ (sys.path[0] is benchmarks/)
from bench_recognition_scale import showing_features
from harness import describe_machine, run_seeds  # benchmarks/harness
from sklearn.linear_model import SGDClassifier
from threadpoolctl import threadpool_limits

from lifelong_learning.learners import IncrementalRLSC

ROOT = Path(__file__).resolve().parents[1]
RARE_COUNTS = (1, 5, 20)
METHODS = ("no recoding", "recoding", "recoding α=1", "rebalancing", "SGD (log loss)", "nearest class mean")


def learner(alpha: float | str) -> IncrementalRLSC:
    """The node's learner (its default λ candidates and validation), with recoding exponent ``alpha``."""
    model = online_model()
    return IncrementalRLSC(
        lambdas=model.lambdas,
        alpha=alpha,
        validation_every=model.validation_every,
        alpha_grid=model.alpha_grid,
        min_class_count=model.min_class_count,
        max_validation=model.max_validation,
    )


def rebalanced_scores(X: np.ndarray, y: np.ndarray, n_classes: int, lam: float, Xt: np.ndarray) -> np.ndarray:
    """Batch RLSC with each sample weighted by ``n / (T · n_y)`` (every class weighs the same)."""
    counts = np.bincount(y, minlength=n_classes)
    w = len(y) / (n_classes * counts[y])
    E = np.zeros((len(y), n_classes))
    E[np.arange(len(y)), y] = 1.0
    A = (X * w[:, None]).T @ X + lam * np.eye(X.shape[1])
    return Xt @ np.linalg.solve(A, (X * w[:, None]).T @ E)


def sgd_predictions(
    X: np.ndarray, y: np.ndarray, classes: np.ndarray, Xt: np.ndarray, seed: int
) -> np.ndarray:
    sgd = SGDClassifier(loss="log_loss", random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x, label in zip(X, y, strict=True):
            sgd.partial_fit(x[None, :], [label], classes=classes)
    return sgd.predict(Xt)


def ncm_predictions(X: np.ndarray, y: np.ndarray, n_classes: int, Xt: np.ndarray) -> np.ndarray:
    """Nearest class mean (the running means after the stream equal the batch means)."""
    means = np.stack([X[y == c].mean(axis=0) for c in range(n_classes)])
    d2 = (Xt**2).sum(1)[:, None] - 2 * Xt @ means.T + (means**2).sum(1)[None, :]
    return np.argmin(d2, axis=1)


def one_case(X, y, view, rare: int, n_rare: int, args, rng: np.random.Generator) -> dict[str, tuple]:
    """Every method's (rare-class accuracy, mean per-class accuracy) for one rare class and count."""
    n_classes = int(y.max()) + 1
    train_views = np.where(y == rare, n_rare, args.common)
    train = view < train_views
    test = view >= args.common
    order = rng.permutation(np.flatnonzero(train))
    Xs, ys = X[order], y[order]
    Xt, yt = X[test], y[test]

    def scores(pred: np.ndarray) -> tuple[float, float]:
        per_class = [float(np.mean(pred[yt == c] == c)) for c in range(n_classes)]
        return 100.0 * per_class[rare], 100.0 * float(np.mean(per_class))

    out: dict[str, tuple] = {}
    lam = None
    for name, alpha in (("no recoding", 0.0), ("recoding", "auto"), ("recoding α=1", 1.0)):
        model = learner(alpha).partial_fit(Xs, ys.tolist())
        out[name] = scores(np.asarray(model.predict(Xt), dtype=np.int64))
        if name == "recoding":
            lam = model.lambda_
    out["rebalancing"] = scores(np.argmax(rebalanced_scores(Xs, ys, n_classes, lam, Xt), axis=1))
    out["SGD (log loss)"] = scores(sgd_predictions(Xs, ys, np.arange(n_classes), Xt, args.seed_now))
    out["nearest class mean"] = scores(ncm_predictions(Xs, ys, n_classes, Xt))
    return out


#: how each world is described in the report
WORLDS = {
    "showing": "`lifelong_learning/sim/showing.py`: each shown by a person in its teaching room, the "
    "held-out views from its test room (other background, clutter, light, poses), `motion` crop",
    "views": "`lifelong_learning/sim/objects.py`: random views of the object alone, whole frame",
}


def one_seed(seed: int, args: argparse.Namespace) -> list[dict]:
    views = args.common + args.test_views
    if args.world == "showing":
        X, y = showing_features(args.objects, args.common, args.test_views, seed)
    else:
        X, y = features(args.objects, views, seed)
    view = np.tile(np.arange(views), args.objects)
    rng = np.random.default_rng([seed, 71])
    rows = []
    args.seed_now = seed
    for rare in rng.choice(args.objects, size=args.rare_classes, replace=False):
        for n_rare in RARE_COUNTS:
            with threadpool_limits(1):
                case = one_case(X, y, view, int(rare), n_rare, args, rng)
            for method, (rare_acc, mean_acc) in case.items():
                rows.append(
                    {"seed": seed, "rare": int(rare), "n_rare": n_rare, "method": method}
                    | {"rare_accuracy": rare_acc, "mean_class_accuracy": mean_acc}
                )
            got = ", ".join(f"{m} {v[0]:.0f}" for m, v in case.items())
            print(f"seed {seed} rare {rare} n={n_rare}: {got}", flush=True)
    return rows


def markdown(rows: list[dict], args: argparse.Namespace, seconds: float) -> str:
    seeds = sorted({r["seed"] for r in rows})

    def cell(method: str, n: int, key: str) -> str:
        per_seed = [
            np.mean([r[key] for r in rows if r["method"] == method and r["n_rare"] == n and r["seed"] == s])
            for s in seeds
        ]
        return f"{np.mean(per_seed):.1f} ({min(per_seed):.1f})"

    def mean_of(method: str, n: int, key: str) -> float:
        return float(np.mean([r[key] for r in rows if r["method"] == method and r["n_rare"] == n]))

    beats = [
        mean_of("recoding", n, "rare_accuracy") > mean_of("no recoding", n, "rare_accuracy")
        for n in RARE_COUNTS
    ]
    worst_cases = [
        (r["seed"], r["rare"], r["n_rare"])
        for r in rows
        if r["method"] == "recoding"
        and r["rare_accuracy"]
        < next(
            q["rare_accuracy"]
            for q in rows
            if q["method"] == "no recoding"
            and (q["seed"], q["rare"], q["n_rare"]) == (r["seed"], r["rare"], r["n_rare"])
        )
    ]
    verdict = [
        f"Recoding (the node's default) beats no recoding on the rare class at every imbalance: "
        f"{'yes' if all(beats) else 'no'} (per count: {', '.join('yes' if b else 'no' for b in beats)}); "
        f"cases (seed, rare object, count) where it does worse: {worst_cases or 'none'}.",
        "",
    ]
    head = "| method | " + " | ".join(f"{n} rare samples" for n in RARE_COUNTS) + " |"
    rule = "|---|" + "---:|" * len(RARE_COUNTS)
    lines = [
        "# Recognition: the imbalance protocol (thesis Table 7.1) on CNN features",
        "",
        f"Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_imbalance.py --seeds "
        f"{' '.join(map(str, seeds))} --objects {args.objects} --common {args.common} "
        f"--test-views {args.test_views} --rare-classes {args.rare_classes} --world {args.world}`  ",
        f"Machine: {describe_machine()}. Total time {seconds:.0f} s.",
        "",
        f"Per seed: {args.objects} rendered objects ({WORLDS[args.world]}; EfficientNet-Lite0 "
        f"features, 1280-d); one object is rare, with 1, 5 or 20 training views against {args.common} "
        f"for each other object, all taught one at a time in a random order; {args.test_views} other "
        f"views of every object held out. {args.rare_classes} different objects take the rare role in "
        "turn per seed. Methods: see the script's docstring (no recoding / recoding are the node's "
        "learner with α = 0 / its defaults, α 'auto'; rebalancing is batch RLSC with every class "
        "weighted the same). Mean over seeds of the mean over rare objects, worst seed in brackets.",
        "",
        *verdict,
        "## Rare-class accuracy (%)",
        "",
        head,
        rule,
        *(f"| {m} | " + " | ".join(cell(m, n, "rare_accuracy") for n in RARE_COUNTS) + " |" for m in METHODS),
        "",
        "## Mean per-class accuracy (%)",
        "",
        head,
        rule,
        *(
            f"| {m} | " + " | ".join(cell(m, n, "mean_class_accuracy") for n in RARE_COUNTS) + " |"
            for m in METHODS
        ),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--objects", type=int, default=30)
    parser.add_argument("--common", type=int, default=50, help="training views of each common object")
    parser.add_argument("--test-views", type=int, default=20)
    parser.add_argument("--rare-classes", type=int, default=3, help="objects taking the rare role, per seed")
    parser.add_argument(
        "--world",
        choices=("showing", "views"),
        default="showing",
        help="showing: objects shown in a teaching room, tested in another, motion crop "
        "(sim/showing.py); views: random views of an object alone (sim/objects.py)",
    )
    parser.add_argument("--quick", action="store_true", help="one seed, 4 objects, few views (a smoke run)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "recognition-imbalance.md"))
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.objects, args.common, args.test_views, args.rare_classes = [0], 4, 20, 5, 1
        args.out = None
    report = lambda rows, seconds: markdown(rows, args, seconds)  # noqa: E731
    run_seeds(args.seeds, lambda s: one_seed(s, args), report, args.out, flatten=True)


if __name__ == "__main__":
    main()
