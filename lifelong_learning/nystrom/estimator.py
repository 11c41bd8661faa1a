"""The one contract every offline method meets (the registry of them:
:mod:`~lifelong_learning.nystrom.methods`).

A method is an estimator class (as scikit-learn's and River's are checked by one
``check_estimator``, ``test/nystrom/test_methods.py`` checks every registered method against this
contract):

- ``fit(X, Y, groups=None, progress=None)``: learn from rows ``X`` ``(n, d)`` and targets ``Y``
  (``(n,)`` or ``(n, p)``); ``groups`` are the first row of each recording (bags), which a method
  may use to hold whole recordings out; ``progress(step, info)`` is called as the fit advances
  (an epoch, an iteration, a centre), and an exception it raises stops the fit (a job cancelled);
- ``predict(X)`` → ``(n, p)`` float64;
- what the online learners continue from: :meth:`OfflineMethod.feature_map` (a
  :class:`~lifelong_learning.learners.feature_map.FeatureMap` of a kind a model file can hold) and
  :meth:`OfflineMethod.engine_lam` (the ``lam`` of a
  :class:`~lifelong_learning.learners.recursive_rls.RecursiveRLS` on that map);
  :meth:`OfflineMethod.engine` builds that engine; where :attr:`OfflineMethod.engine_reproduces`,
  it predicts what the method predicts;
- its state to and from a model file (:class:`~lifelong_learning.core.persistence.PersistentModel`,
  of kind ``offline_<name>``): numbers only, loaded without executing code.

The helpers every method shares: :func:`training_rows` (the one input check) and
:func:`holdout_split` (the rows a method validates on).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from lifelong_learning.core.checks import as_rows, same_rows
from lifelong_learning.core.persistence import PersistentModel
from lifelong_learning.learners.feature_map import FeatureMap
from lifelong_learning.learners.recursive_rls import RecursiveRLS

Progress = Callable[[int, dict[str, Any]], None]
"""``progress(step, info)``: called as a fit advances; raising from it stops the fit."""

#: rows per update when an engine learns the fitted rows
_BLOCK = 4096


class OfflineMethod(PersistentModel):
    """The estimator contract of the offline methods (see the module docstring).

    Subclasses set :attr:`name` (their model files are of kind ``offline_<name>``) and implement
    :meth:`fit`, :meth:`predict`, :attr:`is_fitted`, :meth:`feature_map`, :meth:`engine_lam`,
    :meth:`to_state` and :meth:`from_state`.
    """

    #: the method's name (what a job's ``method`` names)
    name: ClassVar[str] = ""
    #: whether :meth:`engine` on the fitted rows predicts what :meth:`predict` does (to rounding)
    engine_reproduces: ClassVar[bool] = True
    n_samples: int = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name:
            cls.kind = f"offline_{cls.name}"

    def fit(
        self, X: Any, Y: Any, groups: Sequence[int] | None = None, progress: Progress | None = None
    ) -> OfflineMethod:
        """Learn from rows ``X`` and targets ``Y`` (module docstring); returns ``self``."""
        raise NotImplementedError

    def predict(self, X: Any) -> np.ndarray:
        """Predictions ``(n, p)`` for rows ``X``."""
        raise NotImplementedError

    @property
    def is_fitted(self) -> bool:
        """Whether :meth:`fit` has run."""
        raise NotImplementedError

    def feature_map(self) -> FeatureMap:
        """The feature map the online learners continue from."""
        raise NotImplementedError

    def engine_lam(self, n_samples: int | None = None) -> float:
        """The ``lam`` of a RecursiveRLS on :meth:`feature_map` that learns the fitted rows
        (``n_samples``: that applies the method's regularization per sample to so many rows)."""
        raise NotImplementedError

    def engine(self, X: Any, Y: Any) -> RecursiveRLS:
        """A RecursiveRLS on :meth:`feature_map` with :meth:`engine_lam` that learned rows ``X``,
        ``Y`` (the fitted rows: where :attr:`engine_reproduces`, it then predicts as the method)."""
        fmap = self.feature_map()
        X2, Y2 = training_rows(X, Y, min_rows=1)
        rls = RecursiveRLS(fmap.n_features, Y2.shape[1], lam=self.engine_lam(X2.shape[0]))
        for start in range(0, X2.shape[0], _BLOCK):
            rls.update(fmap.transform(X2[start : start + _BLOCK]), Y2[start : start + _BLOCK])
        return rls

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit first")


def training_rows(X: Any, Y: Any, min_rows: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """``X`` ``(n, d)`` and ``Y`` ``(n, p)`` as finite float64 arrays with the same ``n ≥ min_rows``
    (a 1-D ``Y`` is one output), or ValueError: the one input check of the offline methods."""
    Y2 = np.asarray(Y, dtype=np.float64)
    Y2 = as_rows(Y2[:, None] if Y2.ndim == 1 else Y2, None, "Y")
    X2 = as_rows(X, None, "X")
    same_rows({"X": X2, "Y": Y2})
    if X2.shape[0] < min_rows:
        raise ValueError(f"need at least {min_rows} samples, got {X2.shape[0]}")
    return X2, Y2


def holdout_split(
    n: int, fraction: float, groups: Sequence[int] | None, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(train, validation)`` of ``n`` rows: with two or more recordings (``groups``, the
    first row of each), the most recent whole recordings holding at least ``fraction`` of the rows
    (never all of them); otherwise a uniformly random ``fraction`` (at least one row, at most
    ``n − 1``). ValueError for fewer than 2 rows or a fraction outside (0, 1)."""
    if n < 2:
        raise ValueError(f"a hold-out split needs at least 2 rows, got {n}")
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"the hold-out fraction must be in (0, 1), got {fraction!r}")
    starts = sorted({int(g) for g in (groups or ()) if 0 < int(g) < n})
    if starts:
        cut = max((s for s in starts if n - s >= fraction * n), default=starts[0])
        return np.arange(cut), np.arange(cut, n)
    n_val = min(n - 1, max(1, round(fraction * n)))
    perm = rng.permutation(n)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


__all__ = ["OfflineMethod", "Progress", "holdout_split", "training_rows"]
