"""Contact detection on the external torque estimate of an inverse-dynamics model (no ROS).

**External torque.** With the model's prediction ``τ̂(q, q̇, q̈)`` made *before* the sample is
learned (test-then-update), the external torque estimate of a sample is

    τ_ext = τ_measured − τ̂

per modelled joint: the torque the drives exert that the arm's own dynamics do not explain. With
``M q̈ + c + g = τ_m + τ_env`` (``τ_env`` the torque the environment applies) it is ``−τ_env``: a
push resisted by the controller shows with the opposite sign of the push (a textbook
momentum-observer residual ``r → τ_env``, :mod:`lifelong_learning.dynamics.momentum_observer`,
is reported in the same convention as ``−r``).

**Threshold** (per joint ``j``, from free motion only). Over a window of the last ``window``
free-motion residuals ``e`` (samples in contact, pending onset, or within ``hold_s`` after a
contact are not recorded), robustly

    σ_j = 1.4826 · median|e_j|,    θ_j = k · σ_j + τ_min

(the median absolute deviation about zero, the residual of an unbiased model, as in the guard's
outlier test: a model still learning only makes its residuals smaller, where a median taken as the
centre would go stale and flag its improvement as a contact; a biased one widens the scale)

(``k`` = ``contact_k``, ``τ_min`` = ``contact_min_torque``, an absolute floor so that a model that
predicts nearly perfectly does not flag sensor noise). Until :data:`WARMUP_SAMPLES` residuals
spanning :data:`WARMUP_S` of stamps are recorded (after a start, a reset, a new model) nothing is
a contact: 50 samples of a 1 kHz stream are 50 ms of one motion, not its scale.

**Onset and offset** (hysteresis and a minimum duration ``T_min`` = ``contact_min_duration_s``).
A sample *exceeds* when ``|e_j| > θ_j`` on some joint; a contact starts when the samples have
exceeded without a break for at least ``T_min`` of stamps (so one noisy sample never triggers;
those pending samples are not learned either). It ends when every joint has stayed below
``ρ θ_j`` (``ρ`` = ``contact_release`` ≤ 1) for ``T_min``. Samples in contact and for
``hold_s`` after it (the arm's own transient after a release) are *not learned*: a model comes
out of a contact as it went in.

**A contact that never ends** (a tool resting on a fixture, a payload the model never saw): after
``max_s`` the detector reports it once (a ``too long`` event) and stays in contact. Whether the
new residuals are the new steady state is the caller's to decide (``relearn`` says it may):
:meth:`ContactDetector.accept` ends the contact and forgets the window, so that the thresholds
are taken anew. The node accepts only a load that a payload explains
(:mod:`lifelong_learning.dynamics.payload`).

**Settings refused** (:meth:`ContactSettings.check`): ``k < 2`` (a threshold under two robust
standard deviations flags ≥ 5 % of free-motion samples per joint: nearly every sample would be a
contact), a non-finite ``k`` or a floor at or above every joint's effort limit (no measurable
torque would ever be a contact), ``ρ`` outside ``(0, 1]``, a minimum duration not below
``max_s``.

References: De Luca, Albu-Schäffer, Haddadin, Hirzinger, "Collision detection and safe reaction
with the DLR-III lightweight manipulator arm", IROS 2006 (residual-based detection, thresholds);
Haddadin, De Luca, Albu-Schäffer, "Robot collisions: a survey on detection, isolation, and
identification", IEEE T-RO 33(6), 2017, §III (model-based residuals, thresholds, hysteresis);
Hampel, "The influence curve and its role in robust estimation", JASA 1974 (MAD scale).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lifelong_learning.dynamics.plausibility import MAD_TO_SIGMA

#: free-motion residuals recorded before the detector flags anything (at most ``window``) ...
WARMUP_SAMPLES = 50
#: ... and the seconds of stamps they must span
WARMUP_S = 1.0
#: the scale (two medians over the window) is refreshed every this many recorded residuals
SCALE_REFRESH = 20
#: the smallest ``contact_k``: below two robust standard deviations ≥ 5 % of free-motion samples of
#: each joint exceed the threshold
MIN_K = 2.0
#: the most residuals the window keeps
MAX_WINDOW = 100_000

#: event kinds
ONSET, OFFSET, TOO_LONG = "onset", "offset", "too long"


@dataclass(frozen=True)
class ContactSettings:
    """The detector's settings (the node's ``contact_*`` parameters); see the module docstring."""

    k: float = 6.0
    min_torque: float = 2.5
    release: float = 0.5
    min_duration_s: float = 0.003
    hold_s: float = 0.2
    max_s: float = 10.0
    relearn: bool = True
    window: int = 1000

    def check(self, effort_limits: Any | None = None) -> None:
        """Raise ValueError naming the first setting refused (see the module docstring); with
        ``effort_limits`` (one per joint, ``inf`` or 0 where unknown) also a floor at or above every
        joint's limit."""
        if not (np.isfinite(self.k) and self.k >= MIN_K):
            raise ValueError(
                f"contact_k must be finite and ≥ {MIN_K} (below, nearly every free-motion sample "
                f"would be a contact; infinite, none), got {self.k}"
            )
        if not (np.isfinite(self.min_torque) and self.min_torque >= 0):
            raise ValueError(f"contact_min_torque must be finite and ≥ 0, got {self.min_torque}")
        if not (np.isfinite(self.release) and 0 < self.release <= 1):
            raise ValueError(f"contact_release must be in (0, 1], got {self.release}")
        for name, value in (("contact_hold_s", self.hold_s), ("contact_min_duration_s", self.min_duration_s)):
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and ≥ 0, got {value}")
        if not (np.isfinite(self.max_s) and self.max_s > self.min_duration_s):
            raise ValueError(
                f"contact_max_s must be finite and > contact_min_duration_s ({self.min_duration_s}), "
                f"got {self.max_s}"
            )
        if not WARMUP_SAMPLES <= self.window <= MAX_WINDOW:
            raise ValueError(f"contact_window must be in [{WARMUP_SAMPLES}, {MAX_WINDOW}], got {self.window}")
        if effort_limits is not None:
            limits = np.asarray(effort_limits, dtype=np.float64)
            known = np.isfinite(limits) & (limits > 0)
            if known.size and known.all() and np.all(self.min_torque >= limits):
                raise ValueError(
                    f"contact_min_torque {self.min_torque} N m is at or above every joint's effort limit "
                    f"({limits.tolist()}): no contact could ever be detected"
                )


