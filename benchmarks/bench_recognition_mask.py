"""What a clean object mask would buy: the simulator's own pixels of the object, against its box with
the room kept, and against the node's pipeline.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_mask.py [--seeds 0 1 2 3 4 5]

The node cuts what moves (``crop: motion``) and keeps the room around the object in the crop; its
mistakes are objects taken for others of their colour (docs/recognition.md), and taking the room out
with the motion crop's own foreground did not help (recognition-alternatives.md: that foreground keeps
a halo of the room and the hand). This asks how much an exact mask would change, as the segmentation
of a depth camera (an object held in front of a far wall) would give it: every frame of the world of
``bench_recognition_showing.py`` (15 objects taught for 150 frames in their teaching room, tested for
12 frames in their first test room; 10 never taught, in test rooms) is rendered again with the
renderer's segmentation mask (``sim.showing.ShownFrame.mask``, which keeps the hand where it covers
the object), and cut two ways by the object's true box (squared, as the node squares its boxes):

- **true box, room kept**: the picture as it is (the ``roi`` crop of the simulator's box);
- **object's pixels on grey**: every pixel outside the mask set to grey (``vision.depth.greyed``);

and as the node cuts with ``crop: depth``, from the simulator's stand-in depth camera
(``ShownFrame.depth``: the object and the hand 0.6 m away, the room 2.5 m, noise and holes), with the
node's default ``depth_range_m``, ``depth_band_m`` and ``crop_margin`` (the whole frame when it finds
nothing, as the node does):

- **depth crop**: the nearest blob (the object and the hand) kept, the rest grey.

All three are taught without pasted copies (a copy on another room is the same picture once the room
is grey). The node's pipeline (motion crop, pasted copies) comes from the caches of
``bench_recognition_showing.py``. Reported per variant, mean over seeds (the seeds' range): per frame,
per showing (the node's rule), the AUROC of the node's novelty (``confidence``) of taught against
never-taught showings, and the share of never-taught showings flagged at the novelty that answers
95 % of the taught ones. The crops' features are cached under ``runs/bench_cache/`` (about 4 min a
seed to render on one core).
"""

from __future__ import annotations

import time

import numpy as np
from bench_recognition_alternatives import judged
from bench_recognition_showing import features, node_learner, pasted_features, published, teach
from harness import seeds_main
from harness.provenance import report_head
from showing_report import ANSWERED, PUBLISHED, seed_values
from showing_world import NEW, ROOT, TAUGHT, TEACH, TEST, _stored

from lifelong_learning.nodes.feature_extractor import PARAMS as EXTRACTOR_PARAMS
from lifelong_learning.sim.objects import ObjectRenderer
from lifelong_learning.sim.showing import show_object
from lifelong_learning.vision.crop import Box, cut, square_box
from lifelong_learning.vision.depth import greyed, nearest_object
from lifelong_learning.vision.normalisation import normalised

#: taught objects (the first 15 of each seed's order, as in bench_recognition_showing.py)
OBJECTS = 15
NODE, BOX, MASK = "the node's (motion crop, pasted copies)", "true box, room kept", "object's pixels on grey"
DEPTH = "depth crop (stand-in depth camera)"
VARIANTS = (NODE, BOX, MASK, DEPTH)
#: the node's defaults for crop: depth
DEFAULTS = {spec.name: spec.default for spec in EXTRACTOR_PARAMS}


def depth_crop(frame) -> np.ndarray:
    """The frame as the node's ``crop: depth`` cuts it from the frame's depth image (its defaults)."""
    near, far = DEFAULTS["depth_range_m"]
    found = nearest_object(frame.depth, near, far, DEFAULTS["depth_band_m"])
    if found is None:
        return _stored(frame.image)
    box, held = found
    return _stored(
        cut(greyed(frame.image, held), square_box(box, frame.image.shape, DEFAULTS["crop_margin"]))
    )


def crops(frames: list) -> dict[str, np.ndarray]:
    """``{BOX, MASK, DEPTH}``: each frame cut by the object's squared true box, the room kept or
    greyed; and by the node's depth crop."""
    out: dict[str, list[np.ndarray]] = {BOX: [], MASK: [], DEPTH: []}
    for frame in frames:
        square = square_box(Box(*frame.box), frame.image.shape)
        out[BOX].append(_stored(cut(frame.image, square)))
        out[MASK].append(_stored(cut(greyed(frame.image, frame.mask), square)))
        out[DEPTH].append(depth_crop(frame))
    return {k: np.stack(v) for k, v in out.items()}


