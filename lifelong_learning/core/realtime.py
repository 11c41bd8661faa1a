"""Real-time scheduling of a process's answering path (Linux ``SCHED_FIFO``).

A node that answers at control rate (``inverse_dynamics`` at 500 Hz–1 kHz) shares the CPU with
everything else on the robot's computer. Under the default policy (``SCHED_OTHER``) a message
that arrives while other processes run waits for the scheduler to give its threads a core again,
and on a loaded 2-core machine that wait, not the node's own work, sets the tail latency. As
ros2_control's controller manager does for its loop, the threads on the answering path are given
a fixed real-time priority: the thread that spins the node's executor (it takes, predicts and
publishes) and the middleware's threads (they receive the messages and wake the executor). Every
other thread keeps the normal policy, in particular a thread that learns in the background: it
must never delay an answer, and a runaway real-time thread could starve the machine. Background
threads started later by a real-time thread (a checkpoint write) inherit its policy, and drop it
first thing with :func:`normal_policy_here`.

The middleware's threads are found by name: Fast DDS (ROS 2's default RMW) names them ``dds.*``
(``dds.udp.7411``, ``dds.shm.7413``, ``dds.ev.0``, ...). Threads a thread of this policy creates
later inherit it (Linux); those a thread at the normal policy starts later, or that were not named
yet when :func:`make_realtime` looked, get it from :meth:`RealtimeThreads.catch_up`.

Unprivileged users need an ``rtprio`` limit (``/etc/security/limits.conf``, e.g.
``@realtime - rtprio 98`` and the user in group ``realtime``, as for ros2_control); without it
:func:`make_realtime` raises :class:`PermissionError`, which the caller reports and survives.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: name prefixes of the middleware's threads (Fast DDS)
MIDDLEWARE_THREAD_PREFIXES = ("dds.",)

#: ``/proc/<pid>/task/<tid>/stat`` field (1-based) holding the scheduling policy
_POLICY_FIELD = 41


def supported() -> bool:
    """Whether this platform has ``SCHED_FIFO`` per thread (Linux)."""
    return hasattr(os, "sched_setscheduler") and Path("/proc/self/task").is_dir()


def max_priority() -> int:
    """The highest ``SCHED_FIFO`` priority (99 on Linux)."""
    return os.sched_get_priority_max(os.SCHED_FIFO)


def thread_names(pid: int | None = None) -> dict[int, str]:
    """Thread id → name of every thread of process ``pid`` (this one by default)."""
    base = Path(f"/proc/{pid or os.getpid()}/task")
    names: dict[int, str] = {}
    for task in base.iterdir():
        try:
            names[int(task.name)] = (task / "comm").read_text().strip()
        except (OSError, ValueError):  # the thread ended meanwhile
            continue
    return names


def thread_policy(tid: int, pid: int | None = None) -> int:
    """The scheduling policy of thread ``tid`` of process ``pid`` (``os.SCHED_*``), read from /proc."""
    stat = Path(f"/proc/{pid or os.getpid()}/task/{tid}/stat").read_text()
    # fields after the command name (in parentheses, which may hold spaces): field 3 onwards
    rest = stat[stat.rindex(")") + 2 :].split()
    return int(rest[_POLICY_FIELD - 3])


def normal_policy_here() -> None:
    """Put the calling thread back at the normal policy when it inherited ``SCHED_FIFO`` or
    ``SCHED_RR`` from the thread that started it (Linux threads inherit it): call it first in a
    thread of background work (learning, a checkpoint write), which must never compete with the
    answering path. Lowering needs no privilege; elsewhere, or on failure, nothing happens."""
    if not supported():
        return
    try:
        if os.sched_getscheduler(0) in (os.SCHED_FIFO, os.SCHED_RR):
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except OSError:
        return


#: the nice value of background threads that copy much memory (a model file arriving): under
#: contention the scheduler favours the answering path
BACKGROUND_NICE = 10


def make_background(tids: Iterable[int], nice: int = BACKGROUND_NICE) -> list[int]:
    """Put threads ``tids`` of this process at the normal policy (when they inherited or were given
    ``SCHED_FIFO``/``SCHED_RR``) and at least at ``nice``: background work that must not compete
    with the answering path. Lowering needs no privilege; a thread that ended is skipped. Returns
    the ids of the threads changed (none elsewhere than Linux)."""
    if not supported():
        return []
    changed = []
    for tid in tids:
        try:
            if os.sched_getscheduler(tid) in (os.SCHED_FIFO, os.SCHED_RR):
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
                changed.append(tid)
            if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
                changed.append(tid)
        except OSError:  # ended meanwhile, or not allowed: it stays as it is
            continue
    return sorted(set(changed))


@dataclass
class RealtimeThreads:
    """What :func:`make_realtime` changed."""

    priority: int
    answering: int  #: thread id of the calling (answering) thread
    middleware: list[int] = field(default_factory=list)  #: thread ids of the middleware's threads
    normal: list[int] = field(default_factory=list)  #: threads kept at the normal policy

    def catch_up(self) -> list[int]:
        """Give ``SCHED_FIFO`` at :attr:`priority` to the middleware's threads that are not on it: those
        started since :func:`make_realtime` by a thread at the normal policy, and those that were not
        named yet when it looked (a Fast DDS thread names itself once it first runs, later on a loaded
        machine); :attr:`middleware` becomes the middleware's threads now on it. Returns the ids given
        it now. For the process's answering thread to call now and then (the node's diagnostics)."""
        fifo = os.sched_param(self.priority)
        added, middleware = [], []
        for tid, name in sorted(thread_names().items()):
            if tid == self.answering or tid in self.normal or not name.startswith(MIDDLEWARE_THREAD_PREFIXES):
                continue
            try:
                if os.sched_getscheduler(tid) != os.SCHED_FIFO:
                    os.sched_setscheduler(tid, os.SCHED_FIFO, fifo)
                    added.append(tid)
            except OSError:  # ended meanwhile (or no longer allowed: it stays as it is)
                continue
            middleware.append(tid)
        self.middleware = middleware
        return added

    def describe(self) -> str:
        """One line for a log or diagnostics."""
        kept = ", ".join(map(str, self.normal)) or "none"
        return (
            f"SCHED_FIFO {self.priority} on the answering thread {self.answering} and "
            f"{len(self.middleware)} middleware threads; at the normal policy: {kept}"
        )


def make_realtime(priority: int, keep_normal: Iterable[int] = ()) -> RealtimeThreads:
    """Give the calling thread and the middleware's threads ``SCHED_FIFO`` at ``priority``, and
    the threads ``keep_normal`` (ids) ``SCHED_OTHER``.

    Raises:
        ValueError: ``priority`` outside ``[1, max_priority()]``.
        OSError: not supported here (not Linux).
        PermissionError: no ``rtprio`` allowance (see the module docstring); nothing is changed then.
    """
    if not supported():
        raise OSError("SCHED_FIFO per thread needs Linux")
    top = max_priority()
    if not 1 <= int(priority) <= top:
        raise ValueError(f"a real-time priority must be in [1, {top}], got {priority}")
    fifo = os.sched_param(int(priority))
    me = threading.get_native_id()
    normal = sorted(set(int(t) for t in keep_normal) - {me})
    os.sched_setscheduler(me, os.SCHED_FIFO, fifo)  # PermissionError here: nothing changed yet
    applied = RealtimeThreads(int(priority), me, [], normal)
    applied.catch_up()  # the middleware's threads
    for tid in normal:
        try:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except ProcessLookupError:
            continue
    return applied
