"""Benchmark: recognition a person can trust, per showing (→ docs/benchmarks/recognition-showing.md).

The world (benchmarks/showing_world.py, lifelong_learning/sim/showing.py): per seed, 50 objects each
shown for 150 frames (10 s at 15 Hz) in a teaching room and 12 in a test room, and 10 objects never
taught shown in a test room; 320×240 frames cut by the motion crop (the feature_extractor node's
``crop: motion``), EfficientNet-Lite0 int8 features (the node's default), cached under
``runs/bench_cache/``. Objects are taught one at a time (a random order per seed) to the
object_recognition node's learner (its default parameters) with ``--taught`` frames each (all 150: a
person holding an object up for 10 s; the demo teaches 12), each frame with its copy pasted onto the
empty room of an earlier teaching session (the node's ``paste_copies: 1``, lifelong_learning/vision/paste.py;
``showing_world.pasted_world``); a showing is one session's frames.

Tables:

1. per frame against per showing (each rule of ``learners/showing.py``), at 15 and 50 objects;
2. the rare object (3 labelled frames against ``--taught`` for the others) per showing, by recoding α;
3. "I don't know": every novelty score of ``learners/novelty.py``, AUROC (scikit-learn's
   ``roc_auc_score``) of the 10 never-taught objects' test showings against the taught objects' test
   showings, per frame and per showing, and the share of never-taught flagged at the threshold where
   95 % of the taught are answered (that threshold's value: median over seeds);
4. asking: each object is shown three times (its teaching frames in three showings of a third); a
   teacher who labels every frame, against one who labels a showing only when the robot asks
   (answer unknown, novelty above the question threshold, or the best two classes close):
   accuracy on the test showings against the labels given; 4b. the calibration's smoothing counted
   by samples or by classes (``calibration_evidence``);
5. pipeline choices at 15 objects: frames taught per showing (the first n, or n spread over the
   showing), feature normalisation, augmentation of the taught frames (pasted onto rooms seen
   before, against the frames alone and mirror, crop scale and shift, colour on the frames alone;
   extra samples at teaching only) and the backbones (EfficientNet-Lite0/1/2, fp32 and int8, taught
   with the frames alone; images/s at 640×480 measured here).

The tables and the summary against the goals are written by benchmarks/showing_report.py.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_showing.py [--seeds 0 1 2 3 4 5] [--quick]
        [--jobs 2] [--no-backbones | --reuse-backbones docs/benchmarks/recognition-showing.json]

``--jobs 2`` measures two seeds at once (one process each; on two cores, the update's and the
annotation's times are then taken beside another seed's work). ``--reuse-backbones`` takes table 5's
backbones from an earlier run of the same seeds instead of measuring them again (their features are
most of the run's time), and the report says where they were measured.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from harness import run_seeds  # benchmarks/harness (sys.path[0] is benchmarks/)
from showing_report import ANSWERED, CHANGE_THRESHOLDS, PASTE, PUBLISHED, markdown
from showing_world import NEW, ROOT, TAUGHT, TEACH, TEST, pasted_world, world

from lifelong_learning.learners import IncrementalRLSC
from lifelong_learning.learners.model_selection import CALIBRATION_EVIDENCE
from lifelong_learning.learners.novelty import SCORES
from lifelong_learning.learners.recursive_rls import QUEUE_ROWS
from lifelong_learning.learners.showing import RULES, ShowingAnswer, evidence, judge_showing
from lifelong_learning.learners.showings import QUESTION_NOVELTY, QuestionPolicy
from lifelong_learning.nodes.object_recognition import PARAMS
from lifelong_learning.nodes.recognition_showings import NOVELTY_THRESHOLD
from lifelong_learning.vision.normalisation import NORMALISATIONS, normalised

ONLINE_PARAMS = (
    "lambdas",
    "alpha",
    "alpha_grid",
    "validation_every",
    "min_class_count",
    "max_validation",
    "calibration_evidence",
    "recoding_shrink",
)


def node_learner(**overrides: object) -> IncrementalRLSC:
    """The node's learner with the node's default parameters (and ``overrides``)."""
    defaults = {spec.name: spec.default for spec in PARAMS if spec.name in ONLINE_PARAMS}
    alpha = str(defaults.pop("alpha"))
    defaults["alpha"] = "auto" if alpha == "auto" else float(alpha)
    return IncrementalRLSC(**{**defaults, **overrides})


def features(
    seed: int, backbone: str = "efficientnet-lite0", precision: str = "int8"
) -> dict[str, np.ndarray]:
    """``{"teach", "test", "new"}``: float64 (objects, frames, d) features of the world's crops (cached)."""
    name = f"showing-features-{backbone}-{precision}-{TAUGHT}+{NEW}x{TEACH}+{TEST}-seed{seed}.npz"
    cache = ROOT / "runs" / "bench_cache" / name
    if not cache.is_file():
        from lifelong_learning.vision import FeatureExtractor

        crops = world(seed, TAUGHT, NEW, TEACH, TEST)
        t0 = time.perf_counter()
        extractor = FeatureExtractor(
            backend="onnxruntime", num_threads=1, precision=precision, backbone=backbone
        )
        out = {}
        for key in ("teach", "test", "new"):
            part = getattr(crops, key)
            X = extractor.extract_batch(part.reshape(-1, *part.shape[2:]))
            out[key] = X.reshape(*part.shape[:2], -1)
        print(f"seed {seed}: {backbone} {precision} features in {time.perf_counter() - t0:.0f} s")
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, **out)
    with np.load(cache) as f:
        return {k: f[k].astype(np.float64) for k in f.files}


