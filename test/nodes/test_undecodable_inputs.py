"""Bytes that are no message of the topic's type are refused and counted on every input stream
(a raw malformed ``Features`` CDR message as well as a ``LabeledFeatures`` one).

rclpy drops a sample it cannot deserialize without a word (its sequence number only leaves a gap
behind it). Every input stream of every node now takes the serialized bytes and decodes them
itself: four node processes (inverse_dynamics, object_recognition, feature_extractor on raw
images and a second one on compressed images) are sent 16 bytes of garbage CDR on each of their
inputs by a peer in this process (``publisher.publish(bytes)`` publishes them as they are); each
is counted as ``undecodable message``, logged with its topic and type, and each node goes on
publishing its diagnostics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import DiagnosticsReader, new_context, new_executor, node_argv, spin_until

from lifelong_learning.nodes.supervisor import NodeProcess, stop_all
from lifelong_learning.sim.panda import panda_urdf_path

pytestmark = pytest.mark.graph

GARBAGE = b"\x00\x01\x00\x00" + b"\xff" * 12  # a CDR header, then a sequence length past the end
COMMON = ("-p", "warn_period_s:=0.0", "-p", "diagnostics_period_s:=0.2")
EXTRACTOR = ("-p", "backend:=torch", "-p", "num_threads:=1")


def _streams() -> list[tuple[str, str, Any, str]]:
    """(node, topic, message type, the type's name in the log) of every input stream sent garbage."""
    from lifelong_learning.msg import Features, LabeledFeatures
    from sensor_msgs.msg import CompressedImage, Image, JointState
    from std_msgs.msg import String

    return [
        ("inverse_dynamics", "/joint_states", JointState, "sensor_msgs/JointState"),
        ("object_recognition", "/features", Features, "lifelong_learning/Features"),
        ("object_recognition", "/labeled_features", LabeledFeatures, "lifelong_learning/LabeledFeatures"),
        ("feature_extractor", "/image", Image, "sensor_msgs/Image"),
        ("feature_extractor", "/teacher_label", String, "std_msgs/String"),
        ("compressed_extractor", "/camera2/compressed", CompressedImage, "sensor_msgs/CompressedImage"),
        ("compressed_extractor", "/label2", String, "std_msgs/String"),
    ]


def test_undecodable_bytes_on_every_input_stream_are_counted_and_logged(
    built_interfaces: None, tmp_path: Path
) -> None:
    from rclpy.node import Node
    from rclpy.qos import QoSProfile

    argv = {
        "inverse_dynamics": node_argv(
            "inverse_dynamics", *COMMON, "-p", f"urdf_path:={panda_urdf_path()}", "-p", "n_features:=50"
        ),
        "object_recognition": node_argv("object_recognition", *COMMON),
        "feature_extractor": node_argv("feature_extractor", *COMMON, *EXTRACTOR),
        "compressed_extractor": node_argv(
            "feature_extractor",
            *COMMON,
            *EXTRACTOR,
            *("-r", "__node:=compressed_extractor", "-p", "image_transport:=compressed"),
            *("-p", "image_topic:=camera2", "-p", "label_topic:=label2"),
            *("-p", "features_topic:=features2", "-p", "labeled_features_topic:=labeled2"),
        ),
    }
    procs = {name: NodeProcess(args, log_path=tmp_path / f"{name}.log") for name, args in argv.items()}
    streams = _streams()
    with new_context() as context, new_executor(context) as executor:
        peer = Node("garbage_sender", context=context)
        pubs = [
            peer.create_publisher(msg_type, topic, QoSProfile(depth=10)) for _, topic, msg_type, _ in streams
        ]
        diag = DiagnosticsReader(peer)
        executor.add_node(peer)
        try:
            assert spin_until(executor, lambda: all(p.get_subscription_count() > 0 for p in pubs), 60), {
                name: proc.log()[-1000:] for name, proc in procs.items()
            }
            for (node, topic, _, type_name), pub in zip(streams, pubs, strict=True):
                line = f"bytes on {topic} are no {type_name}"
                for _ in range(20):  # best-effort readers: sent again until it is logged
                    pub.publish(GARBAGE)
                    if spin_until(executor, lambda: line in procs[node].log(), 1.0):  # noqa: B023
                        break
                assert line in procs[node].log(), (line, procs[node].log()[-2000:])
                assert "[WARN]" in procs[node].log() and "undecodable message" in procs[node].log()
            for node in procs:
                sent = sum(1 for n, *_ in streams if n == node)
                diag.statuses(node).clear()  # a status published from now on: the node still runs
                assert spin_until(executor, lambda: diag.rejected(node, "undecodable message") >= sent, 10), (  # noqa: B023
                    node,
                    diag.values(node),
                    procs[node].log()[-2000:],
                )
            assert all(proc.alive() for proc in procs.values())
        finally:
            stop_all(list(procs.values()), timeout=15.0)
