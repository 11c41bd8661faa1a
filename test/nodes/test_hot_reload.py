"""Hot reload of the learner nodes on a real DDS graph.

- the nystrom_tuner retrains from a recorded bag and object_recognition swaps to its model;
- a reload in the middle of a stream: every message answered exactly once, by the old or by
  the new model, never by anything in between, and only by the new one after the swap;
- broken, incompatible and foreign model files leave the old model serving;
- inverse_dynamics ignores a classifier (and loads, or refuses, inverse-dynamics models).
"""

from __future__ import annotations

import struct
import threading
import time
import zipfile
from collections import Counter
from contextlib import contextmanager

import numpy as np
import pytest
from conftest import IMMEDIATE_SWAP_PARAMS

from lifelong_learning.core.model_file import ModelFile, save_model_file
from lifelong_learning.learners.random_features import RandomFourierFeatures
from lifelong_learning.learners.rlsc import IncrementalRLSC

pytestmark = pytest.mark.graph

DIM = 6
OLD_CLASSES = ("old_a", "old_b")
NEW_CLASSES = ("cup", "ball", "box")


def sample(rng, label, n=1, classes=NEW_CLASSES):
    centre = np.zeros(DIM)
    k = classes.index(label)
    centre[2 * k : 2 * k + 2] = 3.0
    return (centre + rng.normal(scale=0.3, size=(n, DIM))).astype(np.float32)


def dataset(rng, classes, n_per_class):
    X = np.vstack([sample(rng, c, n_per_class, classes) for c in classes])
    y = [c for c in classes for _ in range(n_per_class)]
    order = rng.permutation(len(y))
    return X[order], [y[i] for i in order]


def save_classifier(path, classes, seed, n_per_class=20, feature_map=None, dim=DIM):
    """An IncrementalRLSC trained offline on ``classes``, saved to ``path``; returns it."""
    rng = np.random.default_rng(seed)
    X, y = dataset(rng, classes, n_per_class)
    if dim != DIM:
        X = np.hstack([X, np.zeros((X.shape[0], dim - DIM), dtype=np.float32)])
    clf = IncrementalRLSC(lambdas=[1.0], alpha=0.0, feature_map=feature_map)
    clf.partial_fit(X.astype(np.float64), y)
    clf.save(path)
    return clf


def make_recognizer(context, **params):
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes.object_recognition import ObjectRecognitionNode

    defaults = {"diagnostics_period_s": 0.0, "warn_period_s": 0.0, **IMMEDIATE_SWAP_PARAMS}
    overrides = [Parameter(k, value=v) for k, v in {**defaults, **params}.items()]
    return ObjectRecognitionNode(context=context, parameter_overrides=overrides)


class Peer:
    """The rest of the graph: teacher, camera, tuner-like model announcer, service clients."""

    def __init__(self, context):
        from lifelong_learning.msg import Features, LabeledFeatures, Prediction
        from lifelong_learning.srv import GetClassifierInfo, Predict
        from rclpy.node import Node
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from std_msgs.msg import String

        self.node = Node("hot_reload_test_peer", context=context)
        self.labeled = self.node.create_publisher(LabeledFeatures, "labeled_features", QoSProfile(depth=100))
        self.features = self.node.create_publisher(Features, "features", QoSProfile(depth=100))
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.announce_pub = self.node.create_publisher(String, "tuned_model", latched)
        self.predictions = []
        self.node.create_subscription(Prediction, "prediction", self.predictions.append, 100)
        self.info = self.node.create_client(GetClassifierInfo, "/object_recognition/info")
        self.predict = self.node.create_client(Predict, "/object_recognition/predict")

    def announce(self, path):
        """Publish a model path like the tuner does, and wait until every subscriber has it."""
        from rclpy.duration import Duration
        from std_msgs.msg import String

        self.announce_pub.publish(String(data=str(path)))
        assert self.announce_pub.wait_for_all_acked(Duration(seconds=10))

    def recognizer_connected(self):
        return (
            self.labeled.get_subscription_count() > 0
            and self.features.get_subscription_count() > 0
            and self.announce_pub.get_subscription_count() > 0
            and self.node.count_publishers("prediction") > 0
            and self.info.service_is_ready()
            and self.predict.service_is_ready()
        )


def classify(executor, spin, peer, x, frame_id):
    """Send one Features message; the Prediction that answers it."""
    from lifelong_learning.msg import Features

    msg = Features(data=np.asarray(x, dtype=np.float32).tolist())
    msg.header.frame_id = frame_id
    peer.features.publish(msg)
    assert spin(executor, lambda: any(p.header.frame_id == frame_id for p in peer.predictions), 10)
    return next(p for p in peer.predictions if p.header.frame_id == frame_id)


