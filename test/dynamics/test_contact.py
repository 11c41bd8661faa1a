"""Contact detection on τ_ext (no ROS): thresholds from free motion only, hysteresis, minimum
duration, hold, contacts that never end, refused settings."""

import numpy as np
import pytest

from lifelong_learning.dynamics.contact import (
    OFFSET,
    ONSET,
    TOO_LONG,
    WARMUP_S,
    ContactDetector,
    ContactSettings,
)

RATE = 1000.0
SIGMA = np.array([0.3, 0.5, 0.2, 0.4, 0.05, 0.05, 0.02])  # per-joint free-motion residual scale [N m]


def free_motion(n, seed=0, t0=0.0):
    rng = np.random.default_rng(seed)
    return t0 + np.arange(n) / RATE, rng.normal(0.0, SIGMA, (n, SIGMA.size))


def warmed(settings=None, n=2000, seed=0):
    det = ContactDetector(SIGMA.size, settings or ContactSettings(min_torque=0.1))
    t, e = free_motion(n, seed)
    block = det.update_block(t, e)
    return det, t[-1], block


def test_free_motion_raises_no_contact_and_everything_is_learned():
    det, _, block = warmed(n=30000)
    assert not block.contact.any() and block.learn.all() and not block.events
    assert det.contacts == 0
    # the scale is the noise's (MAD of a Gaussian × 1.4826)
    assert det.scale == pytest.approx(SIGMA, rel=0.15)  # 1000 residuals: ±5 % a standard deviation