@dataclass(frozen=True)
class ContactEvent:
    """An onset, an offset or a contact lasting beyond ``max_s``: when (the sample's stamp), the
    joints beyond their threshold (onset) or most loaded (offset, too long), and the torques
    ``τ_ext`` (onset: of that sample; offset and too long: the contact's peak per joint)."""

    kind: str
    t: float
    joints: tuple[int, ...]
    torque: np.ndarray
    duration_s: float = 0.0

    def describe(self, names: list[str]) -> str:
        """One log line, e.g. ``contact onset: panda_joint2 -5.1 N m (threshold 1.2)``."""
        torques = ", ".join(f"{names[j]} {self.torque[j]:+.2f}" for j in self.joints)
        if self.kind == ONSET:
            return f"contact onset at t={self.t:.3f}: {torques} N m (τ_ext = measured − predicted)"
        if self.kind == OFFSET:
            return f"contact ended at t={self.t:.3f} after {self.duration_s:.3f} s; peak {torques} N m"
        return f"contact lasting {self.duration_s:.1f} s (peak {torques} N m)"


@dataclass
class ContactBlock:
    """What :meth:`ContactDetector.update_block` says of consecutive samples."""

    contact: np.ndarray  # bool per sample: in contact (published)
    learn: np.ndarray  # bool per sample: may be learned
    events: list[ContactEvent] = field(default_factory=list)


