"""Hold-out objectives: the mean squared error of the Nyström KRR on rows it was not fitted on.

- :class:`Holdout` (``"holdout"``): fit on the first ``1 − f`` of the rows, mean squared error on
  the rest; it sees the rows in a fixed random order (:attr:`~Objective.shuffled_rows`), so its
  hold-out part is a random subset.
- :class:`HoldoutRecent` (``"holdout-recent"``): the same without shuffling: for rows in time order
  (a robot's log), the hyperparameters are chosen on how well the older part predicts the most
  recent block of time, i.e. motion the fit has not seen, rather than on points interleaved with
  the training ones.
- :class:`HoldoutBags` (``"holdout-bags"``): for rows from several recordings (``groups``: the
  first row of each, e.g. one per bag), each recording in turn is predicted by the fit on the
  others (leave one recording out, :func:`fold_bounds`), and the mean squared error over every
  held-out row is the objective: the hyperparameters are chosen on whole trajectories the fit has
  not seen. With one recording (or none given) it is ``"holdout-recent"``.

None is a function of the data's sums (their split is by row position in the one global row
order), so none is computed across processes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from lifelong_learning.core.linalg import jittered_cholesky
from lifelong_learning.nystrom.kernels import gaussian_kernel
from lifelong_learning.nystrom.objectives.base import Objective, ObjectiveSettings, sums_of, sums_terms

#: most folds of ``"holdout-bags"`` (each costs one m×m Cholesky factorization per evaluation)
MAX_FOLDS = 10


class HoldoutRecent(Objective):
    """Error on the last ``holdout_fraction`` of the rows of the fit on the others."""

    name = "holdout-recent"

    def value(self, X, Y, Z, ls, lam, settings: ObjectiveSettings) -> torch.Tensor:
        n = Y.shape[0]
        n_val = max(1, round(settings.holdout_fraction * n))
        Xt, Yt, Xv, Yv = X[: n - n_val], Y[: n - n_val], X[n - n_val :], Y[n - n_val :]
        beta = sums_terms(sums_of(Xt, Yt, Z, ls), Z, ls, lam).beta
        return ((gaussian_kernel(Xv, Z, ls) @ beta - Yv) ** 2).sum() / Xv.shape[0]


class Holdout(HoldoutRecent):
    """:class:`HoldoutRecent` on rows in a fixed random order."""

    name = "holdout"
    shuffled_rows = True


class HoldoutBags(HoldoutRecent):
    """Leave one recording out (module docstring)."""

    name = "holdout-bags"

    def value(self, X, Y, Z, ls, lam, settings: ObjectiveSettings) -> torch.Tensor:
        folds = fold_bounds(Y.shape[0], settings.groups)
        if len(folds) > 1:
            return _leave_one_out_of(folds, X, Y, Z, ls, lam)
        return super().value(X, Y, Z, ls, lam, settings)


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


__all__ = ["MAX_FOLDS", "Holdout", "HoldoutBags", "HoldoutRecent", "fold_bounds"]
