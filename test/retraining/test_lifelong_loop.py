"""The lifelong loop's rule (retraining/lifelong_loop.py): its phases, the triggers as the learner
reports them, the files a job takes (by their own message times), the limits, the checkpoint."""

from __future__ import annotations

import json

import pytest

from lifelong_learning.retraining.lifelong_loop import (
    MAX_JOBS,
    TRIAL_START_GRACE_S,
    JobEnded,
    LearnerState,
    LifelongLoop,
    LoopSettings,
    Phase,
    Saved,
)
from lifelong_learning.retraining.loop_files import FileFacts

TOPIC = "/joint_states"


def facts(second: float, name: str | None = None, digest: str | None = None, topic: str = TOPIC) -> FileFacts:
    """A file whose messages span [second, second + 0.9]."""
    name = name or f"b_{second:g}"
    return FileFacts(f"/bags/b/{name}.mcap", "/bags/b", second, second + 0.9, 90, frozenset({topic}),
                     digest or name)  # fmt: skip


def closed(loop: LifelongLoop, *seconds: float) -> None:
    for s in seconds:
        loop.file(facts(s))


def learner(loop: LifelongLoop, at: float, drift: str | None = None, trial: str | None = None, version=0):
    loop.learner(LearnerState(at, drift, trial, version))


def run(loop: LifelongLoop, now: float, promoted: bool = False, outcome: str = "done"):
    """Start the job due now and end it (saved, then the goal's result)."""
    job = loop.next_job(now)
    assert job is not None, loop.waiting(now)
    assert loop.phase == Phase.SAVING
    loop.saved(Saved("/models/serving.llm"))
    assert loop.phase == Phase.TUNING
    loop.job_ended(JobEnded(now + 1, outcome, promoted))
    return job


def test_no_trigger_no_job() -> None:
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=0), TOPIC)
    learner(loop, 0.0)
    closed(loop, 0, 1, 2)
    assert loop.next_job(3.0) is None and loop.phase == Phase.IDLE
    assert loop.waiting(3.0) == "no drift alarm"


def test_drift_takes_only_files_whose_messages_begin_after_the_alarm() -> None:
    loop = LifelongLoop(LoopSettings(bag_files=3, min_period_s=0), TOPIC)
    closed(loop, 0, 1)  # the robot before the change
    learner(loop, 2.5, "error 0.3 above 3 x 0.05")
    assert loop.phase == Phase.DUE
    closed(loop, 2)  # begun before the alarm, announced after it: not taken
    closed(loop, 3, 4)
    learner(loop, 4.5, "error 0.3 above 3 x 0.05")
    assert loop.next_job(4.5) is None
    assert "2 of 3" in loop.waiting(4.5)
    closed(loop, 5)
    job = loop.next_job(5.5)
    assert job is not None
    assert job.bags == ("/bags/b/b_3.mcap", "/bags/b/b_4.mcap")
    assert job.validation_bags == ("/bags/b/b_5.mcap",)  # the newest: the validation split
    assert job.reason.startswith("drift: error 0.3")


def test_a_copy_of_a_file_and_overlapping_files_are_never_trained_or_validated_on() -> None:
    """The validation split must be later than, and other data than, what is trained on."""
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=0), TOPIC)
    learner(loop, 0.5, "d")
    loop.file(facts(1, "b_1", digest="x"))
    assert not loop.file(facts(1, "copy", digest="x"))  # a byte copy under another name
    assert not loop.file(facts(9, "late_copy", digest="x"))  # ... also when it claims later times
    loop.file(facts(1.5, "overlap", digest="y"))  # begins inside b_1's range
    learner(loop, 3.0, "d")
    assert loop.next_job(3.0) is None and "1 of 2" in loop.waiting(3.0)
    assert loop.files_skipped == {"a copy of another file": 2}
    closed(loop, 4)
    job = loop.next_job(4.5)
    assert (
        job is not None and job.bags == ("/bags/b/b_1.mcap",) and job.validation_bags == ("/bags/b/b_4.mcap",)
    )


def test_an_alarm_that_clears_before_the_files_close_still_starts_its_job() -> None:
    """The online learner caught up within seconds; a model retrained on the robot as it is now
    may still be better (the shadow evaluation decides): the alarm stays pending until a job."""
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=0), TOPIC)
    learner(loop, 0.5, "d")
    closed(loop, 1)
    learner(loop, 1.5)
    assert "1 of 2" in loop.waiting(1.6)
    closed(loop, 2)
    learner(loop, 3.0)
    job = run(loop, 3.0)
    assert job.reason == "drift: d"
    closed(loop, 5, 6)
    learner(loop, 7.0)
    assert loop.next_job(7.0) is None and loop.waiting(7.0) == "no drift alarm"


