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
pasted copies), object after object; per-showing accuracy on the objects' test showings in their
first test room. Reported per question rule: labels given, showings learned under the robot's own
answer and how many of those were wrong, per-showing accuracy; beside them, the teacher who labels
every frame of the three showings.
"""

from __future__ import annotations

import numpy as np
from bench_recognition_showing import (
    _showing_accuracy,
    _three_showings,
    features,
    node_learner,
    pasted_features,
    published,
    robot_asks,
)
from harness import seeds_main
from harness.provenance import report_head
from showing_report import seed_values
from showing_world import ROOT, TAUGHT

from lifelong_learning.learners.showings import QUESTION_NOVELTY

OBJECTS = 15
#: question rules (novelty above which the robot asks, margin below which it asks): the node's first
RULES = ((QUESTION_NOVELTY, 0.3), (0.3, 0.3), (0.5, 0.3))
TEACHER = "the teacher labels every frame of the three showings"


def rule_name(unsure: float, margin: float, self_teaching: bool) -> str:
    teaches = "and teaches itself the rest" if self_teaching else "only"
    return f"asks (novelty > {unsure:g} or margin < {margin:g}) {teaches}"


def one_seed(seed: int) -> dict:
    X = published({**features(seed), **pasted_features(seed)})
    objects = np.random.default_rng([seed, 31]).permutation(TAUGHT)[:OBJECTS]
    model = node_learner()
    showings = _three_showings(X, objects)
    for _, o, _, learned in showings:
        model.partial_fit(learned, [str(o)] * len(learned))
    out = {
        "seed": seed,
        TEACHER: {
            "labels": sum(len(frames) for _, _, frames, _ in showings),
            "own answers learned": 0,
            "own answers wrong": 0,
            **_showing_accuracy(model, X, objects),
        },
    }
    for unsure, margin in RULES:
        for self_teaching in (False, True):
            out[rule_name(unsure, margin, self_teaching)] = robot_asks(
                X, objects, unsure, margin, self_teaching
            )
    print(f"seed {seed}: {out}", flush=True)
    return out


COLUMNS = ("labels", "own answers learned", "own answers wrong", "per showing %")


def markdown(results: list[dict], seconds: float) -> str:
    seeds = " ".join(str(r["seed"]) for r in results)
    rows = [TEACHER] + [rule_name(u, m, t) for u, m in RULES for t in (False, True)]
    mean = {row: {c: float(np.mean(seed_values(results, row, c))) for c in COLUMNS} for row in rows}
    node = rule_name(*RULES[0], True)
    alone = rule_name(*RULES[0], False)
    lines = report_head(
        "The robot that asks and teaches itself what it is sure of",
        f"OPENBLAS_NUM_THREADS=1 python benchmarks/bench_self_teaching.py --seeds {seeds}",
        seconds,
    )
    lines += [
        f"{OBJECTS} objects, each shown three times (50 frames and their pasted copies each), object "
        "after object, to the node's default learner; tested per showing in their first test room "
        "(the world and features of [recognition-showing.md](recognition-showing.md)). Labels: frames "
        "labelled by the teacher. Own answers: showings learned under the robot's answer, and how many "
        "of those answers were wrong. Mean over seeds, per seed (sums for the wrong answers).",
        "",
        f"With the node's question rule, asking alone: {mean[alone]['per showing %']:.1f} % with "
        f"{mean[alone]['labels']:.0f} labels; asking and teaching itself the rest "
        f"(`learn_confident_showings: true`): {mean[node]['per showing %']:.1f} % with "
        f"{mean[node]['labels']:.0f} labels, {sum(seed_values(results, node, 'own answers wrong')):.0f} "
        f"of its own answers wrong; the teacher of every frame: {mean[TEACHER]['per showing %']:.1f} % "
        f"with {mean[TEACHER]['labels']:.0f} labels.",
        "",
        "| robot or teacher | labels | own answers learned | own answers wrong (all seeds) | per showing % |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        wrong = sum(seed_values(results, row, "own answers wrong"))
        v = seed_values(results, row, "per showing %")
        lines.append(
            f"| {row} | {mean[row]['labels']:.0f} | {mean[row]['own answers learned']:.1f} | {wrong:.0f} | "
            f"{np.mean(v):.1f} ({min(v):.1f}–{max(v):.1f}) |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    seeds_main(__doc__, one_seed, markdown, ROOT / "docs/benchmarks/recognition-self-teaching.md")


if __name__ == "__main__":
    main()