def pasted_features(seed: int, precision: str = "int8", copies: int = 1) -> dict[str, np.ndarray]:
    """``{"pasted": (objects, frames, d) float64, "copied": (objects, frames) bool}``: the features of
    each teaching frame pasted onto a room seen before (showing_world.pasted_world, the node's
    ``paste_copies: 1``), and whether the node pastes that frame at all (cached); ``copies`` > 1 (the
    node's ``paste_copies``): ``"pasted"`` is ``(objects, frames, copies, d)``, each frame onto that
    many rooms."""
    more = "" if copies == 1 else f"-copies{copies}"
    name = (
        f"showing-pasted-features-efficientnet-lite0-{precision}-{TAUGHT}+{NEW}x{TEACH}{more}-seed{seed}.npz"
    )
    cache = ROOT / "runs" / "bench_cache" / name
    if not cache.is_file():
        from lifelong_learning.vision import FeatureExtractor

        crops = pasted_world(seed, TAUGHT, NEW, TEACH, copies=copies)
        first_copies = crops if copies == 1 else crops[:, :, 0]
        copied = np.any(first_copies != world(seed, TAUGHT, NEW, TEACH, TEST).teach, axis=(2, 3, 4))
        extractor = FeatureExtractor(backend="onnxruntime", num_threads=1, precision=precision)
        shape = crops.shape[: 2 if copies == 1 else 3]
        X = extractor.extract_batch(crops.reshape(-1, *crops.shape[-3:])).reshape(*shape, -1)
        np.savez(cache, pasted=X, copied=copied)
    with np.load(cache) as f:
        return {"pasted": f["pasted"].astype(np.float64), "copied": f["copied"]}


def rows(X: dict[str, np.ndarray], o: int, frames: slice) -> np.ndarray:
    """Object ``o``'s teaching ``frames`` as the node learns them: each frame, then its pasted copies
    when ``X`` has them (``"pasted"``: one a frame, or ``(frames, copies, d)``) and the node pastes that
    frame."""
    taught = X["teach"][o, frames]
    if "pasted" not in X:
        return taught
    copied = X["copied"][o, frames]
    out = []
    for x, copy, has in zip(taught, X["pasted"][o, frames], copied, strict=True):
        out += [x, *copy.reshape(-1, x.shape[-1])] if has else [x]
    return np.asarray(out)


def teach(
    model: IncrementalRLSC, X: dict[str, np.ndarray], order: np.ndarray, frames: dict[int, int]
) -> IncrementalRLSC:
    """Teach ``frames[o]`` (default: all) teaching frames of each object of ``order`` (:func:`rows`:
    with their pasted copies), one at a time."""
    for o in order:
        for x in rows(X, int(o), slice(0, frames.get(int(o), X["teach"].shape[1]))):
            model.partial_fit(x, [str(o)])
    return model


def first(X: dict[str, np.ndarray], n: int | slice) -> dict[str, np.ndarray]:
    """``X`` with the first ``n`` (or the slice of) teaching frames of each object (and their copies)."""
    frames = slice(0, n) if isinstance(n, int) else n
    return {k: v[:, frames] if k in ("teach", "pasted", "copied") else v for k, v in X.items()}


