"""Which joint-state samples an inverse-dynamics learner may learn from (no ROS).

One glitched value (a dropped byte, a sensor spike) must not be able to wreck a learned model:
a least-squares learner weighs a sample by the square of its error, so a single effort of 10⁶ N·m
moves every prediction by orders of magnitude, for good. Two tests keep such samples out; both
are cheap next to an update, and both are used by the online node and by offline retraining.

**Physical plausibility** (:class:`PlausibilityGate`), from the limits in the URDF
(:class:`JointLimits`) widened by a margin ``m`` (default 1.0: twice the velocity and effort
limits):

- position: ``lower − m (upper − lower) ≤ q ≤ upper + m (upper − lower)`` (joints without
  finite limits, e.g. continuous ones, are not tested);
- velocity: ``|q̇| ≤ (1 + m) v_max``;
- effort: ``|τ| ≤ (1 + m) τ_max``.

A limit the URDF does not give (0, missing or infinite) is not tested. Smaller errors are the
residual test's (why the margin is this wide: docs/design.md, dynamics/plausibility.py).

**Residual outliers** (:class:`ResidualOutlierTest` streaming, :func:`robust_outliers` for a
batch). With the prediction error of a sample ``e = τ − τ̂`` (test-then-update: the model's
prediction before it learns the sample), the robust scale of joint ``j`` over a window of
recent errors is

    σ_j = 1.4826 · median_k |e_kj|

(the median absolute deviation about zero, 1.4826 = 1/Φ⁻¹(3/4)), and a sample is an outlier
when ``max_j |e_j| / max(σ_j, floor_j) > k`` (default k = 6). A lasting change of the robot (a
payload) is an outlier only until it fills half the window (``window / 2`` samples, 1 s at
100 Hz with the defaults), then is learned (docs/design.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: 1 / Φ⁻¹(3/4): the median absolute deviation of a Gaussian times this is its standard deviation
MAD_TO_SIGMA = 1.482602218505602

#: the most errors the streaming test keeps (a window is a few seconds of a control loop)
MAX_WINDOW = 100_000

#: the streaming test recomputes its scale (a median over the window) every this many errors
SCALE_REFRESH = 10

#: reasons a sample is implausible, in the order they are tested
POSITION, VELOCITY, EFFORT = "position beyond limit", "velocity beyond limit", "effort beyond limit"
ACCELERATION = "acceleration beyond limit"

#: the largest joint acceleration taken as given (a request's, an acceleration topic's) [rad/s² or
#: m/s²]; URDFs give no acceleration limits, so this bound is for absurd magnitudes only (a Panda's
#: joints are limited to 10-20 rad/s², 10⁵ is thousands of times any arm's)
MAX_ACCELERATION = 1e5


@dataclass(frozen=True)
class JointLimits:
    """Position, velocity and effort limits of named joints (``inf`` where the URDF gives none)."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray

    @classmethod
    def from_urdf(cls, urdf: str, joint_names: Sequence[str]) -> JointLimits:
        """Limits of ``joint_names`` (1-DoF joints) as Pinocchio parses ``urdf`` (the URDF text).

        Raises:
            ValueError: a name that is not a 1-DoF joint of the URDF.
        """
        import pinocchio as pin

        model = pin.buildModelFromXML(urdf)
        rows = []
        for name in joint_names:
            if not model.existJointName(name):
                raise ValueError(f"joint {name!r} is not in the URDF")
            joint = model.joints[model.getJointId(name)]
            if joint.nv != 1:
                raise ValueError(f"joint {name!r} is not a 1-DoF joint")
            lo, hi = -np.inf, np.inf
            if joint.nq == 1:  # continuous joints (cos, sin) have no position limits
                lo, hi = (
                    float(model.lowerPositionLimit[joint.idx_q]),
                    float(model.upperPositionLimit[joint.idx_q]),
                )
            rows.append(
                (lo, hi, float(model.velocityLimit[joint.idx_v]), float(model.effortLimit[joint.idx_v]))
            )
        lo, hi, vel, eff = (np.array(c, dtype=np.float64) for c in zip(*rows, strict=True))
        bounded = np.isfinite(lo) & np.isfinite(hi) & (hi > lo)
        return cls(
            names=tuple(joint_names),
            lower=np.where(bounded, lo, -np.inf),
            upper=np.where(bounded, hi, np.inf),
            velocity=np.where(np.isfinite(vel) & (vel > 0), vel, np.inf),
            effort=np.where(np.isfinite(eff) & (eff > 0), eff, np.inf),
        )


