"""Eq. 9 of Meanti et al. for large ``n``: Hutchinson traces and CG solves, gradients by hand
(the ``"proposed-stochastic"`` objective, :class:`ProposedStochastic`).

It never differentiates through a solver (§4): :class:`StochasticProposed` solves the systems by
preconditioned CG (Falkon's preconditioner), estimates the traces with probe vectors kept fixed
for the whole run, and writes the gradient out from the solutions. Notation in
:mod:`~lifelong_learning.nystrom.objectives.base`.
"""

from __future__ import annotations

import torch

from lifelong_learning.core.linalg import jittered_cholesky
from lifelong_learning.nystrom.kernels import (
    DEFAULT_MEMORY_BUDGET,
    block_size,
    gaussian_kernel,
    knm_t_matmul,
    row_blocks,
)
from lifelong_learning.nystrom.krr import NystromKRR
from lifelong_learning.nystrom.objectives.base import Objective, ObjectiveSettings, Step


class StochasticProposed:
    """Eq. 9 with Hutchinson traces and CG solves; gradients by hand.

    It solves ``B⁻¹K_nmᵀ[Y, R]`` (``B = K_nmᵀK_nm + nλK_mm``, ``R`` ``t`` fixed Gaussian probes) by
    preconditioned CG, warm-started across steps, estimates ``Tr(H)`` and ``Tr(K̃)`` by
    Hutchinson, and builds the gradient from the solutions: for ``q(V) = VᵀK_nm B⁻¹K_nmᵀV`` with
    ``S = B⁻¹K_nmᵀV`` held fixed,

        dq = d[2⟨V, K_nm S⟩ − ‖K_nm S‖² − nλ⟨S, K_mm S⟩],

    and for ``t(V) = VᵀK_nm K_mm⁻¹K_nmᵀV`` with ``U = K_mm⁻¹K_nmᵀV`` fixed,
    ``dt = d[2⟨V, K_nm U⟩ − ⟨U, K_mm U⟩]``. Only the kernel blocks are differentiated (row
    block by row block, so memory stays within the budget); the chain rule through eq. 9 is
    written out in :meth:`value_and_grad`.

    Args:
        X, Y: training data (tensors on the working device/dtype; ``Y`` standardized).
        num_probes: ``t``, Gaussian probe vectors drawn once and kept for the whole run.
        cg_tol, cg_max_iter: PCG stopping rule per step.
        memory_budget: bytes per kernel block.
        seed: for the probes.
    """

    def __init__(
        self,
        X: torch.Tensor,
        Y: torch.Tensor,
        num_probes: int = 20,
        cg_tol: float = 1e-3,
        cg_max_iter: int = 100,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        seed: int = 0,
    ):
        if num_probes < 1:
            raise ValueError("num_probes must be ≥ 1")
        self.X, self.Y = X, Y
        gen = torch.Generator().manual_seed(seed)
        self.R = torch.randn(X.shape[0], num_probes, generator=gen, dtype=X.dtype).to(X.device)
        self.V = torch.cat([Y, self.R], dim=1)
        self.p, self.t = Y.shape[1], num_probes
        self.cg_tol, self.cg_max_iter, self.memory_budget = cg_tol, cg_max_iter, memory_budget
        self._beta_prev: torch.Tensor | None = None
        self.last_cg_iterations = 0

    def value_and_grad(self, Z: torch.Tensor, ls: torch.Tensor, lam: torch.Tensor) -> float:
        """Objective estimate; accumulates its gradient into ``.grad`` of the leaf tensors
        from which ``Z``, ``ls`` and ``lam`` were computed (call ``backward`` semantics)."""
        X, V, n, p, t = self.X, self.V, self.X.shape[0], self.p, self.t
        with torch.no_grad():
            Zd, lsd, lamd = Z.detach(), ls.detach(), float(lam.detach())
            nlam = n * lamd
            Kmm = gaussian_kernel(Zd, Zd, lsd)
            L, eps = jittered_cholesky(Kmm)
            KtV = knm_t_matmul(X, Zd, lsd, V, self.memory_budget)  # K_nmᵀ[Y, R]
            solver = NystromKRR(
                centers=Zd,
                lengthscale=1.0,
                lam=lamd,
                dtype=X.dtype,
                device=str(X.device),
                memory_budget=self.memory_budget,
                cg_tol=self.cg_tol,
                cg_max_iter=self.cg_max_iter,
            )
            rhs = torch.linalg.solve_triangular(L, KtV, upper=False)
            w, iters = solver.pcg_whitened(X, Zd, lsd, L, rhs, nlam, self._beta_prev)
            S = torch.linalg.solve_triangular(L.T.to(w), w, upper=True).to(X.dtype)  # B⁻¹K_nmᵀ[Y, R]
            self._beta_prev, self.last_cg_iterations = S, iters
            U = torch.cholesky_solve(KtV[:, p:], L)  # K_mm⁻¹K_nmᵀR
            q = (KtV * S).sum(0)  # diag of VᵀK_nm S
            yy = float((self.Y * self.Y).sum())
            datafit = yy - float(q[:p].sum())
            trace_h = float(q[p:].sum()) / t
            trace_kt = float((KtV[:, p:] * U).sum()) / t
            trace_gap = n - trace_kt
            value = (2.0 / n) * (trace_h + datafit + trace_gap * datafit / (n * nlam))
            # chain-rule weights: value = (2/n)[trH + D·(1 + gap/(n²λ))], gap = n − TrK̃
            w_trh = (2.0 / n) / t
            w_d = (2.0 / n) * (1.0 + trace_gap / (n * nlam))
            w_tk = -(2.0 / n) * datafit / (n * nlam) / t
            # signed weights per column of V for the q-surrogate (D = yy − q_Y) and t-surrogate
            wq = torch.cat([torch.full((p,), -w_d), torch.full((t,), w_trh)]).to(S)
            Sw = S * wq
        # surrogates, block by block over rows (only kernel blocks carry gradients), on fresh
        # leaves; their gradients are pushed to the callers' graph once at the end
        Z_out, ls_out, lam_out = Z, ls, lam
        Z = Zd.clone().requires_grad_(Z_out.requires_grad)
        ls = lsd.clone().requires_grad_(True)
        lam = lam_out.detach().clone().requires_grad_(True)
        rows = block_size(Z.shape[0] + X.shape[1], X.dtype, self.memory_budget)
        for sl in row_blocks(n, rows):
            Kb = gaussian_kernel(X[sl], Z, ls)
            KS = Kb @ S
            Vb = V[sl]
            part = 2.0 * (Vb * (Kb @ Sw)).sum() - (KS * (KS * wq)).sum()
            part = part + 2.0 * w_tk * (self.R[sl] * (Kb @ U)).sum()
            part.backward()
        Kmm_g = gaussian_kernel(Z, Z, ls) + eps * torch.eye(Z.shape[0], dtype=X.dtype, device=X.device)
        last = -(n * lam) * (S * (Kmm_g @ Sw)).sum() - w_tk * (U * (Kmm_g @ U)).sum()
        # explicit λ dependence of the trace term: (2/n)·gap·D/(n²λ)
        last = last + (2.0 / n) * trace_gap * datafit / (n * n) / lam
        last.backward()
        outs = [(o, leaf) for o, leaf in ((Z_out, Z), (ls_out, ls), (lam_out, lam)) if o.requires_grad]
        torch.autograd.backward([o for o, _ in outs], [leaf.grad for _, leaf in outs])
        return value


class ProposedStochastic(Objective):
    """Eq. 9 estimated by :class:`StochasticProposed` (no exact value: its gradient is by hand)."""

    name = "proposed-stochastic"
    exact = False

    def value(self, X, Y, Z, ls, lam, settings):
        raise ValueError("the stochastic objective has no exact value; tune with its gradient_step")

    def gradient_step(self, X: torch.Tensor, Y: torch.Tensor, settings: ObjectiveSettings) -> Step:
        stoch = StochasticProposed(
            X,
            Y,
            num_probes=settings.num_probes,
            cg_tol=settings.cg_tol,
            cg_max_iter=settings.cg_max_iter,
            memory_budget=settings.memory_budget,
            seed=settings.seed,
        )
        return stoch.value_and_grad


__all__ = ["ProposedStochastic", "StochasticProposed"]
