"""Random Fourier features of the Gaussian kernel (thesis §8.2.3, eq. 8.9, corrected).

For ``k(x, x') = exp(−‖x − x'‖² / (2σ²))`` (Rahimi & Recht), the map

    φ(x) = √(2/D) · cos(Ω x + c),   Ω ∈ ℝ^{D×d}, Ω_ij ~ N(0, σ⁻²),   c_i ~ U[0, 2π],

satisfies E[φ(x)ᵀφ(x')] = k(x, x'). (The thesis prints a wrong normaliser; √(2/D) is the
right one.) ``D`` features turn kernel ridge regression into a linear ridge regression on
φ(x), which :class:`~lifelong_learning.learners.RecursiveRLS` updates in O(D²) per sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lifelong_learning.core.checks import as_rows
from lifelong_learning.core.persistence import Stateful


class RandomFourierFeatures(Stateful):
    """Random Fourier feature map of a Gaussian kernel with bandwidth ``σ``.

    Args:
        n_inputs: input dimension ``d``.
        n_features: number of features ``D``.
        bandwidth: Gaussian kernel length-scale ``σ > 0`` (in the units of the inputs).
        seed: seed of the random frequencies and phases (the map is fixed after construction).

    Example:
        >>> phi = RandomFourierFeatures(3, 100, bandwidth=1.0, seed=0)
        >>> phi.transform(np.zeros((2, 3))).shape
        (2, 100)
    """

    kind = "random_fourier_features"

    def __init__(self, n_inputs: int, n_features: int, bandwidth: float = 1.0, seed: int | None = 0):
        if int(n_inputs) < 1 or int(n_features) < 1:
            raise ValueError("n_inputs and n_features must be ≥ 1")
        if not np.isfinite(bandwidth) or bandwidth <= 0:
            raise ValueError(f"bandwidth must be a positive number, got {bandwidth!r}")
        rng = np.random.default_rng(seed)
        self.bandwidth = float(bandwidth)
        self.seed = seed
        self.frequencies = rng.standard_normal((int(n_features), int(n_inputs))) / self.bandwidth
        self.phases = rng.uniform(0.0, 2.0 * np.pi, int(n_features))

    @property
    def n_inputs(self) -> int:
        """Input dimension ``d``."""
        return self.frequencies.shape[1]

    @property
    def n_features(self) -> int:
        """Number of features ``D``."""
        return self.frequencies.shape[0]

    def transform(self, X: np.ndarray | Any) -> np.ndarray:
        """φ of the rows of ``X`` (``(n, d)`` or ``(d,)``), shape ``(n, D)``.

        Raises:
            ValueError: wrong width or non-finite values.
        """
        proj = as_rows(X, self.n_inputs, "inputs") @ self.frequencies.T
        proj += self.phases
        np.cos(proj, out=proj)
        proj *= np.sqrt(2.0 / self.n_features)
        return proj

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Scalars and arrays that :meth:`from_state` restores exactly."""
        meta = {"bandwidth": self.bandwidth, "seed": self.seed}
        return meta, {"frequencies": self.frequencies.copy(), "phases": self.phases.copy()}

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> RandomFourierFeatures:
        """Rebuild a map saved by :meth:`to_state`; validates shapes and values."""
        try:
            Om = np.asarray(arrays["frequencies"], dtype=np.float64)
            c = np.asarray(arrays["phases"], dtype=np.float64)
            bandwidth = float(meta["bandwidth"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed random Fourier feature state: {exc}") from exc
        if Om.ndim != 2 or c.shape != (Om.shape[0],) or Om.size == 0:
            raise ValueError(f"random Fourier feature state has frequencies {Om.shape}, phases {c.shape}")
        if not (np.all(np.isfinite(Om)) and np.all(np.isfinite(c))):
            raise ValueError("random Fourier feature state holds non-finite values")
        obj = cls(Om.shape[1], Om.shape[0], bandwidth=bandwidth if bandwidth > 0 else 1.0, seed=None)
        obj.frequencies, obj.phases, obj.seed = Om.copy(), c.copy(), meta.get("seed")
        return obj

    def __repr__(self) -> str:
        return (
            f"RandomFourierFeatures(n_inputs={self.n_inputs}, n_features={self.n_features}, "
            f"bandwidth={self.bandwidth:g})"
        )
