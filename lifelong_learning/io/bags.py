"""Reading (and, for tests and demos, writing) rosbag2 recordings through ``rosbags``.

Both storage plugins (sqlite3 ``.db3`` and MCAP) are handled by :class:`rosbags.rosbag2.Reader`.
The package's own messages are registered from the definitions embedded in
:mod:`lifelong_learning.io.interfaces` (a ``pip install .`` has no ``msg/`` directory);
standard types come from rosbags' ROS 2 Kilted type store.

What the offline tuner needs:

- :func:`~lifelong_learning.io.labeled_features.read_labeled_features` (its own module):
  ``lifelong_learning/msg/LabeledFeatures`` → ``(X, labels)``;
- :func:`read_joint_states`: ``sensor_msgs/msg/JointState`` → raw samples ``t, q, q̇, τ`` for
  named joints, with the row where each bag starts; the caller estimates ``q̈`` with the online
  node's filter (:func:`lifelong_learning.dynamics.acceleration.estimate_accelerations`, which
  restarts at those rows);
- :class:`JointStateStream`: the same, read lazily in blocks of at most ``block`` rows, so that
  memory is bounded by the block and not by the bags (what the retraining job reads through).

Missing or corrupt bags, missing topics and bags of another dimension raise :class:`BagError`.
One bad recorded message does not: a message that does not deserialize, is larger than
``max_message_bytes`` (skipped before it is deserialized), lacks a joint, has arrays of the wrong
length, non-finite values, an empty or unprintable label or a stamp out of order is skipped and
counted per reason (:class:`Skipped`, the ``skipped`` of what the readers return); only a bag with
no usable message left is an error.

A bag is opened only through :func:`lifelong_learning.io.bag_files.open_bag`, which refuses a
FIFO or a device among its files, or an oversized ``metadata.yaml``, before rosbags opens anything.
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from lifelong_learning.io.bag_files import DEFAULT_MAX_MESSAGE_BYTES, BagError, open_bag

LABELED_FEATURES_TYPE = "lifelong_learning/msg/LabeledFeatures"
#: the teacher's labelled features as a robot records them without a namespace
LABELED_FEATURES_TOPIC = "/labeled_features"
JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
STORAGES = ("mcap", "sqlite3")


#: reasons a recorded message is skipped (the keys of :class:`Skipped`)
CORRUPT = "corrupt message"
TOO_LARGE = "message too large"
NO_NAMES = "no joint names"
MISSING_JOINT = "missing joint"
DUPLICATE_JOINT = "duplicate joint names"
WRONG_LENGTH = "wrong array lengths"
NON_FINITE = "non-finite values"
OUT_OF_ORDER = "stamp out of order"
STAMP_JUMP = "stamp jump"
EMPTY_LABEL = "empty label"
# labels object_recognition refuses (learners.recognition_gate.label_problem, its default length)
UNPRINTABLE_LABEL = "unprintable label"
LONG_LABEL = "label too long"
WRONG_DIMENSION = "wrong feature length"
# a frame read already on another LabeledFeatures topic (io.labeled_features.FrameRepeats)
REPEATED_FRAME = "frame already read on another topic"


class Skipped(Counter):
    """Messages skipped per reason, with the first example of each (``details``)."""

    def __init__(self) -> None:
        super().__init__()
        self.details: dict[str, str] = {}

    def add(self, reason: str, detail: str, n: int = 1) -> None:
        """Count ``n`` skipped messages of ``reason``; keep ``detail`` if it is the first."""
        if n > 0:
            self[reason] += n
            self.details.setdefault(reason, detail)

    def summary(self) -> str:
        """One line: count and first example per reason."""
        return "; ".join(
            f"{n} {reason} (first: {self.details[reason]})" for reason, n in sorted(self.items())
        )


def increasing_rows(t: Any) -> np.ndarray:
    """The most rows of ``t`` whose values strictly increase, in order (a longest increasing
    subsequence, O(n log n)): one stamp far in the future or past costs that sample only, not
    every sample after it."""
    values = np.asarray(t).tolist()  # exact: integer nanoseconds stay Python ints
    tails: list[Any] = []  # smallest last value of an increasing run of each length
    tail_rows: list[int] = []
    previous = np.full(len(values), -1, dtype=np.int64)
    for i, v in enumerate(values):
        k = bisect.bisect_left(tails, v)
        if k == len(tails):
            tails.append(v)
            tail_rows.append(i)
        else:
            tails[k], tail_rows[k] = v, i
        previous[i] = tail_rows[k - 1] if k else -1
    keep = np.zeros(len(values), dtype=bool)
    i = tail_rows[-1] if tail_rows else -1
    while i >= 0:
        keep[i] = True
        i = int(previous[i])
    return keep


@lru_cache(maxsize=1)
def typestore() -> Any:
    """rosbags type store: ROS 2 Kilted standard types + this package's messages (shared; do not
    register more types in it, use :func:`new_typestore`)."""
    return new_typestore()


def new_typestore() -> Any:
    """A new rosbags type store with the ROS 2 Kilted standard types and this package's messages."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from lifelong_learning.io.interfaces import ros_type_names

    store = get_typestore(Stores.ROS2_KILTED)
    types: dict[str, Any] = {}
    for name, text in ros_type_names().items():
        types.update(get_types_from_msg(text, name))
    store.register(types)
    return store


