"""The inverse_dynamics node's parameters read into its parts' settings; urdf_path read only when
it is a regular file of bounded size (a FIFO would block the node's start for good)."""

from __future__ import annotations

import os
import threading

import pytest

from lifelong_learning.nodes.inverse_dynamics_params import PARAMS, urdf_from_parameters
from lifelong_learning.sim.panda import panda_urdf_path


def test_the_urdf_comes_from_the_text_else_the_file(tmp_path):
    urdf = urdf_from_parameters({"robot_description": "", "urdf_path": panda_urdf_path()})
    assert "<robot" in urdf
    assert urdf_from_parameters({"robot_description": "<robot/>", "urdf_path": "/nonexistent"}) == "<robot/>"
    assert urdf_from_parameters({"robot_description": " ", "urdf_path": ""}) == ""
    assert {spec.name for spec in PARAMS} >= {"urdf_path", "learn_max_hz", "learning_period_s"}


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "directory"])
def test_a_urdf_path_that_is_not_a_regular_file_is_refused_at_once(tmp_path, special):
    path = tmp_path / "robot.urdf"
    if special == "fifo":
        os.mkfifo(path)
    elif special == "directory":
        path.mkdir()
    else:
        path = special
    failed: list[BaseException] = []

    def read() -> None:
        try:
            urdf_from_parameters({"robot_description": "", "urdf_path": str(path)})
        except (OSError, ValueError) as exc:
            failed.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10.0)  # at once: a loaded machine may still take a while to run the thread
    if reader.is_alive() and special == "fifo":  # the bug: let the open go on
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert not reader.is_alive() and failed, "not refused within 10 s"
    assert "not a regular file" in str(failed[0])
