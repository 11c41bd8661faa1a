"""Export a tuned :class:`NystromKRR` to the online learners (feature map + RLS state).

The exported feature map is ``φ(x) = L⁻¹k(Z, x)`` (:class:`NystromFeatureMap`); a
:class:`RecursiveRLS` with ``lam = nλ`` trained on ``Φ = K_nm L⁻ᵀ`` has weights ``W = Lᵀβ``,
i.e. reproduces the Nyström KRR exactly, and keeps learning online from there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lifelong_learning.learners.nystrom_features import NystromFeatureMap
from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.nystrom.krr import NystromKRR


def feature_map_of(model: NystromKRR) -> NystromFeatureMap:
    """The Nyström feature map (centres, length-scales, Cholesky factor) of a fitted model."""
    model._check_fitted()
    return NystromFeatureMap(
        model.centers_.detach().cpu().numpy().astype(np.float64),
        model.lengthscale_.detach().cpu().numpy().astype(np.float64),
        model.chol_.detach().cpu().numpy().astype(np.float64),
    )


def regularization_of(model: NystromKRR) -> float:
    """``nλ``: the RLS ``lam`` that reproduces the model."""
    model._check_fitted()
    return model.n_train_ * model.lam


def to_recursive_rls(
    model: NystromKRR, X: Any, Y: Any, batch: int = 4096
) -> tuple[NystromFeatureMap, RecursiveRLS]:
    """Feature map and a RecursiveRLS trained on ``(φ(X), Y)`` with ``lam = nλ``.

    ``X``, ``Y`` must be the data ``model`` was fitted on for the RLS to reproduce it.
    """
    fmap = feature_map_of(model)
    Xa = np.asarray(X, dtype=np.float64)
    Ya = np.asarray(Y, dtype=np.float64)
    if Ya.ndim == 1:
        Ya = Ya[:, None]
    if Xa.shape[0] != model.n_train_:
        raise ValueError(f"the model was fitted on {model.n_train_} rows, got {Xa.shape[0]}")
    rls = RecursiveRLS(fmap.n_features, Ya.shape[1], lam=regularization_of(model))
    for start in range(0, Xa.shape[0], batch):
        rls.update(fmap.transform(Xa[start : start + batch]), Ya[start : start + batch])
    return fmap, rls