def bag_paths(bags: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """``bags`` (one path or several) as a list of paths; BagError when none is given."""
    if isinstance(bags, (str, os.PathLike)):
        bags = [bags]
    out = [Path(b) for b in bags]
    if not out:
        raise BagError("no bag given")
    return out


def read_messages(
    path: Path,
    msgtype: str,
    topic: str | None,
    single_topic: bool = False,
    skipped: Skipped | None = None,
    progress: Callable[[int], None] | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> Iterator[tuple[str, int, Any]]:
    """(topic, timestamp ns, deserialized message) of one bag's ``topic`` (or all topics of ``msgtype``;
    with ``single_topic``, a BagError if the bag has several, rather than mixing them). A message
    that does not deserialize, or of more than ``max_message_bytes`` (dropped before it is
    deserialized), is counted in ``skipped`` and left out (without ``skipped``: BagError).
    ``progress(1)`` is called for every message read, usable or not."""
    store = typestore()
    try:
        with open_bag(path) as reader:
            conns = [c for c in reader.connections if (c.topic == topic if topic else c.msgtype == msgtype)]
            if not conns:
                have = sorted({f"{c.topic} ({c.msgtype})" for c in reader.connections})
                what = f"topic {topic!r}" if topic else f"a topic of type {msgtype}"
                raise BagError(f"{path}: no {what}; the bag has {have or 'no topics'}")
            if single_topic and not topic and len({c.topic for c in conns}) > 1:
                raise BagError(
                    f"{path}: several {msgtype} topics ({', '.join(sorted({c.topic for c in conns}))}); "
                    "name the one to read"
                )
            for c in conns:
                if c.msgtype != msgtype:
                    raise BagError(f"{path}: topic {c.topic!r} has type {c.msgtype}, expected {msgtype}")
            for conn, stamp, raw in reader.messages(connections=conns):
                if progress is not None:
                    progress(1)
                if len(raw) > max_message_bytes:
                    detail = f"{path}: a message of {len(raw)} bytes on {conn.topic!r} at {stamp}"
                    del raw  # rosbags' copy only: never deserialized
                    if skipped is None:
                        raise BagError(f"{detail}, more than max_message_bytes {max_message_bytes}")
                    skipped.add(TOO_LARGE, f"{detail} (max_message_bytes {max_message_bytes})")
                    continue
                try:
                    msg = store.deserialize_cdr(raw, conn.msgtype)
                except Exception as exc:  # rosbags raises assorted errors on bad CDR
                    detail = (
                        f"{path}: corrupt message on {conn.topic!r} at {stamp}: {type(exc).__name__}: {exc}"
                    )
                    if skipped is None:
                        raise BagError(detail) from exc
                    skipped.add(CORRUPT, detail)
                    continue
                yield conn.topic, stamp, msg
    except BagError:
        raise
    except Exception as exc:  # ReaderError, sqlite3.DatabaseError, MCAP/zstd errors, OSError...
        raise BagError(f"{path}: unreadable, corrupt or truncated bag ({type(exc).__name__}: {exc})") from exc


def message_count(
    bags: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    msgtype: str = LABELED_FEATURES_TYPE,
    topic: str | None = None,
) -> int:
    """The number of messages of ``topic`` (default: every topic of ``msgtype``) that the bags'
    metadata announce (what a reader will read; 0 for a bag that does not open)."""
    total = 0
    for path in bag_paths(bags):
        try:
            with open_bag(path) as reader:
                total += sum(
                    c.msgcount
                    for c in reader.connections
                    if (c.topic == topic if topic else c.msgtype == msgtype)
                )
        except Exception:  # reading will say what is wrong with it
            continue
    return total


@dataclass
class JointStateSet:
    """Joint data in ``joint_names`` order: ``t`` (s since the first message), ``q``, ``qd``,
    ``tau``, ``starts``, the first row of each stretch (each bag, and within a bag each part
    after a stamp jump: time increases within a stretch only), the messages ``skipped`` per
    reason, and ``bag_starts``, the first row of each bag (None: one per entry of ``starts``)."""

    joint_names: list[str]
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    starts: list[int]
    skipped: Skipped = field(default_factory=Skipped)
    bag_starts: list[int] | None = None


def _joint_sample(
    msg: Any, names: list[str], where: str, skipped: Skipped
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(q, q̇, τ)`` of ``names`` in one JointState, or None (counted in ``skipped``)."""
    k = len(msg.name)
    if len(set(msg.name)) != k:
        skipped.add(DUPLICATE_JOINT, f"{where}: joint names {list(msg.name)}")
        return None
    index = {n: i for i, n in enumerate(msg.name)}
    missing = [n for n in names if n not in index]
    if missing:
        skipped.add(MISSING_JOINT, f"{where}: a JointState lacks joint {missing[0]!r}")
        return None
    for label, arr in (("position", msg.position), ("velocity", msg.velocity), ("effort", msg.effort)):
        if len(arr) != k:
            skipped.add(WRONG_LENGTH, f"{where}: {len(arr)} {label} values for {k} joints")
            return None
    sel = [index[n] for n in names]
    q, qd, tau = (np.asarray(a, dtype=np.float64)[sel] for a in (msg.position, msg.velocity, msg.effort))
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd)) and np.all(np.isfinite(tau))):
        skipped.add(NON_FINITE, f"{where}: JointState values with NaN or Inf")
        return None
    return q, qd, tau


#: rows per block of :class:`JointStateStream` (and of the retraining job that reads through it):
#: 20 000 rows are 200 s of a 100 Hz log, 3.5 MB of ``t, q, q̇, τ`` for 7 joints
DEFAULT_BLOCK = 20_000

#: joint names recorded per bag (:attr:`JointStateStream.bag_joints`), at most
_MAX_NAMES = 256


@dataclass
class JointStateBlock:
    """Consecutive usable joint states of one stretch of bag ``bag`` (its index in the bags given),
    in :attr:`JointStateStream.joint_names` order; ``new_stretch``: the first block of a stretch
    (``q̈`` restarts there); ``t`` in seconds since the first message of the first bag."""

    bag: int
    new_stretch: bool
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray


class _Rows:
    """A growable buffer of rows ``(stamp ns, [q, q̇, τ])`` with a cheap removal from the front."""

    def __init__(self, width: int) -> None:
        self.n = 0
        self.ns = np.empty(64, dtype=np.int64)
        self.x = np.empty((64, width))

    def append(self, ns: int, row: np.ndarray) -> None:
        if self.n == self.ns.size:
            self.ns = np.concatenate([self.ns, np.empty_like(self.ns)])
            self.x = np.concatenate([self.x, np.empty_like(self.x)])
        self.ns[self.n], self.x[self.n] = ns, row
        self.n += 1

    def drop_front(self, k: int) -> None:
        rest = self.n - k
        self.ns[:rest], self.x[:rest] = self.ns[k : self.n], self.x[k : self.n]
        self.n = rest


class _BagState:
    """Where one bag's stream stands: the last row kept, its stretch and its rows not yet given."""

    def __init__(self, path: Path, index: int) -> None:
        self.path, self.index = path, index
        self.decided = 0  # usable messages decided (in order or not)
        self.last_ns: int | None = None  # the last row kept (in order)
        self.jumped = False  # a stamp jump seen in this bag: short stretches are dropped
        self.stretch_rows = 0  # rows of the current stretch so far
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []  # its rows while fewer than min_stretch
        self.joints: set[str] = set()


class JointStateStream:
    """JointState messages of ``bags`` → :class:`JointStateBlock` s of at most ``block`` rows,
    read lazily (the bags' messages are deserialized as they are needed), with the filtering of
    :func:`read_joint_states`: bad messages skipped and counted, stamps out of order, stamp jumps
    starting a new stretch, short stretches dropped.

    Memory is bounded by the block: a bag's messages wait in a window of at most ``2 × block``
    rows for the decision on their stamps (the longest increasing run of the window whose stamps
    follow the last row kept: :func:`increasing_rows`), which is made for the older half of the
    window; a stamp jump is judged against ten times the median step of that half. A run of up
    to ``block`` far-future stamps therefore costs those messages only, as in a whole-bag read.
    ``block=None``: the window is the whole bag (what :func:`read_joint_states` does).

    Attributes (filled as the stream is read): ``joint_names`` (the given ones, or those of the
    first usable message), ``skipped`` (:class:`Skipped`), ``bag_joints`` (the joint names seen in
    each bag's messages, at most 256 per bag), ``rows`` (rows given so far).

    Raises (while iterating):
        BagError: unreadable bag, no such topic, no usable message in a bag, or no stretch at all.
    """

    def __init__(
        self,
        bags: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        topic: str | None = None,
        joint_names: Sequence[str] | None = None,
        max_gap_s: float = 1.0,
        min_stretch: int = 10,
        block: int | None = DEFAULT_BLOCK,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        if block is not None and block < 1:
            raise ValueError(f"block must be >= 1 (or None), got {block}")
        self.paths = bag_paths(bags)
        self.max_message_bytes = int(max_message_bytes)
        self.topic, self.max_gap_s, self.min_stretch, self.block = topic, max_gap_s, min_stretch, block
        self.joint_names = list(joint_names) if joint_names is not None else None
        self._given_names = joint_names is not None
        self.skipped = Skipped()
        self.bag_joints: list[list[str]] = []
        self.rows = 0
        self._t0: int | None = None
        self._ready: list[JointStateBlock] = []
        self._out: list[tuple[np.ndarray, np.ndarray]] = []  # rows of the current stretch not yet given
        self._out_rows = 0
        self._out_new = True

    def __iter__(self) -> Iterator[JointStateBlock]:
        for index, path in enumerate(self.paths):
            state = _BagState(path, index)
            buffer: _Rows | None = None
            for ns, row in self._samples(state):
                if buffer is None:
                    buffer = _Rows(row.size)
                buffer.append(ns, row)
                if self.block is not None and buffer.n >= 2 * self.block:
                    self._decide(state, buffer, self.block)
                    yield from self._take_ready()
            self.bag_joints.append(sorted(state.joints))
            if buffer is None:
                raise BagError(self._unusable(state))
            if buffer.n:
                self._decide(state, buffer, buffer.n)
            self._end_stretch(state, bag_end=True)
            yield from self._take_ready()
        if not self.rows:
            raise BagError(
                f"no stretch of {self.min_stretch} joint states without a stamp jump; "
                f"skipped: {self.skipped.summary()}"
            )

    def _unusable(self, state: _BagState) -> str:
        """Why a bag gave no usable message; in words when its joint states lack joints."""
        missing = [n for n in self.joint_names or () if state.joints and n not in state.joints]
        why = f"; skipped: {self.skipped.summary()}" if self.skipped else ""
        if missing:
            source = "given" if self._given_names else f"from the first joint state of {self.paths[0]}"
            return (
                f"{state.path}: its joint states lack joints {missing} of the joints to learn "
                f"{self.joint_names} ({source}); it has {sorted(state.joints)[:20]}: a bag of another "
                "robot, or of a driver that publishes these joints elsewhere? Retrain from bags with the "
                f"same joints{why}"
            )
        return f"{state.path}: no usable JointState message{why}"

    def _take_ready(self) -> Iterator[JointStateBlock]:
        ready, self._ready = self._ready, []
        for b in ready:
            self.rows += b.t.size
            yield b

    def _samples(self, state: _BagState) -> Iterator[tuple[int, np.ndarray]]:
        """(stamp ns, ``[q, q̇, τ]``) of the bag's usable messages, in the order they are read."""
        messages = read_messages(
            state.path, JOINT_STATE_TYPE, self.topic, True, self.skipped, None, self.max_message_bytes
        )
        for _, stamp, msg in messages:
            where = f"{state.path} at {stamp}"
            if len(state.joints) < _MAX_NAMES:
                state.joints.update(str(n) for n in msg.name[:_MAX_NAMES])
            if self.joint_names is None:
                if not msg.name:
                    self.skipped.add(NO_NAMES, f"{where}: JointState without joint names")
                    continue
                self.joint_names = list(msg.name)
            sample = _joint_sample(msg, self.joint_names, where, self.skipped)
            if sample is None:
                continue
            hs = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            yield (hs if hs else stamp), np.concatenate(sample)

    def _decide(self, state: _BagState, buffer: _Rows, k: int) -> None:
        """Keep or drop (out of order) the first ``k`` rows of the window, and pass on those kept."""
        ns = buffer.ns[: buffer.n]
        eligible = np.ones(ns.size, dtype=bool) if state.last_ns is None else ns > state.last_ns
        keep = np.zeros(ns.size, dtype=bool)
        keep[eligible] = increasing_rows(ns[eligible])
        keep = keep[:k]
        if not keep.all():
            first = int(np.flatnonzero(~keep)[0])
            self.skipped.add(
                OUT_OF_ORDER,
                f"{state.path}: stamp {ns[first]} ns of message {state.decided + first} breaks the "
                "increasing order",
                int((~keep).sum()),
            )
        kept_ns, kept_x = ns[:k][keep].copy(), buffer.x[:k][keep].copy()
        state.decided += k
        buffer.drop_front(k)
        if kept_ns.size:
            self._stretches(state, kept_ns, kept_x)

    def _stretches(self, state: _BagState, ns: np.ndarray, x: np.ndarray) -> None:
        """Cut rows kept (in order) at stamp jumps: a step above ``max_gap_s`` or ten times the
        median step (of these rows and the step into them)."""
        if self._t0 is None:
            self._t0 = int(ns[0])
        joined = ns if state.last_ns is None else np.concatenate([[state.last_ns], ns])
        steps = np.diff(joined)
        limit = round(self.max_gap_s * 1e9)
        if steps.size:  # a step of ten periods is a gap too: q̈ across it would not be one
            limit = min(limit, 10 * int(np.median(steps)))
        offset = ns.size - steps.size  # 1 when the first step is the one into ns[1]
        cuts = [0, *(np.flatnonzero(steps > limit) + offset).tolist(), ns.size]
        state.last_ns = int(ns[-1])
        for i, (a, b) in enumerate(itertools.pairwise(cuts)):
            if i > 0:
                state.jumped = True
                self._end_stretch(state, bag_end=False)
            if b > a:
                self._add(state, ns[a:b], x[a:b])

    def _add(self, state: _BagState, ns: np.ndarray, x: np.ndarray) -> None:
        """Rows of the current stretch: held while it is shorter than ``min_stretch``."""
        state.stretch_rows += ns.size
        state.pending.append((ns, x))
        if state.stretch_rows >= self.min_stretch:
            self._give(state)

    def _give(self, state: _BagState) -> None:
        for ns, x in state.pending:
            self._out.append((ns, x))
            self._out_rows += ns.size
        state.pending = []
        while self.block is not None and self._out_rows >= self.block:
            self._flush(state, self.block)

    def _end_stretch(self, state: _BagState, bag_end: bool) -> None:
        """The current stretch ends (a jump, or the bag ends): give its rows, or drop them when
        it is too short and the bag has jumps (a bag without any is one stretch, however short)."""
        if state.pending and state.stretch_rows < self.min_stretch and (state.jumped or not bag_end):
            ns = np.concatenate([p[0] for p in state.pending])
            self.skipped.add(
                STAMP_JUMP,
                f"{state.path}: {ns.size} message(s) from {ns[0] * 1e-9:.3f} s cut off by stamp jumps",
                ns.size,
            )
            state.pending = []
        self._give(state)
        if self._out_rows:
            self._flush(state, self._out_rows)
        state.stretch_rows = 0
        self._out_new = True

    def _flush(self, state: _BagState, k: int) -> None:
        """Make a block of the first ``k`` rows given of the current stretch."""
        ns = np.concatenate([p[0] for p in self._out])
        x = np.concatenate([p[1] for p in self._out])
        self._out = [(ns[k:], x[k:])] if k < ns.size else []
        self._out_rows = ns.size - k
        assert self._t0 is not None and self.joint_names is not None
        d = len(self.joint_names)
        block = x[:k]
        self._ready.append(
            JointStateBlock(
                state.index,
                self._out_new,
                (ns[:k] - self._t0) * 1e-9,
                block[:, :d].copy(),
                block[:, d : 2 * d].copy(),
                block[:, 2 * d :].copy(),
            )
        )
        self._out_new = False


def read_joint_states(
    bags: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    topic: str | None = None,
    joint_names: Sequence[str] | None = None,
    max_gap_s: float = 1.0,
    min_stretch: int = 10,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> JointStateSet:
    """JointState messages → raw arrays (no ``q̈``: see the module docstring), all in memory (the
    retraining job reads through :class:`JointStateStream` instead, block by block).

    Time is the message header stamp (the bag receive time if the header stamp is zero). Without
    ``topic`` the bag must hold one JointState topic (a bag with ``joint_states`` and the node's
    ``predicted_torque``, also a JointState, needs ``topic="/joint_states"``).
    ``joint_names`` selects and orders joints (default: the first usable message's names).

    Skipped and counted (``skipped``): messages that do not deserialize or hold more than
    ``max_message_bytes``, lack a joint, repeat a joint name, have arrays of another length than
    their names, or non-finite values, and the fewest messages whose stamps break the strictly
    increasing order of a bag (:func:`increasing_rows`: a far-future stamp costs one sample).

    A step of more than ``max_gap_s`` or ten times the bag's median step between stamps (a paused
    driver, lost messages, a corrupt stamp that is still in order) starts a new stretch, as a new
    bag does (``starts``: ``q̈`` is never estimated across it); where a bag has such jumps, its
    stretches of fewer than ``min_stretch`` messages are skipped ("stamp jump": too short for a
    ``q̈`` window; one message with a far-future stamp at the end of a bag is one).

    Raises:
        BagError: unreadable bag, no such topic, or no usable message in a bag.
    """
    stream = JointStateStream(bags, topic, joint_names, max_gap_s, min_stretch, None, max_message_bytes)
    parts = list(stream)  # one block per stretch
    starts = np.cumsum([0] + [p.t.size for p in parts[:-1]]).tolist()
    bag_starts = [s for i, s in enumerate(starts) if i == 0 or parts[i - 1].bag != parts[i].bag]
    assert stream.joint_names is not None
    t, q, qd, tau = (np.concatenate([getattr(p, k) for p in parts]) for k in ("t", "q", "qd", "tau"))
    return JointStateSet(stream.joint_names, t, q, qd, tau, starts, stream.skipped, bag_starts)


# ---------------------------------------------------------------------------- writing


def _writer(path: str | os.PathLike[str], storage: str) -> Any:
    from rosbags.rosbag2 import StoragePlugin, Writer

    if storage not in STORAGES:
        raise ValueError(f"storage must be one of {STORAGES}, got {storage!r}")
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    return Writer(Path(path), version=9, storage_plugin=plugin)


def _stamp(store: Any, ns: int) -> Any:
    Time = store.types["builtin_interfaces/msg/Time"]
    return Time(sec=int(ns // 10**9), nanosec=int(ns % 10**9))


def write_labeled_features(
    path: str | os.PathLike[str],
    X: Any,
    labels: Sequence[str],
    topic: str = LABELED_FEATURES_TOPIC,
    storage: str = "mcap",
    period_ns: int = 10**8,
    start_ns: int = 10**18,
) -> None:
    """Write a rosbag2 bag with one LabeledFeatures message per row of ``X`` (for tests/demos)."""
    store = typestore()
    Msg = store.types[LABELED_FEATURES_TYPE]
    Header = store.types["std_msgs/msg/Header"]
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2 or len(labels) != X.shape[0]:
        raise ValueError("X must be (n, d) with one label per row")
    with _writer(path, storage) as writer:
        conn = writer.add_connection(topic, LABELED_FEATURES_TYPE, typestore=store)
        for i, (row, label) in enumerate(zip(X, labels, strict=True)):
            ns = start_ns + i * period_ns
            msg = Msg(header=Header(stamp=_stamp(store, ns), frame_id="camera"), data=row, label=str(label))
            writer.write(conn, ns, store.serialize_cdr(msg, LABELED_FEATURES_TYPE))


def write_joint_states(
    path: str | os.PathLike[str],
    t: Any,
    joint_names: Sequence[str],
    q: Any,
    qd: Any,
    tau: Any,
    topic: str = "/joint_states",
    storage: str = "mcap",
    start_ns: int = 10**18,
) -> None:
    """Write a rosbag2 bag of JointState messages (times ``t`` in seconds from ``start_ns``)."""
    store = typestore()
    Msg = store.types[JOINT_STATE_TYPE]
    Header = store.types["std_msgs/msg/Header"]
    t = np.asarray(t, dtype=np.float64)
    q, qd, tau = (np.asarray(a, dtype=np.float64) for a in (q, qd, tau))
    with _writer(path, storage) as writer:
        conn = writer.add_connection(topic, JOINT_STATE_TYPE, typestore=store)
        for i in range(t.shape[0]):
            ns = start_ns + round(t[i] * 1e9)
            msg = Msg(
                header=Header(stamp=_stamp(store, ns), frame_id=""),
                name=list(joint_names),
                position=q[i],
                velocity=qd[i],
                effort=tau[i],
            )
            writer.write(conn, ns, store.serialize_cdr(msg, JOINT_STATE_TYPE))
