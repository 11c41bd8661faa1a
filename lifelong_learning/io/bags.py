"""Reading (and, for tests and demos, writing) rosbag2 recordings through ``rosbags``.

Both storage plugins (sqlite3 ``.db3`` and MCAP) are handled by :class:`rosbags.rosbag2.Reader`.
The package's own messages are registered from the definitions embedded in
:mod:`lifelong_learning.io.interfaces` (a ``pip install .`` has no ``msg/`` directory);
standard types come from rosbags' ROS 2 Kilted type store.

What the offline tuner needs:

- :func:`read_labeled_features`: ``lifelong_learning/msg/LabeledFeatures`` → ``(X, labels)``;
- :func:`read_joint_states`: ``sensor_msgs/msg/JointState`` → raw samples ``t, q, q̇, τ`` for
  named joints, with the row where each bag starts; the caller estimates ``q̈`` with the online
  node's filter (:func:`lifelong_learning.dynamics.acceleration.estimate_accelerations`, which
  restarts at those rows).

Missing or corrupt bags, missing topics and bags of another dimension raise :class:`BagError`.
One bad recorded message does not: a message that does not deserialize, lacks a joint, has arrays
of the wrong length, non-finite values, an empty or unprintable label or a stamp out of order is
skipped and counted per reason (:class:`Skipped`, the ``skipped`` of what the readers return); only a bag with
no usable message left is an error.
"""

from __future__ import annotations

import bisect
import itertools
import os
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from lifelong_learning.learners.recognition_gate import DEFAULT_MAX_LABEL_LENGTH, label_problem

LABELED_FEATURES_TYPE = "lifelong_learning/msg/LabeledFeatures"
JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
STORAGES = ("mcap", "sqlite3")


class BagError(ValueError):
    """A bag is missing, corrupt or truncated, lacks a topic, or holds inconsistent data."""


#: reasons a recorded message is skipped (the keys of :class:`Skipped`)
CORRUPT = "corrupt message"
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


def _stretches(ns: np.ndarray, max_gap_s: float, min_len: int, where: str, skipped: Skipped) -> list[slice]:
    """The runs of stamps ``ns`` (integer ns) without a step above ``max_gap_s`` or ten times the
    median step, of at least ``min_len`` rows; the rows of shorter runs are counted as skipped
    ("stamp jump")."""
    t = ns * 1e-9
    steps = np.diff(ns)
    limit = round(max_gap_s * 1e9)
    if steps.size:  # a step of ten periods is a gap too: q̈ across it would not be one
        limit = min(limit, 10 * int(np.median(steps)))
    cuts = [0, *(np.flatnonzero(steps > limit) + 1).tolist(), ns.size]
    if len(cuts) == 2:
        return [slice(0, ns.size)]  # no jump: the bag is one stretch, however short
    kept = []
    for a, b in itertools.pairwise(cuts):
        if b - a >= min_len:
            kept.append(slice(a, b))
        else:
            skipped.add(
                STAMP_JUMP, f"{where}: {b - a} message(s) from {t[a]:.3f} s cut off by stamp jumps", b - a
            )
    return kept


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


def _paths(bags: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    if isinstance(bags, (str, os.PathLike)):
        bags = [bags]
    out = [Path(b) for b in bags]
    if not out:
        raise BagError("no bag given")
    return out


def _check_files(path: Path) -> None:
    """BagError unless ``path`` is a directory of regular files (a FIFO or device there would
    block or never end a read)."""
    if not path.is_dir():
        raise BagError(f"{path}: not a bag directory")
    for entry in path.iterdir():
        try:
            mode = entry.stat().st_mode
        except OSError as exc:
            raise BagError(f"{path}: unreadable entry {entry.name} ({exc})") from exc
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise BagError(f"{path}: {entry.name} is not a regular file")


def _messages(
    path: Path, msgtype: str, topic: str | None, single_topic: bool = False, skipped: Skipped | None = None
) -> Iterator[tuple[int, Any]]:
    """(timestamp ns, deserialized message) of one bag's ``topic`` (or all topics of ``msgtype``;
    with ``single_topic``, a BagError if the bag has several, rather than mixing them). A message
    that does not deserialize is counted in ``skipped`` and left out (without ``skipped``: BagError)."""
    from rosbags.rosbag2 import Reader

    if not path.exists():
        raise BagError(f"{path}: no such bag")
    _check_files(path)
    store = typestore()
    try:
        with Reader(path) as reader:
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
                yield stamp, msg
    except BagError:
        raise
    except Exception as exc:  # ReaderError, sqlite3.DatabaseError, MCAP/zstd errors, OSError...
        raise BagError(f"{path}: unreadable, corrupt or truncated bag ({type(exc).__name__}: {exc})") from exc


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


def read_labeled_features(
    bags: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], topic: str | None = None
) -> LabeledFeatureSet:
    """Every usable LabeledFeatures message of ``topic`` (default: all topics of that type), in bag order.

    Skipped and counted (``skipped``): messages that do not deserialize, with non-finite values,
    an empty label or one the object_recognition node refuses with its defaults (unprintable
    characters, more than 64 characters; labels are stripped of surrounding whitespace, as the
    node does), or a length other than the bag's most common one.

    Raises:
        BagError: unreadable bag, no such topic, no usable message, or bags whose vectors have
            different lengths (features of another network).
    """
    skipped = Skipped()
    rows: list[np.ndarray] = []
    labels: list[str] = []
    stamps: list[int] = []
    for path in _paths(bags):
        part: list[tuple[int, np.ndarray, str]] = []
        for stamp, msg in _messages(path, LABELED_FEATURES_TYPE, topic, skipped=skipped):
            v = np.asarray(msg.data, dtype=np.float64)
            label = str(msg.label).strip()  # as the object_recognition node learns it
            problem = label_problem(label, DEFAULT_MAX_LABEL_LENGTH)  # the node's rule
            if not np.all(np.isfinite(v)):
                skipped.add(NON_FINITE, f"{path}: feature vector with NaN or Inf at {stamp}")
            elif not label:
                skipped.add(EMPTY_LABEL, f"{path}: empty label at {stamp}")
            elif problem is not None:
                reason = LONG_LABEL if len(label) > DEFAULT_MAX_LABEL_LENGTH else UNPRINTABLE_LABEL
                skipped.add(reason, f"{path}: {problem} ({label[:80]!r}) at {stamp}")
            else:
                part.append((stamp, v, label))
        if not part:
            continue
        d = _modal_length([v.size for _, v, _ in part])
        if rows and d != rows[0].size:
            raise BagError(f"{path}: feature vectors of different lengths ({d} vs {rows[0].size} before)")
        for stamp, v, label in part:
            if v.size != d:
                skipped.add(
                    WRONG_DIMENSION, f"{path}: a vector of {v.size} values at {stamp}, the bag's have {d}"
                )
                continue
            rows.append(v)
            labels.append(label)
            stamps.append(stamp)
    if not rows:
        why = f"; skipped: {skipped.summary()}" if skipped else ""
        raise BagError(f"no usable LabeledFeatures message in the bag(s){why}")
    if rows[0].size == 0:
        raise BagError("feature vectors are empty")
    return LabeledFeatureSet(np.vstack(rows), labels, np.asarray(stamps, dtype=np.int64), skipped)


