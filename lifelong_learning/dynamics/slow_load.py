"""A load that builds up too slowly for the contact threshold: the residual of a frozen reference (no ROS).

**Why a reference.** The contact detector (:mod:`lifelong_learning.dynamics.contact`) judges each
sample's ``τ − τ̂`` against thresholds of at least ``contact_min_torque``; an online model that
learns every free sample follows a load that grows slowly (a person leaning on the arm, 0.05 N m/s)
and keeps ``τ − τ̂`` far below any threshold while the load goes into its predictions. What the
model learned cannot tell; a copy of it that stopped learning can. The **reference** ``S`` is the
model frozen at a trusted moment (:meth:`SemiparametricInverseDynamics.freeze`); its residual
``r = τ − S(q, q̇, q̈)`` holds everything that changed since, and the learner never absorbs it.

**Judged where the reference is sure.** A new region of the state space is no change of the
robot, but ``S`` predicts it from its prior. Each sample's leverage ``h = φᵀA⁻¹φ`` under the
reference's residual information ``A`` says how little of its data covers it (the posterior
variance of its prediction, in units of the noise's); a sample is judged only when
``h ≤`` :data:`COVERAGE` ``× h_ref``, ``h_ref`` the median leverage of the samples the model learned
last before it was frozen. (On the simulated Panda the other half of the joint ranges lies at
53-66 ``h_ref``, the next seconds of the half learned at 1.0-1.3 ``h_ref``: docs/benchmarks/contact.md.)

**The statistic** (per joint ``j``, over the judged samples of the last ``window_s`` of stamps,
at least :data:`MIN_SAMPLES` spanning half of it): the median ``m_j`` of ``r_j`` and its robust
spread ``σ_j = 1.4826 · median|r_j − m_j|``, threshold ``θ_j = max(min_torque, σ_j)`` (a shift
smaller than the residual's own spread is not told from the reference's errors along the path).
A median ignores the spikes a wrist's friction reversal makes, and lags a ramp by half a window.

**States.**

- *no reference*: the first block asks for one (:attr:`SlowLoadDetector.wants_reference`);
- *on trial*: a new reference holds nothing; if its statistic crosses ``θ`` it did not predict its
  own next seconds (the model was still learning), and if it judged nothing for
  :data:`TRIAL_WINDOWS` windows its data covers too little: another is taken. Not crossed for
  :data:`TRIAL_WINDOWS` windows, it is *armed*;
- *armed*: ``|m_j| > θ_j`` on some joint starts a **hold** (an onset): the caller learns nothing
  more until it ends. While quiet (``|m_j| < release · θ_j`` on every joint) the model is frozen
  again every ``reference_s`` and stays armed: a change slower than ``release · min_torque`` per
  ``reference_s`` is the robot's own (wear, temperature: learned), a faster one a load. A young
  model is still wrong where it has not been yet, which is no load: until it has learned for
  ``reference_s``, the interval is as long as it has learned since its first reference (at least
  :data:`TRIAL_WINDOWS` windows), so the references of its first minute come at 4, 8, 16, 32 s.
  A reference that judged no sample for ``reference_s`` (the robot works where it never was) is
  replaced and tried again;
- *holding*: the hold ends when ``|m_j| < release · θ_j`` on the joints that started it and
  ``|m_j| < θ_j`` on the others, ``θ`` as at the onset (a reference a little off on a joint the
  load never touched must not keep the hold).
  Where the reference judges too few samples, all the window's samples are judged (a hold must be
  able to end in a region the reference never saw).

A hold that lasts is the caller's to settle: the node learns it as a new steady state only when
a payload explains it (:mod:`lifelong_learning.dynamics.payload`), then a reference is taken anew
(:meth:`SlowLoadDetector.reset`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lifelong_learning.dynamics.plausibility import MAD_TO_SIGMA

#: a sample is judged when its leverage under the reference is at most this many times the median
#: leverage of the samples the model learned last before the reference was frozen
COVERAGE = 10.0
#: judged samples (spanning half the window) a statistic needs
MIN_SAMPLES = 50
#: windows a new reference stays quiet before it is armed
TRIAL_WINDOWS = 2.0
#: the most samples the window holds (the newest are kept)
CAPACITY = 8192

#: states
NO_REFERENCE, ON_TRIAL, ARMED, HOLDING = "no reference", "reference on trial", "armed", "holding"
#: event kinds
ONSET, OFFSET = "slow load", "slow load ended"


@dataclass(frozen=True)
class SlowLoadSettings:
    """The detector's settings (the node's ``contact_slow_*`` and ``contact_reference_s``)."""

    min_torque: float = 0.3
    window_s: float = 2.0
    release: float = 0.5
    reference_s: float = 60.0

    @property
    def enabled(self) -> bool:
        """``min_torque`` 0 turns the detector off."""
        return self.min_torque > 0

    def check(self) -> None:
        """Raise ValueError naming the first setting refused."""
        if not (np.isfinite(self.min_torque) and self.min_torque >= 0):
            raise ValueError(f"contact_slow_torque must be finite and ≥ 0 (0: off), got {self.min_torque}")
        if not (np.isfinite(self.window_s) and self.window_s > 0):
            raise ValueError(f"contact_slow_window_s must be > 0, got {self.window_s}")
        if not (np.isfinite(self.release) and 0 < self.release <= 1):
            raise ValueError(f"contact_release must be in (0, 1], got {self.release}")
        if not (np.isfinite(self.reference_s) and self.reference_s >= TRIAL_WINDOWS * self.window_s):
            raise ValueError(
                f"contact_reference_s must be at least {TRIAL_WINDOWS:g} x contact_slow_window_s "
                f"({TRIAL_WINDOWS * self.window_s:g} s), got {self.reference_s}"
            )


@dataclass(frozen=True)
class SlowLoadEvent:
    """An onset or the end of a hold: when (a stamp), the joints beyond their threshold (onset) or
    most loaded, the window's medians ``m`` and the thresholds ``θ`` then."""

    kind: str
    t: float
    joints: tuple[int, ...]
    load: np.ndarray
    threshold: np.ndarray
    duration_s: float = 0.0

    def describe(self, names: list[str]) -> str:
        """One log line."""
        loads = ", ".join(
            f"{names[j]} {self.load[j]:+.2f} (threshold {self.threshold[j]:.2f})" for j in self.joints
        )
        if self.kind == ONSET:
            return f"slow load at t={self.t:.3f}: {loads} N m against the reference model"
        return f"slow load ended at t={self.t:.3f} after {self.duration_s:.1f} s"


