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

    from lifelong_learning.nodes.base import NodeBase
    from lifelong_learning.nodes.learner import LearnerNode

    quiet = [Parameter("diagnostics_period_s", value=0.0)]

    class Flaky(NodeBase):
        """A timer whose first two calls raise (a bug), then it works."""

        def __init__(self):
            super().__init__("flaky", parameter_overrides=quiet)
            self.calls = 0
            self.threads = set()
            self.create_timer(0.02, self.tick)

        def tick(self):
            self.calls += 1
            self.threads.add(threading.current_thread().name)
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
            self.threads = set()
            self.create_timer(0.02, self.learn)
            self.context_ok_at_shutdown = None

        def learn(self):
            self.threads.add(threading.current_thread().name)
            with self.model_lock:
                self.model.update([1.0, float(self.ticks)], [2.0])
                self.serving.count_updates()
            self.ticks += 1

        def new_model(self):
            return RLSModel(2, 1)

        def shutdown(self):
            self.context_ok_at_shutdown = rclpy.ok(context=self.context)
            super().shutdown()

    return Flaky, Learner


def run_until(classes, done, sig=signal.SIGINT, signals=1):
    """run_nodes with a node of each class (``made``, in order) in this process, stopped by ``sig``
    (sent ``signals`` times) once ``done(made)`` (or after 30 s); returns (exit status, made)."""
    from lifelong_learning.nodes.runner import run_nodes

    made = []

    def keep(cls):
        def make():
            made.append(cls())
            return made[-1]

        return make

    def stop_when_done():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (len(made) == len(classes) and done(made)):
            time.sleep(0.02)
        for _ in range(signals):
            os.kill(os.getpid(), sig)

    stopper = threading.Thread(target=stop_when_done, daemon=True)
    stopper.start()
    status = run_nodes([keep(cls) for cls in classes], ["test", "--ros-args"])
    stopper.join(5)
    return status, made


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_two_nodes_one_failing_callback_and_a_final_checkpoint(built_interfaces, tmp_path, sig):
    checkpoint = tmp_path / "learner.llm"
    Flaky, Learner = node_classes(checkpoint)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    # a second signal while stopping is ignored
    status, made = run_until(
        [Flaky, Learner], lambda made: made[0].calls >= 10 and made[1].ticks >= 10, sig, signals=2
    )
    assert status == 0
    flaky, learner = made
    assert flaky.calls >= 10, "the node stopped serving after its callback failed"
    assert flaky.rejections.counts == {"internal error": 2}
    assert learner.rejections.total == 0 and learner.ticks >= 10
    assert learner.context_ok_at_shutdown is True
    saved = load_model_file(checkpoint, kind="test_rls")
    assert RecursiveRLS.from_state(saved.meta, saved.arrays).n_samples == learner.ticks
    assert {s: signal.getsignal(s) for s in handlers} == handlers  # restored
    # each node spun by its own executor, on its own thread, as in its own executable
    assert flaky.threads == {"spin-flaky"} and learner.threads == {"spin-learner"}


def test_a_node_blocked_in_a_callback_does_not_hold_up_the_others(built_interfaces, tmp_path, monkeypatch):
    """``up`` in one process: a callback of one node that takes long (a tuning job, a model load)
    leaves the other nodes serving, and the stop still writes the final checkpoint."""
    from lifelong_learning.nodes.base import NodeBase
    from lifelong_learning.nodes.runner import EXECUTOR_VARIABLE

    monkeypatch.delenv(EXECUTOR_VARIABLE, raising=False)
    checkpoint = tmp_path / "learner.llm"
    _, Learner = node_classes(checkpoint)
    blocked = threading.Event()
    learners = []

    class Slow(NodeBase):
        def __init__(self):
            super().__init__("slow")
            self.create_timer(0.02, self.block)
            self.ticks_while_blocked = None

        def block(self):
            if blocked.is_set():
                return
            blocked.set()
            start = learners[0].ticks
            # this callback holds its executor until the learner's timer (50 Hz) ticked 10 times
            # (20 s at most): it goes on meanwhile, however loaded the machine
            deadline = time.monotonic() + 20.0
            while learners[0].ticks - start < 10 and time.monotonic() < deadline:
                time.sleep(0.01)
            self.ticks_while_blocked = learners[0].ticks - start

    def make_learner():
        learners.append(Learner())
        return learners[0]

    status, made = run_until([Slow, make_learner], lambda made: made[0].ticks_while_blocked is not None)
    assert status == 0
    slow, learner = made
    assert slow.ticks_while_blocked is not None, "the slow callback never ran"
    assert slow.ticks_while_blocked >= 10, f"the learner ticked {slow.ticks_while_blocked} times in 20 s"
    saved = load_model_file(checkpoint, kind="test_rls")
    assert RecursiveRLS.from_state(saved.meta, saved.arrays).n_samples == learner.ticks


