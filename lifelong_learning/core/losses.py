"""Messages a publisher sent that a subscriber never processed: from publication sequence numbers
(:class:`SequenceLossCounter`), and from the middleware's own count of messages lost in transport
(:class:`TransportLossCounter`).

DDS numbers the samples of each writer (publisher) 1, 2, 3, ...; ROS 2 hands that number to a
subscription callback that takes a second argument (``MessageInfo['publication_sequence_number']``,
with the writer's ``publisher_gid``). A jump from ``s`` to ``s + k`` from one publisher means
``k − 1`` messages were lost on the way or overwritten in the subscription's queue while the node
was busy (KEEP_LAST history) — the losses a node cannot see otherwise. A number that does not
increase (a publisher that restarted with the same id, or one reordered sample) starts that
publisher's count anew; numbers an RMW does not provide (0 or ≥ 2⁶³) are ignored.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

#: sequence numbers at or above this mean "not provided" (RMW_MESSAGE_INFO_SEQUENCE_NUMBER_UNSUPPORTED)
UNSUPPORTED = 1 << 63


class SequenceLossCounter:
    """Counts sequence-number gaps per stream and publisher (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[tuple[str, Hashable], int] = {}
        self.lost: dict[str, int] = {}  # per stream, cumulative
        self.received: dict[str, int] = {}  # messages with a usable sequence number, per stream

    def record(self, stream: str, publisher: Hashable, sequence: int | None) -> int:
        """Note message ``sequence`` of ``publisher`` on ``stream``; returns how many it shows lost."""
        if sequence is None or not 0 < int(sequence) < UNSUPPORTED:
            return 0
        sequence = int(sequence)
        key = (stream, publisher)
        with self._lock:
            self.received[stream] = self.received.get(stream, 0) + 1
            last = self._last.get(key)
            self._last[key] = sequence
            gap = sequence - last - 1 if last is not None and sequence > last else 0
            if gap > 0:
                self.lost[stream] = self.lost.get(stream, 0) + gap
            return gap

    def snapshot(self) -> dict[str, int]:
        """The lost counts per stream (a copy)."""
        with self._lock:
            return dict(self.lost)


#: the middleware's count of samples lost is a DDS ``long`` (32-bit signed); rmw widens it to
#: ``size_t`` (sign-extended once negative), so only its low 32 bits are the count
COUNTER_BITS = 32
#: the increment Fast DDS 3.2 adds for a pending fragmented sample that a later one overtakes after
#: a newer sample was already delivered (the difference of the two sequence numbers taken the wrong
#: way round, saturated at the largest 32-bit signed value)
SPURIOUS_INCREMENT = (1 << 31) - 1
#: the most messages per second a publisher on a stream read by a node of this package is taken to
#: send (joint states at 1 kHz, cameras at tens of Hz: well below), ...
MAX_PUBLICATION_HZ = 10_000.0
#: ... plus this many at once (what a reading may cover however soon it follows the previous one)
MAX_BURST = 1_000


class TransportLossCounter:
    """Messages lost in transport on one subscription, from rmw's message-lost event, counted as far
    as they can be true.

    rmw documents ``rmw_message_lost_status_t`` as ``total_count`` (all lost so far) and
    ``total_count_change`` (lost since the last reading). rmw_fastrtps fills both from Fast DDS's
    ``SampleLostStatus`` (two 32-bit signed counters), accumulating the change in a 32-bit signed
    integer between readings. Fast DDS 3.2 adds :data:`SPURIOUS_INCREMENT` to both when a
    pending fragmented sample is dropped after a newer sample of the same writer was delivered (a
    best-effort writer of large samples between small ones, or fragments arriving late): the
    change then reads 2,147,483,647, and the total wraps past 2³¹ to a negative value, widened to
    about 1.8·10¹⁹: changes added as they come would count 2³¹ − 1 messages per miscount.

    So each reading's total is taken modulo 2³² (:data:`COUNTER_BITS`), and its increase ``d``
    since the previous reading, also modulo 2³², is

    - counted when ``0 < d ≤ b``, with ``b = MAX_BURST + MAX_PUBLICATION_HZ · Δt`` the messages
      the publishers could have sent in the ``Δt`` seconds since the previous reading (since the
      subscription was created, for the first), never more than 2³⁰;
    - else, when ``d`` holds one spurious increment and ``0 < d − SPURIOUS_INCREMENT ≤ b`` (real
      losses reported in the same reading as a miscount), ``d − SPURIOUS_INCREMENT`` is counted
      and the reading is refused in part;
    - else refused: nothing is counted (a decrease, or more than the publishers could have sent).

    The next reading's increase is taken from this one's total in every case, so one miscount
    never taints the readings after it. The count stays at most the messages sent (the
    readings of two coalesced miscounts can only count fewer). Readings come from one thread at
    a time (the subscription's event callback).
    """

    def __init__(self, started: float) -> None:
        """``started``: ``time.monotonic()`` when the subscription was created."""
        self._total = 0
        self._at = float(started)
        self.counted = 0  # messages counted lost so far
        self.refused = 0  # readings refused in whole or in part

    def reading(self, total_count: int, now: float) -> tuple[int, bool]:
        """Take one reading of ``total_count`` at ``now`` (``time.monotonic()``); returns the
        messages it adds to the count and whether it was refused (in whole or in part)."""
        total = int(total_count) % (1 << COUNTER_BITS)
        increase = (total - self._total) % (1 << COUNTER_BITS)
        elapsed = max(0.0, float(now) - self._at)
        self._total, self._at = total, float(now)
        if increase == 0:
            return 0, False
        bound = min(1 << 30, MAX_BURST + int(MAX_PUBLICATION_HZ * elapsed))
        if increase <= bound:
            self.counted += increase
            return increase, False
        self.refused += 1
        rest = increase - SPURIOUS_INCREMENT
        if 0 < rest <= bound:
            self.counted += rest
            return rest, True
        return 0, True
