"""What a Nyström KRR needs from its data: sums over the rows (Meanti et al. §2-4).

For centres ``Z`` (``m`` of them) and rows ``(x_i, y_i)``, with ``k_i = k(Z, x_i)`` (``m``),

    G = Σ_i k_i k_iᵀ = K_mn K_nm   (m × m)
    b = Σ_i k_i y_iᵀ = K_mn Y      (m × p)
    yy = Σ_i ‖y_i‖²,   n = Σ_i 1.

The direct solver's system ``(G + nλ K_mm) β = b`` and every exact objective that depends on the
data only through the fit (proposed, GCV, C_p, SGPR; see
:mod:`~lifelong_learning.nystrom.objectives`) are functions of ``(G, b, yy, n)`` and of ``K_mm``.
Sums add: rows read a block at a time (streaming: memory bounded by the block and ``m``, not by
``n``), or by several processes whose sums are all-reduced
(:class:`~lifelong_learning.nystrom.distributed.Group`), give the same system.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from lifelong_learning.nystrom.distributed import ONE_PROCESS, Group
from lifelong_learning.nystrom.kernels import DEFAULT_MEMORY_BUDGET, block_size, gaussian_kernel, row_blocks

Block = tuple[torch.Tensor, torch.Tensor]
"""Rows ``X`` ``(r, d)`` and targets ``Y`` ``(r, p)`` of one block."""


@dataclass
class KernelSums:
    """``G = K_mnK_nm``, ``b = K_mnY``, ``yy = ‖Y‖²`` (per output) and ``n`` over some rows."""

    gram: torch.Tensor
    kty: torch.Tensor
    yy: torch.Tensor
    n: int

    @classmethod
    def zeros(cls, m: int, p: int, dtype: torch.dtype, device: torch.device) -> KernelSums:
        """The sums over no rows."""
        z = torch.zeros
        return cls(
            z(m, m, dtype=dtype, device=device),
            z(m, p, dtype=dtype, device=device),
            z(p, dtype=dtype, device=device),
            0,
        )

    def add(
        self,
        X: torch.Tensor,
        Y: torch.Tensor,
        Z: torch.Tensor,
        lengthscale: torch.Tensor,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
    ) -> KernelSums:
        """Add the rows ``X``, ``Y`` (in kernel blocks under ``memory_budget``); returns self.

        Without autograd the sums are updated in place; with ``Z`` or ``lengthscale`` requiring
        grad, out of place (the result is differentiable in them)."""
        rows = block_size(Z.shape[0] + X.shape[1], Z.dtype, memory_budget)
        differentiable = torch.is_grad_enabled() and (Z.requires_grad or lengthscale.requires_grad)
        for sl in row_blocks(X.shape[0], rows):
            K = gaussian_kernel(X[sl].to(Z), Z, lengthscale)  # (r, m)
            y = Y[sl].to(Z)
            if differentiable:
                self.gram = self.gram + K.T @ K
                self.kty = self.kty + K.T @ y
            else:
                self.gram.addmm_(K.T, K)
                self.kty.addmm_(K.T, y)
            self.yy = self.yy + (y * y).sum(0).detach()
        self.n += int(X.shape[0])
        return self

    def __add__(self, other: KernelSums) -> KernelSums:
        """The sums over the rows of both (e.g. two groups of rows, in that order)."""
        return KernelSums(self.gram + other.gram, self.kty + other.kty, self.yy + other.yy, self.n + other.n)

    def reduced(self, group: Group = ONE_PROCESS) -> KernelSums:
        """These sums added over every process of ``group`` (detached copies; a collective call)."""
        if group.world_size == 1:
            return KernelSums(
                self.gram.detach().clone(), self.kty.detach().clone(), self.yy.detach().clone(), self.n
            )
        flat = torch.cat([self.gram.detach().reshape(-1), self.kty.detach().reshape(-1), self.yy.detach()])
        group.all_reduce(flat)
        n = int(group.all_reduce(torch.tensor([self.n], dtype=torch.int64, device=flat.device))[0])
        m, p = self.kty.shape
        gram, kty, yy = (
            flat[: m * m].reshape(m, m),
            flat[m * m : m * m + m * p].reshape(m, p),
            flat[m * m + m * p :],
        )
        return KernelSums(gram, kty, yy, n)


def kernel_sums(
    blocks: Iterable[Block],
    Z: torch.Tensor,
    lengthscale: torch.Tensor,
    p: int | None = None,
    group: Group = ONE_PROCESS,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> KernelSums:
    """:class:`KernelSums` over every block of every process (one pass over this process's blocks,
    then one all-reduce). ``p``: the number of outputs (needed when this process has no block). A
    block that raises ValueError or OSError on any process raises on every process
    (:meth:`~lifelong_learning.nystrom.distributed.Group.agree`)."""
    sums: KernelSums | None = None
    error: Exception | None = None
    try:
        if p is not None:
            sums = KernelSums.zeros(Z.shape[0], p, Z.dtype, Z.device)
        for X, Y in blocks:
            Y = Y[:, None] if Y.ndim == 1 else Y
            if sums is None:
                sums = KernelSums.zeros(Z.shape[0], Y.shape[1], Z.dtype, Z.device)
            sums.add(X, Y, Z, lengthscale, memory_budget)
        if sums is None:
            raise ValueError("no rows (and p not given)")
    except (ValueError, OSError) as exc:  # a bad block on one process fails every process
        error = exc
    group.agree(error)
    assert sums is not None
    return sums.reduced(group)


__all__ = ["Block", "KernelSums", "kernel_sums"]
