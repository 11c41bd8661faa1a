"""Other novelty scores of a showing, against the one the node uses, on the recognition benchmark's world.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_novelty_variants.py [--seeds 0 1 2 3 4 5]

Table 3 of ``bench_recognition_showing.py`` compares the scores the learner offers
(``IncrementalRLSC.novelty_score``: ``confidence``, ``leverage``, ``mahalanobis``, ``cosine``), each
averaged over a showing's frames. This one asks whether a score the learner does not offer, or
another way to make one number of a showing's frames, would separate never-taught objects better:

- scores: ``confidence`` (the node's), the classifier's largest raw score, negated (no calibration;
  Hendrycks and Gimpel's maximum-logit baseline), the entropy of the calibrated probabilities, the
  energy of the raw scores, ``−T log Σ_c exp(s_c / T)`` at ``T`` = :data:`ENERGY_T` (Liu et al.,
  NeurIPS 2020; every class's score counts, not only the largest), and the cosine distance to the
  nearest taught frame, and the mean of the five nearest (deep nearest neighbours, Sun et al., ICML
  2022: it needs every taught frame kept); the Mahalanobis distance to the nearest class mean in the
  metric of the taught rows' shared within-class covariance (Lee et al., NeurIPS 2018; the learner's
  ``mahalanobis`` uses their uncentred second moment), and the same minus the distance to the mean
  of all taught rows in the metric of their covariance (relative Mahalanobis, Ren et al., 2021: it
  discounts what sets every test row apart from the taught ones, such as the room); both covariances
  shrunk halfway to their mean variance (:data:`SHRINK`);
- a showing's number: the mean of its frames' scores (the node's), their median, or the score of
  the mean of its frames' features;
- whether a showing's frames agree: the share of its frames whose own answer is not the class most
  of them name (a taught object turning in a hand keeps its name; a never-taught one may be named
  after one taught object and then another), alone and added to the node's number.

And where the node's number fails: the never-taught objects are all blobs of the catalogue
(``sim/objects.py``: random meshes in a palette of six colours, placed after its 14 named meshes),
while the taught ones are drawn from both kinds; the AUROC of the never-taught showings against the
taught named meshes' and against the taught blobs' tells which kind they are taken for.

The world, the teaching (15 objects, 150 frames each with their pasted copies, the node's default
learner) and the test showings are those of ``bench_recognition_showing.py`` (its cached features;
without them it renders the world first, about 11 min a seed). Reported per score and rule: AUROC
of taught against never-taught test showings, and the share of never-taught showings flagged at
the threshold that answers 95 % of the taught ones.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from bench_recognition_showing import features, node_learner, pasted_features, published, rows, teach
from harness import seeds_main
from harness.provenance import report_head
from showing_report import ANSWERED, seed_values, separation
from showing_world import NEW, ROOT, TAUGHT

#: taught objects (table 3 of the recognition benchmark at 15 objects)
OBJECTS = 15
SCORES = (
    "confidence",
    "largest raw score",
    "entropy of the probabilities",
    "energy of the raw scores",
    "nearest taught frame",
    "5 nearest taught frames",
    "Mahalanobis, within-class covariance",
    "relative Mahalanobis",
)
#: the energy's temperature (the raw scores are one-hot codes' least squares fits: about 0..1)
ENERGY_T = 0.2
#: the covariances of the Mahalanobis scores are ``(1 − SHRINK) Σ + SHRINK · (tr Σ / d) I``
SHRINK = 0.5
#: how one number is made of a showing's frames
SHOWING: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mean of frames": lambda s: s.mean(axis=1),
    "median of frames": lambda s: np.median(s, axis=1),
}
MEAN_FEATURE = "score of the mean feature"
#: the node's number of a showing (the rows of the last two tables are measured with it)
NODE = "confidence | mean of frames"
#: weights of the frames' disagreement added to the node's number
AGREEMENT_WEIGHTS = (0.25, 1.0)
#: results kept apart from the table of scores and rules
APART = ("seed", "agreement", "by kind")


def _unit(Z: np.ndarray) -> np.ndarray:
    return Z / np.maximum(np.linalg.norm(Z, axis=-1, keepdims=True), 1e-300)


def _whitener(S: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor of covariance ``S`` shrunk by :data:`SHRINK`."""
    d = S.shape[0]
    return np.linalg.cholesky((1.0 - SHRINK) * S + SHRINK * (np.trace(S) / d) * np.eye(d))


