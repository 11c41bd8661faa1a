"""What object_recognition learns beyond the teacher's labelled frames reaches the bag: a real node
and a real bag_recorder over DDS, a question answered, pasted copies, then a retraining from the
recorded bag learns the answered class (and one from labeled_features alone does not)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from conftest import DiagnosticsReader, first_call, new_context, new_executor, node_argv, spin_until

pytestmark = pytest.mark.graph

DIM = 16
CLASSES = ("mug", "duck", "teddy")  # directions 0, 1, 2; direction 3 is the object never labelled


def views(rng: np.random.Generator, direction: int, n: int = 1) -> np.ndarray:
    centre = np.zeros(DIM)
    centre[4 * direction : 4 * direction + 4] = 3.0
    return (centre + rng.normal(scale=0.3, size=(n, DIM))).astype(np.float32)


def test_a_retraining_from_the_recorded_bag_learns_what_a_question_taught(tmp_path, start_process, make_job):
    from lifelong_learning.msg import Features, LabeledFeatures, Query
    from lifelong_learning.srv import AnswerQuery, GetClassifierInfo
    from rclpy.qos import QoSProfile, qos_profile_sensor_data

    from lifelong_learning.io.labeled_features import read_labeled_features
    from lifelong_learning.learners import IncrementalRLSC
    from lifelong_learning.retraining.pipeline import run_job

    recorder = start_process(
        node_argv(
            "bag_recorder",
            "-p",
            f"output:={tmp_path / 'bag'}",
            "-p",
            "topics:=[labeled_features, learned_features]",
        )
    )
    params = [
        f"checkpoint_path:={tmp_path / 'model.llm'}",
        f"model_directory:={tmp_path}",
        "novelty_threshold:=0.5",  # three classes known: asked above 0.45, unknown above 0.5
        "question_novelty:=0.45",
        "ask_after_s:=0.0",
        "question_interval_s:=0.0",
        "showing_gap_s:=5.0",
    ]
    node = start_process(node_argv("object_recognition", *(a for p in params for a in ("-p", p))))
    rng = np.random.default_rng(0)
    with new_context() as context, new_executor(context) as executor:
        from rclpy.node import Node

        peer = Node("recorded_test_peer", context=context)
        executor.add_node(peer)
        features = peer.create_publisher(Features, "features", qos_profile_sensor_data)
        labeled = peer.create_publisher(LabeledFeatures, "labeled_features", QoSProfile(depth=200))
        pasted = peer.create_publisher(Features, "pasted_features", QoSProfile(depth=200))
        queries: list[Any] = []
        peer.create_subscription(Query, "/object_recognition/query", queries.append, 10)
        answer = peer.create_client(AnswerQuery, "/object_recognition/answer")
        info = peer.create_client(GetClassifierInfo, "/object_recognition/info")
        diag = DiagnosticsReader(peer)
        first_call(executor, info, GetClassifierInfo.Request())
        learned_seen: list[Any] = []  # the node's learned_features, as the recorder gets them
        learned_sub = peer.create_subscription(
            LabeledFeatures, "learned_features", learned_seen.append, QoSProfile(depth=500)
        )
        waiting = lambda: diag.values("bag_recorder").get("topics waiting")  # noqa: E731
        assert spin_until(executor, lambda: waiting() == "none", 30), (waiting(), recorder.log())

        def matched() -> bool:  # labeled_features: the node and the recorder; the rest: the node
            return (
                labeled.get_subscription_count() == 2
                and features.get_subscription_count() == 1
                and pasted.get_subscription_count() == 1
                and learned_sub.get_publisher_count() == 1
            )

        assert spin_until(executor, matched, 30)
        for direction, label in enumerate(CLASSES):
            for x in views(rng, direction, 20):
                labeled.publish(LabeledFeatures(data=x.tolist(), label=label))
        seen = lambda: first_call(executor, info, GetClassifierInfo.Request()).samples_seen  # noqa: E731
        assert spin_until(executor, lambda: seen() == 60, 20), node.log()

        # A new object is shown: frames without a label, until the robot asks about them (five at least).
        frame = 0
        deadline = time.monotonic() + 20
        while (not queries or frame < 5) and time.monotonic() < deadline:
            frame += 1
            msg = Features(data=views(rng, 3)[0].tolist())
            msg.header.stamp.sec = frame
            features.publish(msg)
            spin_until(executor, lambda: False, 0.05)
        assert queries, node.log()
        question = AnswerQuery.Request(showing_id=queries[-1].showing_id, label="ball")
        res = first_call(executor, answer, question)
        assert res.success and res.frames_learned >= 1, res.message  # the showing's kept frames
        assert spin_until(executor, lambda: len(learned_seen) == res.frames_learned, 10), learned_seen
        for taught in learned_seen[:2]:  # then copies of two of its frames, pasted onto another room
            copy = Features(data=(views(rng, 3)[0] * 0.9).tolist())
            copy.header.stamp = taught.header.stamp
            pasted.publish(copy)
        learned = res.frames_learned + 2  # learned at once: their frames are taught

        def balls() -> int:
            reply = first_call(executor, info, GetClassifierInfo.Request())
            return dict(zip(reply.classes, reply.counts, strict=True)).get("ball", 0)

        assert spin_until(executor, lambda: balls() == learned, 10), (balls(), res)
        recorded = lambda: diag.values("bag_recorder").get("/learned_features recorded")  # noqa: E731
        assert spin_until(executor, lambda: recorded() == str(learned), 10), diag.values("bag_recorder")
    recorder.stop()

    bag = read_labeled_features(tmp_path / "bag")
    assert bag.labels.count("ball") == learned and len(bag.labels) == 60 + learned
    common = {"task": "classification", "centers": 20, "epochs": 3}
    run_job(make_job("bag", out="all.llm", **common))
    run_job(make_job("bag", out="taught.llm", topic="/labeled_features", **common))
    everything = IncrementalRLSC.load(tmp_path / "all.llm")
    taught_only = IncrementalRLSC.load(tmp_path / "taught.llm")
    assert "ball" in everything.classes_ and "ball" not in taught_only.classes_
    test = views(rng, 3, 20)
    assert np.mean(everything.predict(test) == "ball") > 0.9
