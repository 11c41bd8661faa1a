"""λ chosen on the stream by the prequential error of a λ grid: every sample learned, none held out.

object_recognition chooses λ (and the recoding α) as the thesis does (§7.6.3): one labeled sample in
six is held out, never learned, and the candidates are scored on that buffer
(:mod:`~lifelong_learning.learners.model_selection`). A learner that predicts every sample before it
learns it has another choice at hand, the one ``forgetting: auto`` makes for the forgetting factor
(:mod:`~lifelong_learning.learners.auto_forgetting`): keep one engine per λ candidate, all learning
every sample; score each candidate's prediction of each sample made before it is learned
(:mod:`~lifelong_learning.core.prequential`, over the last ``window`` samples); serve the best.

- :class:`PrequentialLambdaRLS` (regression, e.g. the inverse-dynamics residual): ``k`` full
  :class:`~lifelong_learning.learners.recursive_rls.RecursiveRLS` engines, the mean nMSE over the
  window;
- :class:`PrequentialLambdaClassifier` (recognition): one
  :class:`~lifelong_learning.learners.rlsc.IncrementalRLSC` per λ (α = 0: nothing held out), every
  ``(λ, α)`` of the grid scored (a recoding α re-weights a λ's scores at no cost), the mean of the
  per-class error rates over the window (a rare class weighs as much as a frequent one).

The rule (:func:`choose`, as ``forgetting: auto``'s): the serving candidate changes only when the best
is better than it by ``switch_margin`` (relative), and then to the **most regularized** candidate
within that margin of the best (the largest λ, then the smallest α): no less regularization than the
stream pays for. Nothing changes before ``min_samples`` were scored. The cost: ``k`` engines, as the
held-out rule with every λ exact (``selection_every = 0``). Measured against it:
``docs/benchmarks/prequential-lambda.md`` (``benchmarks/bench_prequential_lambda.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from lifelong_learning.core.checks import as_rows
from lifelong_learning.core.prequential import PrequentialClassification, PrequentialRegression
from lifelong_learning.learners.model_selection import recoding
from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.learners.rlsc import IncrementalRLSC

#: samples the candidates' prequential errors are compared over
DEFAULT_WINDOW = 300
#: another candidate serves once its error is below (1 − this) × the serving one's
DEFAULT_SWITCH_MARGIN = 0.02
#: the α the classifier races by default (the held-out rule's grid)
DEFAULT_ALPHAS = tuple(np.round(np.linspace(0.0, 1.0, 11), 10))


def choose(errors: dict[Any, float], serving: Any, order: Sequence[Any], margin: float) -> Any:
    """The candidate that serves next (module docstring): ``errors`` by candidate (NaN: undefined),
    ``order`` the candidates from the most regularized to the least."""
    defined = {c: e for c, e in errors.items() if not math.isnan(e)}
    if not defined:
        return serving
    least = min(defined.values())
    current = errors.get(serving, math.nan)
    if not math.isnan(current) and least >= (1.0 - margin) * current:
        return serving  # within the margin of the best: it stays
    return next(c for c in order if c in defined and (1.0 - margin) * defined[c] <= least)


def _check(lambdas: Sequence[float], window: int, margin: float) -> list[float]:
    lams = [float(v) for v in lambdas]
    if not lams or len(set(lams)) != len(lams) or not all(math.isfinite(v) and v > 0 for v in lams):
        raise ValueError(f"lambdas must be distinct positive numbers, at least one: {lambdas!r}")
    if int(window) < 2 or not 0.0 <= float(margin) < 1.0:
        raise ValueError(f"window must be >= 2 and switch_margin in [0, 1), got {window!r}, {margin!r}")
    return lams


class PrequentialLambdaRLS:
    """``k`` RecursiveRLS engines, one per λ, all learning every row; the one of least prequential
    nMSE over the window serves (module docstring).

    Args:
        n_features, n_outputs: as :class:`RecursiveRLS`. lambdas: the candidates.
        window: samples compared over. switch_margin: relative gain another λ needs to serve.
        min_samples: scored samples before the first change (default: ``window``).
    """

    def __init__(
        self,
        n_features: int,
        n_outputs: int,
        lambdas: Sequence[float],
        window: int = DEFAULT_WINDOW,
        switch_margin: float = DEFAULT_SWITCH_MARGIN,
        min_samples: int | None = None,
    ) -> None:
        self.lambdas = _check(lambdas, window, switch_margin)
        self.engines = [RecursiveRLS(n_features, n_outputs, lam=v) for v in self.lambdas]
        self.names = [repr(v) for v in self.lambdas]
        self.scores = PrequentialRegression(n_outputs, float(window), self.names, min_samples=2)
        self.window, self.switch_margin = int(window), float(switch_margin)
        self.min_samples = self.window if min_samples is None else int(min_samples)
        self.serving = int(np.argmax(self.lambdas))  # the most regularized until the stream says
        self.n_samples = self.switches = 0

    @property
    def lam(self) -> float:
        """The λ that serves."""
        return self.lambdas[self.serving]

    def predict(self, Z: Any) -> np.ndarray:
        """The serving engine's prediction."""
        return self.engines[self.serving].predict(Z)

    def errors(self) -> dict[float, float]:
        """Each λ's mean prequential nMSE over the window (NaN while undefined)."""
        report = self.scores.report()
        return {v: report.means[n] for v, n in zip(self.lambdas, self.names, strict=True)}

    def update(self, Z: Any, U: Any) -> None:
        """Score every engine on rows ``Z`` (targets ``U``) before any learns them, let all learn
        them, then choose the λ that serves the next rows."""
        Z2 = as_rows(Z, self.engines[0].n_features, "Z")
        U2 = as_rows(U, self.engines[0].n_outputs, "U")
        if self.n_samples:
            predictions = {n: e.predict(Z2) for n, e in zip(self.names, self.engines, strict=True)}
            self.scores.add(float(self.n_samples + Z2.shape[0]), U2, **predictions)
        for engine in self.engines:
            engine.update(Z2, U2)
        self.n_samples += Z2.shape[0]
        if self.scores.samples >= self.min_samples:
            order = sorted(range(len(self.lambdas)), key=lambda i: -self.lambdas[i])
            errors = dict(enumerate(self.errors().values()))
            chosen = choose(errors, self.serving, order, self.switch_margin)
            self.switches += chosen != self.serving
            self.serving = chosen


