"""Messages a publisher sent that a subscriber never processed, from publication sequence numbers.

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
