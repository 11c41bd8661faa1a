"""The main job (`make demo`), in its quick form, end to end over DDS."""

import json
import shutil
import subprocess

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.graph]


def test_quick_demo_writes_a_report_with_both_learners(tmp_path, built_interfaces):
    exe = shutil.which("lifelong-learning")
    assert exe, "lifelong-learning is not on PATH (source install/setup.bash)"
    out = tmp_path / "run"
    res = subprocess.run(
        [exe, "demo", "--quick", "--out", str(out)], capture_output=True, text=True, timeout=400, cwd=tmp_path
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = (out / "report.md").read_text()
    for section in ("## Object recognition", "## Inverse dynamics", "## Latency"):
        assert section in report
    for png in ("recognition_accuracy.png", "dynamics_nmse.png", "latency.png"):
        assert (out / png).stat().st_size > 10_000
    results = json.loads((out / "results.json").read_text())
    rounds = results["recognition"]["rounds"]
    assert [r["n_taught"] for r in rounds] == list(range(1, len(rounds) + 1))
    assert all(r["n_answered"] > 0 for r in rounds)
    # The first object is recognized once taught (one class known: nothing else to answer).
    assert rounds[0]["accuracy"] == 1.0
    dyn = results["dynamics"]
    # joint_states are best-effort (sensor-data QoS): under load some are dropped, by design.
    assert dyn["answered"] > dyn["published"] // 5
    answered_windows = [w for w in dyn["windows"] if all(v == v for v in w["online"])]  # no NaN
    assert len(answered_windows) >= len(dyn["windows"]) // 2
    # Each node wrote its final checkpoint on SIGINT.
    assert (out / "object_recognition.llm").exists() and (out / "inverse_dynamics.llm").exists()
