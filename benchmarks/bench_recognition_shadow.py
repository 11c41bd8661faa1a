"""Benchmark: what a model in shadow costs object_recognition per taught sample.

While a trial runs, every taught sample is predicted and learned by the serving model (as always)
and then by the model in the trial (:class:`lifelong_learning.nodes.recognition_shadow.RecognitionOps`,
the node's own operations), on the node's executor thread. Measured: the time per taught sample of
the serving model alone and with a trial, alternated in rounds (a ratio in each round, against a
floor measured in the same round: the machine is shared), on CNN-sized features and the node's
default regularization path.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_shadow.py

Writes docs/benchmarks/recognition-shadow.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from harness import describe_machine, provenance_line  # benchmarks/harness

from lifelong_learning.learners.recognition_gate import RecognitionGate
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.nodes.recognition_shadow import RecognitionOps

ROOT = Path(__file__).resolve().parents[1]
LAMBDAS = [0.1, 1.0, 10.0, 100.0, 1000.0]


def taught_model(centers: np.ndarray, rng: np.random.Generator, samples: int) -> IncrementalRLSC:
    """A classifier taught ``samples`` views of the classes (features near each class centre)."""
    model = IncrementalRLSC(lambdas=LAMBDAS, alpha="auto")
    for k in range(samples):
        model.partial_fit(
            centers[k % len(centers)] + rng.normal(size=centers.shape[1]), [str(k % len(centers))]
        )
    return model


def one_round(dim: int, classes: int, samples: int, seed: int) -> tuple[float, float]:
    """(ms per taught sample, serving alone; ms with a trial) over ``samples`` samples each."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(classes, dim))
    ops = RecognitionOps(RecognitionGate())
    serving, other = taught_model(centers, rng, 200), taught_model(centers, rng, 200)
    stream = [(centers[k % classes] + rng.normal(size=dim), str(k % classes)) for k in range(2 * samples)]

    def serve(x: np.ndarray, y: str) -> None:
        ops.predict(serving, x)
        serving.partial_fit(x, [y])

    t0 = time.perf_counter()
    for x, y in stream[:samples]:
        serve(x, y)
    alone = (time.perf_counter() - t0) / samples * 1e3
    t0 = time.perf_counter()
    for x, y in stream[samples:]:
        serve(x, y)
        ops.predict(other, x)
        ops.learn(other, x, y)
    return alone, (time.perf_counter() - t0) / samples * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=1280, help="feature size (MobileNetV3-Large: 1280)")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--samples", type=int, default=150, help="taught samples timed per configuration")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "recognition-shadow.md")
    args = parser.parse_args()
    rows = []
    for r in range(args.rounds):
        alone, both = one_round(args.dim, args.classes, args.samples, seed=r)
        rows.append(f"| {r + 1} | {alone:.2f} | {both:.2f} | {both / alone:.2f} |")
        print(rows[-1], flush=True)
    text = "\n".join(
        [
            "# object_recognition: the cost of a model in shadow, per taught sample",
            "",
            "Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_shadow.py`  ",
            f"Machine: {describe_machine()}  ",
            provenance_line(),
            "",
            f"{args.dim} features, {args.classes} classes, λ path {LAMBDAS}, α auto, both models taught "
            f"200 samples first; {args.samples} taught samples timed per configuration and round (the "
            "serving model predicts then learns each; with a trial the other model does too, with the "
            "node's own operations). What classifying `features` waits while a trial runs: the node "
            "has one executor thread.",
            "",
            "| round | serving alone [ms/sample] | with a trial [ms/sample] | ratio |",
            "|---:|---:|---:|---:|",
            *rows,
            "",
        ]
    )
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
