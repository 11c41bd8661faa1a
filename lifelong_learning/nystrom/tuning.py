"""Gradient-based tuning of Nyström KRR hyperparameters (Meanti et al., §5 protocol).

Tuned jointly: ``λ``, Gaussian length-scales (one per input dimension, or one shared) and
all centre coordinates. Positivity of ``λ`` and ``ℓ`` through softplus, Adam, labels
standardized (mean 0, standard deviation 1 per output, as the paper assumes), centres
initialised at a uniform random subset, length-scales at the median heuristic,
``λ₀ = 1/n`` (:mod:`~lifelong_learning.nystrom.hyperparameters`); stop when the objective
has risen ``patience`` times since its last best, or is not finite, and keep the best
hyperparameters seen (:mod:`~lifelong_learning.nystrom.early_stopping`). The returned model
is a :class:`NystromKRR` fitted with them on the (unstandardized) targets.

The training loop (:func:`train`) stands apart from the objectives
(:mod:`~lifelong_learning.nystrom.objectives`, each a :data:`Step`) and from the stopping rule,
as in Falkon's hyperparameter optimization: :func:`tune` prepares the data, the initial
hyperparameters and the step, runs the loop and refits with the best.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lifelong_learning.nystrom.distributed import ONE_PROCESS, Group, ShardedRows
from lifelong_learning.nystrom.early_stopping import DEFAULT_PATIENCE, EarlyStopping
from lifelong_learning.nystrom.hyperparameters import Hyperparameters
from lifelong_learning.nystrom.hyperparameters import softplus_inverse as softplus_inverse
from lifelong_learning.nystrom.kernels import DEFAULT_MEMORY_BUDGET, resolve_device
from lifelong_learning.nystrom.krr import NystromKRR, as_tensor
from lifelong_learning.nystrom.objectives import (
    EXACT_OBJECTIVES,
    OBJECTIVES,
    SUMS_OBJECTIVES,
    Objective,
    ObjectiveSettings,
    Step,
    exact_objective,
    objective_named,
    sums_step,
)


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
    lengthscale_range: tuple[float, float] | None = None,
    patience: int = DEFAULT_PATIENCE,
    num_probes: int = 20,
    cg_tol: float = 1e-3,
    cg_max_iter: int = 100,
    holdout_fraction: float = 0.2,
    groups: Sequence[int] | None = None,
    dtype: str | torch.dtype = "float64",
    device: str = "auto",
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    solver: str = "auto",
    progress: bool = False,
    seed: int = 0,
    callback: Callable[[int, dict[str, Any]], None] | None = None,
    group: Group = ONE_PROCESS,
) -> NystromKRR:
    """Tune ``λ``, length-scales and centres of a Nyström KRR on ``(X, Y)`` and fit it.

    Args:
        X: inputs ``(n, d)``. Y: targets ``(n,)`` or ``(n, p)`` (e.g. one-hot ±1 classes).
        centers: number of centres (a random subset of rows) or initial centres ``(m, d)``.
        objective: one of ``"proposed"``, ``"gcv"``, ``"creg"``, ``"sgpr"``, ``"holdout"``,
            ``"holdout-recent"``, ``"holdout-bags"``
            (exact, autodiff; O(nm²) memory-light but O(nm) memory) or ``"proposed-stochastic"``
            (Hutchinson + CG, for large ``n``).
        groups: the first row of each recording (rows in recording order), for
            ``"holdout-bags"``: each recording is held out in turn (see
            :mod:`~lifelong_learning.nystrom.objectives`); the other objectives ignore it.
        lengthscale_range: ``(a, b)``: each length-scale bounded to ``[a, b]`` × its input
            column's range (see :mod:`~lifelong_learning.nystrom.hyperparameters`); None: unbounded.
        epochs, lr: Adam steps and learning rate. patience: rises in a row before stopping.
        progress: show a tqdm bar with ETA.
        callback: called after every epoch with the epoch number and
            ``{"objective", "centers", "lengthscale", "lam"}`` (detached tensors), e.g. to track
            test error during tuning.
        group: the processes that tune together
            (:class:`~lifelong_learning.nystrom.distributed.Group`, e.g. from
            :func:`~lifelong_learning.nystrom.distributed.joined` under ``torchrun``): ``X``, ``Y``
            are this process's share of the rows (the ``r``-th contiguous part of the global row
            order), the objective's sums, the label standardization and the final fit are
            all-reduced, and every process returns the same model, equal (to rounding) to the
            one-process model of all the rows. Only the objectives of
            :data:`~lifelong_learning.nystrom.objectives.SUMS_OBJECTIVES`.

    Returns:
        A fitted :class:`NystromKRR` with ``tuning_`` (a :class:`TuningResult`).
    """
    _check_objective(objective, group)
    tdtype = torch.float64 if dtype in ("float64", torch.float64) else torch.float32
    dev = resolve_device(device)
    Xt, Yt = _training_data(X, Y, tdtype, dev, group)
    rows = ShardedRows(Xt, Yt, group)
    mean, std = rows.column_moments(Yt)
    Ys = (Yt - mean) / std.clamp_min(1e-12)  # standardized labels
    gen = np.random.default_rng(seed)
    X_obj, Y_obj = _rows_for_objective(objective, Xt, Ys, gen)  # draws from gen before the centres do
    hp = Hyperparameters.initial(
        rows,
        centers,
        gen,
        per_dimension_lengthscale=per_dimension_lengthscale,
        optimize_centers=optimize_centers,
        lam_init=lam_init,
        lengthscale_init=lengthscale_init,
        seed=seed,
        lengthscale_range=lengthscale_range,
    )
    step = (
        sums_step(objective, Xt, Ys, group, memory_budget)
        if group.world_size > 1
        else _objective_step(
            objective,
            X_obj,
            Y_obj,
            holdout_fraction,
            num_probes,
            cg_tol,
            cg_max_iter,
            memory_budget,
            seed,
            groups,
        )
    )
    bar = _progress_bar(epochs, objective) if progress else None
    t0 = time.perf_counter()
    stop, epoch = train(hp, step, epochs, lr, EarlyStopping(patience), callback, bar, group)
    model = _refit(_agreed(stop.best, dev, group), Xt, Yt, solver, dev, memory_budget, seed, group)
    model.tuning_ = TuningResult(
        objective=objective,
        lam=model.lam,
        lengthscale=np.atleast_1d(model.lengthscale).tolist(),
        epochs=epoch,
        history=stop.history,
        seconds=time.perf_counter() - t0,
        stopped_early=stop.stopped,
    )
    return model


def train(
    hp: Hyperparameters,
    step: Step,
    epochs: int,
    lr: float,
    stop: EarlyStopping,
    callback: Callable[[int, dict[str, Any]], None] | None = None,
    bar: Any = None,
    group: Group = ONE_PROCESS,
) -> tuple[EarlyStopping, int]:
    """The training loop: Adam on ``hp``'s parameters, one evaluation of the objective ``step``
    per epoch, for ``epochs`` epochs or until ``stop`` says so (it keeps the best parameters; with
    several processes rank 0 decides, so that every process stops at the same epoch). Returns
    ``stop`` and the last epoch run. ``callback(epoch, info)`` after each step, ``bar`` (tqdm)
    updated and closed."""
    opt = torch.optim.Adam(hp.parameters(), lr=lr)
    epoch = 0
    for epoch in range(1, epochs + 1):
        opt.zero_grad()
        Z, ls, lam = hp.current()
        value = step(Z, ls, lam)
        stopping = stop.update(value, (Z, ls, lam))
        if group.world_size > 1:  # rank 0 decides: every process stops at the same epoch
            stopping = bool(group.all_gather(stopping)[0])
        if stopping:
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
    return stop, epoch


def _check_objective(objective: str, group: Group) -> None:
    """ValueError for an unknown objective, or one that cannot be tuned across the processes of ``group``."""
    known = objective_named(objective)
    if group.world_size > 1 and not known.from_sums:
        raise ValueError(
            f"objective {objective!r} cannot be tuned across processes; those that can: {SUMS_OBJECTIVES}"
        )


def _agreed(
    best: tuple[torch.Tensor, ...] | None, dev: torch.device, group: Group
) -> tuple[torch.Tensor, ...]:
    """The best hyperparameters: rank 0's, for every process of ``group``; ValueError when the
    objective was never finite."""
    if group.world_size > 1:
        best = group.all_gather(None if best is None else tuple(t.cpu() for t in best))[0]
        best = None if best is None else tuple(t.to(dev) for t in best)
    if best is None:
        raise ValueError("the objective was not finite at the initial hyperparameters")
    return best


def _training_data(
    X: Any, Y: Any, dtype: torch.dtype, dev: torch.device, group: Group = ONE_PROCESS
) -> tuple[torch.Tensor, torch.Tensor]:
    """``X`` ``(n, d)`` and ``Y`` ``(n, p)`` as finite tensors, with the same ``n`` (at least 4 over
    every process of ``group``), or ValueError (on every process, if one has bad rows)."""
    error: Exception | None = None
    Xt = Yt = torch.empty(0)
    try:
        Xt = as_tensor(X, "X", dtype, dev)
        Yt = as_tensor(Y, "Y", dtype, dev)
        if Yt.shape[0] != Xt.shape[0]:
            raise ValueError(f"X has {Xt.shape[0]} rows, Y has {Yt.shape[0]}")
    except ValueError as exc:
        error = exc
    group.agree(error)
    shapes = group.all_gather((int(Xt.shape[0]), tuple(Xt.shape[1:]), tuple(Yt.shape[1:])))
    if len({s[1:] for s in shapes}) > 1:
        raise ValueError(f"the processes' rows differ in shape: {shapes}")
    if sum(s[0] for s in shapes) < 4:
        raise ValueError("need at least 4 samples to tune")
    return Xt, Yt


def _rows_for_objective(
    objective: str, X: torch.Tensor, Y: torch.Tensor, gen: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows the objective sees: a fixed random permutation for one that asks for it
    (:attr:`~lifelong_learning.nystrom.objectives.Objective.shuffled_rows`: ``"holdout"``, whose
    last rows validate), otherwise ``X``, ``Y`` as they are (``"holdout-recent"``: the last rows in
    time)."""
    if not objective_named(objective).shuffled_rows:
        return X, Y
    perm = torch.as_tensor(gen.permutation(X.shape[0]), device=X.device)
    return X[perm], Y[perm]


