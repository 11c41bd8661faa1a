"""Bring up the online learners on a robot.

    ros2 launch lifelong_learning lifelong_learning.launch.py \
        image:=/camera/color/image_raw joint_states:=/joint_states urdf_path:=/path/robot.urdf

Each node reads its defaults from this package's config/<node>.yaml. The arguments remap the
usual topic names; set a learner's `enable_*` argument to false to leave it out.
(Written for robots with a ROS 2 distribution: `launch` has no PyPI wheel, so it is not run
on machines set up with the PyPI wheels; use `python -m lifelong_learning.nodes.<node>` there.)
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    config = os.path.join(get_package_share_directory("lifelong_learning"), "config")
    arg = LaunchConfiguration
    args = [
        DeclareLaunchArgument("image", default_value="image", description="camera image topic"),
        DeclareLaunchArgument("joint_states", default_value="joint_states", description="JointState topic"),
        DeclareLaunchArgument("urdf_path", default_value="", description="URDF file for inverse_dynamics"),
        DeclareLaunchArgument("enable_recognition", default_value="true"),
        DeclareLaunchArgument("enable_dynamics", default_value="true"),
    ]
    recognition = IfCondition(arg("enable_recognition"))
    nodes = [
        Node(
            package="lifelong_learning",
            executable="feature_extractor",
            name="feature_extractor",
            parameters=[os.path.join(config, "feature_extractor.yaml")],
            remappings=[("image", arg("image"))],
            condition=recognition,
        ),
        Node(
            package="lifelong_learning",
            executable="object_recognition",
            name="object_recognition",
            parameters=[os.path.join(config, "object_recognition.yaml")],
            condition=recognition,
        ),
        Node(
            package="lifelong_learning",
            executable="inverse_dynamics",
            name="inverse_dynamics",
            parameters=[os.path.join(config, "inverse_dynamics.yaml"), {"urdf_path": arg("urdf_path")}],
            remappings=[("joint_states", arg("joint_states"))],
            condition=IfCondition(arg("enable_dynamics")),
        ),
    ]
    return LaunchDescription(args + nodes)
