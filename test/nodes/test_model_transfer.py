"""Models over ROS, learner side: a model file crosses from the test process to a
node process as lifelong_learning/ModelFile bytes, with no shared path (the file is written
outside the node's model_directory, read and deleted before it is published), and is loaded; a
wrong checksum, another feature size, another robot's joints or kinematics are refused with a
reason and counted, another kind is ignored, and the serving model is unchanged after each; a
name that points elsewhere stays in the node's folder; the model a received one replaced is the
rollback target."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import IMMEDIATE_SWAP, DiagnosticsReader, call_service, first_call, node_argv, spin_until

from lifelong_learning.dynamics import SemiparametricInverseDynamics
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_path, panda_urdf_text

pytestmark = pytest.mark.graph

DIM = 8
TAUGHT = ("mug", "duck")


def sample(rng: np.random.Generator, label: str, classes: tuple[str, ...], n: int = 1, dim: int = DIM) -> Any:
    centre = np.zeros(dim)
    k = classes.index(label)
    centre[2 * k : 2 * k + 2] = 3.0
    return (centre + rng.normal(scale=0.3, size=(n, dim))).astype(np.float32)


def classifier(classes: tuple[str, ...], seed: int, dim: int = DIM) -> IncrementalRLSC:
    rng = np.random.default_rng(seed)
    X = np.vstack([sample(rng, c, classes, 20, dim) for c in classes]).astype(np.float64)
    clf = IncrementalRLSC(lambdas=[1.0], alpha=0.0)
    clf.partial_fit(X, [c for c in classes for _ in range(20)])
    return clf


def as_bytes(model: Any, folder: Path, name: str) -> bytes:
    """The bytes of ``model``'s file, written in the tuner's own ``folder`` and deleted again: the
    node can only get them from the message."""
    path = folder / name
    model.save(path)
    data = path.read_bytes()
    path.unlink()
    return data


class Sender:
    """A tuner-like publisher of model files (latched), and a watcher of the node's diagnostics."""

    def __init__(self, executor: Any, node_name: str) -> None:
        from lifelong_learning.msg import ModelFile
        from rclpy.node import Node
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

        self.executor = executor
        self.node = Node("model_sender", context=executor.context)
        executor.add_node(self.node)
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.pub = self.node.create_publisher(ModelFile, "tuned_model_data", latched)
        self.node_name = node_name
        self.diag = DiagnosticsReader(self.node)

    def send(self, kind: str, name: str, data: bytes, sha256: str | None = None, reader: bool = True) -> None:
        """Publish one model file and wait until the node's reader has it (``reader``; else it is
        only latched, for a node still to come)."""
        import array

        from lifelong_learning.msg import ModelFile
        from rclpy.duration import Duration

        assert not reader or spin_until(self.executor, lambda: self.pub.get_subscription_count() > 0, 30)
        msg = ModelFile(kind=kind, name=name, sha256=sha256 or hashlib.sha256(data).hexdigest())
        msg.stamp = self.node.get_clock().now().to_msg()
        msg.data = array.array("B", data)
        self.pub.publish(msg)
        assert self.pub.wait_for_all_acked(Duration(seconds=10))

    def values(self) -> dict[str, str]:
        """The node's latest diagnostics values."""
        return self.diag.values(self.node_name)

    def value(self, key: str, want: str, timeout: float = 60.0) -> bool:
        """Wait until the node's diagnostics show ``key`` = ``want`` (60 s: a process may have just
        started, its imports, its model and the discovery of /diagnostics included)."""
        return spin_until(self.executor, lambda: self.values().get(key) == want, timeout)


