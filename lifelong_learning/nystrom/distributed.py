"""Who takes part in a Nyström job: one process, or a ``torch.distributed`` process group.

Nyström KRR splits over samples (Meanti et al. §4; Falkon): everything the direct solver and the
exact objectives need from the data is a sum over rows of m×m and m×p terms
(:class:`~lifelong_learning.nystrom.sums.KernelSums`), so each process reads its share of the
rows and the sums are all-reduced. A :class:`Group` hides whether there are other processes:
:data:`ONE_PROCESS` does nothing, :class:`TorchGroup` calls ``torch.distributed`` (gloo on CPU,
NCCL for CUDA tensors), set up by :func:`joined` from the environment ``torchrun`` gives each
process (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``).

Rows have one global order, that of the job's inputs: process ``r`` holds the ``r``-th contiguous
share (:func:`contiguous_shares`), so global row ``i`` is the same row whatever the number of
processes, and random choices made on global row indices (initial centres, the median
heuristic's subsample) are the same too; only the order in which floating-point sums are added
differs: float64 predictions agree to rounding amplified by the problem's conditioning (1e-8
relative in the tests; a few 1e-7 for 2,000 centres and λ ≈ 4e-6, where summing the same rows in
two groups instead of one moves a one-process fit as much: docs/benchmarks/nystrom.md §6).

A process that fails before a collective call must not leave the others waiting in it:
:meth:`Group.agree` is the checkpoint where every process says whether it failed, and all raise
:class:`RankFailedError` with the failing ranks' messages when any did. A process that dies
outright is ``torchrun``'s to handle: it stops the other processes of the job.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from lifelong_learning.core.process import launched_by_torchrun

#: seconds a collective call waits for the other processes before the job fails
DEFAULT_TIMEOUT_S = 1800.0


class RankFailedError(RuntimeError):
    """One or more processes of the job failed; raised on every process at :meth:`Group.agree`."""


class GroupSetupError(RuntimeError):
    """The process group could not be set up (:func:`joined`): the rendezvous did not answer, or
    the processes disagree on the world size."""


class Group:
    """One process (rank 0 of 1): every collective call is the identity."""

    rank = 0
    world_size = 1

    @property
    def is_main(self) -> bool:
        """Whether this process writes the job's outputs (rank 0)."""
        return self.rank == 0

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum of ``tensor`` over the processes, in place (and returned)."""
        return tensor

    def all_gather(self, obj: Any) -> list[Any]:
        """Every process's ``obj`` (picklable; small: counts, messages, a few rows), by rank."""
        return [obj]

    def agree(self, error: BaseException | None) -> None:
        """Raise on every process if ``error`` is set on any of them: one process raises ``error``
        itself, several raise :class:`RankFailedError` naming each failed process and its error."""
        if error is not None:
            raise error

    def decided(self, flag: bool) -> bool:
        """The main process's ``flag`` on every process (a decision all must follow: stop
        iterating, say)."""
        return bool(flag)

    def counter(self, name: str) -> Callable[[int], int]:
        """A counter every process adds to: ``add(k)`` adds ``k`` and returns the sum so far over
        the processes (those that have added), without waiting for any. ``name`` must be new to
        the job and the same on every process."""
        total = 0

        def add(k: int) -> int:
            nonlocal total
            total += int(k)
            return total

        return add

    def __repr__(self) -> str:
        return f"{type(self).__name__}(rank={self.rank}, world_size={self.world_size})"


#: the single-process group (no ``torch.distributed`` set-up)
ONE_PROCESS = Group()


class TorchGroup(Group):
    """The default ``torch.distributed`` process group (already initialized)."""

    def __init__(self) -> None:
        import torch.distributed as dist

        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialized (use joined())")
        self._dist = dist
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.backend = str(dist.get_backend())
        self._store: Any = None

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        if "nccl" not in self.backend and tensor.is_cuda:  # gloo reduces CPU tensors
            host = tensor.cpu()
            self._dist.all_reduce(host)
            tensor.copy_(host)
        else:
            self._dist.all_reduce(tensor)
        return tensor

    def all_gather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.world_size
        self._dist.all_gather_object(out, obj)
        return out

    def agree(self, error: BaseException | None) -> None:
        failures = self.all_gather(None if error is None else f"{type(error).__name__}: {error}")
        failed = [f"rank {r}: {msg}" for r, msg in enumerate(failures) if msg is not None]
        if failed:
            raise RankFailedError("; ".join(failed)) from error

    def decided(self, flag: bool) -> bool:
        return bool(self.all_gather(bool(flag))[0])

    def counter(self, name: str) -> Callable[[int], int]:
        """Counts meet in the job's rendezvous store (the TCPStore at ``MASTER_ADDR:MASTER_PORT``
        that ``torchrun`` or rank 0 serves), a key per counter: no collective call."""
        if self._store is None:
            self._store = self._dist.TCPStore(
                os.environ["MASTER_ADDR"],
                int(os.environ["MASTER_PORT"]),
                is_master=False,
                timeout=datetime.timedelta(seconds=60),
            )
        key = f"lifelong_learning/counter/{name}"
        store = self._store
        return lambda k: int(store.add(key, int(k)))


