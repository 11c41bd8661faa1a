"""The lifelong loop's rule: when the tuner retrains a learner by itself, and from which bags.

Thesis ch. 8 learns inverse dynamics online; a learner's model also drifts away from the robot
(a payload grasped, wear, a new tool), which its drift alarm sees
(:class:`~lifelong_learning.serving.shadow.DriftAlarm`: the live prequential error above
``drift_factor`` × its level at the last swap for ``drift_window_s``). The loop closes the circle
without a person: a retraining job from the robot's recent bags, judged by the tuner's promotion
gate (:mod:`~lifelong_learning.retraining.promotion`) and then by the learner's shadow evaluation
on the live stream (:mod:`~lifelong_learning.serving.shadow`). This module is the rule alone, ROS-free
(the ``nystrom_tuner``'s adapter: :mod:`lifelong_learning.nodes.lifelong_loop`):

- **triggers**: a drift alarm (with ``on_drift``), or ``after_bag_files`` files closed since the
  last job started (0: never on a count). An alarm is an event: it stays pending until a job
  starts, also when it clears meanwhile (an online learner often catches up within seconds; a
  model retrained on the robot as it is now may still be better, and the shadow evaluation
  decides), unless a new serving model clears it (a swap: the alarm is answered) or it was raised
  while the loop was off. While the alarm stays raised after a job started, another job follows,
  once per ``min_period_s``; that retry is dropped when the alarm clears. Files that hold nothing
  of the task's topic (the robot was idle, the recorder records other topics too) are not used;
- **data**: the newest ``bag_files`` closed storage files, and on drift only files closed after
  the alarm (and after the last job started): the robot as it is now, not as it was. "After" is by
  the files' closing time (the recorder's stamp) against the time the alarm arrived, not by the
  order the two messages arrived in (they come on different topics). The newest of them is the
  validation split (the gate scores the candidate and the serving model on it; the candidate never
  trains on it), the others are trained on;
- **limits**: one job at a time; at least ``min_period_s`` between two job starts; no job while a
  model is in a trial on the learner (a candidate in shadow, a replaced model in canary), as its
  ``~/shadow`` events say (a trial with no verdict after twice its window and
  :data:`TRIAL_GRACE_S` is taken as over: the learner restarted).

Times are seconds of one clock, given by the caller: the node's ROS clock, which stamps the
recorder's files too (system time, or ``/clock`` with ``use_sim_time``).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

#: seconds beyond twice its window after which a trial without a verdict is taken as over
TRIAL_GRACE_S = 60.0
#: closed files remembered (the newest; a job takes at most ``bag_files`` of them)
MAX_FILES = 10_000


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


@dataclass(frozen=True)
class Job:
    """A job the loop starts: why, the files it trains on, its validation split."""

    reason: str
    bags: tuple[str, ...]
    validation_bags: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "bags": list(self.bags), "validation_bags": list(self.validation_bags)}


class LifelongLoop:
    """The loop's state: closed files, the drift alarm, the learner's trial, the running job.

    Feed it the events (:meth:`file_closed`, :meth:`drift`, :meth:`trial_event`); ask
    :meth:`next_job` when a job may start; tell it :meth:`job_started` and :meth:`job_ended`.
    :meth:`waiting` says in words why no job starts now.
    """

    def __init__(self, settings: LoopSettings) -> None:
        self.settings = settings
        self.files: deque[tuple[float, str]] = deque(maxlen=MAX_FILES)  # (closed at, path), in order
        self._seen: set[str] = set()
        self.files_closed = 0  # counted since the start
        self.files_skipped = 0  # closed files without the task's topic
        self.drift_text: str | None = None  # the alarm's text while it is raised
        self._alarm: tuple[float, str] | None = None  # a pending alarm (time, text): a job is due
        self._retry = False  # the pending alarm is the one still raised after a job started
        self._job_since = -math.inf  # the last job's start
        self.trial: dict[str, Any] | None = None  # the learner's running trial: its "started" event
        self._trial_deadline = math.inf
        self.running: Job | None = None
        self.last_start = -math.inf
        self.jobs_started = 0
        self.last_outcome = "none"

    # ------------------------------------------------------------------ events
    def file_closed(self, path: str, closed_at: float, usable: bool = True) -> bool:
        """A storage file closed at ``closed_at``; False when it was announced before (transient
        local repeats them to a late joiner) or is not ``usable`` (it holds nothing of the task's
        topic: counted in ``files_skipped``, never named in a goal)."""
        if not path or path in self._seen:
            return False
        if not usable:
            self.files_skipped += 1
            self._seen.add(path)
            return False
        if len(self._seen) >= MAX_FILES:
            self._seen = {p for _, p in self.files}
        self._seen.add(path)
        self.files.append((float(closed_at), path))
        self.files_closed += 1
        return True

    def drift(
        self, raised: bool, now: float, text: str = "", act: bool = True, by_swap: bool = False
    ) -> None:
        """The learner's drift alarm raised (``text``: its figures) or cleared, at ``now``.

        ``act``: false while the loop is off (an alarm raised then is not acted on later);
        ``by_swap``: cleared because a new model serves (the pending alarm is answered)."""
        text = text or "drift alarm"
        if raised and self.drift_text is None:
            self._alarm, self._retry = ((now, text) if act else None), False
        if not raised and (self._retry or by_swap):
            self._alarm = None
        self.drift_text = text if raised else None

    def trial_event(self, event: dict[str, Any], now: float) -> None:
        """One of the learner's ``~/shadow`` events: ``started`` begins a trial, any other ends it."""
        if event.get("outcome") == "started":
            self.trial = event
            try:  # a window that is no finite number, or negative: the grace alone
                window = float(event.get("window_s") or 0.0)
            except (TypeError, ValueError):
                window = 0.0
            window = min(window, 86400.0) if math.isfinite(window) and window > 0 else 0.0
            self._trial_deadline = now + 2 * window + TRIAL_GRACE_S
        else:
            self.trial, self._trial_deadline = None, math.inf

    def job_started(self, job: Job, now: float) -> None:
        self.running = job
        self.last_start = now
        self.jobs_started += 1
        self._job_since = now
        # still raised: another job later, on files closed after this one started
        self._alarm = (now, self.drift_text) if self.drift_text is not None else None
        self._retry = self._alarm is not None

    def job_ended(self, outcome: str) -> None:
        self.running = None
        self.last_outcome = outcome

    # ------------------------------------------------------------------ decisions
    def _trial_running(self, now: float) -> bool:
        if self.trial is not None and now > self._trial_deadline:
            self.trial, self._trial_deadline = None, math.inf  # no verdict ever came: over
        return self.trial is not None

    def _closed_after(self, since: float) -> list[str]:
        """The files closed after ``since``, oldest first."""
        return [path for closed_at, path in self.files if closed_at > since]

    def waiting(self, now: float) -> str:
        """Why no job starts now ('' when one may): the running job, else the missing trigger,
        else the limit that holds it back, else the files still to close."""
        s = self.settings
        if self.running is not None:
            return f"a job runs ({self.running.reason})"
        drift = self._alarm is not None and s.on_drift
        since_job = len(self._closed_after(self._job_since))
        counted = bool(s.after_bag_files) and since_job >= s.after_bag_files
        if not drift and not counted:
            if s.after_bag_files:
                return f"no drift; {since_job} of {s.after_bag_files} bag files closed since the last job"
            return (
                "no drift alarm"
                if s.on_drift
                else "no trigger on (retrain_on_drift false, retrain_after_bag_files 0)"
            )
        if self._trial_running(now):
            trial = self.trial or {}
            return f"a model is in {trial.get('role', 'a')} trial on the learner ({trial.get('model', '')})"
        if now - self.last_start < s.min_period_s:
            return f"{s.min_period_s - (now - self.last_start):.0f} s to the end of retrain_min_period_s"
        if drift:
            fresh = len(self._closed_after(self._alarm[0] if self._alarm else math.inf))
            return (
                ""
                if fresh >= s.bag_files
                else f"drift: {fresh} of {s.bag_files} bag files closed since the alarm"
            )
        return "" if len(self.files) >= 2 else "1 bag file closed: a job needs 2 (one to validate on)"

    def next_job(self, now: float) -> Job | None:
        """The job to start now, or None (:meth:`waiting` says why)."""
        if self.waiting(now):
            return None
        s = self.settings
        if self._alarm is not None and s.on_drift:
            files, reason = self._closed_after(self._alarm[0]), f"drift: {self._alarm[1]}"
        else:
            files = [path for _, path in self.files]
            reason = f"{len(self._closed_after(self._job_since))} bag files closed since the last job"
        files = files[-s.bag_files :]
        return Job(reason, tuple(files[:-1]), tuple(files[-1:]))