def test_a_classifier_crosses_as_bytes_and_bad_ones_are_refused(executor, start_process, tmp_path):
    from lifelong_learning.msg import LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo, Predict
    from std_srvs.srv import Trigger

    node_name = "object_recognition"
    models, tuner = tmp_path / "robot_models", tmp_path / "tuner_output"
    tuner.mkdir()
    received = models / "received" / node_name
    proc = start_process(
        node_argv(
            node_name,
            *("-p", f"model_directory:={models}", "-p", "diagnostics_period_s:=0.25"),
            *("-p", "lambdas:=[1.0]", "-p", "alpha:='0.0'", *IMMEDIATE_SWAP),
        )
    )
    sender = Sender(executor, node_name)
    peer = sender.node
    predict = peer.create_client(Predict, f"/{node_name}/predict")
    info = peer.create_client(GetClassifierInfo, f"/{node_name}/info")
    rollback = peer.create_client(Trigger, f"/{node_name}/rollback")
    labeled = peer.create_publisher(LabeledFeatures, "labeled_features", 100)
    probes = np.random.default_rng(5).normal(scale=2.0, size=(5, DIM)).astype(np.float32)

    def predictions() -> list[tuple[list[str], list[float]]]:
        answers = [call_service(executor, predict, Predict.Request(data=x.tolist())) for x in probes]
        return [(list(a.labels), list(a.scores)) for a in answers]

    # The robot learns online (8-d features).
    assert first_call(executor, info, GetClassifierInfo.Request()).samples_seen == 0
    assert spin_until(executor, lambda: labeled.get_subscription_count() > 0, 30)
    rng = np.random.default_rng(0)
    for label in TAUGHT * 10:
        labeled.publish(LabeledFeatures(data=sample(rng, label, TAUGHT)[0].tolist(), label=label))
    seen = lambda: call_service(executor, info, GetClassifierInfo.Request()).samples_seen  # noqa: E731
    assert spin_until(executor, lambda: seen() == 20, 20), proc.log()
    learned = predictions()

    # A retrained model arrives as bytes: loaded, its predictions served.
    tuned = classifier(("cup", "ball", "box"), seed=1)
    sender.send(tuned.kind, "tuned-20250101.model", as_bytes(tuned, tuner, "tuned-20250101.model"))
    assert sender.value("models received", "1"), proc.log()
    assert not any(tuner.iterdir())  # nothing the node could have read from the tuner's folder
    assert sorted(p.name for p in received.iterdir()) == ["tuned-20250101.model"]
    serving = predictions()
    for (labels, scores), x in zip(serving, probes, strict=True):
        assert labels == ["cup", "ball", "box"]
        expected = tuned.decision_function(x.astype(np.float64))[0]
        np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)
    assert sender.values()["last model received"].endswith(": loaded")

    # A wrong checksum: refused and counted, nothing stored, the tuned model keeps serving.
    other = as_bytes(classifier(("cup", "ball"), seed=2), tuner, "other.model")
    sender.send(tuned.kind, "other.model", other, sha256=hashlib.sha256(b"something else").hexdigest())
    assert sender.value("rejected: model checksum mismatch", "1"), proc.log()
    assert predictions() == serving
    # Another feature size (10-d): refused with the reason, its file removed, nothing changes.
    wide = as_bytes(classifier(("cup", "ball"), seed=3, dim=10), tuner, "wide.model")
    sender.send(tuned.kind, "wide.model", wide)
    assert sender.value("rejected: model reload failed", "1"), proc.log()
    assert "10 input features, this node expects 8" in sender.values()["last model received"]
    assert predictions() == serving
    # Another kind (the inverse dynamics node's): ignored, not rejected.
    dynamics = SemiparametricInverseDynamics(panda_urdf_text(), JOINT_NAMES, n_features=10)
    sender.send(dynamics.kind, "dynamics.model", as_bytes(dynamics, tuner, "dynamics.model"))
    assert sender.value("ignored model files", "1"), proc.log()
    assert predictions() == serving
    assert sender.values()["rejected"] == "2" and sender.values()["models received"] == "1"
    assert sorted(p.name for p in received.iterdir()) == ["tuned-20250101.model"]

    # A name that leads elsewhere is stored under its last component, in the node's folder.
    escaping = classifier(("jar", "can"), seed=4)
    sender.send(escaping.kind, "../../../escaped.model", as_bytes(escaping, tuner, "escaped.model"))
    assert sender.value("models received", "2"), proc.log()
    assert sorted(p.name for p in received.iterdir()) == ["escaped.model"]
    assert not (tmp_path / "escaped.model").exists() and not (models / "escaped.model").exists()
    assert predictions()[0][0] == ["jar", "can"]

    # The models received replaced were kept: two rollbacks go back to what the robot learned.
    for expected in (serving, learned):
        res = call_service(executor, rollback, Trigger.Request())
        assert res.success, res.message
        assert predictions() == expected
    assert proc.alive()


