"""Shadow evaluation, canary and drift alarm: a model judged on the live stream before and after a swap.

A learner that predicts every sample before it learns it scores itself prequentially (thesis §8.5,
:mod:`lifelong_learning.core.prequential`). A second model fed the same stream the same way is
scored on exactly the same samples, so the two errors compare what each would have answered on
*this* robot's motion, on data neither had seen:

- **shadow** (before a swap): a model received for hot reload runs beside the serving one for a
  window (``window_s`` seconds, or ``samples`` samples, whichever comes first); both predict each
  sample before learning it, both learn it; only the serving model answers. At the end, with
  ``e_c`` and ``e_s`` the prequential errors of the candidate and of the serving model over the
  window, the candidate is **promoted** iff

      e_c < (1 − margin) · e_s,

  otherwise it is dropped. An undefined error (a window without variance) promotes nothing.
- **canary** (after a swap): the replaced model runs in shadow of the new one for a window; the
  same rule with the roles exchanged: if the replaced model's error is below ``(1 − margin)`` × the
  new one's, the new one is worse by the margin and the node **rolls back**.
- **drift alarm**: :class:`DriftAlarm`, the live error against its level at the last promotion.

The error is the learner's own prequential error, by a pluggable scorer:

- :class:`RegressionScores` (``inverse_dynamics``): the mean over outputs of the nMSE over the window
  (:class:`~lifelong_learning.core.prequential.PrequentialRegression`, one normalization for both);
- :class:`ClassificationScores` (``object_recognition``): the error rate over the window's taught
  samples, ``e = (1/n) Σ_i [ŷ_i ≠ y_i]`` over samples, not the mean of per-class rates: a class
  taught twice in the window would weigh as much as one taught a hundred times, and a verdict on a
  handful of samples would swing on one of them. A model that knows no class predicts ``""``: an
  error (it cannot name the class).

A model in a trial that raises, predicts NaN/Inf (a wrong shape, a prediction that is not a label)
or learns NaN is **failed** at once with the reason: the trial ends, the serving model is never
touched. Nothing here imports ROS or knows the model class: the node passes
``predict(model, block)`` and ``learn(model, block, targets)``.
The design and parameters: ``docs/serving.md#shadow-evaluation-canary-and-drift-alarm``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from lifelong_learning.core.prequential import PrequentialRegression

SHADOW = "shadow"
CANARY = "canary"
#: how a trial ended
PROMOTED, DROPPED, FAILED, ROLLED_BACK, KEPT = "promoted", "dropped", "failed", "rolled back", "kept"
#: a trial stopped without a verdict (a newer model replaced it, or the serving model was swapped)
ENDED = "ended"


def check_settings(window_s: float, samples: int, margin: float, canary_window_s: float) -> None:
    """Raise ValueError for settings a trial cannot run with (the node's ranges say the same)."""
    if not (math.isfinite(window_s) and 0 <= window_s <= 86400):
        raise ValueError(f"shadow_window_s must be in [0, 86400] s, got {window_s!r}")
    if not 0 <= int(samples) <= 10_000_000:
        raise ValueError(f"shadow_samples must be in [0, 1e7], got {samples!r}")
    if not (math.isfinite(margin) and 0 <= margin < 1):
        raise ValueError(f"shadow_margin must be in [0, 1), got {margin!r}")
    if not (math.isfinite(canary_window_s) and 0 <= canary_window_s <= 86400):
        raise ValueError(f"canary_window_s must be in [0, 86400] s, got {canary_window_s!r}")


@dataclass(frozen=True)
class Verdict:
    """How a trial ended.

    Attributes:
        role: :data:`SHADOW` or :data:`CANARY`.
        outcome: :data:`PROMOTED` / :data:`DROPPED` (shadow), :data:`ROLLED_BACK` / :data:`KEPT`
            (canary), :data:`FAILED` (the model in the trial raised or gave NaN: dropped).
        candidate_error: the prequential error of the model in the trial (the candidate; in a
            canary, the replaced model): the mean nMSE, or the error rate; NaN when undefined.
        serving_error: the serving model's over the same samples, NaN when undefined.
        samples: samples scored.
        reason: the verdict in words, with the figures.
        label: what the model in the trial is (its file), for logs.
    """

    role: str
    outcome: str
    candidate_error: float
    serving_error: float
    samples: int
    reason: str
    label: str = ""

    @property
    def other_wins(self) -> bool:
        """The model in the trial replaces the serving one (a promotion, or a rollback)."""
        return self.outcome in (PROMOTED, ROLLED_BACK)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN as None)."""

        def number(v: float) -> float | None:
            return None if math.isnan(v) else float(v)

        return {
            "role": self.role,
            "outcome": self.outcome,
            "candidate_error": number(self.candidate_error),
            "serving_error": number(self.serving_error),
            "samples": int(self.samples),
            "promoted": self.outcome == PROMOTED,
            "rolled_back": self.outcome == ROLLED_BACK,
            "reason": self.reason,
            "model": self.label,
        }


class RegressionScores:
    """The errors of a regression trial: per output nMSE over the trial, their mean (see module)."""

    measure = "nMSE"

    def __init__(self, n_outputs: int, window_s: float) -> None:
        # the whole trial in one window (a little longer: the last bucket is never cut off)
        self.acc = PrequentialRegression(n_outputs, window_s * 1.05 + 1e-9, ("serving", "other"))

    @property
    def samples(self) -> int:
        return self.acc.samples

    @staticmethod
    def checked(predicted: Any, truth: Any) -> np.ndarray:
        """The other model's prediction as scored; ValueError when it cannot be (the trial fails)."""
        predicted = np.asarray(predicted, dtype=np.float64)
        if predicted.shape != np.shape(truth):
            raise ValueError(f"predicted shape {predicted.shape}, expected {np.shape(truth)}")
        if not np.all(np.isfinite(predicted)):
            raise ValueError("predicted NaN or Inf")
        return predicted

    def add(self, t: float, truth: Any, serving: Any, other: Any) -> None:
        self.acc.add(t, truth, serving=serving, other=other)

    def errors(self) -> tuple[float, float, int, str]:
        """``(other's error, serving's error, samples, why undefined)``; NaN where undefined."""
        report = self.acc.report()
        return report.means["other"], report.means["serving"], report.samples, report.reasons()


