"""The demo's own node: how it counts the answers of the inverse_dynamics node."""

from __future__ import annotations

import threading
import time

import numpy as np
from conftest import new_context


def test_answers_are_counted_once_they_stop_arriving_not_after_a_fixed_wait(built_interfaces):
    from lifelong_learning.demo.driver import DemoDriver

    with new_context() as ctx:
        driver = DemoDriver(say=print, context=ctx)
        try:
            stamps = list(range(1, 41))

            def arrive() -> None:  # a backlog: answers come in over 2 s, then stop at 30 of 40
                for s in stamps[:30]:
                    time.sleep(2.0 / 30)
                    with driver.lock:
                        driver.torques[s] = (np.zeros(7), time.time(), time.time())

            feeder = threading.Thread(target=arrive)
            t0 = time.monotonic()
            feeder.start()
            got = driver.settled_torques(stamps, quiet_s=1.5, cap_s=20.0)
            waited = time.monotonic() - t0
            feeder.join()
            assert sum(g is not None for g in got) == 30  # every answer that came, none missed
            assert 2.0 <= waited < 10.0, waited  # waited for them, and stopped once they stopped
            t0 = time.monotonic()
            assert all(g is not None for g in driver.settled_torques(stamps[:30], quiet_s=5.0))
            assert time.monotonic() - t0 < 1.0  # all answered: no quiet period to wait out
        finally:
            driver.destroy_node()
