"""A peer process for the feature_extractor's size limit: publishes a valid SIDE x SIDE mono8 image
(default 10000: 100 MB) on ``image`` with sensor-data QoS, one every PERIOD s (default 1), from
the moment a subscriber is matched until it is stopped (SIGINT or SIGTERM: the test stops it
once the node has counted a frame), at most for LIMIT s (default 120); then exits.

Why until stopped, not a fixed number: a best-effort sample this large crosses in some 1,600
fragments, and one lost fragment loses the frame; on a loaded machine about half of them were
lost (5 of 10 at 2 s apart, two busy loops on the 2 cores; with four, the node counted the 2nd
to 4th frame sent), and the first one was lost on an idle machine too: five frames sent after the
writer matched (this peer before) could all be lost, the first before the node's reader had
matched this writer. One frame at a time, paced, keeps at most one in the node's reader and in
this process's shared-memory segment.

Run: python large_image_peer.py [SIDE [PERIOD [LIMIT]]] (inherits ROS_DOMAIN_ID and the Fast DDS
profile).

SIGINT and SIGTERM only set a flag that the loop reads (rclpy's own handlers are not installed):
rclpy's would shut the context down at once, and a signal that came while a frame was being
published (a 100 MB publish takes a while) failed that publish ("publisher's context is
invalid") and the process with it, once in a fresh-clone run.
"""

import signal
import sys
import threading
import time

import rclpy
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import Image


def main(side: int, period: float, limit: float) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = Node("large_image_peer")
    pub = node.create_publisher(Image, "image", qos_profile_sensor_data)
    deadline = time.monotonic() + limit
    try:
        while not stop.is_set() and pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
        image = Image(height=side, width=side, encoding="mono8", step=side)
        image.data = bytes(side * side)
        sent = 0
        while not stop.is_set() and pub.get_subscription_count() > 0 and time.monotonic() < deadline:
            pub.publish(image)
            sent += 1
            print(f"published {side}x{side} mono8 ({sent})", flush=True)
            end = time.monotonic() + period
            while not stop.is_set() and time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
        if stop.is_set():
            return 0
        print(f"stopped after {sent} frames: no subscriber or {limit:g} s passed", flush=True)
        return 1
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(
        main(
            int(args[0]) if args else 10000,
            float(args[1]) if len(args) > 1 else 1.0,
            float(args[2]) if len(args) > 2 else 120.0,
        )
    )