class ClassificationScores:
    """The errors of a classification trial: the error rate over the trial's samples (see module)."""

    measure = "error rate"

    def __init__(self) -> None:
        self.samples = 0
        self.wrong = {"serving": 0, "other": 0}

    @staticmethod
    def checked(predicted: Any, truth: Any) -> str:
        if not isinstance(predicted, str):
            raise ValueError(f"predicted {type(predicted).__name__} {predicted!r}, not a label")
        return predicted

    def add(self, t: float, truth: str, serving: str | None, other: str) -> None:
        """``serving`` None (it knew no class): an error, as ``""``."""
        self.samples += 1
        self.wrong["serving"] += (serving or "") != truth
        self.wrong["other"] += other != truth

    def errors(self) -> tuple[float, float, int, str]:
        n = self.samples
        if n == 0:
            return math.nan, math.nan, 0, "no samples"
        return self.wrong["other"] / n, self.wrong["serving"] / n, n, ""


class Trial:
    """One model run beside the serving one on the live stream, until its window ends.

    Args:
        role: :data:`SHADOW` (``other`` is a candidate) or :data:`CANARY` (``other`` was replaced).
        other: the model in the trial (it learns every sample it is fed; the caller never serves it
            while the trial runs).
        scores: outputs per sample (a regression: :class:`RegressionScores` over the window), or the
            scorer itself (e.g. :class:`ClassificationScores`).
        started: the time the trial starts (the unit of the times given to :meth:`feed`).
        window_s: the trial's length (> 0), in that unit.
        samples: 0, or a number of scored samples that ends the trial earlier.
        margin: the relative margin of the rule (module docstring), in [0, 1).
        predict / learn: ``predict(model, block)`` (``(n, n_outputs)``, or a label) and
            ``learn(model, block, targets)``.
        label / key: what the model is, for logs; ``key`` identifies it (e.g. its file's SHA-256).
        catch_up: whether a promotion brings the model up to what the serving one changed since it
            was made (:meth:`~lifelong_learning.serving.ServingCore.replace`); False for a file a
            person loads as it is.
    """

    def __init__(
        self,
        role: str,
        other: Any,
        scores: int | RegressionScores | ClassificationScores,
        started: float,
        window_s: float,
        samples: int,
        margin: float,
        predict: Callable[[Any, Any], Any],
        learn: Callable[[Any, Any, np.ndarray], None],
        label: str = "",
        key: str | None = None,
        catch_up: bool = True,
    ) -> None:
        if role not in (SHADOW, CANARY):
            raise ValueError(f"role must be {SHADOW!r} or {CANARY!r}, got {role!r}")
        if not (math.isfinite(window_s) and window_s > 0):
            raise ValueError(f"a trial's window must be positive, got {window_s!r}")
        check_settings(window_s, samples, margin, 0.0)
        self.role, self.other, self.label, self.key = role, other, label, key
        self.catch_up = bool(catch_up)
        self.started, self.window_s, self.max_samples, self.margin = (
            float(started),
            float(window_s),
            int(samples),
            float(margin),
        )
        self._predict, self._learn = predict, learn
        self.scores = (
            RegressionScores(int(scores), window_s) if isinstance(scores, int | np.integer) else scores
        )
        self.verdict: Verdict | None = None

    @property
    def samples(self) -> int:
        return self.scores.samples

    def feed(self, t: float, block: Any, targets: Any, serving_prediction: Any) -> Verdict | None:
        """Score the serving model's prediction (made before it learned ``block``) and the other
        model's (made now, before it learns ``block``), then let the other model learn it.

        Returns:
            The verdict when this feed ends the trial (window over, enough samples, or the other
            model failed), else None. A trial that has ended ignores what it is fed.
        """
        if self.verdict is not None:
            return None
        try:
            predicted = self.scores.checked(self._predict(self.other, block), targets)
            self._learn(self.other, block, targets)
        except Exception as exc:
            return self._end(FAILED, f"the {self._what()} failed: {type(exc).__name__}: {exc}")
        self.scores.add(t, targets, serving=serving_prediction, other=predicted)
        over = t - self.started >= self.window_s
        if over or (self.max_samples and self.samples >= self.max_samples):
            return self.decide(t)
        return None

    def learn(self, block: Any, targets: Any) -> Verdict | None:
        """Let the other model learn ``block`` without scoring it (a sample that is no observation of
        the world: a taught frame's pasted copy), as the serving model did.

        Returns:
            The verdict when the other model failed to learn it, else None (as :meth:`feed`).
        """
        if self.verdict is not None:
            return None
        try:
            self._learn(self.other, block, targets)
        except Exception as exc:
            return self._end(FAILED, f"the {self._what()} failed: {type(exc).__name__}: {exc}")
        return None

    def _what(self) -> str:
        return "candidate in shadow" if self.role == SHADOW else "replaced model in canary"

    def decide(self, now: float) -> Verdict:
        """End the trial now with the rule of the module docstring."""
        other, serving, samples, undefined = self.scores.errors()
        wins = not math.isnan(other) and not math.isnan(serving) and other < (1 - self.margin) * serving
        figures = (
            f"candidate {other:.4g} vs serving {serving:.4g} ({self.scores.measure} over {samples} samples, "
            f"{now - self.started:.3g} s; margin {self.margin:g})"
        )
        if self.role == SHADOW:
            outcome, why = (
                (PROMOTED, "better by the margin") if wins else (DROPPED, "not better by the margin")
            )
        else:
            figures = figures.replace("candidate", "replaced", 1).replace("vs serving", "vs new", 1)
            outcome, why = (
                (ROLLED_BACK, "the new model is worse by the margin") if wins else (KEPT, "no worse")
            )
        if samples < 2:  # nothing learned in the window (learning off, or held)
            why = f"unjudged, {samples} sample(s) scored"
        elif math.isnan(other) or math.isnan(serving):
            why = f"an error is undefined ({undefined or 'no samples'})"
        return self._end(outcome, f"{why}: {figures}", other, serving, samples)

    def _end(
        self, outcome: str, reason: str, other: float = math.nan, serving: float = math.nan, samples: int = 0
    ) -> Verdict:
        self.verdict = Verdict(
            self.role, outcome, other, serving, samples or self.samples, reason, self.label
        )
        return self.verdict