def accuracy(model: IncrementalRLSC, X_test: np.ndarray, objects: np.ndarray) -> dict[str, float]:
    """Per frame, and per showing by each rule (%), on the test showings of ``objects``."""
    truth = objects.astype(str)
    frames = X_test[objects]
    predicted = model.predict(frames.reshape(-1, frames.shape[-1])).reshape(frames.shape[:2])
    out = {"per frame": 100.0 * float(np.mean(predicted == truth[:, None]))}
    classes = model.classes_.astype(str)
    for rule in RULES:
        answers = [classes[int(np.argmax(evidence(model, f, rule)))] for f in frames]
        out[rule] = 100.0 * float(np.mean(np.asarray(answers) == truth))
    return out


def rare_object(X: dict[str, np.ndarray], order: np.ndarray, taught: int, alphas: list) -> dict[str, float]:
    """Per-showing accuracy (%, rule mean_proba) of the rare object (3 frames) by α, over 5 choices of
    the rare object among the first 15 taught; and of the others."""
    objects = order[:15]
    out: dict[str, list[float]] = {}
    for alpha in alphas:
        rare_hits, other_hits = [], []
        for rare in objects[-5:]:  # the rare object comes late, when the others are well known
            model = teach(node_learner(alpha=alpha), X, objects, {int(rare): 3})
            classes = model.classes_.astype(str)
            for o in objects:
                hit = classes[int(np.argmax(evidence(model, X["test"][o])))] == str(o)
                (rare_hits if o == rare else other_hits).append(hit)
        out[f"α = {alpha}: rare"] = [100.0 * float(np.mean(rare_hits))]
        out[f"α = {alpha}: others"] = [100.0 * float(np.mean(other_hits))]
    return {k: v[0] for k, v in out.items()}


def novelty(X: dict[str, np.ndarray], order: np.ndarray, n_taught: int, taught: int) -> dict[str, dict]:
    """Per score: AUROC per frame and per showing, share flagged at 95 % answered, the threshold."""
    from sklearn.metrics import roc_auc_score

    objects = order[:n_taught]
    model = teach(node_learner(), first(X, taught), objects, {})
    known, new = X["test"][objects], X["new"]
    out = {}
    for score in SCORES:
        k = model.novelty_score(known.reshape(-1, known.shape[-1]), score).reshape(known.shape[:2])
        n = model.novelty_score(new.reshape(-1, new.shape[-1]), score).reshape(new.shape[:2])
        row = {}
        for unit, (a, b) in (
            ("frame", (k.ravel(), n.ravel())),
            ("showing", (k.mean(axis=1), n.mean(axis=1))),
        ):
            y = np.r_[np.zeros(a.size), np.ones(b.size)]
            threshold = float(np.quantile(a, ANSWERED))
            row[f"AUROC per {unit}"] = float(roc_auc_score(y, np.r_[a, b]))
            row[f"flagged per {unit} %"] = 100.0 * float(np.mean(b > threshold))
            row[f"threshold per {unit}"] = threshold
        out[score] = row
    return out


#: the question rules of table 4: (question novelty, ambiguity margin) of the node's QuestionPolicy;
#: the node's answer withholds the name above ``NOVELTY_THRESHOLD`` in every rule
QUESTION_RULES = {
    **{
        f"asks when unsure (novelty > {q}) or ambiguous (margin 0.3)": (q, 0.3)
        for q in sorted({NOVELTY_THRESHOLD, 0.5, 0.4, 0.3, QUESTION_NOVELTY, 0.2, 0.1})
    },
    f"asks when unsure (novelty > {QUESTION_NOVELTY})": (QUESTION_NOVELTY, 0.0),
}
#: the node's rule with the thesis's recoding (``recoding_shrink: 1``): questions give some objects
#: more frames than others, which the recoding's shrink of a class above the median treats otherwise
THESIS_RECODING_RULE = (
    f"asks when unsure (novelty > {QUESTION_NOVELTY}) or ambiguous (margin 0.3), the thesis's recoding "
    "(`recoding_shrink: 1`)"
)


