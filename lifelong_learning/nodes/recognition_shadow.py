"""Shadow evaluation, canary and drift alarm of the ``object_recognition`` node: its ops for
:class:`~lifelong_learning.nodes.shadow.ShadowMonitor` (same parameters, topics, events and
diagnostics as ``inverse_dynamics``; ``docs/serving.md#shadow-evaluation-canary-and-drift-alarm``).

Each taught sample (``labeled_features``, accepted by the node's gate) is predicted by the serving
model before it learns it (the node's prequential score, ``~/learning_metrics``) and, right after the
serving model learned it, by the model in the trial, which then learns it too
(:meth:`RecognitionOps.predict`, :meth:`RecognitionOps.learn`); both are scored by the error rate
over the trial's samples (:class:`~lifelong_learning.serving.shadow.ClassificationScores`). A model
in a trial that knows no class predicts ``""`` (an error); one that cannot take the sample (another
feature size, scores NaN/Inf, a label beyond ``max_classes``) raises: the trial fails at once with the
reason (counted ``model in shadow failed``), the serving model untouched.
"""

from __future__ import annotations

import numpy as np

from lifelong_learning.learners.recognition_gate import RecognitionGate
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.serving.shadow import ClassificationScores

#: the drift alarm's reference is at least this error rate: a classifier often makes no mistake in a
#: window, and a reference of 0 would raise the alarm at the first mistake (with drift_factor 3, an
#: error rate above 6 % for drift_window_s raises it then)
DRIFT_FLOOR = 0.02


class RecognitionOps:
    """``predict``, ``learn`` and ``scores`` of an :class:`IncrementalRLSC` in a trial."""

    drift_floor = DRIFT_FLOOR

    def __init__(self, gate: RecognitionGate) -> None:
        self.gate = gate

    @staticmethod
    def scores(model: IncrementalRLSC) -> ClassificationScores:
        return ClassificationScores()

    @staticmethod
    def predict(model: IncrementalRLSC, x: np.ndarray) -> str:
        """The class ``model`` gives ``x`` (``""`` when it knows none); ValueError when it cannot."""
        if len(model.classes_) == 0:
            return ""
        scores = np.asarray(model.decision_function(x)[0], dtype=np.float64)
        if not np.all(np.isfinite(scores)):
            raise ValueError("scores NaN or Inf")
        return str(model.classes_[int(np.argmax(scores))])

    def learn(self, model: IncrementalRLSC, x: np.ndarray, label: str) -> None:
        """Learn ``x`` as ``label`` unless the node's class rule refuses it for this model."""
        refusal = self.gate.check_label(label, model)
        if refusal is not None:
            raise ValueError(f"{refusal.reason}: {refusal.detail}")
        model.partial_fit(x, [label])
