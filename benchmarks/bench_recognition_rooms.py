"""Recognition per showing and "I don't know", judged on four test rooms per object instead of one.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_rooms.py [--seeds 0 1 2 3 4 5] [--rooms 3]
        [--precision int8|fp32] [--copies 1|2|3]

``bench_recognition_showing.py`` tests each object in one room: at 15 objects a seed has 15 taught
test showings (one is 6.7 points) and 10 never-taught ones, and its seeds spread 66.7-100 % per
showing and 0.75-0.97 AUROC, more than any choice it compares moves them. Here the same world (the
same teaching, with pasted copies, to the node's default learner; the same first test room) gets
``--rooms`` more test showings of every object, taught or never taught, each in another room
(``sim.showing.show_object``'s ``room_index``: its own room, light, pose and motion), so that a seed
has four times the test showings. Reported per seed and as means: per frame and per showing (the
node's rule, ``mean_proba``) at 15 and 50 objects, in the first room alone and in all; the novelty's
AUROC per showing (the node's score, ``confidence``, the mean over the showing's frames) and the share
of never-taught showings flagged at the threshold that answers 95 % of the taught ones; and what the
mistakes are taken for: the share of never-taught showings answered with a name, and of taught ones
named wrongly, named as an object of their own palette colour, against chance. ``--precision fp32``:
the same with fp32 features (the node's default is int8), written to ``recognition-rooms-fp32.md``.
``--copies N``: each taught frame pasted onto N rooms seen before instead of one (feature_extractor's
``paste_copies``), written to ``recognition-rooms-copiesN.md``.

The extra rooms' crops and features are cached under ``runs/bench_cache/`` (about 2.5 min a seed
to render and cut); the world's own caches are those of ``bench_recognition_showing.py``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_recognition_showing import asking, features, node_learner, pasted_features, published, teach
from harness import run_seeds
from harness.provenance import describe_machine, provenance_line
from showing_report import ANSWERED, PUBLISHED, asking_table, seed_values, separation
from showing_world import NEW, ROOT, TAUGHT, TEST, motion_crops

from lifelong_learning.learners.showing import evidence
from lifelong_learning.nodes.recognition_showings import NOVELTY_THRESHOLD
from lifelong_learning.sim.objects import ObjectRenderer
from lifelong_learning.sim.showing import show_object
from lifelong_learning.vision.normalisation import normalised

#: the goals the figures are judged against (per showing at 15 and 50 objects, AUROC, flagged %)
GOALS = {"15": 85.0, "50": 70.0, "auroc": 0.9, "flagged": 50.0}
LEAD_IN = 5


def room_features(seed: int, rooms: int, precision: str = "int8") -> dict[str, np.ndarray]:
    """``{"test", "new"}``: float64 ``(rooms, objects, TEST, d)`` features of every object shown in test
    rooms ``1..rooms`` (room 0 is the world's own test room), as the node publishes them; cached."""
    world = f"{TAUGHT}+{NEW}x{TEST}-rooms{rooms}-seed{seed}"
    name = f"showing-rooms-features-efficientnet-lite0-{precision}-{world}.npz"
    cache = ROOT / "runs" / "bench_cache" / name
    if not cache.is_file():
        from lifelong_learning.vision import FeatureExtractor

        t0 = time.perf_counter()
        crops = np.zeros((rooms, TAUGHT + NEW, TEST, 160, 160, 3), np.uint8)
        with ObjectRenderer(TAUGHT + NEW, seed) as renderer:  # the catalogue of showing_world.world()
            for r in range(rooms):
                for index in range(TAUGHT + NEW):
                    frames = show_object(
                        renderer, index, "test", TEST, seed=seed, lead_in=LEAD_IN, room_index=r + 1
                    )
                    crops[r, index] = motion_crops(frames, LEAD_IN)
        extractor = FeatureExtractor(backend="onnxruntime", num_threads=1, precision=precision)
        X = extractor.extract_batch(crops.reshape(-1, *crops.shape[3:])).reshape(*crops.shape[:3], -1)
        print(
            f"seed {seed}: {rooms} more test rooms rendered, cut and read in {time.perf_counter() - t0:.0f} s"
        )
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, test=X[:, :TAUGHT], new=X[:, TAUGHT:])
    with np.load(cache) as f:
        return {k: normalised(f[k].astype(np.float64), PUBLISHED) for k in ("test", "new")}