def _three_showings(
    X: dict[str, np.ndarray], objects: np.ndarray
) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    """``(showing, object, frames, learned)``: each object's teaching frames as three showings of a
    third, object after object; ``learned``: the rows a label teaches (the frames and their pasted
    copies, :func:`rows`)."""
    size = X["teach"].shape[1] // 3
    showings = [
        (
            s,
            int(o),
            X["teach"][o, size * s : size * (s + 1)],
            rows(X, int(o), slice(size * s, size * (s + 1))),
        )
        for s in range(3)
        for o in objects
    ]
    showings.sort(key=lambda item: (list(objects).index(item[1]), item[0]))
    return showings


def doubted(model: IncrementalRLSC, frames: np.ndarray, policy: QuestionPolicy) -> tuple[ShowingAnswer, str]:
    """The node's answer over a showing's ``frames`` and the question rule's doubt about it
    (``""``: none), from one evaluation of the scores (:func:`judge_showing`)."""
    answer, guesses = judge_showing(model, frames, 2, novelty_threshold=NOVELTY_THRESHOLD)
    return answer, policy.doubt(answer.label, guesses, answer.novelty)


def asking_robot(
    showings: list[tuple[int, int, np.ndarray, np.ndarray]],
    unsure: float,
    margin: float,
    self_teaching: bool = False,
    **learner: object,
) -> tuple[IncrementalRLSC, dict[str, float]]:
    """The robot shown ``showings`` (``(showing, object, frames, learned)``, :func:`_three_showings`)
    asks by the node's rule (:class:`~lifelong_learning.learners.showings.QuestionPolicy`, question
    novelty ``unsure``) and learns a showing's frames from each answer; with ``self_teaching`` (the
    node's ``learn_confident_showings``) it learns a showing it did not ask about under its own answer.
    Its model, and the labels given, the questions, the first showings asked about, the showings
    learned under its own answer and how many of those answers were wrong."""
    model, labels, questions, first_asked, own, wrong = node_learner(**learner), 0, 0, 0, 0, 0
    policy = QuestionPolicy(margin=margin, unsure=unsure)
    for s, o, frames, learned in showings:
        answer, doubt = doubted(model, frames, policy)
        if doubt:
            model.partial_fit(learned, [str(o)] * len(learned))
            labels, questions, first_asked = labels + len(frames), questions + 1, first_asked + (s == 0)
        elif self_teaching:
            own, wrong = own + 1, wrong + (answer.label != str(o))
            model.partial_fit(learned, [answer.label] * len(learned))
    objects = {o for _, o, _, _ in showings}
    return model, {
        "labels": labels,
        "questions": questions,
        "first showings asked %": 100.0 * first_asked / len(objects),
        "own answers learned": own,
        "own answers wrong": wrong,
    }


def robot_asks(
    X: dict[str, np.ndarray],
    objects: np.ndarray,
    unsure: float,
    margin: float,
    self_teaching: bool = False,
    **learner: object,
) -> dict[str, float]:
    """:func:`asking_robot` shown each object three times, object after object
    (:func:`_three_showings`): its counts and its per-showing accuracy."""
    model, counts = asking_robot(_three_showings(X, objects), unsure, margin, self_teaching, **learner)
    return {**counts, **_showing_accuracy(model, X, objects)}


def asking(X: dict[str, np.ndarray], order: np.ndarray) -> dict[str, dict]:
    """Teachers who label every frame of the first 1, 2 or 3 showings of each object, against a robot
    that asks (:func:`robot_asks`, each rule of :data:`QUESTION_RULES`); 15 objects."""
    objects = order[:15]
    showings = _three_showings(X, objects)
    out = {}
    for shown in (1, 2, 3):
        model = node_learner()
        for s, o, _, learned in showings:
            if s < shown:
                model.partial_fit(learned, [str(o)] * len(learned))
        out[f"labels every frame of {shown} showing(s)"] = {
            "labels": len(showings[0][2]) * shown * len(objects),
            **_showing_accuracy(model, X, objects),
        }
    for name, (unsure, margin) in QUESTION_RULES.items():
        out[name] = robot_asks(X, objects, unsure, margin)
    out[THESIS_RECODING_RULE] = robot_asks(X, objects, QUESTION_NOVELTY, 0.3, recoding_shrink=1.0)
    return out


