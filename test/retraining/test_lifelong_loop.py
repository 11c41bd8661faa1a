"""The lifelong loop's rule (retraining/lifelong_loop.py): triggers, the files a job takes, limits."""

from __future__ import annotations

import pytest

from lifelong_learning.retraining.lifelong_loop import TRIAL_GRACE_S, LifelongLoop, LoopSettings


def closed(loop: LifelongLoop, *names: str) -> None:
    """Files closed, each at the second its number says (``b_3``: at 3 s)."""
    for name in names:
        loop.file_closed(f"/bags/b/{name}.mcap", float(name.split("_")[1]))


def test_no_trigger_no_job() -> None:
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=0))
    closed(loop, "b_0", "b_1", "b_2")
    assert loop.next_job(3.0) is None
    assert loop.waiting(3.0) == "no drift alarm"


def test_drift_takes_only_files_closed_after_the_alarm() -> None:
    loop = LifelongLoop(LoopSettings(bag_files=3, min_period_s=0))
    closed(loop, "b_0", "b_1")  # the robot before the change
    loop.drift(True, 2.5, "error 0.3 above 3 x 0.05")
    closed(loop, "b_2")  # closed before the alarm, announced after it: not taken
    closed(loop, "b_3", "b_4")
    assert loop.next_job(4.5) is None
    assert "2 of 3" in loop.waiting(4.5)
    closed(loop, "b_5")
    job = loop.next_job(5.5)
    assert job is not None
    assert job.bags == ("/bags/b/b_3.mcap", "/bags/b/b_4.mcap")
    assert job.validation_bags == ("/bags/b/b_5.mcap",)  # the newest: the validation split
    assert job.reason.startswith("drift: error 0.3")


def test_an_alarm_that_clears_before_the_files_close_still_starts_its_job() -> None:
    """The online learner caught up within seconds; a model retrained on the robot as it is now
    may still be better (the shadow evaluation decides): the alarm stays pending until a job."""
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=0))
    loop.drift(True, 0.5, "d")
    closed(loop, "b_1")
    loop.drift(False, 1.5)
    assert "1 of 2" in loop.waiting(1.6)
    closed(loop, "b_2")
    job = loop.next_job(2.5)
    assert job is not None and job.reason == "drift: d"
    loop.job_started(job, 2.5)
    loop.job_ended("promoted")
    closed(loop, "b_3", "b_4")
    assert loop.next_job(5.0) is None and loop.waiting(5.0) == "no drift alarm"


def test_one_job_at_a_time_and_the_minimum_period() -> None:
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=100.0))
    loop.drift(True, 0.0, "d")
    closed(loop, "b_1", "b_2")
    job = loop.next_job(2.5)
    assert job is not None
    loop.job_started(job, 2.5)
    closed(loop, "b_3", "b_4")
    assert loop.next_job(5.0) is None and loop.waiting(5.0).startswith("a job runs")
    loop.job_ended("not promoted: the serving model is better")
    # the alarm is still raised: once the period is over, another job on files closed after the first
    assert loop.next_job(50.0) is None and "retrain_min_period_s" in loop.waiting(50.0)
    again = loop.next_job(102.5)
    assert again is not None
    assert again.bags + again.validation_bags == ("/bags/b/b_3.mcap", "/bags/b/b_4.mcap")
    loop.job_started(again, 102.5)
    loop.job_ended("promoted")
    loop.drift(False, 103.0)
    closed(loop, "b_200", "b_201", "b_202")
    assert loop.next_job(1000.0) is None  # no alarm any more, no count trigger


def test_no_job_while_a_model_is_in_trial() -> None:
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=0))
    loop.drift(True, 0.0, "d")
    closed(loop, "b_1", "b_2")
    loop.trial_event({"role": "shadow", "outcome": "started", "model": "cand.npz", "window_s": 10.0}, 2.0)
    assert loop.next_job(3.0) is None and "shadow trial" in loop.waiting(3.0)
    loop.trial_event({"role": "shadow", "outcome": "dropped"}, 12.0)
    assert loop.next_job(12.0) is not None
    # a trial whose verdict never comes (the learner restarted) is over after 2 windows + grace
    loop.trial_event({"role": "canary", "outcome": "started", "window_s": 5.0}, 20.0)
    assert loop.next_job(20.0 + 10.0 + TRIAL_GRACE_S - 1) is None
    assert loop.next_job(20.0 + 10.0 + TRIAL_GRACE_S + 1) is not None


def test_count_trigger_and_repeated_announcements() -> None:
    loop = LifelongLoop(LoopSettings(on_drift=False, after_bag_files=3, bag_files=2, min_period_s=0))
    closed(loop, "b_0", "b_1")
    closed(loop, "b_1")  # announced again (a late joiner gets the recorder's last files again)
    assert loop.files_closed == 2 and loop.next_job(1.5) is None
    assert "2 of 3" in loop.waiting(1.5)
    closed(loop, "b_2")
    job = loop.next_job(2.5)
    assert job is not None
    assert job.bags == ("/bags/b/b_1.mcap",) and job.validation_bags == ("/bags/b/b_2.mcap",)
    loop.job_started(job, 2.5)
    loop.job_ended("promoted")
    loop.drift(True, 2.6, "ignored: retrain_on_drift is false")
    closed(loop, "b_3", "b_4")
    assert loop.next_job(4.5) is None


@pytest.mark.parametrize(
    "kwargs",
    [{"bag_files": 1}, {"bag_files": 1001}, {"after_bag_files": -1}, {"min_period_s": float("nan")},
     {"min_period_s": -1.0}],
)  # fmt: skip
def test_settings_out_of_range_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        LoopSettings(**kwargs)


def test_alarms_while_off_or_answered_by_a_swap_start_nothing_and_empty_files_are_skipped() -> None:
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=0))
    loop.drift(True, 0.5, "raised while auto_retrain was off", act=False)
    closed(loop, "b_1", "b_2")
    assert loop.next_job(2.5) is None and loop.waiting(2.5) == "no drift alarm"
    loop.drift(False, 3.0)
    loop.drift(True, 3.5, "d")
    loop.drift(False, 3.6, by_swap=True)  # a new serving model: the alarm is answered
    closed(loop, "b_4", "b_5")
    assert loop.next_job(5.5) is None
    loop.drift(True, 5.6, "d2")
    loop.file_closed("/bags/b/idle.mcap", 6.0, usable=False)  # no joint states in it
    closed(loop, "b_7")
    assert loop.next_job(7.5) is None and "1 of 2" in loop.waiting(7.5) and loop.files_skipped == 1
    closed(loop, "b_8")
    job = loop.next_job(8.5)
    assert (
        job is not None and job.bags == ("/bags/b/b_7.mcap",) and job.validation_bags == ("/bags/b/b_8.mcap",)
    )


@pytest.mark.parametrize("window", ["ten", None, -5.0, float("inf"), [1]])
def test_a_trial_event_with_a_window_that_is_no_number_waits_the_grace_alone(window) -> None:
    loop = LifelongLoop(LoopSettings(bag_files=2, min_period_s=0))
    loop.drift(True, 0.0, "d")
    closed(loop, "b_1", "b_2")
    loop.trial_event({"role": "shadow", "outcome": "started", "window_s": window}, 3.0)
    assert loop.next_job(3.0 + TRIAL_GRACE_S - 1) is None
    assert loop.next_job(3.0 + TRIAL_GRACE_S + 1) is not None
