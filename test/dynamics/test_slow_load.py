"""A load that builds up too slowly for the contact thresholds, seen against a frozen reference (no
ROS): a reference is tried before it is armed; a ramp is held from where its median crosses the
threshold and released when it is gone; what the reference's data does not cover is not judged;
references are renewed on a schedule that doubles, and only while quiet."""

import numpy as np
import pytest

from lifelong_learning.dynamics.slow_load import (
    ARMED,
    COVERAGE,
    HOLDING,
    NO_REFERENCE,
    OFFSET,
    ON_TRIAL,
    ONSET,
    SlowLoadDetector,
    SlowLoadSettings,
)

RATE = 50.0  # judged samples per second
N = 7


def stream(t0, seconds, seed=0, noise=0.05):
    rng = np.random.default_rng(seed)
    t = t0 + np.arange(round(seconds * RATE)) / RATE
    return t, rng.normal(0.0, noise, (t.size, N))


def feed(det, t, r, leverage=None, block=5, renew=False):
    """Feed in blocks as the node does (with ``renew``, taking the references renewed while quiet);
    every event."""
    events = []
    for i in range(0, t.size, block):
        lev = None if leverage is None else leverage[i : i + block]
        events += det.update(t[i : i + block], r[i : i + block], lev)
        if renew and det.wants_reference == "refresh":  # the leverage of the block learned last
            det.reference_taken(t[min(i + block, t.size) - 1], lev)
    return events


def armed(settings=None):
    det = SlowLoadDetector(N, settings or SlowLoadSettings())
    assert det.state == NO_REFERENCE and det.wants_reference == "first"
    det.reference_taken(0.0, None)
    assert det.state == ON_TRIAL and det.wants_reference is None
    t, r = stream(0.0, 5.0)
    assert feed(det, t, r, renew=True) == [] and det.state == ARMED and det.wants_reference is None
    return det, t[-1]


def test_nothing_is_judged_without_a_reference():
    det = SlowLoadDetector(N)
    t, r = stream(0.0, 5.0)
    r[:, 1] += 5.0
    assert feed(det, t, r) == [] and not det.holding and det.wants_reference == "first"


def test_a_reference_that_does_not_predict_its_next_seconds_is_taken_again():
    det = SlowLoadDetector(N)
    det.reference_taken(0.0, None)
    t, r = stream(0.0, 2.0)
    r[:, 6] += 0.4  # beyond the threshold (0.3): the model was still learning
    feed(det, t, r)
    assert det.wants_reference == "retake" and det.retakes >= 1 and det.state == ON_TRIAL
    det.reference_taken(t[-1], None)
    t, r = stream(t[-1], 5.0, seed=1)
    assert feed(det, t, r) == [] and det.state == ARMED and not det.holding


def test_a_reference_on_trial_that_covers_nothing_is_taken_again():
    det = SlowLoadDetector(N)
    det.reference_taken(0.0, np.full(5, 0.01))
    t, r = stream(0.0, 5.0)
    feed(det, t, r, np.full(t.size, 1.0))  # a young model: its data covers nothing yet
    assert det.wants_reference == "blind" and det.state == ON_TRIAL


def test_a_ramp_is_held_where_its_median_crosses_the_threshold_and_released_when_gone():
    det, t_end = armed()
    t, r = stream(t_end + 1 / RATE, 20.0, seed=2)
    ramp = 0.05 * (t - t[0])  # N m: a person leaning on joint 2
    r[:, 1] += ramp
    events = feed(det, t, r)
    assert [e.kind for e in events] == [ONSET] and det.state == HOLDING
    onset = events[0]
    assert onset.joints == (1,) and onset.load[1] > 0.3 and onset.threshold[1] == pytest.approx(0.3)
    # the median of the last 2 s lags the ramp by about 1 s: held before the load reached 0.45 N m
    assert ramp[np.searchsorted(t, onset.t)] < 0.45
    assert det.held_since == onset.t
    # the load goes away: released once the window's median is below release x threshold
    t2, r2 = stream(t[-1] + 1 / RATE, 4.0, seed=3)
    events = feed(det, t2, r2)
    assert [e.kind for e in events] == [OFFSET] and det.state == ARMED and det.held_since is None
    assert events[0].t - t2[0] <= 2.0
    assert "slow load ended" in events[0].describe([f"j{i}" for i in range(N)])


def test_a_wide_residual_raises_the_threshold():
    det, t_end = armed()
    t, r = stream(t_end + 1 / RATE, 6.0, seed=4, noise=1.0)
    r[:, 0] += 0.5  # half its spread: not told from the reference's errors
    assert feed(det, t, r) == [] and not det.holding
    assert det.threshold[0] > 0.8


