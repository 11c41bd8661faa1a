"""Learn after answering: a thread that takes what callbacks queued and handles it as blocks.

A node that must answer every message at control rate (``inverse_dynamics`` at 1 kHz) answers in
its subscription callback and queues what is to be learned; this worker takes everything waiting
at once, so messages that arrived while a block was being learned become the next block (one
rank-k update of the model instead of k rank-1 updates, and no learning on the answering path).
Numerical work releases the GIL (numba kernels, BLAS), so on two cores answering and learning
run side by side.

The queue is bounded: when learning falls behind by ``capacity`` items, new ones are refused
(the caller counts them; the answers never wait). :meth:`BlockWorker.stop` lets the thread learn
what is queued before it ends, so a final checkpoint written afterwards has everything.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from lifelong_learning.core.realtime import normal_policy_here

Item = TypeVar("Item")


class BlockWorker(Generic[Item]):
    """A daemon thread that calls ``handle(block)`` with every item queued since the last call.

    Args:
        name: the thread's name.
        handle: learns a block (a non-empty list, oldest first); runs on the worker thread.
        capacity: most items waiting; :meth:`put` refuses more.
        on_error: called with an exception ``handle`` raised (the worker keeps running).
        min_interval: seconds from the start of one block to the start of the next (0: at once):
            what arrives meanwhile joins the next block, so that the fixed cost of a block (solving
            weights, committing) is paid less often and leaves the CPU to the answers.
    """

    def __init__(
        self,
        name: str,
        handle: Callable[[list[Item]], None],
        capacity: int,
        on_error: Callable[[BaseException], None],
        min_interval: float = 0.0,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be ≥ 1, got {capacity}")
        self._handle, self._on_error, self.capacity = handle, on_error, int(capacity)
        self.min_interval = max(0.0, float(min_interval))
        self._queue: deque[Item] = deque()
        self._ready = threading.Condition()
        self._stop = False
        self._busy = False
        self._in_progress = 0
        self.blocks = 0  # blocks handled
        self.items = 0  # items handled
        self.largest_block = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def native_id(self) -> int | None:
        """The worker thread's id in the operating system (None once it has ended)."""
        return self._thread.native_id if self._thread.is_alive() else None

    @property
    def waiting(self) -> int:
        """Items queued and not yet taken."""
        with self._ready:
            return len(self._queue)

    @property
    def pending(self) -> int:
        """Items not handled yet: queued, or in the block being handled."""
        with self._ready:
            return len(self._queue) + self._in_progress

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called: :meth:`put` refuses everything from then on."""
        with self._ready:
            return self._stop

    def put(self, item: Item) -> bool:
        """Queue ``item``; False (not queued) when ``capacity`` items wait or the worker stopped."""
        with self._ready:
            if self._stop or len(self._queue) >= self.capacity:
                return False
            self._queue.append(item)
            self._ready.notify()
            return True

    def _take(self, not_before: float) -> list[Item] | None:
        with self._ready:
            while not self._stop and (not self._queue or time.monotonic() < not_before):
                self._ready.wait(None if not self._queue else max(0.0, not_before - time.monotonic()))
            if not self._queue:
                return None
            block = list(self._queue)
            self._queue.clear()
            self._busy, self._in_progress = True, len(block)
            return block

    def _run(self) -> None:
        normal_policy_here()  # background work: never at the answering path's real-time priority
        started = -float("inf")
        while (block := self._take(started + self.min_interval)) is not None:
            started = time.monotonic()
            try:
                self._handle(block)
            except Exception as exc:  # a failing block must not end learning for good
                self._on_error(exc)
            finally:
                with self._ready:
                    self._busy, self._in_progress = False, 0
                    self.blocks += 1
                    self.items += len(block)
                    self.largest_block = max(self.largest_block, len(block))
                    self._ready.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing is queued or being learned; False on timeout."""
        with self._ready:
            return self._ready.wait_for(lambda: not self._queue and not self._busy, timeout)

    def stop(self, timeout: float | None = None) -> bool:
        """Refuse new items, let the thread learn what is queued, and end it; False if it is still
        running after ``timeout`` seconds."""
        with self._ready:
            self._stop = True
            self._ready.notify_all()
        self._thread.join(timeout)
        return not self._thread.is_alive()
