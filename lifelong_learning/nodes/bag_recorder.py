"""``bag_recorder`` node: records topics into a rosbag2 bag on machines without rosbag2.

A thin adapter around :class:`lifelong_learning.io.recorder.SplitBagWriter` (see it for the bag
layout and its crash safety). The bag directory ``output`` holds ``NAME_0.mcap``,
``NAME_1.mcap``, ... (``.db3`` with ``storage: sqlite3``) and a ``metadata.yaml`` that lists the
closed files; it is read by ``rosbags`` (``Reader``, ``AnyReader``), by
:mod:`lifelong_learning.io.bags` and by the ``nystrom_tuner`` node.

- Each configured topic is subscribed once the graph shows its type and a publisher
  (checked every ``discovery_period_s``), with ``raw=True``: the CDR bytes are stored as
  received, stamped with the node's clock at reception. QoS as ``ros2 bag record`` chooses it
  from the publishers' offered QoS: reliable only if every publisher is reliable,
  transient-local only if every publisher is, keep-last with a deep queue (:data:`QUEUE_DEPTH`);
  the offered QoS is stored with the topic.
- A file is closed (and the bag readable up to it) when its message bytes reach
  ``max_bagfile_size``, ``max_bagfile_duration_s`` after its first message, on the
  ``~/split_bagfile`` service (std_srvs/Trigger; it answers once the file is closed and
  metadata.yaml rewritten) and on shutdown (SIGINT/SIGTERM). Each closed file is announced on
  ``~/file_closed`` (lifelong_learning/BagFileClosed: rosbag2's ``events/write_split`` fields and
  the file's time span; reliable, transient local, the last :data:`FILES_ANNOUNCED` kept), which
  the ``nystrom_tuner``'s lifelong loop retrains from. Killed with SIGKILL, the node leaves
  a bag readable up to its last closed file, so ``max_bagfile_duration_s`` bounds what a crash
  loses; the unfinished file stays in ``NAME/partial/``.
- Refused (counted in diagnostics, warned about; the node keeps recording the other topics):
  a type neither the type store nor the ament index defines, a type without Python support,
  a publisher whose type hash differs from the known definition, a topic with several types or
  whose type changes, and storage errors (a file that fails is given up and counted in
  ``messages lost``; closed files are never touched).
- Messages a publisher sent that never reached the writer (lost by DDS, or overwritten in the
  subscription's queue while the node was busy) are counted per topic from the publishers'
  sequence numbers (``<topic> lost`` in diagnostics, WARN while it rises).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from std_srvs.srv import Trigger

from lifelong_learning.io.recorder import STORAGES, BagFile, RecorderError, SplitBagWriter
from lifelong_learning.msg import BagFileClosed
from lifelong_learning.nodes.base import NodeBase, ParamSpec, model_home
from lifelong_learning.nodes.runner import run_node

#: keep-last depth of the recording subscriptions (bounds what a burst queues before writing)
QUEUE_DEPTH = 100
#: closed files ~/file_closed keeps for late subscribers (transient local)
FILES_ANNOUNCED = 100

DEFAULT_TOPICS = [
    "labeled_features",
    "learned_features",  # what object_recognition learned beyond labeled_features: retraining reads both
    "features",
    "prediction",
    "joint_states",
    "predicted_torque",
    "teacher_label",
    "tuned_model",
    "tuning_progress",
    "inverse_dynamics/learning_metrics",
    "object_recognition/learning_metrics",
]

PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "output",
        "",
        "Bag directory to create ('' = $ROS_HOME/lifelong_learning/bags/bag_<UTC date-time>); "
        "an existing directory is never appended to: the node refuses to start.",
    ),
    ParamSpec(
        "topics",
        DEFAULT_TOPICS,
        "Topics to record (relative names resolve in the node's namespace). No images by default (too big).",
    ),
    ParamSpec("storage", "mcap", "'mcap' (.mcap files) or 'sqlite3' (.db3 files)."),
    ParamSpec(
        "max_bagfile_size",
        0,
        "Close a file and start the next once its message bytes reach this many (0: no limit).",
        bounds=(0, 10**15),
        minimum_nonzero=1024,
    ),
    ParamSpec(
        "max_bagfile_duration_s",
        30.0,
        "Close a file this many seconds after its first message (0: no limit). A crash (SIGKILL) "
        "loses at most the messages of the open file: this bounds it.",
        bounds=(0.0, 86400.0),
        minimum_nonzero=1.0,
    ),
    ParamSpec(
        "discovery_period_s",
        1.0,
        "Seconds between looks at the graph for the configured topics' types and publishers.",
        bounds=(0.01, 3600.0),
    ),
)


def default_output(base: Path | None = None) -> Path:
    """``$ROS_HOME/lifelong_learning/bags/bag_<UTC date-time>`` (:func:`model_home`), with ``_<n>``
    added if that exists."""
    base = base or model_home() / "bags"
    stem = f"bag_{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    path, n = base / stem, 0
    while path.exists():
        n += 1
        path = base / f"{stem}_{n}"
    return path


def subscription_qos(offered: list[QoSProfile]) -> QoSProfile:
    """The recording QoS for publishers offering ``offered`` (as ``ros2 bag record`` adapts it)."""
    reliable = bool(offered) and all(q.reliability == ReliabilityPolicy.RELIABLE for q in offered)
    latched = bool(offered) and all(q.durability == DurabilityPolicy.TRANSIENT_LOCAL for q in offered)
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=QUEUE_DEPTH,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
    )


def _qos_time(duration: Any) -> QosTime:
    ns = int(duration.nanoseconds)
    return QosTime(ns // 10**9, ns % 10**9)


def _policy(enum: Any, value: Any) -> Any:
    return enum.__members__.get(getattr(value, "name", ""), enum.UNKNOWN)


def rosbags_qos(q: QoSProfile) -> Qos:
    """An rclpy QoS profile as rosbags stores it in the bag's ``offered_qos_profiles``."""
    return Qos(
        _policy(QosHistory, q.history),
        int(q.depth),
        _policy(QosReliability, q.reliability),
        _policy(QosDurability, q.durability),
        _qos_time(q.deadline),
        _qos_time(q.lifespan),
        _policy(QosLiveliness, q.liveliness),
        _qos_time(q.liveliness_lease_duration),
        bool(q.avoid_ros_namespace_conventions),
    )


