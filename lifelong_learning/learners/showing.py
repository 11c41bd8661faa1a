"""One answer per frame, and one per showing: what the recognizer says (no ROS imports).

A person does not show a robot one frame: they hold the object up for a few seconds and turn it.
The frames of one showing are evidence about one object, accumulated by a rule
(:data:`RULES`, measured in docs/benchmarks/recognition-showing.md) over the classifier's
recoded scores ``s_i`` and calibrated probabilities ``p_i = softmax(t · s_i)`` of its ``n`` frames:

- ``"mean_proba"``: ``p̄ = (1/n) Σ p_i``; the answer is ``argmax p̄``, its confidence ``max p̄``;
- ``"mean_scores"``: ``p = softmax(t · (1/n) Σ s_i)`` (the scores of the frames' mean feature: the
  model is linear);
- ``"log_proba"``: ``p ∝ exp((1/n) Σ log p_i)`` (the geometric mean: frames as independent experts,
  tempered by ``n`` so that the confidence does not go to 1 with the number of frames);
- ``"vote"``: each frame votes for its top class; confidence: the share of votes of the winner.

A showing's novelty is the mean of its frames' novelty scores
(:meth:`~lifelong_learning.learners.IncrementalRLSC.novelty_score`, higher: more likely never
taught). The answer's label is ``""`` (unknown) when the novelty is above ``novelty_threshold``
(once the model's confidence is calibrated) or the confidence below ``unknown_threshold``; the
best class is still named by the guesses (:func:`best_guesses`), which is what the robot asks about.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from lifelong_learning.learners.novelty import DEFAULT_SCORE, confidence_novelty
from lifelong_learning.learners.rlsc import IncrementalRLSC

#: the rules :func:`answer_showing` can accumulate a showing's frames with
RULES = ("mean_proba", "mean_scores", "log_proba", "vote")
#: the rule the object_recognition node uses: the best per-showing accuracy measured
DEFAULT_RULE = "mean_proba"


class FrameAnswer(NamedTuple):
    """The answer for one frame."""

    #: the answer: ``top_label``, or "" (unknown) when novel or not confident enough
    label: str
    #: the class with the highest score ("" while no class is known)
    top_label: str
    #: the calibrated probability that ``top_label`` is right
    confidence: float
    #: the frame's novelty score (higher: more likely never taught; 0 while no class is known)
    novelty: float
    #: every known class, in the model's order
    labels: list[str]
    #: the recoded score of each class of ``labels``
    scores: list[float]


class ShowingAnswer(NamedTuple):
    """The answer for one showing (:func:`answer_showing`)."""

    #: the answer: the best class, or "" (unknown) when novel or not confident enough
    label: str
    #: the accumulated confidence of the best class
    confidence: float
    #: the mean novelty score of the showing's frames
    novelty: float


def _known(
    model: IncrementalRLSC, label: str, confidence: float, novelty: float, unknown: float, novel: float
) -> str:
    """``label``, or "" when not confident enough or novel; the novelty threshold applies once the
    confidence is calibrated (an uncalibrated softmax of RLSC scores is underconfident: everything
    would be novel)."""
    calibrated = model.calibration_[1] > 0
    return label if confidence >= unknown and (novelty <= novel or not calibrated) else ""


def answer_frame(
    model: IncrementalRLSC,
    x: np.ndarray,
    unknown_threshold: float = 0.0,
    novelty_threshold: float = np.inf,
    score: str = DEFAULT_SCORE,
    bound: Callable[[np.ndarray], np.ndarray] | None = None,
) -> FrameAnswer:
    """The answer for one feature vector ``x`` (already checked by the caller's gate); ``bound``:
    applied to the scores before the confidence is computed from them (the class is that of the
    scores before it: :mod:`~lifelong_learning.learners.truncation`).

    Raises:
        ValueError: the model's own checks (dimension, a feature map's output).
    """
    if len(model.classes_) == 0:
        return FrameAnswer("", "", 0.0, 0.0, [], [])
    scores = model.decision_function(x)[0]
    best = int(np.argmax(scores))
    if bound is not None:
        scores = bound(scores)
    confidence = float(model.proba_from_scores(scores)[best])
    novelty = float(model.novelty_score(x, score)[0])
    labels = [str(c) for c in model.classes_.tolist()]
    top = labels[best]
    label = _known(model, top, confidence, novelty, unknown_threshold, novelty_threshold)
    return FrameAnswer(label, top, confidence, novelty, labels, scores.tolist())


def evidence(model: IncrementalRLSC, X: np.ndarray, rule: str = DEFAULT_RULE) -> np.ndarray:
    """The accumulated probability of every class (``classes_`` order) over the frames ``X``."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    return _evidence(model, model.decision_function(X), rule)[0]


