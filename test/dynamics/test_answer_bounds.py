"""Answers of inverse dynamics bounded as KTR³ bounds its predictor (dynamics/truncation.py): the
residual's prediction to the range of the residual targets it learned, the torque to the widened
effort limits, the answer still the sum of its parts, each clip counted; a bounded answer is never
further from a target within those bounds."""

import numpy as np
from conftest import offset_dynamics_model

from lifelong_learning.dynamics import SemiparametricInverseDynamics
from lifelong_learning.dynamics.truncation import AnswerBounds, bounded_residual
from lifelong_learning.sim.panda import JOINT_NAMES, panda_urdf_text


def test_the_residual_is_bounded_to_its_targets_range_and_the_torque_to_the_effort_limits():
    model, log, qdd = offset_dynamics_model()
    low, high = model.residual.target_range()
    assert np.all(low > 0)  # the offset torques
    far = (log["q"][:1] + 0.3, log["qd"][:1] * 0.0, qdd[:1] * 0.0)  # a state far from every learned one
    parts = model.predict(*far, return_parts=True)
    assert parts["residual"][0, 0] < low[0]  # the Gaussian map's prediction falls away from the data
    counts = AnswerBounds()
    wide = 100.0  # effort limits widened out of the way: the offset torques pass them
    residual = bounded_residual(model, parts["parametric"], parts["residual"], counts, margin=wide)
    assert residual[0, 0] == low[0] and np.all((residual >= low) & (residual <= high))
    assert counts.residual >= 1 and counts.effort == 0
    # the torque: within the effort limits, still the sum of the parts
    limit = model.regressor.effort_limit
    huge = np.full((1, 7), 10.0) * limit
    out = bounded_residual(model, huge, np.zeros((1, 7)), counts, margin=0.5)
    np.testing.assert_allclose(huge + out, 1.5 * limit[None, :] * np.sign(huge))
    assert counts.effort == 7


def test_a_bounded_answer_is_never_further_from_a_target_within_the_bounds():
    """The KTR³ argument: clipping towards an interval containing the target never increases the error."""
    model, log, qdd = offset_dynamics_model()
    rng = np.random.default_rng(3)
    states = (log["q"][:20] + rng.normal(scale=0.5, size=(20, 7)), log["qd"][:20], qdd[:20])
    parts = model.predict(*states, return_parts=True)
    counts = AnswerBounds()
    residual = bounded_residual(model, parts["parametric"], parts["residual"], counts, margin=100.0)
    bounded = parts["parametric"] + residual
    low, high = model.residual.target_range()
    targets = parts["parametric"] + rng.uniform(low, high, size=(20, 7))
    assert np.all(np.abs(bounded - targets) <= np.abs(parts["torque"] - targets) + 1e-12)
    assert counts.residual > 0


def test_bounds_that_are_off_or_unknown_change_nothing():
    model, log, qdd = offset_dynamics_model()
    parts = model.predict(log["q"][:3] + 0.3, log["qd"][:3], qdd[:3], return_parts=True)
    off = AnswerBounds(enabled=False)
    assert off.parts(model, parts) is parts and off.diagnostics() == {}
    fresh = SemiparametricInverseDynamics(panda_urdf_text(), JOINT_NAMES, n_features=20)  # learned nothing
    counts = AnswerBounds()
    small = np.zeros((1, 7))
    assert np.array_equal(bounded_residual(fresh, small, small + 0.1, counts), small + 0.1)
    assert (counts.residual, counts.effort) == (0, 0)