def mask_features(seed: int, objects: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """``{BOX, MASK, DEPTH}`` → ``{"teach", "test", "new"}`` (showings, frames, d) features as the node
    publishes them, of ``objects`` (taught) and the never-taught objects (cached)."""
    world = f"{OBJECTS}of{TAUGHT}+{NEW}x{TEACH}+{TEST}-depth-seed{seed}"
    name = f"showing-mask-features-efficientnet-lite0-int8-{world}.npz"
    cache = ROOT / "runs" / "bench_cache" / name
    if not cache.is_file():
        from lifelong_learning.vision import FeatureExtractor

        t0 = time.perf_counter()
        shown: dict[tuple[str, str], list[np.ndarray]] = {}
        sessions = [(int(o), "teach", TEACH, "teach") for o in objects]
        sessions += [(int(o), "test", TEST, "test") for o in objects]
        sessions += [(o, "test", TEST, "new") for o in range(TAUGHT, TAUGHT + NEW)]
        with ObjectRenderer(TAUGHT + NEW, seed) as renderer:  # the catalogue of showing_world.world()
            for index, session, n, key in sessions:
                for variant, pictures in crops(
                    show_object(renderer, index, session, n, seed=seed, depth_camera=True)
                ).items():
                    shown.setdefault((variant, key), []).append(pictures)
        extractor = FeatureExtractor(backend="onnxruntime", num_threads=1, precision="int8")
        out = {}
        for (variant, key), parts in shown.items():
            pictures = np.stack(parts)
            X = extractor.extract_batch(pictures.reshape(-1, *pictures.shape[2:]))
            out[f"{variant}/{key}"] = X.reshape(*pictures.shape[:2], -1)
        print(f"seed {seed}: rendered, cut and featured in {time.perf_counter() - t0:.0f} s", flush=True)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, **out)
    with np.load(cache) as f:
        return {
            variant: {
                key: normalised(f[f"{variant}/{key}"].astype(np.float64), PUBLISHED)
                for key in ("teach", "test", "new")
            }
            for variant in (BOX, MASK, DEPTH)
        }


def one_seed(seed: int) -> dict:
    objects = np.random.default_rng([seed, 31]).permutation(TAUGHT)[:OBJECTS]
    truth = objects.astype(str)
    out: dict = {"seed": seed}
    X = published({**features(seed), **pasted_features(seed)})
    model = teach(node_learner(), X, objects, {})
    out[NODE] = judged(model, X["test"][objects], X["new"], truth)
    for variant, F in mask_features(seed, objects).items():
        taught = np.zeros((TAUGHT, *F["teach"].shape[1:]))
        taught[objects] = F["teach"]
        model = teach(node_learner(), {"teach": taught}, objects, {})
        out[variant] = judged(model, F["test"], F["new"], truth)
    print(f"seed {seed}: " + "; ".join(f"{v}: {out[v]}" for v in VARIANTS), flush=True)
    return out


COLUMNS = (("per frame %", ".1f"), ("per showing %", ".1f"), ("AUROC", ".3f"), ("flagged %", ".1f"))


def markdown(results: list[dict], seconds: float) -> str:
    seeds = " ".join(str(r["seed"]) for r in results)
    lines = report_head(
        "Recognition with a clean object mask: the object's pixels against its box and the node's crop",
        f"OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_mask.py --seeds {seeds}",
        seconds,
    )
    mean = {v: {c: float(np.mean(seed_values(results, v, c))) for c, _ in COLUMNS} for v in VARIANTS}
    lines += [
        f"{OBJECTS} objects taught (150 frames each in their teaching room), tested for 12 frames in their "
        f"first test room; {NEW} never taught, in test rooms; EfficientNet-Lite0 int8, the node's default "
        "learner, showing rule and novelty (`confidence`). The true-box, grey and depth variants are "
        "taught without pasted copies; the depth crop is the node's `crop: depth` (its defaults) on the "
        "simulator's stand-in depth camera (the object and the hand 0.6 m away, the room 2.5 m, 5 mm of "
        "noise, 2 % of pixels without depth). Flagged: never-taught showings above the novelty that answers "
        f"{100 * ANSWERED:.0f} % of the taught ones. Mean over seeds (the seeds' range).",
        "",
        f"With the object's pixels alone, per frame {mean[MASK]['per frame %']:.1f} % and per showing "
        f"{mean[MASK]['per showing %']:.1f} %, against {mean[BOX]['per frame %']:.1f} / "
        f"{mean[BOX]['per showing %']:.1f} % with the same box and the room kept, and "
        f"{mean[NODE]['per frame %']:.1f} / {mean[NODE]['per showing %']:.1f} % for the node's pipeline; "
        f"novelty AUROC {mean[MASK]['AUROC']:.3f} against {mean[BOX]['AUROC']:.3f} and "
        f"{mean[NODE]['AUROC']:.3f}. The node's depth crop on the stand-in depth camera: per frame "
        f"{mean[DEPTH]['per frame %']:.1f} %, per showing {mean[DEPTH]['per showing %']:.1f} %, AUROC "
        f"{mean[DEPTH]['AUROC']:.3f}.",
        "",
        "| variant | per frame % | per showing % | AUROC | flagged % |",
        "|---|---:|---:|---:|---:|",
    ]
    for variant in VARIANTS:
        cells = []
        for column, fmt in COLUMNS:
            v = seed_values(results, variant, column)
            cells.append(f"{np.mean(v):{fmt}} ({min(v):{fmt}}–{max(v):{fmt}})")
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    seeds_main(__doc__, one_seed, markdown, ROOT / "docs/benchmarks/recognition-mask.md")


if __name__ == "__main__":
    main()
