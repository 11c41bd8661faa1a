"""Atomic writes (complete or absent, no temporary file left), confined paths, stale temporaries."""

import hashlib
import os
import threading
import time

import pytest

from lifelong_learning.core.files import (
    UnsafePathError,
    aside_path,
    atomic_path,
    atomic_write_bytes,
    atomic_write_text,
    check_regular,
    check_replaceable,
    confined_path,
    file_digest,
    open_regular,
    read_regular_bytes,
    read_regular_text,
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


def test_aside_path_says_why(tmp_path):
    aside = aside_path(tmp_path / "ckpt.model", "unreadable")
    assert aside.parent == tmp_path and aside.name.startswith("ckpt.model.unreadable-")


def test_atomic_write_bytes_takes_a_buffer(tmp_path):
    atomic_write_bytes(tmp_path / "a.bin", memoryview(bytearray(b"abc")))
    assert (tmp_path / "a.bin").read_bytes() == b"abc"


def returns_within(seconds: float, call):
    """What ``call()`` returns, asserting it returns within ``seconds`` (on a thread of its own:
    a call that blocks fails the test instead of hanging it)."""
    result: list = []
    worker = threading.Thread(target=lambda: result.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    return result[0]


def test_file_digest_reads_only_a_regular_file_within_its_bound(tmp_path):
    path = tmp_path / "m.model"
    path.write_bytes(b"abc")
    assert file_digest(path, 3) == hashlib.sha256(b"abc").hexdigest()
    assert file_digest(path, 2) is None  # over the bound: not read
    assert file_digest(tmp_path / "missing", 10) is None and file_digest(tmp_path, 10) is None
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    try:
        assert returns_within(1.0, lambda: file_digest(fifo, 10)) is None  # never waits for a writer
    finally:  # a reader still waiting (the bug) is let go
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    assert returns_within(1.0, lambda: file_digest("/dev/zero", 2**40)) is None  # never read on and on


def test_open_regular_refuses_special_files_and_files_over_the_bound(tmp_path):
    (tmp_path / "a").write_bytes(b"12345")
    with open_regular(tmp_path / "a", 5) as f:
        assert f.read() == b"12345"
    with (
        pytest.raises(UnsafePathError, match="holds 5 bytes, more than the 4 allowed"),
        open_regular(tmp_path / "a", 4),
    ):
        pass
    with pytest.raises(UnsafePathError, match="not a regular file"), open_regular("/dev/null", 5):
        pass
    with pytest.raises(FileNotFoundError), open_regular(tmp_path / "b", 5):
        pass


def raised_within(seconds: float, call) -> BaseException:
    """The exception ``call()`` raises, asserting it raises within ``seconds`` (on a thread of its
    own: a call that blocks on a FIFO fails the test instead of hanging it)."""
    raised: list = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    assert raised, "it did not raise"
    return raised[0]


def test_check_regular_refuses_special_and_oversized_files_without_opening_them(tmp_path):
    (tmp_path / "a").write_bytes(b"12345")
    assert check_regular(tmp_path / "a", 5).st_size == 5
    os.mkfifo(tmp_path / "fifo")
    for path, match in (
        (tmp_path / "fifo", "not a regular file"),  # opened, it would wait for a writer
        ("/dev/zero", "not a regular file"),  # read, it never ends
        (tmp_path, "not a regular file"),
        (tmp_path / "a", "holds 5 bytes, more than the 4 allowed"),
    ):
        exc = raised_within(1.0, lambda path=path: check_regular(path, 4))
        assert isinstance(exc, UnsafePathError) and match in str(exc), exc
    assert isinstance(raised_within(1.0, lambda: check_regular(tmp_path / "b", 5)), FileNotFoundError)


def test_read_regular_reads_a_whole_file_within_its_bound_and_nothing_else(tmp_path):
    (tmp_path / "a").write_text("<robot/> ✓", encoding="utf-8")
    assert read_regular_bytes(tmp_path / "a", 100) == "<robot/> ✓".encode()
    assert read_regular_text(tmp_path / "a", 100) == "<robot/> ✓"
    os.mkfifo(tmp_path / "fifo")
    for path in (tmp_path / "fifo", "/dev/zero"):
        exc = raised_within(1.0, lambda path=path: read_regular_text(path, 1 << 30))
        assert isinstance(exc, UnsafePathError) and "not a regular file" in str(exc), exc
    with pytest.raises(UnsafePathError, match="more than the 4 allowed"):
        read_regular_bytes(tmp_path / "a", 4)
    (tmp_path / "latin").write_bytes(b"\xff\xfe")
    with pytest.raises(UnicodeDecodeError):
        read_regular_text(tmp_path / "latin", 10)
