"""Incremental multiclass RLSC with class extension and recoding (thesis ch. 7, Algorithm 2).

Linear one-vs-all regularized least squares classification, trained one labeled sample at a
time on :class:`~lifelong_learning.learners.RecursiveRLS` (one engine per λ candidate):

- eqs. 7.16-7.19: ``A_k = A_{k-1} + x xᵀ`` (Cholesky rank-1 update; the extra ``+λI`` printed
  in eq. 7.18 is a typo), ``b_k = b_{k-1} + x e_yᵀ``, no intercept, ``λ`` not scaled by ``k``;
- eq. 7.20: a label never seen before appends a zero column to ``b`` (and a zero count);
  ``A`` is unchanged, nothing is retrained;
- §7.5.2 (eq. 7.21): recoding ``W_k = A_k⁻¹ b_k Γ_k^α`` with ``Γ_k = k · diag(k_1..k_T)⁻¹``
  (``k`` training samples, ``k_t`` of class ``t``). ``Γ`` is diagonal, so the recoded scores
  are the plain scores with column ``t`` scaled by ``(k/k_t)^α``: one solve serves every α;
- §7.6.3: online model selection. With several λ candidates and/or ``alpha="auto"``, every
  ``validation_every``-th labeled sample is held out (not trained on) and kept in a bounded
  validation buffer. The best λ is the one with the highest validation accuracy; α follows
  the thesis heuristic: the largest α of a grid whose validation accuracy on well-represented
  classes (at least ``min_class_count`` training samples) is ≥ the one at α = 0. Precisely:
  for each α of the grid, λ*(α) is the candidate with the best accuracy on all validation
  samples (ties → the larger λ); α_ is the largest α whose well-represented accuracy at
  λ*(α) is ≥ that of α = 0 at λ*(0), and λ_ = λ*(α_). Validation scores are always those of
  the *current* models (not frozen at hold-out time), so the choice follows the stream.

Held-out samples of a class with no training sample yet are *learned* instead of held out
(a class must exist before it can be validated, and the first samples of a new object are
the most precious); the hold-out position is then simply skipped.

Cost per labeled sample, per λ candidate (``d`` features, ``T`` classes, ``V`` buffered
validation samples): one Cholesky rank-1 update (O(d²)), ``b += x e_yᵀ`` (O(d)), and to keep
the validation scores ``S = X_val A⁻¹ B`` exact without re-solving the ``d×T`` weights, the
Sherman–Morrison/Woodbury identity ``A_new⁻¹ = A⁻¹ − G (I + Z G)⁻¹ Gᵀ``, ``G = A⁻¹Zᵀ`` (two
triangular solves, O(d²)) plus O(dV + dT) products. Nothing depends on the number of samples
seen, and the weights ``W`` are never re-solved per sample (prediction of a few rows uses two
triangular solves, :meth:`RecursiveRLS.predict`).

Nothing half-applied: :meth:`IncrementalRLSC.partial_fit` and :meth:`IncrementalRLSC.add_classes`
work on drafts of the engines (:meth:`RecursiveRLS.draft`: the new factors are written beside
the old ones, no ``d × d`` copy) and on new arrays for the counts, the class list and the
validation buffer; only when every λ's new state exists and is finite is it committed (O(1)
per engine). Anything that fails on the way (a bad row, an overflow, an exception in any
engine) leaves the whole model as it was.

Calibrated confidence (:mod:`~lifelong_learning.learners.calibration`, temperature scaling of
Guo et al. 2017): the probabilities are ``softmax(t · s)`` of the recoded scores ``s`` of the
selected λ and α, with one inverse temperature ``t`` fitted by minimising the (Platt-smoothed)
negative log-likelihood of the validation buffer's scores. It is refitted whenever the model
selection runs (lazily, after any update), on the same held-out samples. While the buffer holds
fewer than :data:`MIN_CALIBRATION_SAMPLES` samples (or no model selection keeps one, or a single
class is known), ``t = 1``: the plain softmax of the scores, which is underconfident for RLSC
(scores of order 1: 0.14 for a correct top class of 8), so a threshold then errs towards
"unknown". :attr:`IncrementalRLSC.calibration_` says which.

Model file (state version 2; version 1 files still load): every engine is trained on the same rows
without forgetting, so only the smallest λ's factor is stored, as its packed upper triangle
(:func:`~lifelong_learning.learners.recursive_rls.pack_upper`, bit for bit), with the common
right-hand side; the factors of the other λ's are rebuilt on load by
:meth:`RecursiveRLS.regularized` (``RᵀR + (λ' − λ_min)I``, one Cholesky each; starting from the
smallest λ only adds to the diagonal, so the rebuilt matrix stays positive definite). An engine
whose rebuild cannot be trusted to :data:`REBUILD_TOLERANCE` (worst-case bound
:meth:`RecursiveRLS.rebuild_error_bound`), or that does not share the rows, keeps its own packed
factor. Validation features are stored as float32 when that is exact (features that came as
float32, e.g. from a Features message), else as float64. For d = 1280 and 5 λ's this is ~8 MB
instead of ~69 MB (docs/benchmarks/checkpoint.md).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from lifelong_learning.core.checks import as_rows
from lifelong_learning.core.model_file import prefixed, unprefixed
from lifelong_learning.core.persistence import PersistentModel
from lifelong_learning.learners.calibration import T_DEFAULT, fit_inverse_temperature, softmax
from lifelong_learning.learners.cholesky import block_pays, gram
from lifelong_learning.learners.feature_map import FeatureMap, restore_feature_map, store_feature_map
from lifelong_learning.learners.recursive_rls import RecursiveRLS

Label = int | str

#: rows of a larger Euclidean norm are refused (learning and prediction): with this bound no
#: entry of a factor, right-hand side or validation score can overflow float64 (‖R‖²_F = tr A =
#: dλ + Σ‖x‖²), so an update either succeeds with finite numbers or is refused before it starts.
#: Far below it, a row much larger than the others already ruins the factor's accuracy (its
#: rounding errors scale with ‖A‖): bound magnitudes where the data come from
#: (:class:`~lifelong_learning.learners.recognition_gate.RecognitionGate`).
MAX_ROW_NORM = 1e100

#: validation samples the confidence calibration needs; with fewer, the plain softmax (t = 1)
MIN_CALIBRATION_SAMPLES = 10

#: an engine is rebuilt from another's factor on load only if the worst-case relative change of its
#: predictions (:meth:`RecursiveRLS.rebuild_error_bound`) is at most this; else its factor is stored
REBUILD_TOLERANCE = 1e-6

#: the model state that :meth:`IncrementalRLSC._transaction` restores when an update fails
_STATE = (
    "n_features_in_",
    "_labels",
    "_index",
    "_train_counts",
    "_seen_counts",
    "n_samples",
    "_engines",
    "_val_X",
    "_val_y",
    "_val_age",
    "_val_S",
    "_selection",
    "_serving",
    "_since_selection",
)


def _check_label(label: Any) -> Label:
    """A label is an integer (not a bool) or a non-empty string of printable characters
    (``str.isprintable``: no control character such as NUL or a newline, no format, private-use
    or unassigned code point, no whitespace but the ASCII space) that is not only spaces; numpy
    scalars are unwrapped."""
    if isinstance(label, np.generic):
        label = label.item()
    if isinstance(label, bool) or not isinstance(label, (str, numbers.Integral)):
        raise ValueError(f"labels must be non-empty strings or integers, got {label!r}")
    if isinstance(label, str):
        if not label.strip():
            raise ValueError("labels must not be empty")
        if not label.isprintable():
            raise ValueError(f"labels must be printable (no control characters), got {label[:80]!r}")
        return label
    return int(label)


def _label_key(label: Label) -> tuple[str, Label]:
    # 1 and "1" are different classes; the type is part of the key.
    return ("i" if isinstance(label, int) else "s", label)


class IncrementalRLSC(PersistentModel):
    """Incremental RLSC with class extension and recoding (thesis Algorithm 2), sklearn style.

    Args:
        lambdas: the regularization λ > 0, or several candidates trained side by side.
        alpha: recoding exponent in [0, 1], or ``"auto"`` for the §7.6.3 heuristic.
        validation_every: with model selection on, every ``validation_every``-th labeled
            sample is held out for validation (thesis: 6).
        alpha_grid: the α values the heuristic chooses from (must contain 0).
        min_class_count: a class with at least this many training samples is
            "well-represented" and counts in the α heuristic.
        max_validation: capacity of the validation buffer; when full, the oldest sample of the
            class with the most validation samples is replaced (keeps it class-balanced).
        alpha_init: α used by ``alpha="auto"`` before any validation sample of a
            well-represented class exists (the authors' code used 1/2).
        feature_map: optional :class:`FeatureMap` applied before the linear model (e.g. a
            Nyström map exported by the offline tuner).
        n_features: input dimension; inferred from the first :meth:`partial_fit` otherwise.
        selection_every: 0 (default): every λ candidate keeps its own factor, updated with every
            sample, and its validation scores exact (the thesis, §7.6.3). ``k > 0``: one factor,
            of the λ in use, is updated per sample (the cost of one λ), and every ``k`` training
            samples (sooner while the model is young: after 6, 12, 24, ... up to ``k``) the other
            candidates are rebuilt from it (``A' = RᵀR + (λ' − λ)I``, one Gram matrix and one
            Cholesky factorization each, :meth:`RecursiveRLS.regularized`), every candidate is
            scored on the validation buffer, and λ, α and the calibration are chosen again as in
            the exact mode. Between two selections they stay as chosen (module docstring).

    Attributes (after the first sample):
        classes_: the known labels, in score-column order (ints, strings, or both: an
            object array when mixed; ``1`` and ``"1"`` are different classes).
        class_counts_: training samples per class (what Γ uses); ``seen_counts_`` also
            counts held-out samples.
        lambda_, alpha_: the λ and α used for prediction.
        calibration_: the inverse temperature of the confidence and the validation samples it
            was fitted on (0: uncalibrated, plain softmax).
        validation_accuracy_: per λ candidate, validation accuracy at ``alpha_`` (NaN
            before any validation sample).
        n_samples: labeled samples seen (held-out ones included).
    """

    kind = "incremental_rlsc"
    state_version = 2
    older_state_versions = (1,)

    def __init__(
        self,
        lambdas: float | Sequence[float] = 1.0,
        alpha: float | str = 0.0,
        validation_every: int = 6,
        alpha_grid: Sequence[float] | None = None,
        min_class_count: int = 20,
        max_validation: int = 300,
        alpha_init: float = 0.5,
        feature_map: FeatureMap | None = None,
        n_features: int | None = None,
        selection_every: int = 0,
    ):
        lams = np.atleast_1d(np.asarray(lambdas, dtype=np.float64)).ravel()
        if lams.size == 0 or not np.all(np.isfinite(lams)) or np.any(lams <= 0):
            raise ValueError(f"lambdas must be positive numbers, got {lambdas!r}")
        if len(set(lams.tolist())) != lams.size:
            raise ValueError("lambdas must be distinct")
        if isinstance(alpha, str):
            if alpha != "auto":
                raise ValueError(f"alpha must be a number in [0, 1] or 'auto', got {alpha!r}")
        elif not (isinstance(alpha, numbers.Real) and 0.0 <= float(alpha) <= 1.0):
            raise ValueError(f"alpha must be in [0, 1] or 'auto', got {alpha!r}")
        grid = np.linspace(0.0, 1.0, 11) if alpha_grid is None else np.asarray(alpha_grid, dtype=float)
        grid = np.unique(grid.ravel())
        if grid.size == 0 or grid[0] != 0.0 or grid[-1] > 1.0 or not np.all(np.isfinite(grid)):
            raise ValueError("alpha_grid must hold values in [0, 1] including 0")
        if int(validation_every) < 2:
            raise ValueError("validation_every must be ≥ 2")
        if int(min_class_count) < 1 or int(max_validation) < 1:
            raise ValueError("min_class_count and max_validation must be ≥ 1")
        if not 0.0 <= float(alpha_init) <= 1.0:
            raise ValueError("alpha_init must be in [0, 1]")
        if feature_map is not None and not isinstance(feature_map, FeatureMap):
            raise ValueError("feature_map must follow the FeatureMap protocol")
        if isinstance(selection_every, bool) or int(selection_every) < 0:
            raise ValueError(f"selection_every must be an integer ≥ 0, got {selection_every!r}")
        self.selection_every = int(selection_every)
        self.lambdas = lams
        self.alpha = alpha if isinstance(alpha, str) else float(alpha)
        self.validation_every = int(validation_every)
        self.alpha_grid = grid
        self.min_class_count = int(min_class_count)
        self.max_validation = int(max_validation)
        self.alpha_init = float(alpha_init)
        self.feature_map = feature_map
        if feature_map is not None:
            if n_features is not None and int(n_features) != feature_map.n_inputs:
                raise ValueError("n_features must equal feature_map.n_inputs")
            n_features = feature_map.n_inputs
        self.n_features_in_: int | None = None if n_features is None else int(n_features)
        self._init_state()

    # ------------------------------------------------------------------ state
    @property
    def selects_model(self) -> bool:
        """Whether samples are held out for λ/α selection (several λ or ``alpha="auto"``)."""
        return self.lambdas.size > 1 or self.alpha == "auto"

    @property
    def n_model_features(self) -> int | None:
        """Dimension ``d`` of the linear model (after the feature map)."""
        if self.feature_map is not None:
            return self.feature_map.n_features
        return self.n_features_in_

    def _init_state(self) -> None:
        self._labels: list[Label] = []
        self._index: dict[tuple[str, Label], int] = {}
        self._train_counts = np.zeros(0, dtype=np.int64)
        self._seen_counts = np.zeros(0, dtype=np.int64)
        self.n_samples = 0
        self._engines: list[RecursiveRLS] = []
        d = self.n_model_features
        self._val_X = np.zeros((0, d or 0))
        self._val_y = np.zeros(0, dtype=np.int64)
        self._val_age = np.zeros(0, dtype=np.int64)  # sample number when held out
        self._val_S: list[np.ndarray] = []  # per λ: X_val A⁻¹ B  (V × T)
        # (λ index, α, per-λ validation accuracy, inverse temperature, its validation samples)
        self._selection: tuple[int, float, np.ndarray, float, int] | None = None
        # shared-factor selection (selection_every > 0): the λ whose engine is kept, and the
        # training samples it learned since the last selection
        self._serving = self._best_lambda(np.full(self.lambdas.size, np.nan))
        self._since_selection = 0
        self._young_class_grew = False  # set by an update: a young class reached a power of two
        if d is not None:
            self._make_engines(d)

    @property
    def shares_factor(self) -> bool:
        """Whether one factor serves every λ candidate (``selection_every > 0`` with several λ)."""
        return self.selection_every > 0 and self.lambdas.size > 1

    def _make_engines(self, d: int) -> None:
        lams = [self.lambdas[self._serving]] if self.shares_factor else self.lambdas
        self._engines = [RecursiveRLS(d, 0, lam=float(lam)) for lam in lams]
        self._val_X = np.zeros((0, d))
        self._val_S = [] if self.shares_factor else [np.zeros((0, 0)) for _ in lams]

    def set_params(self, **params: Any) -> IncrementalRLSC:
        """Change selection-only hyperparameters (``alpha``, ``alpha_grid``, ``min_class_count``,
        ``alpha_init``) without retraining: the learned state serves every α.

        Raises:
            ValueError: another parameter, or a bad value (nothing changes then).
        """
        allowed = {"alpha", "alpha_grid", "min_class_count", "alpha_init"}
        unknown = set(params) - allowed
        if unknown:
            raise ValueError(f"only {sorted(allowed)} can change after construction, got {sorted(unknown)}")
        current = {
            "alpha": self.alpha,
            "alpha_grid": self.alpha_grid,
            "min_class_count": self.min_class_count,
            "alpha_init": self.alpha_init,
        }
        checked = IncrementalRLSC(lambdas=self.lambdas, **{**current, **params})  # validates
        self.alpha, self.alpha_grid = checked.alpha, checked.alpha_grid
        self.min_class_count, self.alpha_init = checked.min_class_count, checked.alpha_init
        self._selection = None
        if self.shares_factor:
            self.select_model()
        return self

    def reset(self) -> None:
        """Forget every sample and class (keeps hyperparameters, dimension and feature map)."""
        self._init_state()

    @property
    def classes_(self) -> np.ndarray:
        """Known labels in score-column order."""
        labels = self._labels
        if labels and all(isinstance(c, int) for c in labels):
            return np.asarray(labels, dtype=np.int64)
        if labels and all(isinstance(c, str) for c in labels):
            return np.asarray(labels, dtype=str)
        out = np.empty(len(labels), dtype=object)
        out[:] = labels
        return out

    def has_class(self, label: Label) -> bool:
        """Whether ``label`` is a known class (``1`` and ``"1"`` are different classes)."""
        if isinstance(label, np.generic):
            label = label.item()
        if isinstance(label, bool) or not isinstance(label, (str, numbers.Integral)):
            return False
        return _label_key(label if isinstance(label, str) else int(label)) in self._index

    @property
    def class_counts_(self) -> np.ndarray:
        """Training samples per class (held-out ones excluded)."""
        return self._train_counts.copy()

    @property
    def seen_counts_(self) -> np.ndarray:
        """Labeled samples per class, held-out ones included."""
        return self._seen_counts.copy()

    @property
    def n_validation_(self) -> int:
        """Samples in the validation buffer."""
        return int(self._val_y.size)

    def validation_samples(self) -> tuple[np.ndarray, list[Label]]:
        """The held-out samples of the validation buffer, oldest first, and their labels: real
        labeled samples the model kept, e.g. for a retraining that must keep every class.

        Raises:
            ValueError: the model has a feature map (the buffer holds mapped features, not inputs).
        """
        if self.feature_map is not None:
            raise ValueError("the validation buffer of a model with a feature map holds mapped features")
        order = np.argsort(self._val_age, kind="stable")
        return self._val_X[order].copy(), [self._labels[int(c)] for c in self._val_y[order]]

    # ------------------------------------------------------------------ input checks
    def _features(self, X: Any, name: str = "X") -> np.ndarray:
        """Validate raw inputs (dimension, finiteness, norm ≤ :data:`MAX_ROW_NORM`) and apply
        the feature map."""
        a = as_rows(X, self.n_features_in_, name)
        if self.feature_map is not None:
            a = np.asarray(self.feature_map.transform(a), dtype=np.float64)
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{name}: the feature map produced NaN or Inf")
        with np.errstate(over="ignore"):
            norm = float(np.max(np.linalg.norm(a, axis=1), initial=0.0))
        if not norm <= MAX_ROW_NORM:
            raise ValueError(f"{name}: a row has norm {norm:.3g}, beyond {MAX_ROW_NORM:g} (float64 overflow)")
        return a

    @staticmethod
    def _labels_of(y: Any, n: int) -> list[Label]:
        if isinstance(y, (str, numbers.Integral, np.generic)) and not isinstance(y, np.ndarray):
            ys = [y]
        else:
            ys = list(np.asarray(y, dtype=object).ravel()) if not isinstance(y, list) else list(y)
        if len(ys) != n:
            raise ValueError(f"got {n} samples but {len(ys)} labels")
        return [_check_label(v) for v in ys]

    # ------------------------------------------------------------------ learning
    def partial_fit(self, X: Any, y: Any) -> IncrementalRLSC:
        """Learn labeled samples ``X`` (``(n, d)`` or ``(d,)``) with labels ``y`` in order.

        A new label adds a class (eq. 7.20). With model selection on, every
        ``validation_every``-th sample (counted over all labeled samples ever seen) of an
        already known class is held out for validation instead of trained on.

        Raises:
            ValueError: wrong dimension, NaN/Inf, a row of norm > :data:`MAX_ROW_NORM`, missing,
                empty or non-printable labels, or an update that would not be finite. Nothing
                changes then, nor on any other exception raised on the way.
        """
        Z = self._features(X)
        labels = self._labels_of(y, Z.shape[0])
        if Z.shape[0] == 0:
            return self
        with self._transaction():
            self._learn(X, Z, labels)
        if self.shares_factor and (self._since_selection >= self._next_selection() or self._young_class_grew):
            self.select_model()
        return self

    def learn_sums(
        self,
        labels: Sequence[Label],
        gram: np.ndarray,
        cross: np.ndarray,
        counts: Sequence[int],
        n_features_in: int,
    ) -> IncrementalRLSC:
        """Learn rows known only by their sums in the model's feature space (after ``feature_map``):
        ``ΦᵀΦ`` (``gram``), ``ΦᵀE`` (``cross``, ``E`` one-hot over ``labels``) and the number of
        rows of each label (``counts``), for inputs of ``n_features_in`` values: e.g. the rows of
        several processes, all-reduced (eqs. 7.16-7.17 are sums). Classes of ``labels`` not known
        yet are added first, in order (eq. 7.20). The state is that of :meth:`partial_fit` on the
        rows, to rounding, for a model that selects nothing (one λ, a fixed α: nothing held out).

        Raises:
            ValueError: a model that selects (which rows it holds out depends on the rows), a bad
                label, sums of the wrong shape or not finite; nothing changes then.
        """
        if self.selects_model:
            raise ValueError("learn_sums needs one λ and a fixed α (model selection holds out rows)")
        checked = [_check_label(lab) for lab in labels]
        n_per = np.asarray(counts, dtype=np.int64)
        if n_per.shape != (len(checked),) or np.any(n_per < 0):
            raise ValueError(f"counts must be one non-negative count per label, got {list(counts)}")
        if self.n_features_in_ not in (None, int(n_features_in)):
            raise ValueError(f"the model takes {self.n_features_in_} features, the rows {n_features_in}")
        d = self.n_model_features if self.feature_map is not None else int(n_features_in)
        cross = np.asarray(cross, dtype=np.float64)
        if cross.shape != (d, len(checked)):
            raise ValueError(f"cross has shape {cross.shape}, expected {(d, len(checked))}")
        with self._transaction():
            if not self._engines:
                self.n_features_in_ = int(n_features_in)
                self._make_engines(d)
            for lab in checked:
                if _label_key(lab) not in self._index:
                    self._add_class(lab)
            cols = np.array([self._index[_label_key(lab)] for lab in checked], dtype=np.int64)
            C = np.zeros((d, len(self._labels)))
            C[:, cols] = cross
            for rls in self._engines:
                rls.add_sums(gram, C, int(n_per.sum()))
            for name in ("_train_counts", "_seen_counts"):
                grown = getattr(self, name).copy()
                np.add.at(grown, cols, n_per)
                setattr(self, name, grown)
            self.n_samples += int(n_per.sum())
            self._selection = None
        return self

    def _next_selection(self) -> int:
        """Training samples between two selections of the shared-factor mode: doubling from
        ``validation_every`` (a young model changes fast) up to ``selection_every``. Besides, a class
        with fewer than ``min_class_count`` samples (a new object, where recoding matters most)
        triggers a selection each time its count reaches a power of two (1, 2, 4, 8, ...)."""
        trained = int(self._train_counts.sum())
        return max(1, min(self.selection_every, max(self.validation_every, trained // 2)))

    def select_model(self) -> IncrementalRLSC:
        """Choose λ, α and the calibration now. In the shared-factor mode (``selection_every``), the
        other λ candidates are rebuilt from the factor in use, scored on the validation buffer,
        and the chosen one's factor is kept; a candidate whose rebuild fails or cannot be trusted
        (:data:`REBUILD_TOLERANCE`) is skipped this time. In the exact mode the selection is
        always current: nothing to do.

        All or nothing: on any error the model is left as it was."""
        if not self.shares_factor or not self._engines or not self._labels:
            return self
        serving = self._engines[0]
        lams = [float(lam) for lam in self.lambdas]
        trusted = [lam for lam in lams if serving.rebuild_error_bound(lam) <= REBUILD_TOLERANCE]
        # one RᵀR for every candidate, then one Cholesky each; one that fails is skipped this time
        rebuilt = dict(zip(trusted, serving.regularized(trusted, skip_failures=True), strict=True))
        engines = [serving if lam == serving.lam else rebuilt.get(lam) for lam in lams]
        V, T = self._val_y.size, len(self._labels)
        scores = [None if e is None else (e.predict(self._val_X) if V else np.zeros((0, T))) for e in engines]
        selection = self._choose(scores)
        lam_idx = selection[0]
        chosen = engines[lam_idx]
        assert chosen is not None  # a candidate that was not scored is never chosen
        self._engines, self._val_S = [chosen], []
        self._serving, self._selection, self._since_selection = lam_idx, selection, 0
        self._young_class_grew = False
        return self

    def _learn(self, X: Any, Z: np.ndarray, labels: list[Label]) -> None:
        """The body of :meth:`partial_fit` (inside a transaction: may fail half-way)."""
        counts_before = self._train_counts.copy()
        if not self._engines:  # first sample fixes the dimension
            self.n_features_in_ = int(np.asarray(X).shape[-1])
            self._make_engines(Z.shape[1])
        # Plan: new classes, and which samples are held out (sequential semantics).
        new_labels: list[Label] = []
        known = dict(self._index)
        train_counts = list(self._train_counts)
        cls_idx = np.empty(len(labels), dtype=np.int64)
        held = np.zeros(len(labels), dtype=bool)
        for i, lab in enumerate(labels):
            key = _label_key(lab)
            if key not in known:
                known[key] = len(known)
                new_labels.append(lab)
                train_counts.append(0)
            c = known[key]
            cls_idx[i] = c
            sample_no = self.n_samples + i + 1
            if self.selects_model and sample_no % self.validation_every == 0 and train_counts[c] > 0:
                held[i] = True
            else:
                train_counts[c] += 1
        for lab in new_labels:
            self._add_class(lab)
        # The validation scores are those of the current model (kept exact through every update),
        # so training on all the block's other rows first and holding out after gives the state
        # of the sample-by-sample order: one rank-k update instead of runs of validation_every − 1.
        train = ~held
        if train.any():
            self._train_rows(Z[train], cls_idx[train])
        if held.any():
            at = np.flatnonzero(held)
            self._hold_out(Z[at], cls_idx[at], self.n_samples + at + 1)
        seen = self._seen_counts.copy()
        np.add.at(seen, cls_idx, 1)
        self._seen_counts = seen
        self.n_samples += len(labels)
        if self.shares_factor:  # λ, α and the calibration stay as chosen until select_model
            self._since_selection += int(train.sum())
            before = np.zeros_like(self._train_counts)
            before[: len(counts_before)] = counts_before
            after = self._train_counts
            young = (after > before) & (before < self.min_class_count)
            # a power of two in (before, after]: floor(log2(after)) > floor(log2(before)), before ≥ 0
            grew = np.floor(np.log2(np.maximum(after, 1))) > np.floor(np.log2(np.maximum(before, 0.5)))
            self._young_class_grew = bool(np.any(young & grew))
        else:
            self._selection = None

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """Run an update on drafts of the engines and copies of the state; commit all or nothing.

        Inside, the engines are drafts (:meth:`RecursiveRLS.draft`) and the class list, index and
        score list are copies; the update must replace arrays, never write into them. At the end
        every engine's factor diagonal and right-hand side, and every validation score, must be
        finite; then the drafts are committed (O(1) each). On any exception the state is put back.
        """
        saved = {name: getattr(self, name) for name in _STATE}
        self._labels, self._index, self._val_S = list(self._labels), dict(self._index), list(self._val_S)
        self._engines = [rls.draft() for rls in saved["_engines"]]
        try:
            yield
            for rls in self._engines:
                if not rls.is_finite():
                    raise ValueError("the update would make the model non-finite; not applied")
            if not all(np.all(np.isfinite(S)) for S in self._val_S):
                raise ValueError("the update would make the validation scores non-finite; not applied")
        except BaseException:
            for name, value in saved.items():
                setattr(self, name, value)
            raise
        if saved["_engines"]:  # else the engines were created by this update
            for rls, draft in zip(saved["_engines"], self._engines, strict=True):
                rls.commit(draft)
            self._engines = saved["_engines"]

    def add_classes(self, labels: Sequence[Label]) -> IncrementalRLSC:
        """Add the classes of ``labels`` not known yet, in order, without samples (eq. 7.20: a zero
        column of ``b`` each; ``A`` unchanged). Needs the input dimension (``n_features``, a feature
        map, or a first sample).

        Raises:
            ValueError: a bad label, or the dimension is not known yet; nothing changes then.
        """
        checked = [_check_label(lab) for lab in labels]
        if not self._engines and self.n_model_features is None:
            raise ValueError("add_classes needs the input dimension: give n_features or learn a sample")
        with self._transaction():
            if not self._engines:
                self._make_engines(self.n_model_features)
            for lab in checked:
                if _label_key(lab) not in self._index:
                    self._add_class(lab)
            self._selection = None
        return self

    def _add_class(self, label: Label) -> None:
        self._index[_label_key(label)] = len(self._labels)
        self._labels.append(label)
        self._train_counts = np.append(self._train_counts, 0)
        self._seen_counts = np.append(self._seen_counts, 0)
        for rls in self._engines:
            rls.add_outputs(1)  # eq. 7.20: a zero column of b; A unchanged
        self._val_S = [np.concatenate([S, np.zeros((S.shape[0], 1))], axis=1) for S in self._val_S]

    def _train_rows(self, Z: np.ndarray, cls: np.ndarray) -> None:
        """Rank-m update of every engine (one Gram matrix ``ZᵀZ`` shared by all when the block is
        large); validation scores kept exact, by Woodbury for a few rows, else solved again."""
        m, T = Z.shape[0], len(self._labels)
        E = np.zeros((m, T))
        E[np.arange(m), cls] = 1.0
        V, d = self._val_y.size, Z.shape[1]
        # Woodbury costs A⁻¹Zᵀ (2d²m) and an m × m solve; solving the weights again costs 2d²T
        woodbury = V > 0 and m * (2 * d * d + m * m / 3) <= 2 * d * d * T + V * d * T
        if self.shares_factor:  # validation scores are computed when the model is selected
            woodbury, V = False, 0
        shared_gram = gram(Z) if len(self._engines) > 1 and block_pays(m, d) else None
        for j, rls in enumerate(self._engines):
            if woodbury:
                G = rls.solve(Z)  # A⁻¹Zᵀ with the factor *before* the update
            rls.update(Z, E, gram=shared_gram)
            if woodbury:
                # S_new = S + (X_val G) E − (X_val G) (I + Z G)⁻¹ Gᵀ B_new
                XG = self._val_X @ G  # V × m
                M = np.eye(m) + Z @ G
                GB = G.T @ rls.rhs  # m × T, with B after the update
                corr = np.linalg.solve(M, GB) if m > 1 else GB / M[0, 0]
                self._val_S[j] = self._val_S[j] + XG @ (E - corr)
            elif V:
                self._val_S[j] = self._val_X @ rls.weights
        counts = self._train_counts.copy()
        np.add.at(counts, cls, 1)
        self._train_counts = counts

    def _hold_out(self, Z: np.ndarray, cls: np.ndarray, sample_nos: np.ndarray) -> None:
        """Put held-out rows into the validation buffer in order, then score the rows that changed.

        While the buffer has room a row is appended; when full, it replaces the oldest sample of the
        most represented class (keeps it balanced)."""
        val_X, val_y, val_age = self._val_X, self._val_y, self._val_age
        V0 = val_y.size
        room = max(0, min(self.max_validation - V0, Z.shape[0]))
        val_X = np.concatenate([val_X, Z[:room]])
        val_y = np.concatenate([val_y, cls[:room]])
        val_age = np.concatenate([val_age, sample_nos[:room]])
        changed = set(range(V0, V0 + room))
        if room < Z.shape[0]:
            val_X, val_y, val_age = val_X.copy(), val_y.copy(), val_age.copy()
            per_class = np.bincount(val_y, minlength=len(self._labels))
            for z, c, no in zip(Z[room:], cls[room:], sample_nos[room:], strict=True):
                rows = np.flatnonzero(val_y == int(np.argmax(per_class)))
                r = int(rows[np.argmin(val_age[rows])])
                per_class[val_y[r]] -= 1
                per_class[c] += 1
                val_X[r], val_y[r], val_age[r] = z, c, no
                changed.add(r)
        at = np.fromiter(sorted(changed), dtype=np.int64)
        self._val_X, self._val_y, self._val_age = val_X, val_y, val_age
        if self.shares_factor:  # scored when the model is selected
            return
        scores = []
        for S, rls in zip(self._val_S, self._engines, strict=True):
            S = np.concatenate([S, np.zeros((room, S.shape[1]))]) if room else S.copy()
            S[at] = rls.predict(val_X[at])  # two triangular solves per row, or the weights
            scores.append(S)
        self._val_S = scores

    # ------------------------------------------------------------------ model selection
    def _gamma(self, alpha: float) -> np.ndarray:
        """Diagonal of Γ^α = (k · diag(k_1..k_T)⁻¹)^α over training counts (§7.5.2)."""
        k = self._train_counts.sum()
        counts = np.maximum(self._train_counts, 1)
        return (k / counts) ** alpha if alpha != 0.0 else np.ones(counts.size)

    def _validation_grid(
        self, scores: Sequence[np.ndarray | None] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Accuracy (all validation samples, well-represented ones) per (λ, α grid) of the validation
        ``scores`` per λ (default: the kept ones; None: a candidate not scored, NaN accuracy)."""
        L, A = self.lambdas.size, self.alpha_grid.size
        scores = list(self._val_S) if scores is None else list(scores)
        usable = [j for j, S in enumerate(scores) if S is not None]
        acc_all, acc_wr = np.full((L, A), np.nan), np.full((L, A), np.nan)
        if self._val_y.size == 0 or len(scores) != L or not usable:
            return acc_all, acc_wr
        gammas = np.stack([self._gamma(float(a)) for a in self.alpha_grid])  # A × T
        S = np.stack([scores[j] for j in usable])  # L' × V × T
        pred = np.argmax(S[:, None, :, :] * gammas[None, :, None, :], axis=3)  # L' × A × V
        hit = pred == self._val_y[None, None, :]
        acc_all[usable] = hit.mean(axis=2)
        wr = self._train_counts[self._val_y] >= self.min_class_count
        if wr.any():
            acc_wr[usable] = hit[:, :, wr].mean(axis=2)
        return acc_all, acc_wr

    def _select(self) -> tuple[int, float, np.ndarray, float, int]:
        """(λ index, α, per-λ validation accuracy at α, inverse temperature, samples it was fitted
        on) — cached until the next update (in the shared-factor mode: until :meth:`select_model`)."""
        if self._selection is None:
            if self.shares_factor:  # not selected yet: the first λ in use, α as given
                alpha = self.alpha_init if self.alpha == "auto" else float(self.alpha)
                nan = np.full(self.lambdas.size, np.nan)
                return self._serving, alpha, nan, T_DEFAULT, 0
            self._selection = self._choose(self._val_S)
        return self._selection

    def _choose(self, scores: Sequence[np.ndarray | None]) -> tuple[int, float, np.ndarray, float, int]:
        """The selection (λ index, α, per-λ accuracy at α, inverse temperature, its samples) from the
        validation scores per λ (module docstring, §7.6.3); a candidate scored None is not chosen."""
        acc_all, acc_wr = self._validation_grid(scores)
        L = self.lambdas.size
        if self.alpha == "auto":
            best_lam = [self._best_lambda(acc_all[:, a]) for a in range(self.alpha_grid.size)]
            wr = np.array([acc_wr[best_lam[a], a] for a in range(self.alpha_grid.size)])
            if np.isnan(wr[0]):
                alpha = self.alpha_init
                lam_idx = self._best_lambda(acc_all[:, int(np.argmin(np.abs(self.alpha_grid - alpha)))])
            else:
                ok = np.flatnonzero(wr >= wr[0] - 1e-12)
                a = int(ok[-1])
                alpha, lam_idx = float(self.alpha_grid[a]), best_lam[a]
        else:
            alpha = float(self.alpha)
            lam_idx = self._best_lambda(self._accuracy_at(alpha, scores) if L > 1 else np.full(1, np.nan))
        chosen = scores[lam_idx] if lam_idx < len(scores) else None  # no engines yet: nothing scored
        if chosen is None and any(S is not None for S in scores):  # the default candidate not scored
            lam_idx = next(j for j, S in enumerate(scores) if S is not None)
            chosen = scores[lam_idx]
        per_lambda = self._accuracy_at(alpha, scores)
        return (lam_idx, alpha, per_lambda, *self._calibrate(chosen, alpha))

    def _calibrate(self, scores: np.ndarray | None, alpha: float) -> tuple[float, int]:
        """Inverse temperature fitted on the validation ``scores`` of a λ at α, and the number of
        samples; ``(T_DEFAULT, 0)`` with fewer than :data:`MIN_CALIBRATION_SAMPLES` or a single class."""
        V = int(self._val_y.size)
        if scores is None or V < MIN_CALIBRATION_SAMPLES or len(self._labels) < 2:
            return T_DEFAULT, 0
        return fit_inverse_temperature(scores * self._gamma(alpha)[None, :], self._val_y), V

    def _accuracy_at(self, alpha: float, scores: Sequence[np.ndarray | None]) -> np.ndarray:
        if self._val_y.size == 0 or len(scores) != self.lambdas.size:
            return np.full(self.lambdas.size, np.nan)
        g = self._gamma(alpha)
        return np.array(
            [np.nan if S is None else np.mean(np.argmax(S * g, axis=1) == self._val_y) for S in scores]
        )

    def _best_lambda(self, acc: np.ndarray) -> int:
        """Highest validation accuracy; ties go to the larger λ. No data: the middle candidate."""
        if acc.size == 1:
            return 0
        if np.all(np.isnan(acc)):
            return int(np.argsort(self.lambdas)[self.lambdas.size // 2])
        best = np.nanmax(acc)
        tied = np.flatnonzero(acc >= best - 1e-12)
        return int(tied[np.argmax(self.lambdas[tied])])

    @property
    def nbytes(self) -> int:
        """Memory held by the RLS engines (one per λ candidate) in bytes."""
        return sum(engine.nbytes for engine in self._engines)

    @property
    def lambda_(self) -> float:
        """The λ used for prediction."""
        return float(self.lambdas[self._select()[0]])

    @property
    def alpha_(self) -> float:
        """The α used for prediction."""
        return self._select()[1]

    @property
    def validation_accuracy_(self) -> np.ndarray:
        """Validation accuracy of each λ candidate at ``alpha_`` (NaN before any validation)."""
        return self._select()[2].copy()

    @property
    def calibration_(self) -> tuple[float, int]:
        """``(t, n)``: the inverse temperature of :meth:`predict_proba` and the validation samples it
        was fitted on; ``(1.0, 0)`` while uncalibrated (plain softmax, module docstring)."""
        _, _, _, t, n = self._select()
        return t, n

    @property
    def validation_accuracy_grid_(self) -> np.ndarray:
        """Validation accuracy per (λ candidate, α of ``alpha_grid``)."""
        return self._validation_grid()[0]

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X: Any) -> np.ndarray:
        """Recoded scores ``x A⁻¹ b Γ^α`` of the selected λ and α, columns in ``classes_`` order.

        Raises:
            ValueError: no class learned yet, wrong dimension, NaN/Inf.
        """
        if not self._labels:
            raise ValueError("the classifier has not learned any class yet")
        Z = self._features(X)
        lam_idx, alpha = self._select()[:2]
        engine = self._engines[0] if self.shares_factor else self._engines[lam_idx]
        return engine.predict(Z) * self._gamma(alpha)[None, :]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Calibrated class probabilities ``softmax(t · s)`` of the recoded scores (module docstring),
        columns in ``classes_`` order; the top one is the confidence of :meth:`predict`'s answer."""
        return self.proba_from_scores(self.decision_function(X))

    def proba_from_scores(self, scores: np.ndarray) -> np.ndarray:
        """:meth:`predict_proba` for scores already computed by :meth:`decision_function`."""
        return softmax(scores, self.calibration_[0])

    def predict(self, X: Any) -> np.ndarray:
        """The class with the highest recoded score, for each row of ``X``."""
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]

    # ------------------------------------------------------------------ persistence
    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Hyperparameters, classes, counts, engines, validation buffer, calibration (and feature map).

        State version 2 (module docstring): ``factor_of[j]`` is ``None`` when engine ``j``'s packed
        factor and right-hand side are stored under ``engine<j>/``, or the index of the engine whose
        factor and right-hand side it is rebuilt from; ``val_X`` is float32 where that is exact."""
        meta: dict[str, Any] = {
            "lambdas": self.lambdas.tolist(),
            "alpha": self.alpha,
            "validation_every": self.validation_every,
            "alpha_grid": self.alpha_grid.tolist(),
            "min_class_count": self.min_class_count,
            "max_validation": self.max_validation,
            "alpha_init": self.alpha_init,
            "n_features": self.n_features_in_,
            "classes": [{"type": "int" if isinstance(c, int) else "str", "value": c} for c in self._labels],
            "n_samples_seen": self.n_samples,
            "engines": [],
            "feature_map": None,
        }
        val_X32 = self._val_X.astype(np.float32)
        exact32 = bool(np.array_equal(val_X32, self._val_X))
        arrays: dict[str, np.ndarray] = {
            "train_counts": self._train_counts.copy(),
            "seen_counts": self._seen_counts.copy(),
            "val_X": val_X32 if exact32 else self._val_X.copy(),
            "val_y": self._val_y.copy(),
            "val_age": self._val_age.copy(),
        }
        factor_of = self._factor_sources()
        meta["factor_of"] = factor_of
        for j, rls in enumerate(self._engines):
            meta["engines"].append(rls.scalar_state())
            if factor_of[j] is None:
                arrays.update(prefixed(f"engine{j}", rls.to_state(packed=True)[1]))
        if self._labels:
            t, n = self.calibration_
            meta["calibration"] = {"method": "temperature", "inverse_temperature": t, "validation_samples": n}
        meta["selection_every"] = self.selection_every
        if self.shares_factor:  # one engine, of λ = lambdas[serving]; the selection as made
            meta["shared_factor"] = {
                "serving": self._serving,
                "since_selection": self._since_selection,
                "selection": None
                if self._selection is None
                else {
                    "lambda_index": self._selection[0],
                    "alpha": self._selection[1],
                    "accuracy": [None if np.isnan(a) else float(a) for a in self._selection[2]],
                    "inverse_temperature": self._selection[3],
                    "calibration_samples": self._selection[4],
                },
            }
        if self.feature_map is not None:
            store_feature_map(self.feature_map, meta, arrays)
        return meta, arrays

    def _factor_sources(self) -> list[int | None]:
        """Per engine, ``None`` (its factor is stored) or the engine its factor is rebuilt from: the
        smallest λ's engine, when both saw the same rows without forgetting (same count, the same
        right-hand side bit for bit) and the rebuild's worst-case error is within
        :data:`REBUILD_TOLERANCE`."""
        if not self._engines:
            return []
        base = int(np.argmin([rls.lam for rls in self._engines]))
        src = self._engines[base]
        sources: list[int | None] = []
        for j, rls in enumerate(self._engines):
            shares = (
                j != base
                and rls.forgetting == 1.0
                and rls.n_samples == src.n_samples
                and np.array_equal(rls.rhs, src.rhs)
                and src.rebuild_error_bound(rls.lam) <= REBUILD_TOLERANCE
            )
            sources.append(base if shares else None)
        return sources

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> IncrementalRLSC:
        """Rebuild a classifier from :meth:`to_state`; ValueError/KeyError/TypeError on bad content."""
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
        )
        if clf.shares_factor:
            _restore_shared_factor_state(clf, meta["shared_factor"])
        labels = _saved_labels(meta["classes"])
        train_counts, seen_counts = _saved_counts(arrays, len(labels), int(meta["n_samples_seen"]))
        if not labels and not seen_counts.sum() and not meta["engines"]:
            return clf
        factor_of = meta.get("factor_of") if meta.get("state_version", 1) >= 2 else None
        engines = _saved_engines(
            meta["engines"], arrays, clf, len(labels), int(train_counts.sum()), factor_of
        )
        val_X, val_y, val_age = _saved_validation(
            arrays, engines[0].n_features, len(labels), clf.max_validation
        )
        if clf.n_features_in_ is None:
            clf.n_features_in_ = engines[0].n_features
        clf._engines = engines
        clf._labels = labels
        clf._index = {_label_key(lab): i for i, lab in enumerate(labels)}
        clf._train_counts, clf._seen_counts = train_counts, seen_counts
        clf.n_samples = int(seen_counts.sum())
        clf._val_X, clf._val_y, clf._val_age = val_X, val_y, val_age
        if not clf.shares_factor:
            clf._val_S = [rls.predict(val_X) if val_y.size else np.zeros((0, len(labels))) for rls in engines]
        return clf

    def __repr__(self) -> str:
        return (
            f"IncrementalRLSC(lambdas={self.lambdas.tolist()}, alpha={self.alpha!r}, "
            f"classes={len(self._labels)}, samples={self.n_samples})"
        )


# ---------------------------------------------------------------------- validation of a saved state
def _restore_shared_factor_state(clf: IncrementalRLSC, saved: Any) -> None:
    """The shared-factor mode's λ in use, samples since the selection, and the selection itself."""
    serving, since = saved["serving"], saved["since_selection"]
    for name, value in (("serving", serving), ("since_selection", since)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"shared_factor.{name} must be an integer ≥ 0, got {value!r}")
    if serving >= clf.lambdas.size:
        raise ValueError(f"shared_factor.serving {serving} is not a λ candidate")
    clf._serving, clf._since_selection = serving, since
    if clf._engines:  # made by the constructor (known dimension) for the default λ
        clf._make_engines(clf._engines[0].n_features)
    chosen = saved["selection"]
    if chosen is None:
        return
    accuracy = np.array([np.nan if a is None else float(a) for a in chosen["accuracy"]])
    t, n = float(chosen["inverse_temperature"]), int(chosen["calibration_samples"])
    alpha = float(chosen["alpha"])
    if int(chosen["lambda_index"]) != serving or accuracy.shape != clf.lambdas.shape:
        raise ValueError("the saved selection does not match the λ in use")
    if not (np.isfinite(t) and t > 0 and n >= 0 and 0.0 <= alpha <= 1.0):
        raise ValueError("the saved selection holds invalid values")
    clf._selection = (serving, alpha, accuracy, t, n)