def test_nothing_is_a_contact_during_warm_up():
    det = ContactDetector(SIGMA.size, ContactSettings(min_torque=0.1))
    n = round(WARMUP_S * RATE)  # a second of a 1 kHz stream: more than WARMUP_SAMPLES, too short
    _, e = free_motion(n)
    e[n // 2 :, 1] += 50.0
    block = det.update_block(np.arange(n) / RATE, e)
    assert not block.contact.any() and block.learn.all() and det.threshold is None
    det.update(1.0, e[0])  # a second of stamps: the thresholds are taken
    assert det.threshold is not None


def test_a_step_is_flagged_after_the_minimum_duration_not_learned_then_released_after_hold():
    settings = ContactSettings(min_torque=0.1, min_duration_s=0.003, hold_s=0.05)
    det, t_end, _ = warmed(settings)
    scale_before = det.scale.copy()
    t, e = free_motion(600, seed=1, t0=t_end + 1 / RATE)
    e[100:400, 1] += 8.0  # 300 ms of contact on joint 2
    block = det.update_block(t, e)
    onset = [ev for ev in block.events if ev.kind == ONSET]
    offset = [ev for ev in block.events if ev.kind == OFFSET]
    assert len(onset) == 1 and len(offset) == 1 and det.contacts == 1
    assert onset[0].joints == (1,) and onset[0].torque[1] == pytest.approx(8.0, abs=2.0)
    first = int(np.argmax(block.contact))
    assert 100 < first <= 104  # flagged once the excess has lasted 3 ms
    assert onset[0].t == pytest.approx(t[first])
    assert block.contact[first:400].all() and not block.contact[:first].any()
    # the pending samples before the onset, the contact, and hold_s after the release: not learned
    assert block.learn[:100].all() and not block.learn[100:450].any() and block.learn[460:].all()
    assert offset[0].duration_s == pytest.approx(0.3, abs=0.01)
    assert "panda_joint2" in onset[0].describe([f"panda_joint{i}" for i in range(1, 8)])
    # the contact did not enter the free-motion window: the thresholds are unchanged by it
    assert det.scale == pytest.approx(scale_before, rel=0.05)


def test_a_single_noisy_sample_does_not_trigger():
    det, t_end, _ = warmed()
    t, e = free_motion(100, seed=2, t0=t_end + 1 / RATE)
    e[50, 3] += 30.0
    e[70:72, 0] += 30.0  # two samples, 1 ms: still below the 3 ms minimum duration
    block = det.update_block(t, e)
    assert not block.contact.any() and not block.events
    assert not block.learn[50] and block.learn[:50].all()  # the spike itself is not learned


def test_hysteresis_keeps_a_contact_between_the_release_and_onset_thresholds():
    det, t_end, _ = warmed(ContactSettings(min_torque=0.1, release=0.5, hold_s=0.0))
    theta = det.threshold[1]
    t = t_end + np.arange(1, 301) / RATE
    e = np.zeros((300, SIGMA.size))
    e[:100, 1] += 2 * theta  # above the onset threshold
    e[100:200, 1] += 0.8 * theta  # below it, above the release threshold: still in contact
    block = det.update_block(t, e)  # then back to free motion: released
    assert block.contact[10:200].all() and not block.contact[210:].any()
    assert [ev.kind for ev in block.events] == [ONSET, OFFSET]


def test_a_contact_that_never_ends_stays_one_until_accepted():
    det, t_end, _ = warmed(ContactSettings(min_torque=0.1, max_s=0.5))
    t, e = free_motion(3000, seed=3, t0=t_end + 1 / RATE)
    e[:, 4] += 3.0  # a tool resting on a fixture from here on
    block = det.update_block(t[:1000], e[:1000])
    kinds = [ev.kind for ev in block.events]
    assert kinds == [ONSET, TOO_LONG] and det.too_long == 1 and det.beyond_max
    after = int(np.searchsorted(t, block.events[1].t)) + 1
    # still a contact, never learned, reported once
    assert block.contact[after:].all() and not block.learn[after:].any() and det.relearned == 0
    # the caller takes it as the new steady state: learned, and the thresholds taken from it anew
    det.accept(t[999])
    block = det.update_block(t[1000:], e[1000:])
    assert det.relearned == 1 and not block.contact.any() and block.learn.all()
    assert det.scale is not None and det.scale[4] > 1.5  # scaled on the 3 N m


def test_samples_not_recorded_are_judged_but_leave_the_thresholds_alone():
    det, t_end, _ = warmed()
    count, threshold = det._count, det.threshold.copy()
    t, e = free_motion(200, seed=4, t0=t_end + 1 / RATE)
    block = det.update_block(t, e, record=np.zeros(200, dtype=bool))
    assert block.learn.all() and det._count == count
    np.testing.assert_array_equal(det.threshold, threshold)
    e[100:, 2] += 50.0  # still judged: a contact
    assert det.update_block(t + 1.0, e, record=np.zeros(200, dtype=bool)).contact[110:].all()


def test_stamps_going_back_restart_the_durations():
    det, t_end, _ = warmed()
    e = np.zeros((10, SIGMA.size))
    e[:, 0] += 20.0
    det.update_block(t_end + np.array([0.001, 0.002]), e[:2])  # pending for 1 ms
    block = det.update_block(np.array([0.0, 0.001]), e[2:4])  # a reset: pending anew from 0
    assert not block.contact.any()
    block = det.update_block(np.array([0.002, 0.003]), e[4:6])
    assert list(block.contact) == [False, True]


def test_samples_not_judged_keep_the_state_and_are_not_recorded():
    det, t_end, _ = warmed()
    count = det._count
    e = np.zeros((20, SIGMA.size))
    e[:10, 0] = 200.0  # an acceleration filter restarting: its first q̈ are off
    judged = np.arange(20) >= 10
    block = det.update_block(t_end + np.arange(1, 21) / RATE, e, judged)
    assert not block.contact.any() and block.learn.all() and det._count == count + 10
    assert not block.events


def test_non_finite_residuals_are_not_recorded_nor_learned():
    det, t_end, _ = warmed()
    count = det._count
    contact, learn, event = det.update(t_end + 0.001, np.full(SIGMA.size, np.nan))
    assert (contact, learn, event) == (False, False, None) and det._count == count


@pytest.mark.parametrize(
    "settings, message",
    [
        (ContactSettings(k=1.0), "contact_k"),
        (ContactSettings(k=float("inf")), "contact_k"),
        (ContactSettings(min_torque=-1.0), "contact_min_torque"),
        (ContactSettings(release=0.0), "contact_release"),
        (ContactSettings(release=1.5), "contact_release"),
        (ContactSettings(hold_s=float("nan")), "contact_hold_s"),
        (ContactSettings(min_duration_s=2.0, max_s=1.0), "contact_max_s"),
        (ContactSettings(window=10), "contact_window"),
    ],
)
def test_settings_that_flag_every_sample_or_none_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        ContactDetector(7, settings)


def test_a_floor_above_every_effort_limit_is_refused():
    limits = [87.0, 87.0, 12.0]
    with pytest.raises(ValueError, match="no contact could ever be detected"):
        ContactSettings(min_torque=100.0).check(limits)
    ContactSettings(min_torque=50.0).check(limits)  # the large joints can still flag
    ContactSettings(min_torque=100.0).check([87.0, float("inf"), 12.0])  # a limit unknown: not judged
