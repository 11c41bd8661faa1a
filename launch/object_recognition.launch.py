"""Object recognition: the feature_extractor (camera images → CNN features) and the
object_recognition learner (features → labels, learned incrementally).

    ros2 launch lifelong_learning object_recognition.launch.py image:=/camera/color/image_raw

Arguments:
    image            camera image topic (sensor_msgs/Image), remapped onto feature_extractor's
                     `image` [default: image]
    image_transport  'raw' (sensor_msgs/Image on `image`) or 'compressed' (CompressedImage, JPEG
                     or PNG, on `<image>/compressed`, as image_transport publishes it) [default: raw]

Parameters come from this package's config/feature_extractor.yaml and
config/object_recognition.yaml (share/lifelong_learning/config; docs/parameters.md lists
them). Teach the learner by publishing the object's name on `teacher_label` (std_msgs/String)
while the camera sees it; predictions come out on `prediction`.
(`launch` has no PyPI wheel: on machines set up with the PyPI wheels use
`lifelong-learning up config/robot.yaml --nodes feature_extractor,object_recognition` instead.)

Every node started here gets FASTDDS_DEFAULT_PROFILES_FILE = this package's
config/fastdds_large_messages.xml (camera-sized messages), unless it is set already.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from lifelong_learning.nodes.supervisor import middleware_environment


def generate_launch_description() -> LaunchDescription:
    config = os.path.join(get_package_share_directory("lifelong_learning"), "config")
    return LaunchDescription(
        [
            # large camera frames: the shipped Fast DDS profile, unless FASTDDS_DEFAULT_PROFILES_FILE is set
            *(SetEnvironmentVariable(name, value) for name, value in middleware_environment().items()),
            DeclareLaunchArgument("image", default_value="image", description="camera image topic"),
            DeclareLaunchArgument(
                "image_transport",
                default_value="raw",
                description="raw: Image on image; compressed: CompressedImage on <image>/compressed",
            ),
            Node(
                package="lifelong_learning",
                executable="feature_extractor",
                name="feature_extractor",
                parameters=[
                    os.path.join(config, "feature_extractor.yaml"),
                    {"image_transport": LaunchConfiguration("image_transport")},
                ],
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
