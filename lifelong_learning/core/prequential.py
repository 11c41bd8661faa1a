"""Prequential error over a sliding time window: predict each sample, then learn it (thesis §8.5).

A learner that predicts every sample *before* it learns it scores itself on data it has never
seen, for free (Dawid's prequential principle; the thesis evaluates every online learner this
way). These accumulators keep that score over the last ``window_s`` seconds of a live stream:

- :class:`PrequentialRegression`: per output ``j``, the normalized MSE over the window ``𝒲``

      nMSE_j = Σ_{i∈𝒲} (y_ij − ŷ_ij)² / (|𝒲| σ_j²),    σ_j² = the variance of y_j over 𝒲,

  for any number of named predictors fed the same targets (the serving model and a baseline;
  a second model in shadow later), so that their errors share one normalization.
- :class:`PrequentialClassification`: per class ``c``, the error rate on the samples of 𝒲 whose
  true label is ``c``, for named predictors likewise.

The window is kept as ``buckets`` consecutive time buckets of ``window_s / buckets`` seconds
each: a sample costs O(outputs) (one merge into the newest bucket), a bucket leaves whole
when it is older than the window, and a report merges at most ``buckets`` buckets. So the window
covers the last ``window_s`` seconds to within one bucket, and no running sum is ever
decremented (sums over a long stream minus what leaves would lose the variance to cancellation).
A bucket keeps its targets' count, mean and centred sum of squares; buckets are merged with the
pairwise update of Chan, Golub & LeVeque (1979): ``M2 = M2_a + M2_b + δ² n_a n_b / n``.

What a window cannot score is said, not computed: an output whose targets did not vary over the
window has no scale to normalize by, a class with no sample in the window has no rate; their
errors are NaN in the report with the reason in :attr:`PrequentialReport.undefined` (a
publisher shows :data:`UNDEFINED` instead, never NaN). Non-finite inputs are refused
(ValueError, the state untouched), so the accumulator is never poisoned.
"""

from __future__ import annotations

import copy
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: time buckets a window is kept in by default (the window is exact to 1/20 of its length)
DEFAULT_BUCKETS = 20
#: what a publisher shows for an error the window cannot define (errors are never negative)
UNDEFINED = -1.0
#: targets whose standard deviation is at most this fraction of their mean did not vary (beyond
#: the rounding of float64 sums: 64 units in the last place)
RELATIVE_SPREAD_FLOOR = 64 * float(np.finfo(np.float64).eps)
FEW_SAMPLES = "fewer than 2 samples in the window"
NO_VARIANCE = "the targets did not vary over the window: no scale to normalize the error by"
#: why a regression window restarted less than its ``min_span`` ago defines no error
RESTARTED = "the window restarted (a new model) too recently: its spread would exaggerate the error"
NO_SAMPLES = "no sample of this class in the window"


def _check_window(window_s: float, buckets: int) -> None:
    if not (math.isfinite(window_s) and window_s > 0):
        raise ValueError(f"window_s must be a positive number of seconds, got {window_s!r}")
    if int(buckets) < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets!r}")


def _check_time(t: float) -> float:
    t = float(t)
    if not math.isfinite(t):
        raise ValueError(f"the time of a sample must be finite, got {t!r}")
    return t


@dataclass(frozen=True)
class PrequentialReport:
    """The errors over one window.

    Attributes:
        samples: samples in the window.
        errors: per predictor, the error of each output (regression) or class (classification),
            NaN where undefined.
        means: per predictor, the mean of its defined errors (NaN when none is defined).
        undefined: ``(index, reason)`` of each output or class whose error is undefined.
        names: the classes, in the order of ``errors`` (classification; empty for regression).
    """

    samples: int
    errors: dict[str, np.ndarray]
    means: dict[str, float]
    undefined: tuple[tuple[int, str], ...] = ()
    names: tuple[str, ...] = field(default=())

    def published(self, predictor: str) -> list[float]:
        """The errors of ``predictor`` as a publisher shows them: :data:`UNDEFINED` for NaN."""
        return [UNDEFINED if math.isnan(v) else float(v) for v in self.errors[predictor]]

    def published_mean(self, predictor: str) -> float:
        """The mean error of ``predictor``, :data:`UNDEFINED` when no error is defined."""
        value = self.means[predictor]
        return UNDEFINED if math.isnan(value) else float(value)

    def reasons(self, names: Sequence[str] | None = None) -> str:
        """The undefined errors in words (``''`` when every error is defined)."""
        labels = names if names is not None else self.names
        parts = [f"{labels[k] if k < len(labels) else k}: {why}" for k, why in self.undefined]
        return "; ".join(parts)


