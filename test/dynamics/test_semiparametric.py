"""Semiparametric inverse dynamics: RLS algebra, identification, simulated data, persistence."""

import numpy as np
import pinocchio as pin
import pytest

from lifelong_learning.core.metrics import normalized_mse
from lifelong_learning.core.model_file import ModelFileError, load_model_file, save_model_file
from lifelong_learning.dynamics.semiparametric import (
    SemiparametricInverseDynamics,
    select_hyperparameters,
)
from lifelong_learning.learners.random_features import RandomFourierFeatures
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_text


@pytest.fixture(scope="module")
def urdf():
    return panda_urdf_text()


@pytest.fixture(scope="module")
def sim_logs():
    sim = PandaSimulation()
    return sim.run(30.0, seed=1, log_every=5), sim.run(10.0, seed=2, log_every=5)


def _states(model, n, seed=0):
    rng = np.random.default_rng(seed)
    reg = model.regressor
    return (
        rng.uniform(reg.lower_limit, reg.upper_limit, (n, model.n_dof)),
        rng.standard_normal((n, model.n_dof)),
        rng.standard_normal((n, model.n_dof)) * 3,
    )


def _weighted_ridge(Z, U, weights, lam_reg):
    A = (Z * weights[:, None]).T @ Z + lam_reg * np.eye(Z.shape[1])
    return np.linalg.solve(A, (Z * weights[:, None]).T @ U)


@pytest.mark.parametrize("mode", ["parametric", "nonparametric", "semiparametric"])
def test_forgetting_equals_weighted_batch_ridge(urdf, mode):
    beta, lam = 0.97, 0.5
    m = SemiparametricInverseDynamics(
        urdf, JOINT_NAMES, mode=mode, n_features=60, forgetting=beta, lam_parametric=lam, lam_residual=lam
    )
    q, qd, qdd = _states(m, 40)
    tau = m.regressor.rnea(q, qd, qdd) + np.random.default_rng(1).standard_normal(q.shape)
    for i in range(20):  # one by one, then a batch: the engine state is the same algebra
        m.update(q[i], qd[i], qdd[i], tau[i])
    m.update(q[20:], qd[20:], qdd[20:], tau[20:])
    n_samples = q.shape[0]
    if m.parametric is not None:
        Y = m.parametric_regressor(q, qd, qdd).reshape(-1, m.parameters.size)  # Y_b and friction
        target = tau.reshape(-1) - Y @ m.prior_parameters
        n_rows = Y.shape[0]
        b_row = beta ** (1 / m.n_dof)
        w = b_row ** np.arange(n_rows - 1, -1, -1)
        delta = _weighted_ridge(Y, target[:, None], w, lam * b_row**n_rows)[:, 0]
        np.testing.assert_allclose(
            m.parameters - m.prior_parameters, delta, rtol=1e-8, atol=1e-8 * np.abs(delta).max()
        )
    if mode == "nonparametric":
        phi = m.feature_map.transform(m.normalized_state(q, qd, qdd))
        w = beta ** np.arange(n_samples - 1, -1, -1)
        W = _weighted_ridge(phi, tau, w, lam * beta**n_samples)
        np.testing.assert_allclose(m.residual.weights, W, rtol=1e-8, atol=1e-8 * np.abs(W).max())


def test_parametric_recovers_true_rigid_body_torques(urdf):
    model = SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode="parametric", lam_parametric=1e-8)
    zero_prior = SemiparametricInverseDynamics(
        urdf, JOINT_NAMES, mode="parametric", prior="zero", lam_parametric=1e-8
    )
    # the "true robot": the URDF with every body's inertial parameters scaled, simulated by RNEA
    true = SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode="parametric").regressor
    rng = np.random.default_rng(7)
    for i in range(1, true.model.njoints):
        p = true.model.inertias[i].toDynamicParameters()
        true.model.inertias[i] = pin.Inertia.FromDynamicParameters(p * rng.uniform(0.7, 1.4))
    q, qd, qdd = _states(model, 300)
    tau = true.rnea(q, qd, qdd)
    model.update(q, qd, qdd, tau)
    zero_prior.update(q, qd, qdd, tau)
    qt, qdt, qddt = _states(model, 50, seed=9)
    truth = true.rnea(qt, qdt, qddt)
    for m in (model, zero_prior):
        np.testing.assert_allclose(
            m.predict(qt, qdt, qddt), truth, rtol=1e-5, atol=1e-5 * np.abs(truth).max()
        )
    assert np.abs(model.regressor.rnea(qt, qdt, qddt) - truth).max() > 1.0  # the URDF alone is off


