"""The robot that asks, with and without teaching itself the showings it is sure of.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_self_teaching.py [--seeds 0 1 2 3 4 5]

Table 4 of ``bench_recognition_showing.py`` measures a robot that asks (the node's question rule)
against teachers who label every frame: asking alone gave fewer labels but not the full teacher's
accuracy. Here the robot also learns a showing it did not ask about under its own answer, as the
object_recognition node does with ``learn_confident_showings: true``
(``nodes/recognition_showings.py``): when the showing's answer is named, its novelty is at most the
question rule's and its best two classes are at least its margin apart, the showing's frames (and
their pasted copies) are learned under that answer. Doubt is judged once per showing, over all its
frames (as table 4 does): the node asks during a showing and at most one question every
``question_interval_s``, so the labels it would be given differ somewhat.

The world, the teaching and the test are those of ``bench_recognition_showing.py`` (its cached
features): 15 objects, each shown three times (a third of its 150 teaching frames each, with their
pasted copies), in two orders: object after object (an object's three showings one after the
other), and shuffled (every object's showings spread at random among the others', its first one
first). Reported per order and question rule: labels given, showings learned under the robot's own
answer and how many of those were wrong, per-showing accuracy on the objects' test showings in their
first test room and in four test rooms (``bench_recognition_rooms.py``'s three more, cached), and
what a wrong sure answer would cost: the share of the 10 never-taught objects' showings (in the four
test rooms) that the final model names with no doubt by the question rule, so that it would learn
them under a taught object's name. Beside them, the teacher who labels every frame of the three
showings (its never-taught share by the node's question rule).
"""

from __future__ import annotations

import numpy as np
from bench_recognition_rooms import four_rooms
from bench_recognition_showing import (
    _showing_accuracy,
    _three_showings,
    asking_robot,
    doubted,
    features,
    node_learner,
    pasted_features,
    published,
)
from harness import seeds_main
from harness.provenance import report_head
from showing_report import seed_values
from showing_world import ROOT, TAUGHT

from lifelong_learning.learners import IncrementalRLSC
from lifelong_learning.learners.showings import QUESTION_NOVELTY, QuestionPolicy

OBJECTS = 15
#: question rules (novelty above which the robot asks, margin below which it asks): the node's first
RULES = ((QUESTION_NOVELTY, 0.3), (0.3, 0.3), (0.5, 0.3))
TEACHER = "the teacher labels every frame of the three showings"
ORDERS = ("object after object", "shuffled")


def rule_name(unsure: float, margin: float, self_teaching: bool) -> str:
    teaches = "and teaches itself the rest" if self_teaching else "only"
    return f"asks (novelty > {unsure:g} or margin < {margin:g}) {teaches}"


def shuffled(showings: list, seed: int) -> list:
    """``showings`` (object after object) in a random order in which each object's showings keep
    their own order: slot ``i`` of the draw takes the next showing of the object drawn there."""
    objects = [o for _, o, _, _ in showings]
    draw = np.random.default_rng([seed, 47]).permutation(objects)
    queues: dict[int, list] = {}
    for item in showings:
        queues.setdefault(item[1], []).append(item)
    return [queues[int(o)].pop(0) for o in draw]


def unasked_new(model: IncrementalRLSC, new: np.ndarray, unsure: float, margin: float) -> float:
    """The share (%) of never-taught showings (``new``: showings × frames × d) that ``model`` names
    with no doubt by the question rule (``unsure``, ``margin``): those a robot teaching itself would
    learn under a taught object's name."""
    policy = QuestionPolicy(margin=margin, unsure=unsure)
    sure = sum(not doubted(model, frames, policy)[1] for frames in new)
    return 100.0 * sure / len(new)


def judged(
    model: IncrementalRLSC, X: dict, rooms: dict, objects: np.ndarray, unsure: float, margin: float
) -> dict[str, float]:
    """Per showing % in the first test room and in four, and :func:`unasked_new` in four."""
    return {
        "per showing %": _showing_accuracy(model, X, objects)["per showing %"],
        "per showing %, four rooms": _showing_accuracy(model, {"test": rooms["test"]}, objects)[
            "per showing %"
        ],
        "never-taught named unasked %": unasked_new(model, rooms["new"], unsure, margin),
    }


