"""Two alternatives to the node's recognition pipeline, on four test rooms per object: the room taken
out of the picture, and a Gaussian kernel in front of the learner.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_alternatives.py [--seeds 0 1 2 3 4 5]

The node's pipeline (``feature_extractor`` with ``crop: motion`` and ``paste_copies: 1``, the linear
incremental RLSC of ``object_recognition``) is judged in ``bench_recognition_rooms.py``; its mistakes
are objects taken for others of their colour, and its novelty separates never-taught objects with an
AUROC of about 0.8 (docs/recognition.md). Two changes that could help, measured on the same world,
teaching and test rooms (15 objects taught, 10 never taught; 50 taught where it is cheap):

- **grey background**: every crop, taught or tested, is the motion crop's foreground (what moves:
  the object and the hand) on a uniform grey room, made by ``vision.paste.RoomPaster`` with a grey
  room as the only room seen before; where the crop finds nothing moving the frame is kept as it is,
  as the node keeps it. Nothing is pasted: a copy on another room would be the same picture. If the
  features weighed the room, this would take it out at test time too, not only while teaching;
- **Gaussian kernel**: random Fourier features (``learners.random_features``, ``D`` of them, the
  bandwidth a multiple of the median distance between taught features) in front of the node's
  learner (its ``feature_map``), on the node's features with their pasted copies: a kernel machine's
  scores fall for what is far from everything taught, which a linear one's do not.

Reported per variant, mean over seeds: per frame and per showing (rule ``mean_proba``), the AUROC
of the node's novelty (``confidence``, mean over the showing's frames) of taught against never-taught
showings, and the share of never-taught showings flagged at the novelty that answers 95 % of the
taught ones. The grey world's crops are rendered again (about 13 min a seed), their features cached
under ``runs/bench_cache/``; the rest comes from the caches of ``bench_recognition_rooms.py``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_recognition_rooms import room_features, showing_answers
from bench_recognition_showing import features, node_learner, pasted_features, published, teach
from harness import run_seeds
from harness.provenance import report_head
from showing_report import ANSWERED, PUBLISHED, seed_values, separation
from showing_world import NEW, ROOT, TAUGHT, TEACH, TEST, motion_crops

from lifelong_learning.learners.random_features import RandomFourierFeatures
from lifelong_learning.sim.objects import ObjectRenderer
from lifelong_learning.sim.showing import show_object
from lifelong_learning.vision.normalisation import normalised
from lifelong_learning.vision.paste import RoomPaster

LEAD_IN, ROOMS = 5, 3
#: the grey of the grey background (uint8, each channel)
GREY = 128
#: random features of the kernel variant, and its bandwidth in median distances between taught features
KERNEL_FEATURES, BANDWIDTH = 4096, 0.6
NODE, GREY_BACKGROUND, KERNEL = "the node's (pasted copies, linear)", "grey background", "Gaussian kernel"


def grey_crops(
    renderer: ObjectRenderer, index: int, session: str, frames: int, seed: int, room: int
) -> np.ndarray:
    """One showing's motion crops with everything that does not move replaced by grey."""
    shown = show_object(renderer, index, session, frames, seed=seed, lead_in=LEAD_IN, room_index=room)
    paster = RoomPaster(seed=seed)
    paster.saw(-1, np.full_like(shown[0].image, GREY))  # the only room "seen before"
    return motion_crops(shown, LEAD_IN, paster, scene=0)


def grey_features(seed: int) -> dict[str, np.ndarray]:
    """``{"teach", "test", "new"}`` (objects, frames, d) and ``{"rooms test", "rooms new"}`` (rooms,
    objects, frames, d): the features of the world's showings on a grey background, as the node
    publishes them (cached)."""
    world = f"{TAUGHT}+{NEW}x{TEACH}+{TEST}-rooms{ROOMS}-seed{seed}"
    name = f"showing-grey-features-efficientnet-lite0-int8-{world}.npz"
    cache = ROOT / "runs" / "bench_cache" / name
    if not cache.is_file():
        from lifelong_learning.vision import FeatureExtractor

        t0 = time.perf_counter()
        parts: dict[str, list] = {"teach": [], "test": [], "new": [], "rooms": []}
        with ObjectRenderer(TAUGHT + NEW, seed) as renderer:  # the catalogue of showing_world.world()
            for i in range(TAUGHT + NEW):
                if i < TAUGHT:
                    parts["teach"].append(grey_crops(renderer, i, "teach", TEACH, seed, 0))
                parts["test" if i < TAUGHT else "new"].append(grey_crops(renderer, i, "test", TEST, seed, 0))
                parts["rooms"].append(
                    [grey_crops(renderer, i, "test", TEST, seed, r + 1) for r in range(ROOMS)]
                )
        extractor = FeatureExtractor(backend="onnxruntime", num_threads=1, precision="int8")

        def read(crops: np.ndarray) -> np.ndarray:
            return extractor.extract_batch(crops.reshape(-1, *crops.shape[-3:])).reshape(
                *crops.shape[:-3], -1
            )

        rooms = read(np.stack(parts["rooms"])).swapaxes(0, 1)  # (rooms, objects, frames, d)
        out = {k: read(np.stack(parts[k])) for k in ("teach", "test", "new")}
        out |= {"rooms_test": rooms[:, :TAUGHT], "rooms_new": rooms[:, TAUGHT:]}
        print(f"seed {seed}: grey world rendered, cut and read in {time.perf_counter() - t0:.0f} s")
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, **out)
    with np.load(cache) as f:
        return {k: normalised(f[k].astype(np.float64), PUBLISHED) for k in f.files}