class PrequentialLambdaClassifier:
    """One IncrementalRLSC per λ (α = 0, nothing held out), every ``(λ, α)`` raced on the mean
    per-class prequential error over the window; the best serves (module docstring).

    Args:
        lambdas: the λ candidates. alphas: the recoding α candidates (in [0, 1]).
        window, switch_margin, min_samples: as :class:`PrequentialLambdaRLS`.
        **kwargs: further IncrementalRLSC arguments (``feature_map``, ``n_features``, ...).
    """

    def __init__(
        self,
        lambdas: Sequence[float],
        alphas: Sequence[float] = DEFAULT_ALPHAS,
        window: int = DEFAULT_WINDOW,
        switch_margin: float = DEFAULT_SWITCH_MARGIN,
        min_samples: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.lambdas = _check(lambdas, window, switch_margin)
        self.alphas = [float(a) for a in alphas]
        if not self.alphas or not all(0.0 <= a <= 1.0 for a in self.alphas):
            raise ValueError(f"alphas must be in [0, 1], at least one: {alphas!r}")
        self.models = [IncrementalRLSC(lambdas=v, alpha=0.0, **kwargs) for v in self.lambdas]
        self.candidates = [(i, a) for i in range(len(self.lambdas)) for a in self.alphas]
        self.names = [f"{self.lambdas[i]!r}/{a!r}" for i, a in self.candidates]
        self.scores = PrequentialClassification(float(window), self.names)
        self.window, self.switch_margin = int(window), float(switch_margin)
        self.min_samples = self.window if min_samples is None else int(min_samples)
        # the most regularized until the stream says (the largest λ, the smallest α)
        self.order = sorted(
            range(len(self.candidates)),
            key=lambda k: (-self.lambdas[self.candidates[k][0]], self.candidates[k][1]),
        )
        self.serving = self.order[0]
        self.n_samples = self.switches = 0

    @property
    def lambda_(self) -> float:
        return self.lambdas[self.candidates[self.serving][0]]

    @property
    def alpha_(self) -> float:
        return self.candidates[self.serving][1]

    @property
    def classes_(self) -> np.ndarray:
        return self.models[0].classes_

    def _labels(self, X: Any) -> dict[str, np.ndarray]:
        """Every candidate's labels for rows ``X`` (a λ's scores recoded by each α)."""
        classes = self.classes_
        counts, shrink = self.models[0].class_counts_, self.models[0].recoding_shrink
        out = {}
        for i, model in enumerate(self.models):
            S = model.decision_function(X)
            for a in self.alphas:
                out[f"{self.lambdas[i]!r}/{a!r}"] = classes[
                    np.argmax(S * recoding(counts, a, shrink)[None, :], axis=1)
                ]
        return out

    def decision_function(self, X: Any) -> np.ndarray:
        """The serving candidate's recoded scores."""
        i, a = self.candidates[self.serving]
        first = self.models[0]
        return (
            self.models[i].decision_function(X)
            * recoding(first.class_counts_, a, first.recoding_shrink)[None, :]
        )

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]

    def partial_fit(self, X: Any, y: Any) -> PrequentialLambdaClassifier:
        """Learn labeled rows one at a time: each classified by every candidate before every model
        learns it (the first, and a new class's first samples, are scored as they come: a class
        unknown before is an error of every candidate alike)."""
        rows = np.atleast_2d(np.asarray(X, dtype=np.float64))
        labels = [str(v) for v in np.atleast_1d(np.asarray(y, dtype=object))]
        for x, label in zip(rows, labels, strict=True):
            if len(self.classes_):
                predicted = {n: str(v[0]) for n, v in self._labels(x[None, :]).items()}
                self.scores.add(float(self.n_samples), label, **predicted)
            for model in self.models:
                model.partial_fit(x[None, :], [label])
            self.n_samples += 1
            if self.scores.samples >= self.min_samples:
                report = self.scores.report(float(self.n_samples))
                errors = dict(enumerate(report.means[n] for n in self.names))
                chosen = choose(errors, self.serving, self.order, self.switch_margin)
                self.switches += chosen != self.serving
                self.serving = chosen
        return self


__all__ = ["PrequentialLambdaClassifier", "PrequentialLambdaRLS", "choose"]
