"""Shape over colour: the CNN fed the crops' luminance, and both feature vectors side by side, against
the node's colour features, on the recognition benchmark's world.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_luminance.py [--seeds 0 1 2 3 4 5]

The ImageNet features weigh colour heavily, and a test room's light changes an object's colours:
never-taught objects of a taught object's colours get its name. This asks whether the network sees
more of the shape when it is given the crop's luminance alone (ITU-R BT.601 weights, the grey level
repeated in the three channels, so that the pretrained network runs unchanged), and whether the two
feature vectors together (each ``sqrt_l2`` as the feature_extractor publishes it, concatenated and
scaled by 1/√2 to unit norm: 2560 values, two CNN passes a frame) do better than either. A fourth
row keeps the node's features and averages each test frame's with its mirror image's (test-time
augmentation: two CNN passes a test frame, none more at teaching).

The world, the teaching (15 objects, 150 frames each with their pasted copies, one at a time to
the node's default learner) and the test showings (12 frames each in a test room; 10 objects never
taught in the same rooms) are those of ``bench_recognition_showing.py``; its colour features are
read from its cache, the others computed here from its cached crops (EfficientNet-Lite0 int8, the
node's default). Reported per variant: per frame and per showing (rule ``mean_proba``) % right,
AUROC of taught against never-taught showings (novelty ``confidence``, mean of frames), and the
share of never-taught showings flagged at the threshold that answers 95 % of the taught ones.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from bench_recognition_showing import accuracy, features, node_learner, pasted_features, published, teach
from harness import seeds_main
from harness.provenance import report_head
from showing_report import ANSWERED, PUBLISHED, seed_values, separation
from showing_world import NEW, ROOT, TAUGHT, TEACH, TEST, pasted_world, world

from lifelong_learning.vision.normalisation import normalised

#: taught objects (table 3 of the recognition benchmark at 15 objects)
OBJECTS = 15
VARIANTS = (
    "colour (the node's)",
    "luminance",
    "colour and luminance side by side",
    "colour, each test frame averaged with its mirror",
)
#: CNN passes per frame and the learner's dimension of each variant
COST = {
    VARIANTS[0]: ("1", 1280),
    VARIANTS[1]: ("1", 1280),
    VARIANTS[2]: ("2", 2560),
    VARIANTS[3]: ("1 taught, 2 asked", 1280),
}


def luminance(crops: np.ndarray) -> np.ndarray:
    """uint8 ``(..., H, W, 3)``: the grey level (BT.601) in each of the three channels."""
    grey = np.rint(crops @ np.array([0.299, 0.587, 0.114])).clip(0, 255).astype(np.uint8)
    return np.repeat(grey[..., None], 3, axis=-1)


def mirrored(crops: np.ndarray) -> np.ndarray:
    """The crops flipped left to right."""
    return np.ascontiguousarray(crops[..., ::-1, :])


def extractor_of() -> Callable[[np.ndarray], np.ndarray]:
    """Published features (``sqrt_l2``, float64) of uint8 crops ``(..., H, W, 3)``."""
    from lifelong_learning.vision import FeatureExtractor

    extractor = FeatureExtractor(backend="onnxruntime", num_threads=1, precision="int8")

    def extract(crops: np.ndarray) -> np.ndarray:
        flat = crops.reshape(-1, *crops.shape[-3:])
        X = extractor.extract_batch(flat).reshape(*crops.shape[:-3], -1)
        return normalised(X, PUBLISHED).astype(np.float64)

    return extract


def scored(F: dict[str, np.ndarray], copied: np.ndarray) -> dict[str, float]:
    """Teach the objects of ``F["teach"]`` (each frame, then its pasted copy where ``copied``: the
    benchmark's :func:`teach`) to the node's learner; per frame and per showing %, AUROC and
    flagged % of its test showings."""
    objects = np.arange(F["teach"].shape[0])  # the taught objects, as the rows of F
    model = teach(node_learner(), {"teach": F["teach"], "pasted": F["pasted"], "copied": copied}, objects, {})
    right = accuracy(model, F["test"], objects)
    known, new = (
        model.novelty_score(F[k].reshape(-1, F[k].shape[-1]), "confidence")
        .reshape(F[k].shape[:2])
        .mean(axis=1)
        for k in ("test", "new")
    )
    return {
        "per frame": right["per frame"],
        "per showing": right["mean_proba"],
        **separation(known, new),
    }


def one_seed(seed: int) -> dict:
    X = published({**features(seed), **pasted_features(seed)})
    objects = np.random.default_rng([seed, 31]).permutation(TAUGHT)[:OBJECTS]
    crops, pasted = world(seed, TAUGHT, NEW, TEACH, TEST), pasted_world(seed, TAUGHT, NEW, TEACH)
    extract = extractor_of()
    colour = {"teach": X["teach"][objects], "pasted": X["pasted"][objects]}
    colour |= {"test": X["test"][objects], "new": X["new"]}
    raw = {
        "teach": crops.teach[objects],
        "pasted": pasted[objects],
        "test": crops.test[objects],
        "new": crops.new,
    }
    grey = {k: extract(luminance(v)) for k, v in raw.items()}
    both = {k: np.concatenate([colour[k], grey[k]], axis=-1) / np.sqrt(2.0) for k in colour}
    mirror = {k: (colour[k] + extract(mirrored(raw[k]))) / 2.0 for k in ("test", "new")}
    copied = X["copied"][objects]
    out: dict = {"seed": seed}
    for name, F in zip(VARIANTS, (colour, grey, both, colour | mirror), strict=True):
        out[name] = scored(F, copied)
    print(f"seed {seed}: " + "; ".join(f"{k}: {v}" for k, v in out.items() if k != "seed"), flush=True)
    return out


def finding(
    results: list[dict], variants: tuple[str, ...] = VARIANTS, first: str = "the node's colour features"
) -> str:
    """Each variant against the first (``first``: what it is), in words, from the measured means."""
    mean = {n: {k: float(np.mean(seed_values(results, n, k))) for k in results[0][n]} for n in variants}
    node = mean[variants[0]]

    def delta(x: float, digits: int) -> str:
        return f"{round(x, digits) + 0.0:+.{digits}f}"  # no "-0.0"

    parts = []
    for name in variants[1:]:
        m = mean[name]
        parts.append(
            f"{name}: AUROC {m['auroc']:.3f} ({delta(m['auroc'] - node['auroc'], 3)}), flagged "
            f"{m['flagged']:.1f} % ({delta(m['flagged'] - node['flagged'], 1)}), per showing "
            f"{m['per showing']:.1f} % ({delta(m['per showing'] - node['per showing'], 1)}), per frame "
            f"{m['per frame']:.1f} % ({delta(m['per frame'] - node['per frame'], 1)})"
        )
    return (
        f"Against {first} (AUROC {node['auroc']:.3f}, {node['flagged']:.1f} % flagged, "
        f"{node['per showing']:.1f} % per showing): " + "; ".join(parts) + "."
    )


def markdown(results: list[dict], seconds: float) -> str:
    seeds = " ".join(str(r["seed"]) for r in results)
    lines = report_head(
        "Recognition: the network given the crops' luminance, and both feature vectors, against colour",
        f"OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_luminance.py --seeds {seeds}",
        seconds,
    )
    lines += [
        f"{OBJECTS} objects taught (150 frames each with their pasted copies, the node's default learner), "
        "10 never taught; test rooms for both; the world of [recognition-showing.md](recognition-showing.md) "
        "(EfficientNet-Lite0 int8). Luminance: the crop's grey level in the three channels. Per showing: "
        "rule `mean_proba`; AUROC: novelty `confidence`, mean of a showing's frames; flagged: never-taught "
        f"showings above the threshold that answers {100 * ANSWERED:.0f} % of the taught ones. "
        "Mean over seeds; the seeds' range of the AUROC beside it.",
        "",
        finding(results),
        "",
        *table(results),
    ]
    return "\n".join(lines) + "\n"


def table(
    results: list[dict], variants: tuple[str, ...] = VARIANTS, cost: dict[str, tuple[str, int]] = COST
) -> list[str]:
    """The markdown table of the variants: cost, accuracy, novelty (means over seeds)."""
    lines = [
        "| features | CNN passes a frame | dimension | per frame % | per showing % | AUROC | seeds "
        "| flagged % |",
        "|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for name in variants:
        mean = {k: float(np.mean(seed_values(results, name, k))) for k in results[0][name]}
        auroc = seed_values(results, name, "auroc")
        passes, d = cost[name]
        lines.append(
            f"| {name} | {passes} | {d} | {mean['per frame']:.1f} | {mean['per showing']:.1f} | "
            f"{mean['auroc']:.3f} | {min(auroc):.2f}–{max(auroc):.2f} | {mean['flagged']:.1f} |"
        )
    return lines


def main() -> None:
    seeds_main(__doc__, one_seed, markdown, ROOT / "docs/benchmarks/recognition-luminance.md")


if __name__ == "__main__":
    main()
