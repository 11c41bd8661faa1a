"""q̈ estimator: streaming and whole-array versions agree; accuracy; bad input."""

import numpy as np
import pytest

from lifelong_learning.dynamics.acceleration import AccelerationEstimator, estimate_accelerations


def _jittered_stamps(n, dt=0.002, seed=0):
    return np.cumsum(dt + np.random.default_rng(seed).uniform(-2e-4, 2e-4, n))


def test_streaming_equals_whole_array():
    t = _jittered_stamps(300)
    qd = np.stack([np.sin(3 * t), np.cos(5 * t), t**2], axis=1)
    est = AccelerationEstimator(3, window=7, degree=2)
    streamed = np.array([est.update(ti, vi) for ti, vi in zip(t, qd, strict=True)])
    # the stream applies the fit's slope row to the velocities, the batch solves for coefficients:
    # the same numbers up to rounding
    np.testing.assert_allclose(
        streamed, estimate_accelerations(t, qd, window=7, degree=2), rtol=1e-9, atol=1e-10
    )


def test_evenly_stamped_streams_reuse_the_fit_and_still_equal_the_whole_array():
    t = 100.0 + 0.001 * np.arange(400)  # 1 kHz: the offsets in each window repeat
    qd = np.stack([np.sin(3 * t), np.cos(5 * t)], axis=1)
    est = AccelerationEstimator(2, window=9, degree=2)
    streamed = np.array([est.update(ti, vi) for ti, vi in zip(t, qd, strict=True)])
    np.testing.assert_allclose(
        streamed, estimate_accelerations(t, qd, window=9, degree=2), rtol=1e-7, atol=1e-7
    )
    np.testing.assert_allclose(streamed[50:, 0], 3 * np.cos(3 * t[50:]), atol=1e-3)  # the true q̈


def test_epoch_stamps_of_a_periodic_stream_reuse_the_fit_to_their_float_resolution():
    """ROS stamps as float seconds since the epoch resolve 0.24 µs: a periodic 1 kHz stream's
    offsets repeat only to that, and the slope row is still reused (it was solved per sample)."""
    k = np.arange(2000)
    t = (1_795_000_000 + k // 1000) + (k % 1000) * 1_000_000 * 1e-9  # sec + nanosec, as the node reads
    qd = np.stack([np.sin(3 * (t - t[0])), np.cos(5 * (t - t[0]))], axis=1)
    est = AccelerationEstimator(2, window=9, degree=2)
    streamed = np.array([est.update(ti, vi) for ti, vi in zip(t, qd, strict=True)])
    assert est.fits == 9  # one per window length while the window fills, then one row for good
    # the rows' differences are of the stamps' rounding: q̈ of magnitude 3-25, agreement to 1e-3
    np.testing.assert_allclose(streamed, estimate_accelerations(t, qd, window=9, degree=2), atol=1e-3)
    np.testing.assert_allclose(streamed[50:, 0], 3 * np.cos(3 * (t[50:] - t[0])), atol=1e-3)

    jittered = t + np.random.default_rng(1).uniform(-5e-5, 5e-5, t.size)  # software stamps
    est = AccelerationEstimator(2, window=9, degree=2)
    streamed = np.array([est.update(ti, vi) for ti, vi in zip(jittered, qd, strict=True)])
    assert est.fits == t.size
    np.testing.assert_allclose(
        streamed, estimate_accelerations(jittered, qd, window=9, degree=2), rtol=1e-6, atol=1e-6
    )


def test_starts_restart_the_filter_like_a_new_estimator():
    t = _jittered_stamps(120, seed=4)
    qd = np.stack([np.sin(3 * t), np.cos(2 * t)], axis=1)
    stamps = np.concatenate([t[:70], t[70:] - 5.0])  # a recording whose clock went back 5 s
    acc = estimate_accelerations(stamps, qd, starts=[70])
    np.testing.assert_array_equal(acc[:70], estimate_accelerations(t[:70], qd[:70]))
    np.testing.assert_array_equal(acc[70:], estimate_accelerations(stamps[70:], qd[70:]))
    assert np.all(acc[70] == 0.0)  # first sample of a recording: no slope yet
    with pytest.raises(ValueError, match="strictly increasing"):
        estimate_accelerations(stamps, qd)
    with pytest.raises(ValueError, match="row indices"):
        estimate_accelerations(stamps, qd, starts=[500])


def test_quadratic_velocity_is_differentiated_exactly_with_uneven_stamps():
    t = _jittered_stamps(50, seed=2)
    qd = (1.0 + 2.0 * t - 0.5 * t**2)[:, None]
    acc = estimate_accelerations(t, qd)
    np.testing.assert_allclose(acc[2:, 0], 2.0 - t[2:], rtol=1e-8)
    assert acc[0, 0] == 0.0  # one sample: no slope yet


def test_smooth_signal_error_is_small():
    t = np.arange(1000) * 0.002
    acc = estimate_accelerations(t, np.sin(2 * np.pi * t)[:, None])
    truth = 2 * np.pi * np.cos(2 * np.pi * t)
    assert np.abs(acc[10:, 0] - truth[10:]).max() < 1e-2 * 2 * np.pi


def test_bad_input_rejected_buffer_unchanged():
    est = AccelerationEstimator(2)
    est.update(0.0, [0.0, 0.0])
    est.update(0.01, [0.1, 0.0])
    for t, v in ((0.01, [0.2, 0.0]), (0.005, [0.2, 0.0]), (0.02, [np.nan, 0.0]), (0.02, [1.0])):
        with pytest.raises(ValueError):
            est.update(t, v)
    assert est.last_time == 0.01
    np.testing.assert_allclose(est.update(0.02, [0.2, 0.0]), [10.0, 0.0])
    with pytest.raises(ValueError):
        estimate_accelerations([0.0, 0.0, 1.0], np.zeros((3, 1)))
    with pytest.raises(ValueError):
        AccelerationEstimator(1, window=1)


def test_settings_are_checked_without_building_with_the_same_message():
    """The filter's rule has one home, also for callers that check settings before they build one."""
    for window, degree in ((1, 2), (9, 0)):
        with pytest.raises(ValueError) as checked:
            AccelerationEstimator.check_settings(window, degree)
        with pytest.raises(ValueError) as built:
            AccelerationEstimator(1, window, degree)
        with pytest.raises(ValueError) as batch:
            estimate_accelerations(np.arange(3.0), np.zeros(3), window, degree)
        assert str(checked.value) == str(built.value) == str(batch.value)
