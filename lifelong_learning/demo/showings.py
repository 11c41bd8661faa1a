"""The demo's showings: per-showing scores, objects never taught, and a teacher who only answers the
robot's questions (the object_recognition node's ``showing`` answers and ``~/query``,
lifelong_learning/nodes/recognition_showings.py).

- :func:`showing_score`: each object of a round is one showing; its answer is the per-showing answer
  published after its last frame, scored against the truth (``""``, unknown, is wrong);
- :func:`never_taught`: objects of the catalogue never taught are shown in their test rooms: how many
  frames and showings the robot answers ``""`` (I don't know);
- :func:`taught_by_answers`: new objects shown unlabelled in their teaching rooms; the teacher says
  nothing until the robot asks, then answers the question (``~/answer``) with the object's name; the
  objects are then shown in their test rooms and scored per showing.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from lifelong_learning.demo.driver import DemoDriver
from lifelong_learning.srv import AnswerQuery


def wait_for_showings(driver: DemoDriver, stamps: list[int], timeout: float = 5.0) -> dict[int, Any]:
    """The per-showing answers after ``stamps`` (waiting ≤ ``timeout`` for all)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = driver.answered_showings(stamps)
        if all(a is not None for a in got.values()):
            return got
        time.sleep(0.05)
    return driver.answered_showings(stamps)


def last_frames(sent: list[tuple[int, int]]) -> dict[int, int]:
    """The last frame stamp of each object's showing in ``sent`` ((stamp, object), object after object)."""
    last: dict[int, int] = {}
    for stamp, obj in sent:
        last[obj] = stamp
    return last


def showing_score(
    driver: DemoDriver, sent: list[tuple[int, int]], names: list[str], rare: int
) -> dict[str, Any]:
    """Per-showing accuracy of the objects shown in ``sent``, of the rare one, and the unknown answers."""
    last = last_frames(sent)
    answers = wait_for_showings(driver, list(last.values()))
    right = {obj: answers[s] is not None and answers[s][0] == names[obj] for obj, s in last.items()}
    return {
        "showing_accuracy": float(np.mean(list(right.values()))) if right else None,
        "rare_showing_accuracy": float(right[rare]) if rare in right else None,
        "n_showings": len(last),
        "showings_unknown": sum(answers[s] is not None and answers[s][0] == "" for s in last.values()),
    }


def never_taught(stage: Any, camera: Any, results: dict[str, Any], first: int) -> None:
    """Show ``stage.cfg.new_objects`` objects never taught (catalogue indices from ``first``) in their
    test rooms: how many frames and showings are answered ``""``."""
    cfg, driver = stage.cfg, stage.driver
    objects = list(range(first, first + cfg.new_objects))
    sent = camera.show(objects, "test", cfg.test_frames_per_object)
    stamps = [s for s, _ in sent]
    time.sleep(1.0)
    frames = driver.answered_predictions(stamps)
    last = last_frames(sent)
    showings = wait_for_showings(driver, list(last.values()))
    unknown_frames = sum(a is not None and a[0] == "" for a in frames.values())
    unknown_showings = sum(a is not None and a[0] == "" for a in showings.values())
    results["recognition"]["never_taught"] = {
        "objects": len(objects),
        "frames": len(stamps),
        "frames_unknown": unknown_frames,
        "showings_unknown": unknown_showings,
        "questions": len(driver.questions_about({a[1] for a in showings.values() if a is not None})),
    }
    stage.say(
        f"never taught: {unknown_showings} of {len(objects)} showings and {unknown_frames} of "
        f"{len(stamps)} frames answered 'I don't know'"
    )


def taught_by_answers(stage: Any, camera: Any, results: dict[str, Any], names: list[str], first: int) -> None:
    """New objects (catalogue indices from ``first``) taught only by answering the robot's questions."""
    cfg, driver = stage.cfg, stage.driver
    objects = list(range(first, first + cfg.asked_objects))
    asked, learned = 0, 0
    for obj in objects:
        stage.say(f"shown without a word: '{names[obj]}'")
        sent = camera.show([obj], "teach", cfg.labeled_frames)
        showing_ids = {
            a[1] for a in wait_for_showings(driver, [s for s, _ in sent]).values() if a is not None
        }
        deadline = time.monotonic() + 3.0
        questions = driver.questions_about(showing_ids)
        while not questions and time.monotonic() < deadline:
            time.sleep(0.1)
            questions = driver.questions_about(showing_ids)
        if not questions:
            stage.say(f"the robot did not ask about '{names[obj]}'")
            continue
        asked += 1
        request = AnswerQuery.Request(showing_id=questions[0].showing_id, label=names[obj])
        response = driver.call(AnswerQuery, "/object_recognition/answer", request)
        learned += int(response.frames_learned) if response.success else 0
        stage.say(f"robot: what is this? teacher: '{names[obj]}' ({response.message})")
    time.sleep(0.5)
    sent = camera.show(objects, "test", cfg.test_frames_per_object)
    score = showing_score(driver, sent, names, -1)
    results["recognition"]["asked"] = {
        "objects": len(objects),
        "questions": asked,
        "frames_learned": learned,
        "showing_accuracy": score["showing_accuracy"],
    }
