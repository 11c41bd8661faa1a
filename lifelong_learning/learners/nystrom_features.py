"""Nyström feature map of a Gaussian kernel, exported by the offline tuner (Meanti et al.).

With centres ``Z`` (``m × d``), length-scales ``ℓ`` and ``L`` the lower Cholesky factor of
``K_mm + εI``, the map

    φ(x) = L⁻¹ k(Z, x)  ∈ ℝ^m

satisfies ``φ(x)ᵀφ(x') = k(x, Z) K_mm⁻¹ k(Z, x')`` (the Nyström approximation of ``k``).
Ridge regression on ``Φ = K_nm L⁻ᵀ`` with regularization ``nλ`` has weights ``W = Lᵀβ`` where
``β = (K_nmᵀK_nm + nλK_mm)⁻¹K_nmᵀY`` is Nyström KRR, so a
:class:`~lifelong_learning.learners.RecursiveRLS` (``lam = nλ``) fed ``Φ`` continues a tuned
Nyström model online. Numpy only (no torch), so the online nodes stay light.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from lifelong_learning.core.checks import as_rows
from lifelong_learning.core.linalg import jittered_cholesky
from lifelong_learning.core.persistence import Stateful


def gaussian_kernel(X: np.ndarray, Z: np.ndarray, lengthscale: np.ndarray) -> np.ndarray:
    """``K[i, j] = exp(−½‖(x_i − z_j)/ℓ‖²)``, shape ``(n, m)``, for rows ``X`` and ``Z`` and
    length-scales ``ℓ`` (``(d,)`` or a scalar)."""
    A = X / lengthscale
    B = Z / lengthscale
    sq = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
    return np.exp(-0.5 * np.maximum(sq, 0.0))


class GaussianCentresMap(Stateful):
    """What a feature map over Gaussian-kernel centres keeps: the centres ``Z`` (``m × d``), the
    length-scales ``ℓ`` (``d``), and one array of its own, named by :attr:`extra` (checked by the
    subclass): their validation, sizes and model-file state."""

    kind = ""
    #: the name of the subclass's own array (an attribute, a constructor argument and a state array)
    extra = ""

    def _set_centres(self, centers: Any, lengthscale: float | Any) -> None:
        """Check and keep ``centers`` and ``lengthscale`` (ValueError on bad shapes or values)."""
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
        self.centers = Z
        self.lengthscale = np.broadcast_to(ls, (Z.shape[1],)).copy()

    @property
    def n_inputs(self) -> int:
        """Input dimension ``d``."""
        return self.centers.shape[1]

    @property
    def n_features(self) -> int:
        """Number of centres ``m`` (the features of the map)."""
        return self.centers.shape[0]

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Scalars and arrays for the model file."""
        return {"n_inputs": self.n_inputs, "n_features": self.n_features}, {
            "centers": self.centers.copy(),
            "lengthscale": self.lengthscale.copy(),
            self.extra: getattr(self, self.extra).copy(),
        }

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
        """Rebuild from :meth:`to_state` output (ValueError on missing or inconsistent arrays)."""
        try:
            fm = cls(arrays["centers"], arrays["lengthscale"], arrays[cls.extra])
        except KeyError as exc:
            raise ValueError(f"{cls.kind} feature map state lacks {exc}") from None
        if meta.get("n_features", fm.n_features) != fm.n_features:
            raise ValueError(f"{cls.kind} feature map state is inconsistent")
        return fm


class NystromFeatureMap(GaussianCentresMap):
    """``φ(x) = L⁻¹k(Z, x)`` for a Gaussian kernel ``k(x, z) = exp(−½‖(x − z)/ℓ‖²)``.

    Args:
        centers: ``Z``, shape ``(m, d)``.
        lengthscale: scalar or ``(d,)`` length-scales ``ℓ > 0``.
        chol: lower-triangular ``L`` with ``LLᵀ = K_mm + εI``; computed (with jitter) if ``None``.

    Example:
        >>> phi = NystromFeatureMap(np.zeros((1, 2)), 1.0)
        >>> phi.transform(np.zeros((3, 2))).shape
        (3, 1)
    """

    kind = "nystrom"
    extra = "chol"

    def __init__(self, centers: Any, lengthscale: float | Any = 1.0, chol: Any | None = None):
        self._set_centres(centers, lengthscale)
        if chol is None:
            chol, _ = jittered_cholesky(self.kernel(self.centers))
        L = np.asarray(chol, dtype=np.float64)
        m = self.n_features
        if L.shape != (m, m) or not np.all(np.isfinite(L)) or np.any(np.diag(L) <= 0):
            raise ValueError(f"chol must be a ({m}, {m}) lower-triangular factor with a positive diagonal")
        self.chol = np.tril(L)

    def kernel(self, X: np.ndarray) -> np.ndarray:
        """``k(X, Z)``, shape ``(n, m)``."""
        return gaussian_kernel(X, self.centers, self.lengthscale)

    def transform(self, X: np.ndarray | Any) -> np.ndarray:
        """``Φ = k(X, Z) L⁻ᵀ``, shape ``(n, m)``; 1-D input is one row."""
        a = as_rows(X, self.n_inputs, "X")
        return solve_triangular(self.chol, self.kernel(a).T, lower=True, check_finite=False).T

    def __repr__(self) -> str:
        return f"NystromFeatureMap(m={self.n_features}, d={self.n_inputs})"