def test_semiparametric_improves_on_parametric_on_simulated_panda(urdf, sim_logs):
    """The thesis' setting: a rigid-body P (no friction terms) misses the plant's friction; SP learns it."""
    train, test = sim_logs
    scores = {}
    for mode in ("parametric", "semiparametric"):
        m = SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode=mode, n_features=300, friction=())
        m.update(train["q"], train["qd"], train["qdd"], train["tau"])
        scores[mode] = normalized_mse(test["tau"], m.predict(test["q"], test["qd"], test["qdd"]))
    assert scores["semiparametric"].mean() < 0.8 * scores["parametric"].mean()


def test_friction_columns_make_the_parametric_model_fit_a_plant_with_friction(urdf, sim_logs):
    """The simulated Panda has viscous damping and Coulomb friction: P with friction terms fits a new
    trajectory far better than the rigid-body P, and learns positive viscous and Coulomb parameters."""
    train, test = sim_logs
    scores, models = {}, {}
    for friction in ((), ("viscous", "coulomb")):
        m = SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode="parametric", friction=friction)
        m.update(train["q"], train["qd"], train["qdd"], train["tau"])
        scores[friction] = normalized_mse(test["tau"], m.predict(test["q"], test["qd"], test["qdd"])).mean()
        models[friction] = m
    assert scores[("viscous", "coulomb")] < 0.2 * scores[()]
    theta = models[("viscous", "coulomb")].friction_parameters
    assert theta.shape == (14,) and np.median(theta) > 0


def test_joint_names_in_any_order(urdf):
    perm = [6, 2, 0, 4, 1, 5, 3]
    a = SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode="semiparametric", n_features=40, seed=3)
    b = SemiparametricInverseDynamics(urdf, [JOINT_NAMES[i] for i in perm], mode="parametric")
    ap = SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode="parametric")
    q, qd, qdd = _states(a, 30)
    tau = a.regressor.rnea(q, qd, qdd) * 1.1
    ap.update(q, qd, qdd, tau)
    b.update(q[:, perm], qd[:, perm], qdd[:, perm], tau[:, perm])
    np.testing.assert_allclose(
        b.predict(q[:, perm], qd[:, perm], qdd[:, perm]),
        ap.predict(q, qd, qdd)[:, perm],
        rtol=1e-7,
        atol=1e-7,
    )
    assert b.joint_names == [JOINT_NAMES[i] for i in perm]


def test_bad_input_rejected_with_state_unchanged(urdf):
    m = SemiparametricInverseDynamics(urdf, JOINT_NAMES, n_features=30)
    q, qd, qdd = _states(m, 5)
    tau = m.regressor.rnea(q, qd, qdd)
    m.update(q, qd, qdd, tau)
    before = m.to_model_file()
    bad_tau = tau.copy()
    bad_tau[2, 3] = np.nan
    for args in (
        (q, qd, qdd, bad_tau),
        (q[:, :6], qd[:, :6], qdd[:, :6], tau[:, :6]),
        (q, qd, qdd[:4], tau),
        (q, qd, qdd, np.full_like(tau, np.inf)),
    ):
        with pytest.raises(ValueError):
            m.update(*args)
    after = m.to_model_file()
    assert after.meta == before.meta
    for k, v in before.arrays.items():
        np.testing.assert_array_equal(after.arrays[k], v)
    with pytest.raises(ValueError):
        m.predict(q[:, :3], qd, qdd)
    with pytest.raises(ValueError):
        SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode="neither")
    with pytest.raises(ValueError):  # NP input is 4 × 7 in semiparametric mode
        SemiparametricInverseDynamics(urdf, JOINT_NAMES, feature_map=RandomFourierFeatures(21, 10))


def _assert_same_state(before, model):
    after = model.to_model_file()
    assert after.meta == before.meta
    assert after.arrays.keys() == before.arrays.keys()
    for k, v in before.arrays.items():
        np.testing.assert_array_equal(after.arrays[k], v)


def test_finite_but_absurd_sample_changes_nothing(urdf):
    """A velocity of 1e300 is finite, but its square overflows inside the
    parametric rows; the update refuses it before either part changes."""
    m = SemiparametricInverseDynamics(urdf, JOINT_NAMES, n_features=30)
    q, qd, qdd = _states(m, 5)
    m.update(q, qd, qdd, m.regressor.rnea(q, qd, qdd))
    before = m.to_model_file()
    glitch = qd[0].copy()
    glitch[1] = 1e300
    with pytest.raises(ValueError, match="absurd"):
        m.update(q[0], glitch, qdd[0], np.zeros(7))
    _assert_same_state(before, m)
    m.update(q[1], qd[1], qdd[1], np.zeros(7))  # and it keeps learning
    assert m.n_samples == 6