class SlowLoadDetector:
    """Streaming slow-load detector on the residuals of a reference (see the module docstring).

    Args:
        n_joints: joints (columns of the residuals).
        settings: :class:`SlowLoadSettings` (checked).
    """

    def __init__(self, n_joints: int, settings: SlowLoadSettings | None = None):
        self.settings = settings or SlowLoadSettings()
        self.settings.check()
        self.n = int(n_joints)
        self.holds = 0  # onsets, cumulative
        self.references = 0  # references taken, cumulative
        self.retakes = 0  # of them, because a reference on trial failed
        self.reset()

    def reset(self) -> None:
        """Forget the reference and any hold (a new model, a load taken as the new steady state)."""
        self.state = NO_REFERENCE
        self.wants_reference: str | None = "first"
        self._clear_window()
        self.load = np.zeros(self.n)  # the last statistic's medians
        self._threshold = np.full(self.n, self.settings.min_torque)
        self._hold_threshold = self._threshold
        self._hold_joints = np.zeros(self.n, dtype=bool)
        self._since = 0.0  # the stamp the state began at
        self._reference_t = 0.0
        self._first_t: float | None = None  # the stamp of the first reference since the reset
        self._judged_t: float | None = None  # the last stamp a statistic was computed at
        self._limit = np.inf  # leverage limit of a judged sample
        self._last_t: float | None = None

    def _clear_window(self) -> None:
        self._t = np.full(CAPACITY, -np.inf)
        self._r = np.zeros((CAPACITY, self.n))
        self._covered = np.zeros(CAPACITY, dtype=bool)
        self._next = 0

    @property
    def holding(self) -> bool:
        """In a hold: nothing may be learned."""
        return self.state == HOLDING

    @property
    def held_since(self) -> float | None:
        """The stamp of the hold's onset (None: not holding)."""
        return self._since if self.holding else None

    @property
    def threshold(self) -> np.ndarray:
        """``θ_j``: the hold's (frozen at its onset), else the last statistic's (``min_torque`` before)."""
        return (self._hold_threshold if self.holding else self._threshold).copy()

    def reference_taken(self, t: float, recent_leverage: Any | None) -> None:
        """A reference was frozen at stamp ``t`` (after :attr:`wants_reference`); ``recent_leverage``:
        its leverage on the samples the model learned last (None or empty: every sample is judged)."""
        h = None if recent_leverage is None else np.asarray(recent_leverage, dtype=np.float64)
        finite = None if h is None else h[np.isfinite(h)]
        self._limit = COVERAGE * float(np.median(finite)) if finite is not None and finite.size else np.inf
        armed = self.wants_reference == "refresh"
        self.wants_reference = None
        self.references += 1
        self._clear_window()
        self._reference_t = self._since = self._judged_t = float(t)
        if self._first_t is None or t < self._first_t:
            self._first_t = float(t)
        self.state = ARMED if armed else ON_TRIAL

    @property
    def refresh_interval(self) -> float:
        """Stamp seconds between references while armed and quiet (see the module docstring)."""
        s = self.settings
        age = 0.0 if self._first_t is None else self._reference_t - self._first_t
        return min(s.reference_s, max(TRIAL_WINDOWS * s.window_s, age))

    def update(self, t: Any, residual: Any, leverage: Any | None = None) -> list[SlowLoadEvent]:
        """Samples at stamps ``t`` (``(k,)``) with residuals ``τ − S(q, q̇, q̈)`` (``(k, n)``) and their
        leverage under the reference (None: all covered); the onsets and ends of holds."""
        t = np.asarray(t, dtype=np.float64).reshape(-1)
        if self.state == NO_REFERENCE or not t.size:
            return []
        r = np.asarray(residual, dtype=np.float64).reshape(t.size, self.n)
        covered = np.ones(t.size, dtype=bool) if leverage is None else np.asarray(leverage) <= self._limit
        finite = np.isfinite(r).all(axis=1) & np.isfinite(t)
        if self._last_t is not None and finite.any() and t[finite].min() < self._last_t:
            self._clear_window()  # stamps went back: the window and the durations anew
            self._since = self._reference_t = self._judged_t = float(t[finite].min())
            self._first_t = None if self._first_t is None else self._reference_t
        for i in np.flatnonzero(finite):
            k = self._next % CAPACITY
            self._t[k], self._r[k], self._covered[k] = t[i], r[i], covered[i]
            self._next += 1
        if not finite.any():
            return []
        now = float(t[finite].max())
        self._last_t = now
        return self._judge(now)

    def _statistic(self, now: float) -> tuple[np.ndarray, np.ndarray] | None:
        """Medians and spreads of the window's judged samples (all of them in a hold, when the
        judged ones are too few); None when there are too few."""
        inside = self._t >= now - self.settings.window_s
        for rows in (inside & self._covered, inside) if self.holding else (inside & self._covered,):
            stamps = self._t[rows]
            if stamps.size >= MIN_SAMPLES and stamps.max() - stamps.min() >= self.settings.window_s / 2:
                r = self._r[rows]
                m = np.median(r, axis=0)
                return m, MAD_TO_SIGMA * np.median(np.abs(r - m), axis=0)
        return None

    def _judge(self, now: float) -> list[SlowLoadEvent]:
        s = self.settings
        stat = self._statistic(now)
        if stat is None:  # too few samples the reference covers: blind for how long?
            blind = 0.0 if self._judged_t is None else now - self._judged_t
            if self.state == ARMED and blind >= s.reference_s:
                self.wants_reference = "blind"  # the robot works where the reference never was
            elif self.state == ON_TRIAL and blind >= TRIAL_WINDOWS * s.window_s:
                self.wants_reference = "blind"  # a young model's data covers too little: another
            return []
        self._judged_t = now
        self.load, spread = stat
        self._threshold = np.maximum(s.min_torque, spread)
        quiet = bool(np.all(np.abs(self.load) < s.release * self._threshold))
        if self.state == ON_TRIAL:
            if np.any(np.abs(self.load) > self._threshold):
                self.retakes += 1
                self.wants_reference = "retake"
            elif now - self._since >= TRIAL_WINDOWS * s.window_s:
                self.state, self._since = ARMED, now
            return []
        if self.state == ARMED:
            over = np.abs(self.load) > self._threshold
            if over.any():
                self.state, self._since, self._hold_threshold = HOLDING, now, self._threshold.copy()
                self._hold_joints = over
                self.holds += 1
                return [self._event(ONSET, now, over)]
            if quiet and now - self._reference_t >= self.refresh_interval:
                self.wants_reference = "refresh"
            return []
        limit = np.where(self._hold_joints, s.release, 1.0) * self._hold_threshold
        if np.all(np.abs(self.load) < limit):  # holding
            self.state = ARMED
            loaded = np.abs(self.load) >= 0.5 * np.abs(self.load).max()
            return [self._event(OFFSET, now, loaded, now - self._since)]
        return []

    def _event(self, kind: str, t: float, joints: np.ndarray, duration: float = 0.0) -> SlowLoadEvent:
        threshold = self._hold_threshold if kind == ONSET else self._threshold
        return SlowLoadEvent(
            kind, t, tuple(np.flatnonzero(joints).tolist()), self.load.copy(), threshold.copy(), duration
        )
