"""The model file of the incremental RLSC: what :meth:`IncrementalRLSC.to_state` writes, and the
checks of every part of a saved state that :meth:`IncrementalRLSC.from_state` reads.

State version 2 (version 1 files still load): every engine is trained on the same rows without
forgetting, so only the smallest λ's factor is stored, as its packed upper triangle
(:func:`~lifelong_learning.learners.recursive_rls.pack_upper`, bit for bit), with the common
right-hand side; the factors of the other λ's are rebuilt on load by
:meth:`RecursiveRLS.regularized` (``RᵀR + (λ' − λ_min)I``, one Cholesky each; starting from the
smallest λ only adds to the diagonal, so the rebuilt matrix stays positive definite). An engine
whose rebuild cannot be trusted to :data:`~lifelong_learning.learners.rlsc.REBUILD_TOLERANCE`
(worst-case bound :meth:`RecursiveRLS.rebuild_error_bound`), or that does not share the rows,
keeps its own packed factor (:func:`factor_sources`). Validation features are stored as float32
when that is exact (features that came as float32, e.g. from a Features message), else as
float64. For d = 1280 and 5 λ's this is ~8 MB instead of ~69 MB (docs/benchmarks/checkpoint.md).

(:class:`~lifelong_learning.learners.IncrementalRLSC` is the class these functions serve; they take
its parts, or the classifier as an argument, so that this module does not import it.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lifelong_learning.core.model_file import prefixed, unprefixed
from lifelong_learning.learners.feature_map import restore_feature_map, store_feature_map
from lifelong_learning.learners.labels import Label, check_label, label_key
from lifelong_learning.learners.model_selection import RECODING_SHRINK, Selection
from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.learners.taken_back import TakenBack
from lifelong_learning.learners.unlearning import InputDigests, SampleStore


# ---------------------------------------------------------------------- writing
def factor_sources(engines: Sequence[RecursiveRLS], tolerance: float) -> list[int | None]:
    """Per engine, ``None`` (its factor is stored) or the engine its factor is rebuilt from: the
    smallest λ's engine, when both saw the same rows without forgetting (same count, the same
    right-hand side bit for bit) and the rebuild's worst-case error is within ``tolerance``."""
    if not engines:
        return []
    base = int(np.argmin([rls.lam for rls in engines]))
    src = engines[base]
    sources: list[int | None] = []
    for j, rls in enumerate(engines):
        shares = (
            j != base
            and rls.forgetting == 1.0
            and rls.n_samples == src.n_samples
            and np.array_equal(rls.rhs, src.rhs)
            and src.rebuild_error_bound(rls.lam) <= tolerance
        )
        sources.append(base if shares else None)
    return sources


def validation_features(val_X: np.ndarray) -> np.ndarray:
    """The validation buffer's features as stored: float32 where that is exact, else float64."""
    val_X32 = val_X.astype(np.float32)
    return val_X32 if bool(np.array_equal(val_X32, val_X)) else val_X.copy()


def labels_entry(labels: Sequence[Label]) -> list[dict[str, Any]]:
    """The classes, each with its type (``1`` and ``"1"`` are different classes)."""
    return [{"type": "int" if isinstance(c, int) else "str", "value": c} for c in labels]


def shared_factor_entry(serving: int, since_selection: int, selection: Selection | None) -> dict[str, Any]:
    """The shared-factor mode's λ in use, training samples since the selection, and the selection."""
    return {
        "serving": serving,
        "since_selection": since_selection,
        "selection": None
        if selection is None
        else {
            "lambda_index": selection[0],
            "alpha": selection[1],
            "accuracy": [None if np.isnan(a) else float(a) for a in selection[2]],
            "inverse_temperature": selection[3],
            "calibration_samples": selection[4],
        },
    }


# ---------------------------------------------------------------------- reading, with checks
def saved_shared_factor(saved: Any, n_lambdas: int) -> tuple[int, int, Selection | None]:
    """``(serving, since_selection, selection)`` of :func:`shared_factor_entry`, checked."""
    serving, since = saved["serving"], saved["since_selection"]
    for name, value in (("serving", serving), ("since_selection", since)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"shared_factor.{name} must be an integer ≥ 0, got {value!r}")
    if serving >= n_lambdas:
        raise ValueError(f"shared_factor.serving {serving} is not a λ candidate")
    chosen = saved["selection"]
    if chosen is None:
        return serving, since, None
    accuracy = np.array([np.nan if a is None else float(a) for a in chosen["accuracy"]])
    t, n = float(chosen["inverse_temperature"]), int(chosen["calibration_samples"])
    alpha = float(chosen["alpha"])
    if int(chosen["lambda_index"]) != serving or accuracy.shape != (n_lambdas,):
        raise ValueError("the saved selection does not match the λ in use")
    if not (np.isfinite(t) and t > 0 and n >= 0 and 0.0 <= alpha <= 1.0):
        raise ValueError("the saved selection holds invalid values")
    return serving, since, Selection(serving, alpha, accuracy, t, n)