def one_seed(seed: int) -> dict:
    X = published({**features(seed), **pasted_features(seed)})
    rooms = four_rooms(X, seed)
    objects = np.random.default_rng([seed, 31]).permutation(TAUGHT)[:OBJECTS]
    out: dict = {"seed": seed}
    for order in ORDERS:
        showings = _three_showings(X, objects)
        if order == "shuffled":
            showings = shuffled(showings, seed)
        model = node_learner()
        for _, o, _, learned in showings:
            model.partial_fit(learned, [str(o)] * len(learned))
        out[order] = {
            TEACHER: {
                "labels": sum(len(frames) for _, _, frames, _ in showings),
                "own answers learned": 0,
                "own answers wrong": 0,
                **judged(model, X, rooms, objects, *RULES[0]),
            }
        }
        for unsure, margin in RULES:
            for self_teaching in (False, True):
                model, counts = asking_robot(showings, unsure, margin, self_teaching)
                out[order][rule_name(unsure, margin, self_teaching)] = {
                    **counts,
                    **judged(model, X, rooms, objects, unsure, margin),
                }
    print(f"seed {seed}: {out}", flush=True)
    return out


COLUMNS = (
    "labels",
    "own answers learned",
    "own answers wrong",
    "per showing %",
    "per showing %, four rooms",
    "never-taught named unasked %",
)


def summary(results: list[dict], order: str) -> str:
    """One sentence per order: the node's rule alone and with self-teaching, against the teacher."""
    node, alone = rule_name(*RULES[0], True), rule_name(*RULES[0], False)

    def mean(row: str, column: str) -> float:
        return float(np.mean(seed_values(results, order, row, column)))

    def said(row: str) -> str:
        return (
            f"{mean(row, 'per showing %, four rooms'):.1f} % in four rooms "
            f"({mean(row, 'per showing %'):.1f} % in the first) with {mean(row, 'labels'):.0f} labels"
        )

    wrong = sum(seed_values(results, order, node, "own answers wrong"))
    own = sum(seed_values(results, order, node, "own answers learned"))
    return (
        f"{order.capitalize()}, the node's question rule: asking alone names {said(alone)}; asking "
        f"and teaching itself the rest (`learn_confident_showings: true`) {said(node)}, {wrong:.0f} of "
        f"its {own:.0f} own answers wrong, and would teach itself "
        f"{mean(node, 'never-taught named unasked %'):.1f} % of the never-taught showings under a "
        f"taught name; the teacher of every frame: {said(TEACHER)}."
    )


def markdown(results: list[dict], seconds: float) -> str:
    seeds = " ".join(str(r["seed"]) for r in results)
    rows = [TEACHER] + [rule_name(u, m, t) for u, m in RULES for t in (False, True)]
    lines = report_head(
        "The robot that asks and teaches itself what it is sure of",
        f"OPENBLAS_NUM_THREADS=1 python benchmarks/bench_self_teaching.py --seeds {seeds}",
        seconds,
    )
    lines += [
        f"{OBJECTS} objects, each shown three times (50 frames and their pasted copies each), to the "
        "node's default learner, object after object or shuffled (an object's first showing first); "
        "tested per showing in their first test room and in four test rooms (the world and features "
        "of [recognition-showing.md](recognition-showing.md) and "
        "[recognition-rooms.md](recognition-rooms.md)). Labels: frames labelled by the teacher. Own "
        "answers: showings learned under the robot's answer, and how many of those answers were "
        "wrong. Never-taught named unasked: the share of the 10 never-taught objects' showings in the "
        "four test rooms that the final model names with no doubt by the row's question rule (the "
        "teacher's row: the node's rule), which a robot teaching itself would learn under a taught "
        "name. Mean over seeds, per seed (sums for the wrong answers).",
        "",
        *[f"- {summary(results, order)}" for order in ORDERS],
    ]
    for order in ORDERS:
        lines += [
            "",
            f"## {order.capitalize()}",
            "",
            "| robot or teacher | labels | own answers learned | own answers wrong (all seeds) "
            "| per showing %, first test room | per showing %, four test rooms "
            "| never-taught named unasked % |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for row in rows:
            m = {c: float(np.mean(seed_values(results, order, row, c))) for c in COLUMNS}
            wrong = sum(seed_values(results, order, row, "own answers wrong"))
            four = seed_values(results, order, row, "per showing %, four rooms")
            lines.append(
                f"| {row} | {m['labels']:.0f} | {m['own answers learned']:.1f} | {wrong:.0f} "
                f"| {m['per showing %']:.1f} | {m['per showing %, four rooms']:.1f} "
                f"({min(four):.1f}–{max(four):.1f}) | {m['never-taught named unasked %']:.1f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    seeds_main(__doc__, one_seed, markdown, ROOT / "docs/benchmarks/recognition-self-teaching.md")


if __name__ == "__main__":
    main()
