"""The lifelong loop's rule, ROS-free: when the tuner retrains a learner by itself, and from which bags.

Thesis ch. 8 learns inverse dynamics online; a learner's model also drifts away from the robot
(a payload grasped, wear, a new tool), which its drift alarm sees
(:class:`~lifelong_learning.serving.shadow.DriftAlarm`). The loop closes the circle without a
person: a retraining job from the robot's recent bags, judged by the tuner's promotion gate
(:mod:`~lifelong_learning.retraining.promotion`) and then by the learner's shadow evaluation on the
live stream (:mod:`~lifelong_learning.serving.shadow`). One :class:`LifelongLoop` per learner; the
``nystrom_tuner``'s adapter is :mod:`lifelong_learning.nodes.lifelong_loop`.

**An explicit state machine** (:class:`Phase`), fed typed events, one at a time:

- ``idle``: nothing to do (no alarm pending, too few files closed for the count trigger);
- ``due``: a trigger is pending; :meth:`LifelongLoop.next_job` says what holds it back (in words,
  :meth:`~LifelongLoop.waiting`): a model in trial on the learner, the minimum period, files;
- ``saving``: a job started, the learner's serving model being saved for the gate (:class:`Saved`);
- ``tuning``: the goal sent, running (:class:`JobEnded`);
- ``in trial``: the candidate was promoted by the gate and announced; the learner's own state
  (:class:`LearnerState`) says when its trial ended (or, after :data:`TRIAL_START_GRACE_S`, that
  none began: the learner swapped it in at once, or refused it);
- ``cooldown``: after a job, until ``min_period_s`` since its start has passed.

**Triggers**: the learner's drift alarm (``on_drift``), as the learner itself reports it
(:class:`LearnerState`, from its ``~/serving_state`` service: a message on its topics, which any
peer can publish, is not taken), or ``after_bag_files`` files closed since the last job started.
An alarm is an event: it stays pending until a job starts, also when it clears meanwhile (the
online learner often catches up within seconds; a model retrained on the robot as it is now may
still be better, and the shadow evaluation decides), unless a new serving model answered it (the
learner's model version changed) or it was raised while the loop was off. While the alarm stays
raised after a job started, another job follows, once per ``min_period_s``; dropped when it clears.

**Data** (:class:`~lifelong_learning.retraining.loop_files.FileFacts`, checked on disk): files
whose messages begin after the alarm (their own first stamp, not the announcement's), holding the
task's topic, none a byte copy of another, none overlapping the next in time; the newest
``bag_files`` of them, the newest as the validation split (later than every file trained on).

**What survives a restart** (:meth:`LifelongLoop.to_state`, the tuner's checkpoint): the pending
alarm, the last job's start and outcome, the jobs (the newest :data:`MAX_JOBS`); a restarted loop
is in ``cooldown`` until ``min_period_s`` after the last job started, so a crash loop never starts
a job per restart. Times are seconds of one clock, the caller's (the tuner's ROS clock; the
recorder stamps its files with its own ROS clock: on one machine, the same).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from enum import Enum
from typing import Any

from lifelong_learning.retraining.loop_files import FileFacts

#: seconds a promoted candidate may take to show as a trial on the learner before the loop takes
#: it that none began (swapped in at once with shadow off, or refused by the learner)
TRIAL_START_GRACE_S = 30.0
#: seconds without an answer from the learner after which no job starts (its trial is unknown)
LEARNER_SILENT_S = 10.0
#: closed files remembered (the newest; a job takes at most ``bag_files`` of them)
MAX_FILES = 10_000
#: jobs remembered, and kept in the checkpoint (the newest)
MAX_JOBS = 50
#: the checkpoint format of :meth:`LifelongLoop.to_state`
STATE_VERSION = 1


def _finite(value: Any, name: str) -> float:
    """``value`` as a finite float (ValueError: not one)."""
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(f"{name} must be finite, got {out}")
    return out


class Phase(str, Enum):
    """Where the loop is (see the module docstring)."""

    IDLE = "idle"
    DUE = "due"
    SAVING = "saving"
    TUNING = "tuning"
    IN_TRIAL = "in trial"
    COOLDOWN = "cooldown"


@dataclass(frozen=True)
class LoopSettings:
    """What starts a job and what it trains on (the tuner's ``retrain_*`` parameters)."""

    on_drift: bool = True
    after_bag_files: int = 0
    bag_files: int = 4
    min_period_s: float = 300.0

    def __post_init__(self) -> None:
        if not 0 <= int(self.after_bag_files) <= 100_000:
            raise ValueError(f"retrain_after_bag_files must be in [0, 100000], got {self.after_bag_files!r}")
        if not 2 <= int(self.bag_files) <= 1000:
            raise ValueError(
                f"retrain_bag_files must be in [2, 1000] (one validation file and at least one to "
                f"train on), got {self.bag_files!r}"
            )
        if not (math.isfinite(self.min_period_s) and 0 <= self.min_period_s <= 7 * 86400):
            raise ValueError(f"retrain_min_period_s must be in [0, 604800] s, got {self.min_period_s!r}")


# ---------------------------------------------------------------------- events
@dataclass(frozen=True)
class LearnerState:
    """What the learner answered about itself at ``at`` (its ``~/serving_state``).

    ``drift``: the alarm's text while raised (None: not raised); ``trial``: the model in a shadow or
    canary trial (None: none); ``version``: its serving model's version (a swap bumps it)."""

    at: float
    drift: str | None = None
    trial: str | None = None
    version: int = 0


@dataclass(frozen=True)
class Saved:
    """The serving model saved for the gate at ``path`` ('' = not saved: ``why``)."""

    path: str
    why: str = ""


@dataclass(frozen=True)
class JobEnded:
    """The job's goal ended: ``outcome`` in words; ``promoted``: the gate announced its candidate."""

    at: float
    outcome: str
    promoted: bool = False


@dataclass(frozen=True)
class Job:
    """A job the loop starts: why, the files it trains on, its validation split."""

    reason: str
    bags: tuple[str, ...]
    validation_bags: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "bags": list(self.bags), "validation_bags": list(self.validation_bags)}


