"""Offline retraining on request: the nystrom_tuner node (service `~/tune`).

    ros2 launch lifelong_learning nystrom_tuner.launch.py urdf_path:=/path/robot.urdf
    ros2 launch lifelong_learning nystrom_tuner.launch.py namespace:=robot1 log_level:=debug

Arguments:
    namespace    namespace of the node (a robot's name) [default: '']
    params_file  ROS 2 params file applied after the shipped config/nystrom_tuner.yaml (key the
                 node /**/nystrom_tuner) [default: '']
    use_sim_time true: time from /clock (simulator, bag replay) [default: false]
    log_level    debug | info | warn | error | fatal [default: info]
    sigterm_timeout
                 seconds after Ctrl-C before SIGTERM (a node stopping ignores it)
                 [default: 15]
    sigkill_timeout
                 seconds after SIGTERM before SIGKILL, which would lose a final
                 checkpoint still being written [default: 15]
    urdf_path    URDF for inverse-dynamics requests that give none; '' = the params file's [default: '']

Parameters: docs/parameters.md lists them; the order in which the files and arguments apply is
in lifelong_learning/nodes/launch_support.py. Each tuned model's path is published on
`tuned_model` (latched); the learner nodes listening there (their `model_topic`) hot-reload the
models of their kind. (`launch` has no PyPI wheel: on machines set up with the PyPI wheels use
`lifelong-learning up config/robot.yaml --nodes nystrom_tuner` instead.)

Every node started here gets FASTDDS_DEFAULT_PROFILES_FILE = this package's
config/fastdds_large_messages.xml (camera-sized messages), unless it is set already.
"""

from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch_ros.actions import Node

from lifelong_learning.nodes.launch_support import common_actions, package_node


def _nodes(context: LaunchContext) -> list[Node]:
    return [package_node(context, "nystrom_tuner", parameters=("urdf_path",))]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            *common_actions(),
            DeclareLaunchArgument(
                "urdf_path", default_value="", description="URDF for inverse-dynamics tuning requests"
            ),
            OpaqueFunction(function=_nodes),
        ]
    )
