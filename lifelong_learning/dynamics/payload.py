"""Is a load the arm holds a payload? A change of the last link's inertial parameters fitted to it (no ROS).

**The model of a payload.** The rigid-body model is linear in the inertial parameters
(:mod:`lifelong_learning.dynamics.regressor`): ``τ = Y(q, q̇, q̈) π``. A payload grasped, a tool
mounted, changes the parameters of one body only, the last link ``ℓ`` (the body the last joint
of the URDF's kinematic order moves; the gripper, the hand and what they hold are folded into
it): ``π_ℓ → π_ℓ + δ``, ten numbers ``[m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]``
(mass, first moments, inertia about the link's origin, in its frame). The torque it adds is

    Δτ = Y_ℓ(q, q̇, q̈) δ    on every joint at once,

``Y_ℓ`` the ten columns of ``Y`` that belong to ``ℓ``. The model's base regressor gives them
without another Pinocchio call: each column of ``Y`` is a base column or a combination of base
columns (``Y_dep = Y_b K``), so ``Y_ℓ = Y_b B_ℓ`` with ``B_ℓ`` (``n_base × 10``) the base map's
rows for ``ℓ``'s parameters (:func:`last_link_map`).

**The fit** (Kubus, Kröger, Wahl, "On-line estimation of inertial parameters using a recursive
total least-squares approach", IROS 2008, identify a payload's ten parameters recursively from
the wrist; here from the joint torques). Given the residuals ``d_i = τ_i − τ̂_i`` of the samples
held during the load (the model's prediction, which learned nothing of the load), ``δ`` is the
least-squares fit ``argmin Σ_i ‖d_i − Y_ℓ,i δ‖²``, accumulated per joint in O(1) memory
(``G_j = Σ_i y_ijᵀ y_ij``, ``b_j = Σ_i y_ijᵀ d_ij``, ``e_j = Σ_i d_ij²``, ``y_ij`` row ``j`` of
``Y_ℓ,i``), so that the load's mean square on joint ``j`` and what the fit leaves of it are

    c_j² = e_j / N,    u_j² = (e_j − 2 δᵀ b_j + δᵀ G_j δ) / N.

**The verdict** (:meth:`PayloadFit.verdict`). With ``s_j`` the scale of the model's own error on
joint ``j`` in free motion before the load (the node: the contact detector's robust scale) and
``θ_j`` the smallest load the node holds on it, the load is a payload when the fit accounts for it
on every joint:

1. it explains at least ``fraction`` of the load beyond the model's own error:
   ``Σ_j (u_j² − s_j²)₊ ≤ (1 − fraction) Σ_j (c_j² − s_j²)₊``;
2. on each joint too, what it leaves is no more than the model's own error, a load too small to
   hold and the share of the load there that condition 1 allows overall:
   ``u_j² ≤ s_j² + θ_j² + (1 − fraction) c_j²`` (a push on one joint leaves most of it there, and
   the fit adds a torque on joints the push never touched; the last term keeps the errors of a
   model that is young where the load takes the arm, which grow with the load's torques, from
   failing a payload);
3. the last link stays physical: its mass ``m_ℓ + δ_m > 0``;
4. nothing is decided before there are :data:`MIN_SAMPLES` samples, the arm moved (``Y_ℓ``'s
   columns over the samples have a numerical rank of at least :data:`MIN_RANK`: at one pose,
   gravity alone spans three directions of the torques, which a push may happen to lie in) and
   the load shows on some joint beyond the model's error and the smallest load held
   (``c_j² > s_j² + θ_j²``: a load that the model had partly learned before it was held, a slow
   one, leaves residuals too small to tell anything from at first).

Measured on the simulated Panda (docs/benchmarks/contact.md): a payload of 0.3, 1 or 3 kg is
explained to 99 % or more with its mass within 0.01 kg; a constant or rising torque on one or
two joints, a push on link 3 or 4, a horizontal push at the hand, 4-75 %, and a steady downward
push at the hand fails condition 2 (a force is no mass: it does not follow the arm's
accelerations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lifelong_learning.dynamics.regressor import RigidBodyRegressor

#: inertial parameters of one body
BODY_PARAMETERS = 10
#: the fewest held samples a verdict is given on
MIN_SAMPLES = 100
#: the smallest numerical rank of the last link's columns over the held samples
MIN_RANK = 6
#: relative size of an eigenvalue of ``Σ G_j`` counted in its rank and kept in the fit (a direction the
#: motion excites less is left out: its estimate would be noise)
RANK_TOLERANCE = 1e-4


def last_link_map(regressor: RigidBodyRegressor) -> np.ndarray:
    """``B_ℓ`` (``n_base × 10``): the last link's inertial-parameter columns of ``Y`` in terms of
    the base columns, ``Y_ℓ = Y_b B_ℓ`` (see the module docstring)."""
    last = regressor.model.njoints - 1  # bodies follow the joints, in the reduced model's order
    columns = range(BODY_PARAMETERS * (last - 1), BODY_PARAMETERS * last)
    independent = {int(c): k for k, c in enumerate(regressor.independent_columns)}
    dependent = {int(c): k for k, c in enumerate(regressor.dependent_columns)}
    B = np.zeros((regressor.n_base, BODY_PARAMETERS))
    for k, c in enumerate(columns):
        if c in independent:
            B[independent[c], k] = 1.0
        else:
            B[:, k] = regressor.base_map[:, dependent[c]]
    return B


@dataclass(frozen=True)
class PayloadVerdict:
    """What :meth:`PayloadFit.verdict` found: whether a payload explains the load, its fitted
    change ``delta`` (the ten parameters), the share of the load it explains, per joint the load's
    RMS and what the fit leaves of it, and why not (``''`` when it does); not ``decided`` while the
    samples are too few or the arm moved too little to tell."""

    explained: bool
    delta: np.ndarray
    fraction: float
    change: np.ndarray
    unexplained: np.ndarray
    samples: int
    why_not: str = ""
    decided: bool = True

    @property
    def mass(self) -> float:
        """The fitted change of the last link's mass [kg]."""
        return float(self.delta[0]) if self.delta.size else 0.0

    def describe(self, names: list[str]) -> str:
        """One line for the log and the diagnostics."""
        if not self.decided:
            return f"not decided yet ({self.why_not})"
        if self.explained:
            return (
                f"a payload explains it: last link mass {self.mass:+.2f} kg, {100 * self.fraction:.1f} % "
                f"of the load over {self.samples} samples"
            )
        worst = int(np.argmax(self.unexplained)) if self.unexplained.size else 0
        left = (
            f"; {names[worst]} keeps {self.unexplained[worst]:.2f} N m RMS of {self.change[worst]:.2f}"
            if self.unexplained.size
            else ""
        )
        return f"not a payload ({self.why_not}){left}"