def evidence_counted(X: dict[str, np.ndarray], order: np.ndarray) -> dict[str, dict[str, float]]:
    """The calibration's smoothing counted by held-out samples or by classes (``calibration_evidence``),
    15 objects taught with the first 36 or all their teaching frames: the novelty threshold at which
    95 % of the taught showings are answered, the AUROC of the never-taught showings and the share of
    them flagged at that threshold and at the node's ``novelty_threshold``; and the robot's
    questions by the node's rule (three showings of a third of the frames)."""
    from sklearn.metrics import roc_auc_score

    objects = order[:15]
    out = {}
    for counted in CALIBRATION_EVIDENCE:
        for frames in (36, X["teach"].shape[1]):
            part = first(X, frames)
            model = teach(node_learner(calibration_evidence=counted), part, objects, {})
            known = np.array([model.novelty_score(f).mean() for f in X["test"][objects]])
            new = np.array([model.novelty_score(f).mean() for f in X["new"]])
            threshold = float(np.quantile(known, ANSWERED))
            asked = robot_asks(part, objects, QUESTION_NOVELTY, 0.3, calibration_evidence=counted)
            out[f"{counted}, {frames} frames"] = {
                "threshold": threshold,
                "AUROC": float(
                    roc_auc_score(np.r_[np.zeros(known.size), np.ones(new.size)], np.r_[known, new])
                ),
                "flagged %": 100.0 * float(np.mean(new > threshold)),
                "flagged at the node threshold %": 100.0 * float(np.mean(new > NOVELTY_THRESHOLD)),
                "taught answered at the node threshold %": 100.0 * float(np.mean(known <= NOVELTY_THRESHOLD)),
                "asked labels": asked["labels"],
                "asked %": asked["per showing %"],
            }
    return out


def _showing_accuracy(
    model: IncrementalRLSC, X: dict[str, np.ndarray], objects: np.ndarray
) -> dict[str, float]:
    """Per showing (%) on the test showings of ``objects``: ``X["test"]`` is (objects, frames, d), or
    (rooms, objects, frames, d) for several test rooms (bench_recognition_rooms.py)."""
    classes = model.classes_.astype(str)
    rooms = X["test"] if X["test"].ndim == 4 else X["test"][None]
    hits = [classes[int(np.argmax(evidence(model, room[o])))] == str(o) for room in rooms for o in objects]
    return {"per showing %": 100.0 * float(np.mean(hits))}


BACKBONE_CHOICES = [(f"efficientnet-lite{i}", precision) for i in (0, 1, 2) for precision in ("fp32", "int8")]


def images_per_second(backbone: str, precision: str, seconds: float = 8.0) -> float:
    """The feature_extractor node's CNN path on 640×480 frames (2 threads, batches of 4, as the node)."""
    from lifelong_learning.vision import FeatureExtractor

    extractor = FeatureExtractor(num_threads=2, max_batch=4, precision=precision, backbone=backbone)
    frames = list(np.random.default_rng(0).integers(0, 256, (4, 480, 640, 3), dtype=np.uint8))
    extractor.extract_batch(frames)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        extractor.extract_batch(frames)
        done += len(frames)
    return done / (time.perf_counter() - t0)


def backbones(seed: int, order: np.ndarray, taught: int) -> dict[str, dict[str, float]]:
    """Per backbone and precision: per-frame and per-showing accuracy at 15 objects, AUROC of the
    never-taught showings, and images/s at 640×480."""
    from sklearn.metrics import roc_auc_score

    from lifelong_learning.vision import FeatureExtractor

    crops = world(seed, TAUGHT, NEW, TEACH, TEST)
    objects = order[:15]
    out = {}
    for backbone, precision in BACKBONE_CHOICES:
        try:
            extractor = FeatureExtractor(num_threads=1, precision=precision, backbone=backbone)
        except ValueError as error:  # its wheel is not installed
            print(f"{backbone} {precision}: {error}")
            continue
        feats = {}
        for key, part in (
            ("teach", crops.teach[objects, :taught]),
            ("test", crops.test[objects]),
            ("new", crops.new),
        ):
            F = normalised(extractor.extract_batch(part.reshape(-1, *part.shape[2:])), PUBLISHED).astype(
                np.float64
            )
            feats[key] = F.reshape(*part.shape[:2], -1)
        model = teach(node_learner(), feats, np.arange(15), {})  # no pasted copies: frames only
        row = accuracy(model, feats["test"], np.arange(15))
        known = [model.novelty_score(f).mean() for f in feats["test"]]
        new = [model.novelty_score(f).mean() for f in feats["new"]]
        row["AUROC per showing"] = float(
            roc_auc_score(np.r_[np.zeros(15), np.ones(len(new))], np.r_[known, new])
        )
        row["images/s at 640x480"] = images_per_second(backbone, precision)
        out[f"{backbone} {precision}"] = row
        print(f"seed {seed}, {backbone} {precision}: {row}", flush=True)
    return out


