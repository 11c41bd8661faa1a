"""How a process of this package ends once its work is done, and whether it is one of a job's.

:func:`leave` ends the process without the interpreter's finalization. Two kinds of process use it,
each after its resources are released and its files written:

- a node executable, after its final checkpoint and the middleware's shutdown (finalization
  collected the modules of torch, scipy and numba: 1-2.5 s of a stop under load, against
  ``ros2 launch``'s 5 s before SIGTERM);
- a process of a ``torchrun`` job, after its process group is torn down: the collective library's
  worker threads can still hold objects whose destruction during finalization takes the
  interpreter's lock of an interpreter being torn down, and the process then aborts (SIGABRT;
  pytorch/pytorch#179291 describes it), which ``torchrun`` reports as the job's failure after the
  job's work was done.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import NoReturn

__all__ = ["launched_by_torchrun", "leave"]


def leave(status: int) -> NoReturn:
    """End the process now with ``status``, its output flushed (Python's and C's stdio), without
    the interpreter's finalization: for a process whose work is done and whose resources are
    released (files closed, the middleware shut down, the process group destroyed)."""
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
