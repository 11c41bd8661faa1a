"""Showings grouped as frames arrive, and when the robot asks (learners/showings.py)."""

import numpy as np
import pytest

from lifelong_learning.learners.showings import QUESTION_NOVELTY, QuestionPolicy, ShowingTracker


def frame(direction, rng, d=8):
    x = np.zeros(d)
    x[direction] = 3.0
    return x + 0.1 * rng.normal(size=d)


def test_frames_of_one_object_make_one_showing_until_it_leaves_or_the_scene_changes():
    rng = np.random.default_rng(0)
    tracker = ShowingTracker(gap_s=1.0, change=0.5)
    ids = [tracker.add(frame(0, rng), (i, 0), 0.1 * i).id for i in range(1, 11)]
    assert len(set(ids)) == 1 and len(tracker.current.frames) == 10
    assert tracker.add(frame(0, rng), (11, 0), 0.1 * 10).frames[-1][0] == (11, 0)
    assert tracker.add(frame(0, rng), (11, 0), 1.05).id == ids[0]  # the same frame again: once
    assert len(tracker.current.frames) == 11
    other = tracker.add(frame(3, rng), (12, 0), 1.2)  # another object: a new showing
    assert other.id == ids[0] + 1 and tracker.ended[-1].ended == 1.2
    later = tracker.add(frame(3, rng), (13, 0), 5.0)  # no frame for longer than gap_s
    assert later.id == other.id + 1


def test_a_new_label_ends_the_showing_and_the_label_applies_to_the_showing():
    rng = np.random.default_rng(1)
    tracker = ShowingTracker()
    first = tracker.add(frame(0, rng), (1, 0), 0.0)
    assert tracker.labeled("mug", 0.1) is first and first.label == "mug"
    assert tracker.labeled("mug", 0.2) is first
    second = tracker.labeled("duck", 0.3)
    assert second is not first and second.label == "duck" and first.ended == 0.3


def test_a_never_ending_showing_keeps_its_last_frames_only():
    rng = np.random.default_rng(2)
    tracker = ShowingTracker(max_frames=7)
    for i in range(1, 1001):
        tracker.add(frame(0, rng), (i, 0), 0.01 * i)
    assert tracker.started_count == 1 and len(tracker.current.frames) == 7
    assert tracker.current.frames[0][0] == (994, 0)


def test_answers_for_showings_long_ended_unknown_or_forgotten_are_refused():
    rng = np.random.default_rng(3)
    tracker = ShowingTracker(keep_ended=2, answer_window_s=10.0)
    for i in range(5):  # five showings of alternating objects
        tracker.add(frame(i % 2 * 4, rng), (i + 1, 0), float(i))
    assert tracker.find(5, 4.0)[0] is tracker.current
    assert tracker.find(4, 5.0)[0].id == 4
    showing, why = tracker.find(4, 30.0)
    assert showing is None and "ended more than" in why
    assert "no longer kept" in tracker.find(1, 5.0)[1]
    assert "there is no showing" in tracker.find(99, 5.0)[1]
    with pytest.raises(ValueError):
        ShowingTracker(max_frames=0)


def test_an_ended_showing_stays_answerable_and_forgotten_ones_are_not():
    """end(): the next frame starts another showing however soon it comes, the ended one is found;
    forget(): none is found, and ids go on (an old id is no longer kept)."""
    rng = np.random.default_rng(3)
    tracker = ShowingTracker(gap_s=1.0, change=0.5)
    first = tracker.add(frame(0, rng), (1, 0), 0.0)
    tracker.end(0.1)
    assert tracker.current is None and first.ended == 0.1 and tracker.find(first.id, 0.2)[0] is first
    tracker.end(0.15)  # nothing in view: nothing ends
    second = tracker.add(frame(0, rng), (2, 0), 0.2)  # within gap_s, the same object: still another
    assert second.id == first.id + 1 and list(tracker.ended) == [first]
    tracker.forget()
    assert tracker.current is None and not tracker.ended
    for showing in (first, second):
        found, why = tracker.find(showing.id, 0.3)
        assert found is None and "no longer kept" in why
    assert tracker.add(frame(0, rng), (3, 0), 0.3).id == second.id + 1


def test_the_robot_asks_once_per_showing_after_a_while_and_at_most_once_per_interval():
    rng = np.random.default_rng(4)
    tracker = ShowingTracker(gap_s=100.0)
    policy = QuestionPolicy(ask_after_s=2.0, min_interval_s=10.0, margin=0.1)
    assert policy.doubt("", []) == "unknown"
    assert policy.doubt("mug", [("mug", 1.0)]) == "unknown"  # one class known: it cannot tell
    assert policy.doubt("mug", [("mug", 0.5), ("duck", 0.45)]) == "ambiguous"
    assert policy.doubt("mug", [("mug", 0.9), ("duck", 0.05)]) == ""
    # named, but more novel than ``unsure``: the robot asks about what it is unsure of
    assert policy.unsure == QUESTION_NOVELTY
    assert policy.doubt("mug", [("mug", 0.9), ("duck", 0.05)], novelty=QUESTION_NOVELTY + 0.01) == "unknown"
    assert policy.doubt("mug", [("mug", 0.9), ("duck", 0.05)], novelty=QUESTION_NOVELTY) == ""
    wall = tracker.add(frame(0, rng), (1, 0), 0.0)
    asked = [t for t in np.arange(0.0, 30.0, 1 / 15) if policy.ask(wall, "unknown", t)]
    assert len(asked) == 1 and asked[0] >= 2.0  # at frame rate for 30 s: one question
    other = tracker.add(frame(5, rng), (2, 0), asked[0] + 1.0)
    assert not policy.ask(other, "unknown", asked[0] + 4.0)  # too soon after the last question
    assert policy.ask(other, "unknown", asked[0] + 10.0)
    taught = tracker.add(frame(2, rng), (3, 0), 100.0)
    taught.label = "mug"
    assert not any(policy.ask(taught, "unknown", t) for t in (100.0, 120.0, 200.0))


def test_a_label_applies_to_the_frames_like_the_labeled_one_only():
    rng = np.random.default_rng(5)
    tracker = ShowingTracker(change=0.2)
    showing = tracker.add(frame(0, rng), (1, 0), 0.0)
    for i in range(2, 6):
        tracker.add(frame(0, rng), (i, 0), 0.1 * i)
    showing.frames.append(((9, 0), frame(6, rng)))  # another object's frame the grouping took in
    showing.taught.add((2, 0))
    like = [stamp for stamp, _ in showing.untaught(frame(0, rng), tracker.change)]
    assert like == [(1, 0), (3, 0), (4, 0), (5, 0)]
    assert len(showing.untaught()) == 5
