"""Learner nodes are managed (lifecycle) nodes: with ``autostart`` false an
object_recognition process waits unconfigured; a lifecycle manager's transitions over
``~/change_state`` configure it (the model services appear), activate it (features answered),
deactivate it (features ignored, counted, model kept) and clean it up (final checkpoint, model
services gone). And a checkpoint whose hyperparameters differ from the parameters is restored
and reported as a conflict."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import call_service, first_call, node_argv, spin_until

pytestmark = pytest.mark.graph

NODE = "object_recognition"
#: the node and the test's peer run in a namespace of their own: a fresh-clone CI run showed another
#: /object_recognition (with ~/info: configured, so not this one) in the graph, left by an earlier
#: test, and this test's get_state client never ready in 90 s
NAMESPACE = "/lifecycle_test"
DIM = 8


def features(rng: np.random.Generator, label: str | None = None) -> Any:
    from lifelong_learning.msg import Features, LabeledFeatures

    data = rng.normal(size=DIM).tolist()
    return Features(data=data) if label is None else LabeledFeatures(data=data, label=label)


def test_lifecycle_transitions_from_a_manager(tmp_path: Path, start_process, rclpy_context, executor):
    from lifecycle_msgs.msg import State, Transition
    from lifecycle_msgs.srv import ChangeState, GetState
    from lifelong_learning.msg import Features, LabeledFeatures, Prediction
    from lifelong_learning.srv import GetClassifierInfo
    from rclpy.node import Node

    checkpoint = tmp_path / "recognition.llm"
    proc = start_process(
        node_argv(
            NODE,
            *("-p", "autostart:=false", "-p", f"checkpoint_path:={checkpoint}", "-p", "lambdas:=[1.0]"),
            *("-p", "alpha:='0.0'", "-p", "model_directory:=" + str(tmp_path)),
            *("-r", f"__ns:={NAMESPACE}"),
        )
    )
    peer = Node("lifecycle_peer", namespace=NAMESPACE, context=rclpy_context)  # relative topics: the same
    executor.add_node(peer)
    get_state = peer.create_client(GetState, f"{NAMESPACE}/{NODE}/get_state")
    change = peer.create_client(ChangeState, f"{NAMESPACE}/{NODE}/change_state")
    info = peer.create_client(GetClassifierInfo, f"{NAMESPACE}/{NODE}/info")
    feats = peer.create_publisher(Features, "features", 10)
    labeled = peer.create_publisher(LabeledFeatures, "labeled_features", 100)
    predictions: list[Any] = []
    peer.create_subscription(Prediction, "prediction", predictions.append, 100)

    def state() -> int:
        return first_call(executor, get_state, GetState.Request()).current_state.id

    goes_to = {
        Transition.TRANSITION_CONFIGURE: State.PRIMARY_STATE_INACTIVE,
        Transition.TRANSITION_ACTIVATE: State.PRIMARY_STATE_ACTIVE,
        Transition.TRANSITION_DEACTIVATE: State.PRIMARY_STATE_INACTIVE,
        Transition.TRANSITION_CLEANUP: State.PRIMARY_STATE_UNCONFIGURED,
    }

    def transition(tid: int) -> None:
        """Request the transition; a first reply of change_state may be lost (its reply writer matched
        after its request reader): then the node's state says whether it was made, else it is sent
        again (a transition is not repeated blindly: from the target state it would be refused)."""
        assert spin_until(executor, change.service_is_ready, 30), proc.log()
        for _ in range(5):
            future = change.call_async(ChangeState.Request(transition=Transition(id=tid)))
            if spin_until(executor, future.done, 10):
                assert future.result().success, proc.log()
                return
            # a transition still running answers a transitioning state (>= 10): wait for a primary one
            assert spin_until(executor, lambda: state() < 10, 30), proc.log()
            if state() == goes_to[tid]:
                return
        pytest.fail(f"transition {tid} not answered in 5 tries:\n{proc.log()}")

    # Discovery first, with the node's log if it never comes (the process may have failed to start).
    # Two fresh-clone CI runs saw the node alive and some of its services, but this client never
    # became ready in 90 s (not reproduced alone or in the suite's order here): wait 30 s, then
    # make the client again, three times.
    for _ in range(3):
        if spin_until(executor, get_state.service_is_ready, 30):
            break
        print("get_state not ready; services seen:", peer.get_service_names_and_types())
        peer.destroy_client(get_state)
        get_state = peer.create_client(GetState, f"{NAMESPACE}/{NODE}/get_state")
    assert get_state.service_is_ready(), (
        proc.alive(),
        proc.log(),
        peer.get_node_names_and_namespaces(),
        [name for name, _ in peer.get_service_names_and_types() if NODE in name],
    )
    assert state() == State.PRIMARY_STATE_UNCONFIGURED, proc.log()
    assert not info.service_is_ready()  # no model, no model services, before configure
    transition(Transition.TRANSITION_CONFIGURE)
    assert state() == State.PRIMARY_STATE_INACTIVE
    assert first_call(executor, info, GetClassifierInfo.Request()).success
    transition(Transition.TRANSITION_ACTIVATE)
    assert state() == State.PRIMARY_STATE_ACTIVE
    assert spin_until(
        executor, lambda: labeled.get_subscription_count() > 0 and feats.get_subscription_count() > 0, 30
    )
    rng = np.random.default_rng(0)
    for i in range(6):  # reliable: every labeled sample arrives
        labeled.publish(features(rng, "cup" if i % 2 else "ball"))
    assert spin_until(
        executor, lambda: call_service(executor, info, GetClassifierInfo.Request()).samples_seen == 6, 20
    ), proc.log()
    # best effort: publish until answered
    assert spin_until(executor, lambda: feats.publish(features(rng)) or bool(predictions), 20), proc.log()

    transition(Transition.TRANSITION_DEACTIVATE)
    assert state() == State.PRIMARY_STATE_INACTIVE
    for _ in range(10):  # marked: an answer to a frame sent while active may still be on its way
        inactive = features(rng)
        inactive.header.frame_id = "sent while inactive"
        feats.publish(inactive)
        labeled.publish(features(rng, "plate"))
    spin_until(executor, lambda: False, 1.5)
    answered = [p for p in predictions if p.header.frame_id == "sent while inactive"]
    assert answered == []  # inactive: nothing answered
    res = call_service(executor, info, GetClassifierInfo.Request())
    assert res.samples_seen == 6 and sorted(res.classes) == ["ball", "cup"]  # nothing learned, model kept

    transition(Transition.TRANSITION_CLEANUP)
    assert state() == State.PRIMARY_STATE_UNCONFIGURED
    assert checkpoint.exists()  # cleanup wrote the final checkpoint
    assert spin_until(executor, lambda: not info.service_is_ready(), 10)
    transition(Transition.TRANSITION_CONFIGURE)  # configure again: the checkpoint comes back
    res = first_call(executor, info, GetClassifierInfo.Request())
    assert res.samples_seen == 6, proc.log()
    assert proc.alive()


def test_a_checkpoint_that_conflicts_with_the_parameters_is_restored_and_reported(
    tmp_path: Path, rclpy_context
):
    from rclpy.parameter import Parameter

    from lifelong_learning.learners.rlsc import IncrementalRLSC
    from lifelong_learning.nodes.object_recognition import ObjectRecognitionNode

    checkpoint = tmp_path / "recognition.llm"
    rng = np.random.default_rng(1)
    saved = IncrementalRLSC(lambdas=[3.0], alpha=0.0, recoding_shrink=1.0)
    saved.partial_fit(rng.normal(size=(4, DIM)), ["a", "b", "a", "b"])
    saved.save(checkpoint)
    params = {"checkpoint_path": str(checkpoint), "diagnostics_period_s": 0.0, "lambdas": [0.1, 1.0]}
    node = ObjectRecognitionNode(
        context=rclpy_context, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]
    )
    try:
        assert node.model.lambdas.tolist() == [3.0]  # the checkpoint wins: it holds what was learned
        assert node.model.n_samples == 4
        conflicts = node.diagnostic_values()["checkpoint conflicts (checkpoint wins)"]
        assert "lambdas: checkpoint [3.0], parameter [0.1, 1.0]" in conflicts
        assert node.model.recoding_shrink == 1.0  # how it recodes is the checkpoint's too
        assert "recoding_shrink: checkpoint 1.0, parameter 0.25" in conflicts
        assert checkpoint.exists()  # not moved aside as "unreadable"
    finally:
        node.destroy_node()


def test_a_destroyed_node_leaves_no_lifecycle_service_behind(rclpy_context):
    """rclpy's LifecycleNode.destroy_node keeps the lifecycle services (its state machine's) in the
    graph until garbage collection; a learner node's destroy_node removes them too."""
    from conftest import new_context
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes.object_recognition import ObjectRecognitionNode

    node = ObjectRecognitionNode(
        context=rclpy_context,
        namespace="/destroyed_test",
        parameter_overrides=[Parameter("diagnostics_period_s", value=0.0)],
    )
    with new_context() as other:
        observer = Node("destroy_observer", context=other)

        def services() -> list[str]:
            return [n for n, _ in observer.get_service_names_and_types() if n.startswith("/destroyed_test/")]

        def wait(predicate) -> bool:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not predicate():
                time.sleep(0.1)
            return predicate()

        try:
            assert wait(lambda: "/destroyed_test/object_recognition/get_state" in services()), services()
            node.destroy_node()
            assert wait(lambda: not services()), services()  # the object is still referenced here
            assert node is not None
        finally:
            observer.destroy_node()


