"""A peer process for the loss-counting graph test: a camera driver WITHOUT the Fast DDS profile
whose large frames are lost on the way while its small ones arrive.

Publishes, with sensor-data (best-effort) QoS on ``image``, small 64x48 rgb8 frames (frame_id
``warmup``, one every 0.3 s) until one is answered on ``features`` (the node's reader has then
matched this writer and delivered a sample, so that the gaps after it are reported), then PAIRS
pairs: a 640x480 rgb8 frame stamped (2i, 0), then a 64x48 one stamped (2i + 1, 0), both with
frame_id CASE, waiting (up to 5 s) for the small one's answer before the next pair, so that the
node's queue never holds more than two frames (none is overwritten there). Without the profile
the large frames, sent in fragments from a shared-memory segment too small for them, mostly
never arrive whole; the small ones do. Prints ``published N, answered K, sent S frames in all``
(S: the warm-up frames too) and exits.

Run: python lossy_camera_peer.py CASE [PAIRS] (inherits ROS_DOMAIN_ID; removes
FASTDDS_DEFAULT_PROFILES_FILE before its participant exists).
"""

import os
import sys
import time

import numpy as np
import rclpy
from lifelong_learning.msg import Features
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image

from lifelong_learning.vision.image_conversion import numpy_to_image


def frame(frame_id: str, width: int, height: int) -> Image:
    """An rgb8 frame of a colour gradient with frame_id ``frame_id``."""
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([x * 255 // (width - 1), y * 255 // (height - 1), (x // 8 % 2) * 200], axis=2)
    msg = numpy_to_image(rgb.astype(np.uint8), "rgb8", message=Image())
    msg.header.frame_id = frame_id
    return msg


def answered_within(
    node: Node, answers: list[tuple[str, int]], wanted: tuple[str, int], seconds: float
) -> bool:
    """Spin ``node`` until ``wanted`` (frame_id, stamp sec) is among ``answers`` or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while wanted not in answers and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.02)
    return wanted in answers


def main(case: str, pairs: int) -> int:
    os.environ.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    rclpy.init()
    node = Node("lossy_camera_peer")
    pub = node.create_publisher(Image, "image", qos_profile_sensor_data)
    answers: list[tuple[str, int]] = []
    node.create_subscription(
        Features, "features", lambda m: answers.append((m.header.frame_id, m.header.stamp.sec)), 100
    )
    small, large = frame("warmup", 64, 48), frame(case, 640, 480)
    deadline, sent = time.monotonic() + 60, 0
    while not answered_within(node, answers, ("warmup", 0), 0.3):
        if time.monotonic() > deadline:
            print("no answer to the warm-up frames within 60 s", flush=True)
            return 1
        if pub.get_subscription_count() > 0:
            pub.publish(small)
            sent += 1
    small.header.frame_id = case
    for index in range(pairs):
        large.header.stamp.sec, small.header.stamp.sec = 2 * index, 2 * index + 1
        pub.publish(large)
        pub.publish(small)
        sent += 2
        answered_within(node, answers, (case, 2 * index + 1), 5.0)
    answered = sum(1 for a in answers if a[0] == case)
    print(f"published {2 * pairs}, answered {answered}, sent {sent} frames in all", flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args[0], int(args[1]) if len(args) > 1 else 10))