def test_tuner_retrains_from_a_bag_and_the_recognizer_swaps_to_its_model(
    executor, spin, call, rclpy_context, tmp_path
):
    from lifelong_learning.action import TuneModel
    from lifelong_learning.msg import LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo
    from rclpy.action import ActionClient
    from rclpy.parameter import Parameter

    from lifelong_learning.io.bags import write_labeled_features
    from lifelong_learning.nodes.nystrom_tuner import NystromTunerNode

    rng = np.random.default_rng(1)
    X, y = dataset(rng, NEW_CLASSES, 50)
    write_labeled_features(tmp_path / "bag", X, y)

    recognizer = make_recognizer(rclpy_context, model_directory=str(tmp_path))
    tuner_params = {  # the path only: models as bytes are test_model_transfer's
        "diagnostics_period_s": 0.0,
        "device": "cpu",
        "output_dir": str(tmp_path / "models"),
        "model_data_topic": "",
    }
    tuner = NystromTunerNode(
        context=rclpy_context, parameter_overrides=[Parameter(k, value=v) for k, v in tuner_params.items()]
    )
    peer = Peer(rclpy_context)
    for node in (recognizer, tuner, peer.node):
        executor.add_node(node)
    assert spin(executor, peer.recognizer_connected, 20)

    # The robot has learned other classes online.
    for label in OLD_CLASSES:
        for x in sample(rng, label, 15, OLD_CLASSES):
            peer.labeled.publish(LabeledFeatures(data=x.tolist(), label=label))
    info = lambda: call(peer.info, GetClassifierInfo.Request())  # noqa: E731
    assert spin(executor, lambda: info().samples_seen == 30, 20)
    assert list(info().classes) == list(OLD_CLASSES)
    version = recognizer.model_version
    assert recognizer.diagnostic_values()["last reload"] == "never"

    # The tuner retrains from the bag (an action goal) and announces its model; the recognizer loads it.
    client = ActionClient(peer.node, TuneModel, "/nystrom_tuner/tune")
    assert spin(executor, client.server_is_ready, 20)
    sent = client.send_goal_async(
        TuneModel.Goal(bags=[str(tmp_path / "bag")], task="classification", centers=20, epochs=5)
    )
    assert spin(executor, sent.done, 20) and sent.result().accepted
    done = sent.result().get_result_async()
    assert spin(executor, done.done, 120), tuner.diagnostic_values()
    response = done.result().result
    assert response.success and response.promoted, response.message
    assert spin(executor, lambda: recognizer.model_version > version, 30), tuner.diagnostic_values()
    tuned = IncrementalRLSC.load(response.out_path)
    assert recognizer.model_version == version + 1
    now = info()
    assert sorted(now.classes) == sorted(NEW_CLASSES)
    assert list(now.classes) == [str(c) for c in tuned.classes_]
    assert now.samples_seen == tuned.n_samples
    assert recognizer.diagnostic_values()["last reload"].startswith(response.out_path)
    assert recognizer.diagnostic_values()["model version"] == str(version + 1)
    assert recognizer.rejections.total == 0

    # Predictions follow the tuned model.
    for i, label in enumerate(NEW_CLASSES * 2):
        x = sample(rng, label)[0]
        p = classify(executor, spin, peer, x, f"after{i}")
        assert p.label == label == tuned.predict(x.astype(np.float64)[None])[0]
        np.testing.assert_allclose(
            p.scores, tuned.decision_function(x.astype(np.float64))[0], rtol=1e-5, atol=1e-5
        )

    # ...and it keeps learning online from there.
    peer.labeled.publish(LabeledFeatures(data=sample(rng, "cup")[0].tolist(), label="cup"))
    assert spin(executor, lambda: info().samples_seen == tuned.n_samples + 1, 20)


@contextmanager
def spinning_alone(node):
    """Spin ``node`` in its own multi-threaded executor (as run_node does) in a background thread."""
    from rclpy.executors import MultiThreadedExecutor

    ex = MultiThreadedExecutor(num_threads=2, context=node.context)
    ex.add_node(node)
    thread = threading.Thread(target=ex.spin, daemon=True)
    thread.start()
    try:
        yield
    finally:
        ex.shutdown(timeout_sec=10)
        thread.join(10)
        node.destroy_node()


