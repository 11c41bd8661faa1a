"""The demo's pushes and how they are scored (no ROS, no nodes)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from lifelong_learning.demo import contact as dc
from lifelong_learning.demo.config import DemoConfig
from lifelong_learning.sim.arm import Push
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation


@pytest.fixture(scope="module")
def sim():
    return PandaSimulation()


def test_pushes_come_after_learning_and_before_the_payload_sized_to_a_few_newton_metres(sim):
    cfg = DemoConfig()
    payload_at = cfg.payload_at_fraction * cfg.robot_seconds
    pushes = dc.demo_pushes(cfg, sim, payload_at)
    assert pushes == dc.demo_pushes(cfg, sim, payload_at)  # seeded
    assert len(pushes) == cfg.pushes
    starts = [p.start for p in pushes]
    assert starts == sorted(starts) and starts[0] >= cfg.push_after_s
    for p in pushes:
        assert dc.PUSH_SECONDS[0] <= p.end - p.start <= dc.PUSH_SECONDS[1] + 1e-3
        assert p.end <= payload_at - dc.PAYLOAD_CLEAR_S and p.body in dc.LINKS
        assert np.linalg.norm(p.force) <= dc.MAX_FORCE_N + 1e-9
    # sized on the tracked trajectory: at its start a push's largest joint torque is its target
    log = sim.run(cfg.robot_seconds * 0.6, seed=cfg.seed, log_every=5, pushes=pushes)
    for p in pushes:
        first = int(np.flatnonzero(log["t"] >= p.start)[0])
        peak = np.abs(log["external"][first]).max()
        capped = np.linalg.norm(p.force) >= dc.MAX_FORCE_N - 1e-9
        assert capped or cfg.push_torque[0] * 0.9 <= peak <= cfg.push_torque[1] * 1.1, (p, peak)
    # the quick demo's two, before its payload grasp; none where there is no room
    quick = DemoConfig.quick()
    quick_pushes = dc.demo_pushes(quick, sim, quick.payload_at_fraction * quick.robot_seconds)
    assert len(quick_pushes) == 2 and quick_pushes[-1].end <= 12.0 - dc.PAYLOAD_CLEAR_S
    assert dc.push_schedule(sim, 0, 20.0, 6.0, 3, 5.0, (5.0, 10.0), 0) == []
    assert dc.push_schedule(sim, 0, 20.0, None, 0, 5.0, (5.0, 10.0), 0) == []


def test_the_samples_of_a_push_and_after_it_are_not_free():
    t = np.arange(0, 5, 0.01)
    free = dc.free_rows(t, [Push(1.0, 1.5, "panda_link4", (1.0, 0.0, 0.0))])
    assert free[t < 1.0].all() and free[t >= 2.0].all()
    assert not free[(t >= 1.0) & (t < 1.99)].any()


def test_flags_pair_with_the_estimates_by_order_or_else_by_arrival():
    external = [(10, np.zeros(7)), (20, np.zeros(7)), (30, np.zeros(7))]
    paired, how = dc.pair_flags(external, [(False, 1), (True, 3), (True, 3)])
    assert how == "by order" and paired == {10: False, 20: True, 30: True}
    paired, how = dc.pair_flags(external, [(False, 1), (True, 3)])  # a flag lost: by arrival
    assert how == "by arrival" and paired == {10: False, 30: True}


def test_onsets_on_a_trajectory_are_counted_from_the_flags_of_its_stamps():
    stamps = np.arange(1, 11) * 10_000_000  # 10 joint states, 10 ms apart
    external = [(int(s), np.zeros(7)) for s in stamps]
    flags = [(f, k + 1) for k, f in enumerate([0, 0, 1, 1, 0, 0, 1, 0, 0, 0])]
    assert dc.onsets_on((external, flags), stamps) == {"onsets": 2, "flagged": 10}
    assert dc.onsets_on((external, flags), stamps[:4]) == {"onsets": 1, "flagged": 4}


def _series(pushes, onsets_at, n=1000, period=0.01, noise=0.1, seed=0):
    """A robot phase of ``n`` samples: the truth of ``pushes``, an estimate = −truth + noise, and
    contact flags on for 0.5 s from each of ``onsets_at``."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) * period
    true = np.zeros((n, 7))
    for p in pushes:
        true[(t >= p.start) & (t < p.end), 1] = p.force[0]
    estimate = -true + rng.normal(0, noise, true.shape)
    flag = np.zeros(n)
    for x in onsets_at:
        flag[(t >= x) & (t < x + 0.5)] = 1.0
    return t, true, estimate, flag


def test_a_push_is_scored_detected_with_its_latency_rmse_and_false_alarms_apart():
    pushes = [Push(1.0, 1.6, "panda_link4", (6.0, 0.0, 0.0)), Push(3.0, 3.4, "panda_link5", (4.0, 0.0, 0.0))]
    t, true, estimate, flag = _series(pushes, onsets_at=[1.02, 5.0, 8.3], noise=0.1)
    estimate[t > 9.0] = np.nan  # not received
    flag[t > 9.0] = np.nan
    r = dc.contact_results(t, true, estimate, flag, pushes, payload_at=8.0, joint_names=JOINT_NAMES)
    first, second = r["pushes"]
    assert first["detected"] and first["latency_ms"] == pytest.approx(20.0, abs=1e-6)
    assert first["true_peak_torque"] == 6.0 and first["peak_joint"] == "panda_joint2"
    assert first["rmse"] == pytest.approx(0.1, rel=0.2) and first["answered"] == first["samples"] == 60
    assert not second["detected"] and second["latency_ms"] is None
    assert r["detected"] == 1 and r["latency_ms"] == [first["latency_ms"]]
    assert r["false_alarms"] == 1 and r["false_alarm_t"] == [5.0]  # 8.3: the payload grasp's
    assert r["onsets_at_payload_grasp"] == 1
    assert r["free_motion_s"] == pytest.approx(9.99 - 1.1 - 0.9 - (9.99 - 8.0), abs=1e-6)
    assert r["series"]["joint"] == "panda_joint2" and len(r["series"]["t"]) == t.size


def test_the_report_plots_and_tabulates_the_pushes(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pushes = [Push(1.0, 1.6, "panda_link4", (6.0, 0.0, 0.0)), Push(3.0, 3.4, "panda_link5", (4.0, 0.0, 0.0))]
    t, true, estimate, flag = _series(pushes, onsets_at=[1.02])
    contact = dc.contact_results(t, true, estimate, flag, pushes, payload_at=None, joint_names=JOINT_NAMES)
    contact["pairing"] = "by order"
    contact["evaluation"] = {"online": {"onsets": 0, "flagged": 1500}}
    results = {"dynamics": {"rate_hz": 100.0, "contact": contact}}
    plot = dc.plot_contact(results, tmp_path, plt)
    report = "\n".join(dc.contact_section(results, plot))
    assert "### Pushes: external torque and contact detection" in report
    assert "| 1.0-1.6 s | panda_link4 | 6 | 6.0 (panda_joint2) | yes | 20 |" in report
    assert "Detected 1 of 2; false alarms outside the pushes: 0" in report
    assert "on the evaluation trajectory (online model, no pushes): 0 onsets in 1500" in report
    assert "![contact](dynamics_contact.png)" in report
    assert plot == tmp_path / "dynamics_contact.png" and plot.stat().st_size > 10_000
    assert dc.contact_section({"dynamics": {}}, None) == [] and dc.plot_contact({}, tmp_path, plt) is None


def test_the_plant_id_of_every_pushed_link_exists(sim):
    for link in dc.LINKS:
        assert mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_BODY, link) >= 0
