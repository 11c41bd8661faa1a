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
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from lifelong_learning.nodes.launch_support import log_level, node_parameters, stop_escalation, stop_timeout
from lifelong_learning.nodes.supervisor import middleware_environment


def _nodes(context: LaunchContext) -> list[Node]:
    namespace = LaunchConfiguration("namespace").perform(context)
    params_file = LaunchConfiguration("params_file").perform(context)
    use_sim_time = LaunchConfiguration("use_sim_time").perform(context)
    ros_arguments = ["--log-level", log_level(LaunchConfiguration("log_level").perform(context))]
    stop = stop_escalation(
        LaunchConfiguration("sigterm_timeout").perform(context),
        LaunchConfiguration("sigkill_timeout").perform(context),
    )
    return [
        Node(
            package="lifelong_learning",
            executable="feature_extractor",
            name="feature_extractor",
            namespace=namespace,
            parameters=node_parameters(
                "feature_extractor",
                params_file,
                use_sim_time,
                {"image_transport": LaunchConfiguration("image_transport").perform(context)},
            ),
            remappings=[("image", LaunchConfiguration("image"))],
            ros_arguments=ros_arguments,
            output="screen",
            **stop,
        ),
        Node(
            package="lifelong_learning",
            executable="object_recognition",
            name="object_recognition",
            namespace=namespace,
            parameters=node_parameters("object_recognition", params_file, use_sim_time, {}),
            ros_arguments=ros_arguments,
            output="screen",
            **stop,
        ),
    ]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            # large camera frames: the shipped Fast DDS profile, unless FASTDDS_DEFAULT_PROFILES_FILE is set
            *(SetEnvironmentVariable(name, value) for name, value in middleware_environment().items()),
            DeclareLaunchArgument("namespace", default_value="", description="namespace of the nodes"),
            DeclareLaunchArgument("sigterm_timeout", **stop_timeout("sigterm_timeout")),
            DeclareLaunchArgument("sigkill_timeout", **stop_timeout("sigkill_timeout")),
            DeclareLaunchArgument(
                "params_file", default_value="", description="params file applied after the shipped ones"
            ),
            DeclareLaunchArgument("use_sim_time", default_value="false", description="time from /clock"),
            DeclareLaunchArgument(
                "log_level", default_value="info", description="debug|info|warn|error|fatal"
            ),
            DeclareLaunchArgument("image", default_value="image", description="camera image topic"),
            DeclareLaunchArgument(
                "image_transport",
                default_value="",
                description="raw: Image on image; compressed: CompressedImage on <image>/compressed",
            ),
            OpaqueFunction(function=_nodes),
        ]
    )
