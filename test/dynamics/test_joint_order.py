"""JointPicker: the model's joints by name from a joint state's arrays, refusals by reason."""

import threading

import numpy as np
import pytest

from lifelong_learning.dynamics.guard import RefusedSampleError
from lifelong_learning.dynamics.joint_order import JointPicker

JOINTS = ["a", "b"]


def test_values_in_the_model_order_extra_joints_ignored():
    picker = JointPicker()
    q, qd, tau = picker.state(["gripper", "b", "a"], JOINTS, [9.0, 2.0, 1.0], [0.0, 0.2, 0.1], [])
    assert q.tolist() == [1.0, 2.0] and qd.tolist() == [0.1, 0.2] and tau is None
    assert picker.order(["gripper", "b", "a"], JOINTS).tolist() == [2, 1]
    assert picker.order(["a", "b"], JOINTS).tolist() == [0, 1]  # other names: a new index


@pytest.mark.parametrize(
    ("names", "position", "velocity", "effort", "reason"),
    [
        (["a", "a", "b"], [0, 0, 0], [0, 0, 0], [], "duplicate joint names"),
        (["a"], [0], [0], [], "missing joints"),
        (["a", "b"], [0, np.nan], [0, 0], [], "non-finite values"),
        (["a", "b"], [0, 0], [0, 0], [0, np.inf], "non-finite values"),
        (["a", "b"], [0, 0], [0], [], "array lengths"),
    ],
)
def test_refusals_carry_their_reason(names, position, velocity, effort, reason):
    with pytest.raises(RefusedSampleError) as info:
        JointPicker().state(names, JOINTS, position, velocity, effort)
    assert info.value.reason == reason


def test_pick_raises_what_a_request_answers_with():
    picker = JointPicker()
    with pytest.raises(KeyError, match="missing"):
        picker.pick(["a"], JOINTS, [0.0], "position")
    with pytest.raises(ValueError, match="position has 1 values for 2 names"):
        picker.pick(["a", "b"], JOINTS, [0.0], "position")


def test_two_threads_alternating_get_the_index_of_their_own_names():
    """A multi-threaded executor answers from several threads with one picker. Here the other
    thread, with the other name order, runs at the worst moment: while this one compares its names
    with the cached ones (a thread switch there). Each must get the index of its own names, never
    the other's (torques in the wrong joint order)."""
    picker = JointPicker()
    assert picker.order(["a", "b"], JOINTS).tolist() == [0, 1]  # cached: a, b
    others: list[list[int]] = []
    other = threading.Thread(target=lambda: others.append(picker.order(["b", "a"], JOINTS).tolist()))

    class Name(str):
        __hash__ = str.__hash__

        def __eq__(self, name: object) -> bool:  # the cache check: the other thread runs now
            if not others and not other.is_alive():
                other.start()
                other.join(10)
            return str.__eq__(self, name)

    assert picker.order([Name("a"), Name("b")], JOINTS).tolist() == [0, 1]
    assert others == [[1, 0]]
    assert picker.order(["a", "b"], JOINTS).tolist() == [0, 1]
    assert picker.order(["b", "a"], JOINTS).tolist() == [1, 0]
