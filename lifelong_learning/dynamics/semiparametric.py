"""Semiparametric incremental inverse dynamics (thesis ch. 8, Fig. 8.2).

Three learners of ``τ = f(q, q̇, q̈)`` for the joints ``joint_names`` of a URDF, all updated
one sample at a time with :class:`~lifelong_learning.learners.RecursiveRLS` (Cholesky
rank-1 updates, thesis §8.2.4), optionally with exponential forgetting so the model tracks
a change (a grasped payload) instead of saturating:

- **parametric (P)**: ``τ̂_P = Y_b(q, q̇, q̈) π_b + F(q̇) θ`` on the rigid-body base regressor
  (:class:`~lifelong_learning.dynamics.regressor.RigidBodyRegressor`) and, beyond the thesis,
  per-joint friction columns (:class:`~lifelong_learning.dynamics.friction.JointFriction`:
  viscous and Coulomb by default, offsets optional); each sample adds ``n_dof`` regressor rows.
  ``prior="urdf"`` (default, beyond the thesis) learns the correction ``δ`` of the URDF's own
  base parameters, ``π_b = π_urdf + δ``, with targets ``τ − Y_b π_urdf`` (so ``λ`` shrinks
  towards the URDF); ``prior="zero"`` starts from zero as the thesis does. The URDF gives no
  friction: ``θ`` starts at zero, with its own ridge ``λ_f`` (``lam_friction``; one engine
  serves both: docs/design.md).
- **nonparametric (NP)**: ``τ̂_NP = Wᵀφ(x̃)`` with ``x̃`` the normalized input
  ``[(q − q_mid)/q_half, q̇/q̇_max, q̈/q̈_scale]`` and ``φ`` any
  :class:`~lifelong_learning.learners.feature_map.FeatureMap` (default: random Fourier
  features of a Gaussian kernel, thesis eq. 8.9); O(D²) per sample.
- **semiparametric (SP)**: P first; NP learns the residual ``Δτ = τ − τ̂_P`` on the input
  ``[x̃, τ̂_P/τ_max]``; prediction ``τ̂_P + Δτ̂`` (which τ̂_P the residual learns from:
  ``residual_after_update``).

Normalization defaults come from the URDF: joint-limit mid-points and half ranges, velocity
limits, ``q̈_scale = acceleration_scale`` (default 3 × the velocity limit, in rad/s²; URDFs hold
no acceleration limits) and effort limits. :meth:`fit_normalization` sets ``q̈_scale`` (and the
others) from data instead; :func:`select_hyperparameters` picks ``(bandwidth, λ)`` on a hold-out
split (the offline Nyström tuner does this properly).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from lifelong_learning.core.checks import as_rows, same_rows
from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.core.model_file import prefixed, unprefixed
from lifelong_learning.core.persistence import PersistentModel
from lifelong_learning.dynamics.friction import JointFriction
from lifelong_learning.dynamics.regressor import RigidBodyRegressor
from lifelong_learning.learners.auto_forgetting import AutoForgettingRLS
from lifelong_learning.learners.feature_map import FeatureMap, restore_feature_map, store_feature_map
from lifelong_learning.learners.random_features import RandomFourierFeatures
from lifelong_learning.learners.recursive_rls import RecursiveRLS

MODES = ("semiparametric", "parametric", "nonparametric")
PRIORS = ("urdf", "zero", "model")


#: largest magnitude of a row an update may add (its squares and products stay far from overflow)
MAX_UPDATE_MAGNITUDE = 1e100


def _check_update_rows(part: str, *arrays: np.ndarray) -> None:
    """ValueError unless every value the ``part`` would learn is finite and below the bound."""
    for a in arrays:
        if not np.all(np.abs(a) < MAX_UPDATE_MAGNITUDE):
            raise ValueError(f"the {part} part's rows hold non-finite or absurd values; nothing learned")


def residual_features(
    x_normalized: np.ndarray, tau_parametric: np.ndarray, torque_scale: np.ndarray
) -> np.ndarray:
    """The semiparametric residual's input ``[x̃, τ̂_P / τ_max]`` (thesis Fig. 8.2), ``(n, 4 n_dof)``.

    The one definition, used by the online model and by the offline tuner's export."""
    return np.hstack([x_normalized, tau_parametric / torque_scale])


