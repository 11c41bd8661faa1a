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

Missing or corrupt bags, missing topics and inconsistent dimensions raise :class:`BagError`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

LABELED_FEATURES_TYPE = "lifelong_learning/msg/LabeledFeatures"
JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
STORAGES = ("mcap", "sqlite3")


class BagError(ValueError):
    """A bag is missing, corrupt or truncated, lacks a topic, or holds inconsistent data."""


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


def _messages(
    path: Path, msgtype: str, topic: str | None, single_topic: bool = False
) -> Iterator[tuple[int, Any]]:
    """(timestamp ns, deserialized message) of one bag's ``topic`` (or all topics of ``msgtype``;
    with ``single_topic``, a BagError if the bag has several, rather than mixing them)."""
    from rosbags.rosbag2 import Reader

    if not path.exists():
        raise BagError(f"{path}: no such bag")
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
                    raise BagError(f"{path}: corrupt message on {conn.topic!r} at {stamp}: {exc}") from exc
                yield stamp, msg
    except BagError:
        raise
    except Exception as exc:  # ReaderError, sqlite3.DatabaseError, MCAP/zstd errors, OSError...
        raise BagError(f"{path}: unreadable, corrupt or truncated bag ({type(exc).__name__}: {exc})") from exc


@dataclass
class LabeledFeatureSet:
    """Features ``X`` (``(n, d)`` float64), their ``labels`` and receive ``stamps`` (ns)."""

    X: np.ndarray
    labels: list[str]
    stamps: np.ndarray


def read_labeled_features(
    bags: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], topic: str | None = None
) -> LabeledFeatureSet:
    """Every LabeledFeatures message of ``topic`` (default: all topics of that type), in bag order.

    Raises:
        BagError: unreadable bag, no such topic, no message, vectors of different lengths,
            non-finite values or empty labels.
    """
    rows: list[np.ndarray] = []
    labels: list[str] = []
    stamps: list[int] = []
    for path in _paths(bags):
        for stamp, msg in _messages(path, LABELED_FEATURES_TYPE, topic):
            v = np.asarray(msg.data, dtype=np.float64)
            if rows and v.shape != rows[0].shape:
                raise BagError(
                    f"{path}: feature vectors of different lengths ({v.shape[0]} vs {rows[0].shape[0]})"
                )
            if not np.all(np.isfinite(v)):
                raise BagError(f"{path}: feature vector with NaN or Inf at {stamp}")
            if not msg.label:
                raise BagError(f"{path}: empty label at {stamp}")
            rows.append(v)
            labels.append(str(msg.label))
            stamps.append(stamp)
    if not rows:
        raise BagError("no LabeledFeatures message in the bag(s)")
    if rows[0].size == 0:
        raise BagError("feature vectors are empty")
    return LabeledFeatureSet(np.vstack(rows), labels, np.asarray(stamps, dtype=np.int64))


@dataclass
class JointStateSet:
    """Joint data in ``joint_names`` order: ``t`` (s since the first message), ``q``, ``qd``,
    ``tau``, and ``starts``, the first row of each bag (time increases within a bag only)."""

    joint_names: list[str]
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    starts: list[int]


def read_joint_states(
    bags: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    topic: str | None = None,
    joint_names: Sequence[str] | None = None,
) -> JointStateSet:
    """JointState messages → raw arrays (no ``q̈``: see the module docstring).

    Time is the message header stamp (the bag receive time if the header stamp is zero). Without
    ``topic`` the bag must hold one JointState topic (a bag with ``joint_states`` and the node's
    ``predicted_torque``, also a JointState, needs ``topic="/joint_states"``).
    ``joint_names`` selects and orders joints (default: the first message's names).

    Raises:
        BagError: unreadable bag, no such topic, a message lacking a joint or its velocity
            or effort, non-finite values, or time stamps that do not increase.
    """
    parts: list[tuple[np.ndarray, ...]] = []
    t0: int | None = None  # integer ns of the first message: float seconds since then keep ns resolution
    names = list(joint_names) if joint_names is not None else None
    for path in _paths(bags):
        t, q, qd, tau = [], [], [], []
        for stamp, msg in _messages(path, JOINT_STATE_TYPE, topic, single_topic=True):
            if names is None:
                names = list(msg.name)
                if not names:
                    raise BagError(f"{path}: JointState without joint names")
            index = {n: i for i, n in enumerate(msg.name)}
            try:
                sel = [index[n] for n in names]
            except KeyError as exc:
                raise BagError(f"{path}: a JointState at {stamp} lacks joint {exc}") from None
            k = len(msg.name)
            for field, arr in (
                ("position", msg.position),
                ("velocity", msg.velocity),
                ("effort", msg.effort),
            ):
                if len(arr) != k:
                    raise BagError(
                        f"{path}: JointState at {stamp} has {len(arr)} {field} values for {k} joints"
                    )
            hs = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            ns = hs if hs else stamp
            t0 = ns if t0 is None else t0
            t.append((ns - t0) * 1e-9)
            q.append(np.asarray(msg.position)[sel])
            qd.append(np.asarray(msg.velocity)[sel])
            tau.append(np.asarray(msg.effort)[sel])
        ta, qa, qda, taua = (np.asarray(a, dtype=np.float64) for a in (t, q, qd, tau))
        if not all(np.all(np.isfinite(a)) for a in (ta, qa, qda, taua)):
            raise BagError(f"{path}: JointState values with NaN or Inf")
        if ta.size > 1 and np.any(np.diff(ta) <= 0):
            raise BagError(f"{path}: JointState time stamps do not strictly increase")
        if ta.size == 0:
            raise BagError(f"{path}: no JointState message")
        parts.append((ta, qa, qda, taua))
    assert names is not None
    starts = np.cumsum([0] + [p[0].size for p in parts[:-1]]).tolist()
    t, q, qd, tau = (np.concatenate([p[i] for p in parts]) for i in range(4))
    return JointStateSet(names, t, q, qd, tau, starts)


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
