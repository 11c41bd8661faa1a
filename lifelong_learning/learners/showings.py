"""Showings: the frames of one object held up to the camera, grouped as they arrive, and when the
robot asks about one (no ROS imports).

**Grouping** (:class:`ShowingTracker`): a frame joins the current showing unless

- no frame came for ``gap_s`` seconds (the object left the view, the camera stopped),
- the scene changed: the cosine distance between the frame's features and the mean of the
  showing's last frames is above ``change`` (another object, another place; the frames of one
  object turning in a hand mostly stay closer: docs/benchmarks/recognition-showing.md measures
  the frames split off and the changes caught at each threshold),
- or the teacher's label changed (:meth:`ShowingTracker.labeled`).

A showing keeps its last ``max_frames`` frames (a static scene that never ends is bounded in frames
and memory). A label given during a showing applies to its kept frames within ``change`` of the
labeled frame (:meth:`Showing.untaught`): a change the grouping missed does not teach another
object's frames; the ``keep_ended`` last ended showings are kept for answers that come late
(:meth:`ShowingTracker.find`, within ``answer_window_s`` of their end).

**Questions** (:class:`QuestionPolicy`): the robot asks "what is this?" about a showing whose answer
stayed unknown (label ``""``, novelty above ``unsure``, or fewer than two classes known) or ambiguous
(best two classes within ``margin``) for ``ask_after_s``
seconds; at most once per showing, never about one being taught, and at most one question every
``min_interval_s`` seconds over all showings (a robot in front of a wall it does not know asks
once, not at frame rate). The iCub's interactive recognition does the same: it tracks what it is
shown, accumulates evidence over the track and asks when it does not know. ``unsure`` is below the
novelty at which the answer withholds the name: the robot asks about what it is unsure of, and
answers ``""`` only for what is likely never taught (docs/benchmarks/recognition-showing.md, table 4).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

#: the novelty above which the robot asks: with the margin rule, the most accurate question rule of
#: docs/benchmarks/recognition-showing.md (table 4) within half the labels of a teacher who labels
#: every frame (0.3 and 0.4 ask less and name fewer right; docs/recognition.md, "The robot asks")
QUESTION_NOVELTY = 0.2


def cosine_distance(a: np.ndarray, b: np.ndarray) -> float:
    """``1 − cos(a, b)`` (0 for a zero vector: no evidence of a change)."""
    denominator = float(np.linalg.norm(a) * np.linalg.norm(b))
    return 1.0 - float(a @ b) / denominator if denominator > 0 else 0.0


@dataclass
class Showing:
    """One showing: its frames (``(stamp, features)``, the last ``max_frames``), what it was taught."""

    id: int
    started: float
    last: float
    frames: deque[tuple[tuple[int, int], np.ndarray]]
    label: str = ""  # the teacher's label ("" while none)
    taught: set[tuple[int, int]] = field(default_factory=set)  # stamps of its frames learned
    ended: float | None = None  # when it ended (None while current)
    asked: bool = False
    doubt_since: float | None = None  # since when its answer is unknown or ambiguous

    def features(self) -> np.ndarray:
        """The kept frames' features, ``(n, d)``."""
        return np.stack([x for _, x in self.frames])

    def untaught(
        self, like: np.ndarray | None = None, change: float = 2.0
    ) -> list[tuple[tuple[int, int], np.ndarray]]:
        """The kept frames not learned yet; with ``like``, only those within cosine distance ``change``
        of it (the frames of the object a label was given for, not what the showing may have taken
        in before a change it did not see)."""
        frames = [(stamp, x) for stamp, x in self.frames if stamp not in self.taught]
        if like is None:
            return frames
        return [(stamp, x) for stamp, x in frames if cosine_distance(x, like) <= change]


