"""Hung tests: a test that runs past :data:`HUNG_S` is ended with its stacks printed and what it
started killed, and under pytest-xdist it runs once more, on another worker, unless it had failed.

Why: Fast DDS 3.2 has deadlocks that the tests cannot avoid (a participant's receive thread, holding
its discovery lock, waits for its event thread, which waits for that lock: upstream issue 6502;
destroying one of several participants in one process: issue 6193). One must cost the run minutes,
not the test, and never hold the run until CI's limit. ``test/conftest.py`` takes the hooks from
here; the node processes have their own guard, the launch files' stop escalation.
"""

from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

# this test session's mark, set by the controller (or the only process) and inherited by its workers
# and every process they start: what a worker that ended in a test left running is found by it
if "PYTEST_XDIST_WORKER" not in os.environ:
    os.environ["LL_TEST_SESSION"] = uuid.uuid4().hex


def _hung_s(text: str) -> float:
    """``LL_TEST_HUNG_S`` read: finite seconds > 0 (else a clear error before any test runs, not every
    test taken for hung)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not (seconds > 0 and math.isfinite(seconds)):
        raise pytest.UsageError(f"LL_TEST_HUNG_S must be a finite number of seconds above 0, got {text!r}")
    return seconds


#: a test running longer than this (s) is taken for hung (the longest, the demo, takes about 2 min here);
#: ``LL_TEST_HUNG_S`` sets another (above 330 s, raise pytest's ``faulthandler_timeout`` with it:
#: ``-o faulthandler_timeout=``). A thread of this process ends it (:func:`_end_hung_test`); a hang
#: that holds Python's lock (a C call of rclpy that waits inside Fast DDS) stops that thread too, and
#: pytest's ``faulthandler_timeout`` (pyproject.toml, 30 s later, outside Python) ends it then.
#: Under xdist the test then runs once more (:func:`pytest_handlecrashitem`).
HUNG_S = _hung_s(os.environ.get("LL_TEST_HUNG_S", "300"))
#: where a worker notes the tests that failed before their teardown (:func:`pytest_runtest_makereport`)
FAILURES = Path(tempfile.gettempdir()) / f"lifelong-learning-tests-{os.environ['LL_TEST_SESSION']}-failed"


class NeverRaisedError(Exception):
    """Raised by no test. Every test under xdist is marked ``flaky(reruns=1, only_rerun=[NeverRaisedError])``
    (:data:`RERUN_IF_IT_HANGS`): pytest-rerunfailures then runs again, once, a test whose worker
    ended while running it (:func:`pytest_handlecrashitem`), and no test that failed."""


#: the mark every test gets under xdist (conftest's ``pytest_collection_modifyitems``)
RERUN_IF_IT_HANGS = pytest.mark.flaky(reruns=1, only_rerun=[NeverRaisedError])


def _failure_file(nodeid: str) -> Path:
    return FAILURES / hashlib.sha256(nodeid.encode()).hexdigest()[:32]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    """Under xdist, a failed set-up or call is noted at once (:data:`FAILURES`): pytest-rerunfailures
    reports a test's phases only after its teardown, so a test that fails and then hangs in its
    teardown would otherwise be taken for a hang alone, run again, and its failure never shown."""
    report = yield
    if report.failed and report.when in ("setup", "call") and "PYTEST_XDIST_WORKER" in os.environ:
        with contextlib.suppress(OSError):
            FAILURES.mkdir(exist_ok=True)
            _failure_file(item.nodeid).write_text(f"{report.when} failed:\n{report.longreprtext}")
    return report


def forget_failures() -> None:
    """Remove the notes of :func:`pytest_runtest_makereport` (the controller, at the session's end)."""
    shutil.rmtree(FAILURES, ignore_errors=True)


def session_marks() -> dict[str, str]:
    """The variables by which :func:`session_processes` finds what a test started: for a child given an
    environment of its own (not this one's), so that a hung test's guard still finds and ends it."""
    return {k: os.environ[k] for k in ("LL_TEST_SESSION", "PYTEST_XDIST_WORKER") if k in os.environ}


def session_processes(worker: str) -> list[int]:
    """The processes that this test session's worker ``worker`` started, and theirs, found by the
    environment they inherited (``LL_TEST_SESSION``, ``PYTEST_XDIST_WORKER``): after the worker has
    ended, whatever of them still runs."""
    marks = {
        f"LL_TEST_SESSION={os.environ['LL_TEST_SESSION']}".encode(),
        f"PYTEST_XDIST_WORKER={worker}".encode(),
    }
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marks <= set(environ.read_bytes().split(b"\0")) and int(environ.parent.name) != os.getpid():
                found.append(int(environ.parent.name))
        except (OSError, ValueError):  # ended meanwhile, or not ours to read
            continue
    return found


def _stop_then_kill(find: Any) -> int:
    """Stop every process ``find()`` gives, again until it gives no new one (none starts another
    meanwhile), then kill them all; how many."""
    stopped: set[int] = set()
    while new := set(find()) - stopped:
        for pid in new:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= new
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(stopped)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: Any) -> bool | None:
    """A worker ended while running ``crashitem`` (a hang ended by the guard or by faulthandler, or a
    crash): the processes it started are killed (a hang that held Python's lock left them running).
    Unless the test had failed before it hung (its failure is then added to the report, and True
    ends the hook's handling), pytest-rerunfailures, which handles this hook next, runs it once more.
    A deadlock inside Fast DDS is what this is for: it costs the run :data:`HUNG_S`, not the test.
    The report says so; the test's stacks are in the output above it."""
    worker = report.node.gateway.id  # type: ignore[attr-defined]
    killed = _stop_then_kill(lambda: session_processes(worker))
    said = f"worker {worker} ended in {crashitem} (hung or crashed): {killed} processes it started killed"
    terminal = sched.config.pluginmanager.getplugin("terminalreporter")
    if terminal is not None:
        terminal.write_line(said)
    try:
        failure = _failure_file(crashitem).read_text()
    except OSError:
        failure = None
    if failure is None:
        report.longrepr = f"{report.longrepr} ({said})"
        return None
    report.longrepr = f"{report.longrepr} ({said}); before, its {failure}"
    return True  # failed: not run again


def _descendants() -> list[int]:
    """The processes this one started, and theirs, that still run (a node process started by a
    command the test ran, in a session of its own, included)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    out, todo = [], list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _end_hung_test(item: pytest.Item) -> None:
    """Print every thread's stack, kill the processes the test started and end this process."""
    try:
        capture = item.config.pluginmanager.getplugin("capturemanager")
        if capture is not None:  # what is written now must reach the terminal, not the test's capture
            capture.suspend_global_capture(in_=False)
        print(f"\n{item.nodeid} has run for {HUNG_S:.0f} s: taken for hung; its threads:", file=sys.stderr)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        _stop_then_kill(_descendants)
        sys.stderr.flush()
    finally:
        os._exit(70)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Every test, its fixtures' set-up and tear-down included, under :data:`HUNG_S` (not under
    ``--pdb``: a person at the debugger is not a hang)."""
    if item.config.getoption("usepdb", False):
        return (yield)
    done = threading.Event()
    guard = threading.Thread(
        target=lambda: done.wait(HUNG_S) or _end_hung_test(item), name="hung-test-guard", daemon=True
    )
    guard.start()
    try:
        return (yield)
    finally:
        done.set()