class PayloadFit:
    """The recursive fit of a last-link change to held residuals (see the module docstring).

    Args:
        regressor: the model's rigid-body regressor (its base columns are what :meth:`add` gets).
    """

    def __init__(self, regressor: RigidBodyRegressor):
        self.map = last_link_map(regressor)
        self.n_base = regressor.n_base
        self.n_dof = regressor.n_dof
        last = regressor.model.njoints - 1
        self.link_mass = float(regressor.full_parameters[BODY_PARAMETERS * (last - 1)])
        self.reset()

    def reset(self) -> None:
        """Forget the samples (a load ended, or was taken as the new steady state)."""
        n, p = self.n_dof, BODY_PARAMETERS
        self._G = np.zeros((n, p, p))
        self._b = np.zeros((n, p))
        self._e = np.zeros(n)
        self.samples = 0

    def add(self, base_columns: Any, residual: Any) -> None:
        """Held samples: their base regressor columns ``Y_b`` (``(k, n_dof, ≥ n_base)``; columns past
        ``n_base``, friction, are ignored) and residuals ``τ − τ̂`` (``(k, n_dof)``). Rows with a
        non-finite value are left out."""
        Yb = np.asarray(base_columns, dtype=np.float64)[:, :, : self.n_base]
        d = np.asarray(residual, dtype=np.float64).reshape(Yb.shape[0], self.n_dof)
        finite = np.isfinite(d).all(axis=1) & np.isfinite(Yb).all(axis=(1, 2))
        if not finite.all():
            Yb, d = Yb[finite], d[finite]
        if not d.shape[0]:
            return
        Y = Yb @ self.map  # (k, n_dof, 10)
        self._G += np.einsum("kji,kjl->jil", Y, Y)
        self._b += np.einsum("kji,kj->ji", Y, d)
        self._e += np.einsum("kj,kj->j", d, d)
        self.samples += d.shape[0]

    def verdict(self, own_error: Any, threshold: Any, fraction: float) -> PayloadVerdict:
        """Whether a payload explains the samples added so far (see the module docstring):
        ``own_error`` the scale of the model's error per joint in free motion (``s_j``), ``threshold`` the
        smallest load held per joint (``θ_j``), ``fraction`` the share it must explain."""
        n = max(self.samples, 1)
        s2 = np.asarray(own_error, dtype=np.float64) ** 2
        theta2 = np.asarray(threshold, dtype=np.float64) ** 2
        G, b = self._G.sum(axis=0), self._b.sum(axis=0)
        w, V = np.linalg.eigh(G)
        keep = w > RANK_TOLERANCE * max(float(w[-1]), 1e-300)
        delta = V[:, keep] @ ((V[:, keep].T @ b) / w[keep])
        change2 = self._e / n
        left2 = np.maximum(
            (self._e - 2 * self._b @ delta + np.einsum("i,jil,l->j", delta, self._G, delta)) / n, 0.0
        )
        excess = float(np.maximum(change2 - s2, 0.0).sum())
        unexplained = float(np.maximum(left2 - s2, 0.0).sum())
        share = 1.0 - unexplained / excess if excess > 0 else 0.0
        why = ""
        visible = bool(np.any(change2 > s2 + theta2))
        if self.samples < MIN_SAMPLES:
            why = f"{self.samples} samples, {MIN_SAMPLES} needed"
        elif int(keep.sum()) < MIN_RANK:
            why = "the arm did not move enough to tell"
        elif not visible:
            why = "the load is still too small to tell"
        elif self.link_mass + delta[0] <= 0:
            why = f"the last link would weigh {self.link_mass + delta[0]:.2f} kg"
        elif share < fraction:
            why = f"it explains {100 * share:.0f} % of the load, {100 * fraction:.0f} % needed"
        elif np.any(left2 > s2 + theta2 + (1 - fraction) * change2):
            why = "it leaves a load on a joint"
        decided = self.samples >= MIN_SAMPLES and int(keep.sum()) >= MIN_RANK and visible
        return PayloadVerdict(
            not why, delta, share, np.sqrt(change2), np.sqrt(left2), self.samples, why, decided
        )