def probe_node(context: Any, name: str, outcomes: dict[str, Any]) -> Any:
    """A lifecycle node (the state helper of nodes/lifecycle.py) whose transition callbacks return
    or raise what ``outcomes`` says (default SUCCESS), recording the state each one ran in."""
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.node import Node

    from lifelong_learning.nodes.lifecycle import LifecycleStateMixin

    class Probe(LifecycleStateMixin, Node):
        def __init__(self) -> None:
            Node.__init__(self, name, context=context)
            self.during: list[tuple[str, str]] = []
            LifecycleStateMixin.__init__(self)

        def answer(self, callback: str) -> Any:
            self.during.append((callback, self.lifecycle_state))
            outcome = outcomes.get(callback, TransitionCallbackReturn.SUCCESS)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        def on_configure(self, state: Any) -> Any:
            return self.answer("on_configure")

        def on_activate(self, state: Any) -> Any:
            return self.answer("on_activate")

        def on_deactivate(self, state: Any) -> Any:
            return self.answer("on_deactivate")

        def on_cleanup(self, state: Any) -> Any:
            return self.answer("on_cleanup")

        def on_shutdown(self, state: Any) -> Any:
            return self.answer("on_shutdown")

        def on_error(self, state: Any) -> Any:
            return self.answer("on_error")

    return Probe()


