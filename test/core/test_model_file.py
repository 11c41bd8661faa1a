"""Model files: round trip, no code execution, corruption and kind checks, atomic writes."""

import numpy as np
import pytest

from lifelong_learning.core.model_file import (
    ModelFile,
    ModelFileError,
    load_model_file,
    prefixed,
    read_model_kind,
    save_model_file,
    unprefixed,
)


def test_round_trip(tmp_path):
    arrays = {
        "R": np.eye(3),
        "counts": np.arange(4, dtype=np.uint64),
        **prefixed("np", {"W": np.ones((2, 2))}),
    }
    save_model_file(tmp_path / "m.llm", ModelFile("demo", {"labels": ["a", 3], "lam": 0.5}, arrays))
    mf = load_model_file(tmp_path / "m.llm", kind="demo")
    assert mf.kind == "demo" and mf.meta == {"labels": ["a", 3], "lam": 0.5} and mf.version == 1
    assert np.array_equal(mf.arrays["R"], np.eye(3)) and mf.arrays["counts"].dtype == np.uint64
    assert list(unprefixed("np", mf.arrays)) == ["W"]


def test_wrong_kind_missing_truncated_and_corrupt_files_raise(tmp_path):
    p = tmp_path / "m.llm"
    save_model_file(p, ModelFile("demo", {}, {"x": np.arange(1000.0)}))
    with pytest.raises(ModelFileError, match="expected"):
        load_model_file(p, kind="other")
    with pytest.raises(ModelFileError, match="no such"):
        load_model_file(tmp_path / "absent.llm")
    data = p.read_bytes()
    (tmp_path / "trunc.llm").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError):
        load_model_file(tmp_path / "trunc.llm")
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0xFF  # inside the array payload: the zip CRC catches it
    (tmp_path / "flip.llm").write_bytes(bytes(flipped))
    with pytest.raises(ModelFileError):
        load_model_file(tmp_path / "flip.llm")
    (tmp_path / "junk.llm").write_bytes(b"not a model")
    with pytest.raises(ModelFileError):
        load_model_file(tmp_path / "junk.llm")


def test_pickled_content_is_refused(tmp_path):
    p = tmp_path / "evil.npz"
    np.savez(
        p,
        __header__=np.frombuffer(
            b'{"format": "lifelong_learning.model", "version": 1, "kind": "x"}', np.uint8
        ),
        payload=np.array([{"a": 1}], dtype=object),
    )
    with pytest.raises(ModelFileError):
        load_model_file(p)
    with pytest.raises(ModelFileError):
        save_model_file(tmp_path / "o.llm", ModelFile("x", {}, {"o": np.array([None], dtype=object)}))


def test_newer_version_refused(tmp_path):
    p = tmp_path / "new.npz"
    np.savez(
        p,
        __header__=np.frombuffer(
            b'{"format": "lifelong_learning.model", "version": 99, "kind": "x"}', np.uint8
        ),
    )
    with pytest.raises(ModelFileError, match="version"):
        load_model_file(p)


def test_failed_write_keeps_the_old_file(tmp_path):
    p = tmp_path / "m.llm"
    save_model_file(p, ModelFile("demo", {"v": 1}, {"x": np.zeros(3)}))
    with pytest.raises(TypeError):
        save_model_file(p, ModelFile("demo", {"v": object()}, {}))
    assert load_model_file(p).meta == {"v": 1}
    assert [f.name for f in tmp_path.iterdir()] == ["m.llm"]  # no temp file left behind


def test_read_model_kind_reads_the_header_only(tmp_path):
    p = tmp_path / "m.llm"
    save_model_file(p, ModelFile("demo", {"v": 1}, {"x": np.arange(1000.0)}))
    assert read_model_kind(p) == "demo"
    data = p.read_bytes()
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0xFF  # corrupts the array, not the header
    (tmp_path / "flip.llm").write_bytes(bytes(flipped))
    assert read_model_kind(tmp_path / "flip.llm") == "demo"
    with pytest.raises(ModelFileError):
        load_model_file(tmp_path / "flip.llm")
    (tmp_path / "junk.llm").write_bytes(b"not a model")
    for bad in (tmp_path / "junk.llm", tmp_path / "absent.llm"):
        with pytest.raises(ModelFileError):
            read_model_kind(bad)
