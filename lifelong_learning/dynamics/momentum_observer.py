"""The generalized-momentum observer: external joint torques without joint accelerations (no ROS).

With the rigid-body model ``M(q) q̈ + C(q, q̇) q̇ + g(q) = τ_m + τ_env`` (``τ_m`` the drives'
torque, ``τ_env`` the environment's) and ``Ṁ = C + Cᵀ``, the generalized momentum ``p = M(q) q̇``
obeys ``ṗ = τ_m + Cᵀ(q, q̇) q̇ − g(q) + τ_env``. The observer's residual

    r(t) = K_O [ p(t) − p(0) − ∫₀ᵗ (τ_m + Cᵀ q̇ − g + r) ds ]

then follows ``ṙ = K_O (τ_env − r)``: a first-order low-pass of the external torque with time
constant ``1 / K_O`` per joint, from ``q``, ``q̇`` and ``τ_m`` only (De Luca, Mattone, "Sensorless
robot collision detection and hybrid force/motion control", ICRA 2005; De Luca, Albu-Schäffer,
Haddadin, Hirzinger, IROS 2006; Haddadin, De Luca, Albu-Schäffer, IEEE T-RO 33(6), 2017, §IV-B).
``M``, ``C`` and ``g`` come from the URDF through Pinocchio
(:meth:`~lifelong_learning.dynamics.regressor.RigidBodyRegressor.mass_coriolis_gravity`).

**Learned model** (``learned_observer``): the observer's model may carry a correction
``δ(q, q̇, q̈)`` (what a learned inverse-dynamics model adds to the URDF's: friction, inertial
errors), ``M q̈ + C q̇ + g + δ = τ_m + τ_env``; ``τ_m − δ`` then takes the place of ``τ_m``.

**Sampling.** Stamps ``t_k``; the integral advances by the previous sample's integrand times
``t_k − t_{k−1}`` (explicit Euler, stable for ``K_O Δt < 2``; checked when a sample arrives: a
gain too large for the stream's period is refused at :meth:`MomentumObserver.update`). A stamp
that does not advance, or a gap beyond ``max_gap_s``, restarts the observer (``r = 0``).

**Sign.** :meth:`MomentumObserver.update` returns ``−r``, the estimate in the convention of
:mod:`lifelong_learning.dynamics.contact` (measured − predicted: the torque the drives exert beyond
the model), so that the three estimators of a node are compared and thresholded alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lifelong_learning.dynamics.regressor import RigidBodyRegressor

#: the largest ``K_O Δt`` accepted (explicit Euler is stable below 2; above 1 it overshoots)
MAX_GAIN_STEP = 1.0


class MomentumObserver:
    """Generalized-momentum observer on a URDF (see the module docstring).

    Args:
        regressor: the URDF's rigid-body model reduced to the modelled joints.
        gain: ``K_O`` (1/s), a scalar or one per joint; the time constant is ``1 / gain``.
        max_gap_s: a gap between stamps beyond this restarts the observer.
    """

    def __init__(self, regressor: RigidBodyRegressor, gain: Any = 50.0, max_gap_s: float = 0.1):
        n = regressor.n_dof
        k = np.broadcast_to(np.asarray(gain, dtype=np.float64), (n,)).copy()
        if not np.all(np.isfinite(k) & (k > 0)):
            raise ValueError(f"momentum observer gain must be finite and > 0, got {gain}")
        if not (np.isfinite(max_gap_s) and max_gap_s > 0):
            raise ValueError(f"max_gap_s must be finite and > 0, got {max_gap_s}")
        self.regressor, self.gain, self.max_gap_s, self.n = regressor, k, float(max_gap_s), n
        self.restarts = 0
        self.reset()

    def reset(self) -> None:
        """Start again at the next sample (``r = 0``)."""
        self.r = np.zeros(self.n)  # the residual: → τ_env
        self._t: float | None = None
        self._p0 = np.zeros(self.n)
        self._integral = np.zeros(self.n)
        self._beta = np.zeros(self.n)  # the previous sample's τ_m − δ + Cᵀq̇ − g

    def update(self, t: float, q: Any, qd: Any, tau: Any, correction: Any | None = None) -> np.ndarray:
        """One sample (stamp ``t`` s, ``q``, ``q̇``, the drives' ``τ_m``; ``correction`` ``δ`` of a
        learned model, None: the URDF's alone); the external torque estimate ``−r`` (module
        docstring). Raises ValueError for a gain too large for the stamps' period."""
        q, qd = np.asarray(q, dtype=np.float64), np.asarray(qd, dtype=np.float64)
        tau = np.asarray(tau, dtype=np.float64)
        if correction is not None:
            tau = tau - np.asarray(correction, dtype=np.float64)
        M, C, g = self.regressor.mass_coriolis_gravity(q, qd)
        p = M @ qd
        beta = tau + C.T @ qd - g
        t = float(t)
        dt = None if self._t is None else t - self._t
        if dt is None or not 0 < dt <= self.max_gap_s:
            if dt is not None:
                self.restarts += 1
            self.reset()
            self._p0 = p
        else:
            step = self.gain * dt
            if np.any(step > MAX_GAIN_STEP):
                raise ValueError(
                    f"momentum observer gain {self.gain.max():g}/s too large for samples {dt:g} s apart "
                    f"(K_O Δt must be ≤ {MAX_GAIN_STEP})"
                )
            self._integral += (self._beta + self.r) * dt
            self.r = self.gain * (p - self._p0 - self._integral)
        self._t, self._beta = t, beta
        return -self.r
