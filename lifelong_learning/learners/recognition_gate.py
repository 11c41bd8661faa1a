"""What the object recognition learner refuses before it learns or answers.

The incremental RLSC (:mod:`~lifelong_learning.learners.rlsc`) is a linear least-squares
model: one labeled sample of a much larger norm than the others dominates ``A = XᵀX + λI``
(its eigenvalue ``‖x‖²`` against the others' ``~‖x̄‖²``), and the rounding errors of the
factor grow with ``‖A‖``: two vectors of 3·10³⁸ (finite float32) flipped 23 of 50 probe
labels and scaled every score by 10²³, for good. Classes and labels cost memory and time for
ever (each class is a column of every λ's right-hand side and of every prediction; the label
rides in every Prediction message). :class:`RecognitionGate` holds the limits, shared by the
``object_recognition`` node and ``benchmarks/bench_robustness_recognition.py``:

- **feature norm**: ``‖x‖₂ > max_feature_norm`` is refused; and once ``norm_min_samples``
  accepted labeled samples are known, ``‖x‖₂ > feature_norm_factor × median`` of the last
  :data:`NORM_WINDOW` accepted labeled norms is refused too. Both for samples to learn and for
  inputs to classify (an absurd input is not answered with a score). Only accepted labeled
  samples enter the median, so refused ones cannot drag it up.
- **labels** (:func:`label_problem`): after stripping surrounding whitespace, 1 to
  ``max_label_length`` characters (code points), all printable (``str.isprintable``: no control
  character such as NUL, tab or newline, no format, surrogate, private-use or unassigned code
  point, no whitespace but the ASCII space).
- **classes**: a label that would be class number ``max_classes + 1`` is refused; the known
  classes keep learning.

Feature norms of EfficientNet-Lite0 (the default extractor: ReLU6 then an average, so every
value is in [0, 6] and ``‖x‖ ≤ 6·√1280 ≈ 215``) on the rendered objects of
:mod:`~lifelong_learning.sim.objects`: 10.5 to 21.8 (medians 16.1 to 16.3) over more than 3,000
views of 128×128, 240×320 and 480×640; sklearn digits as raw pixels: at most 77. Hence ``max_feature_norm`` =
1000 and ``feature_norm_factor`` = 10 by default.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from lifelong_learning.learners.rlsc import IncrementalRLSC

#: how many recent accepted labeled norms the median is taken over
NORM_WINDOW = 200

#: defaults of the object_recognition node's limits; retraining applies the same to bags
DEFAULT_MAX_CLASSES = 256
DEFAULT_MAX_LABEL_LENGTH = 64


@dataclass(frozen=True)
class Refusal:
    """Why an input is refused: ``reason`` is the counted category, ``detail`` the explanation."""

    reason: str
    detail: str


def label_problem(label: str, max_length: int) -> str | None:
    """What is wrong with ``label`` (already stripped of surrounding whitespace), or None.

    The rule: 1 to ``max_length`` characters, every one printable (``str.isprintable``).
    """
    if not label:
        return "the label is empty (or only whitespace)"
    if len(label) > max_length:
        return f"the label has {len(label)} characters, more than max_label_length = {max_length}"
    if not label.isprintable():
        bad = next(c for c in label if not c.isprintable())
        return f"the label holds the unprintable character U+{ord(bad):04X} (control characters are refused)"
    return None


class RecognitionGate:
    """Limits on what the recognition learner takes in: feature norms, labels, classes.

    Args:
        max_feature_norm: absolute bound on ``‖x‖₂`` of any input (learned or classified).
        feature_norm_factor: relative bound: ``‖x‖₂`` at most this times the median norm of the
            recent accepted labeled samples; 0 disables it.
        norm_min_samples: accepted labeled samples needed before the relative bound applies.
        max_classes: most classes the model may hold.
        max_label_length: most characters of a label.

    Not thread-safe: the node calls it under its model lock.
    """

    def __init__(
        self,
        max_feature_norm: float = 1000.0,
        feature_norm_factor: float = 10.0,
        norm_min_samples: int = 20,
        max_classes: int = DEFAULT_MAX_CLASSES,
        max_label_length: int = DEFAULT_MAX_LABEL_LENGTH,
    ):
        if not (np.isfinite(max_feature_norm) and max_feature_norm > 0):
            raise ValueError(f"max_feature_norm must be a positive number, got {max_feature_norm!r}")
        if not (np.isfinite(feature_norm_factor) and (feature_norm_factor == 0 or feature_norm_factor > 1)):
            raise ValueError(f"feature_norm_factor must be 0 (off) or > 1, got {feature_norm_factor!r}")
        if int(norm_min_samples) < 1 or int(max_classes) < 1 or int(max_label_length) < 1:
            raise ValueError("norm_min_samples, max_classes and max_label_length must be ≥ 1")
        self.max_feature_norm = float(max_feature_norm)
        self.feature_norm_factor = float(feature_norm_factor)
        self.norm_min_samples = int(norm_min_samples)
        self.max_classes = int(max_classes)
        self.max_label_length = int(max_label_length)
        self._norms: deque[float] = deque(maxlen=NORM_WINDOW)

    # ---------------------------------------------------------------- norm statistics
    @property
    def n_norms(self) -> int:
        """Accepted labeled norms in the window."""
        return len(self._norms)

    @property
    def median_norm(self) -> float | None:
        """Median norm of the recent accepted labeled samples (None while there is none)."""
        return float(np.median(self._norms)) if self._norms else None

    @property
    def norm_limit(self) -> float:
        """The largest norm accepted now: the absolute bound, or the relative one when lower."""
        limit = self.max_feature_norm
        if self.feature_norm_factor > 0 and len(self._norms) >= self.norm_min_samples:
            limit = min(limit, self.feature_norm_factor * float(np.median(self._norms)))
        return limit

    def accepted(self, x: Any) -> None:
        """Record the norm of a labeled sample that was learned."""
        self._norms.append(float(np.linalg.norm(np.asarray(x, dtype=np.float64))))

    def seed(self, model: IncrementalRLSC) -> int:
        """Fill an empty window from ``model``'s validation buffer (real accepted samples), e.g.
        after a restart; a model with a feature map keeps mapped features there: nothing then.
        Returns the number of norms added."""
        if self._norms or model.feature_map is not None or model.n_validation_ == 0:
            return 0
        X, _ = model.validation_samples()
        for norm in np.linalg.norm(X[-NORM_WINDOW:], axis=1):
            self._norms.append(float(norm))
        return len(self._norms)

    def reset(self) -> None:
        """Forget the norm statistics."""
        self._norms.clear()

    # ---------------------------------------------------------------- checks
    def check_features(self, x: np.ndarray, n_features: int | None) -> Refusal | None:
        """Dimension, finiteness and norm of one input vector (to learn or to classify)."""
        if x.ndim != 1 or x.size == 0 or (n_features is not None and x.size != n_features):
            want = n_features if n_features is not None else "≥ 1"
            return Refusal("wrong feature dimension", f"{x.size} features, expected {want}")
        if not np.all(np.isfinite(x)):
            return Refusal("features not finite", "the features contain NaN or Inf")
        with np.errstate(over="ignore"):
            norm = float(np.linalg.norm(x))
        limit = self.norm_limit
        if not norm <= limit:
            if limit < self.max_feature_norm:
                why = (
                    f"more than feature_norm_factor = {self.feature_norm_factor:g} × the median "
                    f"{limit / self.feature_norm_factor:.3g} of the recent accepted samples"
                )
            else:
                why = f"more than max_feature_norm = {self.max_feature_norm:g}"
            return Refusal("feature norm too large", f"feature norm {norm:.3g} is {why}")
        return None

    def check_label(self, label: str, model: IncrementalRLSC) -> Refusal | None:
        """The label rule (:func:`label_problem`) and the class limit for a new label."""
        problem = label_problem(label, self.max_label_length)
        if problem is not None:
            return Refusal("bad label", problem)
        if not model.has_class(label) and len(model.classes_) >= self.max_classes:
            return Refusal(
                "too many classes",
                f"{label[:40]!r} would be class {len(model.classes_) + 1}, max_classes = {self.max_classes}",
            )
        return None

    def check_labeled(self, x: np.ndarray, label: str, model: IncrementalRLSC) -> Refusal | None:
        """Everything about one labeled sample, before :meth:`IncrementalRLSC.partial_fit`."""
        return self.check_features(x, model.n_features_in_) or self.check_label(label, model)

    def check_model(self, model: IncrementalRLSC) -> None:
        """Raise ValueError when ``model`` (e.g. read from a file) holds what this gate refuses:
        more than ``max_classes`` classes, or a label that breaks the label rule."""
        classes = model.classes_.tolist()
        if len(classes) > self.max_classes:
            raise ValueError(
                f"the model has {len(classes)} classes, more than max_classes = {self.max_classes}"
            )
        for label in classes:
            text = str(label)
            problem = label_problem(text.strip(), self.max_label_length)
            if problem is None and text != text.strip():
                problem = "the label has surrounding whitespace"
            if problem is not None:
                raise ValueError(f"the model holds a refused label {text[:40]!r}: {problem}")
