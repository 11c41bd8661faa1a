"""run_nodes: several nodes in one process, a failing callback counted on its own node, SIGINT and
SIGTERM both end with a final checkpoint written while the context is still valid."""

import os
import signal
import threading
import time

import pytest
from conftest import RLSModel

from lifelong_learning.core.model_file import load_model_file
from lifelong_learning.learners import RecursiveRLS

pytestmark = pytest.mark.graph


def node_classes(checkpoint):
    import rclpy
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes._base import LearnerNode, NodeBase

    quiet = [Parameter("diagnostics_period_s", value=0.0)]

    class Flaky(NodeBase):
        """A timer whose first two calls raise (a bug), then it works."""

        def __init__(self):
            super().__init__("flaky", parameter_overrides=quiet)
            self.calls = 0
            self.create_timer(0.02, self.tick)

        def tick(self):
            self.calls += 1
            if self.calls <= 2:
                raise RuntimeError("boom")

    class Learner(LearnerNode):
        model_class = RLSModel

        def __init__(self):
            super().__init__(
                "learner",
                parameter_overrides=[*quiet, Parameter("checkpoint_path", value=str(checkpoint))],
            )
            self.start_learner()
            self.ticks = 0
            self.create_timer(0.02, self.learn)
            self.context_ok_at_shutdown = None

        def learn(self):
            with self.model_lock:
                self.model.update([1.0, float(self.ticks)], [2.0])
                self.updates_since_checkpoint += 1
            self.ticks += 1

        def new_model(self):
            return RLSModel(2, 1)

        def shutdown(self):
            self.context_ok_at_shutdown = rclpy.ok(context=self.context)
            super().shutdown()

    return Flaky, Learner


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_two_nodes_one_failing_callback_and_a_final_checkpoint(built_interfaces, tmp_path, sig):
    from lifelong_learning.nodes._runner import run_nodes

    checkpoint = tmp_path / "learner.llm"
    made = []

    def factory(cls):
        def make():
            made.append(cls())
            return made[-1]

        return make

    def stop_when_ready():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if len(made) == 2 and made[0].calls >= 10 and made[1].ticks >= 10:
                break
            time.sleep(0.02)
        os.kill(os.getpid(), sig)
        os.kill(os.getpid(), sig)  # a second signal while stopping is ignored

    Flaky, Learner = node_classes(checkpoint)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    stopper = threading.Thread(target=stop_when_ready, daemon=True)
    stopper.start()
    assert run_nodes([factory(Flaky), factory(Learner)], ["test", "--ros-args"]) == 0
    stopper.join(5)
    flaky, learner = made
    assert flaky.calls >= 10, "the node stopped serving after its callback failed"
    assert flaky.rejections.counts == {"internal error": 2}
    assert learner.rejections.total == 0 and learner.ticks >= 10
    assert learner.context_ok_at_shutdown is True
    saved = load_model_file(checkpoint, kind="test_rls")
    assert RecursiveRLS.from_state(saved.meta, saved.arrays).n_samples == learner.ticks
    assert {s: signal.getsignal(s) for s in handlers} == handlers  # restored


def test_a_node_that_cannot_start_exits_2_without_checkpoints(built_interfaces, tmp_path, capsys):
    from lifelong_learning.nodes._runner import run_nodes

    checkpoint = tmp_path / "learner.llm"
    _, Learner = node_classes(checkpoint)

    def broken():
        raise ValueError("lambdas must be positive")

    assert run_nodes([Learner, broken], ["test", "--ros-args"]) == 2
    assert "cannot start the node: lambdas must be positive" in capsys.readouterr().err
    assert not checkpoint.exists()


def test_sighup_stops_too_unless_ignored(built_interfaces):
    from lifelong_learning.nodes._runner import stop_signals

    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        assert stop_signals() == [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup: keep ignoring it
        assert stop_signals() == [signal.SIGINT, signal.SIGTERM]
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_realtime_is_not_applied_where_the_spinning_thread_serves_more(built_interfaces):
    """``realtime_priority`` needs the node alone in its process on a single-threaded executor: with
    another node beside it (``up`` in one process), or a multi-threaded executor, nothing is raised and
    the node says why (its diagnostics' ``real-time scheduling``)."""
    from conftest import new_context
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from lifelong_learning.core.realtime import thread_policy
    from lifelong_learning.nodes._base import NodeBase
    from lifelong_learning.nodes._runner import _apply_realtime

    quiet = [Parameter("diagnostics_period_s", value=0.0)]

    class WantsRealtime(NodeBase):
        def realtime_request(self) -> tuple[int, list[int]]:
            return 10, []

    here = threading.get_native_id()
    before = thread_policy(here)
    with new_context() as ctx:
        asking = WantsRealtime("asking", context=ctx, parameter_overrides=quiet)
        other = NodeBase("other", context=ctx, parameter_overrides=quiet)
        try:
            _apply_realtime([asking, other], SingleThreadedExecutor(context=ctx))
            assert asking.realtime == "not applied: the node shares its process"
            assert other.realtime == "off"  # it asked for nothing
            asking.realtime = "off"
            _apply_realtime([asking], MultiThreadedExecutor(num_threads=2, context=ctx))
            assert asking.realtime == "not applied: a multi-threaded executor spins it"
            assert thread_policy(here) == before == os.SCHED_OTHER  # this thread was never raised
        finally:
            asking.destroy_node()
            other.destroy_node()