def test_inverse_dynamics_refuses_another_robots_model_and_loads_its_own(executor, start_process, tmp_path):
    from lifelong_learning.srv import PredictTorques
    from std_srvs.srv import Trigger

    node_name = "inverse_dynamics"
    models, tuner = tmp_path / "robot_models", tmp_path / "tuner_output"
    tuner.mkdir()
    proc = start_process(
        node_argv(
            node_name,
            *("-p", f"urdf_path:={panda_urdf_path()}", "-p", f"joint_names:={JOINT_NAMES}".replace("'", "")),
            *("-p", "n_features:=30", "-p", f"model_directory:={models}", "-p", "diagnostics_period_s:=0.25"),
            *IMMEDIATE_SWAP,
        )
    )
    sender = Sender(executor, node_name)
    predict = sender.node.create_client(PredictTorques, f"/{node_name}/predict")
    rollback = sender.node.create_client(Trigger, f"/{node_name}/rollback")
    rng = np.random.default_rng(10)
    q, qd, qdd = rng.uniform(-1, 1, (3, 40, 7))
    request = PredictTorques.Request(
        name=JOINT_NAMES, position=q[0].tolist(), velocity=qd[0].tolist(), acceleration=qdd[0].tolist()
    )
    first = first_call(executor, predict, request)
    assert first.success, first.message

    def torques() -> list[float]:
        res = call_service(executor, predict, request)
        assert res.success, res.message
        return list(res.effort)

    # Another robot's models: six of its joints, or the same joints on other kinematics.
    urdf = panda_urdf_text()
    moved = urdf.replace('xyz="0 0 0.333"', 'xyz="0 0 0.4"', 1)
    assert moved != urdf
    for n, (name, model) in enumerate(
        [
            ("six_joints.model", SemiparametricInverseDynamics(urdf, JOINT_NAMES[:6], n_features=30)),
            ("other_robot.model", SemiparametricInverseDynamics(moved, JOINT_NAMES, n_features=30)),
        ],
        start=1,
    ):
        sender.send(model.kind, name, as_bytes(model, tuner, name))
        assert sender.value("rejected: model reload failed", str(n)), proc.log()
        assert torques() == list(first.effort)
    assert "another robot" in sender.values()["last model received"]
    assert sender.values()["models received"] == "0"

    # Its own robot's retrained model: loaded and served; the replaced one is the rollback target.
    tuned = SemiparametricInverseDynamics(urdf, JOINT_NAMES, n_features=30, seed=3)
    tuned.update(q, qd, qdd, rng.normal(size=(40, 7)))
    sender.send(tuned.kind, "tuned.model", as_bytes(tuned, tuner, "tuned.model"))
    assert sender.value("models received", "1"), proc.log()
    np.testing.assert_allclose(torques(), tuned.predict(q[0], qd[0], qdd[0]), rtol=1e-9, atol=1e-9)
    res = call_service(executor, rollback, Trigger.Request())
    assert res.success, res.message
    assert torques() == list(first.effort)
    assert proc.alive()