def test_samples_the_reference_does_not_cover_are_not_judged():
    det = SlowLoadDetector(N)
    det.reference_taken(0.0, np.full(20, 0.01))  # leverage of what the model learned last
    t, r = stream(0.0, 5.0)
    feed(det, t, r, np.full(t.size, 0.01))
    assert det.state == ARMED
    t, r = stream(t[-1] + 1 / RATE, 10.0, seed=5)
    r[:, 3] += 2.0  # a region the reference never saw: its prior is 2 N m off
    assert feed(det, t, r, np.full(t.size, 0.011 * COVERAGE)) == [] and not det.holding
    # the same residuals where the reference is sure: a load
    t, r = stream(t[-1] + 1 / RATE, 4.0, seed=6)
    r[:, 3] += 2.0
    assert [e.kind for e in feed(det, t, r, np.full(t.size, 0.01))] == [ONSET]


def test_a_reference_that_judges_nothing_for_reference_s_is_replaced():
    det = SlowLoadDetector(N, SlowLoadSettings(reference_s=10.0))
    det.reference_taken(0.0, np.full(5, 0.01))
    t, r = stream(0.0, 5.0)
    feed(det, t, r, np.full(t.size, 0.01), renew=True)
    assert det.state == ARMED
    t, r = stream(t[-1] + 1 / RATE, 12.0)
    feed(det, t, r, np.full(t.size, 1.0))
    assert det.wants_reference == "blind"
    det.reference_taken(t[-1], None)
    assert det.state == ON_TRIAL


def test_a_hold_ends_where_the_reference_covers_nothing():
    det = SlowLoadDetector(N)
    det.reference_taken(0.0, np.full(5, 0.01))
    t, r = stream(0.0, 5.0)
    feed(det, t, r, np.full(t.size, 0.01))
    t, r = stream(t[-1] + 1 / RATE, 4.0, seed=7)
    r[:, 1] += 1.0
    feed(det, t, r, np.full(t.size, 0.01))
    assert det.holding
    t, r = stream(t[-1] + 1 / RATE, 4.0, seed=8)  # the load gone, the arm where the reference never was
    assert [e.kind for e in feed(det, t, r, np.full(t.size, 1.0))] == [OFFSET]


def test_references_are_renewed_while_quiet_sooner_while_the_model_is_young():
    det = SlowLoadDetector(N, SlowLoadSettings(reference_s=20.0))
    det.reference_taken(0.0, None)
    taken = [0.0]
    t, r = stream(0.0, 80.0, seed=9)
    for i in range(0, t.size, 5):
        det.update(t[i : i + 5], r[i : i + 5])
        if det.wants_reference == "refresh":
            det.reference_taken(t[i + 4], None)
            assert det.state == ARMED
            taken.append(t[i + 4])
    gaps = np.diff(taken)
    # (a little later than due: a new reference needs a window's statistic before it is judged quiet)
    assert gaps[:4] == pytest.approx([4.0, 4.0, 8.0, 16.0], rel=0.1)
    assert np.all(gaps[4:] == pytest.approx(20.0, abs=0.5)) and gaps[4:].size >= 2


def test_no_reference_is_renewed_during_a_load():
    det, t_end = armed(SlowLoadSettings(reference_s=5.0))
    t, r = stream(t_end + 1 / RATE, 20.0, seed=10)
    r[:, 2] += 0.2  # above release x threshold (0.15), below the threshold: not quiet, not held
    feed(det, t, r)
    assert det.wants_reference is None and not det.holding


def test_stamps_going_back_start_the_window_anew():
    det, t_end = armed()
    t, r = stream(t_end + 1 / RATE, 1.5, seed=11)
    r[:, 1] += 2.0
    feed(det, t, r)  # 1.5 s: a median over more than half the window, held
    assert det.holding
    t, r = stream(0.0, 0.5, seed=12)  # a simulator reset: too few samples for a statistic yet
    assert feed(det, t, r) == [] and det.holding


@pytest.mark.parametrize(
    "settings, message",
    [
        (SlowLoadSettings(min_torque=-1.0), "contact_slow_torque"),
        (SlowLoadSettings(window_s=0.0), "contact_slow_window_s"),
        (SlowLoadSettings(release=0.0), "contact_release"),
        (SlowLoadSettings(reference_s=1.0), "contact_reference_s"),
    ],
)
def test_settings_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        SlowLoadDetector(N, settings)
    assert not SlowLoadSettings(min_torque=0.0).enabled
