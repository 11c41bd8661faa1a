"""object_recognition's showings across lifecycle transitions, over a real DDS graph, with a node of
its own (test_recognition_showings.py's module node must not answer beside it): deactivate ends the
showing in view, which can still be answered (services answer while inactive); cleanup forgets the
showings, so an answer naming one of them is refused after the node is configured again."""

from __future__ import annotations

import pytest
from conftest import first_call, spin_until
from test_lifecycle_cycles import Managed
from test_recognition_showings import asked, sample, show, taught_node

pytestmark = pytest.mark.graph


def test_deactivate_ends_the_showing_and_cleanup_forgets_the_showings(built_interfaces, tmp_path):
    from lifelong_learning.srv import AnswerQuery, Predict

    with taught_node(tmp_path) as started:
        executor, peer, rng, proc = started
        node = Managed(executor, proc, "object_recognition", namespace="")
        before = show(started, 3, lambda a: asked(peer, a))  # a never-taught object: asked about
        assert before and before[-1].label == "", proc.log()
        node.transition("deactivate", "inactive")
        node.transition("activate", "active")
        # the same object again, well within showing_gap_s (5 s): another showing all the same
        after = show(started, 3, lambda a: asked(peer, a))
        assert after and {a.showing_id for a in after} == {before[-1].showing_id + 1}, proc.log()

        node.transition("deactivate", "inactive")
        answer = AnswerQuery.Request(showing_id=after[-1].showing_id, label="ball")
        taught = first_call(executor, peer.answer, answer)  # inactive: the service still answers
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
