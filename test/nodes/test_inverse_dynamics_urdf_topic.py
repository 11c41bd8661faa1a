"""inverse_dynamics without robot_description/urdf_path: it waits for the URDF on the
robot_description topic (latched, as robot_state_publisher publishes it), rejects joint states
until then, and builds its model once the URDF arrives."""

import pytest
from conftest import make_dynamics_node

from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, joint_states, panda_urdf_text

pytestmark = pytest.mark.graph


def make_node(context, **params):
    return make_dynamics_node(context, urdf=False, **params)


def latched_publisher(node, topic="robot_description"):
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    qos = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    return node.create_publisher(String, topic, qos)


def to_message(state):
    from sensor_msgs.msg import JointState

    msg = JointState(name=list(state["name"]), position=list(state["position"]))
    msg.velocity, msg.effort = list(state["velocity"]), list(state["effort"])
    sec = int(state["stamp"])
    msg.header.stamp.sec, msg.header.stamp.nanosec = sec, round((state["stamp"] - sec) * 1e9)
    return msg


@pytest.fixture(scope="module")
def states():
    return list(joint_states(PandaSimulation().run(0.5, seed=3), rate_hz=100.0))


def test_waits_for_the_urdf_topic_then_learns(executor, spin, tmp_path, states):
    from lifelong_learning.srv import PredictTorques
    from rclpy.node import Node
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    checkpoint = tmp_path / "dyn.llm"
    node = make_node(
        executor.context, checkpoint_path=str(checkpoint), robot_description_topic="my_robot/urdf"
    )
    peer = Node("urdf_test_peer", context=executor.context)
    executor.add_node(node)
    executor.add_node(peer)
    joints = peer.create_publisher(JointState, "joint_states", 10)
    torques = []
    peer.create_subscription(JointState, "predicted_torque", torques.append, 10)
    predict = peer.create_client(PredictTorques, "/inverse_dynamics/predict")
    assert spin(executor, lambda: joints.get_subscription_count() > 0, 10)

    # no URDF yet: joint states are rejected (counted), no service, nothing to checkpoint
    assert not node.ready and node.model is None
    for state in states[:3]:
        joints.publish(to_message(state))
    assert spin(executor, lambda: node.rejections.counts.get("no robot description yet") == 3, 10)
    assert not torques and not predict.service_is_ready()
    assert not node.checkpoint() and not checkpoint.exists()
    assert node.diagnostic_values()["samples learned"] == "no robot description yet"

    # an unusable description is rejected; the node keeps waiting
    urdf_pub = latched_publisher(peer, "my_robot/urdf")
    urdf_pub.publish(String(data="<robot name='empty'></robot>"))
    reason = "cannot build the model from the robot description"
    assert spin(executor, lambda: node.rejections.counts.get(reason) == 1, 10)
    assert not node.ready

    # the robot's URDF: the model is built once, joint states are answered and learned
    urdf_pub.publish(String(data=panda_urdf_text()))
    assert spin(executor, lambda: node.ready, 20)
    assert node.joint_names == JOINT_NAMES
    assert spin(executor, predict.service_is_ready, 10)
    for k, state in enumerate(states[3:13]):
        joints.publish(to_message(state))
        assert spin(executor, lambda k=k: len(torques) > k, 10)
    # every one answered; learned once the q̈ filter holds a full window (9 samples by default)
    assert node.learner.wait_idle(10)  # learned after answering, on the learning thread
    assert node.model.n_samples == 10 - 8 and list(torques[-1].name) == JOINT_NAMES
    model = node.model
    urdf_pub.publish(String(data=panda_urdf_text() + "\n<!-- edited -->"))
    assert spin(executor, lambda: node.rejections.counts.get("robot description changed") == 1, 10)
    assert node.model is model
    node.shutdown()
    assert checkpoint.exists()


def test_a_urdf_published_before_the_node_starts_is_received(executor, spin):
    from rclpy.node import Node
    from std_msgs.msg import String

    peer = Node("urdf_test_peer", context=executor.context)
    executor.add_node(peer)
    latched_publisher(peer).publish(String(data=panda_urdf_text()))
    node = make_node(executor.context)
    executor.add_node(node)
    assert spin(executor, lambda: node.ready, 20)
    assert node.rejections.total == 0


def test_a_missing_urdf_file_is_still_an_error_at_start(executor):
    with pytest.raises(OSError):
        make_node(executor.context, urdf_path="/nonexistent/robot.urdf")