def test_phases_through_a_promoted_job_its_trial_and_the_minimum_period() -> None:
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=100.0), TOPIC)
    learner(loop, 0.0, "d")
    closed(loop, 1, 2)
    learner(loop, 3.0, "d")
    job = loop.next_job(3.0)
    assert job is not None and loop.phase == Phase.SAVING
    assert loop.next_job(3.1) is None and loop.waiting(3.1).startswith("saving: a job runs")
    loop.saved(Saved(""))
    assert loop.phase == Phase.TUNING and loop.jobs[-1]["serving_model"] == ""
    loop.job_ended(JobEnded(10.0, "promoted: 0.1 against 0.3", promoted=True))
    assert loop.phase == Phase.IN_TRIAL and loop.last_outcome.startswith("promoted")
    learner(loop, 11.0, "d", trial="shadow of cand.npz")
    assert loop.phase == Phase.IN_TRIAL and "in trial" in loop.waiting(11.0)
    learner(loop, 20.0, None, version=1)  # the trial ended, the candidate swapped in
    assert loop.phase == Phase.COOLDOWN and "retrain_min_period_s" in loop.waiting(20.0)
    learner(loop, 50.0, "again", version=1)
    closed(loop, 60, 61, 62)
    assert loop.next_job(70.0) is None and "retrain_min_period_s" in loop.waiting(70.0)
    learner(loop, 104.0, "again", version=1)
    assert loop.phase == Phase.DUE
    again = loop.next_job(104.0)
    assert again is not None and again.validation_bags == ("/bags/b/b_62.mcap",)


def test_a_promoted_candidate_that_never_shows_as_a_trial_ends_the_trial_phase_after_the_grace() -> None:
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=0), TOPIC)
    learner(loop, 0.0, "d")
    closed(loop, 1, 2)
    learner(loop, 3.0, "d")
    run(loop, 3.0, promoted=True)
    learner(loop, 4.0 + TRIAL_START_GRACE_S - 1)
    assert loop.phase == Phase.IN_TRIAL
    learner(loop, 4.0 + TRIAL_START_GRACE_S + 1)
    assert loop.phase != Phase.IN_TRIAL


def test_the_alarm_still_raised_after_a_job_retries_once_per_period_on_newer_files() -> None:
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=100.0), TOPIC)
    learner(loop, 0.0, "d")
    closed(loop, 1, 2)
    learner(loop, 3.0, "d")
    run(loop, 3.0, outcome="not promoted: the serving model is better")
    closed(loop, 3.5, 4.5)  # begun after the job started
    learner(loop, 103.5, "d")
    again = run(loop, 103.5)
    assert again.bags + again.validation_bags == ("/bags/b/b_3.5.mcap", "/bags/b/b_4.5.mcap")
    learner(loop, 104.0)  # cleared: the retry is dropped
    closed(loop, 200, 201, 202)
    assert loop.next_job(1000.0) is None


def test_no_job_while_a_model_is_in_trial_or_while_the_learner_does_not_answer() -> None:
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=0), TOPIC)
    learner(loop, 0.0, "d", trial="shadow of cand.npz")
    closed(loop, 1, 2)
    learner(loop, 3.0, "d", trial="shadow of cand.npz")
    assert loop.next_job(3.0) is None and "in trial on the learner (shadow of cand.npz)" in loop.waiting(3.0)
    learner(loop, 4.0, "d")
    assert loop.next_job(4.0 + 30.0) is None and "does not answer" in loop.waiting(34.0)
    assert loop.next_job(4.5) is not None


def test_count_trigger_and_repeated_announcements() -> None:
    loop = LifelongLoop(LoopSettings(on_drift=False, after_bag_files=3, bag_files=2, min_period_s=0), TOPIC)
    learner(loop, 0.0)
    closed(loop, 0, 1)
    assert not loop.file(facts(1))  # announced again (a late joiner gets the recorder's last files again)
    assert loop.files_closed == 2 and loop.next_job(1.5) is None
    assert "2 of 3" in loop.waiting(1.5)
    closed(loop, 2)
    learner(loop, 2.5)
    job = run(loop, 2.5)
    assert job.bags == ("/bags/b/b_1.mcap",) and job.validation_bags == ("/bags/b/b_2.mcap",)
    learner(loop, 2.6, "ignored: retrain_on_drift is false")
    closed(loop, 3, 4)
    assert loop.next_job(4.5) is None


