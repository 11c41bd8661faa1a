"""object_recognition's showings across lifecycle transitions, over a real DDS graph, with a node of
its own (test_recognition_showings.py's module node must not answer beside it): deactivate ends the
showing in view, which can still be answered (services answer while inactive); cleanup forgets the
showings, so an answer naming one of them is refused after the node is configured again."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from conftest import call_service, first_call, spin_until
from test_lifecycle_cycles import Managed
from test_recognition_showings import asked, sample, show, taught_node

pytestmark = pytest.mark.graph


def test_deactivate_ends_the_showing_and_cleanup_forgets_the_showings(built_interfaces, tmp_path):
    from lifelong_learning.srv import AnswerQuery, Predict

    # showings end by the gap rule only after 120 s: a new showing after activate is deactivate's doing
    with taught_node(tmp_path, "showing_gap_s:=120.0") as started:
        executor, peer, rng, proc = started
        node = Managed(executor, proc, "object_recognition", namespace="")
        before = show(started, 3, lambda a: asked(peer, a))  # a never-taught object: asked about
        assert before and before[-1].label == "", proc.log()
        node.transition("deactivate", "inactive")
        node.transition("activate", "active")
        # the same object again, well within showing_gap_s (120 s here): another showing all the same
        after = show(started, 3, lambda a: len(a) >= 5 and asked(peer, a))
        assert after and {a.showing_id for a in after} == {before[-1].showing_id + 1}, proc.log()

        node.transition("deactivate", "inactive")
        nowhere = AnswerQuery.Request(showing_id=after[-1].showing_id + 1000, label="ball")
        assert not first_call(executor, peer.answer, nowhere).success  # a refusal, safe to repeat
        answer = AnswerQuery.Request(showing_id=after[-1].showing_id, label="ball")
        taught = call_service(executor, peer.answer, answer)  # inactive: the service still answers
        assert taught.success and taught.frames_learned >= after[-1].frames, taught.message

        node.transition("cleanup", "unconfigured")
        node.transition("configure", "inactive")
        node.transition("activate", "active")
        assert spin_until(executor, peer.answer.service_is_ready, 20), proc.log()
        forgotten = AnswerQuery.Request(showing_id=before[-1].showing_id, label="ball")
        refused = first_call(executor, peer.answer, forgotten)
        assert not refused.success and "no longer kept" in refused.message, refused.message
        assert refused.frames_learned == 0
        # what the answer taught while inactive was kept by cleanup's checkpoint
        x = sample(rng, 3)[0].tolist()
        assert first_call(executor, peer.predict, Predict.Request(data=x)).top_label == "ball"


def test_after_cleanup_nothing_is_learned_and_the_waiting_copies_are_gone(rclpy_context, tmp_path):
    """In process: a sample learned once cleanup released the model (an answer still being taught)
    is refused and counted, not an error; copies waiting for their frame are forgotten by cleanup,
    and the showings with them."""
    from rclpy.parameter import Parameter
    from std_msgs.msg import Header

    from lifelong_learning.nodes.object_recognition import ObjectRecognitionNode

    rng = np.random.default_rng(5)
    node = ObjectRecognitionNode(
        context=rclpy_context,
        parameter_overrides=[
            Parameter("diagnostics_period_s", value=0.0),
            Parameter("checkpoint_path", value=str(tmp_path / "model.llm")),
            Parameter("model_directory", value=str(tmp_path)),
        ],
    )
    try:
        for label, direction in (("mug", 0), ("duck", 1)):
            for x in sample(rng, direction, 6):
                assert node.learn(x, label)
        header = Header()
        header.stamp.sec = 9
        node.desk.on_frame(header, sample(rng, 2)[0])
        node.desk.on_pasted(header, sample(rng, 2)[0])  # its frame not taught: the copy waits
        shown = node.desk.tracker.current
        assert node.desk.waiting == 1 and shown is not None
        node.trigger_deactivate()
        assert node.desk.tracker.current is None and len(node.desk.tracker.ended) == 1
        node.trigger_cleanup()
        assert node.model is None and node.desk.waiting == 0 and not node.desk.pasted
        assert not node.desk.tracker.ended
        warnings: list[str] = []
        node.rejections._logger = SimpleNamespace(warning=warnings.append)
        # a showing taught by its own answer after cleanup released the model: refused, and the
        # warning says which showing's frame it was
        assert node.desk._teach(shown, "box", observed=False) == 0
        assert len(warnings) == 1 and f"showing {shown.id}, taught by its own answer: no model" in warnings[0]
        assert not node.learn(sample(rng, 2)[0], "box", observed=False)
        assert node.rejections.snapshot()["no model"] == 2
        node.trigger_configure()
        assert node.learn(sample(rng, 2)[0], "box")  # configured again: it learns
    finally:
        node.destroy_node()