class ShadowSlot:
    """At most one trial at a time, under a lock of its own (the learning thread feeds it, a reload
    starts one, diagnostics read it); counts how trials ended and keeps the last verdict."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.trial: Trial | None = None
        self.counts: dict[str, int] = {}
        self.last: Verdict | None = None

    def start(self, trial: Trial) -> Trial | None:
        """Run ``trial``; returns the trial it replaces (ended without a verdict), if any."""
        with self.lock:
            previous, self.trial = self.trial, trial
            return previous

    def running(self, key: str | None = None) -> Trial | None:
        """The running trial (with ``key``: only if it is of that model)."""
        with self.lock:
            trial = self.trial
        if trial is not None and key is not None and trial.key != key:
            return None
        return trial

    def stop(self) -> Trial | None:
        """End the running trial without a verdict (the model it compared with was replaced)."""
        with self.lock:
            trial, self.trial = self.trial, None
            return trial

    def ended(self, trial: Trial, verdict: Verdict) -> bool:
        """Record ``verdict`` of ``trial``; False when ``trial`` is no longer the running one."""
        with self.lock:
            if self.trial is not trial:
                return False
            self.trial = None
            self.counts[verdict.outcome] = self.counts.get(verdict.outcome, 0) + 1
            self.last = verdict
            return True


class DriftAlarm:
    """The live error against its level at the last promotion (or at the end of warm-up).

    The reference ``r`` is the error given once errors have been defined for ``warmup_s`` seconds
    in a row after :meth:`rebase` (a promotion, a rollback, a reset, the start): the level the
    serving model reached over a window (``warmup_s`` is the metrics window) filled with its own
    scored samples, not the first few of a stream starting up (an undefined error, the window aged
    out while nothing was learned, starts the warm-up again). The alarm is raised when every error
    given for ``window_s`` seconds is above ``factor · r``, and cleared by the first error at or
    below it (or by :meth:`rebase`). ``factor`` > 1.

    ``floor`` > 0: the reference is at least ``floor`` (an error of 0 is a reference too). A
    classifier often makes no mistake over a window: a reference of 0 would raise the alarm at
    the first mistake; with ``floor`` 0 (regression: an nMSE is never exactly 0) the warm-up waits
    for an error above 0.
    """

    def __init__(self, factor: float, window_s: float, warmup_s: float = 0.0, floor: float = 0.0) -> None:
        check_drift(factor, window_s)
        if factor == 0:
            raise ValueError("drift_factor 0 is off: no alarm to build")
        if not (math.isfinite(floor) and 0 <= floor < 1):
            raise ValueError(f"a drift reference floor must be in [0, 1), got {floor!r}")
        self.factor, self.window_s, self.warmup_s = float(factor), float(window_s), max(0.0, float(warmup_s))
        self.floor = float(floor)
        self.raised_count = 0
        self.rebase()

    def rebase(self, t: float | None = None) -> None:
        """Forget the reference (a new serving model, at time ``t``; None: at the next update)."""
        self.reference, self.above_since, self.raised = math.nan, None, False
        self.rebased_at = t
        self.defined_since: float | None = None

    def update(self, t: float, error: float) -> bool:
        """Give the live error at time ``t`` (NaN: undefined, ignored). Returns True when this
        update raises the alarm (once per episode above the threshold)."""
        if self.rebased_at is None:
            self.rebased_at = t
        if math.isnan(error):
            self.defined_since = None
            return False
        if math.isnan(self.reference):
            if self.defined_since is None:
                self.defined_since = t
            if (error > 0 or self.floor > 0) and t - self.defined_since >= self.warmup_s:
                self.reference = max(float(error), self.floor)
            return False
        if error <= self.factor * self.reference:
            self.above_since, self.raised = None, False
            return False
        if self.above_since is None:
            self.above_since = t
        if not self.raised and t - self.above_since >= self.window_s:
            self.raised = True
            self.raised_count += 1
            return True
        return False

    def describe(self, error: float) -> str:
        return (
            f"live prequential error {error:.4g} above {self.factor:g} × {self.reference:.4g} (its level "
            f"at the last promotion or after warm-up) for {self.window_s:g} s"
        )


def check_drift(factor: float, window_s: float) -> None:
    """Raise ValueError for drift settings out of range (factor 0 is the node's "off")."""
    if not (math.isfinite(factor) and (factor == 0 or 1 < factor <= 1000)):
        raise ValueError(f"drift_factor must be 0 (off) or in (1, 1000], got {factor!r}")
    if not (math.isfinite(window_s) and 0 < window_s <= 86400):
        raise ValueError(f"drift_window_s must be in (0, 86400] s, got {window_s!r}")
