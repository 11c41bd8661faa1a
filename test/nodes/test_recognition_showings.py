"""object_recognition over a real DDS graph: one answer per showing, "I don't know" and a question
for a new object, and the answer that teaches the showing's frames.

One node process serves the module (taught three classes of small synthetic feature vectors; the
CNN is not what is tested here); each test shows one object. ``learn_confident_showings``: in
test_recognition_self_teaching.py, with a node of its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import (
    DiagnosticsReader,
    first_call,
    new_context,
    new_executor,
    node_argv,
    spin_until,
    stop_after_nodes,
)

from lifelong_learning.nodes.supervisor import NodeProcess

pytestmark = pytest.mark.graph

DIM = 24
CLASSES = ("mug", "duck", "teddy")  # directions 0, 1, 2; directions 3, 4 and 5 are never taught


def sample(rng: np.random.Generator, direction: int, n: int = 1) -> np.ndarray:
    """``n`` frames of object ``direction`` (0-5: its four dimensions; 6: all of them)."""
    centre = np.zeros(DIM)
    centre[4 * direction : 4 * direction + 4] = 3.0
    if direction == 6:
        centre[:] = 1.5
    return (centre + rng.normal(scale=0.3, size=(n, DIM))).astype(np.float32)


class Peer:
    """The test's node: publishes features and labeled features, reads answers and questions."""

    def __init__(self, context: Any) -> None:
        from lifelong_learning.msg import Features, LabeledFeatures, Query, ShowingAnswer
        from lifelong_learning.srv import AnswerQuery, GetClassifierInfo, Predict
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, qos_profile_sensor_data
        from std_msgs.msg import String

        self.node = Node("showings_test_peer", context=context)
        self.features = self.node.create_publisher(Features, "features", qos_profile_sensor_data)
        self.labeled = self.node.create_publisher(LabeledFeatures, "labeled_features", QoSProfile(depth=200))
        self.teacher = self.node.create_publisher(String, "teacher_label", 10)
        self.pasted = self.node.create_publisher(Features, "pasted_features", QoSProfile(depth=200))
        self.showings: list[Any] = []
        self.queries: list[Any] = []
        self.learned: list[Any] = []  # what the node learned that no labeled_features message carried
        self.node.create_subscription(
            LabeledFeatures, "learned_features", self.learned.append, QoSProfile(depth=500)
        )
        self.node.create_subscription(ShowingAnswer, "showing", self.showings.append, 50)
        self.node.create_subscription(Query, "/object_recognition/query", self.queries.append, 10)
        self.answer = self.node.create_client(AnswerQuery, "/object_recognition/answer")
        self.info = self.node.create_client(GetClassifierInfo, "/object_recognition/info")
        self.predict = self.node.create_client(Predict, "/object_recognition/predict")
        self.frame = 0


@pytest.fixture(scope="module")
def graph(built_interfaces: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Peer]]:
    """The node, taught 30 samples of each class, and the peer."""
    with taught_node(tmp_path_factory.mktemp("showings")) as started:
        yield started


@contextmanager
def taught_node(folder: Path, *more: str) -> Iterator[tuple[Any, Peer, Any, NodeProcess]]:
    """The node (with the parameters ``more`` too), taught 30 samples of each class; the executor,
    the peer, the random generator of the frames, the node's process."""
    from lifelong_learning.msg import LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo

    params = (f"checkpoint_path:={folder / 'model.llm'}", f"model_directory:={folder}", "showing_gap_s:=5.0")
    params += more
    # three classes known: their calibration leaves a clear answer a novelty of about 0.3
    # (docs/recognition.md), the default question_novelty: asked above 0.45 here, unknown above 0.5
    params += (
        "novelty_threshold:=0.5",
        "question_novelty:=0.45",
        "ask_after_s:=0.0",
        "question_interval_s:=0.0",
    )
    argv = node_argv("object_recognition", *(a for p in params for a in ("-p", p)))
    rng = np.random.default_rng(0)
    with new_context() as context, new_executor(context) as executor:
        peer = Peer(context)
        executor.add_node(peer.node)
        proc = NodeProcess(argv, log_path=folder / "object_recognition.log")
        try:
            first_call(executor, peer.info, GetClassifierInfo.Request())
            assert spin_until(executor, lambda: peer.labeled.get_subscription_count() > 0, 20)
            for direction, label in enumerate(CLASSES):
                for x in sample(rng, direction, 30):
                    peer.labeled.publish(LabeledFeatures(data=x.tolist(), label=label))
            taught = lambda: first_call(executor, peer.info, GetClassifierInfo.Request()).samples_seen == 90  # noqa: E731
            assert spin_until(executor, taught, 20), proc.log()
            yield executor, peer, rng, proc
        finally:
            stop_after_nodes(executor, proc)