def test_a_latched_model_is_not_loaded_again_over_the_checkpoint_that_holds_it(
    executor, start_process, tmp_path
):
    """The tuner's message stays latched: a node restarted from its checkpoint (written after it
    loaded the model, with what it learned since) keeps the checkpoint; one started afresh loads it."""
    from lifelong_learning.msg import LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo

    node_name = "object_recognition"
    models, tuner = tmp_path / "robot_models", tmp_path / "tuner_output"
    tuner.mkdir()
    checkpoint = tmp_path / "recognition.model"
    args = (
        *("-p", f"model_directory:={models}", "-p", "diagnostics_period_s:=0.25"),
        *("-p", "lambdas:=[1.0]", "-p", "alpha:='0.0'", "-p", "checkpoint_interval_s:=0.0"),
        *IMMEDIATE_SWAP,
    )
    sender = Sender(executor, node_name)
    info = sender.node.create_client(GetClassifierInfo, f"/{node_name}/info")
    labeled = sender.node.create_publisher(LabeledFeatures, "labeled_features", 100)
    tuned = classifier(("cup", "ball"), seed=1)
    sender.send(tuned.kind, "tuned.model", as_bytes(tuned, tuner, "tuned.model"), reader=False)

    def samples_seen() -> int:  # a new process: the first answers may be lost, ask again
        return call_service(
            executor, info, GetClassifierInfo.Request(), 30, answer_timeout=3, attempts=10
        ).samples_seen

    first = start_process(node_argv(node_name, "-p", f"checkpoint_path:={checkpoint}", *args))
    assert sender.value("models received", "1"), first.log()  # latched: delivered to a late joiner
    assert samples_seen() == tuned.n_samples
    assert spin_until(executor, lambda: labeled.get_subscription_count() > 0, 30)
    rng = np.random.default_rng(2)
    labeled.publish(LabeledFeatures(data=sample(rng, "cup", ("cup", "ball"))[0].tolist(), label="cup"))
    assert spin_until(executor, lambda: samples_seen() == tuned.n_samples + 1, 20), first.log()
    first.stop()  # SIGINT: the final checkpoint holds the tuned model and the sample learned since
    assert IncrementalRLSC.load(checkpoint).n_samples == tuned.n_samples + 1

    sender.diag.statuses(node_name).clear()  # the next process's statuses from here on
    second = start_process(node_argv(node_name, "-p", f"checkpoint_path:={checkpoint}", *args))
    assert spin_until(executor, lambda: "not loaded again" in second.log(), 30), second.log()
    assert samples_seen() == tuned.n_samples + 1
    assert sender.value("models received", "0") and sender.values()["model version"] == "0"
    second.stop()

    sender.diag.statuses(node_name).clear()  # the next process's statuses from here on
    third = start_process(node_argv(node_name, "-p", "checkpoint_path:=''", *args))  # none: afresh
    assert sender.value("models received", "1"), third.log()
    assert samples_seen() == tuned.n_samples


@pytest.mark.parametrize(
    ("name", "stored"),
    [
        ("tuned-20250101T120000Z.model", "tuned-20250101T120000Z.model"),
        ("../../../etc/passwd", "passwd"),
        ("C:\\models\\..\\tuned.model", "tuned.model"),
        ("/abs/path/tuned.model", "tuned.model"),
        (".hidden.model", "hidden.model"),
        ("..", "model-0123456789abcdef.model"),
        ("", "model-0123456789abcdef.model"),
        ("a model; rm -rf ~.model", "a_model__rm_-rf__.model"),
        ("x" * 300, "x" * 100),
    ],
)
def test_a_received_name_never_leaves_the_folder(name, stored, built_interfaces):
    from lifelong_learning.serving.received import received_file_name

    assert received_file_name(name, "0123456789abcdef" * 4) == stored


def test_the_same_model_as_a_path_and_as_bytes_is_loaded_once(executor, start_process, tmp_path):
    """The tuner announces a promoted model twice (its path, its bytes): the node loads it once, so
    that one ~/rollback goes back to the model before it, not to a copy of it."""
    from lifelong_learning.srv import GetClassifierInfo
    from rclpy.duration import Duration
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String
    from std_srvs.srv import Trigger

    node_name = "object_recognition"
    models = tmp_path / "models"
    models.mkdir()
    proc = start_process(
        node_argv(
            node_name, "-p", f"model_directory:={models}", "-p", "diagnostics_period_s:=0.25", *IMMEDIATE_SWAP
        )
    )
    sender = Sender(executor, node_name)
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    paths = sender.node.create_publisher(String, "tuned_model", latched)
    info = sender.node.create_client(GetClassifierInfo, f"/{node_name}/info")
    rollback = sender.node.create_client(Trigger, f"/{node_name}/rollback")
    assert first_call(executor, info, GetClassifierInfo.Request()).success
    tuned = classifier(("cup", "ball"), seed=1)
    tuned.save(models / "tuned.model")
    assert spin_until(executor, lambda: paths.get_subscription_count() > 0, 30)
    paths.publish(String(data=str(models / "tuned.model")))
    assert paths.wait_for_all_acked(Duration(seconds=10))
    assert sender.value("model version", "1"), proc.log()
    sender.send(tuned.kind, "tuned.model", (models / "tuned.model").read_bytes())
    assert spin_until(executor, lambda: "is the serving model already" in proc.log(), 10), proc.log()
    assert sender.value("models received", "0") and sender.values()["model version"] == "1"
    assert call_service(executor, rollback, Trigger.Request()).success
    assert list(call_service(executor, info, GetClassifierInfo.Request()).classes) == []  # before it
