"""The forgetting factor chosen on the live stream: ``forgetting="auto"`` (issue 27, item 6).

The factor ``β`` that suits a robot (thesis §8.4.3: ``A ← βA + zᵀz``) depends on how fast its
dynamics change (wear, temperature, payloads), which nobody knows in advance: 1 is best while
nothing changes, below 1 once something does. :class:`AutoForgettingRLS` runs one
:class:`~lifelong_learning.learners.recursive_rls.RecursiveRLS` per candidate factor
(:data:`DEFAULT_CANDIDATES`), all learning every sample, and scores each prequentially: every
block of rows is predicted by every candidate *before* any learns it
(:class:`~lifelong_learning.core.prequential.PrequentialRegression`, over the last ``window``
samples). The candidate of the lowest mean nMSE over that window serves (answers, its weights are
the engine's), chosen again after every update; it changes only when another is better by
``switch_margin`` (relative), so that near-ties do not flip the answers back and forth. While
the window cannot score (fewer than 2 samples, targets that did not vary), the factor that
served keeps serving: at first 1.0, no forgetting.

Cost: every candidate learns every sample, so an update costs ``len(candidates)`` times one
engine's, plus one prediction per candidate (``benchmarks/bench_auto_forgetting.py``).

The engine offers what :class:`~lifelong_learning.dynamics.SemiparametricInverseDynamics` uses of a
``RecursiveRLS`` (``update``, ``predict``, ``weights``, ``draft``/``commit``, ``to_state``/``from_state``,
``reset``, ``is_finite``, ``nbytes``), so that it can be the semiparametric model's residual.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from lifelong_learning.core.checks import as_rows
from lifelong_learning.core.persistence import Stateful
from lifelong_learning.core.prequential import PrequentialRegression
from lifelong_learning.learners.recursive_rls import RecursiveRLS

#: candidate factors per sample: none, and memories of about 10,000, 2,000, 1,000 and 500 samples
DEFAULT_CANDIDATES = (1.0, 0.9999, 0.9995, 0.999, 0.998)
#: samples the prequential error is compared over
DEFAULT_WINDOW = 2000
#: another candidate serves once its error is below (1 − this) × the serving one's
DEFAULT_SWITCH_MARGIN = 0.02


def _name(beta: float) -> str:
    return repr(float(beta))


class AutoForgettingRLS(Stateful):
    """Candidate forgetting factors learning side by side; the prequentially best one serves.

    Args:
        n_features, n_outputs, lam: as :class:`RecursiveRLS`.
        candidates: forgetting factors in (0, 1], distinct (1.0 serves first when present, else
            the first).
        window: samples the prequential error is compared over.
        switch_margin: relative improvement another candidate needs to take over, in [0, 1).
    """

    def __init__(
        self,
        n_features: int,
        n_outputs: int,
        lam: float = 1.0,
        candidates: Sequence[float] = DEFAULT_CANDIDATES,
        window: int = DEFAULT_WINDOW,
        switch_margin: float = DEFAULT_SWITCH_MARGIN,
    ) -> None:
        betas = [float(b) for b in candidates]
        if not betas or len(set(betas)) != len(betas):
            raise ValueError(f"candidates must be distinct forgetting factors, at least one: {candidates!r}")
        if int(window) < 2:
            raise ValueError(f"window must be at least 2 samples, got {window!r}")
        if not 0.0 <= float(switch_margin) < 1.0:
            raise ValueError(f"switch_margin must be in [0, 1), got {switch_margin!r}")
        self.engines = [RecursiveRLS(n_features, n_outputs, lam=lam, forgetting=b) for b in betas]
        self.candidates = tuple(betas)
        self.window = int(window)
        self.switch_margin = float(switch_margin)
        self.scores = PrequentialRegression(max(int(n_outputs), 1), self.window, [_name(b) for b in betas])
        self.serving = betas.index(1.0) if 1.0 in betas else 0
        self.switches = 0  # times another candidate took over

    # ------------------------------------------------------------------ what serves
    @property
    def engine(self) -> RecursiveRLS:
        """The serving candidate's engine."""
        return self.engines[self.serving]

    @property
    def forgetting(self) -> float:
        """The forgetting factor that serves now."""
        return self.candidates[self.serving]

    @property
    def n_features(self) -> int:
        return self.engine.n_features

    @property
    def n_outputs(self) -> int:
        return self.engine.n_outputs

    @property
    def lam(self) -> float:
        return self.engine.lam

    @property
    def n_samples(self) -> int:
        return self.engine.n_samples

    @property
    def weights(self) -> np.ndarray:
        return self.engine.weights

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self.engines)

    def predict(self, Z: Any) -> np.ndarray:
        """The serving candidate's prediction (:meth:`RecursiveRLS.predict`)."""
        return self.engine.predict(Z)

    def errors(self) -> dict[float, float]:
        """Each candidate's mean prequential nMSE over the window (NaN while undefined)."""
        report = self.scores.report()
        return {b: report.means[_name(b)] for b in self.candidates}

    # ------------------------------------------------------------------ learning
    def update(self, Z: Any, U: Any, gram: np.ndarray | None = None) -> None:
        """Score every candidate on rows ``Z`` with targets ``U`` before any learns them, let all learn
        them, then let the best candidate serve. ``gram`` as :meth:`RecursiveRLS.update`.

        Raises:
            ValueError: wrong shapes or non-finite values; nothing is changed then.
        """
        Z2 = as_rows(Z, self.n_features, "Z")
        U2 = as_rows(U, self.n_outputs, "U") if self.n_outputs else np.zeros((Z2.shape[0], 0))
        if Z2.shape[0] != U2.shape[0]:
            raise ValueError(f"Z has {Z2.shape[0]} rows, U {U2.shape[0]}")
        if self.n_outputs and Z2.shape[0] and self.n_samples:
            predictions = {
                _name(b): e.predict(Z2) for b, e in zip(self.candidates, self.engines, strict=True)
            }
            if all(np.all(np.isfinite(p)) for p in predictions.values()):
                self.scores.add(float(self.n_samples + Z2.shape[0]), U2, **predictions)
        for engine in self.engines:
            engine.update(Z2, U2, gram)
        self._choose()

    def _choose(self) -> None:
        errors = self.errors()
        serving = errors[self.forgetting]
        defined = {k: e for k, (b, e) in enumerate(errors.items()) if not np.isnan(e)}
        if not defined:
            return
        best = min(defined, key=defined.__getitem__)
        if np.isnan(serving) or defined[best] < (1.0 - self.switch_margin) * serving:
            if best != self.serving:
                self.serving = best
                self.switches += 1

    def draft(self) -> AutoForgettingRLS:
        """A working copy for an all-or-nothing update (:meth:`RecursiveRLS.draft` of each
        candidate; the scores copied, a few kB); :meth:`commit` adopts it."""
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.engines = [e.draft() for e in self.engines]
        twin.scores = copy.deepcopy(self.scores)
        twin._draft_of = self
        return twin

    def commit(self, draft: AutoForgettingRLS) -> None:
        """Adopt ``draft`` (made by :meth:`draft` of this engine).

        Raises:
            ValueError: ``draft`` is not a pending draft of this engine.
        """
        if getattr(draft, "_draft_of", None) is not self or len(draft.engines) != len(self.engines):
            raise ValueError("not a pending draft of this engine")
        for engine, twin in zip(self.engines, draft.engines, strict=True):
            engine.commit(twin)
        self.scores, self.serving, self.switches = draft.scores, draft.serving, draft.switches
        draft._draft_of = None

    def is_finite(self) -> bool:
        return all(e.is_finite() for e in self.engines)

    def reset(self) -> None:
        """Forget everything (the candidates, their scores; 1.0 serves again when present)."""
        for engine in self.engines:
            engine.reset()
        self.scores.clear()
        self.serving = self.candidates.index(1.0) if 1.0 in self.candidates else 0

    # ------------------------------------------------------------------ persistence
    def to_state(self, packed: bool = False) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Every candidate's engine (arrays ``c<k>.R`` ...), the serving index; the scores are not
        kept (a restored engine scores the stream anew; the serving candidate keeps serving)."""
        meta: dict[str, Any] = {
            "auto_forgetting": True,
            "candidates": list(self.candidates),
            "window": self.window,
            "switch_margin": self.switch_margin,
            "serving": self.serving,
            "switches": self.switches,
            "engines": [],
        }
        arrays: dict[str, np.ndarray] = {}
        for k, engine in enumerate(self.engines):
            m, a = engine.to_state(packed=packed)
            meta["engines"].append(m)
            arrays.update({f"c{k}.{name}": value for name, value in a.items()})
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> AutoForgettingRLS:
        """Rebuild an engine saved by :meth:`to_state`; ValueError on bad content."""
        try:
            engines = []
            for k, m in enumerate(meta["engines"]):
                prefix = f"c{k}."
                engines.append(
                    RecursiveRLS.from_state(
                        m, {n[len(prefix) :]: a for n, a in arrays.items() if n.startswith(prefix)}
                    )
                )
            first = engines[0]
            rls = cls(
                first.n_features,
                first.n_outputs,
                lam=first.lam,
                candidates=meta["candidates"],
                window=int(meta["window"]),
                switch_margin=float(meta["switch_margin"]),
            )
            serving, switches = int(meta["serving"]), int(meta.get("switches", 0))
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"malformed AutoForgettingRLS state: {exc}") from exc
        betas = [e.forgetting for e in engines]
        if betas != list(rls.candidates) or not 0 <= serving < len(engines):
            raise ValueError("AutoForgettingRLS state: the engines do not match the candidates")
        if any(
            (e.n_features, e.n_outputs, e.lam) != (first.n_features, first.n_outputs, first.lam)
            for e in engines
        ):
            raise ValueError("AutoForgettingRLS state: the candidates differ in size or λ")
        rls.engines, rls.serving, rls.switches = engines, serving, switches
        return rls

    def __repr__(self) -> str:
        return (
            f"AutoForgettingRLS(n_features={self.n_features}, n_outputs={self.n_outputs}, lam={self.lam:g}, "
            f"candidates={list(self.candidates)}, serving={self.forgetting:g}, n_samples={self.n_samples})"
        )
