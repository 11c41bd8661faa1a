"""Gradient-based tuning of Nyström KRR hyperparameters (Meanti et al., §5 protocol).

Tuned jointly: ``λ``, Gaussian length-scales (one per input dimension, or one shared) and
all centre coordinates. Positivity of ``λ`` and ``ℓ`` through softplus, Adam, labels
standardized (mean 0, standard deviation 1 per output, as the paper assumes), centres
initialised at a uniform random subset, length-scales at the median heuristic,
``λ₀ = 1/n``; stop when the objective has risen for ``patience`` epochs in a row and keep
the best hyperparameters seen. The returned model is a :class:`NystromKRR` fitted with
them on the (unstandardized) targets.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lifelong_learning.nystrom.kernels import DEFAULT_MEMORY_BUDGET, resolve_device
from lifelong_learning.nystrom.krr import NystromKRR, as_tensor
from lifelong_learning.nystrom.objectives import (
    EXACT_OBJECTIVES,
    OBJECTIVES,
    StochasticProposed,
    exact_objective,
    median_heuristic,
)

_LAM_FLOOR = 1e-12
_LS_FLOOR = 1e-4


def softplus_inverse(y: float) -> float:
    """x with softplus(x) = y (y > 0)."""
    return y + math.log(-math.expm1(-y)) if y < 30 else y


@dataclass
class TuningResult:
    """What :func:`tune` found, attached to the returned model as ``model.tuning_``."""

    objective: str
    lam: float
    lengthscale: list[float]
    epochs: int
    history: list[float] = field(default_factory=list)
    seconds: float = 0.0
    stopped_early: bool = False


def tune(
    X: Any,
    Y: Any,
    centers: int | Any = 100,
    objective: str = "proposed",
    epochs: int = 200,
    lr: float = 0.05,
    per_dimension_lengthscale: bool = True,
    optimize_centers: bool = True,
    lam_init: float | None = None,
    lengthscale_init: float | Any | None = None,
    patience: int = 5,
    num_probes: int = 20,
    cg_tol: float = 1e-3,
    cg_max_iter: int = 100,
    holdout_fraction: float = 0.2,
    dtype: str | torch.dtype = "float64",
    device: str = "auto",
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    solver: str = "auto",
    progress: bool = False,
    seed: int = 0,
    callback: Callable[[int, dict[str, Any]], None] | None = None,
) -> NystromKRR:
    """Tune ``λ``, length-scales and centres of a Nyström KRR on ``(X, Y)`` and fit it.

    Args:
        X: inputs ``(n, d)``. Y: targets ``(n,)`` or ``(n, p)`` (e.g. one-hot ±1 classes).
        centers: number of centres (a random subset of rows) or initial centres ``(m, d)``.
        objective: one of ``"proposed"``, ``"gcv"``, ``"creg"``, ``"sgpr"``, ``"holdout"``
            (exact, autodiff; O(nm²) memory-light but O(nm) memory) or ``"proposed-stochastic"``
            (Hutchinson + CG, for large ``n``).
        epochs, lr: Adam steps and learning rate. patience: rises in a row before stopping.
        progress: show a tqdm bar with ETA.
        callback: called after every epoch with the epoch number and
            ``{"objective", "centers", "lengthscale", "lam"}`` (detached tensors), e.g. to track
            test error during tuning.

    Returns:
        A fitted :class:`NystromKRR` with ``tuning_`` (a :class:`TuningResult`).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; known: {OBJECTIVES}")
    dev = resolve_device(device)
    tdtype = torch.float64 if dtype in ("float64", torch.float64) else torch.float32
    Xt = as_tensor(X, "X", tdtype, dev)
    Yt = as_tensor(Y, "Y", tdtype, dev)
    n, d = Xt.shape
    if Yt.shape[0] != n:
        raise ValueError(f"X has {n} rows, Y has {Yt.shape[0]}")
    if n < 4:
        raise ValueError("need at least 4 samples to tune")
    y_mean, y_std = Yt.mean(0), Yt.std(0).clamp_min(1e-12)
    Ys = (Yt - y_mean) / y_std
    gen = np.random.default_rng(seed)
    if objective == "holdout":  # fixed random split: the objective uses the last rows for validation
        perm = torch.as_tensor(gen.permutation(n), device=dev)
        Xt_obj, Ys_obj = Xt[perm], Ys[perm]
    else:
        Xt_obj, Ys_obj = Xt, Ys
    if isinstance(centers, (int, np.integer)):
        m = min(int(centers), n)
        if m < 1:
            raise ValueError("the number of centres must be ≥ 1")
        Z0 = Xt[torch.as_tensor(np.sort(gen.choice(n, size=m, replace=False)), device=dev)].clone()
    else:
        Z0 = as_tensor(centers, "centers", tdtype, dev)
        if Z0.shape[1] != d:
            raise ValueError(f"centres have {Z0.shape[1]} columns, X has {d}")
    ls0 = lengthscale_init if lengthscale_init is not None else median_heuristic(Xt, seed=seed)
    ls0 = np.broadcast_to(np.asarray(ls0, dtype=np.float64), (d,) if per_dimension_lengthscale else ())
    lam0 = float(lam_init) if lam_init is not None else 1.0 / n
    if not (lam0 > 0 and np.all(ls0 > 0)):
        raise ValueError("lam_init and lengthscale_init must be positive")

    Z = Z0.clone().requires_grad_(optimize_centers)
    ls_raw = torch.tensor(
        [softplus_inverse(float(v) - _LS_FLOOR) for v in np.atleast_1d(ls0)], dtype=tdtype, device=dev
    )
    if not per_dimension_lengthscale:
        ls_raw = ls_raw[0]
    ls_raw.requires_grad_(True)
    lam_raw = torch.tensor(softplus_inverse(lam0 - _LAM_FLOOR), dtype=tdtype, device=dev, requires_grad=True)
    params = [ls_raw, lam_raw] + ([Z] if optimize_centers else [])
    opt = torch.optim.Adam(params, lr=lr)

    def current():
        ls = torch.nn.functional.softplus(ls_raw) + _LS_FLOOR
        lam = torch.nn.functional.softplus(lam_raw) + _LAM_FLOOR
        return ls, lam

    stoch = None
    if objective == "proposed-stochastic":
        stoch = StochasticProposed(
            Xt,
            Ys,
            num_probes=num_probes,
            cg_tol=cg_tol,
            cg_max_iter=cg_max_iter,
            memory_budget=memory_budget,
            seed=seed,
        )
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=epochs, desc=f"tune[{objective}]", unit="epoch")
    history: list[float] = []
    best = (math.inf, None)
    rises = 0
    stopped = False
    t0 = time.perf_counter()
    epoch = 0
    for epoch in range(1, epochs + 1):
        opt.zero_grad()
        ls, lam = current()
        if stoch is not None:
            value = stoch.value_and_grad(Z, ls, lam)
        else:
            loss = exact_objective(objective, Xt_obj, Ys_obj, Z, ls, lam, holdout_fraction)
            loss.backward()
            value = float(loss.detach())
        if not math.isfinite(value):
            stopped = True
            break
        history.append(value)
        if value < best[0]:
            best = (value, (Z.detach().clone(), ls.detach().clone(), lam.detach().clone()))
            rises = 0
        elif len(history) > 1 and value > history[-2]:
            rises += 1
            if rises >= patience:
                stopped = True
                break
        opt.step()
        if callback is not None:
            callback(
                epoch,
                {"objective": value, "centers": Z.detach(), "lengthscale": ls.detach(), "lam": lam.detach()},
            )
        if bar is not None:
            bar.set_postfix(obj=f"{value:.4g}", lam=f"{float(lam):.2e}")
            bar.update(1)
    if bar is not None:
        bar.close()
    if best[1] is None:
        raise ValueError("the objective was not finite at the initial hyperparameters")
    Zb, lsb, lamb = best[1]
    model = NystromKRR(
        centers=Zb,
        lengthscale=lsb.cpu().numpy(),
        lam=float(lamb),
        solver=solver,
        dtype=tdtype,
        device=str(dev),
        memory_budget=memory_budget,
        seed=seed,
    )
    model.fit(Xt, Yt)
    model.tuning_ = TuningResult(
        objective=objective,
        lam=float(lamb),
        lengthscale=np.atleast_1d(lsb.cpu().numpy()).tolist(),
        epochs=epoch,
        history=history,
        seconds=time.perf_counter() - t0,
        stopped_early=stopped,
    )
    return model


__all__ = ["EXACT_OBJECTIVES", "OBJECTIVES", "TuningResult", "tune"]
