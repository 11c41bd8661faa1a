"""Bounded answers (KTR³'s truncation, dynamics/truncation.py and learners/truncation.py): how often
they clip, what it does to the error, what it costs, on the stream the learners see.

- **inverse dynamics**: the simulated Panda of ``benchmarks/bench_retraining.py`` (a 1 kg payload
  grasped at 60 % of ``--seconds``), fed one joint state at a time to the node's model (the shipped
  configuration: semiparametric, 500 random features, friction, ``forgetting: auto``), each answered
  before it is learned; then a new 15 s trajectory (payload attached) answered by the model as
  learned. Per answer: the torque nMSE of the raw and of the bounded answers (the residual to its
  targets' range, the torque to twice the URDF's effort limits: ``limit_margin`` 1), the entries
  clipped, and the time of the bounding;
- **recognition**: sklearn's digits (a stratified 80 % taught one sample at a time to the node's
  classifier: the λ grid, ``alpha: auto``, one in six held out), each classified before it is taught,
  then the other 20 %: the classes answered (the same by construction) and the scores clipped.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_truncation.py [--seeds 0 1 2] [--seconds 40]

Writes docs/benchmarks/truncation.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from harness import describe_machine, git_head, load_average

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.dynamics import SemiparametricInverseDynamics, estimate_accelerations
from lifelong_learning.dynamics.truncation import AnswerBounds
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.learners.truncation import ScoreBounds
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text

ROOT = Path(__file__).resolve().parents[1]


def dynamics(seed: int, seconds: float) -> dict:
    log = PandaSimulation().run(seconds, seed=seed, log_every=5, payload_mass=1.0, payload_at=0.6 * seconds)
    new = PandaSimulation().run(15.0, seed=seed + 1000, log_every=5, payload_mass=1.0, payload_at=0.0)
    model = SemiparametricInverseDynamics(panda_urdf_text(), JOINT_NAMES, n_features=500, forgetting="auto")
    bounds = AnswerBounds(margin=1.0)
    qdd = estimate_accelerations(log["t"], log["qd"])
    raw, bounded, seconds_bounding, seconds_answering = [], [], 0.0, 0.0
    for i in range(10, log["t"].size):  # the q̈ filter's first samples left out, as the node does
        t0 = time.perf_counter()
        prepared = model.prepare(log["q"][i : i + 1], log["qd"][i : i + 1], qdd[i : i + 1])
        t1 = time.perf_counter()
        answer = bounds.prepared(model, prepared)
        seconds_bounding += time.perf_counter() - t1
        seconds_answering += t1 - t0
        raw.append(prepared.torque[0])
        bounded.append(answer.torque[0])
        model.commit(model.stage(prepared, log["tau"][i : i + 1]))
    tau = log["tau"][10:]
    streamed = (bounds.residual, bounds.effort)
    qdd_new = estimate_accelerations(new["t"], new["qd"])
    parts = model.predict(new["q"], new["qd"], qdd_new, return_parts=True)
    after = AnswerBounds(margin=1.0)
    new_bounded = after.parts(model, parts)["torque"]
    n = tau.shape[0]
    return {
        "stream: raw nMSE": float(normalized_mse(tau, np.array(raw)).mean()),
        "stream: bounded nMSE": float(normalized_mse(tau, np.array(bounded)).mean()),
        "stream: entries clipped to the residual's range (%)": 100.0 * streamed[0] / (7 * n),
        "stream: entries clipped to the effort limits (%)": 100.0 * streamed[1] / (7 * n),
        "stream: the answer's prediction (prepare) per sample (µs)": 1e6 * seconds_answering / n,
        "stream: its bounding per sample (µs)": 1e6 * seconds_bounding / n,
        "new trajectory: raw nMSE": float(normalized_mse(new["tau"], parts["torque"]).mean()),
        "new trajectory: bounded nMSE": float(normalized_mse(new["tau"], new_bounded).mean()),
        "new trajectory: entries clipped (%)": 100.0 * (after.residual + after.effort) / (7 * new["t"].size),
    }


def recognition(seed: int) -> dict:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.2, stratify=y, random_state=seed)
    clf = IncrementalRLSC(lambdas=[0.1, 1.0, 10.0, 100.0, 1000.0], alpha="auto")
    bounds = ScoreBounds(enabled=True)
    scored = 0
    for x, label in zip(Xtr, ytr, strict=True):
        if len(clf.classes_) > 1:
            bounds.scores(clf, clf.decision_function(x[None])[0])
            scored += 1
        clf.partial_fit(x[None], [f"d{label}"])
    clipped_stream = bounds.clipped
    test = ScoreBounds(enabled=True)
    for x in Xte:
        test.scores(clf, clf.decision_function(x[None])[0])
    classes = len(clf.classes_)
    return {
        "stream: scores clipped (%)": 100.0 * clipped_stream / (classes * scored),
        "new images: scores clipped (%)": 100.0 * test.clipped / (classes * len(Xte)),
        "new images: % wrong (the same bounded or not)": 100.0
        * float(np.mean(clf.predict(Xte) != np.array([f"d{v}" for v in yte], dtype=object))),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/truncation.md"))
    args = ap.parse_args()
    load, t0 = load_average(), time.perf_counter()
    rows = []
    for seed in args.seeds:
        row = {**dynamics(seed, args.seconds), **recognition(seed)}
        print(f"seed {seed}: {row}", flush=True)
        rows.append(row)
    lines = [
        "# Bounded answers (KTR³'s truncation) on the learners' streams",
        "",
        f"Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_truncation.py --seeds "
        f"{' '.join(map(str, args.seeds))} --seconds {args.seconds:g}`  ",
        f"Machine: {describe_machine()}  ",
        f"Git: {git_head()}, load average before: {load}; total time {time.perf_counter() - t0:.0f} s",
        "",
        "What is run: the module docstring of `benchmarks/bench_truncation.py`.",
        "",
        "| measure | " + " | ".join(f"seed {s}" for s in args.seeds) + " | mean |",
        "|---|" + "---:|" * (len(args.seeds) + 1),
    ]
    for key in rows[0]:
        values = [r[key] for r in rows]
        lines.append(f"| {key} | " + " | ".join(f"{v:.4g}" for v in values) + f" | {np.mean(values):.4g} |")
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