@dataclass(frozen=True)
class PreparedSamples:
    """Validated samples and what :meth:`SemiparametricInverseDynamics.prepare` computed from them
    once, for the answer and for learning (arrays of ``n`` rows). Samples prepared by one model
    stay valid for it after it learned more (the columns and inputs do not depend on what it
    learned; the predictions are those it answered with)."""

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    x: np.ndarray  # normalized inputs
    columns: np.ndarray | None  # P's regressor columns (n, n_dof, p); None without P
    tau_parametric: np.ndarray  # τ̂_P (zeros without P)
    phi: np.ndarray | None  # the residual's features for τ̂_P before learning (None if not predicted)
    tau_residual: np.ndarray  # Δτ̂ (zeros without NP or when not predicted)

    @property
    def torque(self) -> np.ndarray:
        """The predicted torques ``τ̂_P + Δτ̂``, ``(n, n_dof)``."""
        return self.tau_parametric + self.tau_residual

    def take(self, rows: list[int]) -> PreparedSamples:
        """The samples ``rows`` (in that order)."""
        if rows == list(range(self.q.shape[0])):
            return self
        index = np.asarray(rows, dtype=np.intp)
        return PreparedSamples(
            *(None if a is None else a[index] for a in (self.q, self.qd, self.qdd, self.x, self.columns,
                                                        self.tau_parametric, self.phi, self.tau_residual))
        )  # fmt: skip

    @classmethod
    def stack(cls, items: list[PreparedSamples]) -> PreparedSamples:
        """One block of the samples of ``items`` (prepared by the same model), in order.

        Raises:
            ValueError: no items.
        """
        if not items:
            raise ValueError("nothing to stack")
        if len(items) == 1:
            return items[0]

        def rows(name: str) -> np.ndarray | None:
            arrays = [getattr(p, name) for p in items]
            return None if any(a is None for a in arrays) else np.concatenate(arrays)

        stacked = {
            name: rows(name)
            for name in ("q", "qd", "qdd", "x", "columns", "tau_parametric", "phi", "tau_residual")
        }
        return cls(**stacked)


@dataclass(frozen=True)
class FrozenModel:
    """What a model predicted at one moment (:meth:`SemiparametricInverseDynamics.freeze`): P's
    parameters, the residual's weights and the upper Cholesky factor ``R`` of its information
    ``A = RᵀR``, copies that the model's later learning leaves alone (None: no such part)."""

    parameters: np.ndarray | None
    weights: np.ndarray | None
    factor: np.ndarray | None
    n_samples: int


@dataclass(frozen=True)
class StagedUpdate:
    """Drafts of both parts that learned a block (:meth:`SemiparametricInverseDynamics.stage`)."""

    parametric: RecursiveRLS | None
    residual: RecursiveRLS | None
    n_samples: int
    base_samples: int