def message_class(msgtype: str) -> Any:
    """The Python message class of ``pkg/msg/Type`` (needed by rclpy even for raw subscriptions)."""
    parts = msgtype.split("/")
    if len(parts) != 3 or parts[1] != "msg":
        raise RecorderError(f"{msgtype!r} is not a message type (pkg/msg/Type)")
    try:
        return getattr(importlib.import_module(f"{parts[0]}.msg"), parts[2])
    except (ImportError, AttributeError) as exc:
        raise RecorderError(f"{msgtype}: no Python type support installed ({exc})") from exc


@dataclass
class _Recorded:
    msgtype: str
    subscription: Any
    reliable: bool


class BagRecorderNode(NodeBase):
    """Records the configured topics, raw, into a split rosbag2 bag."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("bag_recorder", PARAMS, **kwargs)
        p = self.params
        if p["storage"] not in STORAGES:
            raise ValueError(f"storage must be one of {sorted(STORAGES)}, got {p['storage']!r}")
        if int(p["max_bagfile_size"]) < 0 or float(p["max_bagfile_duration_s"]) < 0:
            raise ValueError("max_bagfile_size and max_bagfile_duration_s must be >= 0 (0: no limit)")
        if float(p["discovery_period_s"]) <= 0:
            raise ValueError("discovery_period_s must be > 0")
        names = [str(t) for t in p["topics"] if str(t).strip()]
        if not names:
            raise ValueError("topics is empty: nothing to record")
        self.topic_names = list(dict.fromkeys(self._resolve(t) for t in names))
        output = str(p["output"])
        path = Path(os.path.expanduser(output)) if output else default_output()
        self.writer_path = path
        latched = QoSProfile(
            depth=FILES_ANNOUNCED,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self.closed_pub = self.create_publisher(BagFileClosed, "~/file_closed", latched)
        writer = SplitBagWriter(
            path,
            storage=p["storage"],
            max_bagfile_size=int(p["max_bagfile_size"]),
            max_bagfile_duration_s=float(p["max_bagfile_duration_s"]),
            on_file_closed=self._announce,
        )
        writer.open()  # FileExistsError: the node does not start (and has no bag to close)
        self.writer = writer
        self.recorded: dict[str, _Recorded] = {}
        self._refused: dict[str, tuple[str, ...]] = {}  # topic → types refused (warned once)
        self.create_service(Trigger, "~/split_bagfile", self._on_split)
        self.create_timer(float(p["discovery_period_s"]), self.discover)
        duration = float(p["max_bagfile_duration_s"])
        if duration > 0:
            self.create_timer(min(1.0, duration / 10), self._tick)
        self.get_logger().info(f"recording {', '.join(self.topic_names)} into {path} ({p['storage']})")
        self.discover()

    def _resolve(self, topic: str) -> str:
        """The full name of a configured topic; ValueError (the node does not start) if invalid."""
        try:
            return self.resolve_topic_name(topic)
        except Exception as exc:  # rclpy raises its RCLError for an invalid name
            raise ValueError(f"topics: {topic!r} is not a valid topic name ({exc})") from None

    # ------------------------------------------------------------ graph
    def _refuse(self, topic: str, types: tuple[str, ...], reason: str, detail: str) -> None:
        """Count and report a refused topic once per (topic, types)."""
        if self._refused.get(topic) == types:
            return
        self._refused[topic] = types
        self.reject(reason, detail)
        self.get_logger().error(f"not recording {topic}: {detail}")

    def discover(self) -> None:
        """Subscribe to each configured topic whose type and publishers the graph shows."""
        graph = dict(self.get_topic_names_and_types())
        for topic in self.topic_names:
            types = tuple(graph.get(topic, ()))
            known = self.recorded.get(topic)
            if known is not None:
                others = tuple(t for t in types if t != known.msgtype)
                if others:
                    self._refuse(
                        topic,
                        others,
                        "type changed",
                        f"recorded as {known.msgtype}, now also published as {', '.join(others)} "
                        "(not recorded)",
                    )
                continue
            if not types:
                continue
            if len(types) > 1:
                self._refuse(topic, types, "several types", f"published with several types {list(types)}")
                continue
            infos = self.get_publishers_info_by_topic(topic)
            if not infos or self._refused.get(topic) == types:
                continue  # no publisher yet (offered QoS unknown), or refused already
            self._record(topic, types[0], infos)

    def _record(self, topic: str, msgtype: str, infos: list[Any]) -> None:
        hashes = {str(i.topic_type_hash) for i in infos if str(i.topic_type_hash).startswith("RIHS01_")}
        try:
            if len(hashes) > 1:
                raise RecorderError(f"publishers of {msgtype} disagree on its type hash: {sorted(hashes)}")
            cls = message_class(msgtype)
            self.writer.add_topic(
                topic,
                msgtype,
                offered_qos=[rosbags_qos(i.qos_profile) for i in infos],
                type_hash=next(iter(hashes), None),
            )
        except RecorderError as exc:
            self._refuse(topic, (msgtype,), "unrecordable topic", str(exc))
            return
        qos = subscription_qos([i.qos_profile for i in infos])
        # counted: messages published on the topic that never reached the writer show as "<topic> lost"
        sub = self.create_counted_subscription(
            cls, topic, partial(self._on_message, topic), qos, stream=topic, raw=True
        )
        reliable = qos.reliability == ReliabilityPolicy.RELIABLE
        self.recorded[topic] = _Recorded(msgtype, sub, reliable)
        self._refused.pop(topic, None)
        self.get_logger().info(
            f"recording {topic} ({msgtype}, {'reliable' if reliable else 'best effort'}"
            f"{', transient local' if qos.durability == DurabilityPolicy.TRANSIENT_LOCAL else ''})"
        )

    # ------------------------------------------------------------ messages and files
    def _on_message(self, topic: str, data: bytes) -> None:
        stamp = self.get_clock().now().nanoseconds
        try:
            self.writer.write(topic, stamp, data)
        except RecorderError as exc:
            self.reject("write failed", str(exc))
            return
        self.stats.arrived(topic)

    def _announce(self, done: BagFile) -> None:
        """Publish a closed file on ``~/file_closed`` (called by the writer, under its lock)."""
        msg = BagFileClosed(
            closed_file=str((self.writer_path / done.name).absolute()),
            node_name=self.get_fully_qualified_name(),
            bag=str(self.writer_path.absolute()),
            message_count=done.message_count,
            topics=sorted(topic for topic, n in done.topic_counts.items() if n),
        )
        msg.header.stamp = self.get_clock().now().to_msg()
        last = done.start_ns + done.duration_ns
        msg.first_message.sec, msg.first_message.nanosec = divmod(done.start_ns, 10**9)
        msg.last_message.sec, msg.last_message.nanosec = divmod(last, 10**9)
        try:
            self.closed_pub.publish(msg)
        except Exception as exc:  # shutting down (the context is gone): the file is closed all the same
            self.get_logger().warning(f"{done.name} closed, not announced: {exc}")

    def _tick(self) -> None:
        try:
            self.writer.tick(self.get_clock().now().nanoseconds)
        except RecorderError as exc:
            self.reject("write failed", str(exc))

    def _on_split(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        try:
            done = self.writer.split()
        except RecorderError as exc:
            self.reject("write failed", str(exc))
            response.success, response.message = False, f"split failed: {exc}"
            return response
        listed = f"{self.writer.path} lists {len(self.writer.files)} file(s)"
        if done is None:
            response.message = f"no message since the last split, nothing to close; {listed}"
        else:
            response.message = f"closed {done.name} ({done.message_count} messages); {listed}"
        response.success = True
        self.get_logger().info(response.message)
        return response

    def close_bag(self) -> None:
        """Close the open file and write the final metadata.yaml (on shutdown)."""
        if getattr(self, "writer", None) is None or getattr(self, "_bag_closed", False):
            return  # the node failed before its bag was opened (bad parameters), or closed it already
        self._bag_closed = True
        try:
            self.writer.close()
        except RecorderError as exc:
            self.get_logger().error(f"closing the bag failed: {exc}")
            return
        s = self.writer.status()
        self.get_logger().info(
            f"bag closed: {s['path']} ({s['files_closed']} file(s), {s['messages_written']} messages)"
        )

    def finish(self) -> None:
        self.close_bag()

    def destroy_node(self) -> None:
        self.close_bag()
        super().destroy_node()

    def diagnostic_values(self) -> dict[str, str]:
        values = super().diagnostic_values()
        s = self.writer.status()
        values["bag"] = s["path"]
        values["storage"] = s["storage"]
        values["current file"] = s["current_file"] or "none"
        values["files closed"] = str(s["files_closed"])
        values["messages written"] = str(s["messages_written"])
        values["bytes written"] = str(s["bytes_written"])
        values["messages lost"] = str(s["messages_lost"])
        for topic, n in s["topic_counts"].items():
            values[f"{topic} recorded"] = str(n)
        waiting = [t for t in self.topic_names if t not in self.recorded]
        values["topics waiting"] = ", ".join(waiting) or "none"
        return values


def main(args: list[str] | None = None) -> int:
    """Entry point of the ``bag_recorder`` executable."""
    return run_node(BagRecorderNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
