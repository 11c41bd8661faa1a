"""The demo's process handling: a node that does not come up is started again, and the graph says
what it shows of a node."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from conftest import new_context

STALLED = "import sys, time; print('started, then stuck', flush=True); time.sleep(600)"


def test_a_node_started_again_keeps_its_first_log_and_the_notes_say_why(tmp_path: Path, built_interfaces):
    from lifelong_learning.demo.config import DemoConfig
    from lifelong_learning.demo.run import DemoRun

    run = DemoRun(DemoConfig.quick(), tmp_path, progress=False)
    first = run._spawn("silent", [sys.executable, "-c", STALLED])
    other = run._spawn("other", [sys.executable, "-c", STALLED])
    run.procs = [other, first]
    try:
        deadline = time.monotonic() + 30
        while "stuck" not in (tmp_path / "silent.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        run.restart_node("silent", "no diagnostics from it")
        second = run.procs[1]
        assert run.procs[0] is other and second is not first and second.name == "silent"
        assert not first.alive() and second.alive() and other.alive()
        assert "started, then stuck" in (tmp_path / "silent.first.log").read_text()
        assert (tmp_path / "silent.log").exists() and second.log_path == tmp_path / "silent.log"
        (note,) = run.notes
        assert note.startswith("silent was started again: no diagnostics from it;")
        assert "silent.first.log" in note and "started, then stuck" in note
        with pytest.raises(StopIteration):
            run.restart_node("absent", "never started")
    finally:
        run.stop_nodes()
    assert run.procs == []


def test_log_tail_quotes_the_last_lines_indented(tmp_path: Path, built_interfaces):
    from lifelong_learning.demo.run import log_tail

    log = tmp_path / "n.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    assert log_tail(log, 3) == "    line 27\n    line 28\n    line 29"
    assert log_tail(tmp_path / "none.log") == "    (empty)"


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
