"""Friction columns: the derivative of a known friction model, recovered from data by P, persisted."""

import numpy as np
import pytest

from lifelong_learning.core.model_file import load_model_file
from lifelong_learning.dynamics import JointFriction, SemiparametricInverseDynamics
from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_text


def known_friction(qd, viscous, coulomb, offset, v_s):
    """A friction model written independently of JointFriction: τ_j = b_j q̇_j + c_j tanh(q̇_j/v_s) + o_j."""
    return viscous * qd + coulomb * np.tanh(qd / v_s) + offset


def test_columns_are_the_finite_difference_derivative_of_a_known_model():
    rng = np.random.default_rng(0)
    qd = rng.normal(size=(6, 3)) * 0.2
    friction = JointFriction(3, ("viscous", "coulomb", "offset"), smoothing_velocity=0.07)
    theta = rng.uniform(0.1, 2.0, friction.n_parameters)
    F = friction.columns(qd)
    assert F.shape == (6, 3, 9)

    def tau(th):
        return known_friction(qd, th[0:3], th[3:6], th[6:9], 0.07)

    np.testing.assert_allclose(friction.torque(qd, theta), tau(theta), rtol=1e-12)
    h = 1e-6
    for k in range(theta.size):  # column k = ∂τ/∂θ_k, by central differences
        e = np.zeros_like(theta)
        e[k] = h
        np.testing.assert_allclose(F[:, :, k], (tau(theta + e) - tau(theta - e)) / (2 * h), atol=1e-8)
    assert friction.parameter_names[3] == "coulomb[0]"


def test_coulomb_smoothing_is_linear_at_rest_and_saturates():
    friction = JointFriction(1, ("coulomb",), smoothing_velocity=0.05)
    col = friction.columns(np.array([[0.0], [0.001], [0.05], [0.15], [-1.0]]))[:, 0, 0]
    assert col[0] == 0.0 and col[1] == pytest.approx(0.001 / 0.05, rel=1e-3)
    assert col[2] == pytest.approx(np.tanh(1.0)) and col[3] > 0.995 and col[4] == pytest.approx(-1.0)


@pytest.mark.parametrize("bad", [{"terms": ("stiction",)}, {"terms": ()}, {"smoothing_velocity": 0.0}])
def test_bad_configuration(bad):
    with pytest.raises(ValueError):
        JointFriction(2, **{"terms": ("viscous",), **bad})


def test_parametric_part_recovers_known_friction_and_inertia_and_persists(tmp_path):
    urdf = panda_urdf_text()
    rng = np.random.default_rng(1)
    m = SemiparametricInverseDynamics(
        urdf,
        JOINT_NAMES,
        mode="parametric",
        friction=("viscous", "coulomb", "offset"),
        lam_parametric=1e-9,
        lam_friction=1e-9,
    )
    reg = m.regressor
    n = 400
    q = rng.uniform(reg.lower_limit, reg.upper_limit, (n, 7))
    qd = rng.normal(size=(n, 7))
    qdd = rng.normal(size=(n, 7)) * 3
    viscous, coulomb, offset = rng.uniform(0.05, 0.5, 7), rng.uniform(0.1, 1.5, 7), rng.uniform(-0.3, 0.3, 7)
    tau = reg.rnea(q, qd, qdd) + known_friction(qd, viscous, coulomb, offset, m.friction.smoothing_velocity)
    m.update(q, qd, qdd, tau)
    np.testing.assert_allclose(m.friction_parameters, np.concatenate([viscous, coulomb, offset]), atol=1e-4)
    np.testing.assert_allclose(m.inertial_parameters, reg.base_parameters(), atol=1e-4)
    m.save(tmp_path / "p.llm")
    assert load_model_file(tmp_path / "p.llm").meta["state_version"] == 2
    back = SemiparametricInverseDynamics.load(tmp_path / "p.llm")
    np.testing.assert_array_equal(back.predict(q[:5], qd[:5], qdd[:5]), m.predict(q[:5], qd[:5], qdd[:5]))
    assert back.friction.terms == ("viscous", "coulomb", "offset")


def test_continue_from_takes_over_the_parametric_state_or_its_parameters_as_prior():
    urdf = panda_urdf_text()
    rng = np.random.default_rng(2)
    serving = SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode="parametric")
    reg = serving.regressor
    q = rng.uniform(reg.lower_limit, reg.upper_limit, (200, 7))
    qd, qdd = rng.normal(size=(200, 7)), rng.normal(size=(200, 7))
    tau = reg.rnea(q, qd, qdd) * 1.1 + known_friction(qd, 0.2, 0.5, 0.0, 0.05)
    serving.update(q, qd, qdd, tau)
    same = SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode="parametric")
    same.continue_from(serving)  # same columns: the RLS state itself
    assert same.prior == "model" and same.parametric.n_samples == serving.parametric.n_samples
    np.testing.assert_allclose(same.predict(q[:5], qd[:5], qdd[:5]), serving.predict(q[:5], qd[:5], qdd[:5]))
    other = SemiparametricInverseDynamics(
        urdf, JOINT_NAMES, mode="parametric", friction=("coulomb", "offset")
    )
    other.continue_from(serving)  # other columns: the learned parameters as prior, before any sample
    assert other.parametric.n_samples == 0
    np.testing.assert_allclose(other.inertial_parameters, serving.inertial_parameters)
    np.testing.assert_allclose(other.friction_parameters[:7], serving.friction_parameters[7:])  # coulomb
    np.testing.assert_array_equal(other.friction_parameters[7:], 0.0)  # offsets: the serving model had none
    with pytest.raises(ValueError, match="other joints"):
        SemiparametricInverseDynamics(urdf, list(reversed(JOINT_NAMES)), mode="parametric").continue_from(
            serving
        )
    with pytest.raises(ValueError, match="before the first update"):
        serving.continue_from(same)


def test_columns_refuse_velocities_of_another_width_or_nan():
    friction = JointFriction(3)
    with pytest.raises(ValueError, match="3 columns"):
        friction.columns(np.zeros((2, 6)))  # would have reshaped silently into 4 rows of 3 joints
    with pytest.raises(ValueError, match="NaN"):
        friction.columns([0.0, np.nan, 0.0])
