"""What an online inverse-dynamics learner does with each joint-state sample of a stream (no ROS).

:class:`SampleGuard` holds the state a stream needs besides the model: the stamp of the last
sample, the acceleration filter, the plausibility gate and the residual outlier test
(:mod:`lifelong_learning.dynamics.plausibility`). The ``inverse_dynamics`` node and the
robustness benchmark use it the same way, per sample (test-then-update):

1. :meth:`SampleGuard.admit` ``(t, q, q̇, τ)``: refuses (raises :class:`RefusedSampleError`) a
   sample whose position or velocity is implausible, or whose stamp is not after the previous
   one; else estimates ``q̈`` (unless given) and says whether ``τ`` may be learned. Refused
   samples never reach the acceleration filter, so one glitched velocity cannot spoil the next ``q̈``.
2. the caller predicts ``τ̂`` (and answers with it);
3. :meth:`SampleGuard.residual_refusal` ``(τ, τ̂)``: the residual outlier test; only then the caller
   updates the model.

Stamps (a simulator reset, a looping bag, a paused driver, one corrupt stamp): a stamp more than
``stamp_jump_s`` before the previous one, or after it, restarts the acceleration filter and is
taken as the first sample of a new stretch, so no stamp can wedge the stream (a single far-future
stamp costs two restarts). A smaller step back (reordered best-effort delivery) is refused, but
after :data:`BACKSTEPS_TO_RESTART` refusals in a row the filter restarts at the new stamp (a
corrupt stamp less than ``stamp_jump_s`` ahead costs three samples, not ``stamp_jump_s`` of them).
A stream whose stamps never advance is refused. Gaps shorter than ``stamp_jump_s`` count the
samples missed (:meth:`SampleGuard.seen`): where a publisher sends at a fixed rate this is the
number of messages lost on the way (DDS, a full queue) or never sent.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from lifelong_learning.dynamics.acceleration import AccelerationEstimator
from lifelong_learning.dynamics.plausibility import (
    EFFORT,
    JointLimits,
    PlausibilityGate,
    ResidualOutlierTest,
)

#: the residual test's scale before it has WARMUP_ERRORS errors, as a fraction of each joint's effort
#: limit (with k = 6 an error beyond 60 % of the limit is an outlier from the first sample on)
WARMUP_SCALE = 0.1
#: errors after which the robust scale of the recorded ones takes over (after a start, a reset or a
#: model swap): few, so that a glitch in the first samples of a model meets a scale of its own errors
WARMUP_ERRORS = 10

#: why a sample was not learned, beyond the plausibility reasons
OUTLIER = "residual outlier"
WARMING_UP = "acceleration filter warming up"
THINNED = "above learn_max_hz"
STAMP_BACK = "stamp not increasing"

#: after this many consecutive samples refused as stepping back, the stamps are taken to have
#: been reset (e.g. by less than ``stamp_jump_s``) and the filter restarts at the new one
BACKSTEPS_TO_RESTART = 3


class RefusedSampleError(ValueError):
    """A sample the stream refuses: ``reason`` (a short key for counting) and ``detail``."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail


@dataclass(frozen=True)
class Admitted:
    """An admitted sample: its ``q̈``, whether its effort may be learned, and why not."""

    qdd: np.ndarray
    learn: bool
    not_learned: str | None = None


