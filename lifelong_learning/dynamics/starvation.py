"""Learning that starves: the share of the samples offered that was not learned, over a window (no ROS).

An online learner answers every sample whether it learns it or not, so a learner that has stopped
learning (every sample in contact, refused as an outlier, or dropped because learning cannot
keep up) looks healthy from outside while its model goes stale. :class:`StarvationMonitor` counts,
per block of samples, those offered for learning and those not learned with their reason, over
the last ``window_s`` of stamps:

    share = not learned / offered    (at least :data:`MIN_SAMPLES` offered in the window).

- **starved** from the block where ``share ≥ threshold``; it ends when ``share < threshold / 2``
  (hysteresis: a share that hovers at the threshold does not flicker);
- **off too long** when it has been starved for ``max_off_s`` of stamps: the caller escalates
  (the node: ERROR on ``/diagnostics`` and in its log, with the reason and what to do; it goes on
  answering, and learns again by itself as soon as samples may be learned). A bound that learned
  the held samples instead would let anyone who keeps pushing long enough write their push into
  the model; the bound is the operator's alarm, not a way round the checks.

What is offered is the caller's to say: the node offers every answered joint state with effort
while learning is on, less those thinned by ``learn_max_hz`` (by design, not starvation).
Stamps that go back (a simulator reset, a looping bag) start the window anew.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

#: samples offered in the window before a share is judged
MIN_SAMPLES = 20


@dataclass(frozen=True)
class StarvationSettings:
    """The node's ``starvation_window_s``, ``starvation_share`` and ``learning_off_max_s``."""

    window_s: float = 5.0
    threshold: float = 0.75
    max_off_s: float = 60.0

    def check(self) -> None:
        """Raise ValueError naming the first setting refused."""
        if not (np.isfinite(self.window_s) and self.window_s > 0):
            raise ValueError(f"starvation_window_s must be > 0, got {self.window_s}")
        if not (np.isfinite(self.threshold) and 0 < self.threshold <= 1):
            raise ValueError(f"starvation_share must be in (0, 1], got {self.threshold}")
        if not (np.isfinite(self.max_off_s) and self.max_off_s >= self.window_s):
            raise ValueError(
                f"learning_off_max_s must be at least starvation_window_s ({self.window_s:g} s), "
                f"got {self.max_off_s}"
            )


@dataclass(frozen=True)
class Starvation:
    """The window now: the share not learned, by reason (shares of the offered samples, largest
    first), how long it has been starved (stamp seconds; 0: not starved) and whether that is
    beyond ``max_off_s``."""

    share: float
    reasons: tuple[tuple[str, float], ...]
    offered: int
    starved_s: float
    too_long: bool

    @property
    def starved(self) -> bool:
        """Starved now."""
        return self.starved_s > 0 or self.too_long

    @property
    def main_reason(self) -> str:
        """The reason most samples were not learned for ('' when none)."""
        return self.reasons[0][0] if self.reasons else ""

    def describe(self, window_s: float) -> str:
        """One line: the share, the reasons, for how long."""
        why = ", ".join(f"{reason} {100 * share:.0f} %" for reason, share in self.reasons)
        since = f" for {self.starved_s:.0f} s" if self.starved_s >= window_s else ""
        return (
            f"learning starved{since}: {100 * self.share:.0f} % of the last {window_s:g} s of samples "
            f"not learned ({why})"
        )


class StarvationMonitor:
    """The share of samples not learned over a window of stamps (see the module docstring)."""

    def __init__(self, settings: StarvationSettings | None = None):
        self.settings = settings or StarvationSettings()
        self.settings.check()
        self.episodes = 0  # times learning became starved, cumulative
        self.reset()

    def reset(self) -> None:
        """Forget the window and any starvation (the counts go on)."""
        self._blocks: deque[tuple[float, int, Counter[str]]] = deque()
        self._offered = 0
        self._missed: Counter[str] = Counter()
        self._since: float | None = None  # the stamp the starvation began at
        self._last_t: float | None = None

    def add(self, t: float, offered: int, not_learned: Iterable[str]) -> None:
        """A block that ends at stamp ``t``: ``offered`` samples offered for learning, and the reason
        of each one not learned."""
        t = float(t)
        if not np.isfinite(t) or offered <= 0:
            return
        if self._last_t is not None and t < self._last_t:
            self.reset()
        self._last_t = t
        missed = Counter(not_learned)
        self._blocks.append((t, int(offered), missed))
        self._offered += int(offered)
        self._missed.update(missed)
        while self._blocks and self._blocks[0][0] < t - self.settings.window_s:
            _, n, old = self._blocks.popleft()
            self._offered -= n
            self._missed.subtract(old)
        share = self.share
        if share is None:
            return
        if self._since is None and share >= self.settings.threshold:
            self._since = t
            self.episodes += 1
        elif self._since is not None and share < self.settings.threshold / 2:
            self._since = None

    @property
    def share(self) -> float | None:
        """Share of the window's offered samples not learned (None: too few offered)."""
        if self._offered < MIN_SAMPLES:
            return None
        return min(1.0, sum(n for n in self._missed.values() if n > 0) / self._offered)

    @property
    def level(self) -> int:
        """0: not starved, 1: starved, 2: starved beyond ``max_off_s`` (cheap: for every block)."""
        if self._since is None or self._last_t is None:
            return 0
        return 2 if self._last_t - self._since >= self.settings.max_off_s else 1

    def status(self) -> Starvation | None:
        """The window now (None: too few samples offered to tell)."""
        share = self.share
        if share is None or self._last_t is None:
            return None
        reasons = tuple((reason, n / self._offered) for reason, n in self._missed.most_common() if n > 0)
        starved = 0.0 if self._since is None else max(self._last_t - self._since, 1e-9)
        return Starvation(share, reasons, self._offered, starved, starved >= self.settings.max_off_s)
