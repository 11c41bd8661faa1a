"""Offline retraining on request: the nystrom_tuner node (service `/nystrom_tuner/tune`).

    ros2 launch lifelong_learning nystrom_tuner.launch.py urdf_path:=/path/robot.urdf

Arguments:
    urdf_path  URDF for inverse-dynamics requests that give none [default: '']

Parameters come from this package's config/nystrom_tuner.yaml (docs/parameters.md lists
them). Each tuned model's path is published on `tuned_model` (latched); the learner nodes
listening there (their `model_topic`) hot-reload the models of their kind. (`launch` has no
PyPI wheel: on machines set up with the PyPI wheels use
`lifelong-learning up config/robot.yaml --nodes nystrom_tuner` instead.)

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
            DeclareLaunchArgument(
                "urdf_path", default_value="", description="URDF for inverse-dynamics tuning requests"
            ),
            Node(
                package="lifelong_learning",
                executable="nystrom_tuner",
                name="nystrom_tuner",
                parameters=[
                    os.path.join(config, "nystrom_tuner.yaml"),
                    {"urdf_path": ParameterValue(LaunchConfiguration("urdf_path"), value_type=str)},
                ],
                output="screen",
            ),
        ]
    )
