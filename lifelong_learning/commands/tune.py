"""``lifelong-learning tune``: tune a Nyström model on rosbag2 logs and write a model file.

Reads the bags (:mod:`lifelong_learning.io.bags`), holds out a test split, tunes λ,
length-scales and centres with each requested objective (:func:`lifelong_learning.nystrom.tune`),
and exports the model tuned with the first objective to the online learners' model file:

- ``--task classification``: LabeledFeatures → an IncrementalRLSC with the Nyström map;
- ``--task inverse-dynamics``: JointState → a SemiparametricInverseDynamics (``--urdf``) whose
  residual (of the rigid-body model) is the Nyström map + RLS.

A report (markdown and JSON, next to the model) lists per objective the test metrics, the
time and the chosen hyperparameters.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HELP = "tune a Nyström model (λ, length-scales, centres) on rosbag2 logs and write a model file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``tune``."""
    parser.add_argument("bags", nargs="+", help="rosbag2 directories (MCAP or sqlite3)")
    parser.add_argument("--task", choices=("classification", "inverse-dynamics"), required=True)
    parser.add_argument(
        "--objective",
        default="proposed",
        help="objective(s), comma-separated: proposed, proposed-stochastic, gcv, creg, sgpr, holdout; "
        "the first one's model is exported, the others are reported for comparison",
    )
    parser.add_argument("--centers", type=int, default=100, help="number of Nyström centres M")
    parser.add_argument(
        "--epochs", type=int, default=100, help="Adam steps (early stop when the objective rises)"
    )
    parser.add_argument("--lr", type=float, default=0.05, help="Adam learning rate")
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    parser.add_argument("--test-fraction", type=float, default=0.2, help="held-out test share")
    parser.add_argument("--topic", default=None, help="topic to read (default: every topic of the type)")
    parser.add_argument("--urdf", default=None, help="URDF of the robot (inverse-dynamics)")
    parser.add_argument("--out", required=True, help="model file to write")
    parser.add_argument("--report", default=None, help="report path without suffix (default: OUT.report)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _split(n: int, fraction: float, rng: Any, chronological: bool) -> tuple[Any, Any]:
    import numpy as np

    n_test = max(1, round(fraction * n))
    if n - n_test < 4:
        raise ValueError(f"too few samples ({n}) for a test split of {fraction}")
    idx = np.arange(n) if chronological else rng.permutation(n)
    return np.sort(idx[: n - n_test]), np.sort(idx[n - n_test :])


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Nyström tuning report ({report['task']})",
        "",
        f"- bags: {', '.join(report['bags'])}",
        f"- samples: {report['n_train']} train, {report['n_test']} test; centres: {report['centers']}",
        f"- exported: `{report['model']}` (objective `{report['exported_objective']}`)",
    ]
    if "baseline" in report:
        lines.append(f"- baseline: {report['baseline']}")
    lines += [
        "",
        "| objective | test metric | value | tuning time (s) | epochs | λ | length-scales |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in report["objectives"].items():
        ls = ", ".join(f"{v:.3g}" for v in r["lengthscale"])
        lines.append(
            f"| {name} | {r['metric']} | {r['value']:.4g} | {r['seconds']:.1f} | {r['epochs']} "
            f"| {r['lam']:.3g} | {ls} |"
        )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Read, tune, evaluate, export, report. Returns 0 on success, 2 on bad input."""
    import numpy as np

    from lifelong_learning.io.bags import BagError, read_joint_states, read_labeled_features
    from lifelong_learning.nystrom import OBJECTIVES, tune
    from lifelong_learning.nystrom.export import (
        export_classifier,
        export_inverse_dynamics,
        one_hot,
        rigid_body_residuals,
    )

    objectives = [o.strip() for o in args.objective.split(",") if o.strip()]
    bad = [o for o in objectives if o not in OBJECTIVES]
    if not objectives or bad:
        print(f"error: unknown objective(s) {bad}; known: {', '.join(OBJECTIVES)}", file=sys.stderr)
        return 2
    if not 0.0 < args.test_fraction < 1.0:
        print("error: --test-fraction must be in (0, 1)", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.seed)
    report: dict[str, Any] = {
        "task": args.task,
        "bags": [str(b) for b in args.bags],
        "centers": args.centers,
        "model": str(args.out),
        "exported_objective": objectives[0],
        "objectives": {},
    }
    try:
        if args.task == "classification":
            data = read_labeled_features(args.bags, topic=args.topic)
            tr, te = _split(len(data.labels), args.test_fraction, rng, chronological=False)
            labels_tr = [data.labels[i] for i in tr]
            classes, E = one_hot(labels_tr)
            X_tr, X_te, Y_tr = data.X[tr], data.X[te], E
            labels_te = np.array([data.labels[i] for i in te], dtype=object)
        else:
            if not args.urdf:
                print("error: --task inverse-dynamics needs --urdf", file=sys.stderr)
                return 2
            urdf = Path(args.urdf).read_text(encoding="utf-8")
            js = read_joint_states(args.bags, topic=args.topic)
            tr, te = _split(js.t.size, args.test_fraction, rng, chronological=True)
            par, X_tr, Y_tr = rigid_body_residuals(
                urdf, js.joint_names, js.q[tr], js.qd[tr], js.qdd[tr], js.tau[tr]
            )
            tau_p_te = par.predict(js.q[te], js.qd[te], js.qdd[te])
            X_te = np.hstack(
                [par.normalized_state(js.q[te], js.qd[te], js.qdd[te]), tau_p_te / par.torque_scale]
            )
            var = js.tau[te].var(axis=0)
            nmse_rbd = ((js.tau[te] - tau_p_te) ** 2).mean(axis=0) / np.where(var > 0, var, 1.0)
            report["baseline"] = f"rigid-body model (URDF prior + RLS) mean test nMSE {nmse_rbd.mean():.4g}"
    except (BagError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report["n_train"], report["n_test"] = len(tr), len(te)
    exported = None
    for obj in objectives:
        t0 = time.perf_counter()
        model = tune(
            X_tr,
            Y_tr,
            centers=args.centers,
            objective=obj,
            epochs=args.epochs,
            lr=args.lr,
            dtype=args.dtype,
            device=args.device,
            progress=not args.no_progress,
            seed=args.seed,
        )
        seconds = time.perf_counter() - t0
        pred = model.predict(X_te)
        if args.task == "classification":
            err = float(np.mean(np.asarray(classes, dtype=object)[pred.argmax(1)] != labels_te))
            metric, value = "test error (%)", 100.0 * err
        else:
            resid_te = js.tau[te] - tau_p_te
            nmse = ((resid_te - pred) ** 2).mean(axis=0) / np.where(var > 0, var, 1.0)
            metric, value = "test nMSE (mean over joints)", float(nmse.mean())
        info = model.tuning_
        report["objectives"][obj] = {
            "metric": metric,
            "value": value,
            "seconds": seconds,
            "epochs": info.epochs,
            "lam": info.lam,
            "lengthscale": info.lengthscale,
            "final_objective": info.history[-1] if info.history else None,
        }
        print(f"{obj}: {metric} = {value:.4g} in {seconds:.1f} s (λ = {info.lam:.3g})")
        if exported is None:
            exported = model
    assert exported is not None
    out = Path(args.out)
    if args.task == "classification":
        export_classifier(exported, X_tr, labels_tr, out)
    else:
        export_inverse_dynamics(
            exported, urdf, js.joint_names, js.q[tr], js.qd[tr], js.qdd[tr], js.tau[tr], out
        )
    base = Path(args.report) if args.report else out.with_name(out.name + ".report")
    md = _markdown(report)
    base.with_suffix(base.suffix + ".md").write_text(md, encoding="utf-8")
    base.with_suffix(base.suffix + ".json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(md)
    print(f"model written to {out}")
    return 0
