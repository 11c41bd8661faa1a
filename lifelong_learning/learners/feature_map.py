"""The feature-map protocol: a fixed map x ↦ φ(x) in front of a linear learner.

Random Fourier features (online dynamics residual), Nyström maps and learned low-rank (SLKL)
maps (exported by the offline methods) are separate, swappable objects that follow this protocol, so a learner
built on :class:`~lifelong_learning.learners.RecursiveRLS` can take either.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class FeatureMap(Protocol):
    """x ∈ ℝ^{n_inputs} ↦ φ(x) ∈ ℝ^{n_features}; stateless after construction."""

    #: the ``kind`` written to model files; :func:`feature_map_from_state` dispatches on it
    kind: str

    @property
    def n_inputs(self) -> int:
        """Input dimension."""

    @property
    def n_features(self) -> int:
        """Output (feature) dimension."""

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Map rows ``X`` (``(n, n_inputs)``) to features (``(n, n_features)``), float64."""

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Scalars and arrays that the class's ``from_state`` restores exactly."""


def feature_map_kinds() -> dict[str, type]:
    """The feature maps a model file may hold, by ``kind``: :func:`feature_map_from_state`
    dispatches on it. A new map is added here (imported on call: cheap, no torch, no ROS; the
    maps' modules do not import this one, so the import graph has no cycle)."""
    from lifelong_learning.learners.nystrom_features import NystromFeatureMap
    from lifelong_learning.learners.random_features import RandomFourierFeatures
    from lifelong_learning.learners.slkl_features import SLKLFeatureMap

    return {cls.kind: cls for cls in (RandomFourierFeatures, NystromFeatureMap, SLKLFeatureMap)}


def feature_map_from_state(kind: str, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> FeatureMap:
    """Rebuild a feature map of a known kind (:func:`feature_map_kinds`) from its saved state."""
    kinds = feature_map_kinds()
    try:
        cls = kinds[kind]
    except KeyError:
        raise ValueError(f"unknown feature map kind {kind!r}; known: {sorted(kinds)}") from None
    return cls.from_state(meta, arrays)  # type: ignore[attr-defined]


def store_feature_map(
    feature_map: FeatureMap, meta: dict[str, Any], arrays: dict[str, np.ndarray], key: str = "feature_map"
) -> None:
    """Nest ``feature_map`` in a learner's model-file state: ``meta[key] = {"kind", "meta"}``
    and its arrays under ``"<key>/..."``. The one layout every learner and the Nyström export use."""
    fm_meta, fm_arrays = feature_map.to_state()
    meta[key] = {"kind": feature_map.kind, "meta": fm_meta}
    arrays.update({f"{key}/{k}": v for k, v in fm_arrays.items()})


def restore_feature_map(
    meta: dict[str, Any], arrays: dict[str, np.ndarray], key: str = "feature_map"
) -> FeatureMap | None:
    """The feature map :func:`store_feature_map` nested in a state (None if there is none).

    Raises:
        ValueError: a malformed entry or an unknown kind.
    """
    entry = meta.get(key)
    if entry is None:
        return None
    if not isinstance(entry, dict) or "kind" not in entry or not isinstance(entry.get("meta"), dict):
        raise ValueError(f"malformed {key!r} entry in the model state")
    prefix = key + "/"
    nested = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
    return feature_map_from_state(str(entry["kind"]), entry["meta"], nested)
