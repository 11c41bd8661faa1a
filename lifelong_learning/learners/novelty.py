"""How likely an input is to show something never taught: novelty scores of the incremental RLSC
(no ROS imports). One number per row, higher: more likely never taught; measured by the AUROC of
taught against never-taught objects before any threshold is chosen
(``benchmarks/bench_recognition_showing.py``, docs/benchmarks/recognition-showing.md).

With ``A = λI + Σ zᵢzᵢᵀ`` and ``B = Σ zᵢ e_{yᵢ}ᵀ`` of the λ in use (``n`` training rows, ``k_c`` of class
``c``), the class means are ``μ_c = B e_c / k_c``, and the scores (:data:`SCORES`) are:

- ``"confidence"``: ``(1 − max_c p_c) · T/(T − 1)``, one minus the calibrated confidence of the
  answer (the maximum-softmax baseline of Hendrycks and Gimpel, ICLR 2017), scaled to [0, 1] over
  the ``T`` classes known (1: every class equally likely), so that one threshold means the same with
  2 classes as with 50; 0 while one class is known: it is certain of everything, which is why the
  robot asks while it knows fewer than two (:class:`~lifelong_learning.learners.showings.QuestionPolicy`);
- ``"leverage"``: ``n · zᵀA⁻¹z``, the classifier's own leverage of the row (how far it lies from
  every direction the training rows span; ``n`` makes it comparable as the model grows);
- ``"mahalanobis"``: ``n · min_c (z − μ_c)ᵀ A⁻¹ (z − μ_c)``, the distance to the nearest class
  mean in the metric of the training rows' second moment ``A/n`` (Lee et al., NeurIPS 2018, use
  the shared within-class covariance; ``A`` is what the classifier has, at no extra cost). With
  ``u = R⁻ᵀz`` and ``M = R⁻ᵀ[μ_1 … μ_T]`` (``RᵀR = A``): ``‖u − M e_c‖²``, one triangular solve per
  row, ``M`` solved once per model state;
- ``"cosine"``: ``1 − max_c cos(z, μ_c)``, the cosine distance to the nearest class mean.

A showing's novelty is the mean of its frames' (:mod:`~lifelong_learning.learners.showing`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lifelong_learning.learners.recursive_rls import RecursiveRLS

#: the novelty scores :func:`novelty_scores` computes
SCORES = ("confidence", "leverage", "mahalanobis", "cosine")
#: the score the object_recognition node and ``IncrementalRLSC.novelty_score`` use: the best AUROC on
#: never-taught objects (docs/benchmarks/recognition-showing.md)
DEFAULT_SCORE = "confidence"


def confidence_novelty(P: np.ndarray) -> np.ndarray:
    """``"confidence"`` of each row of calibrated probabilities ``P`` (rows × ``T`` classes):
    ``(1 − max_c p_c) · T/(T − 1)``, unscaled while ``T`` ≤ 1."""
    T = P.shape[1]
    return (1.0 - P.max(axis=1)) * (T / (T - 1) if T > 1 else 1.0)


def class_means(rhs: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``(d × T')`` means ``B e_c / k_c`` of the classes with a training row."""
    have = np.flatnonzero(counts > 0)
    return rhs[:, have] / counts[have][None, :]


def mahalanobis(U: np.ndarray, M: np.ndarray, n: int) -> np.ndarray:
    """``n · min_c ‖u − M e_c‖²`` per column ``u`` of ``U`` (``d × rows``; ``M``: ``d × T``)."""
    if M.shape[1] == 0:
        return np.full(U.shape[1], np.inf)
    sq = (U * U).sum(axis=0)[:, None] - 2.0 * (U.T @ M) + (M * M).sum(axis=0)[None, :]
    return n * np.maximum(sq.min(axis=1), 0.0)


def cosine(Z: np.ndarray, means: np.ndarray) -> np.ndarray:
    """``1 − max_c cos(z, μ_c)`` per row of ``Z``."""
    if means.shape[1] == 0:
        return np.ones(Z.shape[0])
    unit = means / np.maximum(np.linalg.norm(means, axis=0, keepdims=True), 1e-300)
    rows = Z / np.maximum(np.linalg.norm(Z, axis=1, keepdims=True), 1e-300)
    return 1.0 - (rows @ unit).max(axis=1)


def novelty_scores(
    engine: RecursiveRLS, Z: np.ndarray, counts: np.ndarray, score: str, cache: dict[str, Any]
) -> np.ndarray:
    """The novelty ``score`` (not ``"confidence"``, which needs the calibrated probabilities) of rows
    ``Z`` (model features, checked) for the engine of the λ in use and the training ``counts`` per
    class. ``cache`` keeps ``M`` (module docstring) for as long as the engine and counts are the same."""
    n = int(counts.sum())
    if score == "leverage":
        U = engine.whiten(Z)
        return n * (U * U).sum(axis=0)
    if score == "cosine":
        return cosine(Z, class_means(engine.rhs, counts))
    if score != "mahalanobis":
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    key = (id(engine), engine.n_samples, counts.tobytes())
    if cache.get("key") != key:
        cache.clear()
        cache["M"], cache["key"] = engine.whiten(class_means(engine.rhs, counts).T), key
    return mahalanobis(engine.whiten(Z), cache["M"], n)
