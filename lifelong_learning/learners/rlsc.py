"""Incremental multiclass RLSC with class extension and recoding (thesis ch. 7, Algorithm 2).

Linear one-vs-all regularized least squares classification, trained one labeled sample at a
time on :class:`~lifelong_learning.learners.RecursiveRLS` (one engine per λ candidate):

- eqs. 7.16-7.19: ``A_k = A_{k-1} + x xᵀ`` (Cholesky rank-1 update; the extra ``+λI`` printed
  in eq. 7.18 is a typo), ``b_k = b_{k-1} + x e_yᵀ``, no intercept, ``λ`` not scaled by ``k``;
- eq. 7.20: a label never seen before appends a zero column to ``b`` (and a zero count);
  ``A`` is unchanged, nothing is retrained;
- §7.5.2 (eq. 7.21): recoding ``W_k = A_k⁻¹ b_k Γ_k^α``, ``Γ_k = k · diag(k_1..k_T)⁻¹``: the
  plain scores with column ``t`` scaled by ``(k/k_t)^α``, a class above the median count shrunk
  more gently (:func:`~lifelong_learning.learners.model_selection.recoding`);
- §7.6.3: online model selection. With several λ candidates and/or ``alpha="auto"``, every
  ``validation_every``-th labeled sample is held out (not trained on) and kept in a bounded
  validation buffer; λ, α and the confidence calibration are chosen on it
  (:mod:`~lifelong_learning.learners.model_selection`) with the validation scores of the
  *current* models (not frozen at hold-out time), so the choice follows the stream. A held-out
  sample of a class with no training sample yet is *learned* instead (a class must exist before
  it can be validated, and the first samples of a new object are the most precious).

Why this shape: a robot meets new objects one at a time, mostly with few samples each, and must
answer at once; a class is added in O(d) without retraining, recoding lifts the rare classes, and
every update costs O(d²) per λ, whatever the number of samples seen. Updates are all or nothing
(:meth:`IncrementalRLSC.partial_fit` and :meth:`IncrementalRLSC.add_classes` work on drafts of the
engines and commit when every λ's new state is finite). The cost per sample, the Woodbury update
of the validation scores and the commit are in docs/design.md (incremental RLSC); the model file
layout is :mod:`~lifelong_learning.learners.rlsc_state`.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from lifelong_learning.core.checks import as_rows
from lifelong_learning.core.persistence import PersistentModel
from lifelong_learning.learners import rlsc_state
from lifelong_learning.learners.calibration import softmax
from lifelong_learning.learners.cholesky import block_pays, gram
from lifelong_learning.learners.feature_map import FeatureMap
from lifelong_learning.learners.labels import Label, check_label, label_key, labels_of
from lifelong_learning.learners.model_selection import (
    CALIBRATION_EVIDENCE,
    RECODING_SHRINK,
    Selection,
    SelectionRule,
    recoding,
)
from lifelong_learning.learners.novelty import DEFAULT_SCORE, confidence_novelty, novelty_scores
from lifelong_learning.learners.recursive_rls import RecursiveRLS
from lifelong_learning.learners.taken_back import TakenBack, row_digests
from lifelong_learning.learners.unlearning import InputDigests, SampleStore, Unlearning
from lifelong_learning.learners.validation_scores import Pending, refreshed

#: rows of a larger Euclidean norm are refused (learning and prediction): with this bound no
#: entry of a factor, right-hand side or validation score can overflow float64 (‖R‖²_F = tr A =
#: dλ + Σ‖x‖²), so an update either succeeds with finite numbers or is refused before it starts.
#: Far below it, a row much larger than the others already ruins the factor's accuracy (its
#: rounding errors scale with ‖A‖): bound magnitudes where the data come from
#: (:class:`~lifelong_learning.learners.recognition_gate.RecognitionGate`).
MAX_ROW_NORM = 1e100

#: an engine is rebuilt from another's factor (on load, and by the shared-factor selection) only if
#: the worst-case relative change of its predictions (:meth:`RecursiveRLS.rebuild_error_bound`) is
#: at most this; else its factor is stored
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
    "_pending_val",
    "_selection",
    "_serving",
    "_since_selection",
    "_kept",
    "_inputs",
    "_clock",
)


def _check_counts(
    validation_every: int, min_class_count: int, max_validation: int, selection_every: int, keep_samples: int
) -> None:
    """ValueError for a count of :class:`IncrementalRLSC` out of its range."""
    if int(validation_every) < 2:
        raise ValueError("validation_every must be ≥ 2")
    if int(min_class_count) < 1 or int(max_validation) < 1:
        raise ValueError("min_class_count and max_validation must be ≥ 1")
    if isinstance(selection_every, bool) or int(selection_every) < 0:
        raise ValueError(f"selection_every must be an integer ≥ 0, got {selection_every!r}")
    if isinstance(keep_samples, bool) or int(keep_samples) < 0:
        raise ValueError(f"keep_samples must be an integer ≥ 0, got {keep_samples!r}")


class IncrementalRLSC(Unlearning, PersistentModel):
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
            of the λ in use, is updated per sample (the cost of one λ); every ``k`` training
            samples (sooner while the model is young) the other candidates are rebuilt from it
            and λ, α and the calibration chosen again (:meth:`select_model`; the shared-factor
            mode in docs/design.md).
        calibration_evidence: what one independent answer is in the smoothing of the confidence's
            calibration (:mod:`~lifelong_learning.learners.calibration`): each held-out sample
            (``"samples"``, for independent draws) or each class held out (``"classes"``, for
            frames of showings, near copies of each other).
        keep_samples: the last training samples kept for exact unlearning (:meth:`forget_class`,
            :meth:`unlearn`, :meth:`rename_class`; :mod:`~lifelong_learning.learners.unlearning`);
            0 keeps none (no sample can be unlearned), ``keep_samples · d`` floats kept.
        recoding_shrink: in [0, 1], the largest exponent by which a class with more training samples
            than the median class is shrunk (:func:`~lifelong_learning.learners.model_selection.
            recoding`); 1: the thesis's recoding for every class, 0: such a class never shrunk.

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
        keep_samples: int = 0,
        calibration_evidence: str = "samples",
        recoding_shrink: float = RECODING_SHRINK,
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
        _check_counts(validation_every, min_class_count, max_validation, selection_every, keep_samples)
        if not 0.0 <= float(alpha_init) <= 1.0:
            raise ValueError("alpha_init must be in [0, 1]")
        if not (isinstance(recoding_shrink, numbers.Real) and 0.0 <= float(recoding_shrink) <= 1.0):
            raise ValueError(f"recoding_shrink must be in [0, 1], got {recoding_shrink!r}")
        if feature_map is not None and not isinstance(feature_map, FeatureMap):
            raise ValueError("feature_map must follow the FeatureMap protocol")
        if calibration_evidence not in CALIBRATION_EVIDENCE:
            raise ValueError(
                f"calibration_evidence must be one of {CALIBRATION_EVIDENCE}, got {calibration_evidence!r}"
            )
        self.selection_every, self.keep_samples = int(selection_every), int(keep_samples)
        self.calibration_evidence = str(calibration_evidence)
        self.lambdas = lams
        self.alpha = alpha if isinstance(alpha, str) else float(alpha)
        self.validation_every = int(validation_every)
        self.alpha_grid = grid
        self.min_class_count = int(min_class_count)
        self.max_validation = int(max_validation)
        self.alpha_init = float(alpha_init)
        self.recoding_shrink = float(recoding_shrink)
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
        self._val_S: list[np.ndarray] = []  # per λ: X_val A⁻¹ B  (V × T), as of the last refresh
        self._pending_val = Pending.none()  # what changed since (learners/validation_scores.py)
        # (λ index, α, per-λ validation accuracy, inverse temperature, its validation samples)
        self._selection: tuple[int, float, np.ndarray, float, int] | None = None
        # shared-factor selection (selection_every > 0): the λ whose engine is kept, and the
        # training samples it learned since the last selection
        self._serving = self._rule().best_lambda(np.full(self.lambdas.size, np.nan))
        self._since_selection = 0
        self._young_class_grew = False  # set by an update: a young class reached a power of two
        self._clock = 0  # samples numbered so far (n_samples, but never decreased by unlearning)
        self._kept = SampleStore.empty(self.keep_samples, d or 0)
        self._inputs = InputDigests()  # with a feature map: digests of the inputs kept or held out
        self._taken_back = TakenBack()  # what it unlearned, for retrainings (learners/taken_back.py)
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
        self._pending_val = Pending.none()
        self._kept = SampleStore.empty(self.keep_samples, d, self._clock)

    def set_params(self, **params: Any) -> IncrementalRLSC:
        """Change selection-only hyperparameters (``alpha``, ``alpha_grid``, ``min_class_count``,
        ``alpha_init``, ``calibration_evidence``, ``recoding_shrink``) without retraining: the learned
        state serves every recoding.

        Raises:
            ValueError: another parameter, or a bad value (nothing changes then).
        """
        allowed = {
            "alpha",
            "alpha_grid",
            "min_class_count",
            "alpha_init",
            "calibration_evidence",
            "recoding_shrink",
        }
        unknown = set(params) - allowed
        if unknown:
            raise ValueError(f"only {sorted(allowed)} can change after construction, got {sorted(unknown)}")
        current = {
            "alpha": self.alpha,
            "alpha_grid": self.alpha_grid,
            "min_class_count": self.min_class_count,
            "alpha_init": self.alpha_init,
            "calibration_evidence": self.calibration_evidence,
            "recoding_shrink": self.recoding_shrink,
        }
        checked = IncrementalRLSC(lambdas=self.lambdas, **{**current, **params})  # validates
        self.alpha, self.alpha_grid = checked.alpha, checked.alpha_grid
        self.min_class_count, self.alpha_init = checked.min_class_count, checked.alpha_init
        self.calibration_evidence = checked.calibration_evidence
        self.recoding_shrink = checked.recoding_shrink
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
        return label_key(label if isinstance(label, str) else int(label)) in self._index

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
        labels = labels_of(y, Z.shape[0])
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
        checked = [check_label(lab) for lab in labels]
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
                if label_key(lab) not in self._index:
                    self._add_class(lab)
            cols = np.array([self._index[label_key(lab)] for lab in checked], dtype=np.int64)
            C = np.zeros((d, len(self._labels)))
            C[:, cols] = cross
            for rls in self._engines:
                rls.add_sums(gram, C, int(n_per.sum()))
            for name in ("_train_counts", "_seen_counts"):
                grown = getattr(self, name).copy()
                np.add.at(grown, cols, n_per)
                setattr(self, name, grown)
            self.n_samples += int(n_per.sum())
            self._clock += int(n_per.sum())
            self._kept = self._kept.losing(self._clock)  # rows known by their sums only
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
        selection = self._rule().choose(scores, self._val_y, self._train_counts)
        lam_idx = selection.lambda_index
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
            key = label_key(lab)
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
        nos = self._clock + np.arange(1, len(labels) + 1)
        if self.feature_map is not None and (self.keep_samples or self.selects_model):
            self._keep_input_digests(X, nos)
        if train.any():
            self._train_rows(Z[train], cls_idx[train])
            self._kept = self._kept.added(Z[train], cls_idx[train], nos[train])
        if held.any():
            at = np.flatnonzero(held)
            self._hold_out(Z[at], cls_idx[at], nos[at])
        seen = self._seen_counts.copy()
        np.add.at(seen, cls_idx, 1)
        self._seen_counts = seen
        self.n_samples += len(labels)
        self._clock += len(labels)
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

    def _keep_input_digests(self, X: Any, nos: np.ndarray) -> None:
        """Remember the raw inputs' digests (learners/unlearning.py's :class:`InputDigests`), and
        drop those of samples no longer kept or held out once they are twice as many as can be."""
        inputs = self._inputs.added(nos, row_digests(X))
        if inputs.size > 2 * (self.keep_samples + self.max_validation) + nos.size:
            inputs = inputs.only(np.concatenate([self._kept.no, self._val_age, nos]))
        self._inputs = inputs

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
            pairs = list(zip(saved["_engines"], self._engines, strict=True))
            # every other update the other way round: the engines swept last are still in the cache
            # (5 factors at d = 1280 are about the size of the L3 cache; cyclic sweeps would miss it)
            for rls, draft in pairs[:: 1 if self._clock % 2 else -1]:
                rls.commit(draft)
            self._engines = saved["_engines"]

    def add_classes(self, labels: Sequence[Label]) -> IncrementalRLSC:
        """Add the classes of ``labels`` not known yet, in order, without samples (eq. 7.20: a zero
        column of ``b`` each; ``A`` unchanged). Needs the input dimension (``n_features``, a feature
        map, or a first sample).

        Raises:
            ValueError: a bad label, or the dimension is not known yet; nothing changes then.
        """
        checked = [check_label(lab) for lab in labels]
        if not self._engines and self.n_model_features is None:
            raise ValueError("add_classes needs the input dimension: give n_features or learn a sample")
        with self._transaction():
            if not self._engines:
                self._make_engines(self.n_model_features)
            for lab in checked:
                if label_key(lab) not in self._index:
                    self._add_class(lab)
            self._selection = None
        return self

    def _add_class(self, label: Label) -> None:
        self._index[label_key(label)] = len(self._labels)
        self._labels.append(label)
        self._train_counts = np.append(self._train_counts, 0)
        self._seen_counts = np.append(self._seen_counts, 0)
        for rls in self._engines:
            rls.add_outputs(1)  # eq. 7.20: a zero column of b; A unchanged
        self._val_S = [np.concatenate([S, np.zeros((S.shape[0], 1))], axis=1) for S in self._val_S]

    def _train_rows(self, Z: np.ndarray, cls: np.ndarray) -> None:
        """Rank-m update of every engine (one Gram matrix ``ZᵀZ`` shared by all when the block is
        large); the validation scores are brought up to date when a selection needs them
        (:mod:`~lifelong_learning.learners.validation_scores`)."""
        m, T = Z.shape[0], len(self._labels)
        E = np.zeros((m, T))
        E[np.arange(m), cls] = 1.0
        shared_gram = gram(Z) if len(self._engines) > 1 and block_pays(m, Z.shape[1]) else None
        for rls in self._engines:
            rls.update(Z, E, gram=shared_gram)
        if not self.shares_factor and self._val_y.size:  # else scored when the model is selected
            self._pending_val = self._pending_val.trained(Z, cls)
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
        if not self.shares_factor:  # else scored when the model is selected
            self._pending_val = self._pending_val.scored_afresh(at)

    def _validation_scores(self) -> list[np.ndarray]:
        """Every λ's validation scores of the current model (brought up to date if rows were learned
        or held out since; nothing is half-assigned if that fails)."""
        if not self._pending_val.empty and self._engines:
            scores = refreshed(self._val_S, self._engines, self._val_X, self._pending_val)
            self._val_S, self._pending_val = scores, Pending.none()
        return self._val_S

    # ------------------------------------------------------------------ model selection
    def _rule(self) -> SelectionRule:
        """The hyperparameters of the choice of λ and α, as they are now."""
        return SelectionRule(
            self.lambdas,
            self.alpha,
            self.alpha_grid,
            self.min_class_count,
            self.alpha_init,
            self.calibration_evidence,
            self.recoding_shrink,
        )

    def _select(self) -> Selection:
        """The selection in use, cached until the next update (in the shared-factor mode: until
        :meth:`select_model`)."""
        if self._selection is None:
            if self.shares_factor:  # not selected yet: the first λ in use, α as given
                return self._rule().unselected(self._serving)
            self._selection = self._rule().choose(self._validation_scores(), self._val_y, self._train_counts)
        return self._selection

    @property
    def nbytes(self) -> int:
        """Memory held by the RLS engines (one per λ candidate) in bytes."""
        return sum(engine.nbytes for engine in self._engines)

    @property
    def lambda_(self) -> float:
        """The λ used for prediction."""
        return float(self.lambdas[self._select().lambda_index])

    @property
    def alpha_(self) -> float:
        """The α used for prediction."""
        return self._select().alpha

    @property
    def validation_accuracy_(self) -> np.ndarray:
        """Validation accuracy of each λ candidate at ``alpha_`` (NaN before any validation)."""
        return self._select().accuracy.copy()

    @property
    def calibration_(self) -> tuple[float, int]:
        """``(t, n)``: the inverse temperature of :meth:`predict_proba` and the validation samples it
        was fitted on; ``(1.0, 0)`` while uncalibrated (plain softmax,
        :mod:`~lifelong_learning.learners.model_selection`)."""
        selection = self._select()
        return selection.inverse_temperature, selection.calibration_samples

    @property
    def validation_accuracy_grid_(self) -> np.ndarray:
        """Validation accuracy per (λ candidate, α of ``alpha_grid``)."""
        scores = self._val_S if self.shares_factor else self._validation_scores()
        return self._rule().validation_grid(scores, self._val_y, self._train_counts)[0]

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
        return engine.predict(Z) * recoding(self._train_counts, alpha, self.recoding_shrink)[None, :]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Calibrated class probabilities ``softmax(t · s)`` of the recoded scores, columns in
        ``classes_`` order; the top one is the confidence of :meth:`predict`'s answer (calibration:
        :mod:`~lifelong_learning.learners.model_selection`)."""
        return self.proba_from_scores(self.decision_function(X))

    def proba_from_scores(self, scores: np.ndarray) -> np.ndarray:
        """:meth:`predict_proba` for scores already computed by :meth:`decision_function`."""
        return softmax(scores, self.calibration_[0])

    def predict(self, X: Any) -> np.ndarray:
        """The class with the highest recoded score, for each row of ``X``."""
        return self.classes_[np.argmax(self.decision_function(X), axis=1)]

    def novelty_score(self, X: Any, score: str = DEFAULT_SCORE) -> np.ndarray:
        """How likely each row of ``X`` shows what was never taught (higher: more likely), by the
        measure ``score`` (:mod:`~lifelong_learning.learners.novelty`). Raises as decision_function."""
        if score == "confidence" or not self._labels:
            return confidence_novelty(self.predict_proba(X))
        engine = self._engines[0] if self.shares_factor else self._engines[self._select().lambda_index]
        cache = self.__dict__.setdefault("_novelty_cache", {})
        return novelty_scores(engine, self._features(X), self._train_counts, score, cache)

    # ------------------------------------------------------------------ persistence
    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Hyperparameters, classes, counts, engines, validation buffer, calibration (and feature map):
        :func:`~lifelong_learning.learners.rlsc_state.state_of` (state version 2)."""
        return rlsc_state.state_of(self, REBUILD_TOLERANCE)

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> IncrementalRLSC:
        """Rebuild a classifier from :meth:`to_state`; ValueError/KeyError/TypeError on bad content."""
        return rlsc_state.restored(cls, meta, arrays)

    def __repr__(self) -> str:
        return (
            f"IncrementalRLSC(lambdas={self.lambdas.tolist()}, alpha={self.alpha!r}, "
            f"classes={len(self._labels)}, samples={self.n_samples})"
        )
