"""The offline method a retraining job fits, made from the job's options (its ``method``), and what
the report says it chose.

Each is an :class:`~lifelong_learning.nystrom.estimator.OfflineMethod` fitted on the task's tuning
rows; the export continues from its ``feature_map()`` and ``engine_lam()`` whatever the method
(:mod:`~lifelong_learning.nystrom.export`), so both learners hot-reload it and keep learning:

- ``nystrom``: :class:`~lifelong_learning.nystrom.tuned.TunedNystrom`, λ, length-scales and centres
  tuned by one objective (Meanti et al.) with the job's centres, epochs, patience, learning rate,
  dtype and length-scale range; one run per objective;
- ``slkl``: :class:`~lifelong_learning.nystrom.slkl.SLKL` with the job's centres as its ``M``
  candidates, ``λ = 1`` (only ``λν`` matters) and ``ν`` chosen among :data:`SLKL_NU_FRACTIONS` of
  ``ν_max`` on held-out rows, then refitted on every tuning row;
- ``nytro``: :class:`~lifelong_learning.nystrom.nytro.NYTRO` with the job's centres, the iterations
  (at most :data:`NYTRO_MAX_ITER`) chosen on held-out rows;
- ``path``: :class:`~lifelong_learning.nystrom.incremental.NystromPath` up to the job's centres, ``m``
  and ``λ`` (of :data:`PATH_LAMS`) chosen on held-out rows.

The last three take the median-heuristic length-scale of the tuning rows (shared by every input,
:func:`~lifelong_learning.nystrom.hyperparameters.median_heuristic`; the thesis's "preliminary
analysis") and hold out :data:`HOLDOUT_FRACTION` of them: the most recent recordings when the rows
have several (``groups``), else, for the rows of a robot's log (inverse dynamics, in time order),
the most recent rows (a random hold-out of a 100 Hz log validates on rows interleaved with the
training ones: docs/benchmarks/nytro-path.md), else random rows (labeled features).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from lifelong_learning.nystrom.distributed import Group
    from lifelong_learning.nystrom.estimator import OfflineMethod
    from lifelong_learning.retraining.job import TuningJob

#: SLKL's ν, as fractions of ν_max (the smallest ν at which no centre is active), largest first:
#: the first of equal validation errors, the sparsest, is kept. On the sinc data of Machart et al.
#: (n = 1000, M = 256) they gave m₀ = 5, 37, 60, 68, 80, 84; the paper's ν = 0.01 is about 5e-6 there
SLKL_NU_FRACTIONS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
#: the λ the incremental path tries (per sample, ``nλ`` in the system): the grid of
#: docs/benchmarks/nytro-path.md, where the chosen λ were 1e-5 and 1e-4
PATH_LAMS = tuple(float(v) for v in np.logspace(-9, -1, 9))
#: NYTRO's most iterations (the thesis caps its runs at 500)
NYTRO_MAX_ITER = 500
#: the share of the tuning rows the methods slkl, nytro and path hold out to choose ν, t, m and λ
HOLDOUT_FRACTION = 0.2


def fit_run(
    job: TuningJob,
    run: str,
    X: np.ndarray,
    Y: np.ndarray,
    groups: Sequence[int] | None,
    time_ordered: bool,
    group: Group,
    progress: Any,
) -> OfflineMethod:
    """The estimator of ``job`` for ``run`` (an objective of the method nystrom, else the method's
    name: :attr:`TuningJob.runs`) fitted on the tuning rows ``X``, ``Y`` (module docstring);
    ``groups``: the first row of each recording; ``time_ordered``: the rows are a robot's log in
    time order; ``progress(step, info)`` as the fit advances."""
    from lifelong_learning.nystrom.tuned import TunedNystrom

    if job.method == "nystrom":
        return TunedNystrom(
            centers=job.centers,
            objective=run,
            epochs=job.epochs,
            patience=job.patience,
            lr=job.lr,
            dtype=job.dtype,
            device=job.device,
            progress=job.progress and group.is_main,
            seed=job.seed,
            lengthscale_range=job.lengthscale_range,
            group=group,
        ).fit(X, Y, groups=groups, progress=progress)
    estimator = _fixed_lengthscale(job, _median_lengthscale(X))
    n = len(X)
    if not [g for g in (groups or ()) if 0 < int(g) < n] and time_ordered and n >= 2:
        groups = [0, min(n - 1, max(1, round((1.0 - HOLDOUT_FRACTION) * n)))]
    return estimator.fit(X, Y, groups=groups, progress=progress)


def _median_lengthscale(X: np.ndarray) -> float:
    import torch

    from lifelong_learning.nystrom.hyperparameters import median_heuristic

    return median_heuristic(torch.as_tensor(np.asarray(X, dtype=np.float64)))


def _fixed_lengthscale(job: TuningJob, lengthscale: float) -> OfflineMethod:
    """The unfitted estimator of the method slkl, nytro or path with ``lengthscale`` (module docstring)."""
    from lifelong_learning.nystrom.incremental import NystromPath
    from lifelong_learning.nystrom.nytro import NYTRO
    from lifelong_learning.nystrom.slkl import SLKL

    common: dict[str, Any] = {
        "seed": job.seed,
        "device": job.device,
        "lengthscale": lengthscale,
        "holdout_fraction": HOLDOUT_FRACTION,
    }
    if job.method == "slkl":
        return SLKL(n_candidates=job.centers, lam=1.0, nu=SLKL_NU_FRACTIONS, relative_nu=True, **common)
    if job.method == "nytro":
        return NYTRO(centers=job.centers, max_iter=NYTRO_MAX_ITER, **common)
    if job.method == "path":
        return NystromPath(max_centers=job.centers, lam=PATH_LAMS, **common)
    raise ValueError(f"unknown method {job.method!r}")


def chosen(model: OfflineMethod) -> dict[str, Any]:
    """What the fit chose, for the report (numbers and lists only): ``lam`` (the engine's λ per
    sample), ``lengthscale`` (one per input, or the one all share), ``epochs`` (Adam steps,
    coordinate epochs, iterations or path steps), ``features`` (the online map's size: m, or SLKL's
    m₀) and the method's own choice (``nu``, ``iterations``, ``best_m``), ``final_objective``
    where the method has one."""
    from lifelong_learning.nystrom.incremental import NystromPath
    from lifelong_learning.nystrom.nytro import NYTRO
    from lifelong_learning.nystrom.slkl import SLKL
    from lifelong_learning.nystrom.tuned import TunedNystrom

    fmap = model.feature_map()
    out: dict[str, Any] = {
        "lam": float(model.engine_lam()) / max(model.n_samples, 1),
        "features": int(fmap.n_features),
        "final_objective": None,
    }
    if isinstance(model, TunedNystrom):
        info = model.tuning_
        final = info.history[-1] if info.history else None
        return {
            **out,
            "lam": info.lam,
            "lengthscale": info.lengthscale,
            "epochs": info.epochs,
            "final_objective": final,
        }
    ls = _shared(
        model.model_.lengthscale_.cpu().numpy() if isinstance(model, NystromPath) else model.lengthscale_
    )
    if isinstance(model, SLKL):
        return {
            **out,
            "lengthscale": ls,
            "epochs": int(model.n_iter_ // max(model.n_candidates_, 1)),
            "nu": model.nu,
            "candidates": model.n_candidates_,
            "final_objective": float(model.objective_[-1]),
        }
    if isinstance(model, NYTRO):
        return {**out, "lengthscale": ls, "epochs": model.iterations_, "iterations": model.iterations_}
    if isinstance(model, NystromPath):
        return {**out, "lengthscale": ls, "epochs": model.best_m_, "best_m": model.best_m_}
    raise ValueError(f"no report for {type(model).__name__}")


def _shared(lengthscale: Any) -> list[float]:
    """Length-scales as the report lists them: one when every input shares it."""
    values = [float(v) for v in np.atleast_1d(np.asarray(lengthscale, dtype=np.float64))]
    return values[:1] if len(set(values)) == 1 else values


__all__ = ["HOLDOUT_FRACTION", "NYTRO_MAX_ITER", "PATH_LAMS", "SLKL_NU_FRACTIONS", "chosen", "fit_run"]
