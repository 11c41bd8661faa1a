"""ServingCore without ROS: atomic swap and version, hot reload (a failure keeps the old model),
rollback (two steps back, rolled-back.model, nothing to roll back to, an unreadable previous model
moved aside), reset, models announced by path, request paths confined to the model directory."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import RLSModel

from lifelong_learning.core.persistence import PersistentModel
from lifelong_learning.serving import LogReporter, RefusedError, ServingCore

X = np.eye(3)


def fits(dim: int):
    def check(model: RLSModel) -> None:
        if model.n_features != dim:
            raise ValueError("dimension mismatch")

    return check


def make_core(tmp_path: Path, keep: int = 3, checkpoint: bool = True, **kwargs) -> ServingCore:
    """A core serving a fresh RLSModel of dimension 3, its files under ``tmp_path``."""
    core = ServingCore(
        RLSModel,
        model_directory=tmp_path / "models",
        own=Path("robot1", "rls"),
        keep_previous=keep,
        checkpoint_path=tmp_path / "ckpt.model" if checkpoint else None,
        check=fits(3),
        report=LogReporter(),
        **kwargs,
    )
    core.serve_first(trained(0.5))  # it learned one sample here (a checkpoint's, say): kept when replaced
    return core


def returns_within(seconds: float, call):
    """What ``call()`` returns, asserting it returns within ``seconds`` (on a thread of its own: a
    call that blocks fails the test instead of hanging it)."""
    result: list = []
    worker = threading.Thread(target=lambda: result.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    return result[0]


def trained(seed: float) -> RLSModel:
    model = RLSModel(3, 1, lam=1.0)
    model.update([1.0, seed, 0.0], [seed])
    return model


def test_importing_the_serving_core_imports_no_ros(tmp_path):
    code = (
        "import sys, lifelong_learning.serving, lifelong_learning.serving.core; "
        "ros = sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', 'rcl_interfaces', 'std_msgs')); "
        "assert not ros, ros"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert res.returncode == 0, res.stderr


def test_swap_bumps_the_version_and_calls_the_hook_under_the_lock(tmp_path):
    seen = []
    core = make_core(tmp_path)

    def held_elsewhere() -> bool:  # whether another thread finds the lock taken
        free: list[bool] = []
        other = threading.Thread(target=lambda: free.append(core.lock.acquire(blocking=False)))
        other.start()
        other.join()
        if free[0]:
            core.lock.release()
        return not free[0]

    core.on_swap = lambda model: seen.append((model, held_elsewhere()))
    model = trained(1.0)
    core.swap(model, "abc")
    assert core.model is model and core.version == 1 and core.updates_since_checkpoint == 1
    assert core.loaded_file == "abc" and core.serving("abc") and not core.serving(None)
    assert seen == [(model, True)]


def test_reload_failures_keep_the_serving_model(tmp_path):
    core = make_core(tmp_path)
    serving = core.model
    models = tmp_path / "models"
    models.mkdir()
    (models / "garbage.model").write_bytes(b"garbage")
    RLSModel(4, 1).save(models / "wrong_dim.model")

    class Other(RLSModel, PersistentModel):
        kind = "another_kind"

    Other(3, 1).save(models / "other_kind.model")
    for name in ("garbage.model", "wrong_dim.model", "other_kind.model", "absent.model"):
        ok, message = core.reload(models / name)
        assert not ok and "previous model kept" in message, message
    assert core.model is serving and core.version == 0
    assert core.report.rejections == {"model reload failed": 4}
    assert core.history.files() == []  # nothing replaced, nothing kept


def test_a_reloaded_model_is_caught_up_with_the_serving_one_or_refused(tmp_path):
    """The core's catch_up (what the serving model took back since: learners/unlearning.py) gives
    the model a reload swaps in, under the lock; its ValueError refuses the reload, nothing kept."""
    seen: list = []

    def catch_up(model: RLSModel, serving: RLSModel) -> RLSModel:
        assert core.lock._is_owned()  # the serving model cannot change meanwhile
        seen.append((model, serving))
        if model.n_samples > 1:
            raise ValueError("it may have learned what the serving model took back")
        return trained(0.9)

    core = make_core(tmp_path, catch_up=catch_up)
    serving = core.model
    models = tmp_path / "models"
    models.mkdir()
    trained(0.1).save(models / "one.model")
    two = trained(0.2)
    two.update([0.0, 1.0, 0.0], [1.0])
    two.save(models / "two.model")
    ok, message = core.reload(models / "two.model")
    assert not ok and message.endswith(
        "previous model kept: it may have learned what the serving model took back"
    )
    assert core.model is serving and core.version == 0 and core.history.files() == []
    assert core.report.rejections == {"model reload failed": 1}
    assert core.reload(models / "one.model").ok
    assert core.model.rhs[1, 0] == trained(0.9).rhs[1, 0] and seen[-1][1] is serving
    core.edit(lambda model: (model, "edited"), "edit")  # an edit, a reset, a rollback: not caught up
    assert len(seen) == 2


def test_reload_refuses_a_fifo_or_a_device_at_once(tmp_path):
    """A FIFO in the model directory (or /dev/zero, where paths outside it are allowed) named to
    ~/load_model is refused before it is opened: a FIFO would block the node's service group until
    a writer came, /dev/zero would be hashed for ever. Counted as a failed reload."""
    core = make_core(tmp_path, allow_outside=True)
    serving = core.model
    (tmp_path / "models").mkdir()
    fifo = tmp_path / "models" / "fifo.model"
    os.mkfifo(fifo)
    try:
        for name in ("fifo.model", "/dev/zero"):
            path = core.request_path(name, for_writing=False)
            t0 = time.monotonic()
            outcome = returns_within(1.0, lambda path=path: core.reload(path))
            assert time.monotonic() - t0 < 1.0
            assert not outcome.ok and "is not a regular file" in outcome.message, outcome.message
            assert "previous model kept" in outcome.message
    finally:  # a reload still waiting (the bug) is let go
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    assert core.model is serving and core.version == 0
    assert core.report.rejections == {"model reload failed": 2}


def test_an_announced_fifo_or_device_is_refused_at_once(tmp_path):
    """The same on model_topic: the announced path is opened once, only when regular, for its kind
    and its SHA-256."""
    core = make_core(tmp_path, allow_outside=True)
    serving = core.model
    (tmp_path / "models").mkdir()
    fifo = tmp_path / "models" / "fifo.model"
    os.mkfifo(fifo)
    try:
        for name in ("fifo.model", "/dev/zero"):
            outcome = returns_within(1.0, lambda name=name: core.announced(name, "tuned_model", core.reload))
            assert not outcome.ok and "is not a regular file" in outcome.message, outcome.message
    finally:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    assert core.model is serving and core.version == 0
    assert core.report.rejections == {"model reload failed": 2}
    trained(1.0).save(tmp_path / "models" / "a.model")
    assert core.announced("a.model", "tuned_model", core.reload).ok
    assert core.announced("a.model", "tuned_model", core.reload) is None  # the serving model's file


def test_reload_hashes_the_bytes_it_loads(tmp_path):
    core = make_core(tmp_path)
    models = tmp_path / "models"
    trained(1.0).save(models / "a.model")
    assert core.reload(models / "a.model").ok
    assert core.serving(hashlib.sha256((models / "a.model").read_bytes()).hexdigest())


def test_released_the_core_forgets_the_file_its_model_came_from(tmp_path):
    """After cleanup (release) and configure (a fresh model), the model delivered before is loaded
    again when it is delivered again: another model serves now."""
    core = make_core(tmp_path, checkpoint=False)
    models = tmp_path / "models"
    trained(1.0).save(models / "a.model")
    assert core.reload(models / "a.model").ok and core.version == 1
    core.count_updates()
    core.release()
    assert core.model is None and core.loaded_file is None and core.updates_since_checkpoint == 0
    core.serve_first(RLSModel(3, 1, lam=1.0))  # configure: a fresh model, not the one loaded
    assert core.version == 1 and not core.serving(core.loaded_file)
    assert core.announced("a.model", "tuned_model", core.reload).ok  # not "already the serving model"
    assert core.version == 2 and np.array_equal(core.model.predict(X), trained(1.0).predict(X))


def test_reload_keeps_the_replaced_model_and_prunes_beyond_keep_but_what_was_learned(tmp_path):
    """The first model learned here (one sample, as a restored checkpoint's): pinned beyond keep."""
    core = make_core(tmp_path, keep=2)
    first = core.model.predict(X)
    models = tmp_path / "models"
    for k in range(1, 5):
        trained(k).save(models / f"m{k}.model")
    for k in range(1, 5):
        ok, message = core.reload(models / f"m{k}.model")
        assert ok and f"model version {k}" in message, message
    files = core.history.files()
    assert [p.name.split(".")[0] for p in files] == ["000001", "000003", "000004"]
    assert all(".before-reload." in p.name for p in files)
    assert ".learned-1." in files[0].name and core.history.pinned().path == files[0]
    assert np.array_equal(RLSModel.load(files[-1]).predict(X), trained(3).predict(X))
    assert np.array_equal(RLSModel.load(files[0]).predict(X), first)
    assert core.last_reload.startswith(str(models / "m4.model"))


def test_thirty_resets_leave_what_was_learned_for_the_first_rollback(tmp_path):
    """Issue 29 item 8: an untrained model is not kept, so reset spam cannot flush the history."""
    core = make_core(tmp_path, keep=3)
    for _ in range(5):
        core.model.update([0.0, 1.0, 1.0], [2.0])
        core.count_updates()
    learned = core.model.predict(X)
    for _ in range(30):
        outcome = core.reset(lambda: RLSModel(3, 1, lam=1.0))
        assert outcome.ok, outcome.message
    assert "learned nothing, as the new one: not kept" in outcome.message, outcome.message
    assert len(core.history.files()) == 1 and ".learned-6." in core.history.files()[0].name
    assert core.rollback().ok and np.array_equal(core.model.predict(X), learned)
    assert core.learned == 6  # the rolled-back model is still the one learned here: pinned when replaced


def test_forged_reloads_cannot_push_what_was_learned_out(tmp_path):
    """Models announced in turn are kept once each (moved, not copied); new ones push out the oldest
    of them but not the model learned here, which the last rollback reaches."""
    core = make_core(tmp_path, keep=2)
    core.model.update([0.0, 1.0, 1.0], [2.0])
    core.count_updates()
    learned = core.model.predict(X)
    models = tmp_path / "models"
    for name, seed in (("a", 1.0), ("b", 2.0), *((f"new{k}", 10.0 + k) for k in range(4))):
        trained(seed).save(models / f"{name}.model")
    RLSModel(3, 1, lam=5.0).save(models / "empty.model")
    for name in ("empty", "a", "b", "a", "b", "a", "b", "new0", "new1", "new2", "new3"):
        assert core.reload(models / f"{name}.model").ok
    files = core.history.files()
    assert len(files) == 3 and ".learned-2." in files[0].name, [p.name for p in files]
    digests = [p.name.split(".")[3] for p in files]
    assert len(set(digests)) == 3
    for _ in range(3):
        assert core.rollback().ok
    assert np.array_equal(core.model.predict(X), learned)
    assert not core.rollback().ok  # nothing further back


def test_a_model_identical_to_a_kept_one_is_not_kept_twice(tmp_path):
    core = make_core(tmp_path)
    models = tmp_path / "models"
    trained(1.0).save(models / "a.model")
    trained(2.0).save(models / "b.model")
    for name in ("a", "b", "a", "b"):
        assert core.reload(models / f"{name}.model").ok
    names = [p.name for p in core.history.files()]  # first, b, a (b serves): each once, a moved
    assert [n.split(".")[0] for n in names] == ["000001", "000003", "000004"], names
    assert np.array_equal(RLSModel.load(core.history.files()[-1]).predict(X), trained(1.0).predict(X))


def test_rollback_goes_two_steps_back_and_keeps_the_model_it_replaced(tmp_path):
    core = make_core(tmp_path)
    first = core.model.predict(X)
    models = tmp_path / "models"
    trained(1.0).save(models / "a.model")
    trained(2.0).save(models / "b.model")
    assert core.reload(models / "a.model").ok and core.reload(models / "b.model").ok
    ok, message = core.rollback()
    assert ok and "1 previous model left" in message, message
    assert np.array_equal(core.model.predict(X), trained(1.0).predict(X))
    rolled_back = core.history.rolled_back
    assert np.array_equal(RLSModel.load(rolled_back).predict(X), trained(2.0).predict(X))
    ok, message = core.rollback()
    assert ok and "0 previous models left" in message and f"saved as {rolled_back}" in message, message
    assert np.array_equal(core.model.predict(X), first)
    ok, message = core.rollback()  # the model rolled away from is not a rollback target
    assert not ok and "nothing to roll back to" in message and "unchanged" in message, message
    assert np.array_equal(core.model.predict(X), first) and core.version == 4
    assert core.last_rollback != "never"
    assert core.reload(rolled_back).ok  # ~/load_model brings it back
    assert np.array_equal(core.model.predict(X), trained(1.0).predict(X))


def test_closed_no_model_replaces_the_serving_one_until_opened(tmp_path):
    """Between a node's cleanup (or shutdown) and its next configure: a reload, a first model read
    from a file and a rollback are refused with the reason, and change nothing."""
    core = make_core(tmp_path)
    models = tmp_path / "models"
    trained(1.0).save(models / "a.model")
    trained(2.0).save(models / "b.model")
    assert core.reload(models / "a.model").ok
    serving, version = core.model, core.version
    core.close("the node is finalized")
    ok, message = core.reload(models / "b.model")
    assert not ok and "the node is finalized" in message and "previous model kept" in message, message
    ok, message = core.rollback()
    assert not ok and "the node is finalized" in message and "unchanged" in message, message
    with pytest.raises(ValueError, match="the node is finalized"):
        core.swap_loaded(trained(2.0), models / "b.model", None)
    with core.replacing() as closed:
        assert closed == "the node is finalized"
    ok, message = core.reset(lambda: RLSModel(3, 1))
    assert not ok and "the node is finalized" in message, message
    ok, message = core.edit(lambda model: (trained(3.0), "edited"), "edit")
    assert not ok and "the node is finalized" in message, message
    assert core.model is serving and core.version == version
    core.open()
    assert core.reload(models / "b.model").ok and core.rollback().ok
    assert np.array_equal(core.model.predict(X), trained(1.0).predict(X))


def test_nothing_to_roll_back_to_says_why(tmp_path):
    none_kept = make_core(tmp_path / "a", keep=0)
    none_kept.reset(lambda: RLSModel(3, 1))
    ok, message = none_kept.rollback()
    assert not ok and "keep_previous_models is 0" in message, message
    assert not (tmp_path / "a" / "models" / "previous").exists()

    empty = make_core(tmp_path / "b")
    ok, message = empty.rollback()
    assert not ok and "no previous model in" in message, message

    unconfigured = make_core(tmp_path / "c")
    unconfigured.reset(lambda: trained(1.0))
    unconfigured.release()
    ok, message = unconfigured.rollback()
    assert not ok and "no model serves yet" in message, message
    kept = unconfigured.history.files()  # the model reset replaced, and the one cleanup released
    assert len(kept) == 2 and ".before-cleanup." in kept[-1].name, kept


def test_an_unreadable_previous_model_is_moved_aside_and_the_next_rollback_goes_further(tmp_path):
    core = make_core(tmp_path)
    first = core.model.predict(X)
    assert core.reset(lambda: trained(1.0)).ok  # history: first
    assert core.reset(lambda: trained(2.0)).ok  # history: first, trained(1)
    newest = core.history.files()[-1]
    newest.write_bytes(newest.read_bytes()[:200])
    ok, message = core.rollback()
    assert not ok and "unreadable" in message and "moved aside" in message, message
    assert not newest.exists() and len(list(core.history.folder.glob("000002.*.unreadable-*"))) == 1
    assert np.array_equal(core.model.predict(X), trained(2.0).predict(X))
    assert core.rollback().ok
    assert np.array_equal(core.model.predict(X), first)


def test_a_previous_model_that_does_not_fit_now_is_left_in_place(tmp_path):
    core = make_core(tmp_path)
    core.history.folder.mkdir(parents=True)
    core.history.push(RLSModel(4, 1).to_model_file(), "reload", samples=1)
    ok, message = core.rollback()
    assert not ok and "does not fit this node now" in message, message
    assert len(core.history.files()) == 1 and core.version == 0


def test_a_replacement_whose_model_cannot_be_kept_is_refused(tmp_path):
    core = make_core(tmp_path)
    serving = core.model
    core.history.folder.parent.mkdir(parents=True)
    core.history.folder.write_text("in the way")
    ok, message = core.reset(lambda: trained(1.0))
    assert (
        not ok
        and "reset refused, the model is unchanged" in message
        and "keep_previous_models to 0" in message
    )
    trained(1.0).save(tmp_path / "models" / "a.model")
    ok, message = core.reload(tmp_path / "models" / "a.model")
    assert not ok and "refused, previous model kept" in message, message
    assert core.model is serving and core.version == 0


def test_reset_forgets_in_the_same_step_and_refuses_when_no_model_can_be_built(tmp_path):
    core = make_core(tmp_path)
    steps = []
    core.on_swap = lambda model: steps.append("swap")
    ok, message = core.reset(lambda: trained(1.0), lambda: steps.append("forget"))
    assert ok and "kept for ~/rollback as" in message and steps == ["forget", "swap"], message

    def no_model() -> RLSModel:
        raise ValueError("no robot description yet")

    ok, message = core.reset(no_model)
    assert not ok and "no new model can be built: no robot description yet" in message
    assert core.version == 1


def test_announced_paths(tmp_path):
    core = make_core(tmp_path)
    loads = []

    def load(path, digest):
        loads.append((path, digest))
        return core.reload(path, digest)

    models = tmp_path / "models"
    trained(1.0).save(models / "a.model")
    trained(1.0).save(tmp_path / "outside.model")
    trained(1.0).save(tmp_path / "ckpt.model")

    class Other(RLSModel, PersistentModel):
        kind = "another_kind"

    Other(3, 1).save(models / "other.model")
    assert not core.announced("  ", "tuned_model", load).ok
    assert "outside" in core.announced(str(tmp_path / "outside.model"), "tuned_model", load).message
    core.directory.allow_outside = True
    own = core.announced(str(tmp_path / "ckpt.model"), "tuned_model", load)
    assert not own.ok and "is this node's own checkpoint" in own.message, own.message
    assert core.announced(str(models / "other.model"), "tuned_model", load) is None
    assert core.ignored_model_files == 1
    assert core.announced("a.model", "tuned_model", load).ok  # relative: under the model directory
    assert core.announced("a.model", "tuned_model", load) is None  # the serving model already
    assert len(loads) == 1 and core.version == 1
    assert core.report.rejections == {"model reload failed": 1, "path refused": 2}


def test_request_paths_are_confined_to_the_model_directory(tmp_path):
    core = make_core(tmp_path)
    models = tmp_path / "models"
    models.mkdir()
    (models / "notes.txt").write_text("mine")
    assert core.request_path("", for_writing=True) == tmp_path / "ckpt.model"
    assert core.request_path("sub/a.model", for_writing=True) == (models / "sub" / "a.model").resolve()
    for path, writing in (("../x.model", True), (str(tmp_path / "x.model"), False), ("notes.txt", True)):
        with pytest.raises(RefusedError, match="path refused"):
            core.request_path(path, for_writing=writing)
    assert core.report.rejections == {"path refused": 3}
    with pytest.raises(RefusedError, match="no checkpoint_path configured"):
        make_core(tmp_path / "other", checkpoint=False).request_path("", for_writing=False)


def test_write_snapshots_the_serving_model(tmp_path):
    core = make_core(tmp_path)
    core.model.update([1.0, 2.0, 3.0], [1.0])
    core.write(tmp_path / "saved.model")
    assert np.array_equal(RLSModel.load(tmp_path / "saved.model").predict(X), core.model.predict(X))


def test_an_edit_serves_a_changed_copy_keeps_the_model_for_rollback_and_a_refusal_changes_nothing(tmp_path):
    core = make_core(tmp_path)
    first = core.model
    version = core.version

    def refuse(model):
        raise ValueError("not possible")

    ok, message = core.edit(refuse, "forget")
    assert not ok and "not possible" in message and "unchanged" in message
    assert core.model is first and core.version == version and core.history.files() == []

    def add_one(model):
        twin = model.copy()
        twin.update([0.0, 1.0, 1.0], [2.0])
        return twin, "edited"

    ok, message = core.edit(add_one, "undo")
    assert ok and message.startswith("edited") and "kept for ~/rollback" in message
    assert core.model is not first and core.version == version + 1 and core.learned == 1
    assert np.array_equal(first.predict(X), trained(0.5).predict(X))  # the serving model was not changed
    assert ".before-undo." in core.history.files()[-1].name
    assert core.rollback()[0]
    assert np.array_equal(core.model.predict(X), first.predict(X))
