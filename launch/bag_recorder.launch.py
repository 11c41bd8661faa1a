"""Record the learners' topics to a rosbag2 bag (MCAP) for offline retraining: bag_recorder.

    ros2 launch lifelong_learning bag_recorder.launch.py output:=/data/bags/shift_1
    ros2 launch lifelong_learning bag_recorder.launch.py namespace:=robot1 use_sim_time:=true

Arguments:
    namespace    namespace of the node (a robot's name): it records that robot's topics [default: '']
    params_file  ROS 2 params file applied after the shipped config/bag_recorder.yaml (key the
                 node /**/bag_recorder) [default: '']
    use_sim_time true: time from /clock (simulator, bag replay) [default: false]
    log_level    debug | info | warn | error | fatal [default: info]
    sigterm_timeout
                 seconds after Ctrl-C before SIGTERM (a node stopping ignores it)
                 [default: 15]
    sigkill_timeout
                 seconds after SIGTERM before SIGKILL, which would lose a final
                 checkpoint still being written [default: 15]
    output       bag directory to create; '' = the params file's (the shipped default: a new
                 ~/.ros/lifelong_learning/bags/bag_<UTC time>) [default: '']

Parameters: docs/parameters.md lists them (topics, storage, max_bagfile_size,
max_bagfile_duration_s); the order in which the files and arguments apply is in
lifelong_learning/nodes/launch_support.py. On a robot with rosbag2, `ros2 bag record` does the
same job; this node is for machines without it, and it closes a file every
max_bagfile_duration_s so that a crash loses at most that much. Call
`~/split_bagfile` before retraining from the bag while it records. (`launch` has no PyPI wheel:
without it use `lifelong-learning up config/robot.yaml --nodes bag_recorder`.)

Every node started here gets FASTDDS_DEFAULT_PROFILES_FILE = this package's
config/fastdds_large_messages.xml (camera-sized messages), unless it is set already.
"""

from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch_ros.actions import Node

from lifelong_learning.nodes.launch_support import common_actions, package_node


def _nodes(context: LaunchContext) -> list[Node]:
    return [package_node(context, "bag_recorder", parameters=("output",))]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            *common_actions(),
            DeclareLaunchArgument("output", default_value="", description="bag directory to create"),
            OpaqueFunction(function=_nodes),
        ]
    )
