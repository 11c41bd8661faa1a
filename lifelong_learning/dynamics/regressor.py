"""Rigid-body inverse-dynamics regressor of a URDF through Pinocchio (thesis §8.2.1).

The rigid-body model is linear in the inertial parameters: ``τ = Y(q, q̇, q̈) π`` with
``π`` stacking, per moving body, ``[m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]``
(Pinocchio's ``Inertia.toDynamicParameters``), ``Y = pin.computeJointTorqueRegressor``.

Joints used: ``joint_names`` (any order); every other joint of the URDF is **locked at its
neutral configuration** (zero for revolute/prismatic joints) by ``pin.buildReducedModel``,
which folds the bodies it carries into their parent's inertia (e.g. the Panda's fingers
into the hand, the hand into link 7). The model's outputs follow ``joint_names``' order.

Identifiable (base) parameters: many columns of ``Y`` are zero or linear combinations of
others for every state. We stack ``Y`` at random states (uniform within the joint limits,
Gaussian velocities and accelerations, seeded) and take a QR decomposition with column
pivoting (``scipy.linalg.qr(pivoting=True)``): the first ``r`` pivots (``r`` the numerical rank)
are independent columns, and the others satisfy ``Y_dep = Y_indep K`` with ``K`` solved by least
squares on the stack. Then ``Y π = Y_b π_b`` with ``Y_b = Y[:, indep]`` and
``π_b = π_indep + K π_dep``: the base parameters, identifiable from torque data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pinocchio as pin
import scipy.linalg

from lifelong_learning.core.persistence import Stateful


class RigidBodyRegressor(Stateful):
    """Base-parameter regressor ``Y_b(q, q̇, q̈)`` of a URDF reduced to ``joint_names``.

    Args:
        urdf: the URDF **text** (XML), not a path.
        joint_names: the joints modelled, in the order of the model's inputs and outputs;
            ``None`` takes every 1-DoF joint of the URDF in tree order.
        n_identification_states: random states stacked to find the base parameters.
        seed: seed of those states.
        rank_tolerance: relative threshold on ``|diag(R)|`` of the pivoted QR for the rank.
        base: precomputed ``(independent_columns, K)`` (when loading a saved model).

    Raises:
        ValueError: unparsable URDF, unknown joint names, or joints with more than one DoF.
    """

    def __init__(
        self,
        urdf: str,
        joint_names: list[str] | None = None,
        n_identification_states: int = 200,
        seed: int = 0,
        rank_tolerance: float = 1e-9,
        base: tuple[np.ndarray, np.ndarray] | None = None,
    ):
        full = _parse(urdf)
        moving = _moving(full)
        if joint_names is None:
            joint_names = moving
        joint_names = [str(n) for n in joint_names]
        if len(set(joint_names)) != len(joint_names) or not joint_names:
            raise ValueError(f"joint_names must be distinct and non-empty, got {joint_names}")
        unknown = [n for n in joint_names if n not in moving]
        if unknown:
            raise ValueError(f"joints {unknown} are not moving joints of the URDF (it has {moving})")
        locked = [full.getJointId(n) for n in moving if n not in joint_names]
        self.full_model = full
        self.model = pin.buildReducedModel(full, locked, pin.neutral(full)) if locked else full
        self.data = self.model.createData()
        self.urdf = urdf
        self.joint_names = joint_names
        self.locked_joints = [n for n in moving if n not in joint_names]
        # reduced model's joint order (tree order) vs the user's order
        model_order = [self.model.names[i] for i in range(1, self.model.njoints)]
        self._model_index = np.array([model_order.index(n) for n in joint_names])  # user j ← model idx
        self.n_dof = len(joint_names)
        self.full_parameters = np.concatenate(
            [self.model.inertias[i].toDynamicParameters() for i in range(1, self.model.njoints)]
        )
        vel = np.asarray(self.model.velocityLimit, dtype=float)[self._model_index]
        eff = np.asarray(self.model.effortLimit, dtype=float)[self._model_index]
        lo = np.asarray(self.model.lowerPositionLimit, dtype=float)[self._model_index]
        hi = np.asarray(self.model.upperPositionLimit, dtype=float)[self._model_index]
        self.velocity_limit = np.where(np.isfinite(vel) & (vel > 0), vel, 1.0)
        self.effort_limit = np.where(np.isfinite(eff) & (eff > 0), eff, 1.0)
        bounded = np.isfinite(lo) & np.isfinite(hi) & (hi > lo) & (hi - lo < 1e3)
        self.lower_limit = np.where(bounded, lo, -np.pi)
        self.upper_limit = np.where(bounded, hi, np.pi)
        if base is None:
            base = self._identify_base(n_identification_states, seed, rank_tolerance)
        indep, K = (np.asarray(base[0], dtype=np.int64), np.asarray(base[1], dtype=np.float64))
        n_full = self.full_parameters.size
        if indep.ndim != 1 or np.any(indep < 0) or np.any(indep >= n_full) or len(set(indep)) != indep.size:
            raise ValueError("base parameter columns out of range or repeated")
        if K.shape != (indep.size, n_full - indep.size) or not np.all(np.isfinite(K)):
            raise ValueError(
                f"base parameter map K has shape {K.shape}, expected {(indep.size, n_full - indep.size)}"
            )
        self.independent_columns = indep
        self.dependent_columns = np.setdiff1d(np.arange(n_full), indep)
        self.base_map = K

    # ------------------------------------------------------------------ base parameters
    def _identify_base(self, n_states: int, seed: int, tol: float) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(seed)
        n = self.n_dof
        # drawn in the reduced model's joint order, so the base does not depend on joint_names' order
        to_model = np.argsort(self._model_index)
        lo, hi, vel = (a[to_model] for a in (self.lower_limit, self.upper_limit, self.velocity_limit))
        q = rng.uniform(lo, hi, (n_states, n))[:, self._model_index]
        qd = (rng.standard_normal((n_states, n)) * vel)[:, self._model_index]
        qdd = (rng.standard_normal((n_states, n)) * 5.0 * vel)[:, self._model_index]
        Yu = self.full_regressor(q, qd, qdd)[:, to_model].reshape(-1, self.full_parameters.size)
        norms = np.linalg.norm(Yu, axis=0)
        Y = Yu / np.where(norms > 0, norms, 1.0)  # column scaling: masses vs inertias
        _, R, piv = scipy.linalg.qr(Y, mode="economic", pivoting=True)
        d = np.abs(np.diag(R))
        rank = int(np.sum(d > tol * d[0]))
        indep = np.sort(piv[:rank])
        dep = np.setdiff1d(np.arange(Y.shape[1]), indep)
        K = np.linalg.lstsq(Yu[:, indep], Yu[:, dep], rcond=None)[0] if dep.size else np.zeros((rank, 0))
        return indep, K

    @property
    def n_base(self) -> int:
        """Number of base parameters."""
        return int(self.independent_columns.size)

    def base_parameters(self, full_parameters: np.ndarray | None = None) -> np.ndarray:
        """``π_b = π_indep + K π_dep`` (default: the URDF's own inertial parameters)."""
        p = self.full_parameters if full_parameters is None else np.asarray(full_parameters, dtype=float)
        return p[self.independent_columns] + self.base_map @ p[self.dependent_columns]

    # ------------------------------------------------------------------ evaluation
    def _to_model_order(self, a: np.ndarray) -> np.ndarray:
        out = np.empty_like(a)
        out[..., self._model_index] = a
        return out

    def full_regressor(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """``Y`` of all parameters, shape ``(n, n_dof, n_full)``; rows in ``joint_names`` order."""
        q, qd, qdd = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, qd, qdd))
        out = np.empty((q.shape[0], self.n_dof, self.full_parameters.size))
        for i in range(q.shape[0]):
            Y = pin.computeJointTorqueRegressor(
                self.model,
                self.data,
                self._to_model_order(q[i]),
                self._to_model_order(qd[i]),
                self._to_model_order(qdd[i]),
            )
            out[i] = Y[self._model_index]
        return out

    def regressor(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """Base regressor ``Y_b``, shape ``(n, n_dof, n_base)``."""
        return self.full_regressor(q, qd, qdd)[:, :, self.independent_columns]

    def rnea(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """The URDF's own inverse dynamics (``pin.rnea``), shape ``(n, n_dof)``."""
        q, qd, qdd = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, qd, qdd))
        out = np.empty(q.shape)
        for i in range(q.shape[0]):
            tau = pin.rnea(
                self.model,
                self.data,
                self._to_model_order(q[i]),
                self._to_model_order(qd[i]),
                self._to_model_order(qdd[i]),
            )
            out[i] = tau[self._model_index]
        return out

    def mass_coriolis_gravity(self, q: Any, qd: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The URDF's ``M(q)``, ``C(q, q̇)`` (Pinocchio's, with ``Ṁ = C + Cᵀ``) and ``g(q)`` at one
        state, in ``joint_names`` order (rows and columns)."""
        qm = self._to_model_order(np.asarray(q, dtype=float))
        vm = self._to_model_order(np.asarray(qd, dtype=float))
        M = pin.crba(self.model, self.data, qm)
        M = np.triu(M) + np.triu(M, 1).T  # crba fills the upper triangle
        C = pin.computeCoriolisMatrix(self.model, self.data, qm, vm)
        g = pin.computeGeneralizedGravity(self.model, self.data, qm)
        ix = self._model_index
        return M[np.ix_(ix, ix)], np.array(C)[np.ix_(ix, ix)], np.array(g)[ix]

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """What a model file needs to rebuild this regressor exactly (URDF text included)."""
        meta = {"urdf": self.urdf, "joint_names": list(self.joint_names)}
        return meta, {
            "independent_columns": self.independent_columns.copy(),
            "base_map": self.base_map.copy(),
        }

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> RigidBodyRegressor:
        """Rebuild from :meth:`to_state`; raises ValueError on bad content."""
        try:
            urdf, names = meta["urdf"], meta["joint_names"]
            base = (arrays["independent_columns"], arrays["base_map"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed regressor state: {exc}") from exc
        if not isinstance(names, list):
            raise ValueError("regressor state: joint_names must be a list")
        return cls(urdf, names, base=base)


def _parse(urdf: str) -> Any:
    if not isinstance(urdf, str) or "<robot" not in urdf:
        raise ValueError("urdf must be the URDF text (an XML string with a <robot> element)")
    try:
        return pin.buildModelFromXML(urdf)
    except Exception as exc:  # Pinocchio raises plain RuntimeError/ValueError
        raise ValueError(f"cannot parse URDF: {exc}") from exc


def _moving(full: Any) -> list[str]:
    moving = [full.names[i] for i in range(1, full.njoints) if full.joints[i].nv > 0]
    for name in moving:
        jid = full.getJointId(name)
        if full.joints[jid].nv != 1 or full.joints[jid].nq != 1:
            raise ValueError(f"joint {name!r} is not a 1-DoF revolute/prismatic joint")
    return moving


def moving_joints(urdf: str) -> list[str]:
    """The URDF's moving (1-DoF revolute or prismatic) joints, in the URDF's kinematic order: the
    joints a model of it can use (fixed joints are not joints to Pinocchio).

    Raises:
        ValueError: not URDF text, unparsable, or a moving joint with more than one DoF.
    """
    return _moving(_parse(urdf))


def kinematic_difference(urdf_a: str, urdf_b: str, tol: float = 1e-9) -> str:
    """How two URDFs' kinematic trees differ ('' when they do not).

    Compared: the joints (names, parents, types, axes) and their placements. Inertial parameters
    are not: a model built on a URDF with refined inertias still fits the same robot.

    Raises:
        ValueError: a URDF that does not parse.
    """
    if urdf_a == urdf_b:
        return ""
    models = []
    for urdf in (urdf_a, urdf_b):
        try:
            models.append(pin.buildModelFromXML(urdf))
        except Exception as exc:  # Pinocchio raises plain RuntimeError/ValueError
            raise ValueError(f"cannot parse URDF: {exc}") from exc
    a, b = models
    joints_a, joints_b = list(a.names)[1:], list(b.names)[1:]
    if joints_a != joints_b:
        return f"joints {joints_a} vs {joints_b}"
    for i in range(1, a.njoints):
        name = a.names[i]
        if a.parents[i] != b.parents[i]:
            return f"joint {name!r} has another parent"
        if a.joints[i] != b.joints[i]:  # type, axis, index
            return f"joint {name!r} differs: {a.joints[i].shortname()} vs {b.joints[i].shortname()}"
        if not np.allclose(a.jointPlacements[i].homogeneous, b.jointPlacements[i].homogeneous, atol=tol):
            return f"joint {name!r} is placed differently"
    return ""