# ---------------------------------------------------------------------- the loop
class LifelongLoop:
    """One learner's loop; see the module docstring.

    Feed it :meth:`learner` (every answer of the learner's state), :meth:`file` (every closed file
    that passed the checks), :meth:`saved` and :meth:`job_ended`; ask :meth:`next_job` whenever
    it may start one (it moves to ``saving`` when it returns a job).

    Args:
        settings: the ``retrain_*`` settings.
        topic: the bag topic the task reads ('' = any): files without it are skipped.
    """

    def __init__(self, settings: LoopSettings, topic: str = "") -> None:
        self.settings = settings
        self.topic = topic
        self.phase = Phase.IDLE
        self.files: list[FileFacts] = []  # usable files, by their first message's stamp
        self._paths: set[str] = set()
        self._digests: set[str] = set()
        self.files_closed = 0  # usable files taken
        self.files_skipped: dict[str, int] = {}  # why -> files not taken (no topic, a copy, overlap)
        self.learner_state: LearnerState | None = None
        self._alarm_version = 0  # the learner's model version when the alarm was raised
        self.pending: tuple[float, str] | None = None  # an alarm a job is due for: (since, text)
        self._retry = False  # the pending alarm is the one still raised after a job started
        self.on = True  # false while auto_retrain is off: an alarm raised then is not acted on
        self.running: Job | None = None
        self._promoted_at = -math.inf  # when the running job's candidate was announced
        self._trial_seen = False
        self.last_start = -math.inf
        self.jobs_started = 0
        self.last_outcome = "none"
        self.jobs: deque[dict[str, Any]] = deque(maxlen=MAX_JOBS)

    # ------------------------------------------------------------------ events
    def learner(self, state: LearnerState) -> None:
        """The learner's answer: its drift alarm (raised, cleared, answered by a swap) and trial."""
        before = self.learner_state
        if state.drift is not None and (before is None or before.drift is None):
            self._alarm_version = state.version
            if before is not None or self.pending is None:  # else: restored, the same alarm
                self.pending = (state.at, state.drift or "drift alarm") if self.on else None
                self._retry = False
        elif state.drift is None and before is not None and before.drift is not None:
            if self._retry or state.version != self._alarm_version:  # answered by a new model
                self.pending = None
        self.learner_state = state
        if self.phase == Phase.IN_TRIAL:
            if state.trial is not None:
                self._trial_seen = True
            elif self._trial_seen or state.at - self._promoted_at > TRIAL_START_GRACE_S:
                self.phase = Phase.COOLDOWN
        self._settle(state.at)

    def file(self, facts: FileFacts) -> bool:
        """A closed file that passed the checks: False when it was taken before (the recorder repeats
        its last announcements to a late joiner) or is skipped (counted in :attr:`files_skipped`)."""
        if facts.path in self._paths:
            return False
        self._paths.add(facts.path)
        why = ""
        if self.topic and self.topic not in facts.topics:
            why = "without the task's topic"
        elif facts.digest in self._digests:
            why = "a copy of another file"
        if why:
            self.files_skipped[why] = self.files_skipped.get(why, 0) + 1
            return False
        self._digests.add(facts.digest)
        self.files.append(facts)
        self.files.sort(key=lambda f: f.first)
        if len(self.files) > MAX_FILES:
            dropped = self.files.pop(0)
            self._paths.discard(dropped.path)
        self.files_closed += 1
        return True

    def saved(self, event: Saved) -> None:
        """The serving model saved (or not): the goal is sent next."""
        if self.phase == Phase.SAVING:
            self.phase = Phase.TUNING
            if self.jobs:
                self.jobs[-1]["serving_model"] = event.path

    def job_ended(self, event: JobEnded) -> None:
        """The goal ended; a promoted candidate puts the loop ``in trial`` until the learner's ends."""
        self.running = None
        self.last_outcome = event.outcome
        if self.jobs:
            self.jobs[-1]["outcome"] = event.outcome
        if event.promoted:
            self.phase, self._promoted_at, self._trial_seen = Phase.IN_TRIAL, event.at, False
        else:
            self.phase = Phase.COOLDOWN
        self._settle(event.at)

    def set_on(self, on: bool) -> None:
        """``auto_retrain`` switched: an alarm raised while off is never acted on."""
        self.on = bool(on)
        if not self.on:
            self.pending, self._retry = None, False

    # ------------------------------------------------------------------ decisions
    def _triggered(self) -> str:
        """The trigger pending now, in words ('' = none)."""
        s = self.settings
        if self.pending is not None and s.on_drift:
            return f"drift: {self.pending[1]}"
        since = len(self._usable(self.last_start))
        if s.after_bag_files and since >= s.after_bag_files:
            return f"{since} bag files closed since the last job"
        return ""

    def _settle(self, now: float) -> None:
        """``idle`` / ``due`` / ``cooldown`` from the pending triggers and the minimum period."""
        if self.phase in (Phase.SAVING, Phase.TUNING, Phase.IN_TRIAL):
            return
        if now - self.last_start < self.settings.min_period_s:
            self.phase = Phase.COOLDOWN
        else:
            self.phase = Phase.DUE if self._triggered() else Phase.IDLE

    def _usable(self, since: float) -> list[FileFacts]:
        """The files whose messages begin after ``since``, oldest first, each after the one before."""
        out: list[FileFacts] = []
        for f in self.files:
            if f.first > since and (not out or f.first > out[-1].last):
                out.append(f)
        return out

    def waiting(self, now: float) -> str:
        """Why no job starts now ('' when one may), in words."""
        s = self.settings
        if self.running is not None:
            return f"{self.phase.value}: a job runs ({self.running.reason})"
        if self.phase == Phase.IN_TRIAL:
            return "in trial: the candidate is judged on the learner's live data"
        if now - self.last_start < s.min_period_s:
            return f"{s.min_period_s - (now - self.last_start):.0f} s to the end of retrain_min_period_s"
        trigger = self._triggered()
        if not trigger:
            if s.after_bag_files:
                since = len(self._usable(self.last_start))
                return f"no drift; {since} of {s.after_bag_files} bag files closed since the last job"
            return (
                "no drift alarm"
                if s.on_drift
                else "no trigger on (retrain_on_drift false, retrain_after_bag_files 0)"
            )
        state = self.learner_state
        if state is None or now - state.at > LEARNER_SILENT_S:
            return "the learner does not answer ~/serving_state (its trial is unknown)"
        if state.trial is not None:
            return f"a model is in trial on the learner ({state.trial})"
        if self.pending is not None and s.on_drift:
            fresh = len(self._usable(self.pending[0]))
            if fresh < s.bag_files:
                return f"drift: {fresh} of {s.bag_files} bag files begun after the alarm"
            return ""
        return "" if len(self._usable(-math.inf)) >= 2 else "1 bag file: a job needs 2 (one to validate on)"

    def next_job(self, now: float) -> Job | None:
        """The job to start now, or None (:meth:`waiting` says why); a job returned has started."""
        self._settle(now)
        if not self.on or self.waiting(now):
            return None
        s = self.settings
        if self.pending is not None and s.on_drift:
            files, reason = self._usable(self.pending[0]), f"drift: {self.pending[1]}"
        else:
            files, reason = self._usable(-math.inf), self._triggered()
        files = files[-s.bag_files :]
        job = Job(reason, tuple(f.path for f in files[:-1]), (files[-1].path,))
        self._start(job, now)
        return job

    def _start(self, job: Job, now: float) -> None:
        self.running, self.phase = job, Phase.SAVING
        self.last_start = now
        self.jobs_started += 1
        self.jobs.append({**job.as_dict(), "started": now})
        # still raised: another job later, on files begun after this one started
        drift = self.learner_state.drift if self.learner_state is not None else None
        self.pending = (now, drift) if drift is not None else None
        self._retry = self.pending is not None

    # ------------------------------------------------------------------ the checkpoint
    def to_state(self) -> dict[str, Any]:
        """What a restarted loop continues from (JSON-ready)."""
        return {
            "version": STATE_VERSION,
            "pending": None if self.pending is None else {"since": self.pending[0], "text": self.pending[1]},
            "retry": self._retry,
            "last_start": None if math.isinf(self.last_start) else self.last_start,
            "jobs_started": self.jobs_started,
            "last_outcome": self.last_outcome,
            "jobs": list(self.jobs),
        }

    def restore(self, state: dict[str, Any], now: float) -> None:
        """Continue from :meth:`to_state`'s ``state`` (:meth:`read_state` reads it, then the loop
        takes it whole: a state that fails leaves the loop as it was).

        Raises:
            ValueError: not such a state (:meth:`read_state`).
        """
        self.take_state(self.read_state(state, now), now)

    @staticmethod
    def read_state(state: dict[str, Any], now: float) -> dict[str, Any]:
        """The fields of :meth:`to_state`'s ``state`` as the loop takes them, checked. A job that ran
        when the tuner stopped is over (its outcome unknown); a last start in the future (the clock
        went back) counts as now.

        Raises:
            ValueError: not such a state, a field of the wrong type or a time that is not finite.
        """
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ValueError(f"not a lifelong loop state of version {STATE_VERSION}")
        try:
            pending = state.get("pending")
            if pending is not None:
                pending = (_finite(pending["since"], "pending.since"), str(pending["text"]))
            last = state.get("last_start")
            out = {
                "pending": pending,
                "retry": bool(state.get("retry", False)) and pending is not None,
                "last_start": -math.inf if last is None else min(_finite(last, "last_start"), now),
                "jobs_started": int(state.get("jobs_started", 0)),
                "last_outcome": str(state.get("last_outcome", "none")),
                "jobs": [dict(j) for j in state.get("jobs", []) if isinstance(j, dict)][-MAX_JOBS:],
            }
        except (KeyError, TypeError, ValueError, OverflowError) as error:
            raise ValueError(f"not a readable lifelong loop state: {error!r}") from None
        if out["jobs_started"] < 0:
            raise ValueError(f"not a readable lifelong loop state: jobs_started {out['jobs_started']}")
        if out["jobs"] and "outcome" not in out["jobs"][-1]:
            out["jobs"][-1]["outcome"] = "unknown: the tuner stopped while it ran"
        return out

    def take_state(self, fields: dict[str, Any], now: float) -> None:
        """Continue, at ``now``, from the fields :meth:`read_state` read (nothing here can fail)."""
        self.pending, self._retry = fields["pending"], fields["retry"]
        self.last_start, self.jobs_started = fields["last_start"], fields["jobs_started"]
        self.last_outcome = fields["last_outcome"]
        self.jobs = deque(fields["jobs"], maxlen=MAX_JOBS)
        self.phase = Phase.IDLE
        self._settle(now)
