"""The persistence contract: kind and state version checked, malformed content refused with the
kind named, and model files written before the contract existed still load with their predictions."""

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import RLSModel

from lifelong_learning.core.model_file import ModelFile, ModelFileError, load_model_file, save_model_file
from lifelong_learning.dynamics.semiparametric import SemiparametricInverseDynamics
from lifelong_learning.learners import IncrementalRLSC

LEGACY = Path(__file__).resolve().parents[1] / "data" / "models_v1"


def test_round_trip_copy_and_state_version(tmp_path):
    model = RLSModel(3, 2, lam=0.5)
    model.update(np.eye(3), np.ones((3, 2)))
    model.save(tmp_path / "m.llm")
    assert load_model_file(tmp_path / "m.llm").meta["state_version"] == 1
    loaded = RLSModel.load(tmp_path / "m.llm")
    assert isinstance(loaded, RLSModel) and loaded.n_samples == 3
    np.testing.assert_array_equal(loaded.predict(np.eye(3)), model.predict(np.eye(3)))
    twin = model.copy()
    twin.update(np.ones(3), [1.0, 1.0])
    assert model.n_samples == 3 and twin.n_samples == 4


def test_other_kind_newer_version_and_malformed_content_are_refused(tmp_path):
    meta, arrays = RLSModel(2, 1).to_state()
    with pytest.raises(ModelFileError, match="expected 'test_rls'"):
        RLSModel.from_model_file(ModelFile("other", meta, arrays))
    with pytest.raises(ModelFileError, match="state version 2; this code reads version 1"):
        RLSModel.from_model_file(ModelFile("test_rls", {**meta, "state_version": 2}, arrays))
    with pytest.raises(ModelFileError, match="malformed test_rls model"):
        RLSModel.from_model_file(ModelFile("test_rls", {**meta, "n_features": 5}, arrays))
    save_model_file(tmp_path / "x.llm", ModelFile("incremental_rlsc", meta, arrays))
    with pytest.raises(ModelFileError, match="expected 'test_rls'"):
        RLSModel.load(tmp_path / "x.llm")


def test_files_written_before_the_contract_load_with_their_predictions():
    expected = json.loads((LEGACY / "expected.json").read_text())
    for name in ("incremental_rlsc", "incremental_rlsc_nystrom"):
        clf = IncrementalRLSC.load(LEGACY / f"{name}.llm")
        ref = expected[name]
        np.testing.assert_allclose(
            clf.decision_function(ref["probe"]), ref["decision"], rtol=1e-12, atol=1e-12
        )
    assert (
        IncrementalRLSC.load(LEGACY / "incremental_rlsc.llm").n_samples
        == expected["incremental_rlsc"]["n_samples_seen"]
    )
    ref = expected["semiparametric_inverse_dynamics"]
    sp = SemiparametricInverseDynamics.load(LEGACY / "semiparametric_inverse_dynamics.llm")
    assert "state_version" not in load_model_file(LEGACY / "semiparametric_inverse_dynamics.llm").meta
    assert sp.n_samples == ref["n_samples"]
    np.testing.assert_allclose(
        sp.predict(ref["q"], ref["qd"], ref["qdd"]), ref["torque"], rtol=1e-10, atol=1e-10
    )
