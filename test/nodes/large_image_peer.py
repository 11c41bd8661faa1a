"""A peer process for the feature_extractor's size limit: publishes a valid SIDE x SIDE mono8 image
(default 10000: 100 MB) on ``image`` with sensor-data QoS, COUNT times (default 5), 2 s apart, once
a subscriber is matched; then exits.

Run: python large_image_peer.py [SIDE [COUNT]] (inherits ROS_DOMAIN_ID and the Fast DDS profile).
"""

import sys
import time

import rclpy
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image

if __name__ == "__main__":
    side = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    rclpy.init()
    node = Node("large_image_peer")
    pub = node.create_publisher(Image, "image", qos_profile_sensor_data)
    deadline = time.monotonic() + 60
    while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    image = Image(height=side, width=side, encoding="mono8", step=side)
    image.data = bytes(side * side)
    for _ in range(count):
        pub.publish(image)
        print(f"published {side}x{side} mono8", flush=True)
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
    node.destroy_node()
    rclpy.try_shutdown()