def asked(peer: Peer, answers: list[Any]) -> bool:
    """Whether the robot asked about the showing of the last answer."""
    return bool(answers) and any(q.showing_id == answers[-1].showing_id for q in peer.queries)


def show(graph: Any, direction: int, until: Any, timeout: float = 10.0) -> list[Any]:
    """Publish frames of one object (a new stamp each, 20 per second) until ``until(answers)`` holds
    for the showing answers received since; returns them."""
    from lifelong_learning.msg import Features

    executor, peer, rng, _ = graph
    start = len(peer.showings)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not until(peer.showings[start:]):
        peer.frame += 1
        msg = Features(data=sample(rng, direction)[0].tolist())
        msg.header.stamp.sec, msg.header.frame_id = peer.frame, f"frame{peer.frame}"
        peer.features.publish(msg)
        spin_until(executor, lambda: False, 0.05)
    return peer.showings[start:]


def test_a_showing_of_a_taught_object_gets_one_answer_naming_it(graph):
    answers = show(graph, 1, lambda a: len(a) >= 8 and a[-1].frames >= 8)
    assert len(answers) >= 8, graph[3].log()
    assert len({a.showing_id for a in answers}) == 1  # one showing, its answer updated frame by frame
    assert all(a.label == "duck" and a.top_label == "duck" for a in answers)
    assert answers[-1].frames >= 8 and 0.5 < answers[-1].confidence <= 1.0
    assert not any(q.showing_id == answers[0].showing_id for q in graph[1].queries)  # known: no question


def test_a_new_object_gets_unknown_and_a_question_and_the_answer_teaches_it(graph):
    from lifelong_learning.srv import AnswerQuery, Predict

    executor, peer, rng, proc = graph
    answers = show(
        graph, 3, lambda a: len(a) >= 5 and any(q.showing_id == a[-1].showing_id for q in peer.queries)
    )
    assert answers and all(a.label == "" for a in answers), proc.log()
    showing = answers[-1].showing_id
    questions = [q for q in peer.queries if q.showing_id == showing]
    assert len(questions) == 1 and questions[0].reason == "unknown" and questions[0].frames >= 1
    assert list(questions[0].guesses) and set(questions[0].guesses) <= set(CLASSES)

    bad = first_call(executor, peer.answer, AnswerQuery.Request(showing_id=showing + 1000, label="ball"))
    assert not bad.success and "no showing" in bad.message
    empty = first_call(executor, peer.answer, AnswerQuery.Request(showing_id=showing, label="  "))
    assert not empty.success and empty.frames_learned == 0

    kept = answers[-1].frames
    res = first_call(executor, peer.answer, AnswerQuery.Request(showing_id=showing, label="ball"))
    assert res.success and res.frames_learned >= min(kept, 5), res.message
    # the frames the answer taught are published for the recorder, with their frames' stamps
    balls = lambda: [m for m in peer.learned if m.label == "ball"]  # noqa: E731
    assert spin_until(executor, lambda: len(balls()) >= res.frames_learned, 10), (len(balls()), res)
    assert len(balls()) == res.frames_learned and all(m.header.stamp.sec <= peer.frame for m in balls())
    assert len({m.header.stamp.sec for m in balls()}) == res.frames_learned
    again = first_call(executor, peer.answer, AnswerQuery.Request(showing_id=showing, label="ball"))
    assert not again.success and "already" in again.message  # taught once only

    x = sample(rng, 3)[0].tolist()
    assert first_call(executor, peer.predict, Predict.Request(data=x)).top_label == "ball"


def test_the_teacher_answers_a_question_by_voice_on_teacher_label(graph):
    from lifelong_learning.srv import Predict
    from std_msgs.msg import String

    executor, peer, rng, proc = graph
    answers = show(
        graph, 4, lambda a: bool(a) and any(q.showing_id == a[-1].showing_id for q in peer.queries)
    )
    assert answers and answers[-1].label == "", proc.log()
    assert spin_until(executor, lambda: peer.teacher.get_subscription_count() > 0, 10)
    peer.teacher.publish(String(data="cup"))
    x = sample(rng, 4)[0].tolist()
    named = lambda: first_call(executor, peer.predict, Predict.Request(data=x)).top_label == "cup"  # noqa: E731
    assert spin_until(executor, named, 10), proc.log()