class PlausibilityGate:
    """Refuses samples beyond the joint limits widened by ``margin`` (see the module docstring;
    ``margin=inf`` refuses only NaN)."""

    def __init__(self, limits: JointLimits, margin: float = 1.0):
        self.check_margin(margin)
        self.limits, self.margin = limits, float(margin)
        bounded = np.isfinite(limits.upper - limits.lower)
        widen = margin * np.where(bounded, limits.upper - limits.lower, 1.0)
        self._lower = np.where(bounded, limits.lower - widen, -np.inf)
        self._upper = np.where(bounded, limits.upper + widen, np.inf)
        self._velocity = (1.0 + margin) * limits.velocity
        self._effort = (1.0 + margin) * limits.effort

    @staticmethod
    def check_margin(margin: float) -> None:
        """Raise ValueError unless ``margin ≥ 0`` (``inf``: no gate; NaN is refused)."""
        if not margin >= 0:
            raise ValueError(f"margin must be ≥ 0 (inf: no gate), got {margin}")

    def _failures(
        self, q: np.ndarray, qd: np.ndarray, tau: np.ndarray | None
    ) -> list[tuple[str, np.ndarray]]:
        """``(reason, (n,) bool)`` per test, for ``(n, n_dof)`` arrays (NaN fails every test)."""
        out = [
            (POSITION, ~np.all((q >= self._lower) & (q <= self._upper), axis=1)),
            (VELOCITY, ~np.all(np.abs(qd) <= self._velocity, axis=1)),
        ]
        if tau is not None:
            out.append((EFFORT, ~np.all(np.abs(tau) <= self._effort, axis=1)))
        return out

    def reason(self, q: Any, qd: Any, tau: Any | None = None) -> str | None:
        """Why one sample (``(n_dof,)`` arrays) is implausible (the first test it fails), or None."""
        arrays = [np.asarray(a, dtype=np.float64).reshape(1, -1) for a in (q, qd)]
        t = None if tau is None else np.asarray(tau, dtype=np.float64).reshape(1, -1)
        for reason, bad in self._failures(arrays[0], arrays[1], t):
            if bad[0]:
                return reason
        return None

    def explain(
        self, q: Any, qd: Any, tau: Any | None = None, qdd: Any | None = None
    ) -> tuple[str, str] | None:
        """``(reason, the offending joints and values)`` for one sample, or None when plausible; a
        given ``qdd`` (not estimated from the velocities) must be within :data:`MAX_ACCELERATION`."""
        q, qd = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (q, qd))
        tests = [
            (POSITION, q, ~((q >= self._lower) & (q <= self._upper))),
            (VELOCITY, qd, ~(np.abs(qd) <= self._velocity)),
        ]
        if qdd is not None:
            a = np.asarray(qdd, dtype=np.float64).reshape(-1)
            tests.append((ACCELERATION, a, ~(np.abs(a) <= MAX_ACCELERATION)))
        if tau is not None:
            t = np.asarray(tau, dtype=np.float64).reshape(-1)
            tests.append((EFFORT, t, ~(np.abs(t) <= self._effort)))
        for reason, values, bad in tests:
            if bad.any():
                names = self.limits.names
                return reason, ", ".join(f"{names[j]}={values[j]:.6g}" for j in np.flatnonzero(bad)[:4])
        return None

    def mask(self, q: Any, qd: Any, tau: Any | None = None) -> tuple[np.ndarray, dict[str, int]]:
        """Rows of ``(n, n_dof)`` arrays that are plausible, and how many failed each test.

        A row is counted under the first test it fails (position, velocity, effort), so the
        counts add up to the number of refused rows.
        """
        Q, QD = (np.atleast_2d(np.asarray(a, dtype=np.float64)) for a in (q, qd))
        T = None if tau is None else np.atleast_2d(np.asarray(tau, dtype=np.float64))
        refused = np.zeros(Q.shape[0], dtype=bool)
        counts: dict[str, int] = {}
        for reason, bad in self._failures(Q, QD, T):
            new = bad & ~refused
            if new.any():
                counts[reason] = int(new.sum())
            refused |= bad
        return ~refused, counts