#: frames taught per showing (table 5): the first n of a showing, or n spread over it (every k-th)
FRAMES_TAUGHT = {
    **{f"the first {n}": slice(0, n) for n in (3, 12, 36, TEACH // 2, TEACH)},
    **{
        f"{-(-TEACH // k)} spread over {TEACH / 15:.0f} s (every {k}{suffix})": slice(0, TEACH, k)
        for k, suffix in ((12, "th"), (4, "th"), (2, "nd"))
    },
}
AUGMENTATIONS = ("none", "mirror", "scale and shift", "colour", "all")


def published(X: dict[str, np.ndarray], kind: str = PUBLISHED) -> dict[str, np.ndarray]:
    """Features as the feature_extractor node publishes them (normalised by ``kind``), float64; the
    ``"copied"`` flags as they are."""
    return {k: v if k == "copied" else normalised(v, kind).astype(np.float64) for k, v in X.items()}


def augmented(crop: np.ndarray, kind: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Extra pictures of one taught crop: mirrored; cut to 75-100 % of its side at a random place
    (scale and shift); brightness × U(0.6, 1.2) and per-channel tint × U(0.85, 1.15) (colour)."""
    import cv2

    side = crop.shape[0]

    def cropped(c: np.ndarray) -> np.ndarray:
        w = int(side * rng.uniform(0.75, 1.0))
        x, y = rng.integers(0, side - w + 1, 2)
        return cv2.resize(c[y : y + w, x : x + w], (side, side), interpolation=cv2.INTER_LINEAR)

    def coloured(c: np.ndarray) -> np.ndarray:
        gain = rng.uniform(0.6, 1.2) * rng.uniform(0.85, 1.15, 3)
        return np.clip(c.astype(np.float32) * gain, 0, 255).astype(np.uint8)

    mirror = np.ascontiguousarray(crop[:, ::-1])
    return {
        "none": [],
        "mirror": [mirror],
        "scale and shift": [cropped(crop), cropped(crop)],
        "colour": [coloured(crop), coloured(crop)],
        "all": [mirror, cropped(crop), coloured(crop), coloured(cropped(mirror))],
    }[kind]


def choices(seed: int, raw: dict[str, np.ndarray], order: np.ndarray, taught: int) -> dict[str, dict]:
    """Frames taught per showing, feature normalisation and augmentation of the taught frames, at 15
    objects: per-frame and per-showing accuracy (%). ``raw``: the CNN's features, not normalised."""
    from lifelong_learning.vision import FeatureExtractor

    objects = order[:15]
    X = published(raw)
    out: dict[str, dict] = {"frames": {}, "normalisation": {}, "augmentation": {}}
    out["augmentation"]["pasted onto a room seen before (the node's default)"] = accuracy(
        teach(node_learner(), first(X, taught), objects, {}), X["test"], objects
    )
    for name, frames in FRAMES_TAUGHT.items():
        model = teach(node_learner(), first(X, frames), objects, {})
        out["frames"][name] = accuracy(model, X["test"], objects)
    for kind in NORMALISATIONS:
        Y = published(raw, kind)
        model = teach(node_learner(), first(Y, taught), objects, {})
        out["normalisation"][kind] = accuracy(model, Y["test"], objects)
    crops = world(seed, TAUGHT, NEW, TEACH, TEST).teach
    extractor = FeatureExtractor(num_threads=1, precision="int8")
    for kind in AUGMENTATIONS:  # on the frames alone (no pasted copies)
        rng = np.random.default_rng([seed, 17])
        model = node_learner()
        for o in objects:
            extra = [picture for i in range(taught) for picture in augmented(crops[o, i], kind, rng)]
            taught_rows = list(X["teach"][o, :taught])
            if extra:
                taught_rows += list(normalised(extractor.extract_batch(extra), PUBLISHED).astype(np.float64))
            model.partial_fit(np.asarray(taught_rows), [str(o)] * len(taught_rows))
        out["augmentation"][kind] = accuracy(model, X["test"], objects)
    print(f"seed {seed}, choices: {out}", flush=True)
    return out


def update_cost(n_measure: int = 480, block: int = QUEUE_ROWS) -> dict[str, dict[str, float]]:
    """One taught frame's update at d = 1280, T = 30, each interleaved with one BLAS ``dsyr`` of a d × d
    matrix (the floor, as benchmarks/bench_engine.py): one λ, and the node's five λ. Amortized: the
    median over blocks of ``block`` consecutive updates of their mean (every block holds one sweep of
    the waiting rows; the median keeps the machine's other work out)."""
    from bench_engine import LAMBDAS5
    from scipy.linalg.blas import dsyr

    rng = np.random.default_rng(0)
    d, T, n_pre = 1280, 30, 1500
    centres = rng.normal(size=(T, d)) / np.sqrt(d)
    labels = rng.integers(0, T, n_pre + n_measure)
    labels[:T] = np.arange(T)
    X = centres[labels] + rng.normal(size=(labels.size, d)) / np.sqrt(d)
    out = {}
    for name, kwargs in (
        ("one λ (α auto, keep_samples 1000)", {"lambdas": 1.0}),
        ("5 λ (the node's default)", {"lambdas": LAMBDAS5}),
    ):
        clf = IncrementalRLSC(alpha="auto", keep_samples=1000, **kwargs).partial_fit(
            X[:n_pre], labels[:n_pre]
        )
        A = np.asfortranarray(X[:n_pre].T @ X[:n_pre] + np.eye(d))
        times, floor = [], []
        for i in range(n_pre, n_pre + n_measure):
            t = time.perf_counter()
            clf.partial_fit(X[i], [labels[i]])
            times.append(time.perf_counter() - t)
            t = time.perf_counter()
            dsyr(1e-6, X[i], a=A, overwrite_a=True)
            floor.append(time.perf_counter() - t)
        blocks = np.asarray(times[: n_measure // block * block]).reshape(-1, block).mean(axis=1)
        out[name] = {
            "amortized": float(np.median(blocks)),
            "median": float(np.median(times)),
            "mean": float(np.mean(times)),
            "dsyr": float(np.median(floor)),
        }
    return out


def grouping(X: dict[str, np.ndarray]) -> dict[str, float]:
    """How well a scene change in the features ends a showing (the node's ``showing_change``): the
    cosine distance of a frame to the mean of the showing's last 5 frames, within the test showings
    (a split there is a false end) and at the first frame of the next object's showing (an end)."""

    def distance(a: np.ndarray, b: np.ndarray) -> float:
        return float(1.0 - a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    within, across = [], []
    shows = np.concatenate([X["test"], X["new"]])
    for o, frames in enumerate(shows):
        within += [distance(frames[max(0, i - 5) : i].mean(axis=0), frames[i]) for i in range(1, len(frames))]
        if o + 1 < len(shows):
            across.append(distance(frames[-5:].mean(axis=0), shows[o + 1][0]))
    out = {}
    for t in CHANGE_THRESHOLDS:
        out[f"{t}: frames split off %"] = 100.0 * float(np.mean(np.asarray(within) > t))
        out[f"{t}: next objects caught %"] = 100.0 * float(np.mean(np.asarray(across) > t))
    return out


def annotate_cost(repeats: int = 50) -> dict[str, float]:
    """The annotated image of the feature_extractor node (vision/annotate.py and the conversion to a
    sensor_msgs/Image) on a 640×480 frame, against the node's CNN path on the same frame (ms)."""
    from sensor_msgs.msg import Image

    from lifelong_learning.vision import FeatureExtractor
    from lifelong_learning.vision.annotate import annotated
    from lifelong_learning.vision.crop import Box, square_box
    from lifelong_learning.vision.image_conversion import numpy_to_image
    from lifelong_learning.vision.paste import RoomPaster

    frame = np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    box = Box(200, 150, 160, 160)
    t = time.perf_counter()
    for _ in range(repeats):
        numpy_to_image(annotated(frame, box, "mug", 0.87), "rgb8", message=Image())
    drawn = (time.perf_counter() - t) / repeats
    extractor = FeatureExtractor(num_threads=2, max_batch=4, precision="int8")
    extractor.extract_batch([frame])
    t = time.perf_counter()
    for _ in range(repeats // 5):
        extractor.extract_batch([frame])
    cnn = (time.perf_counter() - t) / (repeats // 5)
    paster = RoomPaster()
    paster.saw(0, np.random.default_rng(1).integers(0, 256, (480, 640, 3), dtype=np.uint8))
    foreground = np.zeros((120, 160), dtype=bool)  # the motion crop's mask (shrink 4)
    foreground[40:80, 50:90] = True
    t = time.perf_counter()
    square = square_box(box, frame.shape)  # the crop's square, as the node cuts it
    for _ in range(repeats):
        paster.paste(frame, foreground, scene=1, box=square)
    pasted = (time.perf_counter() - t) / repeats
    return {"annotate ms": 1e3 * drawn, "CNN path ms": 1e3 * cnn, "paste ms": 1e3 * pasted}


def one_seed(seed: int, args: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    raw = {**features(seed), **(pasted_features(seed) if PASTE else {})}
    X = published(raw)  # as the feature_extractor node publishes them
    order = np.random.default_rng([seed, 31]).permutation(TAUGHT)
    out: dict = {"seed": seed, "accuracy": {}}
    for n in args.objects:
        model = teach(node_learner(), first(X, args.taught), order[:n], {})
        out["accuracy"][str(n)] = accuracy(model, X["test"], order[:n])
        print(f"seed {seed}, {n} objects: {out['accuracy'][str(n)]}", flush=True)
    out["rare"] = rare_object(X, order, args.taught, ["auto", 0.5, 1.0])
    print(f"seed {seed}, rare: {out['rare']}", flush=True)
    out["novelty"] = {str(n): novelty(X, order, n, args.taught) for n in args.objects}
    print(f"seed {seed}, novelty: {out['novelty']}", flush=True)
    out["asking"] = asking(first(X, args.taught), order)
    print(f"seed {seed}, asking: {out['asking']}", flush=True)
    out["evidence"] = evidence_counted(X, order)
    print(f"seed {seed}, calibration evidence: {out['evidence']}", flush=True)
    out["grouping"] = grouping(X)
    out["choices"] = choices(seed, raw, order, args.taught)
    if args.backbones:
        out["backbones"] = backbones(seed, order, args.taught)
    elif args.reused is not None:
        out["backbones"], out["backbones measured"] = args.reused[seed]
    out["update cost"] = update_cost()
    out["annotate"] = annotate_cost()
    out["seconds"] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    ap.add_argument("--objects", type=int, nargs="+", default=[15, 50])
    ap.add_argument("--taught", type=int, default=TEACH, help="teaching frames per object")
    ap.add_argument("--quick", action="store_true", help="one seed, 15 objects")
    ap.add_argument("--no-backbones", dest="backbones", action="store_false", help="skip table 5's backbones")
    ap.add_argument(
        "--reuse-backbones",
        metavar="JSON",
        help="table 5's backbones not measured again but taken from an earlier run's results (the same "
        "seeds), and the report says so: the table teaches every object the frames alone, and measuring "
        "it costs about as much as the rest together",
    )
    ap.add_argument(
        "--jobs", type=int, default=1, help="seeds measured at once, each in a process of its own"
    )
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/recognition-showing.md"))
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.objects = args.seeds[:1], [15]
    args.reused = None
    if args.reuse_backbones:
        args.backbones = False
        args.reused = earlier_backbones(Path(args.reuse_backbones), args.seeds)
    run_seeds(
        args.seeds,
        lambda seed: one_seed(seed, args),
        lambda r, s: markdown(r, args, s),
        args.out,
        jobs=args.jobs,
    )


def earlier_backbones(path: Path, seeds: list[int]) -> dict[int, tuple[dict, str]]:
    """Each seed's table 5 backbones in an earlier run's results ``path``, and where they were measured
    (as that run recorded it, or the ``Machine:`` line of the report beside it).

    Raises:
        SystemExit: a seed without them, or no such file.
    """
    try:
        results = {r["seed"]: r for r in json.loads(path.read_text())}
        report = path.with_suffix(".md")
        machine = (
            next(
                (line.strip() for line in report.read_text().splitlines() if line.startswith("Machine:")), ""
            )
            if report.is_file()
            else ""
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise SystemExit(f"--reuse-backbones {path}: {error}") from None
    out = {}
    for seed in seeds:
        if "backbones" not in results.get(seed, {}):
            raise SystemExit(f"--reuse-backbones {path}: no backbones of seed {seed}")
        out[seed] = (results[seed]["backbones"], results[seed].get("backbones measured") or machine)
    return out


if __name__ == "__main__":
    main()
