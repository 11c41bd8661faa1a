"""``~/learning_metrics`` of a learner node: the live prequential error, published on a timer.

The numerics are ROS-free (:mod:`lifelong_learning.core.prequential`,
:mod:`lifelong_learning.learners.batch_objective`); this module holds the accumulator of a node under
a lock of its own (the learning path adds, the timer reports: neither waits for the model lock), the
two parameters every learner node has, the conversion of a
:class:`~lifelong_learning.core.prequential.PrequentialReport` into a
``lifelong_learning/LearningMetrics`` message, and the batch objective of the serving model beside it,
computed when the timer reports and kept until the model learns again (docs/metrics.md).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from lifelong_learning.core.prequential import UNDEFINED, PrequentialReport
from lifelong_learning.learners.batch_objective import BatchObjective, model_objective
from lifelong_learning.msg import LearningMetrics
from lifelong_learning.nodes.base import ParamSpec

METRICS_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "metrics_period_s",
        1.0,
        "Seconds between lifelong_learning/LearningMetrics messages on ~/learning_metrics: the "
        "prequential error (each sample predicted before it is learned) over metrics_window_s; "
        "0 = off (settable at run time).",
        bounds=(0.0, 3600.0),
        at_run_time=True,
        minimum_nonzero=0.05,
    ),
    ParamSpec(
        "metrics_window_s",
        30.0,
        "Seconds of the live stream the prequential error of ~/learning_metrics and diagnostics is "
        "measured over (kept in 20 time buckets).",
        bounds=(1.0, 86400.0),
    ),
)

#: the topic, relative to the node
TOPIC = "~/learning_metrics"
#: the fewest samples a regression window must hold to publish an error (inverse_dynamics): when
#: learning stops, the window ages out, and its last few samples would give absurd figures
MIN_WINDOW_SAMPLES = 50


def message_from_report(
    report: PrequentialReport,
    names: Sequence[str],
    window_s: float,
    baseline: str | None = None,
    predictor: str = "model",
) -> LearningMetrics:
    """The message fields a report gives (header, version, samples learned and forgetting are the
    node's): errors of ``predictor``, and of ``baseline`` when given; ``-1`` where undefined."""
    msg = LearningMetrics()
    msg.window_s = float(window_s)
    msg.window_samples = int(report.samples)
    msg.names = [str(n) for n in names]
    msg.prequential_error = report.published(predictor)
    msg.mean_prequential_error = report.published_mean(predictor)
    if baseline is not None:
        msg.baseline_error = report.published(baseline)
        msg.mean_baseline_error = report.published_mean(baseline)
    else:
        msg.mean_baseline_error = UNDEFINED
    msg.undefined = report.reasons(names)
    return msg


def add_batch_objective(msg: LearningMetrics, batch: BatchObjective | None) -> None:
    """The batch objective's fields of ``msg`` (``-1`` where undefined, the reasons added to
    ``undefined`` by the message's names); none: empty, ``-1``."""
    if batch is None:
        msg.batch_objective, msg.mean_batch_objective = [], UNDEFINED
        return
    msg.batch_objective = [UNDEFINED if math.isnan(v) else float(v) for v in batch.values]
    msg.mean_batch_objective = UNDEFINED if math.isnan(batch.mean) else float(batch.mean)
    names = list(msg.names)
    which: dict[str, list[str]] = {}
    for j, why in batch.undefined:
        which.setdefault(why, []).append(names[j] if j < len(names) else str(j))
    parts = [f"batch objective of {', '.join(labels)}: {why}" for why, labels in which.items()]
    msg.undefined = "; ".join([p for p in (msg.undefined, *parts) if p])


class BatchObjectiveCache:
    """The serving model's batch objective
    (:func:`~lifelong_learning.learners.batch_objective.model_objective`), computed again only when
    the model changed or learned (read with the model lock held).

    Args:
        solve: whether the weights may be solved here (O(d²c) under the model lock); False: a model
            whose weights are not solved reports none until its learning thread has solved them (the
            answering path of inverse_dynamics never waits for a solve).
    """

    def __init__(self, solve: bool = True) -> None:
        self.solve = solve
        self._key: tuple[int, int, bool] | None = None
        self._value: BatchObjective | None = None

    def of(self, model: Any) -> BatchObjective | None:
        """The batch objective of ``model`` (None: the model has none)."""
        if model is None:
            return None
        key = (id(model), int(getattr(model, "n_samples", 0) or 0), self._solved(model))
        if key != self._key:
            self._value, self._key = model_objective(model, self.solve), key
        return self._value

    @staticmethod
    def _solved(model: Any) -> bool:
        engine = getattr(model, "residual", None) or getattr(model, "parametric", None)
        engine = getattr(engine, "engine", engine)
        return bool(getattr(engine, "weights_solved", True))


class LearningMetricsPublisher:
    """The accumulator of a node (any object with ``report``), its lock and the publishing timer;
    ``names`` (the outputs) and ``forgetting`` go with the accumulator, set under the same lock.

    Args:
        node: the learner node (a publisher and timers are made on it).
        report: called on each tick: the message to publish, or None (nothing to report yet, the
            node inactive). Lock order: the model lock may be held when :attr:`lock` is taken,
            never the other way round.
        period_s: seconds between messages; 0: none.
        callback_group: the timer's.
    """

    def __init__(
        self,
        node: Any,
        report: Callable[[], LearningMetrics | None],
        period_s: float,
        callback_group: Any = None,
    ) -> None:
        self.lock = threading.Lock()
        self.accumulator: Any = None  # set by the node once it knows its outputs
        self.names: list[str] = []
        self.forgetting = 0.0
        self._node = node
        self._report = report
        self._group = callback_group
        self._timer: Any = None
        self.published = 0
        self.publisher = node.create_publisher(LearningMetrics, TOPIC, 10)
        self.set_period(period_s)

    @property
    def listened(self) -> bool:
        """Whether anything subscribes to the topic (what only a reader needs is not computed)."""
        return self.publisher.get_subscription_count() > 0

    def set_period(self, period_s: float) -> None:
        """Publish every ``period_s`` seconds from now on (0: stop)."""
        if self._timer is not None:
            self._node.destroy_timer(self._timer)
            self._timer = None
        if period_s > 0:
            self._timer = self._node.create_timer(float(period_s), self.publish, callback_group=self._group)

    @staticmethod
    def now() -> float:
        """The time the accumulator's samples are stamped with (monotonic seconds)."""
        return time.monotonic()

    def publish(self) -> None:
        """One message, when the node has something to report."""
        msg = self._report()
        if msg is None:
            return
        msg.header.stamp = self._node.get_clock().now().to_msg()
        self.publisher.publish(msg)
        self.published += 1