def judged(model, known: np.ndarray, new: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Per frame, per showing, AUROC and flagged of ``model`` on showings ``known`` (taught objects
    ``truth``) and ``new`` (never taught), each (showings, frames, d)."""
    answers, seen = showing_answers(model, known)
    _, unseen = showing_answers(model, new)
    frames = model.predict(known.reshape(-1, known.shape[-1])).reshape(known.shape[:2])
    apart = separation(seen, unseen)
    return {
        "per frame %": 100.0 * float(np.mean(frames == truth[:, None])),
        "per showing %": 100.0 * float(np.mean(model.classes_.astype(str)[answers] == truth)),
        "AUROC": apart["auroc"],
        "flagged %": apart["flagged"],
    }


def _kernel(X: dict[str, np.ndarray], objects: np.ndarray, seed: int) -> RandomFourierFeatures:
    """The kernel variant's feature map: its bandwidth from the taught features of ``objects``."""
    sample = X["teach"][objects].reshape(-1, X["teach"].shape[-1])[::25]
    distances = np.sqrt(np.maximum(((sample[:, None] - sample[None]) ** 2).sum(-1), 0.0))
    median = float(np.median(distances[distances > 0]))
    return RandomFourierFeatures(sample.shape[1], KERNEL_FEATURES, bandwidth=BANDWIDTH * median, seed=seed)


def taught_model(variant: str, X: dict, G: dict, taught: np.ndarray, seed: int):
    """The node's learner taught ``taught`` as ``variant`` sees them."""
    if variant == GREY_BACKGROUND:
        return teach(node_learner(), {"teach": G["teach"]}, taught, {})
    kernel = _kernel(X, taught, seed) if variant == KERNEL else None
    return teach(node_learner(feature_map=kernel), X, taught, {})


def one_seed(seed: int, sizes: list[int], kernel_sizes: list[int]) -> dict:
    order = np.random.default_rng([seed, 31]).permutation(TAUGHT)
    X = published({**features(seed), **pasted_features(seed)})
    extra = room_features(seed, ROOMS)
    G = grey_features(seed)
    node = (np.concatenate([X["test"][None], extra["test"]]), np.concatenate([X["new"][None], extra["new"]]))
    grey = (
        np.concatenate([G["test"][None], G["rooms_test"]]),
        np.concatenate([G["new"][None], G["rooms_new"]]),
    )
    shown = {NODE: node, GREY_BACKGROUND: grey, KERNEL: node}
    out: dict = {"seed": seed}
    for n in sorted(set(sizes) | set(kernel_sizes)):
        taught = order[:n]
        truth = np.tile(taught.astype(str), ROOMS + 1)
        variants = ([NODE, GREY_BACKGROUND] if n in sizes else []) + ([KERNEL] if n in kernel_sizes else [])
        for variant in variants:
            known, new = shown[variant]
            t0 = time.perf_counter()
            model = taught_model(variant, X, G, taught, seed)
            seconds = time.perf_counter() - t0
            d = known.shape[-1]
            row = judged(model, known[:, taught].reshape(-1, TEST, d), new.reshape(-1, TEST, d), truth)
            out[f"{variant} | {n}"] = row | {"teaching s": seconds}
            print(f"seed {seed}, {n} objects, {variant}: {row}", flush=True)
    return out


def markdown(results: list[dict], seconds: float) -> str:
    keys = [k for k in results[0] if k != "seed"]
    seeds = " ".join(str(r["seed"]) for r in results)
    lines = report_head(
        "Recognition: the room taken out of the picture, and a Gaussian kernel, against the node's",
        f"OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_alternatives.py --seeds {seeds}",
        seconds,
    )
    lines += [
        "The world, teaching and four test rooms per object of [recognition-rooms.md](recognition-rooms.md) "
        "(EfficientNet-Lite0 int8, the node's default learner and showing rule, novelty `confidence`); "
        f"{NEW} never-taught objects in the same rooms. Grey background: every crop, taught and tested, "
        f"is what moves in it on uniform grey ({GREY}), nothing pasted. Gaussian kernel: {KERNEL_FEATURES} "
        f"random Fourier features, bandwidth {BANDWIDTH} × the median distance between taught features, in "
        "front of the node's learner, on its features with their pasted copies. Flagged: never-taught "
        f"showings above the novelty that answers {100 * ANSWERED:.0f} % of the taught ones. Mean over "
        "seeds (the seeds' range).",
        "",
        "| objects | variant | per frame % | per showing % | AUROC | flagged % | teaching s |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for key in sorted(keys, key=lambda k: (int(k.split(" | ")[1]), keys.index(k))):
        variant, n = key.split(" | ")
        cells = []
        for column, fmt in (
            ("per frame %", ".1f"),
            ("per showing %", ".1f"),
            ("AUROC", ".3f"),
            ("flagged %", ".1f"),
        ):
            v = seed_values(results, key, column)
            cells.append(f"{np.mean(v):{fmt}} ({min(v):{fmt}}–{max(v):{fmt}})")
        teaching = np.mean(seed_values(results, key, "teaching s"))
        lines.append(f"| {n} | {variant} | " + " | ".join(cells) + f" | {teaching:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    ap.add_argument("--objects", type=int, nargs="+", default=[15, 50], help="taught objects (node, grey)")
    ap.add_argument("--kernel-objects", type=int, nargs="+", default=[15], help="taught objects (kernel)")
    ap.add_argument("--out", default=str(ROOT / "docs/benchmarks/recognition-alternatives.md"))
    args = ap.parse_args()
    if min(args.objects + args.kernel_objects) < 2 or max(args.objects + args.kernel_objects) > TAUGHT:
        ap.error(f"--objects and --kernel-objects must be between 2 and {TAUGHT}")
    run_seeds(args.seeds, lambda s: one_seed(s, args.objects, args.kernel_objects), markdown, args.out)


if __name__ == "__main__":
    main()
