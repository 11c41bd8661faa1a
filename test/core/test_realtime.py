"""core.realtime: the calling thread and named middleware threads get SCHED_FIFO, kept threads do
not, a thread started later drops it with normal_policy_here; bad priorities are refused before
anything changes. Run in a child process, so that the test process keeps its own scheduling."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from lifelong_learning.core.realtime import make_realtime, max_priority, supported, thread_policy

pytestmark = pytest.mark.skipif(not supported(), reason="SCHED_FIFO per thread is Linux only")

#: what both children start with: a thread that names itself (after ``go``, when given) and idles
NAMED = textwrap.dedent(
    """
    import os, threading, time, ctypes
    from lifelong_learning.core.realtime import make_realtime, normal_policy_here, thread_policy

    def named(name, ids, go=None):
        if go is not None:
            go.wait()
        ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME, as the middleware does
        ids.append(threading.get_native_id())
        time.sleep(30)

    def realtime_or_exit(keep):  # SCHED_FIFO here, or the child says it was refused and ends
        try:
            return make_realtime(7, keep_normal=[keep])
        except PermissionError as exc:
            print("refused", exc)
            raise SystemExit(0)
    """
)

CHILD = NAMED + textwrap.dedent(
    """
    ids = []
    for name in ("dds.udp.7400", "worker"):
        threading.Thread(target=named, args=(name, ids), daemon=True).start()
    while len(ids) < 2:
        time.sleep(0.01)
    learning = threading.Thread(target=time.sleep, args=(30,), daemon=True)
    learning.start()
    applied = realtime_or_exit(learning.native_id)
    inherited = []

    def background():  # started by the real-time thread: inherits its policy, then drops it
        inherited.append(thread_policy(threading.get_native_id()))
        normal_policy_here()
        inherited.append(thread_policy(threading.get_native_id()))

    late = threading.Thread(target=background)
    late.start()
    late.join()
    print(inherited == [os.SCHED_FIFO, os.SCHED_OTHER])
    policy = {tid: thread_policy(tid) for tid in (applied.answering, *ids, learning.native_id)}
    print(applied.describe())
    print(int(policy[applied.answering] == os.SCHED_FIFO), int(policy[ids[0]] == os.SCHED_FIFO),
          int(policy[ids[1]] == os.SCHED_OTHER), int(policy[learning.native_id] == os.SCHED_OTHER),
          len(applied.middleware), applied.normal == [learning.native_id])
    """
)


def test_fifo_for_the_caller_and_the_middleware_only():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    if out.stdout.startswith("refused"):
        pytest.skip(f"this machine refuses SCHED_FIFO: {out.stdout}")
    background, described, checks = out.stdout.strip().splitlines()
    assert background == "True"  # a thread a real-time thread starts returns to the normal policy
    assert described.startswith("SCHED_FIFO 7 on the answering thread")
    assert checks == "1 1 1 1 1 True"


@pytest.mark.parametrize("priority", [0, -1, 100])
def test_priorities_out_of_range_change_nothing(priority):
    if priority == 100:
        priority = max_priority() + 1
    with pytest.raises(ValueError, match="real-time priority"):
        make_realtime(priority)
    assert thread_policy(os.getpid()) == os.SCHED_OTHER


def test_make_background_lowers_threads_and_never_raises_their_priority():
    """A background thread (a model file arriving) goes to the normal policy and at least the
    background nice; one already nicer keeps its nice; a thread that ended is skipped."""
    import threading
    import time

    from lifelong_learning.core.realtime import make_background

    ids: list[int] = []
    done = threading.Event()

    def idle(nice: int) -> None:
        os.setpriority(os.PRIO_PROCESS, 0, nice)  # this thread's own nice (Linux: per thread)
        ids.append(threading.get_native_id())
        done.wait(10)

    threads = [threading.Thread(target=idle, args=(n,), daemon=True) for n in (0, 15)]
    for t in threads:
        t.start()
    while len(ids) < 2:
        time.sleep(0.01)
    try:
        changed = make_background([*ids, 2**22 + 12345], nice=10)  # the last: no such thread
        assert [os.getpriority(os.PRIO_PROCESS, tid) for tid in ids] == [10, 15]
        assert changed == [ids[0]] and all(thread_policy(tid) == os.SCHED_OTHER for tid in ids)
    finally:
        done.set()


CATCH_UP_CHILD = NAMED + textwrap.dedent(
    """
    go, late_named, started_later = threading.Event(), [], []
    # named only after make_realtime looked
    threading.Thread(target=named, args=("dds.shm.7413", late_named, go), daemon=True).start()
    def learn():  # at the normal policy, it starts a middleware thread later
        go.wait()
        threading.Thread(target=named, args=("dds.ev.1", started_later), daemon=True).start()

    learning = threading.Thread(target=learn, daemon=True)
    learning.start()
    applied = realtime_or_exit(learning.native_id)
    before = len(applied.middleware)
    go.set()
    while len(late_named) < 1 or len(started_later) < 1:
        time.sleep(0.01)
    tids = late_named + started_later
    print([int(thread_policy(t) == os.SCHED_OTHER) for t in tids])
    added = applied.catch_up()
    print(before, sorted(added) == sorted(tids), [int(thread_policy(t) == os.SCHED_FIFO) for t in tids],
          all(t in applied.middleware for t in tids), applied.catch_up())
    """
)


def test_middleware_threads_named_or_started_later_are_caught_up():
    """A middleware thread that names itself after :func:`make_realtime` looked, and one a thread at
    the normal policy starts later, are left at the normal policy by it; ``catch_up`` gives them
    SCHED_FIFO (once: a second call changes nothing)."""
    out = subprocess.run([sys.executable, "-c", CATCH_UP_CHILD], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    if out.stdout.startswith("refused"):
        pytest.skip(f"this machine refuses SCHED_FIFO: {out.stdout}")
    left, caught = out.stdout.strip().splitlines()
    assert left == "[1, 1]"  # what make_realtime alone leaves
    assert caught == "0 True [1, 1] True []"
