"""The object_recognition node's showings and questions: the ROS side of
:mod:`~lifelong_learning.learners.showings` and :mod:`~lifelong_learning.learners.showing`.

Every classified frame joins a showing (:class:`~lifelong_learning.learners.showings.ShowingTracker`);
after each, the showing's answer (:func:`~lifelong_learning.learners.showing.judge_showing` over its
kept frames, with its best guesses) is published on ``showing`` (lifelong_learning/ShowingAnswer).
A labeled frame names its showing: the showing's kept frames not learned yet are learned with the
label too (the teacher's label applies to every frame of the showing it was given in). When a
showing's answer stays unknown or ambiguous, the node asks on ``~/query`` (lifelong_learning/Query,
rate-limited, :class:`~lifelong_learning.learners.showings.QuestionPolicy`); the answer comes on ``~/answer``
(lifelong_learning/AnswerQuery, naming the showing) or on ``teacher_label`` (std_msgs/String, while
the showing asked about is still the current one: after it, a name on ``teacher_label`` is the
teacher naming the next object), and teaches the showing's kept frames. Refused and counted
(``answer refused``), nothing learned: an unknown showing, one ended more than ``answer_window_s``
ago, one already taught, a bad label. With ``learn_confident_showings``, a showing that ends
unlabelled and unasked, whose answer over its kept frames is then sure (named, no doubt by the
question rule), is learned under its own answer (unscored, as pasted copies are; published on
``learned_features`` like every frame a label taught, and undone by ``~/undo_teaching`` as any
teaching is).

Pasted copies of a frame (``pasted_features``, the frame's stamp: the feature_extractor's
``paste_copies``), checked by the node as inputs, wait until their frame is taught and are learned
with it, with its label; one that comes after its frame was taught is learned at once. Those of
frames never taught are dropped (all of them by cleanup, which forgets the showings), the oldest
first, beyond as many copies as the kept showings hold frames; a copy without a stamp (0) is never
learned; copies of one frame beyond :data:`MAX_COPIES` are refused and counted (``pasted copy
refused``): a flood of copies under a taught frame's stamp cannot outweigh what was taught. A copy
never brings back a class forgotten (``~/forget_class``, undone whole by ``~/undo_teaching``, or
known before a ``~/reset``) since its frame was taught: refused and counted (the node checks it
under the model lock); nor a frame unlearned by ``~/undo_teaching`` or ``~/reset`` (refused by the
frame's stamp); after ``~/rename_class`` copies are learned under the new name.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Collection
from typing import Any

import numpy as np
from std_msgs.msg import String

from lifelong_learning.learners.novelty import DEFAULT_SCORE, SCORES
from lifelong_learning.learners.recognition_gate import label_problem
from lifelong_learning.learners.showing import DEFAULT_RULE, RULES, judge_showing
from lifelong_learning.learners.showings import QUESTION_NOVELTY, QuestionPolicy, Showing, ShowingTracker
from lifelong_learning.msg import Query, ShowingAnswer
from lifelong_learning.nodes.base import ParamSpec
from lifelong_learning.srv import AnswerQuery

#: the novelty of the default score (``confidence``, scaled to [0, 1]) above which the answer is
#: unknown: near the one at which 95 % of the taught objects' showings are answered, in the test
#: room of docs/benchmarks/recognition-showing.md (median over six seeds: 0.674 at 15 objects, 0.669
#: at 50) and in the four test rooms of recognition-rooms.md (0.713 and 0.678: 0.70 answers 91.9 and
#: 96.4 % of the taught showings there)
NOVELTY_THRESHOLD = 0.70
#: the refusal of a pasted copy (too many of one frame; its class no longer known)
COPY_REFUSED = "pasted copy refused"
#: what a pasted copy is called in the message of a refusal of it
PASTED_COPY = "pasted copy"
#: most pasted copies learned per frame (the feature_extractor's ``paste_copies`` is at most 8)
MAX_COPIES = 8

SHOWING_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("showing_topic", "showing", "lifelong_learning/ShowingAnswer output: one answer per showing."),
    ParamSpec(
        "teacher_label_topic",
        "teacher_label",
        "std_msgs/String: an answer to the last question asked (~/query) while it is open; '' disables.",
    ),
    ParamSpec(
        "novelty_threshold",
        NOVELTY_THRESHOLD,
        "Answers (per frame and per showing) whose novelty score is above this get label '' (never "
        "taught); the default: a little above the threshold answering 95 % of taught objects' "
        "showings in the benchmark (docs/benchmarks/recognition-showing.md).",
        bounds=(0.0, 1e12),
    ),
    ParamSpec(
        "question_novelty",
        QUESTION_NOVELTY,
        "Ask about a showing whose novelty score is above this (below novelty_threshold: the robot asks "
        "about what it is unsure of, and answers '' only for what is likely never taught; "
        "docs/benchmarks/recognition-showing.md).",
        bounds=(0.0, 1e12),
    ),
    ParamSpec("novelty_score", DEFAULT_SCORE, f"Novelty score: one of {', '.join(SCORES)}."),
    ParamSpec(
        "showing_rule", DEFAULT_RULE, f"How a showing's frames are accumulated: one of {', '.join(RULES)}."
    ),
    ParamSpec(
        "showing_gap_s", 1.0, "A showing ends when no frame came for this long [s].", bounds=(0.01, 3600.0)
    ),
    ParamSpec(
        "showing_change",
        0.2,
        "A showing ends when a frame's cosine distance to the mean of its last frames exceeds this "
        "(sqrt_l2 features: 94 % of changes of object caught, 12 % of frames split off; "
        "docs/benchmarks/recognition-showing.md).",
        bounds=(0.01, 2.0),
    ),
    ParamSpec("max_showing_frames", 60, "Frames a showing keeps (its last ones).", bounds=(1, 10000)),
    ParamSpec(
        "ask_after_s",
        2.0,
        "Ask about a showing unknown or ambiguous for this long [s].",
        bounds=(0.0, 3600.0),
    ),
    ParamSpec(
        "question_interval_s", 10.0, "At most one question per this many seconds [s].", bounds=(0.0, 86400.0)
    ),
    ParamSpec(
        "ambiguity_margin",
        0.3,
        "A showing is ambiguous when its best two classes' accumulated probabilities differ by less "
        "(docs/benchmarks/recognition-showing.md, table 4).",
        bounds=(0.0, 1.0),
    ),
    ParamSpec(
        "answer_window_s",
        60.0,
        "An answer for a showing ended longer ago is refused [s].",
        bounds=(0.0, 86400.0),
    ),
    ParamSpec(
        "learn_confident_showings",
        False,
        "Learn a showing that ends unlabelled and unasked under its own answer when that answer is "
        "sure (named, novelty at most question_novelty, best two classes ambiguity_margin apart): the "
        "robot asks what it doubts and teaches itself the rest "
        "(docs/benchmarks/recognition-self-teaching.md).",
    ),
)


def _stamp(header: Any) -> tuple[int, int]:
    return int(header.stamp.sec), int(header.stamp.nanosec)


class ShowingDesk:
    """Showings, their answers and the questions of an object_recognition ``node`` (module docstring)."""

    def __init__(self, node: Any) -> None:
        p = node.params
        self.node = node
        self.rule, self.score = str(p["showing_rule"]), str(p["novelty_score"])
        if self.rule not in RULES or self.score not in SCORES:
            raise ValueError(f"showing_rule must be one of {RULES} and novelty_score one of {SCORES}")
        self.novelty_threshold = float(p["novelty_threshold"])
        self.tracker = ShowingTracker(
            gap_s=float(p["showing_gap_s"]),
            change=float(p["showing_change"]),
            max_frames=int(p["max_showing_frames"]),
            answer_window_s=float(p["answer_window_s"]),
        )
        self.policy = QuestionPolicy(
            float(p["ask_after_s"]),
            float(p["question_interval_s"]),
            float(p["ambiguity_margin"]),
            float(p["question_novelty"]),
        )
        self.lock = threading.Lock()
        #: pasted copies waiting for their frame to be taught, by stamp (the oldest dropped first)
        self.pasted: OrderedDict[tuple[int, int], list[np.ndarray]] = OrderedDict()
        #: copies taken per frame, by stamp (the oldest forgotten first)
        self.copies: OrderedDict[tuple[int, int], int] = OrderedDict()
        #: frames unlearned since they were taught (~/undo_teaching, ~/reset): their copies are refused
        self.unlearned: OrderedDict[tuple[int, int], None] = OrderedDict()
        self.max_pasted = (int(self.tracker.ended.maxlen or 0) + 1) * self.tracker.max_frames
        self.waiting = 0  # copies in ``pasted``
        self.asked: int | None = None  # the last showing asked about
        self.answers_taken = 0
        self.learn_confident = bool(p["learn_confident_showings"])
        self.self_taught = 0  # showings learned under their own answer
        self.showing_pub = node.create_overridable_publisher(ShowingAnswer, p["showing_topic"], 10)
        self.query_pub = node.create_overridable_publisher(Query, "~/query", 10)
        if p["teacher_label_topic"]:
            node.create_counted_subscription(
                String, p["teacher_label_topic"], self.on_teacher_label, 10, stream="teacher_label"
            )

    def create_services(self) -> None:
        self.node.create_configured_service(AnswerQuery, "~/answer", self.on_answer)

    def pause(self) -> None:
        """The node was deactivated: the showing in view ends there (answerable as any ended one);
        frames after the node is active again start another."""
        with self.lock:
            self.tracker.end(time.monotonic())

    def forget(self) -> None:
        """The node was cleaned up: its showings and the copies waiting for their frames are forgotten
        (an answer naming one is refused); the frames unlearned stay refused their copies."""
        with self.lock:
            self.tracker.forget()
            self.pasted.clear()
            self.waiting, self.asked = 0, None

    # ---------------------------------------------------------------- frames
    def on_frame(self, header: Any, x: np.ndarray) -> None:
        """A classified frame: into its showing; the showing's answer published; maybe a question."""
        now = time.monotonic()
        with self.lock:
            before = self.tracker.current
            showing = self.tracker.add(x, _stamp(header), now)
            frames = showing.features()
            label = showing.label
        if self.learn_confident and before is not None and before is not showing:
            self._learn_if_sure(before, now)
            with self.lock:  # the time it took is no gap in the showing that goes on
                showing.last = max(showing.last, time.monotonic())
        with self.node.model_lock:
            model = self.node.model
            try:
                answer, guesses = judge_showing(
                    model, frames, 3, 0.0, self.novelty_threshold, self.rule, self.score
                )
            except ValueError as error:
                self.node.reject("bad features", f"showing {showing.id}: {error}")
                return
        top = guesses[0][0] if guesses else ""
        self.showing_pub.publish(
            ShowingAnswer(
                header=header,
                showing_id=showing.id,
                label=answer.label,
                top_label=top,
                confidence=answer.confidence,
                novelty=answer.novelty,
                frames=len(frames),
                taught_label=label,
            )
        )
        with self.lock:
            reason = self.policy.doubt(answer.label, guesses, answer.novelty)
            ask = self.policy.ask(showing, reason, now)
            if ask:
                self.asked = showing.id
        if ask:
            self.query_pub.publish(
                Query(
                    header=header,
                    showing_id=showing.id,
                    reason=reason,
                    guesses=[g for g, _ in guesses],
                    confidences=[c for _, c in guesses],
                    novelty=answer.novelty,
                    frames=len(frames),
                )
            )

    def on_labeled(self, header: Any, x: np.ndarray, label: str) -> None:
        """A labeled frame was learned: it joins its showing, which takes the label, and the showing's
        kept frames not learned yet are learned with it."""
        now, stamp = time.monotonic(), _stamp(header)
        with self.lock:
            self.tracker.labeled(label, now)
            showing = self.tracker.add(x, stamp, now)
            showing.label = label
            showing.taught.add(stamp)
            self.unlearned.pop(stamp, None)  # taught again: its copies with it
            copies = self._take_pasted(stamp)
        for copy in copies:
            self.node.learn(copy, label, observed=False, stamp=stamp, source=PASTED_COPY)
        self._teach(showing, label, like=x)

    def on_pasted(self, header: Any, x: np.ndarray) -> None:
        """A pasted copy of the frame of ``header``: learned now if that frame was taught, else kept
        until it is (module docstring)."""
        stamp = _stamp(header)
        if stamp == (0, 0):
            return
        with self.lock:
            taken = self.copies.pop(stamp, 0) + 1
            self.copies[stamp] = taken
            while len(self.copies) > self.max_pasted:
                self.copies.popitem(last=False)
            label = next((s.label for s in self._showings() if stamp in s.taught), "")
            unlearned = stamp in self.unlearned
            if taken <= MAX_COPIES and not label and not unlearned:
                self.pasted.setdefault(stamp, []).append(x)
                self.waiting += 1
                while self.waiting > self.max_pasted:  # bounded in copies, whatever their stamps
                    self.waiting -= len(self.pasted.popitem(last=False)[1])
        if taken > MAX_COPIES:
            self.node.reject(COPY_REFUSED, f"more than {MAX_COPIES} copies of the frame stamped {stamp}")
        elif unlearned:
            self.node.reject(COPY_REFUSED, f"the frame stamped {stamp} was unlearned since (undo, reset)")
        elif label:
            self.node.learn(x, label, observed=False, stamp=stamp, source=PASTED_COPY)

    def relabel(self, old: str, new: str) -> None:
        """The class ``old`` was renamed ``new``: the kept showings taught as ``old`` take the new
        name, so that copies of their frames still to come are learned under it."""
        with self.lock:
            for showing in self._showings():
                if showing.label == old:
                    showing.label = new

    def unlearn(self, labels: Collection[str] | None = None) -> None:
        """The frames taught in the kept showings of ``labels`` (None: of every label) were unlearned
        (``~/undo_teaching``, ``~/reset``): their copies still to come are refused. Those of a label's
        frames an undo kept are refused too (a copy comes within a few frames of its own: the few
        refused are copies of the last frames taught)."""
        with self.lock:
            for showing in self._showings():
                if labels is None or showing.label in labels:
                    self.unlearned.update(dict.fromkeys(showing.taught))
            while len(self.unlearned) > self.max_pasted:
                self.unlearned.popitem(last=False)

    def _take_pasted(self, stamp: tuple[int, int]) -> list[np.ndarray]:
        """The copies waiting for the frame of ``stamp``, taken out (under the lock)."""
        copies = self.pasted.pop(stamp, [])
        self.waiting -= len(copies)
        return copies

    def _showings(self) -> list[Showing]:
        """The current showing and the ended ones kept (under the lock)."""
        return [s for s in (self.tracker.current, *self.tracker.ended) if s is not None]

    def taught(self, header: Any) -> bool:
        """Whether the frame of ``header`` was learned already (its showing was answered or labeled
        before its labeled copy came): it is not learned twice."""
        stamp = _stamp(header)
        with self.lock:
            return stamp != (0, 0) and any(stamp in s.taught for s in self._showings())

    def _learn_if_sure(self, showing: Showing, now: float) -> None:
        """``showing`` ended (``now``) as the next one started: learned under its own answer if nobody
        labelled it, the robot did not ask about it, its last frame came within ``answer_window_s``,
        and its answer over its kept frames is sure now (``learn_confident_showings``). A showing that
        deactivate ended (:meth:`pause`) is never judged: no showing started after it. Its frames are
        learned into the model that answered (none if another serves by then)."""
        with self.lock:
            late = now - showing.last > self.tracker.answer_window_s
            if showing.label or showing.asked or not showing.frames or late:
                return
            frames = showing.features()
        with self.node.model_lock:
            model = self.node.model
            if model is None:
                return
            try:
                answer, guesses = judge_showing(
                    model, frames, 2, 0.0, self.novelty_threshold, self.rule, self.score
                )
            except ValueError as error:  # frames the model cannot take (another dimension): not learned
                self.node.reject("bad features", f"showing {showing.id}: {error}")
                return
        with self.lock:
            if self.policy.doubt(answer.label, guesses, answer.novelty) or showing.label:
                return
            showing.label = answer.label  # an answer for it now is refused: it is taught
        with self.node.model_lock:
            current = self.node.model is model
        learned = self._teach(showing, answer.label, observed=False) if current else 0
        if not learned:  # nothing of it learned: it may be answered
            with self.lock:
                if showing.label == answer.label:
                    showing.label = ""
            return
        self.self_taught += 1
        self.node.get_logger().info(
            f"showing {showing.id} learned as {answer.label!r} under its own answer ({learned} frames, "
            f"confidence {answer.confidence:.2f})"
        )

    def _teach(
        self, showing: Showing, label: str, like: np.ndarray | None = None, observed: bool = True
    ) -> int:
        """Learn ``showing``'s kept frames not learned yet with ``label`` (with ``like``: those like it,
        :meth:`Showing.untaught`); returns how many were. ``observed`` False: the robot's own answer,
        learned unscored (:meth:`ObjectRecognitionNode.learn`)."""
        with self.lock:
            frames = showing.untaught(like, self.tracker.change)
            showing.taught.update(stamp for stamp, _ in frames)
            copies = [self._take_pasted(stamp) for stamp, _ in frames]
        learned = 0
        source = f"showing {showing.id}" + ("" if observed else ", taught by its own answer")
        for (stamp, x), pasted in zip(frames, copies, strict=True):
            if self.node.learn(x, label, observed=observed, stamp=stamp, source=source):
                learned += 1
                for copy in pasted:
                    self.node.learn(
                        copy, label, observed=False, stamp=stamp, source=f"{source}, {PASTED_COPY}"
                    )
            else:  # refused: not taught, and its copies, waiting or to come, are not learned for it
                with self.lock:
                    showing.taught.discard(stamp)
        return learned

    # ---------------------------------------------------------------- answers
    def answer(self, showing_id: int, label: str, source: str) -> tuple[bool, str, int]:
        """Teach the kept frames of ``showing_id`` with ``label``; (success, message, frames learned)."""
        label = label.strip()
        problem = label_problem(label, self.node.gate.max_label_length)
        with self.lock:  # found, checked and labelled at once: two answers never both teach it
            showing, why = self.tracker.find(int(showing_id), time.monotonic())
            if showing is not None and showing.label:
                showing, why = None, f"showing {showing_id} was taught as {showing.label!r} already"
            problem = why or problem
            if not problem:
                showing.label = label
        if problem:
            self.node.reject("answer refused", f"{source}: {problem}")
            return False, f"refused: {problem}", 0
        learned = self._teach(showing, label)
        self.answers_taken += 1
        return True, f"showing {showing.id}: {learned} frames learned as {label!r}", learned

    def on_answer(self, request: AnswerQuery.Request, response: AnswerQuery.Response) -> AnswerQuery.Response:
        response.success, response.message, response.frames_learned = self.answer(
            request.showing_id, request.label, "~/answer"
        )
        return response

    def on_teacher_label(self, msg: String) -> None:
        """The teacher speaks: an answer to the last question while it is open (else nothing here: the
        feature_extractor labels the frames that follow)."""
        asked = self.asked
        if asked is None or not msg.data.strip():
            return
        with self.lock:  # only while the object asked about is still in view: else it names the next one
            showing = self.tracker.current
            open_question = showing is not None and showing.id == asked and not showing.label
        if open_question:
            self.answer(asked, msg.data, "teacher_label")

    def diagnostic_values(self) -> dict[str, str]:
        with self.lock:
            current = self.tracker.current
            return {
                "showings": str(self.tracker.started_count),
                "current showing": "none"
                if current is None
                else f"{current.id} ({len(current.frames)} frames)",
                "questions asked": str(self.policy.asked_count),
                "answers taken": str(self.answers_taken),
                "showings learned under their own answer": str(self.self_taught),
            }
