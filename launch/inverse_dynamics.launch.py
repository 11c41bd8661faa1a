"""Inverse dynamics learned online: joint states in, predicted torques out (`predicted_torque`).

    ros2 launch lifelong_learning inverse_dynamics.launch.py joint_states:=/franka/joint_states
    ros2 launch lifelong_learning inverse_dynamics.launch.py namespace:=robot1 use_sim_time:=true \
        joint_names:=panda_joint1,panda_joint2,panda_joint3,panda_joint4,panda_joint5,panda_joint6,panda_joint7

Arguments:
    namespace          namespace of the node (a robot's name); its topics and services follow [default: '']
    params_file        ROS 2 params file applied after the shipped config/inverse_dynamics.yaml
                       (key the node /**/inverse_dynamics); '' = the shipped defaults only [default: '']
    use_sim_time       true: time from /clock (simulator, bag replay) [default: false]
    log_level          debug | info | warn | error | fatal [default: info]
    sigterm_timeout    seconds after Ctrl-C before SIGTERM (a node stopping ignores it) [default: 15]
    sigkill_timeout    seconds after SIGTERM before SIGKILL, which would lose a final checkpoint
                       still being written [default: 15]
    joint_states       sensor_msgs/JointState topic (with measured effort), remapped onto the
                       node's `joint_states` [default: joint_states]
    robot_description  std_msgs/String topic with the URDF (robot_state_publisher's, transient
                       local), used when urdf_path is empty [default: robot_description]
    urdf_path          URDF file; '' = the params file's (the shipped default: the
                       robot_description topic) [default: '']
    joint_names        joints to model, `a,b,c` or `[a, b, c]`; '' = the params file's (the shipped
                       default: the URDF's moving joints that the first joint states carry) [default: '']

Parameters: docs/parameters.md lists them; the order in which the files and arguments apply is
in lifelong_learning/nodes/launch_support.py. (`launch` has no PyPI wheel: on machines set up
with the PyPI wheels use `lifelong-learning up config/robot.yaml --nodes inverse_dynamics`.)

Every node started here gets FASTDDS_DEFAULT_PROFILES_FILE = this package's
config/fastdds_large_messages.xml (camera-sized messages), unless it is set already.
"""

from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch_ros.actions import Node

from lifelong_learning.nodes.launch_support import common_actions, package_node


def _nodes(context: LaunchContext) -> list[Node]:
    return [
        package_node(
            context,
            "inverse_dynamics",
            parameters=("urdf_path", "joint_names"),
            remappings=("joint_states", "robot_description"),
        )
    ]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            *common_actions(),
            DeclareLaunchArgument(
                "joint_states", default_value="joint_states", description="sensor_msgs/JointState topic"
            ),
            DeclareLaunchArgument(
                "robot_description",
                default_value="robot_description",
                description="std_msgs/String URDF topic (used when urdf_path is empty)",
            ),
            DeclareLaunchArgument(
                "urdf_path", default_value="", description="URDF file ('' = the params file's)"
            ),
            DeclareLaunchArgument(
                "joint_names", default_value="", description="joints to model, a,b,c ('' = the params file's)"
            ),
            OpaqueFunction(function=_nodes),
        ]
    )