def test_reload_mid_stream_answers_every_message_once_by_the_old_or_the_new_model(
    executor, spin, rclpy_context, tmp_path
):
    from lifelong_learning.msg import Features

    old = save_classifier(tmp_path / "old.npz", OLD_CLASSES, seed=2)
    # a larger model (random features, D = 1000): reading and building it takes a while
    new = save_classifier(
        tmp_path / "new.npz", NEW_CLASSES, seed=3, feature_map=RandomFourierFeatures(DIM, 1000, 2.0)
    )
    rng = np.random.default_rng(4)
    inputs = np.vstack(
        [sample(rng, c, 20) for c in NEW_CLASSES] + [sample(rng, c, 20, OLD_CLASSES) for c in OLD_CLASSES]
    )
    as64 = inputs.astype(np.float64)
    expected = {"old": old.decision_function(as64), "new": new.decision_function(as64)}
    labels = {"old": list(OLD_CLASSES), "new": [str(c) for c in new.classes_]}

    recognizer = make_recognizer(rclpy_context, model_directory=str(tmp_path))
    assert recognizer.reload(tmp_path / "old.npz")[0]
    version = recognizer.model_version
    peer = Peer(rclpy_context)
    executor.add_node(peer.node)
    with spinning_alone(recognizer):
        assert spin(executor, peer.recognizer_connected, 20)
        sent: list[int] = []  # frame numbers; frame k carries inputs[k % len(inputs)]
        announced_at = None
        deadline = time.monotonic() + 60.0

        def answered_by_new():
            return sum(1 for p in peer.predictions if list(p.labels) == labels["new"])

        while answered_by_new() < 30 and time.monotonic() < deadline:
            if len(sent) - len(peer.predictions) < 3:  # at most 3 in flight: no queue overflows
                k = len(sent)
                msg = Features(data=inputs[k % len(inputs)].tolist())
                msg.header.frame_id = str(k)
                peer.features.publish(msg)
                sent.append(k)
            if announced_at is None and len(peer.predictions) >= 30:
                peer.announce(tmp_path / "new.npz")
                announced_at = len(peer.predictions)
            executor.spin_once(timeout_sec=0.01)
        assert spin(executor, lambda: len(peer.predictions) >= len(sent), 10)
        assert announced_at is not None and answered_by_new() >= 30

    # Exactly one answer per message.
    frames = Counter(int(p.header.frame_id) for p in peer.predictions)
    assert set(frames) == set(sent) and set(frames.values()) == {1}
    # Each answer is the old model's or the new model's, for that input; never a mixture.
    answered_by = []
    for p in sorted(peer.predictions, key=lambda p: int(p.header.frame_id)):
        k = int(p.header.frame_id) % len(inputs)
        which = "new" if list(p.labels) == labels["new"] else "old"
        assert list(p.labels) == labels[which]
        np.testing.assert_allclose(p.scores, expected[which][k], rtol=1e-5, atol=1e-5)
        assert p.label == labels[which][int(np.argmax(expected[which][k]))]
        answered_by.append(which)
    # Old answers up to the swap, only new ones after it.
    first_new = answered_by.index("new")
    assert set(answered_by[:first_new]) == {"old"} and set(answered_by[first_new:]) == {"new"}
    assert first_new >= announced_at
    assert recognizer.model_version == version + 1 and recognizer.rejections.total == 0
    print(
        f"{len(sent)} messages, {first_new - announced_at} answered by the old model while the new one loaded"
    )


