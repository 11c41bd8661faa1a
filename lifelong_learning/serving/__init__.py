"""The serving core of a learner node, without ROS: what a node does with its model.

- :mod:`~lifelong_learning.serving.core`: :class:`ServingCore`, the serving model under a lock,
  its atomic swap, hot reload, reset and rollback, models announced by path or received as bytes.
- :mod:`~lifelong_learning.serving.history`: :class:`ModelHistory`, the replaced models kept for
  rollback.
- :mod:`~lifelong_learning.serving.received`: models received as bytes: size and SHA-256 checks,
  safe file names, the latched re-delivery rule.
- :mod:`~lifelong_learning.serving.checkpoints`: :class:`Checkpoints`, written atomically,
  retried, restored (or moved aside) at start.
- :mod:`~lifelong_learning.serving.paths`: :class:`ModelDirectory`, request paths confined to the
  model directory.
- :mod:`~lifelong_learning.serving.shadow`: a model judged beside the serving one on the live
  stream (shadow before a swap, canary after it) and the drift alarm.
- :mod:`~lifelong_learning.serving.report`: :class:`Outcome`, :class:`RefusedError` and the
  :class:`Reporter` protocol through which the core logs and counts.

The ROS side is :class:`lifelong_learning.nodes.learner.LearnerNode`; the design is in
``docs/serving.md``.
"""

from lifelong_learning.serving.checkpoints import Checkpoints
from lifelong_learning.serving.core import ServingCore
from lifelong_learning.serving.history import ModelHistory
from lifelong_learning.serving.paths import ModelDirectory
from lifelong_learning.serving.received import DEFAULT_MAX_RECEIVED_MODEL_BYTES, received_file_name
from lifelong_learning.serving.report import (
    MALFORMED_MODEL_MESSAGE,
    RELOAD_FAILED,
    TOO_LARGE,
    LogReporter,
    Outcome,
    RefusedError,
    Reporter,
)

__all__ = [
    "DEFAULT_MAX_RECEIVED_MODEL_BYTES",
    "MALFORMED_MODEL_MESSAGE",
    "RELOAD_FAILED",
    "TOO_LARGE",
    "Checkpoints",
    "LogReporter",
    "ModelDirectory",
    "ModelHistory",
    "Outcome",
    "RefusedError",
    "Reporter",
    "ServingCore",
    "received_file_name",
]
