"""Calibrated confidence by temperature scaling (Guo et al. 2017, "On Calibration of Modern Neural
Networks", §4.2), fitted on held-out samples.

The classifier's scores ``s ∈ R^T`` (one per class) become probabilities
``p = softmax(t · s)`` with one inverse temperature ``t = 1/T > 0``; the confidence of an answer is
the probability of its class, ``max_c p_c``. Scaling does not change which class is on top, so
accuracy is unchanged. ``t`` minimises the mean negative log-likelihood of held-out samples
``(s_i, y_i)``:

    NLL(t) = (1/n) Σ_i [ logsumexp(t s_i) − Σ_c q_ic t s_ic ],

a convex function of ``t`` (its second derivative is the mean variance of the scores under ``p``),
minimised by a safeguarded Newton iteration (:func:`fit_inverse_temperature`).

The targets ``q_i`` are the one-hot labels smoothed as in Platt (1999, §2.2) so that a held-out
set with no error does not drive ``t`` to infinity (confidence 1 everywhere): the true class gets
``1 − ε`` with ``ε = 1/(k + 2)`` (Laplace's rule: after ``k`` independent answers, all correct, the
estimate of an error is ``1/(k + 2)``), the other classes share ``ε``. ``k`` is the ``n`` held-out
samples when they are independent draws; a robot's held-out frames are not: those of one class
are cut from the same few showings, near copies of each other and of the frames learned from, and
``k`` is better the number of classes held out (``calibration_evidence`` of
:class:`~lifelong_learning.learners.IncrementalRLSC`, measured in
docs/benchmarks/recognition-showing.md). ``t`` is also kept in ``[T_MIN, T_MAX]``.

:func:`expected_calibration_error` is the measure of calibration (Guo et al., eq. 3: the
answers binned by confidence into ``M`` equal-width bins, ``Σ_m |B_m|/n · |acc(B_m) − conf(B_m)|``).
"""

from __future__ import annotations

import numpy as np

#: the range of the inverse temperature ``t`` (scores of one-vs-all RLSC are of order 1)
T_MIN, T_MAX = 1e-3, 1e4
#: the inverse temperature used while uncalibrated: the plain softmax of the scores
T_DEFAULT = 1.0


def softmax(scores: np.ndarray, inverse_temperature: float = 1.0) -> np.ndarray:
    """``softmax(t · s)`` along the last axis (rows of ``scores``), computed without overflow."""
    z = inverse_temperature * np.asarray(scores, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _nll_derivatives(t: float, S: np.ndarray, target_score: np.ndarray) -> tuple[float, float, float]:
    """NLL(t) and its first two derivatives (module docstring); ``target_score`` = ``Σ_c q_ic s_ic``."""
    z = t * S
    m = z.max(axis=1)
    e = np.exp(z - m[:, None])
    tot = e.sum(axis=1)
    p = e / tot[:, None]
    mean_s = np.einsum("ij,ij->i", p, S)
    var_s = np.maximum(np.einsum("ij,ij->i", p, S * S) - mean_s**2, 0.0)
    nll = float(np.mean(np.log(tot) + m - t * target_score))
    return nll, float(np.mean(mean_s - target_score)), float(np.mean(var_s))


def fit_inverse_temperature(
    scores: np.ndarray, labels: np.ndarray, start: float | None = None, answers: int | None = None
) -> float:
    """The inverse temperature ``t`` minimising the smoothed NLL of held-out ``scores`` ``(n, T)``
    with true columns ``labels`` ``(n,)`` (module docstring), in ``[T_MIN, T_MAX]``; ``answers``:
    the independent answers ``k`` of the smoothing (None: the ``n`` samples).

    Newton steps on ``log t`` inside a bracket that shrinks with the sign of the derivative
    (bisection when a step leaves it); ``start`` (e.g. the previous fit) is the first guess.

    Raises:
        ValueError: no sample, fewer than two classes, mismatched shapes or non-finite scores.
    """
    S = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    if S.ndim != 2 or S.shape[0] == 0 or S.shape[1] < 2 or y.shape != (S.shape[0],):
        raise ValueError("fit_inverse_temperature needs (n, T ≥ 2) scores and n labels, n ≥ 1")
    if not np.all(np.isfinite(S)) or np.any((y < 0) | (y >= S.shape[1])):
        raise ValueError("scores must be finite and labels in range")
    n, T = S.shape
    if answers is not None and answers < 1:
        raise ValueError(f"answers must be >= 1, got {answers}")
    eps = 1.0 / ((n if answers is None else answers) + 2)
    true_score = S[np.arange(n), y]
    target_score = (1.0 - eps) * true_score + eps * (S.sum(axis=1) - true_score) / (T - 1)
    lo, hi = np.log(T_MIN), np.log(T_MAX)
    u = float(np.clip(np.log(start if start and start > 0 else T_DEFAULT), lo, hi))
    for _ in range(100):
        t = float(np.exp(u))
        _, g, h = _nll_derivatives(t, S, target_score)
        g_u, h_u = g * t, h * t * t + g * t  # derivatives with respect to u = log t
        if g_u > 0:
            hi = u
        else:
            lo = u
        if abs(g_u) < 1e-10 or hi - lo < 1e-9:
            break
        step = -g_u / h_u if h_u > 0 else np.inf
        nxt = u + step
        u = nxt if lo < nxt < hi else 0.5 * (lo + hi)
    return float(np.exp(np.clip(u, np.log(T_MIN), np.log(T_MAX))))


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, n_bins: int = 10) -> float:
    """Expected calibration error (Guo et al. 2017, eq. 3) of answers with ``confidence`` in [0, 1]
    and whether each was ``correct``: ``M = n_bins`` equal-width bins ``((m−1)/M, m/M]`` (the
    first one includes 0)."""
    conf = np.asarray(confidence, dtype=np.float64).ravel()
    hit = np.asarray(correct, dtype=np.float64).ravel()
    if conf.size == 0:
        return float("nan")
    bins = np.clip(np.ceil(conf * n_bins).astype(np.int64) - 1, 0, n_bins - 1)
    total = 0.0
    for b in np.unique(bins):
        m = bins == b
        total += m.mean() * abs(conf[m].mean() - hit[m].mean())
    return float(total)
