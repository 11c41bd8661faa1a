"""The demo's process handling: nodes that do not come up are started again once, and the graph
says what it shows of a node."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from conftest import new_context

#: a process that never reports: it stands in for a node stuck before its first diagnostics; it ends on
#: SIGINT as a node does (its own handler: a child of a process that ignores SIGINT, as a pytest-xdist
#: worker does, inherits that, and Python then installs no KeyboardInterrupt handler)
STALLED = (
    "import signal, sys, time; signal.signal(signal.SIGINT, lambda *_: sys.exit(0)); "
    "print('started, then stuck', flush=True); time.sleep(600)"
)


def stalled_run(tmp_path: Path, names: tuple[str, ...]):
    from lifelong_learning.demo.config import DemoConfig
    from lifelong_learning.demo.run import DemoRun

    run = DemoRun(DemoConfig.quick(), tmp_path, progress=False)
    run.procs = [run._spawn(name, [sys.executable, "-c", STALLED]) for name in names]
    wait_stuck(tmp_path, names)
    return run


def wait_stuck(folder: Path, names: tuple[str, ...] | list[str]) -> None:
    """Until each stand-in has said it is stuck: its SIGINT handler is in place (a SIGINT before that
    is ignored, and the stop waits for the kill)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(
        "stuck" in (folder / f"{name}.log").read_text() for name in names
    ):
        time.sleep(0.05)


def test_nodes_started_again_keep_their_first_logs_and_the_notes_say_why(tmp_path: Path, built_interfaces):
    run = stalled_run(tmp_path, ("other", "silent", "bag_recorder"))
    other = run.procs[0]
    run.bag.mkdir()  # what the first recorder made: the second refuses an existing output
    try:
        first = list(run.procs)
        run.restart_nodes(["silent", "bag_recorder"], "no diagnostics from it")
        wait_stuck(tmp_path, ["silent", "bag_recorder"])
        assert run.procs[0] is other and other.alive()
        for old, new in zip(first[1:], run.procs[1:], strict=True):
            assert new is not old and new.name == old.name and new.alive() and not old.alive()
            assert "started, then stuck" in (tmp_path / f"{old.name}.first.log").read_text()
            assert new.log_path == tmp_path / f"{old.name}.log"
        assert not run.bag.exists()
        silent, recorder = run.notes
        assert silent.startswith("silent was started again: no diagnostics from it;")
        assert "silent.first.log" in silent and "started, then stuck" in silent
        assert recorder.startswith("bag_recorder was started again:")
        with pytest.raises(ValueError, match=r"no node \['absent'\]"):
            run.restart_nodes(["absent"], "never started")
    finally:
        run.stop_nodes()
    assert run.procs == []


@pytest.mark.graph
def test_the_nodes_still_silent_after_a_while_are_started_again_once_and_the_error_says_so(
    tmp_path: Path, built_interfaces
):
    """Every node of the demo but one is stuck before its first diagnostics; the one that reports is a
    real rclpy node publishing a status under the feature_extractor's name."""
    import threading

    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from lifelong_learning.demo.driver import DemoDriver
    from lifelong_learning.demo.run import NODES
    from lifelong_learning.nodes.base import DIAGNOSTIC_TASK

    run = stalled_run(tmp_path, NODES)
    with new_context() as ctx:
        driver = DemoDriver(say=print, context=ctx)
        reporting = Node("feature_extractor", context=ctx)
        diagnostics = reporting.create_publisher(DiagnosticArray, "/diagnostics", 10)
        status = DiagnosticStatus(name=f"feature_extractor: {DIAGNOSTIC_TASK}")
        reporting.create_timer(0.1, lambda: diagnostics.publish(DiagnosticArray(status=[status])))
        executor = SingleThreadedExecutor(context=ctx)
        executor.add_node(driver)
        executor.add_node(reporting)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        try:
            deadline = time.monotonic() + 30
            while "feature_extractor" not in driver.nodes_reporting() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert "feature_extractor" in driver.nodes_reporting()
            with pytest.raises(RuntimeError) as failed:
                run.wait_for_nodes(driver, timeout=5.0, restart_after=0.5)
            wait_stuck(tmp_path, NODES)  # the second stand-ins, before they are stopped
        finally:
            executor.shutdown()
            spinner.join(5.0)
            reporting.destroy_node()
            driver.destroy_node()
            run.stop_nodes()
    message = str(failed.value)
    silent = [name for name in NODES if name != "feature_extractor"]
    assert "nodes not up after 5 s (up: ['feature_extractor']" in message
    for name in silent:
        assert f"{name} was started again: no diagnostics from it" in message
        assert (tmp_path / f"{name}.first.log").exists()
    assert not (tmp_path / "feature_extractor.first.log").exists()  # it reported: not started again
    assert len(run.notes) == len(silent)  # once each


def test_log_tail_quotes_the_last_lines_indented(tmp_path: Path, built_interfaces):
    from lifelong_learning.demo.run import log_tail

    log = tmp_path / "n.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    assert log_tail(log, 3) == "    line 27\n    line 28\n    line 29"
    assert log_tail(tmp_path / "none.log") == "    (empty)"


@pytest.mark.graph
def test_the_graph_view_tells_a_discovered_node_from_one_never_seen(built_interfaces):
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.node import Node

    from lifelong_learning.demo.driver import DemoDriver

    with new_context() as driver_ctx, new_context() as node_ctx:
        driver = DemoDriver(say=print, context=driver_ctx)
        quiet = Node("quiet_node", context=node_ctx)
        quiet.create_publisher(DiagnosticArray, "/diagnostics", 10)
        try:
            seen = "in the graph, its /diagnostics publisher seen"
            deadline = time.monotonic() + 30  # discovery across two participants
            while driver.graph_view("quiet_node") != seen and time.monotonic() < deadline:
                time.sleep(0.1)
            assert driver.graph_view("quiet_node") == seen
            assert driver.graph_view("absent_node") == "not in the graph, its /diagnostics publisher not seen"
        finally:
            quiet.destroy_node()
            driver.destroy_node()
