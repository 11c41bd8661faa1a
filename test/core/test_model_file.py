"""Model files: round trip, no code execution, corruption and kind checks, atomic writes."""

import io
import json
import struct
import time
import zipfile
import zlib

import numpy as np
import pytest
from conftest import write_oversized_model_file

from lifelong_learning.core.model_file import (
    ModelFile,
    ModelFileError,
    load_model_file,
    prefixed,
    read_model_kind,
    save_model_file,
    unprefixed,
)

GIB = 1024**3


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


def _write_zip(path, members):
    """A zip of ``(name, method, raw data, crc, uncompressed size)`` members written as given (a
    member may lie about its size or CRC)."""
    local, central = bytearray(), bytearray()
    for name, method, data, crc, size in members:
        offset, name = len(local), name.encode()
        local += struct.pack(
            "<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, len(data), size, len(name), 0
        )
        local += name + data
        central += struct.pack(
            "<4s6H3L5H2L",
            b"PK\x01\x02",
            20,
            20,
            0,
            method,
            0,
            0x21,
            crc,
            len(data),
            size,
            len(name),
            0,
            0,
            0,
            0,
            0,
            offset,
        )
        central += name
    end = struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(central), len(local), 0
    )
    path.write_bytes(bytes(local + central + end))
    return path


def _zero_bomb(path, inflated=GIB, declared=None):
    """A model file whose member 'x' inflates to ``inflated`` bytes (an npy header, then zeros) from
    about 1 MB of deflate data; its zip entry declares ``declared`` bytes (default: the truth)."""
    header = {"format": "lifelong_learning.model", "version": 1, "kind": "demo", "meta": {}}
    meta = io.BytesIO()
    np.lib.format.write_array(meta, np.frombuffer(json.dumps(header).encode(), np.uint8))
    npy = io.BytesIO()
    shape = ((min(declared or inflated, inflated) - 128) // 8,)
    np.lib.format.write_array_header_1_0(npy, {"descr": "<f8", "fortran_order": False, "shape": shape})
    assert len(npy.getvalue()) == 128
    # After a full flush the compressor starts afresh: one compressed MiB of zeros, repeated.
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = deflate.compress(npy.getvalue()) + deflate.flush(zlib.Z_FULL_FLUSH)
    mib = deflate.compress(bytes(2**20)) + deflate.flush(zlib.Z_FULL_FLUSH)
    data = (
        head
        + mib * ((inflated - 128) // 2**20)
        + deflate.compress(bytes((inflated - 128) % 2**20))
        + deflate.flush()
    )
    # the true CRC when cheap; a big bomb must be refused before any CRC matters
    crc = zlib.crc32(bytes(inflated - 128), zlib.crc32(npy.getvalue())) if inflated <= 2**24 else 0
    members = [
        ("__header__.npy", 0, meta.getvalue(), zlib.crc32(meta.getvalue()), len(meta.getvalue())),
        ("x.npy", zipfile.ZIP_DEFLATED, data, crc, declared or inflated),
    ]
    return _write_zip(path, members)


def test_an_npy_header_claiming_8_tib_is_refused_before_any_allocation(tmp_path):
    path = write_oversized_model_file(tmp_path / "huge.llm", "demo")
    assert path.stat().st_size < 1000
    t0 = time.monotonic()
    with pytest.raises(ModelFileError, match=r"8796093022208 bytes \(8.19e\+03 GiB\)"):
        load_model_file(path)
    assert time.monotonic() - t0 < 1.0
    assert read_model_kind(path) == "demo"  # the header alone is fine
    # the limit is a keyword: a small array declared within it loads
    small = write_oversized_model_file(tmp_path / "small.llm", "demo", shape=(1,))
    assert load_model_file(small).arrays["weights"].shape == (1,)
    with pytest.raises(ModelFileError, match="limit"):
        load_model_file(small, max_bytes=100)


def test_declared_member_and_total_sizes_are_checked_against_the_limit(tmp_path):
    p = tmp_path / "m.llm"
    save_model_file(p, ModelFile("demo", {}, {"a": np.zeros(1000), "b": np.zeros(1000)}))
    assert load_model_file(p, max_bytes=20_000).arrays["a"].shape == (1000,)
    with pytest.raises(ModelFileError, match="in all"):  # each member fits, the two together do not
        load_model_file(p, max_bytes=12_000)
    with pytest.raises(ModelFileError, match=r"member 'a\.npy' declares"):
        load_model_file(p, max_bytes=5_000)
    with pytest.raises(ModelFileError, match="limit"):
        read_model_kind(p, max_bytes=5_000)


def test_arrays_keep_their_layout_dtype_and_are_writable(tmp_path):
    p = tmp_path / "m.llm"
    fortran = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    arrays = {
        "f": fortran,
        "big_endian": np.arange(5, dtype=">i4"),
        "scalar": np.float32(2.5),
        "e": np.zeros((0, 3)),
    }
    save_model_file(p, ModelFile("demo", {}, arrays))
    got = load_model_file(p).arrays
    for key, value in arrays.items():
        assert got[key].dtype == np.asarray(value).dtype and np.array_equal(got[key], value), key
    assert got["f"].flags.writeable and got["f"].shape == (3, 4)


def test_a_1_mb_member_inflating_to_1_gib_is_refused(tmp_path):
    bomb = _zero_bomb(tmp_path / "bomb.llm")
    assert bomb.stat().st_size < 2 * 1024 * 1024
    t0 = time.monotonic()
    with pytest.raises(ModelFileError, match=r"inflates \d+ bytes to 1073741824 bytes"):
        load_model_file(bomb)
    # one whose zip entry lies (declares 1 MiB, inflates to 1 GiB): read up to 1 MiB, then refused
    liar = _zero_bomb(tmp_path / "liar.llm", declared=2**20)
    with pytest.raises(ModelFileError, match="corrupt"):
        load_model_file(liar, max_inflation=1e6)
    assert time.monotonic() - t0 < 1.0
    # the same construction, small and honest, loads: the helper makes valid files
    ok = _zero_bomb(tmp_path / "ok.llm", inflated=2**20 + 128)
    assert load_model_file(ok, max_inflation=1e6).arrays["x"].shape == (2**17,)


def test_is_model_file_of_a_kind_and_names_too_long(tmp_path):
    from lifelong_learning.core.model_file import ModelFile, ModelFileError, is_model_file, load_model_file

    path = tmp_path / "m.llm"
    save_model_file(path, ModelFile(kind="incremental_rlsc"))
    assert is_model_file(path) and is_model_file(path, "incremental_rlsc")
    assert not is_model_file(path, "semiparametric_inverse_dynamics")  # never replaced by that writer
    (tmp_path / "notes.txt").write_text("x")
    assert not is_model_file(tmp_path / "notes.txt")
    with pytest.raises(ModelFileError, match="too long"):
        load_model_file(tmp_path / ("a" * 300))