@dataclass
class JointStateSet:
    """Joint data in ``joint_names`` order: ``t`` (s since the first message), ``q``, ``qd``,
    ``tau``, ``starts``, the first row of each bag (time increases within a bag only), and the
    messages ``skipped`` per reason."""

    joint_names: list[str]
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    starts: list[int]
    skipped: Skipped = field(default_factory=Skipped)


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


def read_joint_states(
    bags: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    topic: str | None = None,
    joint_names: Sequence[str] | None = None,
    max_gap_s: float = 1.0,
    min_stretch: int = 10,
) -> JointStateSet:
    """JointState messages → raw arrays (no ``q̈``: see the module docstring).

    Time is the message header stamp (the bag receive time if the header stamp is zero). Without
    ``topic`` the bag must hold one JointState topic (a bag with ``joint_states`` and the node's
    ``predicted_torque``, also a JointState, needs ``topic="/joint_states"``).
    ``joint_names`` selects and orders joints (default: the first usable message's names).

    Skipped and counted (``skipped``): messages that do not deserialize, lack a joint, repeat a
    joint name, have arrays of another length than their names, or non-finite values, and the
    fewest messages whose stamps break the strictly increasing order of a bag
    (:func:`increasing_rows`: a stamp far in the future costs one sample, not the rest).

    A step of more than ``max_gap_s`` or ten times the bag's median step between stamps (a paused
    driver, lost messages, a corrupt stamp that is still in order) starts a new stretch, as a new
    bag does (``starts``: ``q̈`` is never estimated across it); where a bag has such jumps, its
    stretches of fewer than ``min_stretch`` messages are skipped ("stamp jump": too short for a
    ``q̈`` window; one message with a far-future stamp at the end of a bag is one).

    Raises:
        BagError: unreadable bag, no such topic, or no usable message in a bag.
    """
    skipped = Skipped()
    parts: list[tuple[np.ndarray, ...]] = []
    t0: int | None = None  # integer ns of the first message: float seconds since then keep ns resolution
    names = list(joint_names) if joint_names is not None else None
    for path in _paths(bags):
        ns_list: list[int] = []
        q, qd, tau = [], [], []
        for stamp, msg in _messages(path, JOINT_STATE_TYPE, topic, single_topic=True, skipped=skipped):
            where = f"{path} at {stamp}"
            if names is None:
                if not msg.name:
                    skipped.add(NO_NAMES, f"{where}: JointState without joint names")
                    continue
                names = list(msg.name)
            sample = _joint_sample(msg, names, where, skipped)
            if sample is None:
                continue
            hs = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            ns_list.append(hs if hs else stamp)
            q.append(sample[0])
            qd.append(sample[1])
            tau.append(sample[2])
        if not ns_list:
            why = f"; skipped: {skipped.summary()}" if skipped else ""
            raise BagError(f"{path}: no usable JointState message{why}")
        ns = np.asarray(ns_list, dtype=np.int64)
        keep = increasing_rows(ns)
        if not keep.all():
            first = int(np.flatnonzero(~keep)[0])
            skipped.add(
                OUT_OF_ORDER,
                f"{path}: stamp {ns[first]} ns of message {first} breaks the increasing order",
                int((~keep).sum()),
            )
        ns = ns[keep]
        t0 = int(ns[0]) if t0 is None else t0
        ta = (ns - t0) * 1e-9
        qa, qda, taua = (np.asarray(a, dtype=np.float64)[keep] for a in (q, qd, tau))
        for part in _stretches(ns, max_gap_s, min_stretch, f"{path}", skipped):
            parts.append((ta[part], qa[part], qda[part], taua[part]))
    if not parts:
        raise BagError(
            f"no stretch of {min_stretch} joint states without a stamp jump; skipped: {skipped.summary()}"
        )
    assert names is not None
    starts = np.cumsum([0] + [p[0].size for p in parts[:-1]]).tolist()
    t, q_all, qd_all, tau_all = (np.concatenate([p[i] for p in parts]) for i in range(4))
    return JointStateSet(names, t, q_all, qd_all, tau_all, starts, skipped)


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
    topic: str = "/labeled_features",
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
