"""Linear algebra shared by the learners (numpy) and the Nyström code (torch).

:func:`jittered_cholesky`: the lower Cholesky factor of ``K + εI`` for a kernel matrix ``K`` that
is positive semi-definite in exact arithmetic but may not be in floating point (centres that
nearly coincide; Meanti et al. and Falkon add such a jitter to ``K_mm``). ``ε`` starts at 1e-8
(float64) or 1e-6 (float32) times the mean diagonal and grows ×10 until the factorization
succeeds. One schedule for numpy arrays and torch tensors (the torch path stays differentiable:
the tuner backpropagates through it).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _is_tensor(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"  # without importing torch


def _try_cholesky(K: Any, eps: float) -> Any | None:
    if _is_tensor(K):
        import torch

        eye = torch.eye(K.shape[0], dtype=K.dtype, device=K.device)
        L, info = torch.linalg.cholesky_ex(K + eps * eye)
        return L if int(info) == 0 else None
    try:
        return np.linalg.cholesky(K + eps * np.eye(K.shape[0]))
    except np.linalg.LinAlgError:
        return None


def jittered_cholesky(K: Any, jitter: float | None = None, max_tries: int = 8) -> tuple[Any, float]:
    """Lower Cholesky factor ``L`` of ``K + εI`` (numpy array or torch tensor, same type back).

    Args:
        K: symmetric ``(m, m)`` matrix.
        jitter: the first ``ε`` to try (``0.0``: try ``K`` itself first); default 1e-8 (float64)
            or 1e-6 (float32) times the mean diagonal.
        max_tries: factorizations tried, ``ε`` ×10 each time (from ``1e-10 ×`` the mean diagonal
            after a failed ``ε = 0``).

    Returns:
        ``(L, ε)`` with ``L Lᵀ = K + εI``.

    Raises:
        ValueError: ``K`` not finite, or not positive definite even with the largest ``ε`` tried.
    """
    if _is_tensor(K):
        import torch

        finite = bool(torch.isfinite(K).all())
        scale = float(K.detach().diagonal().mean().clamp_min(1e-300)) if finite else 1.0
        double = K.dtype == torch.float64
    else:
        K = np.asarray(K, dtype=np.float64)
        finite = bool(np.all(np.isfinite(K)))
        scale = max(float(np.mean(np.diag(K))), 1e-300) if finite else 1.0
        double = True
    if not finite:
        raise ValueError("kernel matrix contains NaN or Inf")
    eps = jitter if jitter is not None else (1e-8 if double else 1e-6) * scale
    for _ in range(max_tries):
        L = _try_cholesky(K, eps)
        if L is not None:
            return L, eps
        eps = eps * 10.0 if eps > 0 else 1e-10 * scale
    raise ValueError(f"matrix not positive definite even with jitter {eps / 10:g}")