def _objective_step(
    objective: str,
    X: torch.Tensor,
    Y: torch.Tensor,
    holdout_fraction: float,
    num_probes: int,
    cg_tol: float,
    cg_max_iter: int,
    memory_budget: int,
    seed: int,
    groups: Sequence[int] | None = None,
) -> Step:
    """The objective as a :data:`Step`: its own when it writes its gradient by hand, else its exact
    value (:func:`~lifelong_learning.nystrom.objectives.exact_objective`) differentiated by autodiff."""
    settings = ObjectiveSettings(
        holdout_fraction=holdout_fraction,
        groups=groups,
        num_probes=num_probes,
        cg_tol=cg_tol,
        cg_max_iter=cg_max_iter,
        memory_budget=memory_budget,
        seed=seed,
    )
    by_hand = objective_named(objective).gradient_step(X, Y, settings)
    if by_hand is not None:
        return by_hand

    def step(Z: torch.Tensor, ls: torch.Tensor, lam: torch.Tensor) -> float:
        loss = exact_objective(objective, X, Y, Z, ls, lam, holdout_fraction, groups)
        loss.backward()
        return float(loss.detach())

    return step


def _refit(
    best: tuple[torch.Tensor, ...],
    X: torch.Tensor,
    Y: torch.Tensor,
    solver: str,
    dev: torch.device,
    memory_budget: int,
    seed: int,
    group: Group = ONE_PROCESS,
) -> NystromKRR:
    """A :class:`NystromKRR` with the best ``(Z, ℓ, λ)``, fitted on the unstandardized ``Y`` (of
    every process of ``group``)."""
    Z, ls, lam = best
    model = NystromKRR(
        centers=Z,
        lengthscale=ls.cpu().numpy(),
        lam=float(lam),
        solver=solver,
        dtype=X.dtype,
        device=str(dev),
        memory_budget=memory_budget,
        seed=seed,
    )
    if group.world_size == 1:
        return model.fit(X, Y)
    return model.fit_blocks(lambda: [(X, Y)], group, outputs=Y.shape[1])


def _progress_bar(epochs: int, objective: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=epochs, desc=f"tune[{objective}]", unit="epoch")


__all__ = ["DEFAULT_PATIENCE", "EXACT_OBJECTIVES", "OBJECTIVES", "Objective", "TuningResult", "train", "tune"]
