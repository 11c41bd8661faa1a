"""Fixtures of the retraining tests: :func:`make_job`, a small TuningJob in the test's directory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lifelong_learning.retraining.job import TuningJob

MakeJob = Callable[..., TuningJob]


def tuning_job(
    directory: Path, *bags: str, task: str = "inverse-dynamics", out: str = "m.llm", **fields: Any
) -> TuningJob:
    """A TuningJob of the ``bags`` (names under ``directory``) that writes ``directory / out``, on
    the CPU. An inverse-dynamics job (the default task) takes the simulated Panda's URDF unless it
    names a URDF or a model to continue from; every other field is the job's default unless given."""
    fields.setdefault("device", "cpu")
    if task == "inverse-dynamics" and "urdf" not in fields and "init" not in fields:
        from lifelong_learning.sim.panda import panda_urdf_path

        fields["urdf"] = panda_urdf_path()
    return TuningJob(bags=[str(directory / b) for b in bags], task=task, out=str(directory / out), **fields)


@pytest.fixture
def make_job(tmp_path: Path) -> MakeJob:
    """:func:`tuning_job` in the test's ``tmp_path``: ``make_job("bag", centers=30, epochs=5)``."""

    def make(*bags: str, **fields: Any) -> TuningJob:
        return tuning_job(tmp_path, *bags, **fields)

    return make
