"""Nyström KRR with its hyperparameters tuned (Meanti et al.) as an offline method
(:class:`~lifelong_learning.nystrom.estimator.OfflineMethod`, name ``"nystrom"``).

:meth:`TunedNystrom.fit` is :func:`~lifelong_learning.nystrom.tuning.tune` with the options
given at construction (any of its keyword arguments), the rows' ``groups`` (``"holdout-bags"``)
and the progress callback called after every epoch; the result is the tuned
:class:`~lifelong_learning.nystrom.krr.NystromKRR` (``model_``), whose feature map and ``nλ``
the online learners continue from exactly.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from lifelong_learning.core.model_file import prefixed, unprefixed
from lifelong_learning.learners.nystrom_features import NystromFeatureMap
from lifelong_learning.nystrom.estimator import OfflineMethod, Progress
from lifelong_learning.nystrom.krr import NystromKRR
from lifelong_learning.nystrom.tuning import TuningResult, tune

#: tune()'s keyword arguments that are not options of the method (the fit gives them)
_GIVEN_BY_FIT = ("X", "Y", "groups", "callback")
#: TuningResult's fields, as the model file's meta holds them
_TUNING_FIELDS = ("objective", "lam", "lengthscale", "epochs", "history", "seconds", "stopped_early")


class TunedNystrom(OfflineMethod):
    """Nyström KRR tuned by :func:`~lifelong_learning.nystrom.tuning.tune` (module docstring).

    Args:
        **options: keyword arguments of ``tune`` (``centers``, ``objective``, ``epochs``, ``lr``,
            ``patience``, ``dtype``, ``device``, ``seed``, ...); ValueError for any other name.

    Attributes:
        model_: the tuned :class:`NystromKRR`. tuning_: its :class:`TuningResult`.

    Example:
        >>> X = np.random.default_rng(0).normal(size=(80, 2)); Y = np.sin(X[:, :1])
        >>> TunedNystrom(centers=10, epochs=3, device="cpu").fit(X, Y).predict(X).shape
        (80, 1)
    """

    name = "nystrom"

    def __init__(self, **options: Any):
        accepted = set(inspect.signature(tune).parameters) - set(_GIVEN_BY_FIT)
        unknown = sorted(set(options) - accepted)
        if unknown:
            raise ValueError(f"unknown option(s) of the Nyström tuning: {unknown}; known: {sorted(accepted)}")
        self.options = dict(options)
        self.model_: NystromKRR | None = None

    @property
    def is_fitted(self) -> bool:
        return self.model_ is not None and self.model_.is_fitted

    @property
    def tuning_(self) -> TuningResult:
        """What the tuning found (:class:`~lifelong_learning.nystrom.tuning.TuningResult`)."""
        self._check_fitted()
        return self.model_.tuning_

    @property
    def n_samples(self) -> int:  # type: ignore[override]  # the tuned model's training rows
        return 0 if self.model_ is None else self.model_.n_samples

    def fit(
        self, X: Any, Y: Any, groups: Sequence[int] | None = None, progress: Progress | None = None
    ) -> TunedNystrom:
        """Tune on rows ``X``, targets ``Y`` and fit the Nyström KRR with the best hyperparameters."""
        self.model_ = tune(X, Y, groups=groups, callback=progress, **self.options)
        return self

    def predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        return self.model_.predict(X)

    def feature_map(self) -> NystromFeatureMap:
        self._check_fitted()
        return self.model_.feature_map()

    def engine_lam(self, n_samples: int | None = None) -> float:
        self._check_fitted()
        return self.model_.engine_lam(n_samples)

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The options that are numbers or text (given centres as an array), the tuned model's
        state and the tuning result."""
        self._check_fitted()
        model_meta, model_arrays = self.model_.to_state()
        options = {k: _as_json(v) for k, v in self.options.items() if k not in ("centers", "group")}
        arrays = prefixed("model", model_arrays)
        centers = self.options.get("centers", 100)
        if isinstance(centers, (int, np.integer)):
            options["centers"] = int(centers)
        else:
            arrays["options/centers"] = np.asarray(centers, dtype=np.float64)
        tuning = {k: getattr(self.model_.tuning_, k) for k in _TUNING_FIELDS}
        return {"options": options, "model": model_meta, "tuning": tuning}, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> TunedNystrom:
        """Rebuild from :meth:`to_state` (the model on the CPU)."""
        options = dict(meta["options"])
        if "options/centers" in arrays:
            options["centers"] = np.asarray(arrays["options/centers"])
        method = cls(**options)
        model = NystromKRR.from_state(meta["model"], unprefixed("model", arrays))
        model.tuning_ = TuningResult(**{k: meta["tuning"][k] for k in _TUNING_FIELDS})
        method.model_ = model
        return method

    def __repr__(self) -> str:
        return f"TunedNystrom({', '.join(f'{k}={v!r}' for k, v in self.options.items())})"


def _as_json(value: Any) -> Any:
    """An option as a model file's meta holds it: numbers, text, lists of them; a torch dtype as
    its name (``"float32"``)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return str(value).removeprefix("torch.")


__all__ = ["TunedNystrom"]