def _mean_of_defined(values: np.ndarray) -> float:
    defined = values[~np.isnan(values)]
    return float(defined.mean()) if defined.size else math.nan


class _Buckets:
    """Consecutive time buckets of one window: the newest last, the old ones dropped."""

    def __init__(self, window_s: float, buckets: int) -> None:
        _check_window(window_s, buckets)
        self.window_s = float(window_s)
        self.count = int(buckets)
        self.width = self.window_s / self.count
        self.items: deque[tuple[int, Any]] = deque()
        self.latest = -math.inf  # the latest time seen (an earlier one joins the newest bucket)

    def index(self, t: float) -> int:
        self.latest = max(self.latest, t)
        return math.floor(self.latest / self.width)

    def drop_old(self, now: float) -> None:
        newest = math.floor(max(now, self.latest) / self.width)
        while self.items and self.items[0][0] <= newest - self.count:
            self.items.popleft()

    def bucket(self, t: float, new: Any) -> Any:
        """The bucket of time ``t`` (made with ``new()`` when it does not exist yet)."""
        k = self.index(t)
        self.drop_old(t)
        if not self.items or self.items[-1][0] != k:
            self.items.append((k, new()))
        return self.items[-1][1]


class _TargetStats:
    """Count, mean and centred sum of squares of the targets, and each predictor's squared errors."""

    __slots__ = ("m2", "mean", "n", "sse")

    def __init__(self, n_outputs: int, predictors: Iterable[str]) -> None:
        self.n = 0
        self.mean = np.zeros(n_outputs)
        self.m2 = np.zeros(n_outputs)
        self.sse = {name: np.zeros(n_outputs) for name in predictors}

    def copy(self) -> _TargetStats:
        twin = _TargetStats(0, ())
        twin.n, twin.mean, twin.m2 = self.n, self.mean.copy(), self.m2.copy()
        twin.sse = {name: value.copy() for name, value in self.sse.items()}
        return twin

    def merge(self, n: int, mean: np.ndarray, m2: np.ndarray, sse: dict[str, np.ndarray]) -> None:
        """Chan et al.'s pairwise update with ``n`` more samples of the given mean and ``M2``."""
        total = self.n + n
        delta = mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self.m2 = self.m2 + m2 + delta**2 * (self.n * n / total)
        self.n = total
        for name, value in sse.items():
            self.sse[name] += value


