"""What a retraining task is to the job that runs it (:func:`~lifelong_learning.retraining.pipeline.run_job`).

A task reads its bags when it is made (the rows to tune on, the test split, the gate's held-out
data), then scores each tuned model on its test split, exports the chosen one, gates it against
the serving model and lets it learn the held-out rows. One module per task:
:mod:`~lifelong_learning.retraining.classification` (LabeledFeatures → IncrementalRLSC) and
:mod:`~lifelong_learning.retraining.inverse_dynamics` (JointState → SemiparametricInverseDynamics).

:data:`~lifelong_learning.retraining.job.TASKS` says what the job needs to know of each task before
any is loaded (the tasks load
torch and the learners; the job's declarations are read at every start of the CLI); the pipeline
maps the same names to the implementations (``pipeline.IMPLEMENTATIONS``). A new task: its module,
a row in that table and one in the pipeline's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from lifelong_learning.retraining.job import TuningJob
    from lifelong_learning.retraining.promotion import Decision


class Task(Protocol):
    """A task of a retraining job, its bags read (see the module docstring)."""

    @property
    def metric(self) -> str:
        """The name of :meth:`score`'s value (lower is better), for the report."""

    @property
    def samples_read(self) -> int:
        """Usable samples this process read from its bags."""

    @property
    def n_train(self) -> int:
        """Training samples (every process's), all of which the export learns."""

    @property
    def n_test(self) -> int:
        """Test samples (every process's): :meth:`score` measures on them; the export learns them too."""

    @property
    def X_tr(self) -> np.ndarray:  # noqa: N802 (the data's math name)
        """Inputs of the rows to tune on (this process's: a sample of the training rows)."""

    @property
    def Y_tr(self) -> np.ndarray:  # noqa: N802
        """Targets of the rows to tune on."""

    @property
    def groups(self) -> list[int] | None:
        """Where each recording starts among the rows to tune on (``holdout-bags``); None: none known."""

    @property
    def baselines(self) -> dict[str, float]:
        """Test metrics of reference models, by name (the report's baselines)."""

    @property
    def warnings(self) -> list[str]:
        """Bad input the task could still learn from, in words."""

    @property
    def skipped(self) -> dict[str, int]:
        """Samples left out (not learned, not scored), per reason."""

    def score(self, model: Any) -> tuple[float, dict[str, Any]]:
        """The test metric of the model exported with ``model``'s tuned map, and the choices made
        (added to the objective's report entry, passed back to :meth:`export`)."""

    def export(self, model: Any, choice: dict[str, Any], out: Path) -> None:
        """Write the model file ``out``: learned from every sample but the gate's held-out ones."""

    def promotion(self, out: Path, job: TuningJob) -> Decision:
        """The promotion gate: the model of ``out`` and the serving one on the held-out data."""

    def learn_held_out(self, out: Path) -> int:
        """After the gate: the model of ``out`` learns the bags' held-out samples; how many.
        Called after :meth:`export` (a RuntimeError otherwise, where the task replays its export)."""

    def close(self) -> None:
        """Delete the task's temporary files."""
