"""The forgetting factor chosen on the live stream: ``forgetting="auto"``.

The factor ``β`` that suits a robot (thesis §8.4.3: ``A ← βA + zᵀz``) depends on how fast its
dynamics change (wear, temperature, payloads), which nobody knows in advance: 1 is best while
nothing changes, below 1 once something does. :class:`AutoForgettingRLS` keeps **one** full-size
:class:`~lifelong_learning.learners.recursive_rls.RecursiveRLS`, the engine that serves, and races
the candidate factors (:data:`DEFAULT_CANDIDATES`) on cheap **proxies**: one small ``RecursiveRLS``
per candidate that learns only the first ``p`` columns of the same rows (``p`` = a quarter of the
features by default, :func:`proxy_size`). Every block of rows is predicted by every proxy *before*
any learns it (:class:`~lifelong_learning.core.prequential.PrequentialRegression`, over the last
``window`` samples), and their mean nMSE over that window chooses the serving engine's factor from
the next rows on (:meth:`RecursiveRLS.set_forgetting`: a time-varying factor
``A_t = β_t A_{t−1} + z_tᵀz_t`` is exact). The factor changes only when the best proxy is better
than the serving factor's by ``switch_margin`` (relative), so that near-ties do not flip it back
and forth; it then becomes the **largest** factor whose proxy is within that margin of the best
(forgetting forgets the regularizer too, and what the stream has not shown lately: no shorter a
memory than the stream's error pays for). The choice is made
again every ``window / 20`` samples (a twentieth of the window: the prequential window's bucket;
a report merges the buckets, too costly per block at 1 kHz), and first once ``window`` samples
were scored (before, the proxies' fits differ by little more than chance: a factor below 1 won
by chance on stationary streams). While the window cannot score (targets that did not vary), the
factor keeps serving: at first 1.0, no forgetting.

**Memory is not spent on noise.** A factor below 1 serves only while the stream is mostly what a
memory of some length can predict: the best proxy's mean nMSE must be at most ``max_unexplained``
(:data:`DEFAULT_MAX_UNEXPLAINED`, 0.1: at least 90 % of the variance explained), over the window
and over its newest quarter (:data:`RECENT_FRACTION`). Otherwise the largest factor (1.0) serves.
Prequentially, a shorter memory also wins on variation that no model of the robot's state
predicts (effort offsets that switch every few seconds, a person pushing, sensor noise): it
follows the last seconds of it a little better than a long memory that averages it. That gain
is spent on noise, and the memory it costs is real: forgetting forgets the regularizer and every
region the recent samples did not visit, so what was learned before is lost. A lasting change of
the dynamics (a grasped payload) is learned by a short memory to a small error; offsets that
switch leave a large share of the variance unexplained whatever the memory, and so does a
stationary stream's residual (what the URDF's physics miss, mostly noise). The newest quarter
matters at a change's onset: the window is still mostly the old regime, explained by every
factor, and the new samples must be explained too before a factor below 1 serves. The price: a
change that the proxies cannot explain to within ``max_unexplained`` (a small payload, a noisy
robot) is not followed by forgetting. Measured figures: docs/metrics.md and
docs/benchmarks/auto-forgetting.md (``benchmarks/bench_auto_forgetting.py``).

Why proxies: a factor's effect is how fast old rows fade, which a smaller model on the same
stream shows as well as the full one (the proxies see the same drift); the full engine's own
error under another factor would need a full engine per factor (the first version of this class:
five times the learning, too slow for the 1 kHz node). Cost: one engine plus ``k`` engines of
``p`` features, about ``1 + k (p/d)²`` of one engine's update (``1 + 5/16`` at the defaults;
``benchmarks/bench_auto_forgetting.py``). The choice is a proxy's: on a stream where a quarter of
the features explains much less than all of them, the best factor of the proxy may not be the
full engine's (docs/metrics.md says what the node reports).

The engine offers what :class:`~lifelong_learning.dynamics.SemiparametricInverseDynamics` uses of a
``RecursiveRLS`` (``update``, ``predict``, ``weights``, ``draft``/``commit``, ``to_state``/``from_state``,
``reset``, ``is_finite``, ``nbytes``), so that it can be the semiparametric model's residual.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lifelong_learning.core.checks import as_rows
from lifelong_learning.core.persistence import Stateful
from lifelong_learning.core.prequential import DEFAULT_BUCKETS, PrequentialRegression
from lifelong_learning.learners.recursive_rls import RecursiveRLS

#: candidate factors per sample: none, and memories of about 10,000, 2,000, 1,000 and 500 samples
DEFAULT_CANDIDATES = (1.0, 0.9999, 0.9995, 0.999, 0.998)
#: samples the prequential error is compared over
DEFAULT_WINDOW = 2000
#: another candidate serves once its error is below (1 − this) × the serving one's
DEFAULT_SWITCH_MARGIN = 0.02
#: a factor below 1 serves only while the best proxy's mean nMSE is at most this (over the window
#: and its newest part): the rest of the stream's variance is what no memory length predicts
DEFAULT_MAX_UNEXPLAINED = 0.1
#: the newest part of the window that must be explained too: 1/this of it
RECENT_FRACTION = 4
#: the proxies learn this fraction of the features (:func:`proxy_size`) ...
PROXY_FRACTION = 0.25
#: ... but at least this many (all of them when the engine has fewer)
MIN_PROXY_FEATURES = 64


def proxy_size(n_features: int) -> int:
    """Features a proxy learns by default: a quarter of ``n_features``, at least
    :data:`MIN_PROXY_FEATURES` (all of them below that)."""
    n = int(n_features)
    return min(n, max(MIN_PROXY_FEATURES, int(n * PROXY_FRACTION)))


def _name(beta: float) -> str:
    return repr(float(beta))


class AutoForgettingRLS(Stateful):
    """One serving engine; candidate forgetting factors raced on small proxies, the best one serves.

    Args:
        n_features, n_outputs, lam: as :class:`RecursiveRLS`.
        candidates: forgetting factors in (0, 1], distinct (1.0 serves first when present, else
            the first).
        window: samples the prequential error is compared over.
        switch_margin: relative improvement another candidate needs to take over, in [0, 1).
        proxy_features: columns the proxies learn (the first ones of every row), in [1, n_features];
            default :func:`proxy_size`.
        max_unexplained: a factor other than the largest serves only while the best proxy's mean
            prequential nMSE over the window, and over its newest ``1/RECENT_FRACTION``, is at most
            this (≥ 0; ``inf``: no such limit).
    """

    def __init__(
        self,
        n_features: int,
        n_outputs: int,
        lam: float = 1.0,
        candidates: Sequence[float] = DEFAULT_CANDIDATES,
        window: int = DEFAULT_WINDOW,
        switch_margin: float = DEFAULT_SWITCH_MARGIN,
        proxy_features: int | None = None,
        max_unexplained: float = DEFAULT_MAX_UNEXPLAINED,
    ) -> None:
        betas = [float(b) for b in candidates]
        if not betas or len(set(betas)) != len(betas):
            raise ValueError(f"candidates must be distinct forgetting factors, at least one: {candidates!r}")
        if int(window) < 2:
            raise ValueError(f"window must be at least 2 samples, got {window!r}")
        if not 0.0 <= float(switch_margin) < 1.0:
            raise ValueError(f"switch_margin must be in [0, 1), got {switch_margin!r}")
        if not float(max_unexplained) >= 0.0:
            raise ValueError(f"max_unexplained must be a number ≥ 0, got {max_unexplained!r}")
        p = proxy_size(n_features) if proxy_features is None else int(proxy_features)
        if not 1 <= p <= int(n_features):
            raise ValueError(f"proxy_features must be in [1, {n_features}], got {proxy_features!r}")
        self.candidates = tuple(betas)
        self.serving = betas.index(1.0) if 1.0 in betas else 0
        self.engine = RecursiveRLS(n_features, n_outputs, lam=lam, forgetting=betas[self.serving])
        self.proxies = [RecursiveRLS(p, n_outputs, lam=lam, forgetting=b) for b in betas]
        self.window = int(window)
        self.switch_margin = float(switch_margin)
        self.max_unexplained = float(max_unexplained)
        self.scores = PrequentialRegression(max(int(n_outputs), 1), self.window, [_name(b) for b in betas])
        self.switches = 0  # times another candidate took over
        self.choose_every = max(1, self.window // DEFAULT_BUCKETS)  # samples between choices
        self._since_choice = 0

    # ------------------------------------------------------------------ what serves
    @property
    def forgetting(self) -> float:
        """The forgetting factor that serves now."""
        return self.candidates[self.serving]

    @property
    def proxy_features(self) -> int:
        """Columns the proxies learn."""
        return self.proxies[0].n_features

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
        return self.engine.nbytes + sum(e.nbytes for e in self.proxies)

    def predict(self, Z: Any) -> np.ndarray:
        """The serving engine's prediction (:meth:`RecursiveRLS.predict`)."""
        return self.engine.predict(Z)

    def errors(self) -> dict[float, float]:
        """Each candidate's proxy's mean prequential nMSE over the window (NaN while undefined)."""
        report = self.scores.report()
        return {b: report.means[_name(b)] for b in self.candidates}

    def recent_errors(self) -> dict[float, float]:
        """The same over the window's newest ``1/RECENT_FRACTION`` (NaN while undefined)."""
        report = self.scores.report(newest=max(1, DEFAULT_BUCKETS // RECENT_FRACTION))
        return {b: report.means[_name(b)] for b in self.candidates}

    def explained(self) -> bool:
        """Whether a factor below the largest may serve now: the best proxy's mean nMSE is at most
        ``max_unexplained`` over the window and over its newest part (False while either cannot
        score)."""
        for errors in (self.errors(), self.recent_errors()):
            defined = [e for e in errors.values() if not np.isnan(e)]
            if not defined or min(defined) > self.max_unexplained:
                return False
        return True

    # ------------------------------------------------------------------ learning
    def update(self, Z: Any, U: Any, gram: np.ndarray | None = None) -> None:
        """Score every proxy on rows ``Z`` with targets ``U`` before any learns them, let them learn,
        let the best proxy's factor serve, then let the serving engine learn the rows with it.
        ``gram`` as :meth:`RecursiveRLS.update` (the serving engine's).

        Raises:
            ValueError: wrong shapes or non-finite values; nothing is changed then.
        """
        Z2 = as_rows(Z, self.n_features, "Z")
        U2 = as_rows(U, self.n_outputs, "U") if self.n_outputs else np.zeros((Z2.shape[0], 0))
        if Z2.shape[0] != U2.shape[0]:
            raise ValueError(f"Z has {Z2.shape[0]} rows, U {U2.shape[0]}")
        Zp = Z2[:, : self.proxy_features]
        if self.n_outputs and Z2.shape[0] and self.n_samples:
            predictions = {
                _name(b): e.predict(Zp) for b, e in zip(self.candidates, self.proxies, strict=True)
            }
            if all(np.all(np.isfinite(p)) for p in predictions.values()):
                self.scores.add(float(self.n_samples + Z2.shape[0]), U2, **predictions)
        for proxy in self.proxies:
            proxy.update(Zp, U2)
        self._since_choice += Z2.shape[0]
        if self._since_choice >= self.choose_every:
            self._since_choice = 0
            self._choose()
        self.engine.update(Z2, U2, gram)

    def _choose(self) -> None:
        if self.scores.samples < self.window:  # a partial window: noisy scores of near-equal fits
            return
        if not self.explained():  # mostly what no memory predicts: none is traded for it
            self._serve(self.candidates.index(max(self.candidates)))
            return
        errors = self.errors()
        serving = errors[self.forgetting]
        defined = {k: e for k, (b, e) in enumerate(errors.items()) if not np.isnan(e)}
        if not defined:
            return
        least = min(defined.values())
        if not np.isnan(serving) and least >= (1.0 - self.switch_margin) * serving:
            return  # the serving factor is within the margin of the best: it stays
        # the longest memory whose error is within the margin of the best (forgetting forgets the
        # regularizer too: no more of it than the stream pays for)
        near = [k for k, e in defined.items() if (1.0 - self.switch_margin) * e <= least]
        self._serve(max(near, key=lambda k: self.candidates[k]))

    def _serve(self, chosen: int) -> None:
        """Let candidate ``chosen`` serve from the next rows on (counted when it is another)."""
        if chosen != self.serving:
            self.serving = chosen
            self.switches += 1
            self.engine.set_forgetting(self.candidates[chosen])

    def draft(self) -> AutoForgettingRLS:
        """A working copy for an all-or-nothing update (:meth:`RecursiveRLS.draft` of the engine and
        of each proxy; the scores forked, :meth:`PrequentialRegression.fork`); :meth:`commit` adopts it."""
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.engine = self.engine.draft()
        twin.proxies = [e.draft() for e in self.proxies]
        twin.scores = self.scores.fork()
        twin._draft_of = self
        return twin

    def commit(self, draft: AutoForgettingRLS) -> None:
        """Adopt ``draft`` (made by :meth:`draft` of this engine).

        Raises:
            ValueError: ``draft`` is not a pending draft of this engine.
        """
        if getattr(draft, "_draft_of", None) is not self or len(draft.proxies) != len(self.proxies):
            raise ValueError("not a pending draft of this engine")
        self.engine.commit(draft.engine)
        for proxy, twin in zip(self.proxies, draft.proxies, strict=True):
            proxy.commit(twin)
        self.scores, self.serving, self.switches = draft.scores, draft.serving, draft.switches
        self._since_choice = draft._since_choice
        draft._draft_of = None

    def is_finite(self) -> bool:
        return self.engine.is_finite() and all(e.is_finite() for e in self.proxies)

    def reset(self) -> None:
        """Forget everything (the engine, the proxies, their scores; 1.0 serves again when present)."""
        self.serving = self.candidates.index(1.0) if 1.0 in self.candidates else 0
        self.engine.reset()
        self.engine.set_forgetting(self.forgetting)
        for proxy in self.proxies:
            proxy.reset()
        self.scores.clear()
        self._since_choice = 0

    # ------------------------------------------------------------------ persistence
    def to_state(self, packed: bool = False) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The serving engine (arrays ``engine.R`` ...), each proxy (``p<k>.R`` ...), the serving index;
        the scores are not kept (a restored engine scores the stream anew; its factor keeps serving)."""
        meta: dict[str, Any] = {
            "auto_forgetting": True,
            "format": "proxies",
            "candidates": list(self.candidates),
            "window": self.window,
            "switch_margin": self.switch_margin,
            "max_unexplained": self.max_unexplained,
            "serving": self.serving,
            "switches": self.switches,
        }
        arrays: dict[str, np.ndarray] = {}
        meta["engine"], a = self.engine.to_state(packed=packed)
        arrays.update({f"engine.{name}": value for name, value in a.items()})
        meta["proxies"] = []
        for k, proxy in enumerate(self.proxies):
            m, a = proxy.to_state(packed=packed)
            meta["proxies"].append(m)
            arrays.update({f"p{k}.{name}": value for name, value in a.items()})
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> AutoForgettingRLS:
        """Rebuild an engine saved by :meth:`to_state`, or by the first version of this class (one
        full engine per candidate, ``meta["engines"]``: the serving candidate's engine serves, each
        proxy is the leading block of its candidate's engine, :meth:`RecursiveRLS.leading`, the
        state it would have had). ValueError on bad content."""

        def engine(name: str, m: dict[str, Any]) -> RecursiveRLS:
            prefix = f"{name}."
            return RecursiveRLS.from_state(
                m, {n[len(prefix) :]: a for n, a in arrays.items() if n.startswith(prefix)}
            )

        try:
            candidates = [float(b) for b in meta["candidates"]]
            serving, switches = int(meta["serving"]), int(meta.get("switches", 0))
            if "engines" in meta:  # the first format: a full engine per candidate
                full = [engine(f"c{k}", m) for k, m in enumerate(meta["engines"])]
                if not 0 <= serving < len(full):
                    raise ValueError("AutoForgettingRLS state: the serving index is out of range")
                main = full[serving]
                p = proxy_size(main.n_features)
                proxies = [e.leading(p) for e in full]
            else:
                main = engine("engine", meta["engine"])
                proxies = [engine(f"p{k}", m) for k, m in enumerate(meta["proxies"])]
            rls = cls(
                main.n_features,
                main.n_outputs,
                lam=main.lam,
                candidates=candidates,
                window=int(meta["window"]),
                switch_margin=float(meta["switch_margin"]),
                proxy_features=proxies[0].n_features if proxies else None,
                max_unexplained=float(meta.get("max_unexplained", DEFAULT_MAX_UNEXPLAINED)),
            )
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"malformed AutoForgettingRLS state: {exc}") from exc
        if [e.forgetting for e in proxies] != list(rls.candidates) or not 0 <= serving < len(proxies):
            raise ValueError("AutoForgettingRLS state: the proxies do not match the candidates")
        if main.forgetting != rls.candidates[serving]:
            raise ValueError("AutoForgettingRLS state: the engine's factor is not the serving candidate's")
        if any(
            (e.n_features, e.n_outputs, e.lam) != (rls.proxy_features, main.n_outputs, main.lam)
            for e in proxies
        ):
            raise ValueError("AutoForgettingRLS state: the proxies differ in size or λ")
        rls.engine, rls.proxies, rls.serving, rls.switches = main, proxies, serving, switches
        return rls

    def __repr__(self) -> str:
        return (
            f"AutoForgettingRLS(n_features={self.n_features}, n_outputs={self.n_outputs}, lam={self.lam:g}, "
            f"candidates={list(self.candidates)}, proxy_features={self.proxy_features}, "
            f"serving={self.forgetting:g}, n_samples={self.n_samples})"
        )
