"""The retraining job for inverse dynamics: chronological split, forgetting chosen on the most recent
part of the bag, baselines and warnings in the report, the exported model replayed in time order."""

import json

import numpy as np

from lifelong_learning.dynamics import SemiparametricInverseDynamics
from lifelong_learning.io.bags import write_joint_states
from lifelong_learning.retraining.pipeline import TuningJob, run_job
from lifelong_learning.sim.panda import JOINT_NAMES, PandaSimulation, panda_urdf_path


def test_forgetting_is_chosen_on_the_most_recent_part_and_reported(tmp_path):
    log = PandaSimulation().run(12.0, seed=4, log_every=5, payload_mass=1.0, payload_at=6.0)
    write_joint_states(tmp_path / "bag", log["t"], JOINT_NAMES, log["q"], log["qd"], log["tau"])
    job = TuningJob(
        bags=[str(tmp_path / "bag")],
        task="inverse-dynamics",
        out=str(tmp_path / "m.llm"),
        urdf=panda_urdf_path(),
        centers=30,
        epochs=5,
        device="cpu",
        forgetting=(1.0, 0.999),
    )
    report = run_job(job)
    result = report["objectives"]["proposed"]
    assert set(result["by_forgetting"]) == {"1.0", "0.999"}
    assert result["value"] == min(result["by_forgetting"].values())
    assert result["forgetting"] == (
        1.0 if result["by_forgetting"]["1.0"] <= result["by_forgetting"]["0.999"] else 0.999
    )
    assert set(report["baselines"]) == {"RNEA (URDF)", "rigid body + friction (RLS)"}
    assert report["n_test"] == round(0.2 * log["t"].size) and report["warnings"] == []
    model = SemiparametricInverseDynamics.load(tmp_path / "m.llm")
    assert model.forgetting == result["forgetting"] and model.n_samples == log["t"].size
    assert model.friction is not None and model.feature_map.kind == "nystrom"
    saved = json.loads((tmp_path / "m.llm.report.json").read_text())
    assert saved["objectives"]["proposed"]["forgetting"] == result["forgetting"]
    assert "forgetting" in report["markdown"] and "RNEA (URDF)" in report["markdown"]


def test_joints_that_barely_move_and_short_bags_are_warned_about(tmp_path):
    log = PandaSimulation().run(3.0, seed=5, log_every=5)
    q, qd = log["q"].copy(), log["qd"].copy()
    q[:, 5:], qd[:, 5:] = q[0, 5:], 0.0  # the last two joints held still
    write_joint_states(tmp_path / "bag", log["t"], JOINT_NAMES, q, qd, log["tau"])
    report = run_job(
        TuningJob(
            bags=[str(tmp_path / "bag")],
            task="inverse-dynamics",
            out=str(tmp_path / "m.llm"),
            urdf=panda_urdf_path(),
            centers=20,
            epochs=3,
            device="cpu",
            forgetting=(1.0,),
        )
    )
    text = " ".join(report["warnings"])
    assert "barely move" in text and JOINT_NAMES[5] in text and JOINT_NAMES[6] in text
    assert JOINT_NAMES[0] not in text.split("barely move")[0]
    assert "samples" in text  # 300 samples: a short bag
    assert "**warning**" in report["markdown"]
    assert np.isfinite(report["objectives"]["proposed"]["value"])
