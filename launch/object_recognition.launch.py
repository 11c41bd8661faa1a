"""Object recognition: the feature_extractor (camera images → CNN features) and the
object_recognition learner (features → labels, learned incrementally).

    ros2 launch lifelong_learning object_recognition.launch.py image:=/camera/color/image_raw

Arguments:
    image   camera image topic (sensor_msgs/Image), remapped onto feature_extractor's `image`
            [default: image]

Parameters come from this package's config/feature_extractor.yaml and
config/object_recognition.yaml (share/lifelong_learning/config; docs/parameters.md lists
them). Teach the learner by publishing the object's name on `teacher_label` (std_msgs/String)
while the camera sees it; predictions come out on `prediction`.
(`launch` has no PyPI wheel: on machines set up with the PyPI wheels use
`lifelong-learning up config/robot.yaml --nodes feature_extractor,object_recognition` instead.)
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    config = os.path.join(get_package_share_directory("lifelong_learning"), "config")
    return LaunchDescription(
        [
            DeclareLaunchArgument("image", default_value="image", description="camera image topic"),
            Node(
                package="lifelong_learning",
                executable="feature_extractor",
                name="feature_extractor",
                parameters=[os.path.join(config, "feature_extractor.yaml")],
                remappings=[("image", LaunchConfiguration("image"))],
                output="screen",
            ),
            Node(
                package="lifelong_learning",
                executable="object_recognition",
                name="object_recognition",
                parameters=[os.path.join(config, "object_recognition.yaml")],
                output="screen",
            ),
        ]
    )
