"""A peer process for the camera-input graph tests: a camera driver in its own process.

Publishes COUNT frames of WIDTH x HEIGHT at RATE Hz with sensor-data (best-effort) QoS, as
``rgb8`` or ``yuv422`` sensor_msgs/Image on ``image``, or as a JPEG sensor_msgs/CompressedImage
on ``image/compressed``; frame i is stamped (i, 0) with frame_id CASE. Before the counted frames
it sends warm-up frames (frame_id ``warmup``), one every 0.5 s, until a Features answer comes
back on ``features``: then the node's reader has matched this writer both ways, and the counted
frames measure delivery, not discovery. After the last frame it stays (up to 10 s) until every
counted frame is answered, since a sample may still lie in this process's shared memory; prints
``published N, answered K`` and exits.

Run: python camera_peer.py CASE ENCODING WIDTH HEIGHT [COUNT [RATE [without-profile]]] (ENCODING:
rgb8, yuv422 or jpeg; inherits ROS_DOMAIN_ID and FASTDDS_DEFAULT_PROFILES_FILE from the test, as a
camera driver started from a shell with scripts/env.sh sourced would). ``without-profile``: a
camera driver started without it (the variable removed before the participant exists, so Fast DDS
uses its default transports): no warm-up (its frames may never arrive), the COUNT frames are sent
as soon as a reader has matched.
"""

import os
import sys
import time

import numpy as np
import rclpy
from lifelong_learning.msg import Features
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image

from lifelong_learning.vision.image_conversion import numpy_to_image


def picture(width: int, height: int) -> np.ndarray:
    """An RGB test picture: colour gradients with a few bars (what a CNN sees as something)."""
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x // 40 % 2) * 200], axis=2)
    return rgb.astype(np.uint8)


def frame(case: str, encoding: str, width: int, height: int) -> Image | CompressedImage:
    """One frame of ``encoding`` (rgb8, yuv422 = UYVY, or jpeg) with frame_id ``case``."""
    rgb = picture(width, height)
    if encoding == "jpeg":
        import cv2

        ok, data = cv2.imencode(".jpg", np.ascontiguousarray(rgb[:, :, ::-1]), [cv2.IMWRITE_JPEG_QUALITY, 90])
        assert ok
        msg = CompressedImage(format="jpeg")
        msg.data = data.tobytes()
    elif encoding == "yuv422":  # UYVY of the green channel as luma, neutral chroma
        uyvy = np.full((height, width, 2), 128, dtype=np.uint8)
        uyvy[:, :, 1] = 16 + rgb[:, :, 1].astype(np.uint16) * 219 // 255
        msg = numpy_to_image(uyvy, "yuv422", message=Image())
    else:
        msg = numpy_to_image(rgb, encoding, message=Image())
    msg.header.frame_id = case
    return msg


def main(argv: list[str]) -> None:
    case, encoding, width, height = argv[0], argv[1], int(argv[2]), int(argv[3])
    count = int(argv[4]) if len(argv) > 4 else 20
    rate = float(argv[5]) if len(argv) > 5 else 5.0
    without_profile = len(argv) > 6 and argv[6] == "without-profile"
    if without_profile:
        os.environ.pop("FASTDDS_DEFAULT_PROFILES_FILE", None)
    rclpy.init()
    node = Node("camera_peer")
    msg_type, topic = (CompressedImage, "image/compressed") if encoding == "jpeg" else (Image, "image")
    pub = node.create_publisher(msg_type, topic, qos_profile_sensor_data)
    answered: list[str] = []
    node.create_subscription(Features, "features", lambda m: answered.append(m.header.frame_id), 100)
    msg = frame(case, encoding, width, height)
    deadline = time.monotonic() + 60
    while without_profile and pub.get_subscription_count() == 0 and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    while not without_profile and "warmup" not in answered and time.monotonic() < deadline:
        if pub.get_subscription_count() > 0:
            msg.header.frame_id = "warmup"
            pub.publish(msg)
        end = time.monotonic() + 0.5
        while time.monotonic() < end and "warmup" not in answered:
            rclpy.spin_once(node, timeout_sec=0.05)
    if not without_profile and "warmup" not in answered:
        print("no answer to the warm-up frames within 60 s", flush=True)
        sys.exit(1)
    msg.header.frame_id = case
    start = time.monotonic()
    for index in range(count):
        msg.header.stamp.sec = index
        pub.publish(msg)
        while time.monotonic() < start + (index + 1) / rate:
            rclpy.spin_once(node, timeout_sec=0.02)
    deadline = time.monotonic() + (1 if without_profile else 10)
    while answered.count(case) < count and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    print(f"published {count}, answered {answered.count(case)}", flush=True)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
