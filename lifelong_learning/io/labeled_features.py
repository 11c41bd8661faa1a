"""LabeledFeatures recordings read back for retraining: ``(X, labels, stamps)`` in blocks.

The object_recognition node's training data: :func:`labeled_feature_blocks` streams every usable
``lifelong_learning/msg/LabeledFeatures`` message of a topic (default: every topic of that type),
:func:`read_labeled_features` joins them in memory. A message the node would not learn (a NaN, an
empty or unprintable label, a vector of another length than the bag's) is skipped and counted
(:class:`~lifelong_learning.io.bags.Skipped`); bags are opened through
:func:`~lifelong_learning.io.bags.read_messages`.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from lifelong_learning.io.bag_files import DEFAULT_MAX_MESSAGE_BYTES, BagError
from lifelong_learning.io.bags import (
    EMPTY_LABEL,
    LABELED_FEATURES_TYPE,
    LONG_LABEL,
    NON_FINITE,
    REPEATED_FRAME,
    UNPRINTABLE_LABEL,
    WRONG_DIMENSION,
    Skipped,
    bag_paths,
    read_messages,
)


@dataclass
class LabeledFeatureSet:
    """Features ``X`` (``(n, d)`` float64), their ``labels`` and receive ``stamps`` (ns), and the
    messages ``skipped`` per reason."""

    X: np.ndarray
    labels: list[str]
    stamps: np.ndarray
    skipped: Skipped = field(default_factory=Skipped)


def _modal_length(lengths: list[int]) -> int:
    """The most common length (the first seen among equals)."""
    counts = Counter(lengths)
    best = max(counts.values())
    return next(n for n in lengths if counts[n] == best)


#: usable messages at the start of each bag whose most common length is the bag's feature length
LENGTH_WINDOW = 100
#: bag time (ns) within which a frame read again on another topic is a repeat (the two copies of a
#: frame are recorded within a second of each other)
REPEAT_WINDOW_NS = 60 * 10**9
#: frames remembered by :class:`FrameRepeats`, at most (a flood within the window cannot grow it)
MAX_REMEMBERED_FRAMES = 200_000


class FrameRepeats:
    """The frames read in the last :data:`REPEAT_WINDOW_NS` of bag time, by the frame's header stamp
    and a digest of its float32 values, with the topic that carried each.

    The object_recognition node learns some frames that no LabeledFeatures message of the teacher
    carried (a showing's earlier frames, taught by a later label or by an answer; pasted copies) and
    publishes them on its ``learned_features`` topic. A frame it learned that way may still come on
    ``labeled_features`` too (its labelled copy, which the node skips: a frame is learned once, by
    its stamp), so a bag can hold it on both topics: the copy read second is a repeat, whatever its
    label, and a retraining learns the frame once, as the node did (with the label of the copy
    recorded first). Within one topic the reader leaves every message in.

    Not seen across separate reads: the validation bags of a retraining are read on their own, and
    each process of a job reads its own share, so a frame whose two copies (recorded within a second
    of each other) fall on either side of a file or a share boundary is read twice there.
    """

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple[int, bytes], tuple[str, int]] = OrderedDict()

    def repeated(self, topic: str, bag_ns: int, frame_ns: int, values: np.ndarray) -> bool:
        """Whether this frame (``values``: the message's float32 data) was read already on another
        topic (else it is remembered)."""
        while self._seen and (
            len(self._seen) >= MAX_REMEMBERED_FRAMES
            or next(iter(self._seen.values()))[1] < bag_ns - REPEAT_WINDOW_NS
        ):
            self._seen.popitem(last=False)
        data = np.ascontiguousarray(values, dtype=np.float32)
        key = (frame_ns, hashlib.blake2b(data.tobytes(), digest_size=8).digest())
        first = self._seen.get(key)
        if first is None:
            self._seen[key] = (topic, bag_ns)
        return first is not None and first[0] != topic


def labeled_feature_blocks(
    bags: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    topic: str | None = None,
    block: int = 20_000,
    skipped: Skipped | None = None,
    progress: Callable[[int], None] | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> Iterator[tuple[np.ndarray, list[str], np.ndarray]]:
    """Every usable LabeledFeatures message of ``topic`` (default: all topics of that type), in bag
    order, as blocks ``(X, labels, stamps)`` of at most ``block`` rows (``X`` float64): memory is
    bounded by the block, not by the bags.

    Skipped and counted in ``skipped``: messages that do not deserialize or hold more than
    ``max_message_bytes`` (never deserialized), with non-finite values, an empty label or one the
    object_recognition node refuses with its defaults (unprintable characters, more than 64
    characters; labels are stripped of surrounding whitespace, as the node does), or a length
    other than the bag's, which is the most common among its first
    :data:`LENGTH_WINDOW` usable messages (so that a stray vector cannot set it). ``progress(1)`` is
    called for every message read (:func:`~lifelong_learning.io.bags.message_count` gives their number).

    Reading every topic (``topic`` None), a frame that comes again on another topic
    (:class:`FrameRepeats`: its stamp and values; remembered for 60 s of bag time, at most
    200,000 frames: tens of MB) is read once; the repeat is counted in ``skipped`` as ``frame
    already read on another topic``.

    Raises:
        BagError: unreadable bag, no such topic, no usable message, or bags whose vectors have
            different lengths (features of another network).
    """
    skipped = Skipped() if skipped is None else skipped
    d: int | None = None  # the length of the bags read so far
    rows: list[tuple[int, np.ndarray, str]] = []
    yielded = 0
    repeats = FrameRepeats() if topic is None else None  # one topic: no repeats to find
    for path in bag_paths(bags):
        for row in _bag_features(path, topic, skipped, progress, d, repeats, max_message_bytes):
            d = row[1].size
            rows.append(row)
            if len(rows) >= block:
                yield _block(rows)
                yielded, rows = yielded + len(rows), []
    if rows:
        yield _block(rows)
        yielded += len(rows)
    if not yielded:
        why = f"; skipped: {skipped.summary()}" if skipped else ""
        raise BagError(f"no usable LabeledFeatures message in the bag(s){why}")
    if d == 0:
        raise BagError("feature vectors are empty")


def _bag_features(
    path: Path,
    topic: str | None,
    skipped: Skipped,
    progress: Callable[[int], None] | None,
    d: int | None,
    repeats: FrameRepeats | None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> Iterator[tuple[int, np.ndarray, str]]:
    """One bag's usable ``(stamp, vector, label)`` of the bag's length (``d``: the earlier bags'),
    frames already read on another topic left out (``repeats``)."""
    window: list[tuple[int, np.ndarray, str]] = []
    bag_d: int | None = None
    messages = read_messages(path, LABELED_FEATURES_TYPE, topic, False, skipped, progress, max_message_bytes)
    for on, stamp, msg in messages:
        usable = _usable_feature(path, stamp, msg, skipped)
        if usable is None:
            continue
        frame_ns = int(msg.header.stamp.sec) * 10**9 + int(msg.header.stamp.nanosec)
        if repeats is not None and repeats.repeated(on, stamp, frame_ns, msg.data):
            skipped.add(REPEATED_FRAME, f"{path}: the frame stamped {frame_ns} again, on {on!r}, at {stamp}")
            continue
        if bag_d is not None:
            yield from _of_length([(stamp, *usable)], bag_d, path, skipped)
            continue
        window.append((stamp, *usable))
        if len(window) == LENGTH_WINDOW:
            bag_d = _bag_length(path, window, d)
            yield from _of_length(window, bag_d, path, skipped)
    if bag_d is None and window:  # fewer usable messages than the window
        yield from _of_length(window, _bag_length(path, window, d), path, skipped)


@lru_cache(maxsize=1)
def _label_rule() -> tuple[int, Callable[[str, int], str | None]]:
    """The object_recognition node's label rule and its default length
    (:func:`~lifelong_learning.learners.recognition_gate.label_problem`), loaded at first use:
    the learners load scipy and numba, which nothing else here needs (the tune command and the
    tuner node import this module to declare their options)."""
    from lifelong_learning.learners.recognition_gate import DEFAULT_MAX_LABEL_LENGTH, label_problem

    return DEFAULT_MAX_LABEL_LENGTH, label_problem


def _usable_feature(path: Path, stamp: int, msg: Any, skipped: Skipped) -> tuple[np.ndarray, str] | None:
    """``(vector, label)`` of a message the node would learn, else None (counted in ``skipped``)."""
    v = np.asarray(msg.data, dtype=np.float64)
    label = str(msg.label).strip()  # as the object_recognition node learns it
    max_length, label_problem = _label_rule()
    problem = label_problem(label, max_length)  # the node's rule
    if not np.all(np.isfinite(v)):
        skipped.add(NON_FINITE, f"{path}: feature vector with NaN or Inf at {stamp}")
    elif not label:
        skipped.add(EMPTY_LABEL, f"{path}: empty label at {stamp}")
    elif problem is not None:
        reason = LONG_LABEL if len(label) > max_length else UNPRINTABLE_LABEL
        skipped.add(reason, f"{path}: {problem} ({label[:80]!r}) at {stamp}")
    else:
        return v, label
    return None


def _bag_length(path: Path, window: list[tuple[int, np.ndarray, str]], d: int | None) -> int:
    """The bag's feature length: the most common in ``window``; BagError if not the earlier bags' ``d``."""
    n = _modal_length([v.size for _, v, _ in window])
    if d is not None and n != d:
        raise BagError(f"{path}: feature vectors of different lengths ({n} vs {d} before)")
    return n


def _of_length(
    rows: list[tuple[int, np.ndarray, str]], n: int, path: Path, skipped: Skipped
) -> Iterator[tuple[int, np.ndarray, str]]:
    """The rows whose vectors have ``n`` values; the others counted in ``skipped``."""
    for stamp, v, label in rows:
        if v.size == n:
            yield stamp, v, label
        else:
            skipped.add(
                WRONG_DIMENSION, f"{path}: a vector of {v.size} values at {stamp}, the bag's have {n}"
            )


def _block(rows: list[tuple[int, np.ndarray, str]]) -> tuple[np.ndarray, list[str], np.ndarray]:
    return (
        np.vstack([v for _, v, _ in rows]),
        [label for _, _, label in rows],
        np.asarray([stamp for stamp, _, _ in rows], dtype=np.int64),
    )


def read_labeled_features(
    bags: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    topic: str | None = None,
    progress: Callable[[int], None] | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> LabeledFeatureSet:
    """Every usable LabeledFeatures message in memory: :func:`labeled_feature_blocks` joined."""
    skipped = Skipped()
    parts = list(labeled_feature_blocks(bags, topic, 20_000, skipped, progress, max_message_bytes))
    return LabeledFeatureSet(
        np.vstack([p[0] for p in parts]),
        [label for p in parts for label in p[1]],
        np.concatenate([p[2] for p in parts]),
        skipped,
    )