class PrequentialRegression:
    """Per-output prequential nMSE of named predictors over the last ``window_s`` seconds.

    Args:
        n_outputs: outputs per sample (joints).
        window_s: the window's length, in the unit of the times given to :meth:`add`.
        predictors: the names of the predictors scored on the same targets, e.g.
            ``("model", "baseline")``; a shadow model is one more name.
        buckets: time buckets the window is kept in (module docstring).
        min_samples: a window with fewer samples defines no error (a window that ages out while
            nothing is learned holds a few samples whose small spread makes any nMSE absurd).

    Example:
        >>> acc = PrequentialRegression(2, window_s=10.0, predictors=("model",))
        >>> acc.add(0.0, [[1.0, 2.0], [3.0, 2.0]], model=[[1.0, 2.0], [2.0, 2.0]])
        >>> acc.report(0.0).errors["model"].tolist()
        [0.5, nan]
    """

    def __init__(
        self,
        n_outputs: int,
        window_s: float,
        predictors: Sequence[str] = ("model",),
        buckets: int = DEFAULT_BUCKETS,
        min_samples: int = 2,
    ) -> None:
        if int(n_outputs) < 1:
            raise ValueError(f"n_outputs must be at least 1, got {n_outputs!r}")
        if int(min_samples) < 2:
            raise ValueError(f"min_samples must be at least 2, got {min_samples!r}")
        self.min_samples = int(min_samples)
        if not predictors or len(set(predictors)) != len(predictors):
            raise ValueError(f"predictors must be distinct names, at least one: {predictors!r}")
        self.n_outputs = int(n_outputs)
        self.predictors = tuple(str(p) for p in predictors)
        self._buckets = _Buckets(window_s, buckets)
        self.samples = 0  # samples added since the start (or clear)
        self._defined_from = -math.inf  # restart(): no error before this time

    @property
    def window_s(self) -> float:
        return self._buckets.window_s

    def _rows(self, name: str, value: Any) -> np.ndarray:
        a = np.asarray(value, dtype=np.float64)
        a = a[None, :] if a.ndim == 1 else a
        if a.ndim != 2 or a.shape[1] != self.n_outputs:
            raise ValueError(f"{name} must have {self.n_outputs} columns, got shape {np.shape(value)}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} holds NaN or Inf: not scored")
        return a

    def add(self, t: float, target: Any, **predictions: Any) -> None:
        """Score the predictions made before learning the samples ``target`` (``(n, c)`` or ``(c,)``)
        at time ``t``: one array of the same shape per predictor, every predictor given.

        Raises:
            ValueError: a missing or unknown predictor, wrong shapes, NaN or Inf anywhere; nothing
                is added then.
        """
        t = _check_time(t)
        if set(predictions) != set(self.predictors):
            raise ValueError(f"predictions of {sorted(predictions)} given, {list(self.predictors)} expected")
        y = self._rows("target", target)
        preds = {name: self._rows(name, value) for name, value in predictions.items()}
        if any(p.shape[0] != y.shape[0] for p in preds.values()):
            raise ValueError("every prediction needs as many rows as the target")
        if y.shape[0] == 0:
            return
        mean = y.mean(axis=0)
        m2 = ((y - mean) ** 2).sum(axis=0)
        sse = {name: ((y - p) ** 2).sum(axis=0) for name, p in preds.items()}
        n_out, names = self.n_outputs, self.predictors
        self._buckets.bucket(t, lambda: _TargetStats(n_out, names)).merge(y.shape[0], mean, m2, sse)
        self.samples += y.shape[0]

    def fork(self) -> PrequentialRegression:
        """An independent copy in O(buckets): it shares the buckets :meth:`add` never changes again
        (all but the newest: a sample joins the newest bucket or starts one) and copies the newest
        (for a draft that may be dropped; a deep copy costs milliseconds)."""
        twin = copy.copy(self)
        twin._buckets = copy.copy(self._buckets)
        items = twin._buckets.items = deque(self._buckets.items)
        if items:
            items[-1] = (items[-1][0], items[-1][1].copy())
        return twin

    def report(self, now: float | None = None, newest: int | None = None) -> PrequentialReport:
        """The errors over the window that ends at ``now`` (default: the latest sample's time);
        ``newest``: over its newest ``newest`` buckets only (the last ``newest / buckets`` of the
        window, to within one bucket), e.g. whether the latest part of the stream is explained too.

        Raises:
            ValueError: ``newest`` is not a number of buckets from 1 to the window's.
        """
        buckets = self._buckets
        if newest is not None and not 1 <= int(newest) <= buckets.count:
            raise ValueError(f"newest must be from 1 to {buckets.count} buckets, got {newest!r}")
        if now is not None:
            buckets.drop_old(_check_time(now))
        first = -math.inf
        if newest is not None:
            first = math.floor(max(now if now is not None else -math.inf, buckets.latest) / buckets.width)
            first -= int(newest) - 1
        total = _TargetStats(self.n_outputs, self.predictors)
        for k, stats in buckets.items:
            if stats.n and k >= first:
                total.merge(stats.n, stats.mean, stats.m2, stats.sse)
        undefined: list[tuple[int, str]] = []
        if now is not None and now < self._defined_from:
            undefined = [(j, RESTARTED) for j in range(self.n_outputs)]
            valid = np.zeros(self.n_outputs, dtype=bool)
        elif total.n < self.min_samples:
            few = (
                FEW_SAMPLES
                if self.min_samples == 2
                else f"fewer than {self.min_samples} samples in the window"
            )
            undefined = [(j, few) for j in range(self.n_outputs)]
            valid = np.zeros(self.n_outputs, dtype=bool)
        else:
            variance = total.m2 / total.n
            valid = variance > (RELATIVE_SPREAD_FLOOR * total.mean) ** 2
            valid &= variance > 0
            undefined = [(int(j), NO_VARIANCE) for j in np.flatnonzero(~valid)]
        errors: dict[str, np.ndarray] = {}
        for name in self.predictors:
            value = np.full(self.n_outputs, math.nan)
            if valid.any():
                value[valid] = total.sse[name][valid] / total.m2[valid]  # MSE / σ² = SSE / M2
            errors[name] = value
        means = {name: _mean_of_defined(v) for name, v in errors.items()}
        return PrequentialReport(total.n, errors, means, tuple(undefined))

    def clear(self) -> None:
        """Forget every sample (e.g. the outputs changed)."""
        self._buckets.items.clear()
        self.samples = 0

    def restart(self, t: float, min_span: float) -> None:
        """Forget every sample at time ``t`` (a new model serves: the old one's errors say nothing
        of it), and define no error before ``t + min_span``: the nMSE divides by the targets' spread
        over the window, which over the first fraction of a second after a restart is far below its
        level over a whole window, so the first errors would be exaggerated many times."""
        self.clear()
        self._defined_from = _check_time(t) + max(0.0, float(min_span))


