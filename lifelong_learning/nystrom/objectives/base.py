"""The thin base of the hyperparameter objectives of Nyström KRR (Meanti et al., §3 and §4).

Notation (``nλ`` used consistently): ``L Lᵀ = K_mm + εI``, ``Φ = K_nm L⁻ᵀ``,
``K̃ = ΦΦᵀ = K_nm K_mm⁻¹ K_nmᵀ``, ``A = ΦᵀΦ + nλI``, hat matrix
``H = K̃(K̃ + nλI)⁻¹ = Φ A⁻¹ Φᵀ``, fit ``f̂(X) = HY``, ``‖f̂‖²_H = ‖A⁻¹ΦᵀY‖²``, and
``D = ‖f̂(X) − Y‖² + nλ‖f̂‖²_H = Yᵀ(I − H)Y`` (= ``n L̂_λ(f̂)``). Labels are standardized,
so the noise variance is ``σ² = 1``. Every objective is divided by ``n`` (or normalized)
so that values are O(1).

An objective is a small class (as in Falkon's ``hopt``): :meth:`Objective.value` is its value at
``(Z, ℓ, λ)``, differentiable, which the tuning loop differentiates by autodiff, unless the class
writes its gradient by hand (:meth:`Objective.gradient_step`). A :class:`SumsObjective` depends
on the data only through the sums of :class:`~lifelong_learning.nystrom.sums.KernelSums`
``(G, b, yy, n)``: :meth:`SumsObjective.of_terms` says what it is from :class:`SumsTerms`, and
:meth:`SumsObjective.step_across` computes it over the rows of several processes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch

from lifelong_learning.core.linalg import jittered_cholesky
from lifelong_learning.nystrom.distributed import Group
from lifelong_learning.nystrom.kernels import DEFAULT_MEMORY_BUDGET, gaussian_kernel
from lifelong_learning.nystrom.sums import KernelSums

Step = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], float]
"""One objective evaluation at ``(Z, ℓ, λ)``: returns the value, leaves the gradients in ``.grad``."""


@dataclass(frozen=True)
class ObjectiveSettings:
    """What an objective may need beyond the rows and ``(Z, ℓ, λ)``: the share of rows held out
    (hold-out objectives), where each recording starts (``groups``, ``"holdout-bags"``), and the
    stochastic objective's probes, CG rule, memory budget and seed."""

    holdout_fraction: float = 0.2
    groups: Sequence[int] | None = None
    num_probes: int = 20
    cg_tol: float = 1e-3
    cg_max_iter: int = 100
    memory_budget: int = DEFAULT_MEMORY_BUDGET
    seed: int = 0


class Objective:
    """A hyperparameter objective (see the module docstring); subclasses set :attr:`name`."""

    #: the objective's name (what a job's ``objectives`` lists)
    name: ClassVar[str] = ""
    #: computed exactly (autodiff through Cholesky factorizations), not estimated
    exact: ClassVar[bool] = True
    #: a function of the data's sums only: computable across processes (:class:`SumsObjective`)
    from_sums: ClassVar[bool] = False
    #: sees the rows in a fixed random order (its hold-out part is then a random subset)
    shuffled_rows: ClassVar[bool] = False

    def value(
        self,
        X: torch.Tensor,
        Y: torch.Tensor,
        Z: torch.Tensor,
        ls: torch.Tensor,
        lam: torch.Tensor,
        settings: ObjectiveSettings,
    ) -> torch.Tensor:
        """The objective at ``(Z, ℓ, λ)`` on rows ``X``, ``Y`` (differentiable in ``Z``, ``ℓ``, ``λ``)."""
        raise NotImplementedError

    def gradient_step(self, X: torch.Tensor, Y: torch.Tensor, settings: ObjectiveSettings) -> Step | None:
        """A :data:`Step` whose gradient is written by hand; None: the tuner differentiates :meth:`value`."""
        return None


