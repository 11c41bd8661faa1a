"""λ chosen on the stream by the prequential error of a λ grid (learners/prequential_lambda.py),
against object_recognition's present rule (one labeled sample in six held out, λ and α chosen on
them: learners/model_selection.py), on the thesis's Table 7.1 protocol and on the dynamics stream.

(a) **Table 7.1 protocol** (``benchmarks/bench_rlsc.py`` (a), digits): T − 1 balanced classes (100
    training + 20 validation samples each, one shuffled stream), then the T-th class arrives one
    sample at a time; total and rare-class test accuracy at each n_imb, over ``--trials`` trials
    (the rare class cycles). Held out: ``IncrementalRLSC(lambdas=LAMBDAS, alpha="auto")`` (RC);
    prequential: ``PrequentialLambdaClassifier(LAMBDAS)`` racing every (λ, α) of the same grids on
    every sample. Both see the same stream; the held-out rule learns five in six of it.
(b) **The dynamics stream**: the simulated Panda of ``benchmarks/bench_retraining.py`` (a 1 kg payload
    grasped at 60 % of ``--seconds``), the rigid-body part with friction learned online, the
    residual's inputs mapped by the node's 500 random features; the residual learned by (i) each
    λ of the grid fixed (the node's ``lam_residual`` is 0.1), (ii) the prequential race, (iii) the
    held-out rule carried over (one sample in six held out, in a buffer of 300, λ chosen every 50
    samples on the current engines' error there). Errors: the served prediction of every sample
    before it is learned (torque nMSE of the semiparametric answer, mean over joints), and on a new
    15 s trajectory (payload attached) after the stream.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_prequential_lambda.py [--trials 10] [--seeds 0 1 2]

Writes docs/benchmarks/prequential-lambda.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from harness import describe_machine, git_head, load_average

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.dynamics import SemiparametricInverseDynamics, estimate_accelerations
from lifelong_learning.dynamics.semiparametric import residual_features
from lifelong_learning.learners import IncrementalRLSC
from lifelong_learning.learners.prequential_lambda import PrequentialLambdaClassifier, PrequentialLambdaRLS
from lifelong_learning.learners.random_features import RandomFourierFeatures
from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text

ROOT = Path(__file__).resolve().parents[1]
LAMBDAS = np.logspace(-3, 4, 8)  # bench_rlsc.py's grid
N_IMB = (1, 5, 10, 50, 100, 124)
DYNAMICS_LAMBDAS = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0)


# ---------------------------------------------------------------------------- (a) Table 7.1
def table_trial(X: np.ndarray, y: np.ndarray, trial: int, rng: np.random.Generator) -> dict:
    """One trial: {rule: {n_imb: (total acc, rare acc, λ)}}."""
    classes = np.unique(y)
    rare = classes[trial % classes.size]
    n_test, n_bal = 50, 100
    max_imb = min(np.bincount(y)) - n_test
    bal, test, rare_idx = [], [], None
    for c in classes:
        idx = rng.permutation(np.flatnonzero(y == c))
        test.append(idx[:n_test])
        if c == rare:
            rare_idx = idx[n_test : n_test + max_imb]
        else:
            bal.append(idx[n_test : n_test + n_bal + n_bal // 5])
    stream = np.concatenate([rng.permutation(np.concatenate(bal)), rare_idx])
    test = np.concatenate(test)
    labels = np.array([f"d{v}" for v in y], dtype=object)
    models = {
        "held out (1 in 6)": IncrementalRLSC(lambdas=LAMBDAS, alpha="auto"),
        "prequential": PrequentialLambdaClassifier(LAMBDAS),
    }
    out: dict = {name: {} for name in models}
    n_bal_stream = stream.size - rare_idx.size
    for name, model in models.items():
        t0 = time.perf_counter()
        model.partial_fit(X[stream[:n_bal_stream]], labels[stream[:n_bal_stream]])
        for k, i in enumerate(rare_idx, start=1):
            model.partial_fit(X[i : i + 1], labels[i : i + 1])
            if k in N_IMB or k == rare_idx.size:
                pred = model.predict(X[test])
                is_rare = y[test] == rare
                out[name][k] = (
                    float(np.mean(pred == labels[test])),
                    float(np.mean(pred[is_rare] == labels[test][is_rare])),
                    float(model.lambda_),
                )
        out[name]["seconds"] = time.perf_counter() - t0
    return out


def table(trials: int) -> list[str]:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    rng = np.random.default_rng(0)
    results = [table_trial(X, y, t, rng) for t in range(trials)]
    rules = list(results[0])
    checkpoints = sorted(k for k in results[0][rules[0]] if k != "seconds")
    lines = [
        "| n_imb | "
        + " | ".join(f"total, {r}" for r in rules)
        + " | "
        + " | ".join(f"rare, {r}" for r in rules)
        + " | "
        + " | ".join(f"λ (median), {r}" for r in rules)
        + " |",
        "|---:|" + "---:|" * (3 * len(rules)),
    ]
    for k in checkpoints:
        cells = [str(k)]
        for part in (0, 1):
            for r in rules:
                v = 100 * np.array([res[r][k][part] for res in results])
                cells.append(f"{v.mean():.1f} ± {v.std():.1f}")
        cells += [f"{np.median([res[r][k][2] for res in results]):g}" for r in rules]
        lines.append("| " + " | ".join(cells) + " |")
    seconds = {r: np.mean([res[r]["seconds"] for res in results]) for r in rules}
    lines += [
        "",
        "Time per trial (learning the stream and the tests): "
        + ", ".join(f"{r} {s:.1f} s" for r, s in seconds.items()),
    ]
    return lines


# ---------------------------------------------------------------------------- (b) dynamics
class HeldOutLambdaRLS:
    """object_recognition's rule carried over to regression: one sample in six held out (not learned),
    kept in a buffer of 300, λ chosen every 50 samples by the current engines' error there."""

    def __init__(self, n_features: int, n_outputs: int, lambdas: tuple[float, ...]) -> None:
        self.lambdas = lambdas
        self.engines = [RecursiveRLS(n_features, n_outputs, lam=v) for v in lambdas]
        self.serving, self.n_samples = int(np.argmax(lambdas)), 0
        self.buffer: list[tuple[np.ndarray, np.ndarray]] = []

    @property
    def lam(self) -> float:
        return self.lambdas[self.serving]

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return self.engines[self.serving].predict(Z)

    def update(self, Z: np.ndarray, U: np.ndarray) -> None:
        self.n_samples += 1
        if self.n_samples % 6 == 0:
            self.buffer = [*self.buffer, (Z, U)][-300:]
        else:
            for engine in self.engines:
                engine.update(Z, U)
        if self.n_samples % 50 == 0 and len(self.buffer) >= 10:
            Zv, Uv = np.vstack([b[0] for b in self.buffer]), np.vstack([b[1] for b in self.buffer])
            errors = [float(((e.predict(Zv) - Uv) ** 2).mean()) for e in self.engines]
            self.serving = int(np.argmin(errors))


