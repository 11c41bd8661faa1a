"""How a process ends once its work is done (lifelong_learning.core.process)."""

from __future__ import annotations

import subprocess
import sys

from lifelong_learning.core.process import launched_by_torchrun

LEAVES = """
import atexit, ctypes
from lifelong_learning.core.process import leave
atexit.register(lambda: print("finalized"))
print("python's", end=" ")
ctypes.CDLL(None).printf(b"and C's output\\n")
leave(3)
"""


def test_leave_ends_with_the_status_and_the_output_flushed_without_finalization():
    res = subprocess.run([sys.executable, "-c", LEAVES], capture_output=True, text=True, timeout=60)
    assert res.returncode == 3, res.stderr
    # both buffers reached the pipe (C's stdout is block-buffered on a pipe), and no exit handler ran
    assert "python's" in res.stdout and "and C's output" in res.stdout
    assert "finalized" not in res.stdout


def test_a_process_of_a_torchrun_job_is_one_of_several(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert not launched_by_torchrun()  # run by hand
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert not launched_by_torchrun()  # torchrun with one process: nothing to tear down
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert launched_by_torchrun()


ARMED = """
import ctypes, sys, time
from lifelong_learning.core.process import exit_after
disarm = exit_after(0.3, int(sys.argv[2]))
assert disarm is not None, "no timer: not Linux?"
print("armed", flush=True)
if sys.argv[1] == "hang":
    ctypes.PyDLL(None).sleep(120)  # C code that keeps the interpreter's lock: no Python thread runs
else:
    disarm()
    time.sleep(0.6)  # past the time the timer would have ended it
    sys.exit(3)
"""


def test_exit_after_ends_a_process_stuck_in_c_code_with_the_status_given():
    for status in (0, 7):
        res = subprocess.run(
            [sys.executable, "-c", ARMED, "hang", str(status)], capture_output=True, text=True, timeout=60
        )
        assert res.returncode == status and "armed" in res.stdout, res.stderr


def test_exit_after_disarmed_leaves_the_process_alone():
    res = subprocess.run(
        [sys.executable, "-c", ARMED, "disarm", "0"], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 3, res.stderr