@contextmanager
def joined(backend: str = "auto", timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[Group]:
    """The job's :class:`Group`: a :class:`TorchGroup` when started by ``torchrun`` with more than
    one process (the process group is set up here and torn down on exit), else :data:`ONE_PROCESS`.

    ``backend``: ``"auto"`` (NCCL when the machine has a CUDA device for each of its processes,
    else gloo), ``"gloo"`` or ``"nccl"``. With NCCL each process uses the CUDA device of its
    ``LOCAL_RANK`` and CPU tensors still go over gloo (``"cpu:gloo,cuda:nccl"``).
    """
    if not launched_by_torchrun():
        yield ONE_PROCESS
        return
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    if backend == "auto":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        backend = "nccl" if dist.is_nccl_available() and 0 < local <= gpus else "gloo"
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'auto', 'gloo' or 'nccl', got {backend!r}")
    if backend == "nccl":  # CUDA tensors over NCCL, CPU tensors (counts, objects, CPU sums) over gloo
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        backend = "cpu:gloo,cuda:nccl"
    where = (
        f"rank {os.environ.get('RANK', '?')} of {os.environ.get('WORLD_SIZE', '?')}, rendezvous "
        f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    )
    try:
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=float(timeout_s)))
    except Exception as exc:  # DistNetworkError, DistStoreError, RuntimeError, ValueError (bad env)
        why = f"{type(exc).__name__}: {exc}"
        raise GroupSetupError(f"could not join the process group ({where}): {why}") from exc
    # monitored barriers need gloo: with NCCL, a gloo group of the same processes for the exit
    exit_group = None if backend == "gloo" else dist.new_group(backend="gloo")
    try:
        yield TorchGroup()
    finally:
        # No process tears the group down while another still uses it (one that did aborted now
        # and then at exit: "terminate called without an active exception"); bounded by the job's
        # timeout (the main process may still gate and write while the others wait here), so
        # that a process whose peers died still ends.
        try:
            dist.monitored_barrier(group=exit_group, timeout=datetime.timedelta(seconds=float(timeout_s)))
        except Exception:  # peers gone
            pass
        dist.destroy_process_group()