class SemiparametricInverseDynamics(PersistentModel):
    """Online inverse-dynamics model of a URDF's joints: parametric, nonparametric or both.

    Args:
        urdf: URDF text (XML string). A path to an existing ``.urdf`` file is read for
            convenience; the model keeps (and saves) the text.
        joint_names: joints modelled, in the order of inputs and outputs (``None``: all
            1-DoF joints). Other joints are locked at zero (see ``RigidBodyRegressor``).
        mode: ``"semiparametric"``, ``"parametric"`` or ``"nonparametric"``.
        prior: ``"urdf"`` (learn the correction of the URDF's inertial parameters) or ``"zero"``;
            ``"model"`` is set by :meth:`continue_from` (another model's learned parameters; it
            starts like ``"urdf"``).
        n_features: ``D`` of the default random Fourier feature map.
        bandwidth: Gaussian kernel length-scale on the normalized inputs.
        lam_parametric, lam_residual: ridge ``λ`` of the P and NP engines.
        friction: friction terms of P (``"viscous"``, ``"coulomb"``, ``"offset"``); ``()`` for none.
            Ignored in nonparametric mode.
        coulomb_smoothing: ``v_s`` of the Coulomb term's ``tanh(q̇/v_s)`` [rad/s].
        lam_friction: ridge ``λ_f`` of the friction parameters (prior zero).
        forgetting: ``β ∈ (0, 1]`` per sample (1: none); P applies ``β^(1/n_dof)`` per regressor
            row, so both parts forget at the same rate in time. ``"auto"``: the residual runs
            candidate factors side by side and the prequentially best one serves
            (:class:`~lifelong_learning.learners.auto_forgetting.AutoForgettingRLS`); P does not
            forget then (its few parameters are the URDF's physics).
        feature_map: any FeatureMap to use instead of the default (its ``n_inputs`` must be
            ``3 n_dof`` in nonparametric mode, ``4 n_dof`` in semiparametric mode).
        acceleration_scale: ``q̈`` normalization (scalar or per joint); default 3 × velocity limit.
        residual_after_update: ``True`` (default): τ̂_P in the residual's target and input is taken
            **after** P's update on the same sample: the residuals then match the P that will be
            used at prediction time, which matters in P's transient. ``False``: the P before the
            update (the error P actually made). In a batch update, "after" means after P has
            taken the whole batch.
        seed: seed of the default feature map.

    Attributes:
        n_samples: samples learned from.
    """

    kind = "semiparametric_inverse_dynamics"
    #: 2: friction columns in P (version 1, without them, still loads)
    state_version = 2
    older_state_versions = (1,)

    def __init__(
        self,
        urdf: str,
        joint_names: list[str] | None = None,
        mode: str = "semiparametric",
        prior: str = "urdf",
        n_features: int = 500,
        bandwidth: float = 8.0,
        lam_parametric: float = 1e-2,
        lam_residual: float = 1e-1,
        friction: tuple[str, ...] = ("viscous", "coulomb"),
        coulomb_smoothing: float = 0.05,
        lam_friction: float = 1e-2,
        forgetting: float | str = 1.0,
        feature_map: FeatureMap | None = None,
        acceleration_scale: float | np.ndarray | None = None,
        residual_after_update: bool = True,
        seed: int = 0,
        _regressor: RigidBodyRegressor | None = None,
    ):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS}, got {prior!r}")
        auto = forgetting == "auto"
        if not auto and not (isinstance(forgetting, int | float) and 0.0 < forgetting <= 1.0):
            raise ValueError(f"forgetting must be in (0, 1] or 'auto', got {forgetting!r}")
        if isinstance(urdf, str) and "<robot" not in urdf and os.path.isfile(urdf):
            with open(urdf, encoding="utf-8") as f:
                urdf = f.read()
        self.regressor = _regressor if _regressor is not None else RigidBodyRegressor(urdf, joint_names)
        self._columns_text = f"joints {self.regressor.joint_names}"  # for input errors, built once
        self.mode = mode
        self.prior = prior
        self.forgetting: float | str = "auto" if auto else float(forgetting)
        self.residual_after_update = bool(residual_after_update)
        n = self.n_dof
        reg = self.regressor
        self.input_offset = np.concatenate([(reg.lower_limit + reg.upper_limit) / 2, np.zeros(2 * n)])
        acc = 3.0 * reg.velocity_limit if acceleration_scale is None else acceleration_scale
        acc = np.broadcast_to(np.asarray(acc, dtype=float), (n,))
        self.input_scale = np.concatenate([(reg.upper_limit - reg.lower_limit) / 2, reg.velocity_limit, acc])
        self.torque_scale = reg.effort_limit.copy()
        self._check_scales()
        self.friction: JointFriction | None = None
        self.friction_scale = 1.0
        if mode != "nonparametric" and friction:
            if not (np.isfinite(lam_friction) and lam_friction > 0):
                raise ValueError(f"lam_friction must be positive, got {lam_friction!r}")
            self.friction = JointFriction(n, tuple(friction), coulomb_smoothing)
            self.friction_scale = float(np.sqrt(lam_parametric / lam_friction))
        inertial = np.zeros(reg.n_base) if prior == "zero" else reg.base_parameters()
        self.prior_parameters = np.concatenate([inertial, np.zeros(self.n_friction)])
        self.parametric: RecursiveRLS | None = None
        self.residual: RecursiveRLS | AutoForgettingRLS | None = None
        self.feature_map: FeatureMap | None = None
        if mode != "nonparametric":
            beta = 1.0 if auto else float(forgetting) ** (1.0 / n)
            self.parametric = RecursiveRLS(
                reg.n_base + self.n_friction, 1, lam=lam_parametric, forgetting=beta
            )
        if mode != "parametric":
            n_in = self.residual_input_dim
            if feature_map is None:
                feature_map = RandomFourierFeatures(n_in, n_features, bandwidth=bandwidth, seed=seed)
            if feature_map.n_inputs != n_in:
                raise ValueError(f"feature map takes {feature_map.n_inputs} inputs; {mode} mode needs {n_in}")
            self.feature_map = feature_map
            self.residual = self._new_residual(feature_map.n_features, lam_residual)
        self.n_samples = 0

    def _new_residual(self, n_features: int, lam: float) -> RecursiveRLS | AutoForgettingRLS:
        if self.forgetting == "auto":
            return AutoForgettingRLS(n_features, self.n_dof, lam=lam)
        return RecursiveRLS(n_features, self.n_dof, lam=lam, forgetting=float(self.forgetting))

    # ------------------------------------------------------------------ properties
    @property
    def serving_forgetting(self) -> float:
        """The forgetting factor that serves: ``forgetting``, or the one ``"auto"`` chose now."""
        if isinstance(self.residual, AutoForgettingRLS):
            return self.residual.forgetting
        return 1.0 if self.forgetting == "auto" else float(self.forgetting)

    @property
    def n_dof(self) -> int:
        """Number of modelled joints."""
        return self.regressor.n_dof

    @property
    def joint_names(self) -> list[str]:
        """Modelled joints, in input/output order."""
        return list(self.regressor.joint_names)

    @property
    def residual_input_dim(self) -> int:
        """Inputs of the NP part: ``3 n_dof`` (NP) or ``4 n_dof`` (SP, with ``τ̂_P``)."""
        return (4 if self.mode == "semiparametric" else 3) * self.n_dof

    @property
    def n_friction(self) -> int:
        """Number of friction parameters ``θ`` in P (0 without friction)."""
        return 0 if self.friction is None else self.friction.n_parameters

    @property
    def parameters(self) -> np.ndarray | None:
        """P's current weights on :meth:`parametric_regressor`'s columns: ``[π_b, θ/√(λ_P/λ_f)]``
        (None without P)."""
        if self.parametric is None:
            return None
        return self.prior_parameters + self.parametric.weights[:, 0]

    @property
    def inertial_parameters(self) -> np.ndarray | None:
        """Current base inertial parameters ``π_b`` of P (None without P)."""
        p = self.parameters
        return None if p is None else p[: self.regressor.n_base]

    @property
    def friction_parameters(self) -> np.ndarray | None:
        """Current friction parameters ``θ`` (in :attr:`friction`'s order and units; None without)."""
        p = self.parameters
        if p is None or self.friction is None:
            return None
        return self.friction_scale * p[self.regressor.n_base :]

    def continue_from(self, other: SemiparametricInverseDynamics) -> None:
        """Continue ``other``'s parametric part, before the first update, so that a retrained model
        starts from what the serving model knows, including what it learned from data no longer on
        disk (``prior`` becomes ``"model"``):

        - with the same parametric columns (base parameters and friction terms), P takes over
          ``other``'s RLS state itself: its information ``A = YᵀY + λI`` and right-hand side, so
          ``other``'s samples weigh as much as new ones (samples learned by both count twice; a
          forgetting factor fades them);
        - otherwise ``other``'s learned parameters become the prior (base inertial parameters and
          the friction terms both models have), which the ridge shrinks towards.

        Raises:
            ValueError: after an update, no parametric part, or another robot or joint order.
        """
        if self.n_samples:
            raise ValueError("continue_from must be called before the first update")
        if self.parametric is None or other.parametric is None:
            raise ValueError("both models need a parametric part")
        mine, theirs = self.regressor, other.regressor
        if other.joint_names != self.joint_names or not np.array_equal(
            mine.independent_columns, theirs.independent_columns
        ):
            raise ValueError(f"the model to continue from has other joints or base parameters: {other!r}")
        self.prior = "model"
        same_friction = (self.friction is None and other.friction is None) or (
            self.friction is not None
            and other.friction is not None
            and self.friction.to_state()[0] == other.friction.to_state()[0]
            and self.friction_scale == other.friction_scale
        )
        if same_friction:
            meta, arrays = other.parametric.to_state()
            self.parametric = RecursiveRLS.from_state(
                {**meta, "forgetting": self.parametric.forgetting}, arrays
            )
            self.prior_parameters = other.prior_parameters.copy()
            return
        prior = np.zeros_like(self.prior_parameters)
        prior[: mine.n_base] = other.inertial_parameters
        if self.friction is not None and other.friction is not None:
            learned = dict(zip(other.friction.parameter_names, other.friction_parameters, strict=True))
            for k, name in enumerate(self.friction.parameter_names):
                prior[mine.n_base + k] = learned.get(name, 0.0) / self.friction_scale
        self.prior_parameters = prior

    def parametric_regressor(self, q: Any, qd: Any, qdd: Any) -> np.ndarray:
        """The columns P learns on, ``[Y_b, √(λ_P/λ_f) F(q̇)]``, shape ``(n, n_dof, len(parameters))``."""
        q, qd, qdd = self._check_inputs(q, qd, qdd, names=("q", "qd", "qdd"))
        return self._parametric_columns(q, qd, qdd)

    def _parametric_columns(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        Y = self.regressor.regressor(q, qd, qdd)
        if self.friction is None:
            return Y
        return np.concatenate([Y, self.friction_scale * self.friction.columns(qd)], axis=2)

    def _check_scales(self) -> None:
        for name in ("input_offset", "input_scale", "torque_scale"):
            a = getattr(self, name)
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{name} holds non-finite values")
        if np.any(self.input_scale <= 0) or np.any(self.torque_scale <= 0):
            raise ValueError("normalization scales must be positive")

    # ------------------------------------------------------------------ helpers
    def _check_inputs(self, *arrays: Any, names: tuple[str, ...]) -> list[np.ndarray]:
        """Each array as ``(n, n_dof)`` rows (1-D: one sample), finite, all with the same ``n``."""
        out = [
            as_rows(a, self.n_dof, name, self._columns_text) for a, name in zip(arrays, names, strict=True)
        ]
        same_rows(dict(zip(names, out, strict=True)))
        return out

    def normalized_state(self, q: Any, qd: Any, qdd: Any) -> np.ndarray:
        """``x̃ = ([q, q̇, q̈] − offset) / scale``, shape ``(n, 3 n_dof)`` (inputs validated)."""
        return self._normalized(*self._check_inputs(q, qd, qdd, names=("q", "qd", "qdd")))

    def _normalized(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        return (np.hstack([q, qd, qdd]) - self.input_offset) / self.input_scale

    def _parametric_predict(self, Y: np.ndarray, engine: RecursiveRLS | None = None) -> np.ndarray:
        engine = self.parametric if engine is None else engine
        assert engine is not None
        n, d, b = Y.shape
        flat = Y.reshape(n * d, b)
        pred = flat @ self.prior_parameters
        if engine.n_samples:
            pred = pred + engine.predict(flat)[:, 0]
        return pred.reshape(n, d)

    def _residual_inputs(self, x: np.ndarray, tau_p: np.ndarray | None) -> np.ndarray:
        if self.mode == "semiparametric":
            assert tau_p is not None
            return residual_features(x, tau_p, self.torque_scale)
        return x

    def residual_inputs(self, q: Any, qd: Any, qdd: Any) -> np.ndarray:
        """The inputs the NP part sees for these states with the current P: ``x̃`` (NP mode) or
        ``[x̃, τ̂_P/τ_max]`` (SP mode), shape ``(n, residual_input_dim)``. For an offline tuner
        that fits a feature map on them (then :meth:`replace_residual`)."""
        q, qd, qdd = self._check_inputs(q, qd, qdd, names=("q", "qd", "qdd"))
        tau_p = None
        if self.parametric is not None:
            tau_p = self._parametric_predict(self._parametric_columns(q, qd, qdd))
        return self._residual_inputs(self._normalized(q, qd, qdd), tau_p)

    def replace_residual(
        self, feature_map: FeatureMap, residual: RecursiveRLS | AutoForgettingRLS | None = None
    ) -> None:
        """Swap the NP part for ``feature_map`` (e.g. a tuned Nyström map) and ``residual`` (an RLS
        trained on its features; default: a fresh one with the current λ and forgetting).

        Raises:
            ValueError: no NP part in this mode, or sizes that do not fit.
        """
        if self.residual is None:
            raise ValueError("parametric mode has no residual part")
        if feature_map.n_inputs != self.residual_input_dim:
            raise ValueError(
                f"feature map takes {feature_map.n_inputs} inputs, expected {self.residual_input_dim}"
            )
        if residual is None:
            residual = self._new_residual(feature_map.n_features, self.residual.lam)
        if (residual.n_features, residual.n_outputs) != (feature_map.n_features, self.n_dof):
            raise ValueError("residual engine does not match the feature map and the joints")
        self.feature_map, self.residual = feature_map, residual

    # ------------------------------------------------------------------ answer, then learn
    def prepare(self, q: Any, qd: Any, qdd: Any, predict: bool = True) -> PreparedSamples:
        """Validate samples and compute once what both answering and learning need: the regressor
        columns of P (Pinocchio, the costly part), the normalized inputs, P's prediction and, with
        ``predict``, the residual's features and prediction (:attr:`PreparedSamples.torque`).

        The node answers with the prediction first and learns after (:meth:`stage` reuses the
        columns; the residual's features are computed again only when its input changed, that is
        with ``residual_after_update``: τ̂_P after P's update is part of the residual's input).

        Raises:
            ValueError: wrong shapes, NaN/Inf.
        """
        q, qd, qdd = self._check_inputs(q, qd, qdd, names=("q", "qd", "qdd"))
        x = self._normalized(q, qd, qdd)
        columns = None
        tau_p = np.zeros(q.shape)
        if self.parametric is not None:
            with np.errstate(over="ignore", invalid="ignore"):  # checked on the next line
                columns = self._parametric_columns(q, qd, qdd)
            _check_update_rows("parametric", columns)
            if predict or not self.residual_after_update:
                tau_p = self._parametric_predict(columns)
        phi = None
        tau_r = np.zeros(q.shape)
        if self.residual is not None and predict:
            assert self.feature_map is not None
            phi = self.feature_map.transform(self._residual_inputs(x, tau_p))
            tau_r = self.residual.predict(phi)
        return PreparedSamples(q, qd, qdd, x, columns, tau_p, phi, tau_r)

    def stage(self, prepared: PreparedSamples, tau: Any, solve_weights: bool = False) -> StagedUpdate:
        """Learn ``prepared`` samples with measured torques ``tau`` on drafts of both parts
        (:meth:`RecursiveRLS.draft`): the model itself is not changed (it may answer meanwhile);
        :meth:`commit` adopts the result. One staged update at a time.

        All or nothing: the drafts are only made when every row either part would learn is finite
        and below :data:`MAX_UPDATE_MAGNITUDE` (so that no product inside the Cholesky updates can
        overflow).

        ``solve_weights``: also solve both parts' weights on the drafts (O(d²c), where the update was
        O(d²) per row), so that the committed model answers with one product per part instead of
        two triangular solves per sample: for a learner on another thread than the answers.

        Raises:
            ValueError: wrong shapes, non-finite or absurd values; nothing is learned then.
        """
        (tau,) = self._check_inputs(tau, names=("tau",))
        if tau.shape != prepared.q.shape:
            raise ValueError(f"tau has {tau.shape[0]} rows for {prepared.q.shape[0]} samples")
        tau_p = None if self.parametric is None else prepared.tau_parametric
        parametric = residual = None
        if self.parametric is not None:
            Y = prepared.columns
            assert Y is not None
            flat = Y.reshape(-1, Y.shape[2])
            with np.errstate(over="ignore", invalid="ignore"):  # checked on the next line
                target = tau.reshape(-1) - flat @ self.prior_parameters
            _check_update_rows("parametric", flat, target)
            parametric = self.parametric.draft()
            parametric.update(flat, target[:, None])
            if self.residual_after_update:
                tau_p = self._parametric_predict(Y, parametric)
        if self.residual is not None:
            assert self.feature_map is not None
            phi = prepared.phi
            if phi is None or (self.parametric is not None and self.residual_after_update):
                phi = self.feature_map.transform(self._residual_inputs(prepared.x, tau_p))
            residual_target = tau if tau_p is None else tau - tau_p
            _check_update_rows("residual", phi, residual_target)
            residual = self.residual.draft()
            residual.update(phi, residual_target)
        if solve_weights:
            for draft in (parametric, residual):
                if draft is not None:
                    draft.weights  # noqa: B018 - solved and cached on the draft, adopted by commit
        return StagedUpdate(parametric, residual, prepared.q.shape[0], self.n_samples)

    def commit(self, staged: StagedUpdate) -> None:
        """Adopt an update made by :meth:`stage` of this model (O(1), plus the in-place sweep of the
        rows the drafts deferred, which cannot stop half-way).

        Raises:
            ValueError: ``staged`` was made before another update or reset of this model.
        """
        if staged.base_samples != self.n_samples:
            raise ValueError("the staged update was made before another update of the model")
        if staged.parametric is not None:
            if self.parametric is None:
                raise ValueError("the staged update is not of this model")
            self.parametric.commit(staged.parametric)
        if staged.residual is not None:
            if self.residual is None:
                raise ValueError("the staged update is not of this model")
            self.residual.commit(staged.residual)
        self.n_samples += staged.n_samples

    def update(self, q: Any, qd: Any, qdd: Any, tau: Any) -> None:
        """Learn from one sample (``(n_dof,)`` arrays) or a batch (``(n, n_dof)``): :meth:`prepare`,
        :meth:`stage` and :meth:`commit` in one step.

        Raises:
            ValueError: wrong shapes, non-finite or absurd values; nothing is learned then.
        """
        self.commit(self.stage(self.prepare(q, qd, qdd, predict=not self.residual_after_update), tau))

    def predict(
        self, q: Any, qd: Any, qdd: Any, return_parts: bool = False
    ) -> np.ndarray | dict[str, np.ndarray]:
        """Predicted torques ``(n, n_dof)`` (or ``(n_dof,)`` for one sample given as 1-D arrays).

        With ``return_parts``, a dict ``{"torque", "parametric", "residual"}`` (the parts
        are zeros when the mode has no such part).
        """
        single = np.ndim(q) == 1
        prepared = self.prepare(q, qd, qdd)
        parts = {
            "torque": prepared.torque,
            "parametric": prepared.tau_parametric,
            "residual": prepared.tau_residual,
        }
        if single:
            parts = {k: v[0] for k, v in parts.items()}
        return parts if return_parts else parts["torque"]

    def freeze(self) -> FrozenModel:
        """A frozen copy of what this model predicts now, for :meth:`predict_frozen` (a reference
        that must not learn what the model learns after: dynamics/slow_load.py). Costs a copy of
        the residual's ``d × d`` factor."""
        weights = factor = None
        if self.residual is not None:
            engine = self.residual.engine if isinstance(self.residual, AutoForgettingRLS) else self.residual
            weights, factor = engine.weights.copy(), engine.cholesky_factor
        parameters = None if self.parametric is None else self.parameters
        return FrozenModel(parameters, weights, factor, self.n_samples)

    def predict_frozen(
        self, frozen: FrozenModel, prepared: PreparedSamples
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The torques ``frozen`` (this model's :meth:`freeze`) predicts for samples this model
        prepared, ``(n, n_dof)``, and their leverage ``φᵀA⁻¹φ`` under the frozen residual's
        information ``A`` (``(n,)``; None without a residual part): how little of the data the
        frozen model learned covers each sample (large: it predicts there from its prior)."""
        tau_p = np.zeros(prepared.q.shape)
        if frozen.parameters is not None and prepared.columns is not None:
            n, d, b = prepared.columns.shape
            tau_p = (prepared.columns.reshape(n * d, b) @ frozen.parameters).reshape(n, d)
        if frozen.weights is None or frozen.factor is None or self.feature_map is None:
            return tau_p, None
        phi = self.feature_map.transform(self._residual_inputs(prepared.x, tau_p))
        v = solve_triangular(frozen.factor, phi.T, trans="T", lower=False, check_finite=False)
        return tau_p + phi @ frozen.weights, np.einsum("ij,ij->j", v, v)

    def nominal_torque(self, prepared: PreparedSamples) -> np.ndarray:
        """What the URDF's rigid-body model alone predicts for ``prepared`` samples, ``(n, n_dof)``:
        ``Y_b(q, q̇, q̈) π_urdf`` with the URDF's nominal base parameters, no friction, nothing
        learned (the baseline of the live metrics, docs/metrics.md). Reuses P's columns when the
        samples have them (one Pinocchio call per sample otherwise)."""
        nominal = getattr(self, "_nominal_parameters", None)
        if nominal is None:
            nominal = self._nominal_parameters = self.regressor.base_parameters()
        if prepared.columns is not None:
            Y = prepared.columns[..., : self.regressor.n_base]
        else:
            Y = self.regressor.regressor(prepared.q, prepared.qd, prepared.qdd)
        return Y @ nominal

    @property
    def nbytes(self) -> int:
        """Memory held by the learned state of both parts (RLS factors and right-hand sides) in bytes."""
        return sum(rls.nbytes for rls in (self.parametric, self.residual) if rls is not None)

    def fit_normalization(self, q: Any, qd: Any, qdd: Any, tau: Any | None = None) -> None:
        """Set input (and torque) normalization from data: means and standard deviations.

        Only allowed before any update (it changes the inputs the NP part has learned on).
        """
        if self.n_samples:
            raise ValueError("fit_normalization must be called before the first update")
        q, qd, qdd = self._check_inputs(q, qd, qdd, names=("q", "qd", "qdd"))
        X = np.hstack([q, qd, qdd])
        std = X.std(axis=0)
        self.input_offset = X.mean(axis=0)
        self.input_scale = np.where(std > 1e-9, std, 1.0)
        if tau is not None:
            (t,) = self._check_inputs(tau, names=("tau",))
            s = t.std(axis=0)
            self.torque_scale = np.where(s > 1e-9, s, 1.0)
        self._check_scales()

    def reset(self) -> None:
        """Forget every sample learned (keeps the URDF, hyperparameters and feature map)."""
        for rls in (self.parametric, self.residual):
            if rls is not None:
                rls.reset()
        self.n_samples = 0

    # ------------------------------------------------------------------ persistence
    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The URDF text (the file is self-contained), normalization, both parts' engines, the map."""
        reg_meta, reg_arrays = self.regressor.to_state()
        meta: dict[str, Any] = {
            "mode": self.mode,
            "prior": self.prior,
            "forgetting": self.forgetting,
            "residual_after_update": self.residual_after_update,
            "n_samples": self.n_samples,
            "regressor": reg_meta,
            "friction": None if self.friction is None else self.friction.to_state()[0],
            "friction_scale": self.friction_scale,
        }
        arrays = prefixed("regressor", reg_arrays)
        arrays.update(
            input_offset=self.input_offset.copy(),
            input_scale=self.input_scale.copy(),
            torque_scale=self.torque_scale.copy(),
            prior_parameters=self.prior_parameters.copy(),
        )
        if self.parametric is not None:
            m, a = self.parametric.to_state()
            meta["parametric"] = m
            arrays.update(prefixed("parametric", a))
        if self.residual is not None and self.feature_map is not None:
            m, a = self.residual.to_state()
            meta["residual"] = m
            arrays.update(prefixed("residual", a))
            store_feature_map(self.feature_map, meta, arrays)
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> SemiparametricInverseDynamics:
        """Rebuild a model from :meth:`to_state`; ValueError/KeyError/TypeError on bad content."""
        mode = meta["mode"]
        regressor = RigidBodyRegressor.from_state(meta["regressor"], unprefixed("regressor", arrays))
        fmap = None
        if mode != "parametric":
            fmap = restore_feature_map(meta, arrays)
            if fmap is None:
                raise ValueError(f"a {mode} model needs a feature map")
        friction = meta.get("friction")  # absent in state version 1: no friction columns
        model = cls(
            regressor.urdf,
            regressor.joint_names,
            mode=mode,
            prior=meta["prior"],
            forgetting="auto" if meta["forgetting"] == "auto" else float(meta["forgetting"]),
            feature_map=fmap,
            residual_after_update=bool(meta["residual_after_update"]),
            friction=() if friction is None else tuple(friction["terms"]),
            coulomb_smoothing=0.05 if friction is None else float(friction["smoothing_velocity"]),
            _regressor=regressor,
        )
        if friction is not None:
            model.friction_scale = float(meta["friction_scale"])
            if not (np.isfinite(model.friction_scale) and model.friction_scale > 0):
                raise ValueError("friction_scale must be positive")
        n = model.n_dof
        for name, size in (
            ("input_offset", 3 * n),
            ("input_scale", 3 * n),
            ("torque_scale", n),
            ("prior_parameters", regressor.n_base + model.n_friction),
        ):
            a = np.asarray(arrays[name], dtype=np.float64)
            if a.shape != (size,):
                raise ValueError(f"{name} has shape {a.shape}, expected ({size},)")
            setattr(model, name, a.copy())
        model._check_scales()
        if not np.all(np.isfinite(model.prior_parameters)):
            raise ValueError("prior_parameters holds non-finite values")
        if model.parametric is not None:
            p = RecursiveRLS.from_state(meta["parametric"], unprefixed("parametric", arrays))
            if (p.n_features, p.n_outputs) != (regressor.n_base + model.n_friction, 1):
                raise ValueError("parametric engine does not match the regressor")
            model.parametric = p
        if model.residual is not None:
            engine = AutoForgettingRLS if meta["residual"].get("auto_forgetting") else RecursiveRLS
            r = engine.from_state(meta["residual"], unprefixed("residual", arrays))
            if (r.n_features, r.n_outputs) != (model.residual.n_features, n):
                raise ValueError("residual engine does not match the feature map")
            model.residual = r
        model.n_samples = int(meta["n_samples"])
        return model

    def __repr__(self) -> str:
        d = self.feature_map.n_features if self.feature_map is not None else 0
        return (
            f"SemiparametricInverseDynamics(mode={self.mode!r}, joints={self.n_dof}, "
            f"base_parameters={self.regressor.n_base}, friction={self.n_friction}, features={d}, "
            f"n_samples={self.n_samples})"
        )


def select_hyperparameters(
    urdf: str,
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    tau: np.ndarray,
    joint_names: list[str] | None = None,
    bandwidths: tuple[float, ...] = (4.0, 8.0, 16.0),
    lams: tuple[float, ...] = (1e-2, 1e-1, 1.0),
    holdout_fraction: float = 0.2,
    **model_kwargs: Any,
) -> tuple[dict[str, float], dict[tuple[float, float], float]]:
    """Grid search of ``(bandwidth, lam_residual)`` on a hold-out split (last fraction of the
    samples, so time order is kept). Returns the best ``{"bandwidth", "lam_residual"}`` and
    every grid point's mean nMSE. The offline Nyström tuner replaces this properly."""
    n = np.asarray(q).shape[0]
    split = round(n * (1 - holdout_fraction))
    if not 0 < split < n:
        raise ValueError("holdout_fraction leaves no training or no validation samples")
    scores: dict[tuple[float, float], float] = {}
    for bw, lam in itertools.product(bandwidths, lams):
        m = SemiparametricInverseDynamics(urdf, joint_names, bandwidth=bw, lam_residual=lam, **model_kwargs)
        m.update(q[:split], qd[:split], qdd[:split], tau[:split])
        pred = m.predict(q[split:], qd[split:], qdd[split:])
        scores[(bw, lam)] = float(normalized_mse(tau[split:], pred).mean())
    best = min(scores, key=scores.__getitem__)
    return {"bandwidth": best[0], "lam_residual": best[1]}, scores
