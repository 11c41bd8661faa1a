"""Gaussian kernel and kernel-matrix products computed in row blocks under a memory budget.

Meanti et al., "Efficient Hyperparameter Tuning for Large Scale Kernel Ridge Regression",
§4 (scalable approximations): kernel matrices ``K_nm`` are never formed whole; only
products ``K_nm v``, ``K_nmᵀ v`` and ``K_nmᵀ K_nm`` are accumulated block by block over the
``n`` rows, each block small enough for the memory budget.

The kernel is ``k(x, z) = exp(−½ Σ_d (x_d − z_d)² / ℓ_d²)`` with one length-scale ``ℓ``
(a scalar) or one per input dimension (a vector of ``d`` entries).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

#: default memory budget for one block of kernel rows (bytes)
DEFAULT_MEMORY_BUDGET = 256 * 2**20


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` → CUDA when available, else CPU; ``"cpu"``/``"cuda"`` as given."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but CUDA is not available")
    return torch.device(device)


def gaussian_kernel(A: torch.Tensor, B: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    """``K[i, j] = exp(−½‖(a_i − b_j)/ℓ‖²)`` for rows of ``A`` (``(a, d)``) and ``B`` (``(b, d)``)."""
    As = A / lengthscale
    Bs = B / lengthscale
    sq = (As * As).sum(1, keepdim=True) + (Bs * Bs).sum(1)[None, :] - 2.0 * (As @ Bs.T)
    return torch.exp(-0.5 * sq.clamp_min(0.0))


def block_size(n_cols: int, dtype: torch.dtype, memory_budget: int, n_temporaries: int = 4) -> int:
    """Rows per block so that ``n_temporaries`` blocks of ``n_cols`` entries fit the budget."""
    itemsize = torch.finfo(dtype).bits // 8
    return max(1, int(memory_budget) // (itemsize * max(1, n_cols) * n_temporaries))


def row_blocks(n: int, rows: int) -> Iterator[slice]:
    """Consecutive slices of at most ``rows`` rows covering ``range(n)``."""
    for start in range(0, n, rows):
        yield slice(start, min(n, start + rows))


def _on(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return x.to(device=like.device, dtype=like.dtype, non_blocking=True)


def knm_matmul(
    X: torch.Tensor,
    Z: torch.Tensor,
    lengthscale: torch.Tensor,
    U: torch.Tensor,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> torch.Tensor:
    """``K_nm U`` (``(n, p)``) for ``U`` of shape ``(m, p)``, block by block over rows of ``X``."""
    rows = block_size(Z.shape[0] + X.shape[1], Z.dtype, memory_budget)
    out = torch.empty(X.shape[0], U.shape[1], dtype=Z.dtype, device=Z.device)
    for sl in row_blocks(X.shape[0], rows):
        out[sl] = gaussian_kernel(_on(X[sl], Z), Z, lengthscale) @ U
    return out


def knm_t_matmul(
    X: torch.Tensor,
    Z: torch.Tensor,
    lengthscale: torch.Tensor,
    V: torch.Tensor,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> torch.Tensor:
    """``K_nmᵀ V`` (``(m, p)``) for ``V`` of shape ``(n, p)``, block by block."""
    rows = block_size(Z.shape[0] + X.shape[1], Z.dtype, memory_budget)
    out = torch.zeros(Z.shape[0], V.shape[1], dtype=Z.dtype, device=Z.device)
    for sl in row_blocks(X.shape[0], rows):
        out += gaussian_kernel(_on(X[sl], Z), Z, lengthscale).T @ _on(V[sl], Z)
    return out


def knm_gram(
    X: torch.Tensor,
    Z: torch.Tensor,
    lengthscale: torch.Tensor,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> torch.Tensor:
    """``K_nmᵀ K_nm`` (``(m, m)``), block by block."""
    rows = block_size(Z.shape[0] + X.shape[1], Z.dtype, memory_budget)
    out = torch.zeros(Z.shape[0], Z.shape[0], dtype=Z.dtype, device=Z.device)
    for sl in row_blocks(X.shape[0], rows):
        K = gaussian_kernel(_on(X[sl], Z), Z, lengthscale)
        out.addmm_(K.T, K)
    return out


def knm_gram_matmul(
    X: torch.Tensor,
    Z: torch.Tensor,
    lengthscale: torch.Tensor,
    U: torch.Tensor,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> torch.Tensor:
    """``K_nmᵀ (K_nm U)`` (``(m, p)``) without forming ``K_nmᵀK_nm`` (one pass over the rows)."""
    rows = block_size(Z.shape[0] + X.shape[1], Z.dtype, memory_budget)
    out = torch.zeros(Z.shape[0], U.shape[1], dtype=Z.dtype, device=Z.device)
    for sl in row_blocks(X.shape[0], rows):
        K = gaussian_kernel(_on(X[sl], Z), Z, lengthscale)
        out.addmm_(K.T, K @ U)
    return out


#: why a fit is refused whose kernel vanishes between distinct rows (a length-scale far below their spacing)
VANISHING_KERNEL = (
    "every kernel column is zero off its own row: the length-scale is too small for the spacing of "
    "the rows (the model would predict 0 away from the training rows)"
)


def reaches_other_rows(K: torch.Tensor, own_rows: torch.Tensor) -> bool:
    """Whether some column ``j`` of ``K`` (rows × centres, centre ``j`` being row ``own_rows[j]``)
    is non-zero at a row other than its own. False when the kernel vanishes between distinct
    rows (:data:`VANISHING_KERNEL`); the entry at its own row is not counted (rounded, it may be 0)."""
    nonzero = (K != 0).sum(0)
    own = (K[own_rows, torch.arange(K.shape[1], device=K.device)] != 0).to(nonzero.dtype)
    return bool((nonzero > own).any())
