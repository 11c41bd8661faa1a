"""Data in and out of ROS without rclpy: rosbag2 reading (:mod:`~lifelong_learning.io.bags`, the
LabeledFeatures in :mod:`~lifelong_learning.io.labeled_features`) and recording
(:mod:`~lifelong_learning.io.recorder`) through ``rosbags``, and the package's message definitions
for them (:mod:`~lifelong_learning.io.interfaces`)."""