class ShowingTracker:
    """Groups frames into showings (module docstring). Not thread-safe: the node calls it under a lock."""

    def __init__(
        self,
        gap_s: float = 1.0,
        change: float = 0.2,
        max_frames: int = 60,
        keep_ended: int = 20,
        answer_window_s: float = 60.0,
        recent: int = 5,
    ) -> None:
        if not (
            gap_s > 0 and 0 < change <= 2 and max_frames >= 1 and keep_ended >= 0 and answer_window_s >= 0
        ):
            raise ValueError(
                "gap_s > 0, change in (0, 2], max_frames ≥ 1, keep_ended ≥ 0, answer_window_s ≥ 0"
            )
        self.gap_s, self.change, self.max_frames = float(gap_s), float(change), int(max_frames)
        self.answer_window_s, self.recent = float(answer_window_s), int(recent)
        self.current: Showing | None = None
        self.ended: deque[Showing] = deque(maxlen=int(keep_ended))
        self._next_id = 1
        self.started_count = 0

    def _start(self, now: float, label: str = "") -> Showing:
        self.end(now)
        showing = Showing(self._next_id, now, now, deque(maxlen=self.max_frames), label=label)
        self._next_id += 1
        self.started_count += 1
        self.current = showing
        return showing

    def end(self, now: float) -> None:
        """End the current showing at ``now`` (kept, answerable as any ended one): the next frame
        starts another, however soon it comes."""
        if self.current is not None:
            self.current.ended = now
            self.ended.append(self.current)
            self.current = None

    def forget(self) -> None:
        """Forget every showing, current and ended: none can be answered any more. Ids go on from
        where they were: an answer naming an old one is told it is no longer kept."""
        self.current = None
        self.ended.clear()

    def _changed(self, x: np.ndarray) -> bool:
        """Whether ``x`` is far (cosine distance > ``change``) from the mean of the showing's last frames."""
        frames = list(self.current.frames)[-self.recent :] if self.current else []
        if not frames:
            return False
        return cosine_distance(np.mean([f for _, f in frames], axis=0), x) > self.change

    def add(self, x: np.ndarray, stamp: tuple[int, int], now: float) -> Showing:
        """Put a frame's features into its showing (a new one when the last ended, module docstring)."""
        current = self.current
        if current is None or now - current.last > self.gap_s or self._changed(x):
            current = self._start(now)
        elif stamp != (0, 0) and any(s == stamp for s, _ in list(current.frames)[-self.recent :]):
            return current  # the same frame again (it comes both to classify and labeled)
        current.frames.append((stamp, np.asarray(x, dtype=np.float64)))
        current.last = now
        return current

    def labeled(self, label: str, now: float) -> Showing:
        """The teacher names what is shown now: the current showing takes the label, unless it had
        another (then a new showing starts) or ended."""
        current = self.current
        if current is None or now - current.last > self.gap_s or (current.label and current.label != label):
            current = self._start(now, label)
        current.label = label
        return current

    def find(self, showing_id: int, now: float) -> tuple[Showing | None, str]:
        """The showing ``showing_id`` and ``""``, or None and why it cannot be answered."""
        if self.current is not None and self.current.id == showing_id:
            return self.current, ""
        for showing in self.ended:
            if showing.id == showing_id:
                if now - float(showing.ended or now) > self.answer_window_s:
                    return (
                        None,
                        f"showing {showing_id} ended more than {self.answer_window_s:g} s ago",
                    )
                return showing, ""
        if 0 < showing_id < self._next_id:
            return None, f"showing {showing_id} is no longer kept"
        return None, f"there is no showing {showing_id}"


@dataclass
class QuestionPolicy:
    """When to ask about a showing (module docstring)."""

    ask_after_s: float = 2.0
    min_interval_s: float = 10.0
    margin: float = 0.3
    unsure: float = QUESTION_NOVELTY
    last_asked: float | None = None
    asked_count: int = 0

    def doubt(self, answer_label: str, guesses: list[tuple[str, float]], novelty: float = 0.0) -> str:
        """``"unknown"``, ``"ambiguous"`` or ``""`` for a showing's answer, its best guesses (best
        first) and its novelty: unknown when the answer withheld the name, when its novelty is above
        ``unsure`` (named or not) and while fewer than two classes are known (one class cannot be
        told from a new object: its confidence is always 1)."""
        if answer_label == "" or novelty > self.unsure or len(guesses) < 2:
            return "unknown"
        if guesses[0][1] - guesses[1][1] < self.margin:
            return "ambiguous"
        return ""

    def ask(self, showing: Showing, reason: str, now: float) -> bool:
        """Whether to ask about ``showing`` now, whose answer is in ``reason`` doubt (``""``: none)."""
        if not reason or showing.label:
            showing.doubt_since = None
            return False
        if showing.doubt_since is None:
            showing.doubt_since = now
        if showing.asked or now - showing.doubt_since < self.ask_after_s:
            return False
        if self.last_asked is not None and now - self.last_asked < self.min_interval_s:
            return False
        showing.asked, self.last_asked = True, now
        self.asked_count += 1
        return True
