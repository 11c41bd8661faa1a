"""Normalisation of CNN features before the learner (no ROS imports).

The features of one object change with the room's light and the crop (brightness scales every
activation; a crop with more room adds activations of the room); a linear classifier on the raw
features inherits that. The choices (``feature_normalisation`` of the feature_extractor node):

- ``"none"``: the pooled features as the network gives them;
- ``"l2"``: ``f / ‖f‖``;
- ``"sqrt_l2"``: ``√f / ‖√f‖`` (the Hellinger, or power, normalisation of Perronnin et al., ECCV
  2010: the square root damps the few large activations, then the L2 norm removes the overall
  scale). EfficientNet-Lite's pooled features are ≥ 0 (ReLU6, then an average); a negative value
  (another model) is taken as 0 here.

Both normalised kinds are scaled to the norm :data:`SCALE` (the median norm of EfficientNet-Lite0's
raw features on the simulated objects, 16), so that the learner's λ grid keeps its meaning and the
recognizer's norm limits still apply. Measured on the benchmark's world
(docs/benchmarks/recognition-showing.md): ``sqrt_l2`` is the default.
"""

from __future__ import annotations

import numpy as np

#: values of ``feature_normalisation``
NORMALISATIONS = ("none", "l2", "sqrt_l2")
#: the feature_extractor's ``feature_normalisation`` when none is given
DEFAULT_NORMALISATION = "sqrt_l2"
#: the norm of normalised features
SCALE = 16.0


def normalised(features: np.ndarray, kind: str) -> np.ndarray:
    """``features`` (``(n, d)`` or ``(d,)``) normalised by ``kind`` (module docstring), float32.

    Raises:
        ValueError: an unknown ``kind``.
    """
    if kind not in NORMALISATIONS:
        raise ValueError(f"feature normalisation must be one of {NORMALISATIONS}, got {kind!r}")
    F = np.asarray(features, dtype=np.float32)
    if kind == "none":
        return F
    if kind == "sqrt_l2":
        F = np.sqrt(np.maximum(F, 0.0))
    norm = np.linalg.norm(F, axis=-1, keepdims=True)
    return (SCALE * F / np.maximum(norm, np.float32(1e-12))).astype(np.float32)