@dataclass
class SumsTerms:
    """What the sums objectives are made of (:func:`sums_terms`): ``resid2 = ‖f̂(X) − Y‖²``,
    ``datafit = D``, ``trace_h = Tr(H)``, ``trace_gap = Tr(K − K̃)`` (``k(x, x) = 1``),
    ``logdet_a = log|A|``, the coefficients ``beta``, and ``n``, ``p`` (outputs), ``m``, ``nlam``."""

    resid2: torch.Tensor
    datafit: torch.Tensor
    trace_h: torch.Tensor
    trace_gap: torch.Tensor
    logdet_a: torch.Tensor
    beta: torch.Tensor
    n: int
    p: int
    m: int
    nlam: torch.Tensor


def sums_terms(sums: KernelSums, Z: torch.Tensor, ls: torch.Tensor, lam: torch.Tensor) -> SumsTerms:
    """The :class:`SumsTerms` of the data's sums. ``resid2 = datafit − nλ‖w‖²`` (``w = A⁻¹L⁻¹b``),
    ``trace_h = m − nλ Tr(A⁻¹)``, ``Tr(K̃) = Tr(L⁻¹GL⁻ᵀ)``. Only m×m matrices are factorized or
    triangular-solved."""
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
    logdet_a = 2.0 * torch.log(LA.diagonal()).sum()
    return SumsTerms(
        resid2=resid2,
        datafit=datafit,
        trace_h=trace_h,
        trace_gap=n - M.diagonal().sum(),
        logdet_a=logdet_a,
        beta=beta,
        n=n,
        p=sums.kty.shape[1],
        m=m,
        nlam=n * lam,
    )


def sums_of(X: torch.Tensor, Y: torch.Tensor, Z: torch.Tensor, ls: torch.Tensor) -> KernelSums:
    """The sums of rows ``X``, ``Y`` (differentiable in ``Z`` and ``ls``)."""
    return KernelSums.zeros(Z.shape[0], Y.shape[1], Z.dtype, Z.device).add(X, Y, Z, ls)


class SumsObjective(Objective):
    """An objective that is a function of the data's sums (see the module docstring)."""

    from_sums = True

    def of_terms(self, t: SumsTerms) -> torch.Tensor:
        """The objective from the terms of the fit."""
        raise NotImplementedError

    def of_sums(self, sums: KernelSums, Z: torch.Tensor, ls: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
        """The objective from the data's sums (differentiable in the sums, ``Z``, ``ℓ``, ``λ``)."""
        return self.of_terms(sums_terms(sums, Z, ls, lam))

    def value(self, X, Y, Z, ls, lam, settings):
        return self.of_sums(sums_of(X, Y, Z, ls), Z, ls, lam)

    def step_across(
        self, X: torch.Tensor, Y: torch.Tensor, group: Group, memory_budget: int = DEFAULT_MEMORY_BUDGET
    ) -> Step:
        """The objective over the rows of every process of ``group``, this process holding ``X``,
        ``Y``: a tuning step that returns the value (the same on every process) and leaves the
        gradient in ``.grad`` (the same on every process).

        The sums are differentiated locally and all-reduced: with ``S = Σ_r S_r`` the value is
        ``v(S, θ)``, so ``dv/dθ = ∂v/∂θ + Σ_r (∂v/∂S)·(dS_r/dθ)``; each process computes ``∂v/∂S``
        and ``∂v/∂θ`` from the reduced ``S`` (the same everywhere), backpropagates ``∂v/∂S`` through
        its own ``S_r``, and the per-process parts are all-reduced (two all-reduces per step)."""

        def step(Z: torch.Tensor, ls: torch.Tensor, lam: torch.Tensor) -> float:
            leaves = [t.detach().clone().requires_grad_(True) for t in (Z, ls, lam)]
            Zl, lsl, laml = leaves
            local = KernelSums.zeros(Z.shape[0], Y.shape[1], Z.dtype, Z.device).add(
                X, Y, Zl, lsl, memory_budget
            )
            total = local.reduced(group)
            total.gram.requires_grad_(True)
            total.kty.requires_grad_(True)
            value = self.of_sums(total, Zl, lsl, laml)
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


__all__ = ["Objective", "ObjectiveSettings", "Step", "SumsObjective", "SumsTerms", "sums_of", "sums_terms"]