def saved_labels(entries: Any) -> list[Label]:
    """The classes of a saved state, their types checked, no duplicates."""
    labels: list[Label] = []
    for entry in entries:
        typ, value = entry["type"], entry["value"]
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if (typ == "int") != is_int or (typ == "str" and not isinstance(value, str)):
            raise ValueError(f"class {entry!r} does not match its type")
        labels.append(check_label(value))
    if len({label_key(lab) for lab in labels}) != len(labels):
        raise ValueError("duplicate classes")
    return labels


def saved_counts(arrays: dict[str, np.ndarray], n_classes: int, n_seen: int) -> tuple[np.ndarray, np.ndarray]:
    """Training and seen counts per class: non-negative integers, consistent with each other."""
    counts = []
    for name in ("train_counts", "seen_counts"):
        a = np.asarray(arrays[name])
        if a.shape != (n_classes,) or not np.issubdtype(a.dtype, np.integer) or np.any(a < 0):
            raise ValueError(f"{name} must be {n_classes} non-negative integers")
        counts.append(a.astype(np.int64))
    train, seen = counts
    if np.any(seen < train):
        raise ValueError("seen_counts < train_counts")
    if n_seen != int(seen.sum()):
        raise ValueError("n_samples_seen does not match the class counts")
    return train, seen


def saved_factor_sources(factor_of: Any, n_engines: int) -> list[int | None]:
    """``factor_of`` of a saved state (state version 2; ``None``: every factor stored) checked: each
    entry ``None`` or the index of another engine whose factor is stored."""
    if factor_of is None:
        return [None] * n_engines
    if not isinstance(factor_of, list) or len(factor_of) != n_engines:
        raise ValueError("factor_of must name a source (or null) per engine")
    for j, b in enumerate(factor_of):
        if b is None:
            continue
        if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < n_engines or b == j:
            raise ValueError(f"factor_of[{j}] = {b!r} is not another engine")
        if factor_of[b] is not None:
            raise ValueError(f"engine {j} is rebuilt from engine {b}, whose factor is not stored")
    return factor_of


def saved_engines(
    entries: Any,
    arrays: dict[str, np.ndarray],
    lambdas: Sequence[float],
    d: int | None,
    n_classes: int,
    n_trained: int,
    factor_of: Any = None,
) -> list[RecursiveRLS]:
    """One engine per λ of ``lambdas``, each matching λ, the classes, the dimension ``d`` (None: any)
    and the counts; the stored ones read, the others rebuilt from their source's factor (one Gram
    matrix per source)."""
    if not isinstance(entries, list) or len(entries) != len(lambdas):
        raise ValueError("one engine per λ candidate expected (one in all with a shared factor)")
    sources = saved_factor_sources(factor_of, len(entries))
    engines: list[RecursiveRLS | None] = [
        RecursiveRLS.from_state(em, unprefixed(f"engine{j}", arrays)) if sources[j] is None else None
        for j, em in enumerate(entries)
    ]
    for b in sorted({b for b in sources if b is not None}):
        rebuilt = [j for j, src in enumerate(sources) if src == b]
        for em in (entries[j] for j in rebuilt):
            if float(em["forgetting"]) != 1.0 or int(em["n_samples"]) != engines[b].n_samples:
                raise ValueError("a rebuilt engine must share its source's samples, without forgetting")
        lams = [float(entries[j]["lam"]) for j in rebuilt]
        for j, rls in zip(rebuilt, engines[b].regularized(lams), strict=True):
            engines[j] = rls
    out = []
    for j, rls in enumerate(engines):
        if rls.lam != lambdas[j] or rls.n_outputs != n_classes or rls.forgetting != 1.0:
            raise ValueError(f"engine {j} does not match λ, classes or forgetting")
        if d is not None and rls.n_features != d:
            raise ValueError(f"engine {j} has dimension {rls.n_features}, expected {d}")
        if rls.n_samples != n_trained:
            raise ValueError(f"engine {j} saw {rls.n_samples} samples, counts say {n_trained}")
        out.append(rls)
    return out


