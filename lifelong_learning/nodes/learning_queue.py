"""What the ``inverse_dynamics`` node does with each answered sample with effort: learn it, or say why not.

The answering thread (:meth:`LearningQueue.queue`) gives every answered sample, in order, one of:

- learned: queued for the learning thread (:class:`ToLearn`);
- not learned, counted under its reason (diagnostics ``not learned: <reason>``): the guard's
  (a residual outlier, the acceleration filter warming up, above ``learn_max_hz``), ``contact``
  (in contact, pending onset, or within ``contact_hold_s`` after one), ``slow load`` (held for a
  load that built up too slowly for the contact thresholds), ``learning queue full``; or refused
  as bad input (an effort beyond the limits);
- samples held for a load (contact or slow load) are held back
  (:meth:`~lifelong_learning.nodes.contact_monitor.ContactMonitor.hold_back`), learned after all
  when a payload explains the load; those held for a slow load only also go to the learning
  thread to be judged, so that the hold can end.

The learning thread (:meth:`LearningQueue.take`) judges each block for a slow load before it
learns it (:mod:`~lifelong_learning.nodes.slow_load_monitor`) and applies a hold found there to
the block's samples from the onset's stamp on: the answering thread sees the hold one block later,
and a learning thread that lags (a burst, a slow computer) must not learn the load meanwhile.

Every block of answered samples feeds the starvation monitor
(:mod:`~lifelong_learning.nodes.learning_starvation`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from lifelong_learning.dynamics.guard import OUTLIER, THINNED, WARMING_UP, SampleGuard
from lifelong_learning.dynamics.semiparametric import PreparedSamples, SemiparametricInverseDynamics
from lifelong_learning.nodes.contact_monitor import Detection

#: why an answered sample was not learned, beyond the guard's reasons
LEARNING_BEHIND = "learning queue full"
LEARNING_STOPPED = "learning thread stopped"
MODEL_REPLACED = "model replaced before learning"
#: a sample in contact, pending onset, or within contact_hold_s after a contact (dynamics/contact.py)
CONTACT = "contact"
#: a sample held for a load that built up too slowly for the contact thresholds (dynamics/slow_load.py)
SLOW_LOAD = "slow load"
#: why an answered sample was not learned that are counted (diagnostics ``not learned: ...``), not
#: rejected as bad input (an effort beyond the limits is)
NOT_LEARNED = frozenset({OUTLIER, WARMING_UP, THINNED, LEARNING_BEHIND, LEARNING_STOPPED, CONTACT, SLOW_LOAD})


@dataclass(frozen=True)
class ToLearn:
    """Answered samples waiting for the learning thread: the model that answered, what it
    computed for the answers, and the measured torques (rows in the same order)."""

    model: SemiparametricInverseDynamics
    prepared: PreparedSamples | None  # None: prepared when learned, from ``states`` (q, q̇, q̈)
    tau: np.ndarray
    states: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    t: np.ndarray | None = None  # stamps (None: samples held back, not judged for slow loads)
    judge_only: bool = False  # held for a slow load: judged (so that the hold can end), not learned


class LearningQueue:
    """The node's learn-or-count decisions (see the module docstring); ``node``: the
    ``inverse_dynamics`` node (its learner, model lock, counts, contact and starvation monitors)."""

    def __init__(self, node: Any):
        self.node = node

    def queue(
        self,
        model: SemiparametricInverseDynamics,
        guard: SampleGuard,
        prepared: PreparedSamples,
        rows: list[Any],
        at: list[int],
        contact: Detection,
    ) -> None:
        """Queue answered samples (the node's admitted ``rows``, rows ``at`` of ``prepared``) for
        learning, in order, unless the guard or the contact detector (``contact``, per row of
        ``prepared``) says otherwise for one of them (then that one is counted, not learned)."""
        node = self.node
        keep: list[int] = []
        reasons: list[str] = []
        held: list[int] = []
        with node.model_lock:  # the guard's outlier test keeps a window of recent errors
            for row, k in zip(rows, at, strict=True):
                reason = row.admitted.not_learned
                if reason is None and contact.touching[k]:  # (in contact: its errors stay out of the guard's)
                    reason = SLOW_LOAD if contact.slow[k] else CONTACT
                elif reason is None:  # one spike is the guard's outlier; pending or held: contact
                    reason = guard.residual_refusal(row.tau, prepared.torque[k]) or (
                        None if contact.free[k] else CONTACT
                    )
                if reason is None:
                    keep.append(k)
                else:
                    reasons.append(reason)
                    held += [k] if reason in (CONTACT, SLOW_LOAD) else []
            taus = {k: row.tau for row, k in zip(rows, at, strict=True)}
            stamps = {k: row.t for row, k in zip(rows, at, strict=True)}
            learn = [self.item(model, prepared, keep, taus, stamps)] if keep else []
            learn += self._held_back(model, prepared, held, taus, stamps, contact.slow)
        for item in learn:
            if not node.learner.put(item) and not item.judge_only:  # full, or (the process stops) ended
                n = item.tau.shape[0]
                reasons += [LEARNING_STOPPED if node.learner.stopped else LEARNING_BEHIND] * n
        self.count(reasons)
        missed = [r for r in reasons if r != THINNED]  # (thinning is by design: not offered)
        node.starvation.add(max(stamps.values()), len(rows) - len(reasons) + len(missed), missed)

    def count(self, reasons: list[str]) -> None:
        """Count samples not learned; an effort beyond the limits is rejected as bad input."""
        node = self.node
        counted = [r for r in reasons if r in NOT_LEARNED]
        if counted:  # one lock for the callback's block (thinning alone counts 750 a second at 1 kHz)
            with node.model_lock:
                for reason in counted:
                    node.not_learned[reason] = node.not_learned.get(reason, 0) + 1
                node._outliers_since += counted.count(OUTLIER)
        for reason in reasons:
            if reason not in NOT_LEARNED:
                node.reject(reason, "the sample is answered, not learned")

    @staticmethod
    def item(
        model: SemiparametricInverseDynamics,
        prepared: PreparedSamples,
        rows: list[int],
        taus: dict[int, np.ndarray],
        stamps: dict[int, float],
        judge_only: bool = False,
    ) -> ToLearn:
        """Rows ``rows`` of ``prepared`` with their torques and stamps, for the learning thread."""
        t = np.array([stamps[k] for k in rows])
        tau = np.stack([taus[k] for k in rows])
        return ToLearn(model, prepared.take(rows), tau, t=t, judge_only=judge_only)

    def _held_back(
        self,
        model: SemiparametricInverseDynamics,
        prepared: PreparedSamples,
        held: list[int],
        taus: dict[int, np.ndarray],
        stamps: dict[int, float],
        slow: np.ndarray,
    ) -> list[ToLearn]:
        """Hold back the samples not learned for a load (rows ``held`` of ``prepared``), and judge
        those held only for a slow load; those of a load just taken as the new steady state, to be
        learned after all (nodes/contact_monitor.py; model lock held)."""
        contact = self.node.contact
        if contact is None:
            return []
        items = []
        if held:
            tau, t = np.stack([taus[k] for k in held]), np.array([stamps[k] for k in held])
            contact.hold_back(prepared.take(held), tau, t)
            judged = [k for k in held if slow[k]]
            items += [self.item(model, prepared, judged, taus, stamps, judge_only=True)] if judged else []
        released = contact.release()
        if released is not None:
            items.append(ToLearn(model, None, released.tau, (released.q, released.qd, released.qdd)))
        return items

    def take(self, model: SemiparametricInverseDynamics, block: list[ToLearn]) -> list[ToLearn]:
        """On the learning thread: what of a queued ``block`` the serving ``model`` learns, in order,
        after judging it for a slow load (samples queued for another model are counted)."""
        node = self.node
        slow = None if node.contact is None else node.contact.slow
        since = None
        if slow is not None:
            since = slow.judge(
                model, [(i.t, i.prepared, i.tau) for i in block if i.model is model and i.t is not None]
            )
        block = [item for item in block if not item.judge_only]
        mine = [item for item in block if item.model is model]
        if len(mine) < len(block):
            with node.model_lock:
                n = node.not_learned.get(MODEL_REPLACED, 0) + len(block) - len(mine)
                node.not_learned[MODEL_REPLACED] = n
        return mine if since is None else self._hold_from(since, mine)

    def _hold_from(self, since: float, items: list[ToLearn]) -> list[ToLearn]:
        """The samples of ``items`` stamped before a slow load's onset ``since``; the others are
        held back and counted, not learned."""
        out: list[ToLearn] = []
        for item in items:
            if item.t is None or item.prepared is None or not np.any(item.t >= since):
                out.append(item)
                continue
            before = np.flatnonzero(item.t < since).tolist()
            after = np.flatnonzero(item.t >= since).tolist()
            with self.node.model_lock:
                if self.node.contact is not None:
                    self.node.contact.hold_back(item.prepared.take(after), item.tau[after], item.t[after])
            self.count([SLOW_LOAD] * len(after))
            if before:
                out.append(
                    replace(item, prepared=item.prepared.take(before), tau=item.tau[before], t=item.t[before])
                )
        return out
