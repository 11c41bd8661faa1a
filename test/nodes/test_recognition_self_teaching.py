"""object_recognition's ``learn_confident_showings`` over a real DDS graph, with a node of its own
(test_recognition_showings.py's module node must not answer beside it): a sure showing that ends
unlabelled is learned under its own answer, one the robot asked about is not."""

from __future__ import annotations

import pytest
from conftest import DiagnosticsReader, spin_until
from test_recognition_showings import asked, show, taught_node

pytestmark = pytest.mark.graph


def test_with_learn_confident_showings_a_sure_showing_is_learned_under_its_own_answer(
    built_interfaces, tmp_path
):
    """A showing of a taught object that ends unlabelled is learned under its answer (published on
    learned_features, counted); one of a never-taught object, asked about, is not."""
    with taught_node(tmp_path, "learn_confident_showings:=true") as started:
        executor, peer, _, proc = started
        diagnostics = DiagnosticsReader(peer.node)
        duck = show(started, 1, lambda a: len(a) >= 6 and a[-1].label == "duck")
        assert duck and not asked(peer, duck), proc.log()
        unknown = show(started, 3, lambda a: asked(peer, a))  # ends the duck's showing: a change
        assert unknown and unknown[-1].label == "", proc.log()
        self_taught = lambda: [m for m in peer.learned if m.label == "duck"]  # noqa: E731
        assert spin_until(executor, lambda: len(self_taught()) >= 6, 20), proc.log()
        stamps = {m.header.stamp.sec for m in self_taught()}
        assert stamps <= set(range(peer.frame + 1)) and len(stamps) == len(self_taught())
        show(started, 2, lambda a: len(a) >= 3)  # ends the unknown showing, asked about: not learned
        statuses = diagnostics.statuses("object_recognition")
        seen = len(statuses)
        assert spin_until(executor, lambda: len(statuses) >= seen + 2, 20)  # published after it ended
        counted = diagnostics.count("object_recognition", "showings learned under their own answer")
        assert counted == 1, diagnostics.values("object_recognition")
        assert {m.label for m in peer.learned} == {"duck"}