def test_a_label_given_during_a_showing_teaches_its_earlier_frames_too(graph):
    from lifelong_learning.msg import LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo

    executor, peer, rng, proc = graph
    answers = show(graph, 5, lambda a: len(a) >= 6)  # six frames, nobody names the object yet
    assert len({a.showing_id for a in answers}) == 1 and answers[-1].frames >= 6
    for x in sample(rng, 5, 2):  # then the teacher names it: two labeled frames of the same showing
        peer.frame += 1
        msg = LabeledFeatures(data=x.tolist(), label="pen")
        msg.header.stamp.sec = peer.frame
        peer.labeled.publish(msg)

    def pen_count() -> int:
        info = first_call(executor, peer.info, GetClassifierInfo.Request())
        return dict(zip(info.classes, info.counts, strict=True)).get("pen", 0)

    kept = answers[-1].frames
    assert spin_until(executor, lambda: pen_count() >= kept + 2, 10), (pen_count(), kept, proc.log())
    assert pen_count() == kept + 2  # each frame learned once
    # the earlier frames are published for the recorder; the two labelled ones are on labeled_features
    pens = lambda: [m.header.stamp.sec for m in peer.learned if m.label == "pen"]  # noqa: E731
    assert spin_until(executor, lambda: len(pens()) >= kept, 10), (pens(), kept)
    assert len(pens()) == kept and max(pens()) <= peer.frame - 2


def test_pasted_copies_are_learned_with_their_frame_once_it_is_taught(graph):
    from lifelong_learning.msg import Features, LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo

    executor, peer, rng, proc = graph
    start = peer.frame + 1
    answers = show(graph, 6, lambda a: len(a) >= 4)  # frames of a new object, nobody names it yet
    shown = list(range(start, peer.frame + 1))
    assert len({a.showing_id for a in answers}) == 1
    assert spin_until(executor, lambda: peer.showings[-1].frames == len(shown), 10)
    assert spin_until(executor, lambda: peer.pasted.get_subscription_count() > 0, 10)

    def copy(stamp: int) -> None:
        msg = Features(data=(sample(rng, 6)[0] * 0.9).tolist())
        msg.header.stamp.sec = stamp
        peer.pasted.publish(msg)

    half = len(shown) // 2
    for stamp in [*shown[:half], 0, 10**6]:  # before their frames are taught; no stamp; no such frame
        copy(stamp)
    peer.frame += 1
    label = LabeledFeatures(data=sample(rng, 6)[0].tolist(), label="box")  # the teacher names it
    label.header.stamp.sec = peer.frame
    peer.labeled.publish(label)
    for stamp in [*shown[half:], peer.frame]:  # after: learned at once
        copy(stamp)

    def box_count() -> int:
        info = first_call(executor, peer.info, GetClassifierInfo.Request())
        return dict(zip(info.classes, info.counts, strict=True)).get("box", 0)

    taught = len(shown) + 1  # the showing's frames and the labelled one, each with its copy
    assert spin_until(executor, lambda: box_count() >= 2 * taught, 10), (box_count(), taught, proc.log())
    assert box_count() == 2 * taught  # each once; the copies without a taught frame not at all
    # published for the recorder: all but the labelled frame (on labeled_features), each stamped
    # with its frame's stamp (a frame and its copy share it)
    boxes = lambda: [m.header.stamp.sec for m in peer.learned if m.label == "box"]  # noqa: E731
    assert spin_until(executor, lambda: len(boxes()) >= 2 * taught - 1, 10), (boxes(), taught)
    assert sorted(boxes()) == sorted([*shown, *shown, peer.frame])
    for _ in range(9):  # a flood of copies under one taught frame's stamp: 8 copies a frame at most
        copy(shown[0])
    assert spin_until(executor, lambda: box_count() >= 2 * taught + 7, 10), (box_count(), proc.log())
    assert spin_until(executor, lambda: "pasted copy refused" in proc.log(), 10)
    assert box_count() == 2 * taught + 7
    for bad in (np.full(DIM, np.nan), np.ones(DIM + 3), np.full(DIM, 1e6)):  # copies of a taught frame
        msg = Features(data=bad.tolist())
        msg.header.stamp.sec = shown[1]
        peer.pasted.publish(msg)
    for reason in ("features not finite", "wrong feature dimension", "feature norm too large"):
        assert spin_until(executor, lambda r=reason: r in proc.log(), 10), (reason, proc.log())
    assert box_count() == 2 * taught + 7  # refused, counted, nothing learned

    # Forgotten, the class does not come back with the copies of its frames still to come.
    from lifelong_learning.srv import ForgetClass

    diag = DiagnosticsReader(peer.node)
    name = "object_recognition"
    assert spin_until(executor, lambda: diag.rejected(name, "features not finite") == 1, 10), diag.values(
        name
    )
    before = diag.rejected(name, "pasted copy refused")  # the flood's
    forget = peer.node.create_client(ForgetClass, "/object_recognition/forget_class")
    assert first_call(executor, forget, ForgetClass.Request(label="box")).success
    for stamp in shown[1:4]:
        copy(stamp)
    refused = lambda: diag.rejected(name, "pasted copy refused") == before + 3  # noqa: E731
    assert spin_until(executor, refused, 10), diag.values(name)
    classes = first_call(executor, peer.info, GetClassifierInfo.Request()).classes
    assert "box" not in classes, (classes, proc.log())


