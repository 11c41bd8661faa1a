"""Object recognition: the feature_extractor (camera images → CNN features) and the
object_recognition learner (features → labels, learned incrementally).

    ros2 launch lifelong_learning object_recognition.launch.py image:=/camera/color/image_raw
    ros2 launch lifelong_learning object_recognition.launch.py namespace:=robot1 \
        params_file:=/robot/recognition.yaml

Arguments:
    namespace        namespace of both nodes (a robot's name) [default: '']
    params_file      ROS 2 params file applied after the shipped config/feature_extractor.yaml and
                     config/object_recognition.yaml (key the nodes /**/<node>) [default: '']
    use_sim_time     true: time from /clock (simulator, bag replay) [default: false]
    log_level        debug | info | warn | error | fatal [default: info]
    sigterm_timeout  seconds after Ctrl-C before SIGTERM (a node stopping ignores it) [default: 15]
    sigkill_timeout  seconds after SIGTERM before SIGKILL, which would lose a final checkpoint
                     still being written [default: 15]
    image            camera image topic (sensor_msgs/Image), remapped onto feature_extractor's
                     `image` [default: image]
    image_transport  'raw' (sensor_msgs/Image on `image`) or 'compressed' (CompressedImage, JPEG
                     or PNG, on `<image>/compressed`, as image_transport publishes it); '' = the
                     params file's (the shipped default: raw) [default: '']

Parameters: docs/parameters.md lists them; the order in which the files and arguments apply is
in lifelong_learning/nodes/launch_support.py. Teach the learner by publishing the object's name
on `teacher_label` (std_msgs/String) while the camera sees it; predictions come out on
`prediction`. (`launch` has no PyPI wheel: on machines set up with the PyPI wheels use
`lifelong-learning up config/robot.yaml --nodes feature_extractor,object_recognition` instead.)

Every node started here gets FASTDDS_DEFAULT_PROFILES_FILE = this package's
config/fastdds_large_messages.xml (camera-sized messages), unless it is set already.
"""

from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch_ros.actions import Node

from lifelong_learning.nodes.launch_support import common_actions, package_node


def _nodes(context: LaunchContext) -> list[Node]:
    return [
        package_node(context, "feature_extractor", parameters=("image_transport",), remappings=("image",)),
        package_node(context, "object_recognition"),
    ]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            *common_actions("the nodes"),
            DeclareLaunchArgument("image", default_value="image", description="camera image topic"),
            DeclareLaunchArgument(
                "image_transport",
                default_value="",
                description="raw: Image on image; compressed: CompressedImage on <image>/compressed",
            ),
            OpaqueFunction(function=_nodes),
        ]
    )