def four_rooms(X: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """``{"test", "new"}``: the world's first test room (``X``, published) and the 3 more of
    :func:`room_features`: taught objects ``(4, objects, TEST, d)``, never-taught showings
    ``(4 · NEW, TEST, d)``."""
    more = room_features(seed, 3)
    return {
        "test": np.concatenate([X["test"][None], more["test"]]),
        "new": np.concatenate([X["new"][None], more["new"]]).reshape(-1, *X["new"].shape[1:]),
    }


def showing_answers(model, showings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per showing (rows of ``showings``: frames × d): the answer's class index and the novelty."""
    answers = np.array([int(np.argmax(evidence(model, f))) for f in showings])
    novelty = model.novelty_score(showings.reshape(-1, showings.shape[-1])).reshape(showings.shape[:2])
    return answers, novelty.mean(axis=1)


def hues(seed: int) -> np.ndarray:
    """The palette colour (an index into ``sim.objects.PALETTE``) each object of the seed's catalogue
    looks like: the nearest to its colour, which the catalogue draws near a palette colour (for 1 object
    of 360 over seeds 0-5 the nearest is not the one it was drawn near)."""
    from lifelong_learning.sim.objects import PALETTE, object_catalog

    colours = np.array([spec.rgba[:3] for spec in object_catalog(TAUGHT + NEW, seed)])
    return np.argmin(((colours[:, None, :] - PALETTE[None]) ** 2).sum(axis=-1), axis=1)


def same_colour(
    hue: np.ndarray, taught: np.ndarray, shown: np.ndarray, named: np.ndarray
) -> tuple[float, float]:
    """Of showings of objects ``shown`` named as objects ``named`` (catalogue indices), the share (%)
    named as an object of the colour of the one shown, and that share by chance: the taught objects
    of that colour (other than the one shown) among the taught ones it could be taken for."""
    if shown.size == 0:
        return float("nan"), float("nan")
    chance = [np.mean(hue[taught[taught != o]] == hue[o]) for o in shown]
    return 100.0 * float(np.mean(hue[named] == hue[shown])), 100.0 * float(np.mean(chance))


def one_seed(
    seed: int, rooms: int, objects: list[int], asked: bool = True, precision: str = "int8", copies: int = 1
) -> dict:
    X = published({**features(seed, precision=precision), **pasted_features(seed, precision, copies)})
    extra = room_features(seed, rooms, precision)
    test = np.concatenate([X["test"][None], extra["test"]])  # (rooms + 1, objects, frames, d)
    new = np.concatenate([X["new"][None], extra["new"]])
    order = np.random.default_rng([seed, 31]).permutation(TAUGHT)
    hue = hues(seed)
    out: dict = {"seed": seed}
    for n in objects:
        taught = order[:n]
        model = teach(node_learner(), X, taught, {})
        classes = model.classes_.astype(str)
        known = test[:, taught].reshape(-1, TEST, test.shape[-1])  # room by room, the objects in order
        truth = np.tile(taught.astype(str), rooms + 1)
        answers, known_novelty = showing_answers(model, known)
        right = classes[answers] == truth
        frames = model.predict(known.reshape(-1, known.shape[-1])).reshape(known.shape[:2])
        new_answers, new_novelty = showing_answers(model, new.reshape(-1, TEST, new.shape[-1]))
        threshold = float(np.quantile(known_novelty, ANSWERED))
        every_room, first_room = (
            separation(known_novelty, new_novelty),
            separation(known_novelty[:n], new_novelty[:NEW]),
        )
        passed = new_novelty <= threshold  # never taught, and answered with a name
        new_shown = np.tile(np.arange(TAUGHT, TAUGHT + NEW), rooms + 1)
        colour = {
            "never taught": same_colour(
                hue, taught, new_shown[passed], classes[new_answers[passed]].astype(int)
            ),
            "taught": same_colour(
                hue, taught, truth[~right].astype(int), classes[answers[~right]].astype(int)
            ),
        }
        out[str(n)] = {
            "per frame %": 100.0 * float(np.mean(frames == truth[:, None])),
            "per showing %": 100.0 * float(np.mean(right)),
            "per showing, first room %": 100.0 * float(np.mean(right[:n])),
            "AUROC": every_room["auroc"],
            "AUROC, first room": first_room["auroc"],
            "flagged %": every_room["flagged"],
            "threshold": threshold,
            "never taught answered %": 100.0 * float(np.mean(passed)),
            "never taught answered: named as the same colour %": colour["never taught"][0],
            "never taught answered: the same colour by chance %": colour["never taught"][1],
            "taught named wrongly: as the same colour %": colour["taught"][0],
            "taught named wrongly: the same colour by chance %": colour["taught"][1],
            "taught answered at the node's threshold %": 100.0
            * float(np.mean(known_novelty <= NOVELTY_THRESHOLD)),
            "flagged at the node's threshold %": 100.0 * float(np.mean(new_novelty > NOVELTY_THRESHOLD)),
            "test showings": int(right.size),
            "never-taught showings": int(new_novelty.size),
        }
        print(f"seed {seed}, {n} objects: {out[str(n)]}", flush=True)
    if asked:
        out["asking"] = asking({**X, "test": test}, order)  # 15 objects, judged on every room
        print(f"seed {seed}, asking: {out['asking']}", flush=True)
    return out


def _mean(results: list[dict], *path: str) -> tuple[float, float, float]:
    """The mean over seeds of the value at ``path``, and the lowest and highest seed's."""
    values = seed_values(results, *path)
    return float(np.mean(values)), min(values), max(values)


def _asking_finding(results: list[dict]) -> str:
    """The node's question rule against the teacher of every frame, in words."""
    from bench_recognition_showing import QUESTION_RULES

    from lifelong_learning.learners.showings import QUESTION_NOVELTY

    rule = next(name for name, (q, m) in QUESTION_RULES.items() if q == QUESTION_NOVELTY and m > 0)
    everything = "labels every frame of 3 showing(s)"

    def mean(row: str, key: str) -> float:
        return _mean(results, "asking", row, key)[0]

    reached = mean(rule, "per showing %") >= mean(everything, "per showing %") and 2 * mean(
        rule, "labels"
    ) <= mean(everything, "labels")
    return (
        f"- Asking, all rooms: the node's rule ({rule}) {mean(rule, 'per showing %'):.1f} % with "
        f"{mean(rule, 'labels'):.0f} labels, a teacher of every frame "
        f"{mean(everything, 'per showing %'):.1f} % "
        f"with {mean(everything, 'labels'):.0f}; the goal, the same accuracy with at most half the labels: "
        f"{'reached' if reached else 'not reached'}."
    )


def _colour_table(results: list[dict], sizes: list[str]) -> list[str]:
    """What the mistakes are named as: an object of the same colour (the catalogue's palette), against
    chance."""
    lines = [
        "",
        "## What the mistakes are taken for: an object of the same colour",
        "",
        "The objects are painted in one of six palette colours (`sim/objects.py`); every never-taught "
        "object is a `random_urdfs` blob. Of the never-taught showings answered with a name (novelty "
        f"at or below the threshold that answers {100 * ANSWERED:.0f} % of the taught ones), and of the "
        "taught showings named wrongly: the share named as an object of their own colour, against "
        "that share by chance (the taught objects of that colour among those it could be taken for). "
        "All rooms, mean over seeds.",
        "",
        "| objects | never taught answered % | of them, named as the same colour % | by chance % "
        "| taught named wrongly: as the same colour % | by chance % |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    keys = (
        "never taught answered %",
        "never taught answered: named as the same colour %",
        "never taught answered: the same colour by chance %",
        "taught named wrongly: as the same colour %",
        "taught named wrongly: the same colour by chance %",
    )
    for n in sizes:
        cells = [f"{np.nanmean([r[n][k] for r in results]):.1f}" for k in keys]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


def markdown(results: list[dict], seconds: float, args: argparse.Namespace) -> str:
    sizes = [str(n) for n in args.objects]
    seeds = " ".join(str(r["seed"]) for r in results)
    first = results[0][sizes[0]]
    options = ("" if args.precision == "int8" else f" --precision {args.precision}") + (
        "" if args.copies == 1 else f" --copies {args.copies}"
    )
    lines = [
        f'# Recognition per showing and "I don\'t know", on {args.rooms + 1} test rooms per object',
        "",
        "Command: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recognition_rooms.py "
        f"--seeds {seeds} --rooms {args.rooms}{options}`  ",
        f"Machine: {describe_machine()}. {provenance_line()}. Total time {seconds:.0f} s.",
        "",
        f"EfficientNet-Lite0 {args.precision} features"
        + (" (the node's default)" if args.precision == "int8" else " (the node's default is int8)")
        + (
            ". The world, the teaching (150 frames of each object with their pasted copies, to the node's "
            "default learner) and the first test room are those of "
            if args.copies == 1
            else ". The world and the first test room are those of "
        )
        + "[recognition-showing.md](recognition-showing.md)"
        + (
            ""
            if args.copies == 1
            else ", the teaching too but for the copies: 150 frames of each object, each frame with "
            f"{args.copies} pasted copies (`paste_copies: {args.copies}`), to the node's default learner"
        )
        + "; every object, taught or never taught, is "
        f"shown in {args.rooms} more test rooms ({TEST} frames each): at {sizes[0]} objects "
        f"{first['test showings']} taught and {first['never-taught showings']} never-taught test "
        "showings a seed instead of "
        f"{sizes[0]} and {NEW}. Rule `mean_proba`, novelty score `confidence` (the node's); flagged: "
        f"never-taught showings above the threshold that answers {100 * ANSWERED:.0f} % of the taught "
        "ones. Mean over seeds (the seeds' range).",
        "",
        "## What it shows",
        "",
    ]
    for n in sizes:
        mean, low, high = _mean(results, n, "per showing %")
        verdict = "reached" if mean >= GOALS[n] else "not reached"
        lines.append(
            f"- Per showing at {n} objects, all rooms: {mean:.1f} % ({low:.1f}–{high:.1f}); the goal, "
            f"{GOALS[n]:g} %: {verdict}."
        )
    auroc, low, high = _mean(results, sizes[0], "AUROC")
    flagged = _mean(results, sizes[0], "flagged %")[0]
    if "asking" in results[0]:
        lines.append(_asking_finding(results))
    lines += [
        f"- Never taught, at {sizes[0]} objects: AUROC {auroc:.3f} ({low:.2f}–{high:.2f}), {flagged:.1f} % "
        f"flagged; the goals, {GOALS['auroc']:g} and {GOALS['flagged']:g} %: "
        f"{'reached' if auroc >= GOALS['auroc'] else 'not reached'} and "
        f"{'reached' if flagged >= GOALS['flagged'] else 'not reached'}.",
        "",
        "## Means over seeds",
        "",
        "| objects | per frame % | per showing %, first room | per showing %, all rooms | AUROC, first room "
        "| AUROC, all rooms | flagged %, all rooms |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    keys = (
        "per frame %",
        "per showing, first room %",
        "per showing %",
        "AUROC, first room",
        "AUROC",
        "flagged %",
    )
    for n in sizes:
        cells = []
        for key in keys:
            mean, low, high = _mean(results, n, key)
            fmt = ".3f" if key.startswith("AUROC") else ".1f"
            cells.append(f"{mean:{fmt}} ({low:{fmt}}–{high:{fmt}})")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"The novelty that answers {100 * ANSWERED:.0f} % of the taught showings, and the node's "
        f"`novelty_threshold` ({NOVELTY_THRESHOLD:g}) at work (all rooms):",
        "",
        "| objects | threshold answering 95 % | taught answered at the node's % "
        "| never taught flagged at the node's % |",
        "|---:|---:|---:|---:|",
    ]
    for n in sizes:
        t = _mean(results, n, "threshold")
        a = _mean(results, n, "taught answered at the node's threshold %")
        f = _mean(results, n, "flagged at the node's threshold %")
        lines.append(
            f"| {n} | {t[0]:.3f} ({t[1]:.3f}–{t[2]:.3f}) | {a[0]:.1f} ({a[1]:.1f}–{a[2]:.1f}) "
            f"| {f[0]:.1f} ({f[1]:.1f}–{f[2]:.1f}) |"
        )
    if "never taught answered %" in first:
        lines += _colour_table(results, sizes)
    if "asking" in results[0]:
        lines += asking_table(
            results,
            "## Asking, judged on every test room (15 objects, each shown three times, 50 frames each)",
            "Table 4 of [recognition-showing.md](recognition-showing.md) with its per-showing accuracy "
            "over all the test rooms: a teacher who labels every frame of the first 1, 2 or 3 showings "
            "of each object, against the robot that asks by the node's rule and learns a showing's "
            "frames from the answer.",
            seeds=True,
        )
    lines += [
        "",
        "## Seed by seed",
        "",
        "| seed | objects | per showing %, first room | per showing %, all rooms | AUROC, first room "
        "| AUROC, all rooms | flagged % |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for n in sizes:
            v = r[n]
            lines.append(
                f"| {r['seed']} | {n} | {v['per showing, first room %']:.1f} | {v['per showing %']:.1f} | "
                f"{v['AUROC, first room']:.3f} | {v['AUROC']:.3f} | {v['flagged %']:.1f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    ap.add_argument("--objects", type=int, nargs="+", default=[15, 50])
    ap.add_argument("--rooms", type=int, default=3, help="test rooms per object beyond the world's own")
    ap.add_argument(
        "--precision",
        choices=("int8", "fp32"),
        default="int8",
        help="the features' precision (feature_extractor's precision; the node's default: int8)",
    )
    ap.add_argument(
        "--copies",
        type=int,
        choices=(1, 2, 3),
        default=1,
        help="pasted copies of each taught frame (feature_extractor's paste_copies; the node's default: 1)",
    )
    ap.add_argument(
        "--out",
        help="default: docs/benchmarks/recognition-rooms.md (-fp32.md for fp32, -copiesN.md for N copies)",
    )
    ap.add_argument("--no-report", action="store_true", help="fill the caches and print, write nothing")
    ap.add_argument("--no-asking", dest="asking", action="store_false", help="skip the asking table")
    args = ap.parse_args()
    if args.rooms < 1 or min(args.objects) < 2 or max(args.objects) > TAUGHT:
        ap.error(f"--rooms must be >= 1 and --objects between 2 and {TAUGHT}")
    if args.out is None:
        suffix = ("" if args.precision == "int8" else f"-{args.precision}") + (
            "" if args.copies == 1 else f"-copies{args.copies}"
        )
        args.out = str(ROOT / f"docs/benchmarks/recognition-rooms{suffix}.md")
    run_seeds(
        args.seeds,
        lambda seed: one_seed(seed, args.rooms, args.objects, args.asking, args.precision, args.copies),
        lambda r, s: markdown(r, s, args),
        None if args.no_report else args.out,
    )


if __name__ == "__main__":
    main()