def test_a_copy_never_brings_back_a_class_forgotten_or_renamed_since_its_frame_was_taught(rclpy_context):
    """The node's side, in process: a copy of a class forgotten (or renamed away) since is refused
    and counted under the model lock; a copy of a class not taught yet is not (its frame may be on
    its way); after a rename the showings' copies are learned under the new name."""
    from lifelong_learning.srv import ForgetClass, RenameClass
    from rclpy.parameter import Parameter
    from std_msgs.msg import Header

    from lifelong_learning.nodes.object_recognition import ObjectRecognitionNode

    rng = np.random.default_rng(3)
    node = ObjectRecognitionNode(
        context=rclpy_context, parameter_overrides=[Parameter("diagnostics_period_s", value=0.0)]
    )

    def count(label: str) -> int:
        m = node.model
        return int(m.seen_counts_[m.classes_.tolist().index(label)]) if m.has_class(label) else 0

    try:
        for label, direction in (("mug", 0), ("duck", 1), ("box", 2)):
            for x in sample(rng, direction, 6):
                assert node.learn(x, label)
        assert node.learn(sample(rng, 3)[0], "crate", observed=False)  # before its frame: a class
        forgot = node._on_forget_class(ForgetClass.Request(label="box"), ForgetClass.Response())
        assert forgot.success and not node.model.has_class("box"), forgot.message
        assert not node.learn(sample(rng, 2)[0], "box", observed=False)
        assert not node.model.has_class("box") and node.rejections.snapshot()["pasted copy refused"] == 1

        header = Header()
        header.stamp.sec = 7
        node.desk.on_labeled(header, sample(rng, 0)[0], "mug")  # a frame taught in a showing
        renamed = node._on_rename_class(
            RenameClass.Request(label="mug", new_label="cup"), RenameClass.Response()
        )
        assert renamed.success, renamed.message
        cups = count("cup")
        node.desk.on_pasted(header, sample(rng, 0)[0])  # its copy, after the rename
        assert count("cup") == cups + 1 and not node.model.has_class("mug")
        assert not node.learn(sample(rng, 0)[0], "mug", observed=False)  # the old name: refused
        assert node.rejections.snapshot()["pasted copy refused"] == 2
        assert node.learn(sample(rng, 2)[0], "box")  # the teacher teaches it again: a class again
        assert node.learn(sample(rng, 2)[0], "box", observed=False)  # and its copies with it
    finally:
        node.destroy_node()


