"""What reporting the batch objective on ``~/learning_metrics`` costs the learners (the identity's
running batch objective, learners/batch_objective.py), measured side by side in one process.

The engine keeps its targets' weighted count, sum and sum of squares (O(c) a row) and reads
``J = Σu² − bᵀA⁻¹b`` off its state when the metrics timer reports. Timed here, in interleaved
rounds (medians), so that the machine's load weighs on every variant alike:

- **learning a block** of inverse_dynamics (the node's model from the shipped config: the Panda,
  500 random features, friction, ``forgetting: auto``; ``stage(..., solve_weights=True)`` and
  ``commit``, as its learning thread does), with the moments kept and with their update replaced
  by nothing: what the node's learning thread pays per block;
- **answering a joint state** (``prepare``, what the 1 kHz callback computes): untouched by the
  change, timed as the floor;
- **the report** under the model lock: the residual's batch objective once its weights are solved
  (inverse_dynamics), and a classifier's, whose weights are solved there (object_recognition: the
  default λ grid, 1280 CNN features, 10 classes, 600 samples);
- **the road not taken**: the leverage ``z_tᵀA_{t−1}⁻¹z_t`` of each row (one triangular solve of
  the residual's factor per row) that the identity's left side would have needed per update.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_batch_objective.py [--rounds 15]

Prints the numbers and writes docs/benchmarks/batch-objective.md.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from harness import describe_machine, git_head, load_average
from scipy.linalg import solve_triangular

from lifelong_learning.dynamics import SemiparametricInverseDynamics, estimate_accelerations
from lifelong_learning.learners.batch_objective import model_objective, serving_engine
from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text

ROOT = Path(__file__).resolve().parents[1]
#: samples per learned block (the node learns what queued while it learned: a few at 1 kHz)
BLOCK = 5


def dynamics_model() -> tuple[SemiparametricInverseDynamics, tuple[np.ndarray, ...]]:
    """The node's model (shipped config) after 2 s of Panda motion, and 4 s more rows to learn."""
    log = PandaSimulation().run(6.0, seed=3)
    qdd = estimate_accelerations(log["t"], log["qd"])
    rows = (log["q"], log["qd"], qdd, log["tau"])
    model = SemiparametricInverseDynamics(
        panda_urdf_text(), JOINT_NAMES, n_features=500, forgetting="auto", seed=0
    )
    warm = slice(10, 210)
    model.update(*(r[warm] for r in rows))
    return model, tuple(r[210:] for r in rows)


def classifier() -> IncrementalRLSC:
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(10, 1280))
    y = rng.integers(0, 10, 600)
    clf = IncrementalRLSC(lambdas=[0.1, 1.0, 10.0, 100.0, 1000.0], alpha="auto")
    clf.partial_fit(centres[y] + rng.normal(scale=2.0, size=(600, 1280)), [f"c{v}" for v in y])
    return clf


def interleaved(steps: dict[str, Callable[[], None]], rounds: int, per_round: int) -> dict[str, float]:
    """Median µs of each step over ``rounds`` rounds of ``per_round`` calls, the steps in turn."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            t0 = time.perf_counter()
            for _ in range(per_round):
                step()
            times[name].append((time.perf_counter() - t0) / per_round * 1e6)
    return {name: float(np.median(t)) for name, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/batch-objective.md"))
    args = ap.parse_args()
    load = load_average()
    t_start = time.perf_counter()
    model, rows = dynamics_model()
    without = SemiparametricInverseDynamics.from_state(*model.to_state())
    n = rows[0].shape[0]
    cursor = {"with": 0, "without": 0}
    keep_moments = RecursiveRLS._add_moments

    def learn(m: SemiparametricInverseDynamics, key: str) -> Callable[[], None]:
        def step() -> None:
            i = cursor[key] % (n - BLOCK)
            cursor[key] += BLOCK
            block = slice(i, i + BLOCK)
            RecursiveRLS._add_moments = keep_moments if key == "with" else lambda *a: None  # type: ignore[method-assign]
            m.commit(m.stage(m.prepare(*(r[block] for r in rows[:3])), rows[3][block], solve_weights=True))

        return step

    k = {"answer": 0}

    def answer() -> None:
        i = k["answer"] % n
        k["answer"] += 1
        model.prepare(*(r[i : i + 1] for r in rows[:3]))

    engine = RecursiveRLS(500, 7, lam=1.0)
    targets, weights = rows[3][:BLOCK], np.ones(BLOCK)
    R = model.residual.engine.cholesky_factor
    phi = model.feature_map.transform(np.zeros((1, model.feature_map.n_inputs)))[0]
    clf = classifier()
    solved_clf = {"clf": clf}

    def report_classifier() -> None:  # its weights solved afresh, as after each taught sample
        serving_engine(solved_clf["clf"])._W = None
        model_objective(solved_clf["clf"])

    per_block = interleaved(
        {
            "learn a block (moments kept)": learn(model, "with"),
            "learn a block (moments not kept)": learn(without, "without"),
            "answer one joint state (prepare)": answer,
        },
        args.rounds,
        20,
    )
    RecursiveRLS._add_moments = keep_moments  # type: ignore[method-assign]
    reports = interleaved(
        {
            "keep the moments of one update (the code added to each update)": lambda: engine._add_moments(
                targets, weights
            ),
            "report: dynamics (weights solved by learning)": lambda: model_objective(model, solve=False),
            "report: recognition (weights solved there)": report_classifier,
            "one row's leverage (500 features, per update)": lambda: solve_triangular(
                R, phi, trans="T", lower=False, check_finite=False
            ),
        },
        args.rounds,
        20,
    )
    print(model_objective(model, solve=False), model_objective(clf))
    seconds = time.perf_counter() - t_start
    text = markdown({**per_block, **reports}, args, load, seconds)
    Path(args.out).write_text(text)
    print(text)


def markdown(us: dict[str, float], args: argparse.Namespace, load: str, seconds: float) -> str:
    with_, without = us["learn a block (moments kept)"], us["learn a block (moments not kept)"]
    lines = [
        "# The batch objective on ~/learning_metrics: what it costs",
        "",
        "Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_batch_objective.py "
        f"--rounds {args.rounds}`  ",
        f"Machine: {describe_machine()}  ",
        f"Git: {git_head()}, load average before: {load}; total time {seconds:.0f} s",
        "",
        "What is timed and why: the module docstring of `benchmarks/bench_batch_objective.py` (one process, "
        f"interleaved rounds, medians; a learned block is {BLOCK} joint states).",
        "",
        "| step | µs |",
        "|---|---:|",
        *(f"| {name} | {value:.1f} |" for name, value in us.items()),
        "",
        f"Keeping the targets' moments: {with_ - without:+.1f} µs per learned block of {BLOCK} "
        f"({100 * (with_ - without) / without:+.1f} %: the noise of the learning itself; the added code "
        "alone, per update of each engine, is the 'keep the moments' row), on the learning thread; the "
        "answer (the 1 kHz callback) computes nothing more. The report runs once per `metrics_period_s` "
        "(1 s), only when something subscribes to `~/learning_metrics` and the model learned since, "
        "under the model lock.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
