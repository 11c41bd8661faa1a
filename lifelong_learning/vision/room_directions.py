"""The room's directions projected out of the features (no ROS imports).

An object shown in another room moves in feature space, and a classifier taught in one room follows
the room: most wrong answers name an object taught in a room like the one it is asked in. Nuisance
attribute projection (Solomonoff, Campbell and Boardman, ICASSP 2005, for the channel of speaker
recognition; here the room) removes the directions of that move. From features ``x_i`` of labels
``y_i`` seen in sessions ``g_i`` (one label in one room, or one showing), each session's move from
its label's centre is

    δ_g = mean_{i ∈ g} x_i − (1/|G_y|) Σ_{g' ∈ G_y} mean_{i ∈ g'} x_i

over the sessions ``G_y`` of its label (labels seen in one session only move nowhere and are left
out). The ``k`` leading right singular vectors ``V_k`` (``k × d``, orthonormal rows) of the stacked
``δ_g`` (those of a singular value above :data:`RELATIVE_RANK` of the largest) span the room's
directions, and every feature becomes

    x ↦ s · (x − V_kᵀ V_k x) / ‖x − V_kᵀ V_k x‖,

scaled back to the norm ``s`` of the published features (:data:`~lifelong_learning.vision.
normalisation.SCALE`). Measured on the recognition benchmark's world with directions learned on its
other worlds: docs/benchmarks/recognition-room-projection.md. Files are model files
(:mod:`~lifelong_learning.core.model_file`, kind :data:`KIND`: the ``directions``, how many
sessions and labels they were learned from, and the feature space: the network and the
normalisation of the features): they load without executing code. Directions belong to one feature
space: EfficientNet-Lite0 and -Lite1 both give 1,280 values, and directions of one would be applied to
the other unnoticed, so a file that records its space is refused by features of another
(:meth:`RoomDirections.load`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from lifelong_learning.core.model_file import ModelFile, load_model_file, save_model_file
from lifelong_learning.vision.normalisation import NORMALISATIONS, SCALE

#: the model-file kind of a room directions file
KIND = "room_directions"
#: the most a file's arrays may declare (bytes): 1,000 directions of 8,192 float64 values
MAX_FILE_BYTES = 1000 * 8192 * 8
#: how far from orthonormal a file's rows may be (largest entry of ``V Vᵀ − I``)
ORTHONORMAL_TOLERANCE = 1e-4
#: a move's direction is kept when its singular value is at least this share of the largest: below it
#: lie the rounding errors of float32 features (about 1e-7 of them), not moves
RELATIVE_RANK = 1e-5


@dataclass(frozen=True, eq=False)
class RoomDirections:
    """``k × d`` orthonormal rows: the directions :meth:`project` removes."""

    directions: np.ndarray
    #: sessions and labels they were learned from (0: not known)
    sessions: int = 0
    labels: int = 0
    #: the share of the moves' squared length along the directions (0: not known)
    explained: float = 0.0
    #: the network whose features they were learned from: a backbone's name or a model file's path
    #: ('' = not recorded)
    network: str = ""
    #: the features' normalisation (:data:`~lifelong_learning.vision.normalisation.NORMALISATIONS`;
    #: '' = not recorded)
    normalisation: str = ""

    def __post_init__(self) -> None:
        V = self.directions
        if V.ndim != 2 or V.shape[0] < 1 or V.shape[0] >= V.shape[1]:
            raise ValueError(f"directions must be k × d with 1 <= k < d, got shape {V.shape}")
        if not np.all(np.isfinite(V)):
            raise ValueError("directions hold NaN or Inf")
        off = np.abs(V @ V.T - np.eye(V.shape[0])).max()
        if off > ORTHONORMAL_TOLERANCE:
            raise ValueError(f"directions are not orthonormal (|V Vᵀ − I| up to {off:.2g})")

    @property
    def dim(self) -> int:
        """The features' dimension ``d``."""
        return int(self.directions.shape[1])

    def project(self, features: np.ndarray, scale: float = SCALE) -> np.ndarray:
        """``features`` (``(n, d)`` or ``(d,)``) less their part along the directions, scaled to the norm
        ``scale``, float32.

        Raises:
            ValueError: another dimension than the directions'.
        """
        F = np.asarray(features, dtype=np.float64)
        if F.shape[-1] != self.dim:
            raise ValueError(f"features have {F.shape[-1]} values, the room directions {self.dim}")
        V = self.directions
        G = F - (F @ V.T) @ V
        norm = np.linalg.norm(G, axis=-1, keepdims=True)
        return (scale * G / np.maximum(norm, 1e-12)).astype(np.float32)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the file atomically (complete or absent; ``~`` expanded): a model file of kind
        :data:`KIND`."""
        meta = {
            "sessions": int(self.sessions),
            "labels": int(self.labels),
            "explained": float(self.explained),
            "network": str(self.network),
            "normalisation": str(self.normalisation),
        }
        save_model_file(Path(path).expanduser(), ModelFile(KIND, meta, {"directions": self.directions}))

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        dim: int | None = None,
        network: str | None = None,
        normalisation: str | None = None,
    ) -> RoomDirections:
        """Read a file :meth:`save` wrote (``~`` expanded; no code executed, sizes bounded before
        anything is allocated); ``dim``, ``network`` and ``normalisation``: those of the features the
        directions will be removed from (a network is compared by its last path component, so that a
        model file copied elsewhere is still the same network; what the file does not record is not
        compared).

        Raises:
            ValueError: not such a file (missing, not a regular file, truncated, corrupt, too
            large, another kind), bad content, or another dimension, network or normalisation.
        """
        path = Path(path).expanduser()
        model = load_model_file(path, KIND, max_bytes=MAX_FILE_BYTES)  # ModelFileError: a ValueError
        try:
            V = np.asarray(model.arrays["directions"], dtype=np.float64)
            meta = model.meta
            space = {key: meta.get(key, "") for key in ("network", "normalisation")}
            if not all(isinstance(value, str) for value in space.values()):
                raise TypeError(f"network and normalisation must be strings, got {space}")
            if space["normalisation"] not in ("", *NORMALISATIONS):
                raise ValueError(
                    f"normalisation must be one of {NORMALISATIONS}, got {space['normalisation']!r}"
                )
            out = cls(
                V,
                int(meta.get("sessions", 0)),
                int(meta.get("labels", 0)),
                float(meta.get("explained", 0)),
                **space,
            )
        except (KeyError, TypeError, ValueError, OverflowError) as error:
            raise ValueError(f"room directions {path}: {error!r}") from None
        if dim is not None and out.dim != dim:
            raise ValueError(f"room directions {path} are {out.dim}-d, the features {dim}-d")
        if network and out.network and Path(out.network).name != Path(network).name:
            raise ValueError(
                f"room directions {path} were learned from {out.network} features, these are {network}'s"
            )
        if normalisation and out.normalisation and out.normalisation != normalisation:
            raise ValueError(
                f"room directions {path} were learned from features normalised {out.normalisation!r}, "
                f"these are normalised {normalisation!r}"
            )
        return out

    def in_space(self, network: str, normalisation: str) -> RoomDirections:
        """These directions, recorded as learned from ``network``'s features normalised by
        ``normalisation``.

        Raises:
            ValueError: an empty network, or a normalisation not in ``NORMALISATIONS``.
        """
        if not str(network).strip() or normalisation not in NORMALISATIONS:
            raise ValueError(
                f"a feature space is a network and one of {NORMALISATIONS}, "
                f"got {network!r} and {normalisation!r}"
            )
        return replace(self, network=str(network), normalisation=str(normalisation))

    @classmethod
    def fit(
        cls,
        features: np.ndarray,
        labels: Sequence[str],
        sessions: Sequence[object],
        k: int,
        fewer: bool = False,
    ) -> RoomDirections:
        """The ``k`` leading directions of the sessions' moves (module docstring) of ``features``
        (``n × d``) with their ``labels`` and ``sessions`` (any hashable id per row); ``fewer``: as many
        as the moves span when that is fewer than ``k``.

        Raises:
            ValueError: sizes that differ, NaN or Inf, no move (no label seen in two sessions), or
            (unless ``fewer``) moves that span fewer than ``k`` directions.
        """
        X = np.asarray(features, dtype=np.float64)
        if X.ndim != 2 or len(labels) != len(X) or len(sessions) != len(X):
            raise ValueError("features must be n × d, with one label and one session per row")
        if not np.all(np.isfinite(X)):
            raise ValueError("features hold NaN or Inf")
        groups: dict[str, dict[object, list[int]]] = {}
        for i, (label, session) in enumerate(zip(labels, sessions, strict=True)):
            groups.setdefault(str(label), {}).setdefault(session, []).append(i)
        moves = []
        kept = 0
        for by_session in groups.values():
            if len(by_session) < 2:
                continue
            kept += 1
            means = np.stack([X[rows].mean(axis=0) for rows in by_session.values()])
            moves.append(means - means.mean(axis=0))
        s, Vt = np.zeros(1), np.zeros((0, X.shape[1]))
        if moves:
            _, s, Vt = np.linalg.svd(np.concatenate(moves), full_matrices=False)
        rank = min(int(np.sum(s > RELATIVE_RANK * s[0])) if s[0] > 0 else 0, X.shape[1] - 1)
        n = min(k, rank) if fewer else k
        if kept == 0:
            raise ValueError("no label was seen in two sessions or more: nothing moves")
        if not 1 <= n <= rank:
            raise ValueError(f"{k} directions asked for; the moves of {kept} labels span {rank}")
        explained = float(np.sum(s[:n] ** 2) / np.sum(s**2))
        return cls(Vt[:n].copy(), sum(len(m) for m in moves), kept, explained)
