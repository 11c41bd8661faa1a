"""Export a fitted offline model to the online learners (feature map + RLS state).

The model is a tuned :class:`~lifelong_learning.nystrom.krr.NystromKRR` or any
:class:`~lifelong_learning.nystrom.estimator.OfflineMethod`: what is exported is its
``feature_map()`` and its ``engine_lam()``. For Nyström the map is ``φ(x) = L⁻¹k(Z, x)``
(:class:`~lifelong_learning.learners.nystrom_features.NystromFeatureMap`); a :class:`RecursiveRLS`
with ``lam = nλ`` trained on ``Φ = K_nm L⁻ᵀ`` has weights ``W = Lᵀβ``, i.e. reproduces the Nyström
KRR exactly, and keeps learning online from there.

For inverse dynamics the Nyström model is the semiparametric residual (thesis Fig. 8.2): it is
tuned on :func:`residual_data` of a rigid-body model (with friction) fitted on the same samples,
the inputs ``[x̃, τ̂_P/τ_max]`` of :func:`~lifelong_learning.dynamics.semiparametric.residual_features`
normalized from the URDF as the online node does. The exported model is trained by **replaying**
the samples in time order through the online learner (blocks of ``block`` samples), so that it
is the model the robot would have learned online with the tuned feature map and, optionally, a
forgetting factor: on a robot whose dynamics changed while it logged (a grasped payload), this
generalizes to new motion far better than one batch fit of every sample (see
``docs/benchmarks/dynamics.md``). ``block=None`` is the batch fit, which reproduces the tuned
Nyström residual exactly on its training data.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lifelong_learning.core.checks import as_rows
from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics, residual_features
from lifelong_learning.learners.feature_map import FeatureMap
from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.learners.rlsc import IncrementalRLSC
from lifelong_learning.learners.taken_back import TakenBack
from lifelong_learning.nystrom.distributed import ONE_PROCESS, Group

_BLOCK = 4096  # rows per RLS update when replaying the training data


def _fitted(model: Any) -> Any:
    if not model.is_fitted:
        raise ValueError("the model is not fitted; call fit (or tune) first")
    return model


def feature_map_of(model: Any) -> FeatureMap:
    """The feature map the online learners continue from: ``model.feature_map()`` of a fitted
    :class:`NystromKRR` or :class:`~lifelong_learning.nystrom.estimator.OfflineMethod` (a Nyström
    map: centres, length-scales, Cholesky factor; an SLKL map: the active centres and weights)."""
    return _fitted(model).feature_map()


def regularization_of(model: Any, n_samples: int | None = None) -> float:
    """The RLS ``lam`` that reproduces the model (``nλ`` for Nyström, ``n`` = its training rows),
    or that applies its regularization per sample to a refit on ``n_samples`` rows
    (``model.engine_lam``)."""
    return float(_fitted(model).engine_lam(n_samples))


def to_recursive_rls(model: Any, X: Any, Y: Any, batch: int = _BLOCK) -> tuple[FeatureMap, RecursiveRLS]:
    """Feature map and a RecursiveRLS trained on ``(φ(X), Y)`` with ``lam = nλ`` (``batch`` rows per update).

    ``X``, ``Y`` must be the data ``model`` was fitted on for the RLS to reproduce it.
    """
    fmap = feature_map_of(model)
    Xa = np.asarray(X, dtype=np.float64)
    Ya = np.asarray(Y, dtype=np.float64)
    if Ya.ndim == 1:
        Ya = Ya[:, None]
    if Xa.shape[0] != model.n_samples:
        raise ValueError(f"the model was fitted on {model.n_samples} rows, got {Xa.shape[0]}")
    rls = RecursiveRLS(fmap.n_features, Ya.shape[1], lam=regularization_of(model))
    for start in range(0, Xa.shape[0], batch):
        rls.update(fmap.transform(Xa[start : start + batch]), Ya[start : start + batch])
    return fmap, rls


def one_hot(labels: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
    """Classes in order of first appearance (IncrementalRLSC's column order) and 0/1 targets."""
    classes: list[Any] = []
    index: dict[Any, int] = {}
    for lab in labels:
        if lab not in index:
            index[lab] = len(classes)
            classes.append(lab)
    E = np.zeros((len(labels), len(classes)))
    E[np.arange(len(labels)), [index[lab] for lab in labels]] = 1.0
    return classes, E


@dataclass
class ClassifierSums:
    """What an exported classifier needs from labeled rows: ``ΦᵀΦ`` (``gram``), ``ΦᵀE``
    (``cross``, ``E`` one-hot with a column per entry of ``labels``) and the rows of each label
    (``counts``), in the feature space of a tuned Nyström map (thesis eqs. 7.16-7.17 are sums).
    Sums of two groups of rows add (:meth:`__add__`)."""

    labels: list[Any]
    gram: np.ndarray
    cross: np.ndarray
    counts: np.ndarray

    def __add__(self, other: ClassifierSums) -> ClassifierSums:
        """The sums of both groups of rows; columns: this one's labels, then the other's new ones."""
        labels = list(dict.fromkeys([*self.labels, *other.labels]))
        return ClassifierSums(
            labels,
            self.gram + other.gram,
            *(a + b for a, b in zip(self.in_columns(labels), other.in_columns(labels), strict=True)),
        )

    def in_columns(self, labels: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """``cross`` and ``counts`` with a column per entry of ``labels`` (zero for labels without rows)."""
        at = {lab: j for j, lab in enumerate(labels)}
        cross, counts = np.zeros((self.gram.shape[0], len(labels))), np.zeros(len(labels))
        cols = [at[lab] for lab in self.labels]
        cross[:, cols], counts[cols] = self.cross, self.counts
        return cross, counts


def classifier_sums(
    model: Any, X: Any, labels: Sequence[Any], classes: Sequence[Any] = (), group: Group = ONE_PROCESS
) -> ClassifierSums:
    """The :class:`ClassifierSums` of rows ``(X, labels)`` in ``model``'s feature map, over every
    process of ``group`` (each passes its own rows, in the global order; the sums are all-reduced).
    Columns: ``classes`` first, then the labels in order of first appearance.

    ``X``: the rows, or a callable that gives them as blocks of rows in order (e.g. read back from a
    file: memory is then bounded by a block and ``m``). Bad rows (dimension, NaN/Inf, their count)
    or a block that cannot be read raise on every process of ``group``."""
    fmap = feature_map_of(model)
    d = fmap.n_inputs  # the model's input dimension
    order = list(
        dict.fromkeys(
            [*classes, *itertools.chain.from_iterable(group.all_gather(list(dict.fromkeys(labels))))]
        )
    )
    column = {lab: j for j, lab in enumerate(order)}
    m = fmap.n_features
    sums = np.zeros(m * m + m * len(order) + len(order))
    G = sums[: m * m].reshape(m, m)
    C = sums[m * m : m * m + m * len(order)].reshape(m, len(order))
    counts = sums[m * m + m * len(order) :]
    error: Exception | None = None
    try:
        seen = 0
        for block in X() if callable(X) else _row_blocks(X, d):
            rows = as_rows(block, d, "X")  # finite
            k = rows.shape[0]
            if seen + k <= len(labels):
                Phi = np.asarray(fmap.transform(rows), dtype=np.float64)
                cols = np.array([column[lab] for lab in labels[seen : seen + k]], dtype=np.int64)
                E = np.zeros((k, len(order)))
                E[np.arange(k), cols] = 1.0
                G += Phi.T @ Phi
                C += Phi.T @ E
                np.add.at(counts, cols, 1.0)
            seen += k
        if seen != len(labels):
            raise ValueError(f"{seen} rows and {len(labels)} labels")
    except Exception as exc:  # bad rows, or a block that could not be read: every process raises
        error = exc
    group.agree(error)
    total = group.all_reduce(torch.from_numpy(sums)).numpy() if group.world_size > 1 else sums
    return ClassifierSums(
        order,
        total[: m * m].reshape(m, m),
        total[m * m : m * m + m * len(order)].reshape(m, len(order)),
        np.rint(total[m * m + m * len(order) :]),
    )


def classifier_from_sums(
    model: Any,
    sums: ClassifierSums,
    classes: Sequence[Any] = (),
    path: str | os.PathLike[str] | None = None,
    group: Group = ONE_PROCESS,
    taken_back: TakenBack | None = None,
) -> IncrementalRLSC:
    """The exported classifier of :func:`export_classifier` from the rows' sums: ``classes``
    first (they exist even without a row), then the sums' labels; remembering ``taken_back`` (the
    serving model's, learners/taken_back.py). Saved to ``path`` if given (by the main process of
    ``group``)."""
    order = list(dict.fromkeys([*classes, *sums.labels]))
    cross, counts = sums.in_columns(order)
    n_per = counts.astype(np.int64)
    fmap = feature_map_of(model)
    clf = IncrementalRLSC(lambdas=regularization_of(model, int(n_per.sum())), alpha=0.0, feature_map=fmap)
    clf.add_classes(list(classes))
    clf.learn_sums(order, sums.gram, cross, n_per, fmap.n_inputs)
    if taken_back is not None:
        clf.remember_taken_back(taken_back)
    if path is not None and group.is_main:
        clf.save(path)
    return clf


def export_classifier(
    model: Any,
    X: Any,
    labels: Sequence[Any],
    path: str | os.PathLike[str] | None = None,
    classes: Sequence[Any] = (),
    group: Group = ONE_PROCESS,
) -> IncrementalRLSC:
    """An :class:`~lifelong_learning.learners.rlsc.IncrementalRLSC` (``λ = nλ``, ``α = 0``) with the
    model's Nyström map, trained on ``(X, labels)``: it reproduces ``model`` when ``model`` was
    fitted on ``one_hot(labels)`` of the same rows (other rows: a refit with the tuned map and
    per-sample ``λ``). ``classes`` (e.g. every class the serving model knows) come first and exist
    even without a sample; the others follow in order of first appearance. Trained from the rows'
    sums (:func:`classifier_sums`, :meth:`IncrementalRLSC.learn_sums`), so with ``group`` the rows
    may be shared among processes (each passes its own, in the global order; every process gets the
    same classifier). ``X``: the rows, or a callable of blocks of rows (:func:`classifier_sums`).
    Saved to ``path`` if given (by the main process)."""
    sums = classifier_sums(model, X, labels, classes, group)
    return classifier_from_sums(model, sums, classes, path, group)


def _row_blocks(X: Any, d: int) -> Iterator[np.ndarray]:
    """The rows of ``X`` (checked: ``d`` columns, finite) in blocks of :data:`_BLOCK`."""
    rows = as_rows(X, d, "X")
    for start in range(0, rows.shape[0], _BLOCK):
        yield rows[start : start + _BLOCK]


def residual_data(
    parametric: SemiparametricInverseDynamics, q: Any, qd: Any, qdd: Any, tau: Any
) -> tuple[np.ndarray, np.ndarray]:
    """The residual's inputs ``[x̃, τ̂_P/τ_scale]`` and targets ``τ − τ̂_P`` for samples, given a
    rigid-body (parametric) model: what the Nyström residual is tuned and tested on."""
    tau_p = parametric.predict(q, qd, qdd)
    x = parametric.normalized_state(q, qd, qdd)
    return residual_features(x, tau_p, parametric.torque_scale), np.asarray(tau, dtype=np.float64) - tau_p


def rigid_body_residuals(
    urdf: str,
    joint_names: Sequence[str],
    q: Any,
    qd: Any,
    qdd: Any,
    tau: Any,
    warm_start: SemiparametricInverseDynamics | None = None,
) -> tuple[SemiparametricInverseDynamics, np.ndarray, np.ndarray]:
    """Fit the parametric (rigid-body with friction) part on the data, with the online model's URDF
    normalization, from the URDF prior or from ``warm_start``'s learned parameters
    (:meth:`~lifelong_learning.dynamics.SemiparametricInverseDynamics.continue_from`), and return it
    with :func:`residual_data` of the data."""
    parametric = SemiparametricInverseDynamics(urdf, list(joint_names), mode="parametric")
    if warm_start is not None:
        parametric.continue_from(warm_start)
    parametric.update(q, qd, qdd, tau)
    return (parametric, *residual_data(parametric, q, qd, qdd, tau))


def rechunked(blocks: Iterable[Sequence[Any]], size: int | None) -> Iterator[list[np.ndarray]]:
    """The rows of ``blocks`` (each a sequence of arrays with the same rows) in chunks of exactly
    ``size`` rows (the last one shorter), whatever the blocks' sizes; ``None``: each block as it is."""
    pending: list[list[np.ndarray]] = []
    held = 0
    for block in blocks:
        arrays = [np.asarray(a, dtype=np.float64) for a in block]
        if not arrays[0].shape[0]:
            continue
        if size is None:
            yield arrays
            continue
        pending.append(arrays)
        held += arrays[0].shape[0]
        if held < size:
            continue
        joined = (
            [np.concatenate(parts) for parts in zip(*pending, strict=True)] if len(pending) > 1 else arrays
        )
        n_full = held - held % size
        for start in range(0, n_full, size):
            yield [a[start : start + size] for a in joined]
        pending = [[a[n_full:] for a in joined]] if n_full < held else []
        held -= n_full
    if held:
        yield [np.concatenate(parts) for parts in zip(*pending, strict=True)]


def replay_inverse_dynamics(
    model: Any,
    urdf: str,
    joint_names: Sequence[str],
    blocks: Iterable[Sequence[Any]],
    n_samples: int,
    path: str | os.PathLike[str] | None = None,
    forgetting: float = 1.0,
    block: int | None = 10,
    warm_start: SemiparametricInverseDynamics | None = None,
    lam_scale: float = 1.0,
    check: Callable[[], None] | None = None,
) -> SemiparametricInverseDynamics:
    """:func:`export_inverse_dynamics` on samples that come in blocks (``(q, q̇, q̈, τ)`` each, in
    time order; e.g. read from disk a block at a time), ``n_samples`` of them in all (the residual's
    ``lam`` is ``lam_scale · n_samples · λ``): replayed ``block`` samples at a time across the
    blocks' boundaries, or, with ``block=None``, one update per block given."""
    sp = SemiparametricInverseDynamics(
        urdf,
        list(joint_names),
        mode="semiparametric",
        feature_map=feature_map_of(model),
        lam_residual=float(lam_scale) * regularization_of(model, n_samples),
        forgetting=forgetting,
    )
    if warm_start is not None:
        sp.continue_from(warm_start)
    for chunk in rechunked(blocks, None if block is None else max(1, int(block))):
        if check is not None:
            check()
        sp.update(*chunk)
    if check is not None:
        check()
    if path is not None:
        sp.save(path)
    return sp


def export_inverse_dynamics(
    model: Any,
    urdf: str,
    joint_names: Sequence[str],
    q: Any,
    qd: Any,
    qdd: Any,
    tau: Any,
    path: str | os.PathLike[str] | None = None,
    forgetting: float = 1.0,
    block: int | None = 10,
    warm_start: SemiparametricInverseDynamics | None = None,
    lam_scale: float = 1.0,
    check: Callable[[], None] | None = None,
) -> SemiparametricInverseDynamics:
    """A :class:`~lifelong_learning.dynamics.semiparametric.SemiparametricInverseDynamics` whose
    residual part is the model's Nyström map + RLS (``lam = lam_scale · nλ``), trained on the
    samples (in time order): replayed ``block`` samples at a time with ``forgetting`` per sample
    (see the module docstring), or, with ``block=None``, in one batch: then, with ``model`` tuned on
    :func:`rigid_body_residuals` of the same data and ``lam_scale = 1``, its residual equals
    ``model``. With ``warm_start``, its parametric part starts from that model's learned
    parameters. Saved to ``path`` if given. ``check()`` is called before every replayed block and
    before saving: an exception it raises (a request to stop) ends the export, nothing saved."""
    arrays = [np.asarray(a, dtype=np.float64) for a in (q, qd, qdd, tau)]
    n = arrays[0].shape[0]
    return replay_inverse_dynamics(
        model,
        urdf,
        joint_names,
        [arrays],
        n,
        path,
        forgetting=forgetting,
        block=block,
        warm_start=warm_start,
        lam_scale=lam_scale,
        check=check,
    )