def robust_scale(errors: np.ndarray) -> np.ndarray:
    """``1.4826 · median |e|`` per column of ``(n, c)`` errors (the scale of the module docstring)."""
    return MAD_TO_SIGMA * np.median(np.abs(errors), axis=0)


def robust_outliers(residuals: Any, k: float = 6.0, floor: Any = 0.0) -> np.ndarray:
    """Rows of ``(n, c)`` residuals beyond ``k`` robust standard deviations in some column.

    The scale of each column is :func:`robust_scale` of the whole batch, at least ``floor``
    (a scalar or one value per column). Non-finite rows are outliers.
    """
    E = np.atleast_2d(np.asarray(residuals, dtype=np.float64))
    finite = np.all(np.isfinite(E), axis=1)
    if not finite.any():
        return ~finite
    sigma = np.maximum(
        robust_scale(E[finite]), np.broadcast_to(np.asarray(floor, dtype=np.float64), E.shape[1:])
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(E) / np.where(sigma > 0, sigma, np.inf)
    return ~finite | np.any(z > k, axis=1)


class ResidualOutlierTest:
    """Streaming outlier test on prediction errors (see the module docstring).

    :meth:`check` answers for one error and then records it in the window (outliers included).
    Until ``min_samples`` errors are recorded the scale is ``warmup_scale`` (None: nothing is an
    outlier then).

    Args:
        n_outputs: joints (columns of ``e``).
        k: threshold in robust standard deviations.
        window: errors kept for the scale.
        min_samples: errors needed before the test refuses anything.
        floor: smallest scale per joint (a scalar or ``(n_outputs,)``), e.g. a small fraction of
            the effort limits, so that a model that predicts nearly perfectly does not refuse noise.
        warmup_scale: the scale per joint before ``min_samples`` errors are recorded (a scalar or
            ``(n_outputs,)``), e.g. a tenth of the effort limits; None: no test during warm-up.
    """

    def __init__(
        self,
        n_outputs: int,
        k: float = 6.0,
        window: int = 200,
        min_samples: int = 50,
        floor: Any = 0.0,
        warmup_scale: Any | None = None,
    ):
        self.check_settings(k, window, min_samples)
        floor = np.broadcast_to(np.asarray(floor, dtype=np.float64), (n_outputs,)).copy()
        self.check_floor(floor)
        self.warmup_scale = None
        if warmup_scale is not None:
            self.warmup_scale = np.broadcast_to(
                np.asarray(warmup_scale, dtype=np.float64), (n_outputs,)
            ).copy()
            if not np.all(self.warmup_scale > 0):
                raise ValueError("warmup_scale must be > 0")
        self.n_outputs, self.k, self.window, self.min_samples, self.floor = (
            int(n_outputs),
            float(k),
            int(window),
            int(min_samples),
            floor,
        )
        self.reset()

    @staticmethod
    def check_settings(k: float, window: int, min_samples: int = 1) -> None:
        """Raise ValueError unless ``k`` is finite and > 0 and ``1 ≤ min_samples ≤ window ≤``
        :data:`MAX_WINDOW` (for callers that check settings before they build a test)."""
        if not (np.isfinite(k) and k > 0):
            raise ValueError(f"outlier test: k must be finite and > 0, got {k}")
        if not 1 <= window <= MAX_WINDOW:
            raise ValueError(f"outlier test: window must be in [1, {MAX_WINDOW}], got {window}")
        if not 1 <= min_samples <= window:
            raise ValueError(f"outlier test: need 1 ≤ min_samples ≤ window, got {min_samples}, {window}")

    @staticmethod
    def check_floor(floor: Any) -> None:
        """Raise ValueError unless ``floor`` (a scalar or one value per joint) is finite and ≥ 0."""
        if not np.all(np.isfinite(floor) & (np.asarray(floor) >= 0)):
            raise ValueError(f"outlier test: floor must be finite and ≥ 0, got {floor}")

    def reset(self) -> None:
        """Forget the recorded errors."""
        self._abs = np.zeros((self.window, self.n_outputs))
        self._count = 0  # errors recorded so far (the window holds the last min(count, window))
        self._scale: np.ndarray | None = None
        self._scale_at = 0
        self.outliers = 0

    @property
    def scale(self) -> np.ndarray | None:
        """The robust scale per joint (``max(σ_j, floor_j)``, refreshed every
        :data:`SCALE_REFRESH` errors; during warm-up ``warmup_scale``, possibly None). A scale of
        0 (no floor, every recent error 0) tests nothing, as in :func:`robust_outliers`."""
        if self._count < self.min_samples:
            return self.warmup_scale
        if self._scale is None or self._count - self._scale_at >= SCALE_REFRESH:
            held = self._abs[: min(self._count, self.window)]
            scale = np.maximum(robust_scale(held), self.floor)
            self._scale, self._scale_at = np.where(scale > 0, scale, np.inf), self._count
        return self._scale

    def check(self, error: Any) -> bool:
        """True when ``error`` (``(n_outputs,)``) is an outlier; records it either way.

        A non-finite error is an outlier and is not recorded.
        """
        e = np.abs(np.asarray(error, dtype=np.float64).reshape(self.n_outputs))
        if not np.all(np.isfinite(e)):
            self.outliers += 1
            return True
        scale = self.scale
        outlier = scale is not None and bool(np.any(e > self.k * scale))
        self._abs[self._count % self.window] = e
        self._count += 1
        self.outliers += outlier
        return outlier


def local_spikes(X: Any, starts: Sequence[int] = (0,), half_window: int = 3, k: float = 6.0) -> np.ndarray:
    """Rows of a recorded signal ``X`` (``(n, c)``, rows in time order) holding a spike in some
    column, by the Hampel identifier (offline, non-causal: for logs, not streams).

    Row ``i`` of column ``j`` is a spike when ``|x_ij − m_ij| > k · max(1.4826 · MAD_ij, s_j)``,
    with ``m_ij`` and ``MAD_ij`` the median and median absolute deviation of the ``2h + 1`` samples
    around ``i`` (``h = half_window``; windows do not cross the segment boundaries ``starts``,
    e.g. bags) and ``s_j = 1.4826 · median_i |x_{i+1,j} − x_ij|`` the typical change per sample,
    so that a smooth signal's own motion (whose local MAD is about one step) is never a spike.
    A glitched effort or velocity, or two joints' values swapped, is a spike; a repeated sample
    (a stuck driver) is not.
    """
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    n = X.shape[0]
    out = np.zeros(n, dtype=bool)
    bounds = [*sorted({int(s) for s in starts if 0 <= s < n} | {0}), n]
    for a, b in itertools.pairwise(bounds):
        seg = X[a:b]
        if seg.shape[0] < 2 * half_window + 1:
            continue
        padded = np.pad(seg, ((half_window, half_window), (0, 0)), mode="reflect")
        windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half_window + 1, axis=0)
        median = np.median(windows, axis=2)
        mad = MAD_TO_SIGMA * np.median(np.abs(windows - median[:, :, None]), axis=2)
        step = MAD_TO_SIGMA * np.median(np.abs(np.diff(seg, axis=0)), axis=0)
        scale = np.maximum(mad, step)
        with np.errstate(invalid="ignore"):
            out[a:b] = np.any(np.abs(seg - median) > k * np.where(scale > 0, scale, np.inf), axis=1)
    return out