def _saved_labels(entries: Any) -> list[Label]:
    """The classes of a saved state, their types checked, no duplicates."""
    labels: list[Label] = []
    for entry in entries:
        typ, value = entry["type"], entry["value"]
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if (typ == "int") != is_int or (typ == "str" and not isinstance(value, str)):
            raise ValueError(f"class {entry!r} does not match its type")
        labels.append(_check_label(value))
    if len({_label_key(lab) for lab in labels}) != len(labels):
        raise ValueError("duplicate classes")
    return labels


def _saved_counts(
    arrays: dict[str, np.ndarray], n_classes: int, n_seen: int
) -> tuple[np.ndarray, np.ndarray]:
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


def _factor_sources(factor_of: Any, n_engines: int) -> list[int | None]:
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


def _saved_engines(
    entries: Any,
    arrays: dict[str, np.ndarray],
    clf: IncrementalRLSC,
    n_classes: int,
    n_trained: int,
    factor_of: Any = None,
) -> list[RecursiveRLS]:
    """One engine per λ candidate, each matching λ, the classes, the dimension and the counts; the
    stored ones read, the others rebuilt from their source's factor (one Gram matrix per source)."""
    lambdas = [clf.lambdas[clf._serving]] if clf.shares_factor else list(clf.lambdas)
    if not isinstance(entries, list) or len(entries) != len(lambdas):
        raise ValueError("one engine per λ candidate expected (one in all with a shared factor)")
    sources = _factor_sources(factor_of, len(entries))
    d = clf.n_model_features
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


def _saved_validation(
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
