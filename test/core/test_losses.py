"""Sequence-number gaps per stream and publisher."""

from lifelong_learning.core.losses import (
    MAX_BURST,
    MAX_PUBLICATION_HZ,
    SPURIOUS_INCREMENT,
    UNSUPPORTED,
    SequenceLossCounter,
    TransportLossCounter,
)


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


# What rclpy's message-lost event delivered (total_count, total_count_change), one reading per
# line, on a subscription of 640x480 rgb8 frames sent best effort from a process without the large
# message profile, each followed by a 1x1 frame (Fast DDS 3.2.3, rmw_fastrtps 9.3.3): 12 frames
# sent, 8 received.
FAST_DDS_READINGS = [
    (2147483647, 2147483647),
    (18446744071562067968, 1),
    (18446744073709551615, 2147483647),
    (0, 1),
    (2147483647, 2147483647),
    (18446744071562067968, 1),
    (18446744073709551615, 2147483647),
]


def test_transport_losses_count_the_real_readings_and_refuse_the_miscounts():
    c = TransportLossCounter(started=0.0)
    added = [c.reading(total, now=0.1 * (i + 1)) for i, (total, _) in enumerate(FAST_DDS_READINGS)]
    assert added == [(0, True), (1, False), (0, True), (1, False), (0, True), (1, False), (0, True)]
    assert c.counted == 3 <= 12 - 8 and c.refused == 4
    assert sum(change for _, change in FAST_DDS_READINGS) == 4 * SPURIOUS_INCREMENT + 3  # added as they came


def test_a_miscount_read_together_with_real_losses_counts_the_real_ones():
    c = TransportLossCounter(started=0.0)
    assert c.reading(2, now=1.0) == (2, False)
    # two real losses and one miscount since the last reading: the total wrapped to -2^31 + 3
    assert c.reading((1 << 64) - (1 << 31) + 3, now=1.1) == (2, True)
    assert c.reading((1 << 64) - (1 << 31) + 4, now=1.2) == (1, False)  # the next reading from there
    assert c.counted == 5 and c.refused == 1


def test_transport_losses_refuse_a_decrease_and_more_than_publishers_could_send():
    c = TransportLossCounter(started=0.0)
    assert c.reading(10, now=0.0) == (10, False)
    assert c.reading(7, now=0.5) == (0, True)  # a decrease
    assert c.reading(7, now=0.6) == (0, False)  # nothing new
    burst = MAX_BURST + int(MAX_PUBLICATION_HZ * 0.1)
    assert c.reading(7 + burst + 1, now=0.7) == (0, True)  # more than 0.1 s allow
    assert c.reading(7 + burst + 1 + burst, now=0.8) == (burst, False)  # as many as 0.1 s allow
    assert c.reading(2**31, now=1e9) == (0, True)  # never 2^30 or more at once, however long it took
    assert c.counted == 10 + burst and c.refused == 3