def test_residual_failure_after_the_parametric_update_restores_the_parametric_part(urdf, monkeypatch):
    m = SemiparametricInverseDynamics(urdf, JOINT_NAMES, n_features=30)
    q, qd, qdd = _states(m, 5)
    tau = m.regressor.rnea(q, qd, qdd)
    m.update(q, qd, qdd, tau)
    before = m.to_model_file()
    monkeypatch.setattr(m.feature_map, "transform", lambda x: np.full((x.shape[0], 30), np.inf))
    with pytest.raises(ValueError, match="residual"):
        m.update(q, qd, qdd, tau + 1.0)
    monkeypatch.undo()
    _assert_same_state(before, m)
    np.testing.assert_array_equal(
        m.predict(q, qd, qdd), SemiparametricInverseDynamics.from_model_file(before).predict(q, qd, qdd)
    )


@pytest.mark.parametrize(
    "mode, forgetting",
    [("parametric", 0.999), ("nonparametric", 0.999), ("semiparametric", 0.999), ("semiparametric", "auto")],
)
def test_save_load_identical_predictions(urdf, tmp_path, mode, forgetting):
    m = SemiparametricInverseDynamics(urdf, JOINT_NAMES, mode=mode, n_features=50, forgetting=forgetting)
    q, qd, qdd = _states(m, 20)
    m.update(q, qd, qdd, m.regressor.rnea(q, qd, qdd) + 0.3)
    path = tmp_path / "model.npz"
    m.save(path)
    back = SemiparametricInverseDynamics.load(path)
    np.testing.assert_array_equal(back.predict(q, qd, qdd), m.predict(q, qd, qdd))
    assert back.joint_names == m.joint_names and back.n_samples == 20
    # the file holds the URDF text: it is self-contained
    assert "<robot" in load_model_file(path).meta["regressor"]["urdf"]
    # learning continues identically after loading
    m.update(q[:3], qd[:3], qdd[:3], np.ones((3, 7)))
    back.update(q[:3], qd[:3], qdd[:3], np.ones((3, 7)))
    np.testing.assert_allclose(back.predict(q, qd, qdd), m.predict(q, qd, qdd), rtol=1e-12, atol=1e-12)


def test_an_auto_model_of_the_first_format_loads_with_its_serving_engine(urdf):
    """A model file written when ``auto`` kept a full engine per candidate (``residual/c<k>.``) loads: the
    serving candidate's engine serves, the proxies start from the leading blocks of the others'."""
    m = SemiparametricInverseDynamics(urdf, JOINT_NAMES, n_features=50, forgetting="auto")
    q, qd, qdd = _states(m, 30)
    m.update(q, qd, qdd, m.regressor.rnea(q, qd, qdd) + 0.3)
    meta, arrays = m.to_state()
    engine_meta, engine_arrays = m.residual.engine.to_state()
    candidates = list(m.residual.candidates)
    meta["residual"] = {
        "auto_forgetting": True,
        **{k: meta["residual"][k] for k in ("candidates", "window", "switch_margin", "switches")},
        "serving": 0,
        "engines": [{**engine_meta, "forgetting": b} for b in candidates],
    }
    arrays = {k: v for k, v in arrays.items() if not k.startswith("residual/")}
    for k in range(len(candidates)):
        arrays.update({f"residual/c{k}.{name}": value for name, value in engine_arrays.items()})
    back = SemiparametricInverseDynamics.from_state(meta, arrays)
    assert back.serving_forgetting == 1.0 and back.residual.proxy_features == 50
    np.testing.assert_array_equal(back.predict(q, qd, qdd), m.predict(q, qd, qdd))
    back.update(q[:3], qd[:3], qdd[:3], np.ones((3, 7)))  # learns on


