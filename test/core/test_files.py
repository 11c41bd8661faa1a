"""Atomic writes: complete or absent, never half-written, no temporary file left."""

import pytest

from lifelong_learning.core.files import atomic_path, atomic_write_bytes, atomic_write_text


def test_replaces_whole_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "sub" / "model.llm"
    atomic_write_bytes(target, b"old")
    atomic_write_text(target, "new ✓")
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert [p.name for p in target.parent.iterdir()] == ["model.llm"]


def test_a_failing_writer_keeps_the_old_file(tmp_path):
    target = tmp_path / "report.md"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer crashed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
