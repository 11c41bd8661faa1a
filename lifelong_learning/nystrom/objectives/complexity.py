"""The objectives that are functions of the fit's sums (Meanti et al., §3; notation in
:mod:`~lifelong_learning.nystrom.objectives.base`), one small class each.

- :class:`Proposed` (eq. 9, the complexity-regularization bound, with ``σ̂² = 1`` and the trace
  term read with the normalized kernel ``K/n`` as in the reference implementation):
  ``(2/n)·[Tr(H) + D + Tr(K − K̃)·D/(n²λ)]``.
- :class:`GCV` (eq. 5): ``n‖f̂(X) − Y‖² / Tr(I − H)²``.
- :class:`CReg` (eq. 6, Mallows' C_p): ``(1/n)‖f̂(X) − Y‖² + (2/n)Tr(H)``.
- :class:`SGPR` (Titsias' bound with noise ``nλ``):
  ``(1/n)[p·log|K̃ + nλI| + D/(nλ) + p·Tr(K − K̃)/(nλ)]`` (``p`` outputs), with
  ``log|K̃ + nλI| = (n − m) log nλ + log|A|``.
"""

from __future__ import annotations

import torch

from lifelong_learning.nystrom.objectives.base import SumsObjective, SumsTerms


class Proposed(SumsObjective):
    """Eq. 9 of Meanti et al. (module docstring)."""

    name = "proposed"

    def of_terms(self, t: SumsTerms) -> torch.Tensor:
        n = t.n
        return (2.0 / n) * (t.trace_h + t.datafit + t.trace_gap * t.datafit / (n * t.nlam))


class GCV(SumsObjective):
    """Generalized cross-validation (module docstring)."""

    name = "gcv"

    def of_terms(self, t: SumsTerms) -> torch.Tensor:
        return t.n * t.resid2 / (t.n - t.trace_h) ** 2


class CReg(SumsObjective):
    """Mallows' C_p (module docstring)."""

    name = "creg"

    def of_terms(self, t: SumsTerms) -> torch.Tensor:
        return t.resid2 / t.n + 2.0 * t.trace_h / t.n


class SGPR(SumsObjective):
    """Titsias' variational bound (module docstring)."""

    name = "sgpr"

    def of_terms(self, t: SumsTerms) -> torch.Tensor:
        logdet = (t.n - t.m) * torch.log(t.nlam) + t.logdet_a
        return (t.p * logdet + t.datafit / t.nlam + t.p * t.trace_gap / t.nlam) / t.n


__all__ = ["GCV", "SGPR", "CReg", "Proposed"]
