"""A peer process for the foundation's graph test (the other end of the wire, not a fake of
any node of the package): echoes Features as Predictions and serves Predict.

Run: python graph_peer.py  (inherits ROS_DOMAIN_ID from the test).
"""

import rclpy
from lifelong_learning.msg import Features, Prediction
from lifelong_learning.srv import Predict
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node


class Peer(Node):
    def __init__(self) -> None:
        super().__init__("graph_peer")
        self.pub = self.create_publisher(Prediction, "peer/predictions", 10)
        self.create_subscription(Features, "peer/features", self.on_features, 10)
        self.create_service(Predict, "peer/predict", self.on_predict)

    def on_features(self, msg: Features) -> None:
        out = Prediction(header=msg.header, label=f"dim{len(msg.data)}", confidence=1.0)
        out.labels = ["sum"]
        out.scores = [float(sum(msg.data))]
        self.pub.publish(out)

    def on_predict(self, req: Predict.Request, res: Predict.Response) -> Predict.Response:
        res.success = True
        res.label = "sum"
        res.scores = [float(sum(req.data))]
        return res


if __name__ == "__main__":
    rclpy.init()
    node = Peer()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