def test_a_copy_of_a_frame_unlearned_by_undo_or_reset_is_refused(rclpy_context):
    """In process: after a partial ``~/undo_teaching`` (the class stays) the copies still to come of
    the frame it unlearned are refused by the frame's stamp and counted; after ``~/reset`` those of
    every class known before it, and of every frame taught before it even once its class is taught
    again; a frame taught again takes its copies with it."""
    from lifelong_learning.srv import UndoTeaching
    from rclpy.parameter import Parameter
    from std_msgs.msg import Header
    from std_srvs.srv import Trigger

    from lifelong_learning.nodes.object_recognition import MAX_GONE_CLASSES, ObjectRecognitionNode

    rng = np.random.default_rng(4)
    node = ObjectRecognitionNode(
        context=rclpy_context, parameter_overrides=[Parameter("diagnostics_period_s", value=0.0)]
    )

    def header(sec: int) -> Header:
        h = Header()
        h.stamp.sec = sec
        return h

    def refused() -> int:
        return node.rejections.snapshot().get("pasted copy refused", 0)

    def teach(sec: int, x: np.ndarray, label: str) -> None:  # as a labeled frame is: learned, then shown
        assert node.learn(x, label)
        node.desk.on_labeled(header(sec), x, label)

    try:
        for label, direction in (("mug", 0), ("duck", 1)):
            for x in sample(rng, direction, 6):
                assert node.learn(x, label)
        teach(5, sample(rng, 2)[0], "box")  # two frames of one showing taught
        teach(6, sample(rng, 2)[0], "box")
        n = node.model.n_samples
        undone = node._on_undo_teaching(UndoTeaching.Request(last_n=1), UndoTeaching.Response())
        assert undone.success and undone.labels == ["box"] and node.model.n_samples == n - 1, undone.message
        assert node.model.has_class("box")  # a partial undo: the class stays, its frame at 6 is gone
        node.desk.on_pasted(header(6), sample(rng, 2)[0])  # the undone frame's copy: refused by its stamp
        assert refused() == 1 and node.model.n_samples == n - 1
        teach(6, sample(rng, 2)[0], "box")  # the teacher teaches it again: its copy with it
        node.desk.on_pasted(header(6), sample(rng, 2)[0])
        assert node.model.n_samples == n + 1 and refused() == 1

        teach(9, sample(rng, 0)[0], "mug")
        reset = node._on_reset(Trigger.Request(), Trigger.Response())
        assert reset.success and node.model.n_samples == 0, reset.message
        assert not node.learn(sample(rng, 1)[0], "duck", observed=False)  # a class known before it
        assert refused() == 2 and len(node.model.classes_) == 0
        teach(11, sample(rng, 0)[0], "mug")  # taught after the reset: a class again
        node.desk.on_pasted(header(9), sample(rng, 0)[0])  # a copy of a mug frame taught before it
        assert refused() == 3 and node.model.n_samples == 1
        node.desk.on_pasted(header(11), sample(rng, 0)[0])  # a copy of the new one: learned
        assert node.model.n_samples == 2 and refused() == 3
        node._gone(f"old{k}" for k in range(MAX_GONE_CLASSES + 5))  # many edits: the latest kept
        assert len(node.gone_classes) == MAX_GONE_CLASSES and "old4" not in node.gone_classes
        assert "old5" in node.gone_classes and f"old{MAX_GONE_CLASSES + 4}" in node.gone_classes
    finally:
        node.destroy_node()


def test_an_edit_not_kept_refuses_no_copies(rclpy_context):
    """In process: a forget, undo or rename whose replaced model cannot be kept for ``~/rollback``
    (the disk full) is refused and changes nothing, and the copies still to come of what it would
    have removed are learned as before."""
    from lifelong_learning.srv import ForgetClass, RenameClass, UndoTeaching
    from rclpy.parameter import Parameter
    from std_msgs.msg import Header

    from lifelong_learning.nodes.object_recognition import ObjectRecognitionNode

    rng = np.random.default_rng(5)
    node = ObjectRecognitionNode(
        context=rclpy_context, parameter_overrides=[Parameter("diagnostics_period_s", value=0.0)]
    )
    header = Header()
    header.stamp.sec = 5

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    try:
        for label, direction in (("mug", 0), ("duck", 1)):
            for x in sample(rng, direction, 6):
                assert node.learn(x, label)
        node.desk.on_labeled(header, sample(rng, 0)[0], "mug")  # a frame of a showing, taught
        assert node.learn(sample(rng, 0)[0], "mug")
        node.serving.history.push = full
        n = node.model.n_samples
        edits = (
            node._on_forget_class(ForgetClass.Request(label="mug"), ForgetClass.Response()),
            node._on_undo_teaching(UndoTeaching.Request(last_n=1), UndoTeaching.Response()),
            node._on_rename_class(RenameClass.Request(label="mug", new_label="cup"), RenameClass.Response()),
        )
        for answer in edits:
            assert not answer.success and "No space left" in answer.message, answer.message
        assert node.rejections.snapshot()["unlearning refused"] == 3
        assert edits[1].samples == 0 and list(edits[1].labels) == []
        assert node.model.n_samples == n and not node.gone_classes and not node.desk.unlearned
        node.desk.on_pasted(header, sample(rng, 0)[0])  # the taught frame's copy: learned
        assert node.learn(sample(rng, 0)[0], "mug", observed=False)  # a copy of the class: learned
        assert node.model.n_samples == n + 2 and "pasted copy refused" not in node.rejections.snapshot()
    finally:
        node.destroy_node()
