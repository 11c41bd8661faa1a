"""Hyperparameter objectives for Nyström KRR (Meanti et al., §3 and §4).

Notation (``nλ`` used consistently): ``L Lᵀ = K_mm + εI``, ``Φ = K_nm L⁻ᵀ``,
``K̃ = ΦΦᵀ = K_nm K_mm⁻¹ K_nmᵀ``, ``A = ΦᵀΦ + nλI``, hat matrix
``H = K̃(K̃ + nλI)⁻¹ = Φ A⁻¹ Φᵀ``, fit ``f̂(X) = HY``, ``‖f̂‖²_H = ‖A⁻¹ΦᵀY‖²``, and
``D = ‖f̂(X) − Y‖² + nλ‖f̂‖²_H = Yᵀ(I − H)Y`` (= ``n L̂_λ(f̂)``). Labels are standardized,
so the noise variance is ``σ² = 1``. Every objective is divided by ``n`` (or normalized)
so that values are O(1).

Exact objectives (small ``n``, autodiff through the Cholesky factorizations; the first four are
functions of the data's sums :class:`~lifelong_learning.nystrom.sums.KernelSums` ``(G, b, yy, n)``,
:data:`SUMS_OBJECTIVES`, and :func:`sums_step` computes them across processes):

- ``"proposed"`` (eq. 9, the complexity-regularization bound, with ``σ̂² = 1`` and the
  trace term read with the normalized kernel ``K/n`` as in the reference implementation):
  ``(2/n)·[Tr(H) + D + Tr(K − K̃)·D/(n²λ)]``.
- ``"gcv"`` (eq. 5): ``n‖f̂(X) − Y‖² / Tr(I − H)²``.
- ``"creg"`` (eq. 6, Mallows' C_p): ``(1/n)‖f̂(X) − Y‖² + (2/n)Tr(H)``.
- ``"sgpr"`` (Titsias' bound with noise ``nλ``):
  ``(1/n)[p·log|K̃ + nλI| + D/(nλ) + p·Tr(K − K̃)/(nλ)]`` (``p`` outputs).
- ``"holdout"``: fit on the first ``1 − f`` of the rows, mean squared error on the rest;
  :func:`~lifelong_learning.nystrom.tune` shuffles the rows first (a random hold-out).
- ``"holdout-recent"``: the same without shuffling: for rows in time order (a robot's log), the
  hyperparameters are chosen on how well the older part predicts the most recent block of time,
  i.e. motion the fit has not seen, rather than on points interleaved with the training ones.
- ``"holdout-bags"``: for rows from several recordings (``groups``: the first row of each, e.g.
  one per bag), each recording in turn is predicted by the fit on the others (leave one
  recording out, :func:`fold_bounds`), and the mean squared error over every held-out row is the
  objective: the hyperparameters are chosen on whole trajectories the fit has not seen. With one
  recording (or none given) it is ``"holdout-recent"``.

The stochastic proposed objective (:class:`StochasticProposed`, large ``n``) never
differentiates through a solver: CG solves, Hutchinson traces, a gradient written out by hand.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import torch

from lifelong_learning.core.linalg import jittered_cholesky
from lifelong_learning.nystrom.distributed import Group, ShardedRows
from lifelong_learning.nystrom.kernels import (
    DEFAULT_MEMORY_BUDGET,
    block_size,
    gaussian_kernel,
    knm_t_matmul,
    row_blocks,
)
from lifelong_learning.nystrom.krr import NystromKRR
from lifelong_learning.nystrom.sums import KernelSums

EXACT_OBJECTIVES = ("proposed", "gcv", "creg", "sgpr", "holdout", "holdout-recent", "holdout-bags")
OBJECTIVES = (*EXACT_OBJECTIVES, "proposed-stochastic")
#: the objectives that depend on the data only through the sums of
#: :class:`~lifelong_learning.nystrom.sums.KernelSums`: they can be computed across processes
#: (:func:`sums_step`). The hold-out ones cannot (their split is by row position: the validation
#: rows are the most recent, or a shuffled subset, or whole recordings, of the one global row
#: order), nor ``"proposed-stochastic"`` (its probe vectors are drawn per row).
SUMS_OBJECTIVES = ("proposed", "gcv", "creg", "sgpr")
#: most folds of ``"holdout-bags"`` (each costs one m×m Cholesky factorization per evaluation)
MAX_FOLDS = 10


def _sums_terms(sums: KernelSums, Z: torch.Tensor, ls: torch.Tensor, lam: torch.Tensor):
    """Everything the exact objectives need, from the data's sums (:mod:`~lifelong_learning.nystrom.sums`).

    Returns ``(resid2, datafit, trace_h, trace_kt, logdet_A, beta)`` where ``resid2 = ‖f̂(X) − Y‖²
    = datafit − nλ‖w‖²`` (``w = A⁻¹L⁻¹b``), ``datafit = Yᵀ(I−H)Y``, ``trace_h = Tr(H) = m − nλ Tr(A⁻¹)``,
    ``trace_kt = Tr(K̃) = Tr(L⁻¹GL⁻ᵀ)``. Only m×m matrices are factorized or triangular-solved.
    """
    n, m = sums.n, Z.shape[0]
    G, b = sums.gram, sums.kty
    L, _ = jittered_cholesky(gaussian_kernel(Z, Z, ls))
    M = torch.linalg.solve_triangular(L, torch.linalg.solve_triangular(L, G, upper=False).T, upper=False)
    M = 0.5 * (M + M.T)  # ΦᵀΦ
    eye = torch.eye(m, dtype=Z.dtype, device=Z.device)
    LA = torch.linalg.cholesky(M + n * lam * eye)
    c = torch.linalg.solve_triangular(LA, torch.linalg.solve_triangular(L, b, upper=False), upper=False)
    w = torch.linalg.solve_triangular(LA.T, c, upper=True)  # A⁻¹L⁻¹b: the whitened weights
    beta = torch.linalg.solve_triangular(L.T, w, upper=True)
    datafit = sums.yy.sum() - (c * c).sum()
    # ‖Y − Φw‖² = yy − 2wᵀr + wᵀMw with Aw = r (r = L⁻¹b): wᵀMw = wᵀr − nλ‖w‖², so
    # resid2 = datafit − nλ‖w‖², two terms no larger than yy (no cancellation through a large β)
    resid2 = datafit - n * lam * (w * w).sum()
    LA_inv = torch.linalg.solve_triangular(LA, eye, upper=False)
    trace_h = m - n * lam * (LA_inv * LA_inv).sum()
    logdet_A = 2.0 * torch.log(LA.diagonal()).sum()
    return resid2, datafit, trace_h, M.diagonal().sum(), logdet_A, beta


def _sums(X: torch.Tensor, Y: torch.Tensor, Z: torch.Tensor, ls: torch.Tensor) -> KernelSums:
    """The sums of rows ``X``, ``Y`` (differentiable in ``Z`` and ``ls``)."""
    return KernelSums.zeros(Z.shape[0], Y.shape[1], Z.dtype, Z.device).add(X, Y, Z, ls)


def sums_objective(
    name: str, sums: KernelSums, Z: torch.Tensor, ls: torch.Tensor, lam: torch.Tensor
) -> torch.Tensor:
    """Value of the objective ``name`` (one of :data:`SUMS_OBJECTIVES`) from the data's sums
    (differentiable in the sums, ``Z``, ``ls`` and ``lam``)."""
    if name not in SUMS_OBJECTIVES:
        raise ValueError(
            f"objective {name!r} is not a function of the data's sums; those are {SUMS_OBJECTIVES}"
        )
    n, p = sums.n, sums.kty.shape[1]
    resid2, datafit, trace_h, trace_kt, logdet_A, _ = _sums_terms(sums, Z, ls, lam)
    nlam = n * lam
    trace_gap = n - trace_kt  # Tr(K − K̃), k(x, x) = 1
    if name == "proposed":
        return (2.0 / n) * (trace_h + datafit + trace_gap * datafit / (n * nlam))
    if name == "gcv":
        return n * resid2 / (n - trace_h) ** 2
    if name == "creg":
        return resid2 / n + 2.0 * trace_h / n
    # sgpr: log|K̃ + nλI| = (n − m) log nλ + log|A|
    logdet = (n - Z.shape[0]) * torch.log(nlam) + logdet_A
    return (p * logdet + datafit / nlam + p * trace_gap / nlam) / n


def exact_objective(
    name: str,
    X: torch.Tensor,
    Y: torch.Tensor,
    Z: torch.Tensor,
    ls: torch.Tensor,
    lam: torch.Tensor,
    holdout_fraction: float = 0.2,
    groups: Sequence[int] | None = None,
) -> torch.Tensor:
    """Value of the exact objective ``name`` (differentiable in ``Z``, ``ls``, ``lam``);
    ``groups``: the first row of each recording, for ``"holdout-bags"`` (ignored by the others)."""
    n = Y.shape[0]
    folds = fold_bounds(n, groups) if name == "holdout-bags" else []
    if len(folds) > 1:
        return _leave_one_out_of(folds, X, Y, Z, ls, lam)
    if name in ("holdout", "holdout-recent", "holdout-bags"):
        n_val = max(1, round(holdout_fraction * n))
        Xt, Yt, Xv, Yv = X[: n - n_val], Y[: n - n_val], X[n - n_val :], Y[n - n_val :]
        beta = _sums_terms(_sums(Xt, Yt, Z, ls), Z, ls, lam)[-1]
        return ((gaussian_kernel(Xv, Z, ls) @ beta - Yv) ** 2).sum() / Xv.shape[0]
    if name not in EXACT_OBJECTIVES:
        raise ValueError(f"unknown objective {name!r}; known: {OBJECTIVES}")
    return sums_objective(name, _sums(X, Y, Z, ls), Z, ls, lam)


def sums_step(
    name: str, X: torch.Tensor, Y: torch.Tensor, group: Group, memory_budget: int = DEFAULT_MEMORY_BUDGET
) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], float]:
    """The objective ``name`` (one of :data:`SUMS_OBJECTIVES`) over the rows of every process of
    ``group``, this process holding ``X``, ``Y``: a tuning step that returns the value (the same on
    every process) and leaves the gradient in ``.grad`` (the same on every process).

    The sums are differentiated locally and all-reduced: with ``S = Σ_r S_r`` the value is
    ``v(S, θ)``, so ``dv/dθ = ∂v/∂θ + Σ_r (∂v/∂S)·(dS_r/dθ)``; each process computes ``∂v/∂S`` and
    ``∂v/∂θ`` from the reduced ``S`` (the same everywhere), backpropagates ``∂v/∂S`` through its
    own ``S_r``, and the per-process parts are all-reduced (two all-reduces per step)."""
    if name not in SUMS_OBJECTIVES:
        raise ValueError(
            f"objective {name!r} cannot be computed across processes; those are {SUMS_OBJECTIVES}"
        )

    def step(Z: torch.Tensor, ls: torch.Tensor, lam: torch.Tensor) -> float:
        leaves = [t.detach().clone().requires_grad_(True) for t in (Z, ls, lam)]
        Zl, lsl, laml = leaves
        local = KernelSums.zeros(Z.shape[0], Y.shape[1], Z.dtype, Z.device).add(X, Y, Zl, lsl, memory_budget)
        total = local.reduced(group)
        total.gram.requires_grad_(True)
        total.kty.requires_grad_(True)
        value = sums_objective(name, total, Zl, lsl, laml)
        value.backward()
        direct = [t.grad if t.grad is not None else torch.zeros_like(t) for t in leaves]
        for t in leaves:
            t.grad = None
        if local.gram.requires_grad:  # this process has rows
            torch.autograd.backward([local.gram, local.kty], [total.gram.grad, total.kty.grad])
        shared = torch.cat(
            [(t.grad if t.grad is not None else torch.zeros_like(t)).reshape(-1) for t in leaves]
        )
        group.all_reduce(shared)
        grads, at = [], 0
        for t, d in zip(leaves, direct, strict=True):
            grads.append(d + shared[at : at + t.numel()].reshape(t.shape))
            at += t.numel()
        outs = [(o, g) for o, g in zip((Z, ls, lam), grads, strict=True) if o.requires_grad]
        torch.autograd.backward([o for o, _ in outs], [g for _, g in outs])
        return float(value.detach())

    return step


def fold_bounds(n: int, groups: Sequence[int] | None, max_folds: int = MAX_FOLDS) -> list[tuple[int, int]]:
    """``(start, stop)`` row ranges of the folds of ``"holdout-bags"`` for ``n`` rows whose
    recordings start at rows ``groups`` (0 is always a start; empty recordings are dropped):
    one fold per recording, or, with more than ``max_folds``, adjacent recordings merged into
    ``max_folds`` folds of about equal size (:data:`MAX_FOLDS`). One fold: no recording to hold
    out."""
    starts = sorted({int(g) for g in (groups or ()) if 0 <= int(g) < n} | {0})
    bounds = [*starts, n]
    if len(starts) > max_folds:  # cut at the recording start nearest each multiple of n / max_folds
        cuts = {min(starts, key=lambda s, q=q: abs(s - q * n / max_folds)) for q in range(max_folds)}
        bounds = [*sorted(cuts | {0}), n]
    return [(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def _leave_one_out_of(
    folds: list[tuple[int, int]],
    X: torch.Tensor,
    Y: torch.Tensor,
    Z: torch.Tensor,
    ls: torch.Tensor,
    lam: torch.Tensor,
) -> torch.Tensor:
    """Mean squared error of each fold predicted by the Nyström KRR fitted on the other folds
    (``λ`` per training row: ``n_rest λ``), over all rows. The fits share one pass over the rows:
    ``K_mn K_nm`` is summed per fold and each fold's fit uses the total minus its own."""
    m = Z.shape[0]
    L, _ = jittered_cholesky(gaussian_kernel(Z, Z, ls))
    eye = torch.eye(m, dtype=X.dtype, device=X.device)
    parts = []
    for a, b in folds:
        Kmn = gaussian_kernel(Z, X[a:b], ls)
        parts.append((Kmn, Kmn @ Kmn.T, Kmn @ Y[a:b]))
    G = sum(p[1] for p in parts)
    KY = sum(p[2] for p in parts)
    n = X.shape[0]
    sse = X.new_zeros(())
    for (a, b), (Kmn, G_k, KY_k) in zip(folds, parts, strict=True):
        rest = n - (b - a)
        Linv_G = torch.linalg.solve_triangular(L, G - G_k, upper=False)
        M = torch.linalg.solve_triangular(L, Linv_G.T, upper=False)
        LA = torch.linalg.cholesky(0.5 * (M + M.T) + rest * lam * eye)
        c = torch.cholesky_solve(torch.linalg.solve_triangular(L, KY - KY_k, upper=False), LA)
        beta = torch.linalg.solve_triangular(L.T, c, upper=True)
        sse = sse + ((Kmn.T @ beta - Y[a:b]) ** 2).sum()
    return sse / n


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


def median_heuristic(X: torch.Tensor | ShardedRows, max_rows: int = 2000, seed: int = 0) -> float:
    """Median pairwise distance of (a subsample of) the rows of ``X`` (of every process's rows, for
    :class:`~lifelong_learning.nystrom.distributed.ShardedRows`: the same subsample of the global rows)."""
    rows = X if isinstance(X, ShardedRows) else ShardedRows(X)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randperm(rows.total, generator=gen)[:max_rows]
    sample = rows.rows(idx.numpy())
    D = torch.cdist(sample, sample)
    vals = D[torch.triu(torch.ones_like(D, dtype=torch.bool), diagonal=1)]
    med = float(vals.median()) if vals.numel() else 1.0
    return med if med > 0 and math.isfinite(med) else 1.0