def mahalanobis(taught: np.ndarray, labels: np.ndarray) -> Callable[[np.ndarray, bool], np.ndarray]:
    """``distance(F, relative)``: per row of ``F``, ``min_c (f − μ_c)ᵀ Σ_w⁻¹ (f − μ_c)`` over the class
    means ``μ_c`` of the ``taught`` rows (of ``labels``) and their shared within-class covariance
    ``Σ_w``; ``relative``: each class's distance minus ``(f − μ)ᵀ Σ⁻¹ (f − μ)`` before the minimum, ``μ``
    and ``Σ`` the mean and covariance of every taught row."""
    from scipy.linalg import solve_triangular

    classes, index = np.unique(labels, return_inverse=True)
    means = np.stack([taught[index == c].mean(axis=0) for c in range(classes.size)])
    within, centred = taught - means[index], taught - taught.mean(axis=0)
    L_w, L = _whitener(within.T @ within / len(taught)), _whitener(centred.T @ centred / len(taught))
    M = solve_triangular(L_w, means.T, lower=True)

    def distance(F: np.ndarray, relative: bool) -> np.ndarray:
        U = solve_triangular(L_w, F.T, lower=True)
        per_class = (U * U).sum(axis=0)[:, None] - 2.0 * (U.T @ M) + (M * M).sum(axis=0)[None, :]
        if relative:
            V = solve_triangular(L, (F - taught.mean(axis=0)).T, lower=True)
            per_class = per_class - (V * V).sum(axis=0)[:, None]
        return per_class.min(axis=1)

    return distance


def scorer(model, taught: np.ndarray, labels: np.ndarray) -> Callable[[np.ndarray, str], np.ndarray]:
    """``score(F, name)``: the novelty of each row of ``F`` (rows × d), higher: more likely new;
    ``taught``: the rows the model learned, of ``labels``."""
    from scipy.special import logsumexp

    kept = _unit(taught)
    distance = mahalanobis(taught, labels)

    def score(F: np.ndarray, name: str) -> np.ndarray:
        if name == "confidence":
            return model.novelty_score(F, "confidence")
        if name == "largest raw score":
            return -model.decision_function(F).max(axis=1)
        if name == "entropy of the probabilities":
            P = model.predict_proba(F)
            return -(P * np.log(np.maximum(P, 1e-300))).sum(axis=1)
        if name == "energy of the raw scores":
            return -ENERGY_T * logsumexp(model.decision_function(F) / ENERGY_T, axis=1)
        if "Mahalanobis" in name:
            return distance(F, relative=name.startswith("relative"))
        similarity = _unit(F) @ kept.T
        nearest = 1 if name == "nearest taught frame" else 5
        return 1.0 - np.sort(similarity, axis=1)[:, -nearest:].mean(axis=1)

    return score


def disagreement(model, F: np.ndarray) -> np.ndarray:
    """Per showing of ``F`` (showings × frames × d): the share of its frames whose answer is not the
    class most of its frames name."""
    answers = model.predict_proba(F.reshape(-1, F.shape[-1])).argmax(axis=1).reshape(F.shape[:2])
    return np.array([1.0 - np.bincount(a).max() / a.size for a in answers])


def agreement(model, known: np.ndarray, new: np.ndarray, node: tuple[np.ndarray, np.ndarray]) -> dict:
    """The frames' disagreement as a showing's novelty, alone and added to the node's (``node``: its
    numbers of the known and the new showings)."""
    apart = disagreement(model, known), disagreement(model, new)
    out = {"disagreement of the frames": separation(*apart)}
    for w in AGREEMENT_WEIGHTS:
        out[f"the node's + {w:g} × the disagreement"] = separation(
            node[0] + w * apart[0], node[1] + w * apart[1]
        )
    return out


def by_kind(seed: int, objects: np.ndarray, node: tuple[np.ndarray, np.ndarray]) -> dict:
    """The node's separation of the never-taught showings from the taught named meshes' and from the
    taught blobs' (with how many of each kind were taught)."""
    from lifelong_learning.sim.objects import object_catalog

    catalogue = object_catalog(TAUGHT + NEW, seed)
    if not all(c.name.startswith("blob") for c in catalogue[TAUGHT:]):
        raise ValueError("the never-taught objects are expected to be blobs")
    blob = np.array([catalogue[int(o)].name.startswith("blob") for o in objects])
    return {
        kind: {**separation(node[0][mask], node[1]), "taught": int(mask.sum())}
        for kind, mask in (("named meshes", ~blob), ("blobs", blob))
        if mask.any()
    }