def test_a_node_that_needs_more_threads_gets_them_beside_the_others(built_interfaces, tmp_path, monkeypatch):
    """A node whose callbacks must run beside a long one of its own (the tuner: a goal runs in a
    callback, and its cancel must get through) keeps its ``EXECUTOR_THREADS`` in one process."""
    from rclpy.callback_groups import ReentrantCallbackGroup

    from lifelong_learning.nodes.base import NodeBase
    from lifelong_learning.nodes.runner import EXECUTOR_VARIABLE

    monkeypatch.delenv(EXECUTOR_VARIABLE, raising=False)
    _, Learner = node_classes(tmp_path / "learner.llm")

    class Busy(NodeBase):
        EXECUTOR_THREADS = 2

        def __init__(self):
            super().__init__("busy")
            group = ReentrantCallbackGroup()
            self.blocked = threading.Event()
            self.ticks_while_blocked = None
            self.ticks = 0
            self.create_timer(0.02, self.block, callback_group=group)
            self.create_timer(0.02, self.tick, callback_group=group)

        def tick(self):
            self.ticks += 1

        def block(self):
            if self.blocked.is_set():
                return
            self.blocked.set()
            start = self.ticks
            # held until its own other timer ticked 10 times beside it (20 s at most)
            deadline = time.monotonic() + 20.0
            while self.ticks - start < 10 and time.monotonic() < deadline:
                time.sleep(0.01)
            self.ticks_while_blocked = self.ticks - start

    status, made = run_until([Busy, Learner], lambda made: made[0].ticks_while_blocked is not None)
    assert status == 0
    busy = made[0]
    assert busy.ticks_while_blocked is not None and busy.ticks_while_blocked >= 10, busy.ticks_while_blocked


def test_a_stop_while_callbacks_run_on_threads_leaves_no_failed_callback_behind(built_interfaces, capfd):
    """A node on a MultiThreadedExecutor (the tuner's) stopped while a callback is on its way on a
    pool thread: the callback ends normally. Before, rclpy's shutdown destroyed the executor's guard
    condition at once, the callback failed on it ("cannot use Destroyable because destruction was
    requested") and rclpy printed "The following exception was never retrieved" (3 of 12 stops of
    an idle nystrom_tuner; under the launch system too). Here the callback group holds each callback
    that starts after the stop was sent for 0.3 s, so that the executor's shutdown comes meanwhile."""
    import gc

    from rclpy.callback_groups import ReentrantCallbackGroup

    from lifelong_learning.nodes.base import NodeBase

    # what earlier tests in this process left for the collector is collected now, not blamed on this one
    gc.collect()
    capfd.readouterr()
    stopping = threading.Event()

    class SlowToStart(ReentrantCallbackGroup):
        def beginning_execution(self, entity):
            if stopping.is_set():
                time.sleep(0.3)
            return super().beginning_execution(entity)

    class Busy(NodeBase):
        EXECUTOR_THREADS = 3

        def __init__(self):
            super().__init__("busy_threads")
            self.ticks = 0
            self.create_timer(0.001, self.tick, callback_group=SlowToStart())

        def tick(self):
            self.ticks += 1

    def done(made):
        if made[0].ticks >= 20:
            stopping.set()  # the signal follows
        return stopping.is_set()

    status, made = run_until([Busy], done)
    assert status == 0 and made[0].ticks >= 20
    del made
    gc.collect()
    err = capfd.readouterr().err
    assert "never retrieved" not in err and "Destroyable" not in err, err


def test_the_executor_variable_puts_every_node_on_one_executor(built_interfaces, monkeypatch):
    from conftest import new_context
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

    from lifelong_learning.nodes.base import NodeBase
    from lifelong_learning.nodes.runner import EXECUTOR_VARIABLE, make_executors

    with new_context() as ctx:
        nodes = [NodeBase(name, context=ctx) for name in ("a", "b")]
        made = []

        def plan(threads):
            result = make_executors(threads, nodes)
            made.extend(ex for ex, _ in result)
            return result

        try:
            monkeypatch.delenv(EXECUTOR_VARIABLE, raising=False)
            own = plan(None)
            assert [served for _, served in own] == [[nodes[0]], [nodes[1]]]
            assert all(type(ex) is SingleThreadedExecutor and ex.context is ctx for ex, _ in own)
            nodes[1].EXECUTOR_THREADS = 3  # as the tuner asks
            ((_, _), (threaded, _)) = plan(None)
            assert isinstance(threaded, MultiThreadedExecutor) and threaded._executor._max_workers == 3
            del nodes[1].EXECUTOR_THREADS
            monkeypatch.setenv(EXECUTOR_VARIABLE, "multi")
            ((shared, served),) = plan(None)
            assert served == nodes and isinstance(shared, MultiThreadedExecutor)
            monkeypatch.setenv(EXECUTOR_VARIABLE, "single")
            ((shared, served),) = plan(None)
            assert served == nodes and type(shared) is SingleThreadedExecutor
            monkeypatch.delenv(EXECUTOR_VARIABLE)
            ((shared, served),) = plan(4)  # threads given: one executor
            assert served == nodes and isinstance(shared, MultiThreadedExecutor)
        finally:
            for ex in made:
                ex.shutdown()
            for node in nodes:
                node.destroy_node()


