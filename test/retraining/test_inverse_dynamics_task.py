"""The inverse-dynamics task (retraining/inverse_dynamics.py): what its jobs do end to end is in
test_pipeline.py; here, its call order."""

from types import SimpleNamespace

import pytest

from lifelong_learning.retraining.inverse_dynamics import InverseDynamics


@pytest.mark.parametrize("n_gate", [0, 5])
def test_learning_the_held_out_rows_before_the_export_is_an_error(tmp_path, n_gate):
    """learn_held_out replays the exported model: called before export() there is none, whether
    or not rows were held out (it returned 0 without a word when none were)."""
    task = InverseDynamics.__new__(InverseDynamics)  # its bags unread: only the call order matters
    task._exported, task.fit = None, SimpleNamespace(n_gate=n_gate)
    with pytest.raises(RuntimeError, match=r"learn_held_out\(\) before export\(\)"):
        task.learn_held_out(tmp_path / "m.llm")