class SampleGuard:
    """Per-stream state of an online inverse-dynamics learner (see the module docstring).

    Args:
        limits: the joints' URDF limits, in the stream's joint order.
        margin: plausibility margin (:class:`~lifelong_learning.dynamics.plausibility.PlausibilityGate`).
        window, degree: the acceleration filter's (:class:`AccelerationEstimator`).
        stamp_jump_s: a step back or forward larger than this restarts the filter.
        outlier_k: residual outlier threshold in robust standard deviations (0 disables the test).
        outlier_window: errors kept for the robust scale.
        outlier_floor: smallest robust scale as a fraction of each joint's effort limit.
        learn_max_hz: at most this many samples per second of stamps may be learned (0: every
            one); see :attr:`learn_max_hz`.
    """

    def __init__(
        self,
        limits: JointLimits,
        margin: float = 1.0,
        window: int = 9,
        degree: int = 2,
        stamp_jump_s: float = 1.0,
        outlier_k: float = 6.0,
        outlier_window: int = 200,
        outlier_floor: float = 0.002,
        learn_max_hz: float = 0.0,
    ):
        n = len(limits.names)
        # each setting is checked once, where its rule lives: by the part built from it
        self.gate = PlausibilityGate(limits, margin)
        self.estimator = AccelerationEstimator(n, window, degree)
        self._check_stream_settings(stamp_jump_s, outlier_k, outlier_floor)
        self.stamp_jump_s = float(stamp_jump_s)
        self.missed = 0  # samples missing in gaps (estimated from the median period), cumulative
        self.restarts: dict[str, int] = {}  # filter restarts by cause, cumulative
        effort = np.where(np.isfinite(limits.effort), limits.effort, 0.0)
        self.outliers = None
        if outlier_k > 0:
            warmup = np.where(effort > 0, WARMUP_SCALE * effort, np.inf)
            self.outliers = ResidualOutlierTest(
                n,
                outlier_k,
                outlier_window,
                min(WARMUP_ERRORS, outlier_window),
                outlier_floor * effort,
                warmup,
            )
        self.learn_max_hz = learn_max_hz
        self.reset()

    @staticmethod
    def check_settings(
        margin: float = 1.0,
        window: int = 9,
        degree: int = 2,
        stamp_jump_s: float = 1.0,
        outlier_k: float = 6.0,
        outlier_window: int = 200,
        outlier_floor: float = 0.002,
        learn_max_hz: float = 0.0,
    ) -> None:
        """Raise ValueError naming the first setting a guard refuses (the constructor's arguments
        besides ``limits``), with the message of the part whose rule it is. A node checks its
        parameters with it at start, before it knows its joints (its URDF may come later)."""
        PlausibilityGate.check_margin(margin)
        AccelerationEstimator.check_settings(window, degree)
        SampleGuard._check_stream_settings(stamp_jump_s, outlier_k, outlier_floor)
        if outlier_k > 0:  # (0: the outlier test is off, its window unused)
            ResidualOutlierTest.check_settings(outlier_k, outlier_window)
        SampleGuard.check_learn_max_hz(learn_max_hz)

    @staticmethod
    def _check_stream_settings(stamp_jump_s: float, outlier_k: float, outlier_floor: float) -> None:
        """The guard's own rules: ``stamp_jump_s > 0``, ``outlier_k ≥ 0`` (0: no outlier test; else
        the test's rule) and the floor as a fraction of the effort limits (the test's rule)."""
        if not (np.isfinite(stamp_jump_s) and stamp_jump_s > 0):
            raise ValueError(f"stamp_jump_s must be > 0, got {stamp_jump_s}")
        if not (np.isfinite(outlier_k) and outlier_k >= 0):
            raise ValueError(f"outlier_k must be ≥ 0 (0: off), got {outlier_k}")
        ResidualOutlierTest.check_floor(outlier_floor)

    @staticmethod
    def check_learn_max_hz(value: float) -> None:
        """Raise ValueError unless ``value ≥ 0`` and finite (:attr:`learn_max_hz`)."""
        if not (np.isfinite(value) and value >= 0):
            raise ValueError(f"learn_max_hz must be ≥ 0 (0: every sample), got {value}")

    @property
    def learn_max_hz(self) -> float:
        """Thinning of the learned samples: a sample that may be learned is offered for learning
        only when its stamp reaches the next slot of a grid ``1 / learn_max_hz`` apart (0: every
        sample), so that a jittered stream is thinned to the rate asked. Consecutive joint states
        of a 1 kHz stream are nearly the same sample, and learning each one costs CPU that the
        answers need on a small computer; thinned ones are answered and feed the acceleration
        filter as before. A stamp before the last slot (a reset) or past the next two (a pause)
        starts the grid anew. The forgetting factor applies per learned sample, so thinning
        lengthens its horizon in seconds by the same factor."""
        return self._learn_max_hz

    @learn_max_hz.setter
    def learn_max_hz(self, value: float) -> None:
        self.check_learn_max_hz(value)
        self._learn_max_hz = float(value)
        self._learn_gap = 1.0 / value if value > 0 else 0.0
        self._last_offered: float | None = None

    def reset(self) -> None:
        """Forget the stream (stamps, the acceleration filter, the recent errors); the counts of
        restarts and missed samples go on (they are the stream's history, as diagnostics show it)."""
        self.last_stamp: float | None = None
        self.estimator.reset()
        self.forget_errors()
        self._last_seen: float | None = None
        self._periods: deque[float] = deque(maxlen=64)
        self._period: float | None = None  # median of _periods, refreshed every 16 samples
        self._steps = 0  # steps appended to _periods
        self._backsteps = 0  # consecutive samples refused as stamp not increasing
        self._last_offered = None  # stamp of the last sample offered for learning (learn_max_hz)

    def forget_errors(self) -> None:
        """Forget the recent prediction errors (e.g. when another model starts serving)."""
        if self.outliers is not None:
            self.outliers.reset()
        self._previous_outlier = False

    # ---------------------------------------------------------------- stamps
    def seen(self, t: float) -> None:
        """Count the samples missing before stamp ``t`` (every message with a stamp, also those
        refused for other reasons, so that a refused message is not counted as missing).

        With the stream's median period ``T`` (of the last 64 steps), a step ``dt > 1.75 T`` counts
        ``round(dt / T) − 1`` missed samples (1.75 rather than 1.5: stamp jitter of a fifth of a
        period must not count). Steps back and jumps beyond ``stamp_jump_s`` start the count anew.
        """
        if not np.isfinite(t):
            return
        last = self._last_seen
        if last is not None and -self.stamp_jump_s <= t - last <= 0:
            return  # a step back: the stream goes on from the newest stamp
        self._last_seen = float(t)
        if last is None:
            return
        dt = t - last
        if abs(dt) > self.stamp_jump_s:
            self._periods.clear()
            self._period = None
            return
        if self._period is not None and dt > 1.75 * self._period:
            self.missed += max(0, round(dt / self._period) - 1)
        else:
            self._periods.append(dt)
            self._steps += 1
            # (the deque stays 64 long once full: its length cannot pace the refresh)
            if len(self._periods) >= 8 and (self._period is None or self._steps % 16 == 0):
                self._period = float(np.median(self._periods))

    def _restart(self, cause: str) -> None:
        self.estimator.reset()
        self._previous_outlier = False
        self.restarts[cause] = self.restarts.get(cause, 0) + 1

    def _check_stamp(self, t: float) -> str | None:
        """Refuse a small step back; the cause when ``t`` must restart the filter. Changes nothing."""
        last = self.last_stamp
        if last is None:
            return None
        dt = t - last
        if abs(dt) > self.stamp_jump_s:
            return "stamp jumped back" if dt < 0 else "stamp gap"
        if dt <= 0:
            if self._backsteps + 1 >= BACKSTEPS_TO_RESTART:
                return "stamps went back"
            raise RefusedSampleError(STAMP_BACK, f"{t:.9f} after {last:.9f}")
        return None

    # ---------------------------------------------------------------- samples
    def admit(self, t: float, q: Any, qd: Any, tau: Any | None = None, qdd: Any | None = None) -> Admitted:
        """Check one sample (and :meth:`seen` its stamp) and estimate its ``q̈`` (given ``qdd``: used as is).

        Raises:
            RefusedSampleError: wrong sizes, non-finite values, implausible position or velocity,
                or a stamp not after the previous one; the stream state is then unchanged.
        """
        t = float(t)
        self.seen(t)
        q, qd = np.asarray(q, dtype=np.float64), np.asarray(qd, dtype=np.float64)
        given = None if qdd is None else np.asarray(qdd, dtype=np.float64)
        tau = None if tau is None else np.asarray(tau, dtype=np.float64)
        if not np.isfinite(t):
            raise RefusedSampleError("non-finite values", "NaN or Inf in the stamp")
        implausible = self._implausible(q, qd, given, tau)
        try:
            cause = self._check_stamp(t)
        except RefusedSampleError:
            self._backsteps += 1
            raise
        self._backsteps = 0
        if cause is not None:
            self._restart(cause)
        self.last_stamp = t
        acc = self.estimator.update(t, qd) if given is None else given
        why = None
        if tau is None:
            why = "no effort"
        elif implausible is not None:
            why = EFFORT
        elif given is None and len(self.estimator) < self.estimator.window:
            why = WARMING_UP
        if why is not None:
            self._previous_outlier = False
        elif self._learn_gap > 0:
            last, gap = self._last_offered, self._learn_gap
            # (a thousandth of the gap of slack: float stamps of an even stream are not exact)
            if last is not None and 0 <= t - last < gap * (1 - 1e-3):
                why = THINNED  # the outlier test's run state is kept: thinned samples are not tested
            else:  # the next slot on a grid of the gap, so jitter does not lower the rate; anew after
                # a reset (t < last) or a pause (the stream missed a slot)
                fresh = last is None or t < last or t - last >= 2 * gap
                self._last_offered = t if fresh else last + gap
        return Admitted(acc, why is None, why)

    def _implausible(
        self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray | None, tau: np.ndarray | None
    ) -> tuple[str, str] | None:
        """The checks of a sample that need no stream state: RefusedSampleError for wrong sizes,
        non-finite values, an implausible position, velocity or given ``q̈``; an implausible effort
        is returned (answered, not learned), None when there is none."""
        n = self.estimator.n_joints
        arrays = [a for a in (q, qd, qdd, tau) if a is not None]
        if any(a.shape != (n,) for a in arrays):
            raise RefusedSampleError("array lengths", f"expected {n} values per array")
        if not all(np.all(np.isfinite(a)) for a in arrays):
            raise RefusedSampleError("non-finite values", "NaN or Inf in q, q̇, q̈ or τ")
        implausible = self.gate.explain(q, qd, tau, qdd)  # position, velocity, q̈, then effort: one pass
        if implausible is not None and implausible[0] != EFFORT:
            raise RefusedSampleError(*implausible)
        return implausible

    def check_request(self, q: Any, qd: Any, qdd: Any) -> None:
        """What :meth:`admit` checks of a sample, for one that is only to be predicted (a request:
        the stream's state is neither read nor changed): sizes, finite values, the position and
        velocity limits widened by the margin, and ``|q̈|`` within
        :data:`~lifelong_learning.dynamics.plausibility.MAX_ACCELERATION`.

        Raises:
            RefusedSampleError: the reason (``position beyond limit``...) and the offending values.
        """
        as_array = [np.asarray(a, dtype=np.float64) for a in (q, qd, qdd)]
        self._implausible(as_array[0], as_array[1], as_array[2], None)

    def residual_refusal(self, tau: Any, predicted: Any) -> str | None:
        """The residual outlier test on ``τ − τ̂`` (the error is recorded either way): the reason the
        sample must not be learned, or None when it may be.

        The velocity of an isolated outlier (the sample before it was not one) is taken out of the
        acceleration filter again (it was in it for its own ``q̈``): one glitched sample must not
        spoil the ``q̈`` of the samples after it. In a run of outliers (a payload, a collision) the
        velocities stay: they are the robot's, and without them ``q̈`` would be extrapolated from
        ever older samples.
        """
        if self.outliers is None:
            return None
        error = np.asarray(tau, dtype=np.float64) - np.asarray(predicted, dtype=np.float64)
        isolated = not self._previous_outlier
        self._previous_outlier = self.outliers.check(error)
        if not self._previous_outlier:
            return None
        if isolated:
            self.estimator.discard_last()
        return OUTLIER