def contiguous_shares(weights: Sequence[float], world_size: int) -> list[range]:
    """Split items of the given weights (e.g. file sizes), in order, into ``world_size``
    contiguous ranges of about equal total weight (item ``i`` goes to the share in which the middle
    of its weight falls). When that would leave a share empty although there are as many items as
    shares, the items are split into shares of about equal counts instead; with fewer items than
    processes some shares are empty."""
    if world_size < 1:
        raise ValueError("world_size must be >= 1")
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    if w.size == 0:
        return [range(0, 0)] * world_size
    if not w.sum() > 0:
        w = np.ones_like(w)
    middle = (np.cumsum(w) - 0.5 * w) / w.sum()
    owner = np.minimum((middle * world_size).astype(int), world_size - 1)
    if w.size >= world_size and np.unique(owner).size < world_size:  # a share would be empty
        owner = np.minimum(np.arange(w.size) * world_size // w.size, world_size - 1)  # equal counts
    starts = np.searchsorted(owner, np.arange(world_size), side="left")
    stops = np.searchsorted(owner, np.arange(world_size), side="right")
    return [range(int(a), int(b)) for a, b in zip(starts, stops, strict=True)]


class ShardedRows:
    """This process's rows of a job's data: rows ``offset`` to ``offset + len(X)`` of ``total``.

    Args:
        X, Y: this process's rows (tensors), in global order; ``Y`` may be None.
        group: the job's :class:`Group` (counts are all-gathered here: a collective call).
    """

    def __init__(self, X: torch.Tensor, Y: torch.Tensor | None = None, group: Group = ONE_PROCESS) -> None:
        if Y is not None and X.shape[0] != Y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows, Y has {Y.shape[0]}")
        self.X, self.Y, self.group = X, Y, group
        self.counts = [int(c) for c in group.all_gather(int(X.shape[0]))]
        self.offset = sum(self.counts[: group.rank])
        self.total = sum(self.counts)

    def rows(self, indices: Sequence[int] | np.ndarray) -> torch.Tensor:
        """Rows ``X[i]`` at global indices (in the order given), the same on every process."""
        idx = np.asarray(indices, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self.total):
            raise IndexError(f"row indices outside 0..{self.total - 1}")
        mine = (idx >= self.offset) & (idx < self.offset + self.X.shape[0])
        if self.group.world_size == 1:
            return self.X[torch.as_tensor(idx, device=self.X.device)]
        local = self.X[torch.as_tensor(idx[mine] - self.offset, device=self.X.device)].cpu().numpy()
        parts = self.group.all_gather((np.flatnonzero(mine), local))
        out = np.empty((idx.size, self.X.shape[1]), dtype=local.dtype)
        for where, values in parts:
            out[where] = values
        return torch.as_tensor(out, dtype=self.X.dtype, device=self.X.device)

    def column_moments(self, T: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and standard deviation (``n − 1``) of each column of this process's ``T`` rows over
        every process (two all-reduces; float64 sums; one process: ``T.mean(0)``, ``T.std(0)``)."""
        if self.group.world_size == 1:
            return T.mean(0), T.std(0)
        n = float(self.total)
        s = self.group.all_reduce(T.sum(0).to(torch.float64))
        mean = s / n
        c = self.group.all_reduce(((T.to(torch.float64) - mean) ** 2).sum(0))
        std = torch.sqrt(c / max(n - 1.0, 1.0))
        return mean.to(T.dtype), std.to(T.dtype)

    def column_ranges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-column minimum and maximum of ``X`` over every process."""
        parts = self.group.all_gather(
            (self.X.min(0).values.cpu().numpy(), self.X.max(0).values.cpu().numpy())
            if self.X.shape[0]
            else None
        )
        lows = np.min([p[0] for p in parts if p is not None], axis=0)
        highs = np.max([p[1] for p in parts if p is not None], axis=0)
        dev, dt = self.X.device, self.X.dtype
        return torch.as_tensor(lows, dtype=dt, device=dev), torch.as_tensor(highs, dtype=dt, device=dev)


class JobProgress:
    """Progress of one phase of a job over all its processes, with an ETA: every process adds
    what it has done (messages, rows, epochs); the main process shows a tqdm bar of the sum.

    A process passes its count on at most every ``interval_s`` (and at :meth:`close`), through
    :meth:`Group.counter`: no process waits for another while it works. At :meth:`close` the main
    process waits until every process has closed (at most ``close_timeout_s``), so that its bar
    ends at the job's count. ``total`` is the whole job's. Counts are best-effort: a counter that
    cannot be reached turns the bar off, never the job.

    Args:
        group: the job's processes. total: the sum every process's counts reach.
        desc, unit: the bar's label and unit. enabled: False makes every call a no-op (e.g.
            ``--no-progress``); the bar is the main process's alone either way.
    """

    _made = 0  # progress bars made by this process: a job's processes make them in the same order

    def __init__(
        self,
        group: Group,
        total: float,
        desc: str,
        unit: str = "it",
        enabled: bool = True,
        interval_s: float = 0.5,
        close_timeout_s: float = 600.0,
    ) -> None:
        self.group, self.interval_s, self.close_timeout_s = group, float(interval_s), float(close_timeout_s)
        self._pending, self._last = 0, time.monotonic()
        self._add: Callable[[int], int] | None = None
        self._closed: Callable[[int], int] | None = None
        self._bar: Any = None
        if not enabled:
            return
        JobProgress._made += 1  # the same sequence on every process: the same keys
        key = f"{desc}/{JobProgress._made}"
        try:
            self._add, self._closed = group.counter(key), group.counter(f"{key}/closed")
        except Exception:  # no store to meet in: no bar
            return
        if group.is_main:
            from tqdm.auto import tqdm

            where = f" ({group.world_size} processes)" if group.world_size > 1 else ""
            self._bar = tqdm(total=total, desc=f"{desc}{where}", unit=unit, unit_scale=True)

    def add(self, k: int) -> None:
        """This process did ``k`` more."""
        if self._add is None:
            return
        self._pending += int(k)
        if time.monotonic() - self._last >= self.interval_s:
            self._flush()

    def _flush(self) -> int:
        """Pass this process's count on; the sum so far (-1 if the counter went away)."""
        if self._add is None:
            return -1
        try:
            done = self._add(self._pending)
        except Exception:  # the store went away: stop counting, keep the job
            self._add = None
            return -1
        self._pending, self._last = 0, time.monotonic()
        if self._bar is not None and done > self._bar.n:
            self._bar.update(done - self._bar.n)
        return done

    def close(self) -> None:
        """Pass on the rest of this process's count; the main process, once every process has
        closed (or after ``close_timeout_s``), shows the job's count and closes its bar."""
        self._flush()
        try:
            if self._closed is not None:
                closed = self._closed(1)
                deadline = time.monotonic() + self.close_timeout_s
                while (
                    self._bar is not None and closed < self.group.world_size and time.monotonic() < deadline
                ):
                    time.sleep(0.02)
                    closed = self._closed(0)
                self._flush()
        except Exception:  # the store went away: the bar ends where it is
            pass
        if self._bar is not None:
            self._bar.close()
        self._add = self._closed = self._bar = None

    def __enter__(self) -> JobProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ONE_PROCESS",
    "Group",
    "GroupSetupError",
    "JobProgress",
    "RankFailedError",
    "ShardedRows",
    "TorchGroup",
    "contiguous_shares",
    "joined",
]
