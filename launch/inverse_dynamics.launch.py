"""Inverse dynamics learned online: joint states in, predicted torques out (`predicted_torque`).

    ros2 launch lifelong_learning inverse_dynamics.launch.py joint_states:=/franka/joint_states
    ros2 launch lifelong_learning inverse_dynamics.launch.py urdf_path:=/path/robot.urdf

Arguments:
    joint_states       sensor_msgs/JointState topic (with measured effort), remapped onto the
                       node's `joint_states` [default: joint_states]
    robot_description  std_msgs/String topic with the URDF (robot_state_publisher's, transient
                       local), used when urdf_path is empty [default: robot_description]
    urdf_path          URDF file; '' takes the URDF from the robot_description topic [default: '']

Parameters come from this package's config/inverse_dynamics.yaml (docs/parameters.md lists
them). (`launch` has no PyPI wheel: on machines set up with the PyPI wheels use
`lifelong-learning up config/robot.yaml --nodes inverse_dynamics` instead.)

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
                "joint_states", default_value="joint_states", description="sensor_msgs/JointState topic"
            ),
            DeclareLaunchArgument(
                "robot_description",
                default_value="robot_description",
                description="std_msgs/String URDF topic (used when urdf_path is empty)",
            ),
            DeclareLaunchArgument(
                "urdf_path", default_value="", description="URDF file ('' = the robot_description topic)"
            ),
            Node(
                package="lifelong_learning",
                executable="inverse_dynamics",
                name="inverse_dynamics",
                parameters=[
                    os.path.join(config, "inverse_dynamics.yaml"),
                    {"urdf_path": ParameterValue(LaunchConfiguration("urdf_path"), value_type=str)},
                ],
                remappings=[
                    ("joint_states", LaunchConfiguration("joint_states")),
                    ("robot_description", LaunchConfiguration("robot_description")),
                ],
                output="screen",
            ),
        ]
    )
