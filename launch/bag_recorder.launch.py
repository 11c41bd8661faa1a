"""Record the learners' topics to a rosbag2 bag (MCAP) for offline retraining: bag_recorder.

    ros2 launch lifelong_learning bag_recorder.launch.py output:=/data/bags/shift_1

Arguments:
    output  bag directory to create; '' = ~/.ros/lifelong_learning/bags/bag_<UTC time> [default: '']

Parameters come from this package's config/bag_recorder.yaml (docs/parameters.md lists them:
topics, storage, max_bagfile_size, max_bagfile_duration_s). On a robot with rosbag2,
`ros2 bag record` does the same job; this node is for machines without it, and it closes a
file every max_bagfile_duration_s so that a crash loses at most that much. Call
`/bag_recorder/split_bagfile` before retraining from the bag while it records. (`launch` has
no PyPI wheel: without it use `lifelong-learning up config/robot.yaml --nodes bag_recorder`.)

Every node started here gets FASTDDS_DEFAULT_PROFILES_FILE = this package's
config/fastdds_large_messages.xml (camera-sized messages), unless it is set already.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from lifelong_learning.nodes.supervisor import middleware_environment


def generate_launch_description() -> LaunchDescription:
    config = os.path.join(get_package_share_directory("lifelong_learning"), "config")
    return LaunchDescription(
        [
            # large camera frames: the shipped Fast DDS profile, unless FASTDDS_DEFAULT_PROFILES_FILE is set
            *(SetEnvironmentVariable(name, value) for name, value in middleware_environment().items()),
            DeclareLaunchArgument("output", default_value="", description="bag directory to create"),
            Node(
                package="lifelong_learning",
                executable="bag_recorder",
                name="bag_recorder",
                parameters=[
                    os.path.join(config, "bag_recorder.yaml"),
                    {"output": ParameterValue(LaunchConfiguration("output"), value_type=str)},
                ],
                output="screen",
            ),
        ]
    )