def velocity_mismatch(
    t: Any, q: Any, qd: Any, starts: Sequence[int] = (0,), k: float = 6.0, floor: Any = 0.0
) -> np.ndarray:
    """Rows of a recorded joint log whose velocities disagree with their positions (offline).

    The positions give the velocity independently of the reported one: the central difference
    ``v_i = (q_{i+1} − q_{i−1}) / (t_{i+1} − t_{i−1})`` (second-order one-sided at the ends of each segment
    ``starts``). Rows whose mismatch ``q̇_i − v_i`` is a :func:`robust_outliers` row (``k`` robust
    scales, at least ``floor`` per joint) are returned: a glitched velocity too small to be a
    spike against its neighbours still spoils ``q̈`` for a whole filter window, and a drive's own
    velocity filtering (a lag) only widens the robust scale.
    """
    t, q, qd = np.asarray(t, dtype=np.float64), np.atleast_2d(q), np.atleast_2d(qd)
    n = t.size
    mismatch = np.zeros_like(qd, dtype=np.float64)
    bounds = [*sorted({int(s) for s in starts if 0 <= s < n} | {0}), n]
    for a, b in itertools.pairwise(bounds):
        if b - a < 3:
            continue
        mismatch[a:b] = qd[a:b] - np.gradient(q[a:b], t[a:b], axis=0, edge_order=2)
    return robust_outliers(mismatch, k=k, floor=floor)
