"""``realtime_priority``: the inverse_dynamics node in its own process puts its answering thread and
the middleware's threads on SCHED_FIFO (those started later too, within a diagnostics period) and
keeps its learning thread at the normal policy; where
the priority is refused (no CAP_SYS_NICE / rtprio), it says so and answers as before."""

from __future__ import annotations

import os
import re
import shutil
from typing import Any

import pytest
from conftest import DiagnosticsReader, call_service, node_argv, spin_until

from lifelong_learning.core.realtime import thread_names, thread_policy
from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_path

# its node's threads on SCHED_FIFO run before every other process's: alone, after the others (make test)
pytestmark = pytest.mark.serial

NODE = "inverse_dynamics"
KEY = "real-time scheduling"


def start(start_process: Any, *prefix: str) -> Any:
    argv = node_argv(
        NODE,
        *("-p", f"urdf_path:={panda_urdf_path()}", "-p", "joint_names:=[" + ",".join(JOINT_NAMES) + "]"),
        *("-p", "n_features:=50", "-p", "diagnostics_period_s:=0.2", "-p", "realtime_priority:=10"),
    )
    return start_process([*prefix, *argv])


def scheduling_and_answer(executor: Any, proc: Any) -> tuple[str, bool]:
    """The node's diagnostics value ``real-time scheduling``, and whether its predict service answers."""
    from lifelong_learning.srv import PredictTorques
    from rclpy.node import Node

    peer = Node("realtime_peer", context=executor.context)
    executor.add_node(peer)
    diag = DiagnosticsReader(peer)
    predict = peer.create_client(PredictTorques, f"/{NODE}/predict")
    assert spin_until(executor, lambda: KEY in diag.values(NODE) and predict.service_is_ready(), 60), (
        proc.log()
    )
    zeros = [0.0] * len(JOINT_NAMES)
    request = PredictTorques.Request(name=JOINT_NAMES, position=zeros, velocity=zeros, acceleration=zeros)
    answer = call_service(executor, predict, request, 20.0)
    return diag.values(NODE)[KEY], bool(answer.success)


def test_answering_and_middleware_threads_run_fifo_and_learning_does_not(executor, start_process):
    proc = start(start_process)
    value, answered = scheduling_and_answer(executor, proc)
    if value.startswith("refused"):
        pytest.skip(f"this machine refuses SCHED_FIFO to the test's user: {value}")
    assert answered
    match = re.fullmatch(
        r"SCHED_FIFO 10 on the answering thread (\d+) and (\d+) middleware threads; "
        r"at the normal policy: (\d+)",
        value,
    )
    assert match, value
    answering, middleware, learning = int(match[1]), int(match[2]), int(match[3])
    pid = proc.pid
    assert answering == pid  # a node executable spins on its main thread
    assert thread_policy(answering, pid) == os.SCHED_FIFO
    assert thread_policy(learning, pid) == os.SCHED_OTHER
    assert middleware >= 1

    def middleware_policies() -> dict[int, tuple[str, int]]:
        names = thread_names(pid)
        return {
            tid: (name, thread_policy(tid, pid)) for tid, name in names.items() if name.startswith("dds.")
        }

    # a middleware thread started (or named) after the node's scan gets SCHED_FIFO at its next
    # diagnostics period (0.2 s here)
    fifo = lambda: all(policy == os.SCHED_FIFO for _, policy in middleware_policies().values())  # noqa: E731
    assert spin_until(executor, fifo, 10.0), (value, middleware_policies())
    dds = list(middleware_policies())
    others = set(thread_names(pid)) - {answering, *dds}
    assert learning in others
    assert all(thread_policy(tid, pid) == os.SCHED_OTHER for tid in others)


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux setpriv to drop CAP_SYS_NICE")
def test_a_refused_priority_is_reported_and_the_node_answers(executor, start_process):
    # without CAP_SYS_NICE (and with no rtprio limit) sched_setscheduler fails as for a normal user
    proc = start(start_process, "setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice")
    value, answered = scheduling_and_answer(executor, proc)
    assert value.startswith("refused: ") and answered, value
    assert all(thread_policy(tid, proc.pid) == os.SCHED_OTHER for tid in thread_names(proc.pid))
    assert "realtime_priority 10 refused" in proc.log()
