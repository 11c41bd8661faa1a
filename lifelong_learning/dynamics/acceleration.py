"""Joint accelerations from (t, q̇) streams: a causal Savitzky–Golay differentiator.

Robots publish positions, velocities and efforts, not accelerations (thesis §8.4 used the
iCub's own estimates). We estimate ``q̈`` at the **newest** sample ``t_k`` by fitting, per
joint, a polynomial of degree ``p`` (default 2) in ``s = t − t_k`` to the last ``N`` velocities
(default 9) by least squares with the actual time stamps (so jitter and dropped messages are
handled), and taking its slope at ``s = 0``:

    q̇(t_k + s) ≈ a₀ + a₁ s + … + a_p s^p,   q̈(t_k) ≈ a₁.

This is a causal Savitzky–Golay filter: on a uniform grid it is a fixed FIR low-pass
differentiator; a larger ``N`` or smaller ``p`` smooths more and lags more (``p = 1`` is the
slope of the regression line, lag ``(N−1)/2`` samples at low frequencies; ``p = 2`` has a much
smaller lag). Fewer than ``N`` samples so far: the fit uses what there is, with the degree
lowered to ``n − 1``; a single sample gives zeros.

Time is rescaled by the window's span before solving (well-conditioned normal equations).
:class:`AccelerationEstimator` (streaming, for the node) and :func:`estimate_accelerations`
(whole arrays, for the offline tuner) call the same :func:`_fit_slopes` on the same windows,
so they agree to rounding.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

DEFAULT_WINDOW = 9
DEFAULT_DEGREE = 2


def _fit_slopes(t_windows: np.ndarray, v_windows: np.ndarray, degree: int) -> np.ndarray:
    """Slopes at the last stamp of each window.

    Args:
        t_windows: ``(m, N)`` stamps, the newest last.
        v_windows: ``(m, N, n)`` velocities.
        degree: polynomial degree ``p ≥ 1`` (lowered to ``N − 1`` if needed).

    Returns:
        ``(m, n)`` accelerations.
    """
    m, N = t_windows.shape
    p = min(degree, N - 1)
    if p < 1:
        return np.zeros((m, v_windows.shape[2]))
    s = t_windows - t_windows[:, -1:]
    span = np.maximum(-s[:, :1], 1e-12)  # (m, 1) > 0
    u = s / span  # in [-1, 0]
    V = u[:, :, None] ** np.arange(p + 1)[None, None, :]  # (m, N, p+1)
    G = np.einsum("mka,mkb->mab", V, V)
    rhs = np.einsum("mka,mkn->man", V, v_windows)
    # pinv, not solve: stamps that cluster (a burst of messages within microseconds) make G
    # rank-deficient; the minimum-norm fit then still gives a finite slope.
    coef = np.linalg.pinv(G) @ rhs  # (m, p+1, n)
    return coef[:, 1, :] / span


def _check_stream(t: np.ndarray, qd: np.ndarray) -> None:
    if t.ndim != 1 or qd.ndim != 2 or qd.shape[0] != t.shape[0]:
        raise ValueError(f"t must be (n,) and qd (n, n_joints); got {t.shape}, {qd.shape}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(qd))):
        raise ValueError("t or qd contains NaN or Inf")
    if np.any(np.diff(t) <= 0):
        raise ValueError("time stamps must be strictly increasing")


def estimate_accelerations(
    t: np.ndarray | Any,
    qd: np.ndarray | Any,
    window: int = DEFAULT_WINDOW,
    degree: int = DEFAULT_DEGREE,
    starts: Sequence[int] = (),
) -> np.ndarray:
    """``q̈`` for every sample of whole recordings, exactly as :class:`AccelerationEstimator`
    would produce it sample by sample (see the module docstring).

    Args:
        t: ``(n,)`` time stamps in seconds, strictly increasing within each recording.
        qd: ``(n, n_joints)`` joint velocities.
        window: ``N``, samples per fit (≥ 2).
        degree: ``p``, polynomial degree (≥ 1).
        starts: rows where another recording begins (e.g. the first row of each bag after the
            first): the filter restarts there, as a new estimator would.

    Returns:
        ``(n, n_joints)`` accelerations.
    """
    t = np.asarray(t, dtype=np.float64)
    qd = np.asarray(qd, dtype=np.float64)
    if qd.ndim == 1:
        qd = qd[:, None]
    AccelerationEstimator.check_settings(window, degree)
    bounds = sorted({0, *(int(k) for k in starts), t.shape[0]})
    if bounds[0] < 0 or bounds[-1] > t.shape[0]:
        raise ValueError(f"starts must be row indices in [0, {t.shape[0]}], got {list(starts)}")
    out = np.zeros(qd.shape)
    for a, b in itertools.pairwise(bounds):
        _check_stream(t[a:b], qd[a:b])
        out[a:b] = _one_recording(t[a:b], qd[a:b], window, degree)
    return out


def _one_recording(t: np.ndarray, qd: np.ndarray, window: int, degree: int) -> np.ndarray:
    n = t.shape[0]
    out = np.zeros(qd.shape)
    for k in range(1, min(window - 1, n)):  # warm-up: short windows
        out[k] = _fit_slopes(t[None, : k + 1], qd[None, : k + 1], degree)[0]
    if n >= window:
        tw = np.lib.stride_tricks.sliding_window_view(t, window)  # (n-N+1, N)
        vw = np.lib.stride_tricks.sliding_window_view(qd, window, axis=0).transpose(0, 2, 1)
        chunk = 20000
        for a in range(0, tw.shape[0], chunk):
            out[window - 1 + a : window - 1 + a + chunk] = _fit_slopes(
                tw[a : a + chunk], vw[a : a + chunk], degree
            )
    return out


class AccelerationEstimator:
    """Streaming ``q̈`` estimator: :meth:`update` one ``(t, q̇)`` at a time.

    Example:
        >>> est = AccelerationEstimator(n_joints=1)
        >>> [float(est.update(0.01 * k, [0.5 * 0.01 * k])[0]) for k in range(3)][-1]
        0.5
    """

    def __init__(self, n_joints: int, window: int = DEFAULT_WINDOW, degree: int = DEFAULT_DEGREE):
        self.check_settings(window, degree)
        if int(n_joints) < 1:
            raise ValueError("n_joints must be ≥ 1")
        self.n_joints = int(n_joints)
        self.window = int(window)
        self.degree = int(degree)
        self.reset()

    @staticmethod
    def check_settings(window: int, degree: int) -> None:
        """Raise ValueError unless ``window ≥ 2`` and ``degree ≥ 1`` (the filter's rule, for callers
        that check settings before they build one)."""
        if int(window) < 2 or int(degree) < 1:
            raise ValueError(f"window must be ≥ 2 and degree ≥ 1, got {window}, {degree}")

    def reset(self) -> None:
        """Forget the buffered samples."""
        self._t: deque[float] = deque(maxlen=self.window)
        self._v: deque[np.ndarray] = deque(maxlen=self.window)
        self._fitted_offsets = np.zeros(0)  # the normalized offsets the slope row was fitted on
        self._unit_weights = np.zeros(0)
        self.fits = 0  # slope rows solved (the others were reused)

    def __len__(self) -> int:
        """Samples in the window now (up to ``window``)."""
        return len(self._t)

    def discard_last(self) -> None:
        """Forget the newest sample (one found bad after its ``q̈`` was estimated), so that it
        does not enter the fits of the samples after it."""
        if self._t:
            self._t.pop()
            self._v.pop()

    @property
    def last_time(self) -> float | None:
        """Stamp of the newest sample, or None."""
        return self._t[-1] if self._t else None

    def update(self, t: float, qd: np.ndarray | Any) -> np.ndarray:
        """Add a sample and return ``q̈`` at ``t``.

        Raises:
            ValueError: wrong size, non-finite values, or ``t`` not after the previous stamp
                (the buffer is then unchanged).
        """
        v = np.asarray(qd, dtype=np.float64).reshape(-1)
        if v.shape != (self.n_joints,):
            raise ValueError(f"qd must have {self.n_joints} values, got {np.shape(qd)}")
        if not (np.isfinite(t) and np.all(np.isfinite(v))):
            raise ValueError("t or qd contains NaN or Inf")
        if self._t and t <= self._t[-1]:
            raise ValueError(f"time stamp {t} is not after the previous one {self._t[-1]}")
        self._t.append(float(t))
        self._v.append(v.copy())
        return self._slope_weights() @ np.asarray(self._v)

    def _slope_weights(self) -> np.ndarray:
        """``w`` with ``q̈ = w · q̇_window``: the slope row of the window's least-squares fit (as in
        :func:`_fit_slopes`).

        The fit depends on the stamps only through their offsets ``u`` relative to the window's
        span, so the row is kept while the offsets repeat, and only the span is applied again. They
        repeat to the stamps' own resolution, not exactly: a float64 stamp of epoch time (about
        1.8·10⁹ s) resolves 0.24 µs, so even a perfectly periodic 1 kHz stream gives offsets that
        differ by 10⁻⁵ of the span from one window to the next. The tolerance is that resolution
        (4 ulp of the largest stamp, over the span), plus 10⁻⁹: a reused row is as exact as the
        stamps it is applied to. Jittered stamps (a driver that stamps in software) differ by
        more, and the row is solved again."""
        t = np.asarray(self._t)
        s = t - t[-1]
        span = max(-s[0], 1e-12)
        u = s / span
        cached = self._fitted_offsets
        tolerance = 1e-9 + 4.0 * np.spacing(max(abs(t[0]), abs(t[-1]))) / span
        if cached.shape != u.shape or np.max(np.abs(u - cached), initial=0.0) > tolerance:
            p = min(self.degree, len(t) - 1)
            if p < 1:
                self._unit_weights = np.zeros(len(t))
            else:
                V = u[:, None] ** np.arange(p + 1)[None, :]
                # pinv, not solve: stamps that cluster make VᵀV rank-deficient (see _fit_slopes)
                self._unit_weights = (np.linalg.pinv(V.T @ V) @ V.T)[1]
            self._fitted_offsets = u
            self.fits += 1
        return self._unit_weights / span