@pytest.mark.parametrize(
    ("outcomes", "steps"),
    [
        # configure, activate, deactivate, cleanup, configure, shutdown (from inactive)
        ({}, [("configure", "inactive"), ("activate", "active"), ("deactivate", "inactive"),
              ("cleanup", "unconfigured"), ("configure", "inactive"), ("shutdown", "finalized")]),
        # a failed configure stays unconfigured; a failed activate stays inactive
        ({"on_configure": "FAILURE"}, [("configure", "unconfigured"), ("shutdown", "finalized")]),
        ({"on_activate": "FAILURE"}, [("configure", "inactive"), ("activate", "inactive")]),
        # a configure that raises: error processing, whose success leads back to unconfigured
        ({"on_configure": ValueError("no")}, [("configure", "unconfigured")]),
        # an error that on_error cannot handle: finalized
        ({"on_configure": "ERROR", "on_error": "FAILURE"}, [("configure", "finalized")]),
        ({"on_shutdown": "FAILURE"},
         [("configure", "inactive"), ("activate", "active"), ("shutdown", "finalized")]),
    ],
)  # fmt: skip
def test_the_lifecycle_state_follows_the_transitions_as_get_state_reports_it(executor, call, outcomes, steps):
    from lifecycle_msgs.srv import GetState
    from rclpy.lifecycle import TransitionCallbackReturn

    returns = {
        k: getattr(TransitionCallbackReturn, v) if isinstance(v, str) else v for k, v in outcomes.items()
    }
    node = probe_node(executor.context, "lifecycle_state_probe", returns)
    executor.add_node(node)
    get_state = node.create_client(GetState, "/lifecycle_state_probe/get_state")

    def reported() -> str:
        return call(get_state, GetState.Request(), timeout=20).current_state.label

    assert node.lifecycle_state == "unconfigured" == reported()
    during = {"configure": "configuring", "activate": "activating", "deactivate": "deactivating",
              "cleanup": "cleaningup", "shutdown": "shuttingdown"}  # fmt: skip
    for transition, state in steps:
        getattr(node, f"trigger_{transition}")()
        assert node.during[0] == (f"on_{transition}", during[transition])
        if len(node.during) > 1:  # ERROR or a raise: on_error ran, in errorprocessing
            assert node.during[1] == ("on_error", "errorprocessing")
        node.during.clear()
        assert node.lifecycle_state == state == reported(), transition
