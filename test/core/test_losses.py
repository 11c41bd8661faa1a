"""Sequence-number gaps per stream and publisher."""

from lifelong_learning.core.losses import UNSUPPORTED, SequenceLossCounter


def test_gaps_per_publisher_and_stream():
    c = SequenceLossCounter()
    assert [c.record("a", "p", s) for s in (1, 2, 5, 6)] == [0, 0, 2, 0]
    assert c.record("a", "q", 10) == 0  # another publisher: its own count
    assert c.record("a", "q", 13) == 2
    assert c.record("b", "p", 3) == 0  # another stream
    assert c.snapshot() == {"a": 4}
    assert c.received == {"a": 6, "b": 1}


def test_restarts_and_unsupported_numbers_count_nothing():
    c = SequenceLossCounter()
    c.record("a", "p", 100)
    assert c.record("a", "p", 1) == 0  # the publisher restarted
    assert c.record("a", "p", 3) == 1
    for s in (0, None, UNSUPPORTED, UNSUPPORTED + 5):
        assert c.record("a", "p", s) == 0
    assert c.snapshot() == {"a": 1}