def dynamics_seed(seed: int, seconds: float) -> dict[str, float]:
    log = PandaSimulation().run(seconds, seed=seed, log_every=5, payload_mass=1.0, payload_at=0.6 * seconds)
    new = PandaSimulation().run(15.0, seed=seed + 1000, log_every=5, payload_mass=1.0, payload_at=0.0)
    urdf = panda_urdf_text()
    rigid = SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode="parametric")
    probe = SemiparametricInverseDynamics(urdf, JOINT_NAMES, n_features=500)  # the node's residual map
    fmap: RandomFourierFeatures = probe.feature_map
    learners = {f"λ = {v:g} fixed": RecursiveRLS(500, 7, lam=v) for v in DYNAMICS_LAMBDAS}
    learners["prequential race"] = PrequentialLambdaRLS(500, 7, DYNAMICS_LAMBDAS)
    learners["held out (1 in 6)"] = HeldOutLambdaRLS(500, 7, DYNAMICS_LAMBDAS)
    qdd = estimate_accelerations(log["t"], log["qd"])
    answers = {name: [] for name in learners}
    for i in range(10, log["t"].size):
        q, qd, a, tau = log["q"][i : i + 1], log["qd"][i : i + 1], qdd[i : i + 1], log["tau"][i : i + 1]
        tau_p = rigid.predict(q, qd, a)
        phi = fmap.transform(residual_features(rigid.normalized_state(q, qd, a), tau_p, rigid.torque_scale))
        for name, learner in learners.items():
            answers[name].append(tau_p[0] + learner.predict(phi)[0])
            learner.update(phi, tau - tau_p)
        rigid.update(q, qd, a, tau)
    qdd_new = estimate_accelerations(new["t"], new["qd"])
    tau_p = rigid.predict(new["q"], new["qd"], qdd_new)
    phi = fmap.transform(
        residual_features(rigid.normalized_state(new["q"], new["qd"], qdd_new), tau_p, rigid.torque_scale)
    )
    out = {}
    for name, learner in learners.items():
        out[f"stream: {name}"] = float(normalized_mse(log["tau"][10:], np.array(answers[name])).mean())
        out[f"new trajectory: {name}"] = float(
            normalized_mse(new["tau"], tau_p + learner.predict(phi)).mean()
        )
    out["λ at the end: prequential race"] = learners["prequential race"].lam
    out["λ at the end: held out (1 in 6)"] = learners["held out (1 in 6)"].lam
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/prequential-lambda.md"))
    args = ap.parse_args()
    load, t0 = load_average(), time.perf_counter()
    lines_a = table(args.trials)
    rows = []
    for seed in args.seeds:
        rows.append(dynamics_seed(seed, args.seconds))
        print(f"seed {seed}: {rows[-1]}", flush=True)
    lines = [
        "# λ chosen on the stream (prequential race) against one sample in six held out",
        "",
        "Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_prequential_lambda.py "
        f"--trials {args.trials} --seeds {' '.join(map(str, args.seeds))} --seconds {args.seconds:g}`  ",
        f"Machine: {describe_machine()}  ",
        f"Git: {git_head()}, load average before: {load}; total time {time.perf_counter() - t0:.0f} s",
        "",
        "What is run: the module docstring of `benchmarks/bench_prequential_lambda.py`.",
        "",
        f"## (a) Table 7.1 protocol, digits ({args.trials} trials; test accuracy %, mean ± std)",
        "",
        *lines_a,
        "",
        f"## (b) The dynamics stream (simulated Panda, {args.seconds:g} s, payload grasped at 60 %)",
        "",
        "| torque nMSE | " + " | ".join(f"seed {s}" for s in args.seeds) + " | mean |",
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
