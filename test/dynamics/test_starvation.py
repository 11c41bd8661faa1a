"""Learning that starves (no ROS): the share of the samples offered that was not learned over a window
of stamps, starved above the threshold and until below half of it, too long beyond max_off_s."""

import pytest

from lifelong_learning.dynamics.starvation import StarvationMonitor, StarvationSettings

RATE = 100.0
BLOCK = 5  # samples per block, as the node answers them


def run(monitor, t0, seconds, missed_per_block, reason="contact"):
    """Blocks of BLOCK samples from ``t0`` for ``seconds``, ``missed_per_block`` of each not learned."""
    t = t0
    for _ in range(round(seconds * RATE / BLOCK)):
        t += BLOCK / RATE
        monitor.add(t, BLOCK, [reason] * missed_per_block)
    return t


def test_learning_everything_is_no_starvation():
    m = StarvationMonitor()
    run(m, 0.0, 10.0, 0)
    status = m.status()
    assert status.share == 0.0 and not status.starved and m.episodes == 0


def test_too_few_samples_say_nothing():
    m = StarvationMonitor()
    m.add(0.1, 10, ["contact"] * 10)
    assert m.status() is None and m.share is None


def test_starvation_is_seen_within_the_window_and_says_why():
    m = StarvationMonitor(StarvationSettings(window_s=5.0, threshold=0.75, max_off_s=60.0))
    t = run(m, 0.0, 10.0, 0)
    # every sample in contact from here on: starved once 75 % of the last 5 s went unlearned
    start, starved_at = t, None
    while starved_at is None:
        t = run(m, t, 0.05, BLOCK)
        if m.status().starved:
            starved_at = t
    assert 3.5 <= starved_at - start <= 4.0
    status = m.status()
    assert status.main_reason == "contact" and not status.too_long and m.episodes == 1
    assert "learning starved" in status.describe(5.0) and "contact 7" in status.describe(5.0)


def test_interrupted_contacts_starve_too():
    """Contacts of 9.5 s with 0.3 s between them: 97 % not learned."""
    m = StarvationMonitor()
    t = run(m, 0.0, 5.0, 0)
    for _ in range(4):
        t = run(m, t, 9.5, BLOCK)
        t = run(m, t, 0.3, 0)
    status = m.status()
    assert status.starved and status.starved_s > 30 and m.episodes == 1


def test_starved_beyond_max_off_s_is_too_long_and_ends_when_learning_resumes():
    m = StarvationMonitor(StarvationSettings(window_s=2.0, threshold=0.75, max_off_s=10.0))
    t = run(m, 0.0, 2.0, 0)
    t = run(m, t, 8.0, BLOCK, "residual outlier")
    assert m.status().starved and not m.status().too_long and m.level == 1
    t = run(m, t, 4.0, BLOCK, "residual outlier")
    assert m.status().too_long and m.status().main_reason == "residual outlier" and m.level == 2
    t = run(m, t, 0.5, 0)  # learning again, but most of the window is still unlearned
    assert m.status().starved
    run(m, t, 2.0, 0)
    assert not m.status().starved and m.episodes == 1 and m.level == 0


def test_stamps_going_back_start_anew():
    m = StarvationMonitor()
    run(m, 100.0, 5.0, BLOCK)
    assert m.status().starved
    run(m, 0.0, 0.1, 0)
    assert m.status() is None


@pytest.mark.parametrize(
    "settings, message",
    [
        (StarvationSettings(window_s=0.0), "starvation_window_s"),
        (StarvationSettings(threshold=0.0), "starvation_share"),
        (StarvationSettings(window_s=5.0, max_off_s=1.0), "learning_off_max_s"),
    ],
)
def test_settings_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        StarvationMonitor(settings)
