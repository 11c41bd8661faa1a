"""The feature map of a learned conical combination of rank-1 Nyström kernels (Machart et al.,
"Stochastic Low-Rank Kernel Learning for Regression", eqs. 1–5).

With active centres ``x_m`` (those of positive weight ``μ_m``) and a Gaussian kernel ``k``, the map

    φ_m(x) = √μ_m · k(x, x_m) / √k(x_m, x_m)    (= √μ_m · k(x, x_m): ``k(x, x) = 1``)

satisfies ``φ(x)ᵀφ(x') = Σ_m μ_m k(x, x_m) k(x', x_m) / k(x_m, x_m) = k̃_μ(x, x')``, the learned
kernel, so ``K̃(μ) = ΦΦᵀ``. Kernel ridge regression with ``λ`` on ``k̃_μ`` is ridge regression on
``Φ`` with the same ``λ`` (``W = (ΦᵀΦ + λI)⁻¹ΦᵀY = Φᵀ(K̃ + λI)⁻¹Y``), so a
:class:`~lifelong_learning.learners.RecursiveRLS` with ``lam = λ`` fed ``Φ`` continues the learned
model online, with ``m₀`` features. Numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lifelong_learning.core.checks import as_rows
from lifelong_learning.learners.nystrom_features import GaussianCentresMap, gaussian_kernel


class SLKLFeatureMap(GaussianCentresMap):
    """``φ_m(x) = √μ_m k(x, x_m)`` over the active centres (module docstring).

    Args:
        centers: the active centres ``x_m``, shape ``(m₀, d)``.
        lengthscale: scalar or ``(d,)`` length-scales ``ℓ > 0`` of ``k(x, z) = exp(−½‖(x − z)/ℓ‖²)``.
        weights: ``μ_m > 0``, shape ``(m₀,)``.

    Example:
        >>> phi = SLKLFeatureMap(np.zeros((1, 2)), 1.0, [4.0])
        >>> phi.transform(np.zeros((3, 2)))[:, 0].tolist()
        [2.0, 2.0, 2.0]
    """

    kind = "slkl"
    extra = "weights"

    def __init__(self, centers: Any, lengthscale: float | Any, weights: Any):
        self._set_centres(centers, lengthscale)
        mu = np.asarray(weights, dtype=np.float64)
        m = self.n_features
        if mu.shape != (m,) or not np.all(np.isfinite(mu)) or np.any(mu <= 0):
            raise ValueError(f"weights must be {m} positive finite numbers, got {np.shape(weights)}")
        self.weights = mu.copy()

    def transform(self, X: np.ndarray | Any) -> np.ndarray:
        """``Φ = k(X, Z) diag(√μ)``, shape ``(n, m₀)``; 1-D input is one row."""
        a = as_rows(X, self.n_inputs, "X")
        return gaussian_kernel(a, self.centers, self.lengthscale) * np.sqrt(self.weights)

    def __repr__(self) -> str:
        return f"SLKLFeatureMap(m0={self.n_features}, d={self.n_inputs})"