def saved_validation(
    arrays: dict[str, np.ndarray], d: int, n_classes: int, capacity: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The validation buffer ``(X, y, age)``: consistent shapes, labels in range, finite."""
    val_X = np.asarray(arrays["val_X"], dtype=np.float64)
    val_y = np.asarray(arrays["val_y"])
    val_age = np.asarray(arrays["val_age"])
    V = val_y.shape[0] if val_y.ndim == 1 else -1
    if V < 0 or val_X.shape != (V, d) or val_age.shape != (V,) or V > capacity:
        raise ValueError("validation buffer has inconsistent shapes")
    if not np.issubdtype(val_y.dtype, np.integer) or np.any((val_y < 0) | (val_y >= max(n_classes, 1))):
        raise ValueError("validation labels out of range")
    if not np.all(np.isfinite(val_X)):
        raise ValueError("validation buffer holds NaN or Inf")
    return val_X.copy(), val_y.astype(np.int64), val_age.astype(np.int64)


# ---------------------------------------------------------------------- the whole state
def state_of(clf: Any, tolerance: float) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The state of the classifier ``clf`` (:meth:`IncrementalRLSC.to_state`): ``factor_of[j]`` is
    ``None`` when engine ``j``'s packed factor and right-hand side are stored under ``engine<j>/``,
    or the index of the engine whose factor and right-hand side it is rebuilt from (within
    ``tolerance``); ``val_X`` is float32 where that is exact."""
    meta: dict[str, Any] = {
        "lambdas": clf.lambdas.tolist(),
        "alpha": clf.alpha,
        "validation_every": clf.validation_every,
        "alpha_grid": clf.alpha_grid.tolist(),
        "min_class_count": clf.min_class_count,
        "max_validation": clf.max_validation,
        "alpha_init": clf.alpha_init,
        "n_features": clf.n_features_in_,
        "classes": labels_entry(clf._labels),
        "n_samples_seen": clf.n_samples,
        "engines": [],
        "feature_map": None,
    }
    arrays: dict[str, np.ndarray] = {
        "train_counts": clf._train_counts.copy(),
        "seen_counts": clf._seen_counts.copy(),
        "val_X": validation_features(clf._val_X),
        "val_y": clf._val_y.copy(),
        "val_age": clf._val_age.copy(),
    }
    factor_of = factor_sources(clf._engines, tolerance)
    meta["factor_of"] = factor_of
    for j, rls in enumerate(clf._engines):
        meta["engines"].append(rls.scalar_state())
        if factor_of[j] is None:
            arrays.update(prefixed(f"engine{j}", rls.to_state(packed=True)[1]))
    if clf._labels:
        t, n = clf.calibration_
        meta["calibration"] = {"method": "temperature", "inverse_temperature": t, "validation_samples": n}
    meta["selection_every"] = clf.selection_every
    meta["calibration_evidence"] = clf.calibration_evidence
    meta["recoding_shrink"] = clf.recoding_shrink
    if clf.keep_samples or clf._clock != clf.n_samples:  # exact unlearning (learners/unlearning.py)
        meta.update(clf._kept.store_into(arrays, clf._clock))
    clf._taken_back.store_into(meta, arrays)
    clf._inputs.store_into(arrays)
    if clf.shares_factor:  # one engine, of λ = lambdas[serving]; the selection as made
        meta["shared_factor"] = shared_factor_entry(clf._serving, clf._since_selection, clf._selection)
    if clf.feature_map is not None:
        store_feature_map(clf.feature_map, meta, arrays)
    return meta, arrays


def restored(cls: Any, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    """The classifier of class ``cls`` that :func:`state_of` describes (every part checked)."""
    n_features = meta["n_features"]
    clf = cls(
        lambdas=meta["lambdas"],
        alpha=meta["alpha"],
        validation_every=meta["validation_every"],
        alpha_grid=meta["alpha_grid"],
        min_class_count=meta["min_class_count"],
        max_validation=meta["max_validation"],
        alpha_init=meta["alpha_init"],
        feature_map=restore_feature_map(meta, arrays),
        n_features=None if n_features is None else int(n_features),
        selection_every=int(meta.get("selection_every", 0)),
        keep_samples=int(meta.get("keep_samples", 0)),
        calibration_evidence=str(meta.get("calibration_evidence", "samples")),
        recoding_shrink=float(meta.get("recoding_shrink", RECODING_SHRINK)),
    )
    if clf.shares_factor:
        clf._serving, clf._since_selection, selection = saved_shared_factor(
            meta["shared_factor"], clf.lambdas.size
        )
        if clf._engines:  # made by the constructor (known dimension) for the default λ
            clf._make_engines(clf._engines[0].n_features)
        if selection is not None:
            clf._selection = selection
    clf._taken_back = TakenBack.restore(meta, arrays)
    labels = saved_labels(meta["classes"])
    train_counts, seen_counts = saved_counts(arrays, len(labels), int(meta["n_samples_seen"]))
    if not labels and not seen_counts.sum() and not meta["engines"]:
        return clf
    factor_of = meta.get("factor_of") if meta.get("state_version", 1) >= 2 else None
    lambdas = [clf.lambdas[clf._serving]] if clf.shares_factor else list(clf.lambdas)
    engines = saved_engines(
        meta["engines"],
        arrays,
        lambdas,
        clf.n_model_features,
        len(labels),
        int(train_counts.sum()),
        factor_of,
    )
    val_X, val_y, val_age = saved_validation(arrays, engines[0].n_features, len(labels), clf.max_validation)
    if clf.n_features_in_ is None:
        clf.n_features_in_ = engines[0].n_features
    clf._engines = engines
    clf._labels = labels
    clf._index = {label_key(lab): i for i, lab in enumerate(labels)}
    clf._train_counts, clf._seen_counts = train_counts, seen_counts
    clf.n_samples = int(seen_counts.sum())
    clf._val_X, clf._val_y, clf._val_age = val_X, val_y, val_age
    d = val_X.shape[1]
    clf._clock, clf._kept = SampleStore.restore(meta, arrays, clf.keep_samples, d, clf.n_samples)
    clf._inputs = InputDigests.restore(arrays, clf._clock)
    if not clf.shares_factor:
        clf._val_S = [rls.predict(val_X) if val_y.size else np.zeros((0, len(labels))) for rls in engines]
    return clf
