"""The tasks' one table (retraining/job.py TASKS) and their implementations (pipeline.IMPLEMENTATIONS):
the same names, the kinds of model file the implementations write, and which run across processes."""

import pytest

from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.retraining.job import TASKS, TuningJob, job_options
from lifelong_learning.retraining.pipeline import IMPLEMENTATIONS


def test_every_task_has_its_implementation_and_its_learners_kind():
    assert list(IMPLEMENTATIONS) == list(TASKS)
    assert next(o for o in job_options() if o.name == "task").choices == tuple(TASKS)
    assert TASKS["classification"].kind == IncrementalRLSC.kind
    assert TASKS["inverse-dynamics"].kind == SemiparametricInverseDynamics.kind
    for name, info in TASKS.items():
        assert TuningJob(bags=["b"], task=name, out="m").model_kind() == info.kind


def test_only_the_tasks_that_say_so_run_across_processes():
    assert TASKS["classification"].distributed and not TASKS["inverse-dynamics"].distributed
    job = TuningJob(bags=["a", "b"], task="inverse-dynamics", out="m", objectives=["gcv"])
    with pytest.raises(ValueError, match=r"an inverse-dynamics job runs in one process \(its bags are"):
        job._validate_across(2)
    TuningJob(bags=["a", "b"], task="classification", out="m", objectives=["gcv"])._validate_across(2)
