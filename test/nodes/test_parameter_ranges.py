"""Absurd periods and rates are refused at run time as at start.

``diagnostics_period_s: 1e-9`` set at run time made a node publish ~1,700 diagnostics a second at
75-95 % of a core; ``learn_max_hz``, ``learning_period_s`` and ``checkpoint_interval_s`` took
5e-324. A ROS range cannot say "0 (off) or at least m", so the nodes check it themselves
(``ParamSpec.minimum_nonzero``): an inverse_dynamics process (its own, the Panda URDF) is sent
each absurd value through its ``~/set_parameters`` service, as ``ros2 param set`` does; each is
refused with the reason, the values stay, and the diagnostics keep their rate. The same value
given at start ends the process with status 2 and one line naming the parameter and its range.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    DiagnosticsReader,
    first_call,
    new_context,
    new_executor,
    node_argv,
    spin_until,
    stop_after_nodes,
)

from lifelong_learning.nodes.supervisor import NodeProcess
from lifelong_learning.sim.panda import panda_urdf_path

pytestmark = pytest.mark.graph

NODE = "inverse_dynamics"
ABSURD = {
    "diagnostics_period_s": 1e-9,
    "warn_period_s": 1e-9,
    "input_timeout_s": 1e-9,
    "learn_max_hz": 5e-324,
    "learning_period_s": 5e-324,
    "checkpoint_interval_s": 5e-324,
}


def _request(name: str, value: float) -> Any:
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    return SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])


def test_absurd_periods_and_rates_are_refused_at_run_time_and_the_diagnostics_keep_their_rate(
    built_interfaces: None, tmp_path: Path
) -> None:
    from rcl_interfaces.srv import GetParameters, SetParameters
    from rclpy.node import Node

    argv = node_argv(
        NODE,
        *("-p", f"urdf_path:={panda_urdf_path()}", "-p", "n_features:=50"),
        "-p",
        "diagnostics_period_s:=0.25",
    )
    proc = NodeProcess(argv, log_path=tmp_path / "inverse_dynamics.log")
    with new_context() as context, new_executor(context) as executor:
        peer = Node("parameter_setter", context=context)
        setter = peer.create_client(SetParameters, f"/{NODE}/set_parameters")
        getter = peer.create_client(GetParameters, f"/{NODE}/get_parameters")
        diag = DiagnosticsReader(peer, depth=1000)
        executor.add_node(peer)
        try:
            before = first_call(executor, getter, GetParameters.Request(names=list(ABSURD))).values
            for name, value in ABSURD.items():
                result = first_call(executor, setter, _request(name, value)).results[0]
                assert not result.successful, (name, value)
                assert name in result.reason and "outside its range 0 or [" in result.reason, result.reason
            after = first_call(executor, getter, GetParameters.Request(names=list(ABSURD))).values
            assert [v.double_value for v in after] == [v.double_value for v in before]
            # a sane value is taken, 0 (off) too
            assert first_call(executor, setter, _request("learn_max_hz", 0.0)).results[0].successful
            assert first_call(executor, setter, _request("diagnostics_period_s", 0.5)).results[0].successful

            assert spin_until(executor, lambda: diag.latest(NODE) is not None, 10), proc.log()
            statuses = diag.statuses(NODE)
            spin_until(executor, lambda: False, 0.6)  # a status at the old period may still be on its way
            statuses.clear()
            start = time.monotonic()
            spin_until(executor, lambda: False, 2.0)
            # at most one status per 0.5 s (2 Hz, not the old 4 Hz, not thousands), and they go on: a
            # loaded machine may publish fewer in the window, never more
            rate = len(statuses) / (time.monotonic() - start)
            assert rate <= 3.0, (rate, proc.log()[-2000:])
            assert spin_until(executor, lambda: len(statuses) >= 2, 30), proc.log()[-2000:]
            assert proc.alive(), proc.log()
        finally:
            stop_after_nodes(executor, proc)


def test_an_absurd_period_at_start_ends_the_process_with_status_2_naming_the_range(
    built_interfaces: None, tmp_path: Path
) -> None:
    proc = NodeProcess(
        node_argv("object_recognition", "-p", "diagnostics_period_s:=1e-9"), log_path=tmp_path / "start.log"
    )
    assert proc.wait(60) == 2, proc.log()
    lines = [line for line in proc.log().splitlines() if "[ERROR]" in line]
    assert len(lines) == 1 and "cannot start the node" in lines[0], proc.log()
    assert "diagnostics_period_s is 1e-09, outside its range 0 or [0.01, 3600]" in lines[0], lines
    assert "Traceback" not in proc.log()
