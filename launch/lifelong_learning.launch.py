"""Bring up every online learner of the package on a robot (includes the per-learner files).

    ros2 launch lifelong_learning lifelong_learning.launch.py \
        image:=/camera/color/image_raw joint_states:=/joint_states
    ros2 launch lifelong_learning lifelong_learning.launch.py namespace:=robot1 \
        params_file:=/robot/lifelong_learning.yaml use_sim_time:=true log_level:=warn

Arguments:
    namespace           namespace of every node (a robot's name) [default: '']
    params_file         one ROS 2 params file for all the nodes, applied after each node's shipped
                        config/<node>.yaml (key the nodes /**/<node>, as config/robot.yaml does)
                        [default: '']
    use_sim_time        true: time from /clock (simulator, bag replay) [default: false]
    log_level           debug | info | warn | error | fatal [default: info]
    sigterm_timeout     seconds after Ctrl-C before SIGTERM (a node stopping ignores it) [default: 15]
    sigkill_timeout     seconds after SIGTERM before SIGKILL, which would lose a final checkpoint
                        still being written [default: 15]
    image               camera image topic (sensor_msgs/Image) [default: image]
    image_transport     raw | compressed (CompressedImage on <image>/compressed); '' = the params
                        file's (the shipped default: raw) [default: '']
    joint_states        sensor_msgs/JointState topic with measured effort [default: joint_states]
    robot_description   std_msgs/String URDF topic (robot_state_publisher), used when urdf_path
                        is empty [default: robot_description]
    urdf_path           URDF file for inverse_dynamics and nystrom_tuner; '' = the params file's
                        (the shipped default: the robot_description topic) [default: '']
    joint_names         joints inverse_dynamics models, `a,b,c`; '' = the params file's (the
                        shipped default: the URDF's moving joints the joint states carry) [default: '']
    enable_recognition  start feature_extractor + object_recognition [default: true]
    enable_dynamics     start inverse_dynamics [default: true]
    enable_tuner        start nystrom_tuner [default: true]
    enable_recording    start bag_recorder (the learners' topics to an MCAP bag) [default: false]
    bag                 bag directory for bag_recorder; '' = a new one under ~/.ros [default: '']

Each node reads its defaults from this package's config/<node>.yaml (docs/parameters.md lists
them; the order in which files and arguments apply: lifelong_learning/nodes/launch_support.py);
the per-learner files object_recognition.launch.py, inverse_dynamics.launch.py and
nystrom_tuner.launch.py start one learner each, bag_recorder.launch.py the recorder.
(`launch` has no PyPI wheel: on machines set up with the PyPI wheels use
`lifelong-learning up config/robot.yaml` instead.)

Every node started here gets FASTDDS_DEFAULT_PROFILES_FILE = this package's
config/fastdds_large_messages.xml (camera-sized messages), unless it is set already.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

from lifelong_learning.nodes.launch_support import COMMON_ARGUMENTS, common_actions


def generate_launch_description() -> LaunchDescription:
    here = os.path.join(get_package_share_directory("lifelong_learning"), "launch")
    arg = LaunchConfiguration
    common = {name: arg(name) for name in COMMON_ARGUMENTS}  # what every included file takes as well
    return LaunchDescription(
        [
            *common_actions("every node"),
            DeclareLaunchArgument("image", default_value="image", description="camera image topic"),
            DeclareLaunchArgument(
                "image_transport", default_value="", description="raw | compressed (<image>/compressed)"
            ),
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
            DeclareLaunchArgument("enable_recognition", default_value="true"),
            DeclareLaunchArgument("enable_dynamics", default_value="true"),
            DeclareLaunchArgument("enable_tuner", default_value="true"),
            DeclareLaunchArgument("enable_recording", default_value="false"),
            DeclareLaunchArgument("bag", default_value="", description="bag directory for bag_recorder"),
            IncludeLaunchDescription(
                PythonLaunchDescriptionSource(os.path.join(here, "object_recognition.launch.py")),
                launch_arguments={
                    **common,
                    "image": arg("image"),
                    "image_transport": arg("image_transport"),
                }.items(),
                condition=IfCondition(arg("enable_recognition")),
            ),
            IncludeLaunchDescription(
                PythonLaunchDescriptionSource(os.path.join(here, "inverse_dynamics.launch.py")),
                launch_arguments={
                    **common,
                    "joint_states": arg("joint_states"),
                    "robot_description": arg("robot_description"),
                    "urdf_path": arg("urdf_path"),
                    "joint_names": arg("joint_names"),
                }.items(),
                condition=IfCondition(arg("enable_dynamics")),
            ),
            IncludeLaunchDescription(
                PythonLaunchDescriptionSource(os.path.join(here, "nystrom_tuner.launch.py")),
                launch_arguments={**common, "urdf_path": arg("urdf_path")}.items(),
                condition=IfCondition(arg("enable_tuner")),
            ),
            IncludeLaunchDescription(
                PythonLaunchDescriptionSource(os.path.join(here, "bag_recorder.launch.py")),
                launch_arguments={**common, "output": arg("bag")}.items(),
                condition=IfCondition(arg("enable_recording")),
            ),
        ]
    )