def test_broken_incompatible_and_foreign_files_leave_the_old_model_serving(
    executor, spin, call, rclpy_context, tmp_path
):
    from lifelong_learning.srv import Predict

    from lifelong_learning.dynamics import SemiparametricInverseDynamics
    from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_path

    old = save_classifier(tmp_path / "old.npz", OLD_CLASSES, seed=5)
    data = (tmp_path / "old.npz").read_bytes()
    flipped = bytearray(data)
    with zipfile.ZipFile(tmp_path / "old.npz") as zf:
        member = zf.getinfo("engine0/B.npy")
    name_len, extra_len = struct.unpack_from("<HH", data, member.header_offset + 26)  # local header
    data_end = member.header_offset + 30 + name_len + extra_len + member.file_size
    flipped[data_end - 1] ^= 0xFF  # in the arrays (the last byte of B): the header still reads fine
    (tmp_path / "corrupt.npz").write_bytes(bytes(flipped))
    (tmp_path / "truncated.npz").write_bytes(data[: len(data) // 2])
    (tmp_path / "not_a_model.npz").write_text("hello")
    save_classifier(tmp_path / "wide.npz", NEW_CLASSES, seed=6, dim=DIM + 2)
    SemiparametricInverseDynamics(panda_urdf_path(), JOINT_NAMES, n_features=20).save(
        tmp_path / "dynamics.npz"
    )
    save_model_file(tmp_path / "other_kind.npz", ModelFile("some_other_learner", {}, {"w": np.ones(3)}))

    recognizer = make_recognizer(rclpy_context, model_directory=str(tmp_path))
    peer = Peer(rclpy_context)
    executor.add_node(recognizer)
    executor.add_node(peer.node)
    assert spin(executor, peer.recognizer_connected, 20)
    peer.announce(tmp_path / "old.npz")
    assert spin(executor, lambda: recognizer.model_version == 1, 10)
    x = sample(np.random.default_rng(7), "old_b", classes=OLD_CLASSES)[0]
    serving = old.decision_function(x.astype(np.float64))[0]

    def still_old():
        res = call(peer.predict, Predict.Request(data=x.tolist()))
        return res.success and res.label == "old_b" and np.allclose(res.scores, serving, rtol=1e-5, atol=1e-5)

    failed = lambda: recognizer.rejections.counts.get("model reload failed", 0)  # noqa: E731
    for n, name in enumerate(["corrupt", "truncated", "not_a_model", "wide", "absent"], start=1):
        peer.announce(tmp_path / f"{name}.npz")
        assert spin(executor, lambda n=n: failed() == n, 10), name
        assert recognizer.model_version == 1 and still_old(), name
    for n, name in enumerate(["dynamics", "other_kind"], start=1):  # for other nodes: ignored
        peer.announce(tmp_path / f"{name}.npz")
        assert spin(executor, lambda n=n: recognizer.ignored_model_files == n, 10), name
        assert recognizer.model_version == 1 and still_old() and failed() == 5, name
    assert recognizer.rejections.total == 5

    # A latched re-delivery of the file already serving does not reload it; a new file does.
    peer.announce(tmp_path / "old.npz")
    peer.announce(tmp_path / "absent.npz")  # processed after the previous one
    assert spin(executor, lambda: failed() == 6, 10)
    assert recognizer.model_version == 1
    save_classifier(tmp_path / "old.npz", NEW_CLASSES, seed=8)  # rewritten: a new modification time
    peer.announce(tmp_path / "old.npz")
    assert spin(executor, lambda: recognizer.model_version == 2, 10)
    assert not still_old()


def test_inverse_dynamics_ignores_a_classifier_and_refuses_another_robot(
    executor, spin, call, rclpy_context, tmp_path
):
    from lifelong_learning.srv import PredictTorques
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from lifelong_learning.dynamics import SemiparametricInverseDynamics
    from lifelong_learning.nodes.inverse_dynamics import InverseDynamicsNode
    from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_path, panda_urdf_text

    urdf = panda_urdf_text()
    save_classifier(tmp_path / "classifier.npz", NEW_CLASSES, seed=9)
    tuned = SemiparametricInverseDynamics(urdf, JOINT_NAMES, n_features=30, seed=3)
    rng = np.random.default_rng(10)
    q, qd, qdd = rng.uniform(-1, 1, (3, 40, 7))
    tuned.update(q, qd, qdd, rng.normal(size=(40, 7)))
    tuned.save(tmp_path / "tuned.npz")
    SemiparametricInverseDynamics(urdf, JOINT_NAMES[:6], n_features=30).save(tmp_path / "six_joints.npz")
    moved = urdf.replace('xyz="0 0 0.333"', 'xyz="0 0 0.4"', 1)
    assert moved != urdf
    SemiparametricInverseDynamics(moved, JOINT_NAMES, n_features=30).save(tmp_path / "other_robot.npz")

    # The classifier was announced before the node started: still delivered (transient local).
    peer = Peer(rclpy_context)
    executor.add_node(peer.node)
    peer.announce_pub.publish(String(data=str(tmp_path / "classifier.npz")))
    params = {
        "urdf_path": panda_urdf_path(),
        "joint_names": JOINT_NAMES,
        "n_features": 50,
        "diagnostics_period_s": 0.0,
        "model_directory": str(tmp_path),
        **IMMEDIATE_SWAP_PARAMS,
    }
    node = InverseDynamicsNode(
        context=rclpy_context, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]
    )
    executor.add_node(node)
    assert spin(executor, lambda: node.ignored_model_files == 1, 20)
    assert node.model_version == 0 and node.rejections.total == 0

    peer.announce(tmp_path / "tuned.npz")
    assert spin(executor, lambda: node.model_version == 1, 10)
    for n, name in enumerate(["six_joints", "other_robot"], start=1):
        peer.announce(tmp_path / f"{name}.npz")
        assert spin(executor, lambda n=n: node.rejections.counts.get("model reload failed") == n, 10), name
    assert node.model_version == 1

    client = peer.node.create_client(PredictTorques, "/inverse_dynamics/predict")
    request = PredictTorques.Request(
        name=JOINT_NAMES, position=q[0].tolist(), velocity=qd[0].tolist(), acceleration=qdd[0].tolist()
    )
    res = call(client, request)
    assert res.success
    np.testing.assert_allclose(res.effort, tuned.predict(q[0], qd[0], qdd[0]), rtol=1e-9, atol=1e-9)
