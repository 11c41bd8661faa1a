"""Atomic writes (complete or absent, no temporary file left), confined paths, stale temporaries."""

import os
import time

import pytest

from lifelong_learning.core.files import (
    UnsafePathError,
    atomic_path,
    atomic_write_bytes,
    atomic_write_text,
    check_replaceable,
    confined_path,
    remove_stale_temporaries,
)


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


def _model_like(path):
    return path.read_bytes().startswith(b"MODEL")


def test_confined_path_takes_relative_paths_under_the_directory(tmp_path):
    models = tmp_path / "models"
    assert confined_path("a/b.llm", models) == (models / "a" / "b.llm").resolve()
    assert confined_path(models / "c.llm", models) == (models / "c.llm").resolve()


def test_confined_path_refuses_dotdot_and_absolute_paths_outside(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    with pytest.raises(UnsafePathError) as escape:
        confined_path("../outside.llm", models)
    assert "outside.llm" in str(escape.value) and str(models.resolve()) in str(escape.value)
    with pytest.raises(UnsafePathError):
        confined_path(tmp_path / "elsewhere.llm", models)
    with pytest.raises(UnsafePathError):
        confined_path("", models)
    # allowed outside: the resolved path, wherever it is
    assert confined_path("../outside.llm", models, allow_outside=True) == (tmp_path / "outside.llm").resolve()


def test_confined_path_follows_symlinks_before_deciding(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    (models / "escape").symlink_to(tmp_path)
    with pytest.raises(UnsafePathError):
        confined_path("escape/secret.llm", models)
    # a model directory that is itself a symlink: paths through either name are inside
    (tmp_path / "alias").symlink_to(models)
    assert confined_path(models / "m.llm", tmp_path / "alias") == (models / "m.llm").resolve()


def test_confined_path_expands_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert confined_path("~/models/m.llm", "~/models") == (tmp_path / "models" / "m.llm").resolve()
    with pytest.raises(UnsafePathError):
        confined_path("~/m.llm", "~/models")


def test_check_replaceable_accepts_a_missing_path_and_our_files(tmp_path):
    check_replaceable(tmp_path / "missing.llm", _model_like)
    ours = tmp_path / "ours.llm"
    ours.write_bytes(b"MODEL 1")
    check_replaceable(ours, _model_like)
    other = tmp_path / "notes.txt"
    other.write_text("mine")
    check_replaceable(other)  # no owner test: any regular file


def test_check_replaceable_refuses_what_is_not_ours(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("mine")
    with pytest.raises(UnsafePathError, match="not a file this writer made"):
        check_replaceable(other, _model_like)
    ours = tmp_path / "ours.llm"
    ours.write_bytes(b"MODEL 1")
    link = tmp_path / "link.llm"
    link.symlink_to(ours)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        check_replaceable(link, _model_like)
    with pytest.raises(UnsafePathError, match="directory"):
        check_replaceable(tmp_path, _model_like)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UnsafePathError, match="special file"):
        check_replaceable(fifo, _model_like)  # and is_ours is never called on it (it would block)
    with pytest.raises(UnsafePathError, match="not a directory"):
        check_replaceable(ours / "below.llm")


def test_remove_stale_temporaries_removes_only_what_atomic_path_leaves(tmp_path):
    target = tmp_path / "model.llm"
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as tmp:
        stale = tmp  # a killed writer: simulate by keeping a copy of its temporary
        raise KeyboardInterrupt
    leftover = tmp_path / stale.name
    leftover.write_bytes(b"half")  # what SIGKILL leaves (atomic_path's finally never ran)
    other_tmp = tmp_path / ".other.llm.abcd_123.tmp"
    other_tmp.write_bytes(b"half")
    keep = [
        tmp_path / "model.llm",
        tmp_path / ".model.llm.short.tmp",  # not 8 characters
        tmp_path / "model.llm.abcdefgh.tmp",  # no leading dot
        tmp_path / ".model.llm.ABCDEFGH.tmp",  # mkstemp never uses upper case
        tmp_path / ".model.llm.abcdefgh.tmp.bak",
    ]
    for p in keep:
        p.write_bytes(b"keep")
    link = tmp_path / ".model.llm.zzzzzzzz.tmp"
    link.symlink_to(tmp_path / "model.llm")
    (tmp_path / ".model.llm.dddddddd.tmp").mkdir()

    assert remove_stale_temporaries(tmp_path, "model.llm") == [leftover]
    assert other_tmp.exists() and all(p.exists() for p in keep) and link.is_symlink()
    assert remove_stale_temporaries(tmp_path) == [other_tmp]
    assert all(p.exists() for p in keep)
    assert remove_stale_temporaries(tmp_path / "missing") == []


def test_remove_stale_temporaries_keeps_recent_files_when_asked(tmp_path):
    fresh = tmp_path / ".model.llm.abcdefgh.tmp"
    fresh.write_bytes(b"being written")
    assert remove_stale_temporaries(tmp_path, min_age_s=60.0) == []
    old = time.time() - 120
    os.utime(fresh, (old, old))
    assert remove_stale_temporaries(tmp_path, min_age_s=60.0) == [fresh]


def test_a_name_too_long_is_refused_not_raised(tmp_path):
    from lifelong_learning.core.files import UnsafePathError, check_replaceable, confined_path

    long = "a" * 300 + ".llm"
    with pytest.raises(UnsafePathError, match="too long"):
        check_replaceable(tmp_path / long)
    assert confined_path(long, tmp_path) == (tmp_path / long).resolve()  # resolving is fine