def _evidence(model: IncrementalRLSC, S: np.ndarray, rule: str) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`evidence` from the frames' recoded scores ``S``, and the frames' calibrated
    probabilities when the rule computed them (None otherwise)."""
    if rule == "mean_scores":
        return model.proba_from_scores(S.mean(axis=0, keepdims=True))[0], None
    if rule == "vote":
        return np.bincount(np.argmax(S, axis=1), minlength=S.shape[1]) / S.shape[0], None
    P = model.proba_from_scores(S)
    if rule == "mean_proba":
        return P.mean(axis=0), P
    log_mean = np.log(np.maximum(P, 1e-300)).mean(axis=0)
    p = np.exp(log_mean - log_mean.max())
    return p / p.sum(), P


def answer_showing(
    model: IncrementalRLSC,
    X: np.ndarray,
    unknown_threshold: float = 0.0,
    novelty_threshold: float = np.inf,
    rule: str = DEFAULT_RULE,
    score: str = DEFAULT_SCORE,
) -> ShowingAnswer:
    """The answer for the frames ``X`` (``n × d``, one showing) of ``model``: the best class by
    ``rule``, its confidence and the showing's novelty (module docstring); ``""`` while no class
    is known.

    Raises:
        ValueError: no frame, or the model's own checks.
    """
    return judge_showing(model, X, 0, unknown_threshold, novelty_threshold, rule, score)[0]


def judge_showing(
    model: IncrementalRLSC,
    X: np.ndarray,
    k: int,
    unknown_threshold: float = 0.0,
    novelty_threshold: float = np.inf,
    rule: str = DEFAULT_RULE,
    score: str = DEFAULT_SCORE,
) -> tuple[ShowingAnswer, list[tuple[str, float]]]:
    """:func:`answer_showing` and :func:`best_guesses` (the ``k`` best) of the frames ``X``, from one
    evaluation of the classifier's scores (a node asks both of every frame's showing).

    Raises:
        ValueError: no frame, an unknown rule, or the model's own checks.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    if X.shape[0] == 0:
        raise ValueError("a showing needs at least one frame")
    if len(model.classes_) == 0:
        return ShowingAnswer("", 0.0, 0.0), []
    S = model.decision_function(X)
    p, P = _evidence(model, S, rule)
    best = int(np.argmax(p))
    if score == "confidence":
        frames = confidence_novelty(model.proba_from_scores(S) if P is None else P)
    else:
        frames = model.novelty_score(X, score)
    novelty = float(np.mean(frames))
    label = _known(
        model, str(model.classes_[best]), float(p[best]), novelty, unknown_threshold, novelty_threshold
    )
    return ShowingAnswer(label, float(p[best]), novelty), _guesses(model, p, k)


def _guesses(model: IncrementalRLSC, p: np.ndarray, k: int) -> list[tuple[str, float]]:
    order = np.argsort(-p, kind="stable")[:k]
    return [(str(model.classes_[i]), float(p[i])) for i in order]


def best_guesses(
    model: IncrementalRLSC, X: np.ndarray, k: int = 3, rule: str = DEFAULT_RULE
) -> list[tuple[str, float]]:
    """The ``k`` classes of highest accumulated probability over the frames ``X``, best first."""
    if len(model.classes_) == 0:
        return []
    return _guesses(model, evidence(model, np.atleast_2d(np.asarray(X, dtype=np.float64)), rule), k)