def test_load_rejects_bad_content(urdf, tmp_path):
    m = SemiparametricInverseDynamics(urdf, JOINT_NAMES, n_features=20)
    mf = m.to_model_file()
    mf.arrays["input_scale"] = mf.arrays["input_scale"][:5]
    save_model_file(tmp_path / "a.npz", mf)
    with pytest.raises(ModelFileError):
        SemiparametricInverseDynamics.load(tmp_path / "a.npz")
    mf = m.to_model_file()
    mf.meta["regressor"]["urdf"] = "<robot name='x'><link name='a'/><broken"
    save_model_file(tmp_path / "b.npz", mf)
    with pytest.raises(ModelFileError):
        SemiparametricInverseDynamics.load(tmp_path / "b.npz")
    (tmp_path / "c.npz").write_bytes(b"garbage")
    with pytest.raises(ModelFileError):
        SemiparametricInverseDynamics.load(tmp_path / "c.npz")


def test_hold_out_grid_returns_a_grid_point(urdf, sim_logs):
    train, _ = sim_logs
    sl = slice(0, 600)
    best, scores = select_hyperparameters(
        urdf,
        train["q"][sl],
        train["qd"][sl],
        train["qdd"][sl],
        train["tau"][sl],
        JOINT_NAMES,
        bandwidths=(2.0, 8.0),
        lams=(0.1,),
        n_features=50,
    )
    assert (best["bandwidth"], best["lam_residual"]) in scores and len(scores) == 2
    assert scores[(best["bandwidth"], best["lam_residual"])] == min(scores.values())


def test_residual_can_be_replaced_by_another_feature_map(urdf):
    m = SemiparametricInverseDynamics(urdf, JOINT_NAMES, n_features=30)
    q, qd, qdd = _states(m, 40)
    tau = m.regressor.rnea(q, qd, qdd) + 0.5
    m.update(q, qd, qdd, tau)
    inputs = m.residual_inputs(q, qd, qdd)
    assert inputs.shape == (40, 28)
    other = RandomFourierFeatures(28, 80, bandwidth=3.0, seed=9)
    m.replace_residual(other)
    assert m.residual.n_features == 80 and m.feature_map is other
    m.update(q, qd, qdd, tau)
    parts = m.predict(q, qd, qdd, return_parts=True)
    np.testing.assert_allclose(parts["torque"], parts["parametric"] + parts["residual"])
    with pytest.raises(ValueError):
        m.replace_residual(RandomFourierFeatures(21, 10))


def test_nominal_torque_is_the_urdf_alone_whatever_was_learned():
    """The baseline of the live metrics: the URDF's nominal rigid-body model, in every mode, after
    learning too (docs/metrics.md)."""
    from lifelong_learning.sim.panda import panda_urdf_path

    log = PandaSimulation().run(0.2, seed=3)
    q, qd, qdd, tau = (log[k][::10] for k in ("q", "qd", "qdd", "tau"))
    urdf_alone = SemiparametricInverseDynamics(panda_urdf_path(), JOINT_NAMES, mode="parametric", friction=())
    want = urdf_alone.predict(q, qd, qdd)
    for mode in ("semiparametric", "parametric", "nonparametric"):
        model = SemiparametricInverseDynamics(panda_urdf_path(), JOINT_NAMES, mode=mode, n_features=20)
        model.update(q, qd, qdd, tau)
        prepared = model.prepare(q, qd, qdd)
        np.testing.assert_allclose(model.nominal_torque(prepared), want, rtol=1e-9, atol=1e-9)
        assert not np.allclose(prepared.torque, want)  # what it learned is not in the baseline


def test_forgetting_auto_chooses_the_residual_factor_on_the_stream(urdf):
    """``forgetting="auto"``: P does not forget, the residual's candidates are raced on proxies beside the
    one serving engine and the factor that serves is reported (the learning metrics publish it), and is
    the serving engine's; bad values are refused."""
    m = SemiparametricInverseDynamics(urdf, JOINT_NAMES, n_features=30, forgetting="auto")
    assert m.parametric.forgetting == 1.0 and m.serving_forgetting == 1.0
    assert len(m.residual.proxies) == 5 and m.residual.engine.n_features == 30
    q, qd, qdd = _states(m, 60)
    tau = m.regressor.rnea(q, qd, qdd) + 0.3
    for k in range(0, 60, 6):
        m.update(q[k : k + 6], qd[k : k + 6], qdd[k : k + 6], tau[k : k + 6])
    assert m.serving_forgetting in m.residual.candidates and m.residual.n_samples == 60
    assert m.residual.engine.forgetting == m.serving_forgetting
    assert SemiparametricInverseDynamics(urdf, JOINT_NAMES, forgetting=0.999).serving_forgetting == 0.999
    for bad in ("fast", 0.0, 1.5):
        with pytest.raises(ValueError):
            SemiparametricInverseDynamics(urdf, JOINT_NAMES, forgetting=bad)