@pytest.mark.parametrize(
    "kwargs",
    [{"bag_files": 1}, {"bag_files": 1001}, {"after_bag_files": -1}, {"min_period_s": float("nan")},
     {"min_period_s": -1.0}],
)  # fmt: skip
def test_settings_out_of_range_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        LoopSettings(**kwargs)


def test_alarms_while_off_or_answered_by_a_swap_start_nothing_and_files_without_the_topic_are_skipped() -> (
    None
):
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=0), TOPIC)
    loop.set_on(False)
    learner(loop, 0.5, "raised while auto_retrain was off")
    loop.set_on(True)
    closed(loop, 1, 2)
    learner(loop, 2.5, "raised while auto_retrain was off")
    assert loop.next_job(2.5) is None and loop.waiting(2.5) == "no drift alarm"
    learner(loop, 3.0)
    learner(loop, 3.5, "d")
    learner(loop, 3.6, version=1)  # a new serving model: the alarm is answered
    closed(loop, 4, 5)
    assert loop.next_job(5.5) is None
    learner(loop, 5.6, "d2", version=1)
    loop.file(facts(6, "idle", topic="/other"))  # no joint states in it
    closed(loop, 7)
    learner(loop, 7.5, "d2", version=1)
    assert loop.next_job(7.5) is None and "1 of 2" in loop.waiting(7.5)
    closed(loop, 8)
    job = loop.next_job(8.5)
    assert (
        job is not None and job.bags == ("/bags/b/b_7.mcap",) and job.validation_bags == ("/bags/b/b_8.mcap",)
    )


def test_the_state_survives_a_restart_and_a_restarted_loop_starts_no_job_at_once() -> None:
    settings = LoopSettings(bag_files=2, min_period_s=300.0)
    loop = LifelongLoop(settings, TOPIC)
    learner(loop, 0.0, "d")
    closed(loop, 1, 2)
    learner(loop, 3.0, "d")
    loop.next_job(3.0)  # the tuner stops while the job runs
    state = json.loads(json.dumps(loop.to_state()))

    restarted = LifelongLoop(settings, TOPIC)
    restarted.restore(state, now=10.0)
    assert restarted.pending == (3.0, "d") and restarted.jobs_started == 1
    assert restarted.jobs[-1]["outcome"].startswith("unknown")
    closed(restarted, 4, 5)
    learner(restarted, 10.0, "d")
    assert restarted.phase == Phase.COOLDOWN and restarted.next_job(10.0) is None
    learner(restarted, 304.0, "d")
    assert restarted.next_job(304.0) is not None  # the period from the job before the restart

    later = LifelongLoop(settings, TOPIC)  # a clock that went back: the last start counts as now
    later.restore(state, now=1.0)
    assert later.last_start == 1.0
    with pytest.raises(ValueError):
        later.restore({"version": 99}, now=1.0)


@pytest.mark.parametrize(
    "broken",
    [
        {"pending": {"since": float("nan"), "text": "d"}},
        {"pending": {"text": "d"}},
        {"last_start": "soon"},
        {"last_start": float("inf")},
        {"jobs_started": -1},
        {"jobs_started": [1]},
    ],
)
def test_a_state_that_fails_halfway_leaves_the_loop_as_it_was(broken: dict) -> None:
    settings = LoopSettings(bag_files=2, min_period_s=300.0)
    loop = LifelongLoop(settings, TOPIC)
    learner(loop, 0.0, "d")
    closed(loop, 1, 2)
    learner(loop, 3.0, "d")
    loop.next_job(3.0)
    good = json.loads(json.dumps(loop.to_state()))

    other = LifelongLoop(settings, TOPIC)
    learner(other, 0.0, "e")
    before = json.dumps(other.to_state())
    with pytest.raises(ValueError, match="lifelong loop state"):
        other.restore({**good, "jobs": [{"reason": "x"}], **broken}, now=10.0)
    assert json.dumps(other.to_state()) == before


def test_the_jobs_remembered_are_bounded() -> None:
    loop = LifelongLoop(LoopSettings(on_drift=False, after_bag_files=1, bag_files=2, min_period_s=0), TOPIC)
    for k in range(MAX_JOBS + 5):
        closed(loop, 2 * k, 2 * k + 1)
        learner(loop, 2 * k + 1.95)
        run(loop, 2 * k + 1.95)
    assert len(loop.jobs) == MAX_JOBS and loop.jobs_started == MAX_JOBS + 5
    assert len(loop.to_state()["jobs"]) == MAX_JOBS