def one_seed(seed: int) -> dict:

    X = published({**features(seed), **pasted_features(seed)})
    objects = np.random.default_rng([seed, 31]).permutation(TAUGHT)[:OBJECTS]
    model = teach(node_learner(), X, objects, {})
    taught = [rows(X, int(o), slice(0, None)) for o in objects]
    labels = np.concatenate([np.full(len(t), int(o)) for t, o in zip(taught, objects, strict=True)])
    score = scorer(model, np.concatenate(taught), labels)
    known, new = X["test"][objects], X["new"]
    novelties: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # a showing's number: (taught, never taught)
    for name in SCORES:
        per_frame = {
            key: score(F.reshape(-1, F.shape[-1]), name).reshape(F.shape[:2])
            for key, F in (("known", known), ("new", new))
        }
        for rule, f in SHOWING.items():
            novelties[f"{name} | {rule}"] = (f(per_frame["known"]), f(per_frame["new"]))
        novelties[f"{name} | {MEAN_FEATURE}"] = (
            score(known.mean(axis=1), name),
            score(new.mean(axis=1), name),
        )
    out: dict = {"seed": seed, **{key: separation(a, b) for key, (a, b) in novelties.items()}}
    node = novelties[NODE]
    out["agreement"] = agreement(model, known, new, node)
    out["by kind"] = by_kind(seed, objects, node)
    print(f"seed {seed}: " + ", ".join(f"{k}: {v['auroc']:.3f}" for k, v in out.items() if k not in APART))
    print(f"seed {seed}: agreement {out['agreement']}, by kind {out['by kind']}", flush=True)
    return out


def _finding(results: list[dict]) -> str:
    """The best row against the node's, in words, from the measured means."""
    keys = [k for k in results[0] if k not in APART]
    mean = {k: float(np.mean(seed_values(results, k, "auroc"))) for k in keys}
    best = max(keys, key=mean.get)
    spread = max(seed_values(results, NODE, "auroc")) - min(seed_values(results, NODE, "auroc"))
    kinds = {
        kind: np.mean([r["by kind"][kind]["auroc"] for r in results if kind in r["by kind"]])
        for kind in ("named meshes", "blobs")
    }
    return (
        f"The best: {best.replace(' | ', ', ')}, AUROC {mean[best]:.3f}, against the node's "
        f"({NODE.replace(' | ', ', ')}) {mean[NODE]:.3f}, whose seeds span {spread:.2f}. The node's "
        f"separates the never-taught blobs from the taught named meshes at {kinds['named meshes']:.3f}, "
        f"from the taught blobs at {kinds['blobs']:.3f}."
    )


def _apart_tables(results: list[dict]) -> list[str]:
    """The tables of the frames' agreement and of the taught objects' kinds."""
    lines = [
        "",
        "## Whether a showing's frames agree",
        "",
        "| a showing's novelty | AUROC | seeds | flagged % |",
        "|---|---:|---|---:|",
    ]
    for key in results[0]["agreement"]:
        auroc = [r["agreement"][key]["auroc"] for r in results]
        flagged = np.mean([r["agreement"][key]["flagged"] for r in results])
        lines.append(f"| {key} | {np.mean(auroc):.3f} | {min(auroc):.2f}–{max(auroc):.2f} | {flagged:.1f} |")
    lines += [
        "",
        "## The never-taught blobs against each kind of taught object (the node's number)",
        "",
        "| taught objects | per world | AUROC | seeds | flagged % |",
        "|---|---:|---:|---|---:|",
    ]
    for kind in ("named meshes", "blobs"):
        rows = [r["by kind"][kind] for r in results if kind in r["by kind"]]
        auroc = [row["auroc"] for row in rows]
        lines.append(
            f"| {kind} | {np.mean([row['taught'] for row in rows]):.1f} | {np.mean(auroc):.3f} | "
            f"{min(auroc):.2f}–{max(auroc):.2f} | {np.mean([row['flagged'] for row in rows]):.1f} |"
        )
    return lines


def markdown(results: list[dict], seconds: float) -> str:
    keys = [k for k in results[0] if k not in APART]
    seeds = " ".join(str(r["seed"]) for r in results)
    lines = report_head(
        "Novelty of a showing: scores and rules the learner does not use, against the one it does",
        f"OPENBLAS_NUM_THREADS=1 python benchmarks/bench_novelty_variants.py --seeds {seeds}",
        seconds,
    )
    lines += [
        f"{OBJECTS} objects taught (150 frames each, with their pasted copies; the node's default learner), "
        "10 never taught; test rooms for both; the world and features of "
        "[recognition-showing.md](recognition-showing.md) (its table 3 at 15 objects is the first row). "
        f"Flagged: never-taught showings above the threshold that answers {100 * ANSWERED:.0f} % of the "
        "taught ones. Mean over seeds; the seeds' range of the AUROC beside it.",
        "",
        _finding(results),
        "",
        "| score | a showing's number | AUROC | seeds | flagged % |",
        "|---|---|---:|---|---:|",
    ]
    for key in keys:
        auroc = seed_values(results, key, "auroc")
        flagged = np.mean(seed_values(results, key, "flagged"))
        name, rule = key.split(" | ")
        lines.append(
            f"| {name} | {rule} | {np.mean(auroc):.3f} | {min(auroc):.2f}–{max(auroc):.2f} | {flagged:.1f} |"
        )
    lines += _apart_tables(results)
    return "\n".join(lines) + "\n"


def main() -> None:
    seeds_main(__doc__, one_seed, markdown, ROOT / "docs/benchmarks/recognition-novelty-variants.md")


if __name__ == "__main__":
    main()