def test_a_node_that_cannot_start_exits_2_without_checkpoints(built_interfaces, tmp_path, capsys):
    from lifelong_learning.nodes.runner import run_nodes

    checkpoint = tmp_path / "learner.llm"
    _, Learner = node_classes(checkpoint)

    def broken():
        raise ValueError("lambdas must be positive")

    assert run_nodes([Learner, broken], ["test", "--ros-args"]) == 2
    assert "cannot start the node: lambdas must be positive" in capsys.readouterr().err
    assert not checkpoint.exists()


def test_sighup_stops_too_unless_ignored(built_interfaces):
    from lifelong_learning.nodes.runner import stop_signals

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
    from lifelong_learning.nodes.base import NodeBase
    from lifelong_learning.nodes.runner import _apply_realtime

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


#: a node executable (``run_node``) whose learner learned 3 samples; ``TEARDOWN`` is "hang" (its
#: destroy_node blocks in a C call that keeps the interpreter's lock, as a middleware call that never
#: returns would) or "atexit" (an atexit handler would say that the interpreter's finalization ran)
EXECUTABLE = """
import atexit, ctypes, sys
from rclpy.parameter import Parameter
from lifelong_learning.core.persistence import PersistentModel
from lifelong_learning.learners import RecursiveRLS
from lifelong_learning.nodes import runner
from lifelong_learning.nodes.learner import LearnerNode

CHECKPOINT, TEARDOWN = sys.argv[1], sys.argv[2]
runner.TEARDOWN_S = 2.0


class RLSModel(RecursiveRLS, PersistentModel):
    kind = "test_rls"


class Learner(LearnerNode):
    model_class = RLSModel

    def __init__(self):
        quiet = Parameter("diagnostics_period_s", value=0.0)
        checkpoint = Parameter("checkpoint_path", value=CHECKPOINT)
        super().__init__("stopping", parameter_overrides=[quiet, checkpoint])
        self.start_learner()
        with self.model_lock:
            for k in range(3):
                self.model.update([1.0, float(k)], [2.0])
                self.serving.count_updates()
        print("learned 3", flush=True)

    def new_model(self):
        return RLSModel(2, 1)

    def destroy_node(self):
        print("destroying", flush=True)
        if TEARDOWN == "hang":
            ctypes.PyDLL(None).sleep(3600)
        super().destroy_node()
        print("destroyed")  # not flushed here: the process's exit must flush it


if TEARDOWN == "atexit":
    atexit.register(lambda: print("interpreter finalization ran", flush=True))
runner.run_node(Learner, ["stopping", "--ros-args"])
"""


def run_executable(tmp_path, teardown):
    """The node executable above in its own process: SIGINT once it learned; (status, its output)."""
    import sys

    from lifelong_learning.nodes.supervisor import NodeProcess

    script = tmp_path / "executable.py"
    script.write_text(EXECUTABLE)
    checkpoint = tmp_path / "stopping.llm"
    process = NodeProcess(
        [sys.executable, str(script), str(checkpoint), teardown], log_path=tmp_path / f"{teardown}.log"
    )
    try:
        deadline = time.monotonic() + 60
        while "learned 3" not in process.log() and process.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "learned 3" in process.log(), process.log()
        process.send_signal(signal.SIGINT)
        return process.wait(30), process.log()
    finally:
        process.stop(signal.SIGKILL, timeout=5)


def test_a_teardown_that_hangs_in_the_middleware_ends_the_process_with_every_stack(
    built_interfaces, tmp_path
):
    """Ctrl-C while a node's teardown hangs in a C call holding the interpreter's lock (no signal
    handler can run; a launch's SIGTERM is ignored as well): the final checkpoint is written first,
    then the teardown's deadline writes the stack of every thread and ends the process with status
    0 (nothing was lost: the teardown begins once everything is written)."""
    status, log = run_executable(tmp_path, "hang")
    assert status == 0, log  # None before: the process never ended
    assert "destroying" in log and "Timeout" in log and "in destroy_node" in log, log
    saved = load_model_file(tmp_path / "stopping.llm", kind="test_rls")
    assert RecursiveRLS.from_state(saved.meta, saved.arrays).n_samples == 3


def test_a_node_executable_ends_after_its_teardown_without_the_interpreter_finalization(
    built_interfaces, tmp_path
):
    """The stop of a node executable: the final checkpoint, the teardown, its output flushed, status 0;
    the interpreter's finalization (seconds of collecting torch's and scipy's modules under load) is
    not run."""
    status, log = run_executable(tmp_path, "atexit")
    assert status == 0, log
    assert "destroying" in log and "destroyed" in log, log
    assert "interpreter finalization ran" not in log, log
    saved = load_model_file(tmp_path / "stopping.llm", kind="test_rls")
    assert RecursiveRLS.from_state(saved.meta, saved.arrays).n_samples == 3