class PrequentialClassification:
    """Per-class prequential error rate of named predictors over the last ``window_s`` seconds.

    Args:
        window_s: the window's length, in the unit of the times given to :meth:`add`.
        predictors: the names of the predictors scored on the same labels.
        buckets: time buckets the window is kept in (module docstring).
    """

    def __init__(
        self, window_s: float, predictors: Sequence[str] = ("model",), buckets: int = DEFAULT_BUCKETS
    ):
        if not predictors or len(set(predictors)) != len(predictors):
            raise ValueError(f"predictors must be distinct names, at least one: {predictors!r}")
        self.predictors = tuple(str(p) for p in predictors)
        self._buckets = _Buckets(window_s, buckets)
        self.samples = 0

    @property
    def window_s(self) -> float:
        return self._buckets.window_s

    def add(self, t: float, label: str, **predicted: str) -> None:
        """Score the labels each predictor gave, before learning it, to a sample of class ``label``.

        Raises:
            ValueError: a missing or unknown predictor, a label that is not a string, a time that is
                not finite; nothing is added then.
        """
        t = _check_time(t)
        if set(predicted) != set(self.predictors):
            raise ValueError(f"predictions of {sorted(predicted)} given, {list(self.predictors)} expected")
        if not isinstance(label, str) or not all(isinstance(v, str) for v in predicted.values()):
            raise ValueError("labels must be strings")
        counts = self._buckets.bucket(t, dict)
        row = counts.setdefault(label, [0] + [0] * len(self.predictors))
        row[0] += 1
        for k, name in enumerate(self.predictors, start=1):
            row[k] += predicted[name] != label
        self.samples += 1

    def report(self, now: float | None = None, classes: Sequence[str] | None = None) -> PrequentialReport:
        """Per-class error rates over the window that ends at ``now`` (default: the latest sample's),
        for ``classes`` in that order (default: the classes in the window, sorted)."""
        buckets = self._buckets
        if now is not None:
            buckets.drop_old(_check_time(now))
        totals: dict[str, list[int]] = {}
        for _, counts in buckets.items:
            for label, row in counts.items():
                total = totals.setdefault(label, [0] * len(row))
                for k, v in enumerate(row):
                    total[k] += v
        names = tuple(sorted(totals) if classes is None else (str(c) for c in classes))
        errors = {name: np.full(len(names), math.nan) for name in self.predictors}
        undefined = []
        for c, label in enumerate(names):
            row = totals.get(label)
            if row is None or row[0] == 0:
                undefined.append((c, NO_SAMPLES))
                continue
            for k, name in enumerate(self.predictors, start=1):
                errors[name][c] = row[k] / row[0]
        means = {name: _mean_of_defined(v) for name, v in errors.items()}
        samples = sum(totals[label][0] for label in names if label in totals)
        return PrequentialReport(samples, errors, means, tuple(undefined), names)

    def clear(self) -> None:
        """Forget every sample."""
        self._buckets.items.clear()
        self.samples = 0