class ContactDetector:
    """Streaming contact detector on ``τ_ext`` (see the module docstring).

    Args:
        n_joints: joints (columns of the residuals).
        settings: :class:`ContactSettings` (checked).
        effort_limits: per-joint effort limits for the settings' check (None: not checked).
    """

    def __init__(self, n_joints: int, settings: ContactSettings | None = None, effort_limits: Any = None):
        self.settings = settings or ContactSettings()
        self.settings.check(effort_limits)
        self.n = int(n_joints)
        self.contacts = 0  # contacts detected (onsets), cumulative
        self.samples_in_contact = 0  # samples flagged in contact, cumulative
        self.too_long = 0  # contacts that lasted beyond max_s
        self.relearned = 0  # of them, taken as a new steady state
        self.reset()

    def reset(self) -> None:
        """Forget the window and any contact (a new model, a stream restart); counts go on."""
        s = self.settings
        self._window = np.zeros((s.window, self.n))
        self._count = 0
        self._scale_at = 0
        self.threshold: np.ndarray | None = None  # θ_j; None during warm-up
        self.in_contact = False
        self._pending_since: float | None = None
        self._release_since: float | None = None
        self._onset_t = 0.0
        self._peak = np.zeros(self.n)
        self._warned = False
        self._hold_until = -np.inf
        self._last_t: float | None = None
        self._first_t: float | None = None  # stamp of the first residual recorded since the reset

    @property
    def scale(self) -> np.ndarray | None:
        """σ_j of the recorded free-motion residuals (None during warm-up)."""
        if self.threshold is None:
            return None
        return (self.threshold - self.settings.min_torque) / self.settings.k

    @property
    def beyond_max(self) -> bool:
        """In a contact that has lasted beyond ``max_s``."""
        return self.in_contact and self._warned

    def accept(self, t: float) -> None:
        """Take the current residuals as the new steady state (at stamp ``t``): any contact ends, and
        the window is forgotten (thresholds anew after a warm-up); counts go on."""
        if self.in_contact:
            self.relearned += 1
        self.reset()
        self._last_t = float(t)

    def _record(self, t: float, e: np.ndarray) -> None:
        s = self.settings
        self._window[self._count % s.window] = np.abs(e)
        self._count += 1
        if self._first_t is None or t < self._first_t:
            self._first_t = t
        if self.threshold is None and (self._count < WARMUP_SAMPLES or t - self._first_t < WARMUP_S):
            return
        if self.threshold is None or self._count - self._scale_at >= SCALE_REFRESH:
            held = self._window[: min(self._count, s.window)]
            self.threshold = s.k * MAD_TO_SIGMA * np.median(held, axis=0) + s.min_torque
            self._scale_at = self._count

    def update(self, t: float, residual: Any, record: bool = True) -> tuple[bool, bool, ContactEvent | None]:
        """One sample: ``(in contact, may be learned, event or None)`` for ``τ_ext`` ``residual``
        at stamp ``t`` (s). A non-finite residual is neither recorded nor a contact, and not learned.
        ``record`` false: a free sample is judged but its residual does not enter the window (a
        load held for other reasons would widen the thresholds)."""
        e = np.asarray(residual, dtype=np.float64).reshape(self.n)
        t = float(t)
        if self._last_t is not None and t < self._last_t:  # stamps went back: durations anew
            self._pending_since = self._release_since = None
            self._hold_until = -np.inf
            self._onset_t = t
        self._last_t = t
        if not np.all(np.isfinite(e)):
            return self.in_contact, False, None
        if self.in_contact:
            return self._in_contact(t, e)
        if self.threshold is None:  # warm-up
            self._record(t, e)
            return False, True, None
        beyond = np.abs(e) > self.threshold
        if beyond.any():
            if self._pending_since is None:
                self._pending_since = t
            if t - self._pending_since < self.settings.min_duration_s:
                return False, False, None  # pending: not learned, not recorded
            self.in_contact, self._pending_since, self._release_since = True, None, None
            self._onset_t, self._peak, self._warned = t, e.copy(), False
            self.contacts += 1
            self.samples_in_contact += 1
            return True, False, ContactEvent(ONSET, t, tuple(np.flatnonzero(beyond).tolist()), e.copy())
        self._pending_since = None
        if t < self._hold_until:
            return False, False, None
        if record:
            self._record(t, e)
        return False, True, None

    def _in_contact(self, t: float, e: np.ndarray) -> tuple[bool, bool, ContactEvent | None]:
        s = self.settings
        assert self.threshold is not None
        self._peak = np.where(np.abs(e) > np.abs(self._peak), e, self._peak)
        duration = t - self._onset_t
        if np.all(np.abs(e) < s.release * self.threshold):
            if self._release_since is None:
                self._release_since = t
            if t - self._release_since >= s.min_duration_s:
                self.in_contact, self._hold_until = False, t + s.hold_s
                return False, False, self._event(OFFSET, t, duration)
        else:
            self._release_since = None
        self.samples_in_contact += 1
        if duration > s.max_s and not self._warned:
            self._warned = True
            self.too_long += 1
            return True, False, self._event(TOO_LONG, t, duration)
        return True, False, None

    def _event(self, kind: str, t: float, duration: float) -> ContactEvent:
        loaded = np.abs(self._peak) >= 0.5 * np.abs(self._peak).max()
        return ContactEvent(kind, t, tuple(np.flatnonzero(loaded).tolist()), self._peak.copy(), duration)

    def update_block(
        self, t: Any, residuals: Any, judged: Any | None = None, record: Any | None = None
    ) -> ContactBlock:
        """:meth:`update` for consecutive samples (``t`` ``(m,)``, ``residuals`` ``(m, n)``).

        ``judged`` (bool per sample, None: all): samples whose residual says nothing (their ``q̈``
        is an acceleration filter's partial window, after a start or a restart: the prediction is
        off by ``M Δq̈``) are not judged: they keep the current state, are not recorded, and are
        learnable only when free (a caller does not learn them anyway). ``record`` (bool per
        sample, None: all): :meth:`update`'s."""
        t = np.asarray(t, dtype=np.float64).reshape(-1)
        E = np.asarray(residuals, dtype=np.float64).reshape(t.size, self.n)
        contact = np.zeros(t.size, dtype=bool)
        learn = np.zeros(t.size, dtype=bool)
        events = []
        skip = np.zeros(t.size, dtype=bool) if judged is None else ~np.asarray(judged, dtype=bool)
        keep = np.ones(t.size, dtype=bool) if record is None else np.asarray(record, dtype=bool)
        for i in range(t.size):
            if skip[i]:
                contact[i], learn[i] = self.in_contact, not self.in_contact
                continue
            contact[i], learn[i], event = self.update(t[i], E[i], bool(keep[i]))
            if event is not None:
                events.append(event)
        return ContactBlock(contact, learn, events)
