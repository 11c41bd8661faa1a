"""Recoding and online model selection of the incremental RLSC (thesis §7.5.2, §7.6.3), and the
confidence calibration fitted with them.

- §7.5.2 (eq. 7.21), recoding: ``W_k = A_k⁻¹ b_k Γ_k^α`` with ``Γ_k = k · diag(k_1..k_T)⁻¹``
  (``k`` training samples, ``k_t`` of class ``t``). ``Γ`` is diagonal, so the recoded scores are
  the plain scores with column ``t`` scaled by ``(k/k_t)^α`` (:func:`recoding`): one solve serves
  every α. The thesis's Γ lifts a class with few samples and shrinks one with many alike; here a
  class with more samples than the median class ``m`` is shrunk more gently,
  ``(k/m)^α (m/k_t)^min(α, σ)`` with ``σ`` the classifier's ``recoding_shrink`` (default
  :data:`RECODING_SHRINK`; ``σ = 1``: the thesis's Γ exactly). The selection below judges α on
  frames held out of the stream that taught the classes, where a class taught far more often than
  the others is recognised at any α, so it takes a large α; in other rooms the full
  ``(m/k_t)^α`` then made such a class the one least recognised
  (docs/benchmarks/recognition-favourite.md). Classes at or below
  the median count get the thesis's factor, so balanced classes and the rare class keep theirs. The
  median of an even number of counts is the midpoint of the two middle ones.
- §7.6.3, the choice of λ and α on the held-out validation buffer (:meth:`SelectionRule.choose`):
  the best λ is the one with the highest validation accuracy; α follows the thesis heuristic: the
  largest α of a grid whose validation accuracy on well-represented classes (at least
  ``min_class_count`` training samples) is ≥ the one at α = 0. Precisely: for each α of the grid,
  λ*(α) is the candidate with the best accuracy on all validation samples (ties → the larger λ);
  α_ is the largest α whose well-represented accuracy at λ*(α) is ≥ that of α = 0 at λ*(0), and
  λ_ = λ*(α_).
- Calibrated confidence (:mod:`~lifelong_learning.learners.calibration`, temperature scaling of
  Guo et al. 2017): the probabilities are ``softmax(t · s)`` of the recoded scores ``s`` of the
  selected λ and α, with one inverse temperature ``t`` fitted by minimising the (Platt-smoothed)
  negative log-likelihood of the validation buffer's scores (:func:`calibrate`). It is refitted
  whenever the model selection runs (lazily, after any update), on the same held-out samples.
  While the buffer holds fewer than :data:`MIN_CALIBRATION_SAMPLES` samples (or no model
  selection keeps one, or a single class is known), ``t = 1``: the plain softmax of the scores,
  which is underconfident for RLSC (scores of order 1: 0.14 for a correct top class of 8), so a
  threshold then errs towards "unknown". :attr:`IncrementalRLSC.calibration_` says which.

How the classifier keeps the validation scores current is in docs/design.md (incremental RLSC).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lifelong_learning.learners.calibration import T_DEFAULT, fit_inverse_temperature

#: validation samples the confidence calibration needs; with fewer, the plain softmax (t = 1)
MIN_CALIBRATION_SAMPLES = 10


class Selection(NamedTuple):
    """What the selection chose."""

    #: the λ candidate used for prediction
    lambda_index: int
    #: the recoding exponent used for prediction
    alpha: float
    #: validation accuracy of each λ candidate at ``alpha`` (NaN: no validation sample, or not scored)
    accuracy: np.ndarray
    #: the calibration's inverse temperature (``T_DEFAULT``: uncalibrated)
    inverse_temperature: float
    #: validation samples it was fitted on (0: uncalibrated)
    calibration_samples: int


#: the default largest exponent by which a class taught more often than the median class is shrunk
#: (:func:`recoding`, the classifier's ``recoding_shrink``)
RECODING_SHRINK = 0.25


def recoding(train_counts: np.ndarray, alpha: float, shrink: float = RECODING_SHRINK) -> np.ndarray:
    """Diagonal of the recoding Γ^α over the training counts (§7.5.2, eq. 7.21): class ``t`` scaled
    by ``(k/k_t)^α`` when ``k_t`` is at most the median count ``m``, by
    ``(k/m)^α (m/k_t)^min(α, shrink)`` above it (module docstring; ``shrink`` 1: the thesis's
    ``(k/k_t)^α`` for every class). A class without a training sample counts as one."""
    counts = np.maximum(np.asarray(train_counts, dtype=float), 1.0)
    if alpha == 0.0 or counts.size == 0:
        return np.ones(counts.size)
    k, m = float(np.sum(train_counts)), float(np.median(counts))
    gamma = (k / np.minimum(counts, m)) ** alpha
    above = counts > m
    gamma[above] *= (m / counts[above]) ** min(alpha, shrink)
    return gamma


#: what counts as one independent answer in the calibration's smoothing (learners/calibration.py)
CALIBRATION_EVIDENCE = ("samples", "classes")


def calibrate(
    scores: np.ndarray | None,
    alpha: float,
    val_y: np.ndarray,
    train_counts: np.ndarray,
    evidence: str = "samples",
    shrink: float = RECODING_SHRINK,
) -> tuple[float, int]:
    """Inverse temperature fitted on the validation ``scores`` of a λ, recoded at α (and ``shrink``,
    :func:`recoding`), and the number of samples; ``(T_DEFAULT, 0)`` with fewer than
    :data:`MIN_CALIBRATION_SAMPLES` or one class. ``evidence``: each validation sample
    (``"samples"``) or each class among them (``"classes"``) counts as one answer of the smoothing."""
    V = int(val_y.size)
    if scores is None or V < MIN_CALIBRATION_SAMPLES or train_counts.size < 2:
        return T_DEFAULT, 0
    answers = V if evidence == "samples" else int(np.unique(val_y).size)
    recoded = scores * recoding(train_counts, alpha, shrink)[None, :]
    return fit_inverse_temperature(recoded, val_y, answers=answers), V


@dataclass(frozen=True)
class SelectionRule:
    """The hyperparameters of the choice of λ and α: those of
    :class:`~lifelong_learning.learners.IncrementalRLSC` of the same names.

    Every method takes the validation scores per λ candidate (``V × T`` each; None: a candidate
    not scored, never chosen), the classes of the validation samples ``val_y`` and the training
    samples per class ``train_counts``.
    """

    lambdas: np.ndarray
    alpha: float | str
    alpha_grid: np.ndarray
    min_class_count: int
    alpha_init: float
    calibration_evidence: str = "samples"
    recoding_shrink: float = RECODING_SHRINK

    def best_lambda(self, acc: np.ndarray) -> int:
        """Highest validation accuracy; ties go to the larger λ. No data: the middle candidate."""
        if acc.size == 1:
            return 0
        if np.all(np.isnan(acc)):
            return int(np.argsort(self.lambdas)[self.lambdas.size // 2])
        best = np.nanmax(acc)
        tied = np.flatnonzero(acc >= best - 1e-12)
        return int(tied[np.argmax(self.lambdas[tied])])

    def unselected(self, lambda_index: int) -> Selection:
        """The selection before any choice: the λ given, α as given (``alpha_init`` for ``"auto"``),
        uncalibrated."""
        alpha = self.alpha_init if self.alpha == "auto" else float(self.alpha)
        return Selection(lambda_index, alpha, np.full(self.lambdas.size, np.nan), T_DEFAULT, 0)

    def validation_grid(
        self, scores: Sequence[np.ndarray | None], val_y: np.ndarray, train_counts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Accuracy (all validation samples, well-represented ones) per (λ, α of the grid); NaN
        where there is no validation sample or the candidate was not scored."""
        L, A = self.lambdas.size, self.alpha_grid.size
        scores = list(scores)
        usable = [j for j, S in enumerate(scores) if S is not None]
        acc_all, acc_wr = np.full((L, A), np.nan), np.full((L, A), np.nan)
        if val_y.size == 0 or len(scores) != L or not usable:
            return acc_all, acc_wr
        gammas = np.stack([recoding(train_counts, float(a), self.recoding_shrink) for a in self.alpha_grid])
        S = np.stack([scores[j] for j in usable])  # L' × V × T
        pred = np.argmax(S[:, None, :, :] * gammas[None, :, None, :], axis=3)  # L' × A × V
        hit = pred == val_y[None, None, :]
        acc_all[usable] = hit.mean(axis=2)
        wr = train_counts[val_y] >= self.min_class_count
        if wr.any():
            acc_wr[usable] = hit[:, :, wr].mean(axis=2)
        return acc_all, acc_wr

    def accuracy_at(
        self, alpha: float, scores: Sequence[np.ndarray | None], val_y: np.ndarray, train_counts: np.ndarray
    ) -> np.ndarray:
        """Validation accuracy of each λ candidate at α (NaN: no validation sample, or not scored)."""
        if val_y.size == 0 or len(scores) != self.lambdas.size:
            return np.full(self.lambdas.size, np.nan)
        g = recoding(train_counts, alpha, self.recoding_shrink)
        return np.array([np.nan if S is None else np.mean(np.argmax(S * g, axis=1) == val_y) for S in scores])

    def choose(
        self, scores: Sequence[np.ndarray | None], val_y: np.ndarray, train_counts: np.ndarray
    ) -> Selection:
        """The selection from the validation scores per λ (module docstring, §7.6.3), calibrated."""
        acc_all, acc_wr = self.validation_grid(scores, val_y, train_counts)
        L = self.lambdas.size
        if self.alpha == "auto":
            best_lam = [self.best_lambda(acc_all[:, a]) for a in range(self.alpha_grid.size)]
            wr = np.array([acc_wr[best_lam[a], a] for a in range(self.alpha_grid.size)])
            if np.isnan(wr[0]):
                alpha = self.alpha_init
                lam_idx = self.best_lambda(acc_all[:, int(np.argmin(np.abs(self.alpha_grid - alpha)))])
            else:
                ok = np.flatnonzero(wr >= wr[0] - 1e-12)
                a = int(ok[-1])
                alpha, lam_idx = float(self.alpha_grid[a]), best_lam[a]
        else:
            alpha = float(self.alpha)
            at = self.accuracy_at(alpha, scores, val_y, train_counts) if L > 1 else np.full(1, np.nan)
            lam_idx = self.best_lambda(at)
        chosen = scores[lam_idx] if lam_idx < len(scores) else None  # no engines yet: nothing scored
        if chosen is None and any(S is not None for S in scores):  # the default candidate not scored
            lam_idx = next(j for j, S in enumerate(scores) if S is not None)
            chosen = scores[lam_idx]
        per_lambda = self.accuracy_at(alpha, scores, val_y, train_counts)
        calibration = calibrate(
            chosen, alpha, val_y, train_counts, self.calibration_evidence, self.recoding_shrink
        )
        return Selection(lam_idx, alpha, per_lambda, *calibration)
