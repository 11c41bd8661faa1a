"""The manual environment of docs/robot.md: ``source scripts/env.sh`` then Python, from the repository
root (where the source tree comes first on ``sys.path``) and from any other folder."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hangs import session_marks

REPO = Path(__file__).resolve().parents[1]
SNIPPET = (
    "import rclpy, lifelong_learning.msg, lifelong_learning.srv\n"
    "from lifelong_learning.msg import Features\n"
    "rclpy.init()\n"
    "node = rclpy.create_node('environment_check')\n"
    "node.create_publisher(Features, 'environment_check', 1)\n"
    "print(lifelong_learning.__file__)\n"
)


@pytest.mark.parametrize("folder", ["root", "elsewhere"])
def test_env_sh_then_the_generated_interfaces_import(folder, tmp_path):
    if not (REPO / "install" / "setup.bash").exists():
        pytest.fail("no colcon install space: run scripts/bootstrap.sh first")
    cwd = REPO if folder == "root" else tmp_path
    script = f'source {REPO / "scripts" / "env.sh"} && python -c "$SNIPPET"'
    out = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env={
            "SNIPPET": SNIPPET,
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            **session_marks(),  # found and ended with the test if it hangs
            # the test session's isolated graph (conftest), not domain 0 of the network
            **{
                k: os.environ[k]
                for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")
                if k in os.environ
            },
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    where = Path(out.stdout.strip().splitlines()[-1])
    # from the root the checkout's modules are used, with the generated interfaces of the build
    assert (where.parent == REPO / "lifelong_learning") == (folder == "root")


def test_each_test_worker_has_a_ros_domain_of_its_own():
    """Under ``pytest -n N`` (``make test``) worker ``gwK`` runs on the session's domain plus K within
    1-101, so that two graph tests running at once never discover each other's nodes; alone, on the
    session's."""
    from conftest import worker_domain

    domain = int(os.environ["ROS_DOMAIN_ID"])
    assert 0 <= domain <= 101
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        assert "LL_TEST_DOMAIN_BASE" not in os.environ
    else:
        assert domain == worker_domain(int(os.environ["LL_TEST_DOMAIN_BASE"]), int(worker.removeprefix("gw")))


@pytest.mark.parametrize("base", [0, 1, 57, 100, 101])
def test_worker_domains_differ_and_avoid_the_default_domain(base):
    from conftest import worker_domain

    domains = [worker_domain(base, k) for k in range(8)]
    assert domains[0] == base and len(set(domains)) == 8
    assert all(0 <= d <= 101 for d in domains)
    assert base == 0 or 0 not in domains  # wrapping never lands on the default domain


HANGS = """
import subprocess, sys, time
SLEEP = "import time; time.sleep(300)"
LEADER = (  # starts a process in a session of its own, as a command starts its nodes
    "import subprocess, sys, time; "
    "p = subprocess.Popen([sys.executable, '-c', sys.argv[1]], start_new_session=True); "
    "open('grandchild.pid', 'w').write(str(p.pid)); time.sleep(300)"
)
def test_hangs():
    child = subprocess.Popen([sys.executable, "-c", LEADER, SLEEP])
    open("child.pid", "w").write(str(child.pid))
    while True:
        time.sleep(0.1)
"""


def running(pid: int) -> bool:
    """Whether ``pid`` runs: killed is gone, or a zombie until whoever adopted it reaps it."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_hung_test_prints_its_stacks_kills_what_it_started_and_ends_its_process(tmp_path):
    """A deadlock (one in Fast DDS was seen) fails its test in minutes instead of holding the run."""
    (tmp_path / "test_hangs.py").write_text(HANGS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LL_TEST_"))}
    env |= {
        "LL_TEST_HUNG_S": "5",
        "LL_KEEP_SHARED_MEMORY": "1",  # the other workers' nodes are running: their files are theirs
        "PYTHONPATH": os.pathsep.join([str(REPO / "test"), env.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-c", os.devnull, "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 70, out.stdout[-2000:] + out.stderr[-2000:]
    assert "test_hangs.py::test_hangs has run for 5 s: taken for hung" in out.stderr
    assert "in test_hangs" in out.stderr  # the stack of the hung test's thread
    child = int((tmp_path / "child.pid").read_text())
    grandchild = int((tmp_path / "grandchild.pid").read_text())  # started within the 5 s
    assert not running(child)
    assert not running(grandchild)  # in a session of its own, as a command's node: killed too


HANGS_ONCE = """
import ctypes, os, subprocess, sys, time
import pytest
def hang_once(name, hold_the_lock):
    if os.path.exists(name + ".ran"):
        return
    open(name + ".ran", "w").close()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    open(name + ".pid", "w").write(str(child.pid))
    if hold_the_lock:  # as rclpy's destroy waiting inside Fast DDS: no Python thread runs meanwhile
        ctypes.PyDLL(None).sleep(300)
    while True:
        time.sleep(0.1)
def test_hangs_once():
    hang_once("free", False)
def test_hangs_once_holding_the_lock():
    hang_once("held", True)
def test_fails():
    open("fails.ran", "a").write("x")
    assert False
@pytest.fixture
def hangs_after():
    yield
    while True:
        time.sleep(0.1)
def test_fails_then_hangs(hangs_after):
    open("fails_then_hangs.ran", "a").write("x")
    assert 1 == 2, "the failure before the hang"
"""


def test_under_workers_a_hung_test_runs_once_more_and_a_failed_one_does_not(tmp_path):
    """A deadlock inside Fast DDS costs the run minutes, not the test: ended by the guard (or by
    faulthandler, when it holds Python's lock), its worker is replaced, what it started is killed,
    and it runs once more; a test that fails is not run again, nor one that failed and then hung."""
    (tmp_path / "test_hangs_once.py").write_text(HANGS_ONCE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LL_TEST_"))}
    env |= {
        "LL_TEST_HUNG_S": "4",
        "LL_KEEP_SHARED_MEMORY": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO / "test"), env.get("PYTHONPATH", "")]),
    }
    pytest = [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-c", os.devnull]
    out = subprocess.run(
        [
            *pytest,
            "-ra",
            "-n",
            "2",
            "-o",
            "faulthandler_timeout=8",
            "-o",
            "faulthandler_exit_on_timeout=true",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    said = out.stdout[-3000:] + out.stderr[-3000:]
    assert out.returncode == 1, said
    assert "2 failed, 2 passed, 2 rerun" in out.stdout, said
    assert (tmp_path / "fails.ran").read_text() == "x"  # run once
    # failed, then hung in its teardown: not run again, and its failure is in the report
    assert (tmp_path / "fails_then_hangs.ran").read_text() == "x"
    assert "the failure before the hang" in out.stdout, said
    assert "test_hangs_once.py::test_hangs_once has run for 4 s: taken for hung" in out.stderr, said
    assert "Timeout (0:00:08)!" in out.stderr, said  # faulthandler's, for the hang holding the lock
    # the guard killed what the first started; what the second started, the controller
    assert (
        "test_hangs_once.py::test_hangs_once (hung or crashed): 0 processes it started killed" in out.stdout
    )
    assert "::test_hangs_once_holding_the_lock (hung or crashed): 1 processes it started killed" in out.stdout
    for name in ("free", "held"):
        assert not running(int((tmp_path / f"{name}.pid").read_text())), name
