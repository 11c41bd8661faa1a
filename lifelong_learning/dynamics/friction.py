"""Joint friction as extra columns of the parametric regressor (beyond thesis §8.2.1).

A real arm's measured torques hold what no rigid-body model has: friction in the gears and
joints. Per joint ``j`` the classic static model (viscous + Coulomb, e.g. Siciliano et al.,
*Robotics*, §8.4; Armstrong-Hélouvry, 1994), plus an optional constant offset (a torque
sensor's bias), is linear in its parameters:

    τ_f,j = f_v,j q̇_j + f_c,j tanh(q̇_j / v_s) + o_j.

Coulomb friction ``f_c sign(q̇)`` is discontinuous at ``q̇ = 0``; it is smoothed by ``tanh`` over a
velocity ``v_s`` (``smoothing_velocity``, default 0.05 rad/s): at ``|q̇| = v_s`` the term reaches
76 % of ``f_c``, at ``3 v_s`` 99.5 %, and it is linear with slope ``f_c / v_s`` through zero, so a
joint at rest (velocity noise around 0) is not assigned a random ±f_c. Each parameter acts on
its own joint only: the columns form a block-diagonal ``(n_dof, n_parameters)`` matrix per
sample, appended to the base regressor ``Y_b`` so that one RLS engine learns
``[π_b, f_v, f_c, o]`` together (:class:`~lifelong_learning.dynamics.SemiparametricInverseDynamics`).
The URDF says nothing about friction: its prior is zero.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lifelong_learning.core.checks import as_rows
from lifelong_learning.core.persistence import Stateful

TERMS = ("viscous", "coulomb", "offset")


class JointFriction(Stateful):
    """Per-joint friction columns ``F(q̇)``: ``τ_f = F(q̇) θ``, ``θ`` = the chosen terms per joint.

    Args:
        n_dof: number of joints.
        terms: any of ``"viscous"``, ``"coulomb"``, ``"offset"`` (in that order in ``θ``:
            all joints' first term, then all joints' second term, ...).
        smoothing_velocity: ``v_s`` of the Coulomb term [rad/s or m/s], > 0.

    Example:
        >>> JointFriction(2).columns(np.array([[0.0, 1.0]])).shape
        (1, 2, 4)
    """

    def __init__(
        self, n_dof: int, terms: tuple[str, ...] = ("viscous", "coulomb"), smoothing_velocity: float = 0.05
    ):
        terms = tuple(str(t) for t in terms)
        unknown = [t for t in terms if t not in TERMS]
        if int(n_dof) < 1 or unknown or len(set(terms)) != len(terms) or not terms:
            raise ValueError(f"friction terms must be distinct, non-empty, among {TERMS}; got {terms}")
        if not np.isfinite(smoothing_velocity) or smoothing_velocity <= 0:
            raise ValueError(f"smoothing_velocity must be positive, got {smoothing_velocity!r}")
        self.n_dof = int(n_dof)
        self.terms = tuple(t for t in TERMS if t in terms)
        self.smoothing_velocity = float(smoothing_velocity)

    @property
    def n_parameters(self) -> int:
        """Length of ``θ``: one per joint and term."""
        return self.n_dof * len(self.terms)

    @property
    def parameter_names(self) -> list[str]:
        """``"<term>[<joint index>]"`` in ``θ`` order."""
        return [f"{term}[{j}]" for term in self.terms for j in range(self.n_dof)]

    def columns(self, qd: np.ndarray) -> np.ndarray:
        """``F(q̇)``, shape ``(n, n_dof, n_parameters)``, for velocities ``(n, n_dof)``."""
        qd = as_rows(qd, self.n_dof, "qd")
        n, d = qd.shape
        out = np.zeros((n, d, self.n_parameters))
        joints = np.arange(d)
        for k, term in enumerate(self.terms):
            cols = k * d + joints
            if term == "viscous":
                out[:, joints, cols] = qd
            elif term == "coulomb":
                out[:, joints, cols] = np.tanh(qd / self.smoothing_velocity)
            else:  # offset
                out[:, joints, cols] = 1.0
        return out

    def torque(self, qd: np.ndarray, parameters: np.ndarray) -> np.ndarray:
        """``τ_f = F(q̇) θ``, shape ``(n, n_dof)``."""
        return self.columns(qd) @ np.asarray(parameters, dtype=np.float64)

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Joints, terms and smoothing (no arrays: the parameters live in the RLS engine)."""
        return {
            "n_dof": self.n_dof,
            "terms": list(self.terms),
            "smoothing_velocity": self.smoothing_velocity,
        }, {}

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> JointFriction:
        """Rebuild from :meth:`to_state`; ValueError on bad content."""
        return cls(int(meta["n_dof"]), tuple(meta["terms"]), float(meta["smoothing_velocity"]))

    def __repr__(self) -> str:
        return (
            f"JointFriction(n_dof={self.n_dof}, terms={self.terms}, "
            f"smoothing_velocity={self.smoothing_velocity:g})"
        )
