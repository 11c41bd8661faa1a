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
from lifelong_learning.core.persistence import Stateful
from lifelong_learning.learners.nystrom_features import gaussian_kernel


class SLKLFeatureMap(Stateful):
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

    def __init__(self, centers: Any, lengthscale: float | Any, weights: Any):
        Z = np.array(centers, dtype=np.float64, ndmin=2)
        if Z.ndim != 2 or Z.shape[0] < 1 or Z.shape[1] < 1 or not np.all(np.isfinite(Z)):
            raise ValueError(
                f"centers must be a finite (m, d) array with m >= 1, got shape {np.shape(centers)}"
            )
        ls = np.asarray(lengthscale, dtype=np.float64)
        if ls.ndim > 1 or (ls.ndim == 1 and ls.shape[0] != Z.shape[1]):
            raise ValueError(f"lengthscale must be a scalar or have {Z.shape[1]} entries")
        if not np.all(np.isfinite(ls)) or np.any(ls <= 0):
            raise ValueError("lengthscale must be positive and finite")
        mu = np.asarray(weights, dtype=np.float64)
        if mu.shape != (Z.shape[0],) or not np.all(np.isfinite(mu)) or np.any(mu <= 0):
            raise ValueError(f"weights must be {Z.shape[0]} positive finite numbers, got {np.shape(weights)}")
        self.centers = Z
        self.lengthscale = np.broadcast_to(ls, (Z.shape[1],)).copy()
        self.weights = mu.copy()

    @property
    def n_inputs(self) -> int:
        """Input dimension ``d``."""
        return self.centers.shape[1]

    @property
    def n_features(self) -> int:
        """Active centres ``m₀``."""
        return self.centers.shape[0]

    def transform(self, X: np.ndarray | Any) -> np.ndarray:
        """``Φ = k(X, Z) diag(√μ)``, shape ``(n, m₀)``; 1-D input is one row."""
        a = as_rows(X, self.n_inputs, "X")
        return gaussian_kernel(a, self.centers, self.lengthscale) * np.sqrt(self.weights)

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Scalars and arrays for the model file."""
        return {"n_inputs": self.n_inputs, "n_features": self.n_features}, {
            "centers": self.centers.copy(),
            "lengthscale": self.lengthscale.copy(),
            "weights": self.weights.copy(),
        }

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> SLKLFeatureMap:
        """Rebuild from :meth:`to_state` output (ValueError on missing or inconsistent arrays)."""
        try:
            fm = cls(arrays["centers"], arrays["lengthscale"], arrays["weights"])
        except KeyError as exc:
            raise ValueError(f"slkl feature map state lacks {exc}") from None
        if meta.get("n_features", fm.n_features) != fm.n_features:
            raise ValueError("slkl feature map state is inconsistent")
        return fm

    def __repr__(self) -> str:
        return f"SLKLFeatureMap(m0={self.n_features}, d={self.n_inputs})"
