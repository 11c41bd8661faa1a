"""How a process of this package ends once its work is done, and whether it is one of a job's.

:func:`leave` ends the process without the interpreter's finalization. Two kinds of process use it,
each after its resources are released and its files written:

- a node executable, after its final checkpoint and the middleware's shutdown (finalization
  collected the modules of torch, scipy and numba: 1-2.5 s of a stop under load, against
  ``ros2 launch``'s 5 s before SIGTERM);
- a process of a ``torchrun`` job, after its process group is torn down: what the collective
  library and torch leave for finalization to destroy is not destroyed then, so an abort there
  (a thread joined or an interpreter lock taken while the interpreter is torn down: the kind
  pytorch/pytorch#179291 discusses for a group never destroyed) cannot turn a finished job into one
  ``torchrun`` reports as failed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
from collections.abc import Callable
from typing import NoReturn

__all__ = ["exit_after", "launched_by_torchrun", "leave"]

#: ``sigev_notify``: the timer's expiry calls a function on a thread of the C library's
_SIGEV_THREAD = 2
_CLOCK_MONOTONIC = 1


class _SigEvent(ctypes.Structure):
    """``struct sigevent`` of Linux (64 bytes) for ``SIGEV_THREAD``."""

    _fields_ = [
        ("value", ctypes.c_void_p),  # union sigval: the function's argument (the exit status)
        ("signo", ctypes.c_int),
        ("notify", ctypes.c_int),
        ("function", ctypes.c_void_p),
        ("attributes", ctypes.c_void_p),
        ("_rest", ctypes.c_byte * 32),
    ]


class _TimeSpec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class _TimerSpec(ctypes.Structure):
    _fields_ = [("interval", _TimeSpec), ("value", _TimeSpec)]


def leave(status: int) -> NoReturn:
    """End the process now with ``status``, its output flushed (Python's and C's stdio), without
    the interpreter's finalization: for a process whose work is done and whose resources are
    released (files closed, the middleware shut down, the process group destroyed)."""
    logging.shutdown()  # the standard library's handlers flushed (finalization would have)
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed, or a broken pipe: nothing more can be said there
            pass
    try:
        ctypes.CDLL(None).fflush(None)  # what C code (the middleware, a collective library) printed
    except (OSError, AttributeError):
        pass
    os._exit(status)


def launched_by_torchrun() -> bool:
    """Whether this process is one of several started by ``torchrun`` (``WORLD_SIZE`` > 1)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def exit_after(seconds: float, status: int = 0) -> Callable[[], None] | None:
    """End the process with ``status`` after ``seconds`` unless the returned function is called first
    (it disarms); None where the C library offers no such timer (then nothing is armed).

    A POSIX timer of the C library (``timer_create`` with ``SIGEV_THREAD``) calls ``_exit(status)``
    on a thread of its own: no Python code runs and no Python lock is taken, so it acts also while
    every Python thread is stuck in C code holding the interpreter's lock (a middleware call that
    does not return). Nothing is flushed: for a process whose output and files are written already.
    """
    libc = ctypes.CDLL(None)
    rt = libc if hasattr(libc, "timer_create") else None
    if rt is None and (name := ctypes.util.find_library("rt")):  # glibc before 2.34
        rt = ctypes.CDLL(name)
    if rt is None or not hasattr(rt, "timer_create"):
        return None
    event = _SigEvent(
        value=int(status) or None,
        notify=_SIGEV_THREAD,
        function=ctypes.cast(libc._exit, ctypes.c_void_p).value,
    )
    timer = ctypes.c_void_p()
    if rt.timer_create(_CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(timer)) != 0:
        return None
    whole = int(seconds)
    spec = _TimerSpec(value=_TimeSpec(whole, int((seconds - whole) * 1e9)))
    if rt.timer_settime(timer, 0, ctypes.byref(spec), None) != 0:
        rt.timer_delete(timer)
        return None
    return lambda: rt.timer_delete(timer)
