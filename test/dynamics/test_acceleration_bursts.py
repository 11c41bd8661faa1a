"""The q̈ filter stays finite when stamps cluster (bursts of messages microseconds apart)."""

import numpy as np

from lifelong_learning.dynamics.acceleration import AccelerationEstimator


def test_burst_of_nearly_equal_unix_stamps_gives_finite_accelerations():
    est = AccelerationEstimator(n_joints=2)
    t0 = 1.795e9  # Unix time, as in message headers
    out = [est.update(t0 + 0.01 * i, [0.1 * i, -0.2 * i]) for i in range(3)]
    t = t0 + 0.02
    for _ in range(20):  # a burst: consecutive float64 stamps (~0.24 µs apart at 1.8e9 s)
        t = np.nextafter(t, np.inf)
        out.append(est.update(t, [0.2, -0.4]))
    assert all(np.all(np.isfinite(a)) for a in out)
