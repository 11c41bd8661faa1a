"""What a model about to replace the serving one costs to catch up, against the undo it catches up with.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_catch_up.py [--seeds 0 1 2]

object_recognition brings a model read from a file up to what the serving model took back since the
model was made (``IncrementalRLSC.caught_up``, learners/unlearning.py), under the model lock in the
swap's step: the answers wait meanwhile. The floor measured in the same run is what the serving
model's own ``~/undo_teaching`` costs under the same lock (``ServingCore.edit``: a copy, then the
episode unlearned). Both on the node's default learner (its parameters, ``keep_samples`` 1000) after
1,500 samples of 30 classes of 1,280 features; the undo takes back the last ``--undo`` samples.
Interleaved, ``--repeats`` times each; medians.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_recognition_showing import node_learner
from harness import run_seeds
from harness.provenance import report_head
from showing_report import seed_values
from showing_world import ROOT

D, CLASSES, SAMPLES = 1280, 30, 1500


def one_seed(seed: int, undo: int, repeats: int) -> dict:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(CLASSES, D))
    model = node_learner(keep_samples=1000)
    for i in range(SAMPLES):
        model.partial_fit((centres[i % CLASSES] + rng.normal(scale=2.0, size=D)) / 40.0, [f"c{i % CLASSES}"])
    candidate, serving = model.clone(), model.clone()
    serving.unlearn_numbers(serving.teaching_episode(undo))
    times: dict[str, list[float]] = {"undo": [], "catch up": []}
    for _ in range(repeats):
        t = time.perf_counter()
        model.clone().unlearn_numbers(model.teaching_episode(undo))
        times["undo"].append(time.perf_counter() - t)
        t = time.perf_counter()
        caught = candidate.caught_up(serving.taken_back_, serving.classes_)
        times["catch up"].append(time.perf_counter() - t)
    if caught.n_samples != serving.n_samples:
        raise RuntimeError("the caught-up copy did not take back what the serving model undid")
    out = {"seed": seed, **{k: float(np.median(v)) for k, v in times.items()}}
    out["ratio"] = out["catch up"] / out["undo"]
    print(
        f"seed {seed}: undo {out['undo']:.3f} s, catch up {out['catch up']:.3f} s, ratio {out['ratio']:.2f}"
    )
    return out


def markdown(results: list[dict], seconds: float, undo: int, repeats: int) -> str:
    seeds = " ".join(str(r["seed"]) for r in results)
    lines = report_head(
        "Catching a model up with what the serving model took back, against the undo itself",
        f"OPENBLAS_NUM_THREADS=1 python benchmarks/bench_catch_up.py --seeds {seeds} --undo {undo} "
        f"--repeats {repeats}",
        seconds,
    )
    lines += [
        f"The node's default learner (5 λ, `keep_samples` 1000) after {SAMPLES} samples of {CLASSES} classes "
        f"of {D} features; the serving model undid its last {undo}; a copy made before the undo caught up "
        f"with it (`caught_up`), against the undo (a copy, then `unlearn_numbers`), interleaved {repeats} "
        "times each, medians. Both run under the model lock: answers wait that long, once.",
        "",
        "| seed | undo s | catch up s | catch up / undo |",
        "|---:|---:|---:|---:|",
    ]
    lines += [f"| {r['seed']} | {r['undo']:.3f} | {r['catch up']:.3f} | {r['ratio']:.2f} |" for r in results]
    ratio = seed_values(results, "ratio")
    lines += ["", f"Catch up / undo: median {np.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--undo", type=int, default=12, help="samples the serving model undid")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/catch-up.md"))
    args = ap.parse_args()
    run_seeds(
        args.seeds,
        lambda seed: one_seed(seed, args.undo, args.repeats),
        lambda results, seconds: markdown(results, seconds, args.undo, args.repeats),
        args.out,
    )


if __name__ == "__main__":
    main()
