"""LearnerNode: services, checkpoints (failed ones retried), hot swap, confined paths, counted rejections
and the diagnostics level, with a real RLS model."""

import os
import time

import numpy as np
import pytest
from conftest import DiagnosticsReader, RLSModel, model_file_message, model_sender, node_argv

from lifelong_learning.learners import RecursiveRLS

pytestmark = pytest.mark.graph

NODE = "rls_node"  # make_node's


def make_node(context, **params):
    from rclpy.parameter import Parameter

    from lifelong_learning.nodes.base import ParamSpec
    from lifelong_learning.nodes.learner import LearnerNode

    class RLSNode(LearnerNode):
        model_class = RLSModel

        def __init__(self):
            overrides = [Parameter(k, value=v) for k, v in params.items()]
            super().__init__(
                NODE,
                (ParamSpec("dim", 3, "input dimension"),),
                context=context,
                parameter_overrides=overrides,
            )
            self.start_learner()

        def new_model(self):
            return RLSModel(int(self.params["dim"]), 1, lam=1.0)

        def check_model(self, model):
            if model.n_features != int(self.params["dim"]):
                raise ValueError("dimension mismatch")

        def learn(self, x, y):
            with self.model_lock:
                try:
                    self.model.update(x, y)
                except ValueError as exc:
                    self.reject("bad sample", str(exc))
                    return
                self.serving.count_updates()

    return RLSNode()


def sent_model() -> RLSModel:
    """The model a test sends to the node: one sample learned (its answers differ from a fresh one's)."""
    model = RLSModel(3, 1, lam=1.0)
    model.update([1.0, 2.0, 3.0], [1.0])
    return model


def test_save_load_reset_and_failed_load_keeps_model(executor, call, tmp_path):
    from lifelong_learning.srv import LoadModel, SaveModel
    from std_srvs.srv import Trigger

    node = make_node(
        executor.context,
        checkpoint_path=str(tmp_path / "ckpt.llm"),
        diagnostics_period_s=0.0,
        model_directory=str(tmp_path),
    )
    executor.add_node(node)
    save = node.create_client(SaveModel, "/rls_node/save_model")
    load = node.create_client(LoadModel, "/rls_node/load_model")
    reset = node.create_client(Trigger, "/rls_node/reset")
    node.learn([1.0, 2.0, 3.0], [1.0])
    x = np.array([[1.0, 2.0, 3.0]])
    trained = node.model.predict(x)
    assert call(save, SaveModel.Request(path=str(tmp_path / "a.llm")), timeout=10).success
    call(reset, Trigger.Request(), timeout=10)
    assert np.allclose(node.model.predict(x), 0.0)

    (tmp_path / "bad.llm").write_bytes(b"garbage")
    RLSModel(4, 1).save(tmp_path / "wrongdim.llm")
    for bad in ("bad.llm", "wrongdim.llm", "absent.llm"):
        res = call(load, LoadModel.Request(path=str(tmp_path / bad)), timeout=10)
        assert not res.success and "previous model kept" in res.message
    assert np.allclose(node.model.predict(x), 0.0)
    version = node.model_version
    res = call(load, LoadModel.Request(path=str(tmp_path / "a.llm")), timeout=10)
    assert res.success and node.model_version == version + 1
    assert np.array_equal(node.model.predict(x), trained)
    # The reloaded model, not the one before it, is what the next checkpoint holds.
    assert node.checkpoint()
    from lifelong_learning.core.model_file import load_model_file

    mf = load_model_file(tmp_path / "ckpt.llm")
    saved = RecursiveRLS.from_state(mf.meta, mf.arrays)
    assert np.array_equal(saved.predict(x), trained)


def test_after_cleanup_and_configure_a_latched_model_is_loaded_again(executor, spin, tmp_path):
    """Cleanup releases the model and what the node knew of it: configured again without a
    checkpoint (a fresh model serves), the latched model delivered anew is loaded, not skipped as
    "already the serving model"."""

    from rclpy.serialization import serialize_message

    topic = "cleanup_test_model_data"
    node = make_node(
        executor.context,
        model_directory=str(tmp_path),
        checkpoint_path="",  # no checkpoint: configure builds a fresh model
        model_topic="",
        model_data_topic=topic,
        diagnostics_period_s=0.0,
    )
    executor.add_node(node)
    sent = sent_model()
    message = model_file_message(sent, tmp_path, "sent.llm")
    x = np.eye(3)
    with model_sender(f"/{topic}") as send:  # latched (transient local), from another process
        try:
            send(serialize_message(message))
            assert spin(executor, lambda: node.model_version == 1, 20)
            assert np.array_equal(node.model.predict(x), sent.predict(x))
            node.trigger_deactivate()
            node.trigger_cleanup()
            assert node.model is None
            node.trigger_configure()  # a fresh model; the latched message comes again
            assert spin(executor, lambda: node.model_version == 2, 20), node.serving.received.last
            assert np.array_equal(node.model.predict(x), sent.predict(x))
        finally:
            node.shutdown()  # the receiver's reader goes before the sender's writer


def test_a_finalized_node_takes_no_model_as_bytes(executor, spin, tmp_path):
    """Lifecycle shutdown ends the model data receiver (its reader leaves the graph) and a model
    the receiver had in hand is refused and counted: a finalized node's model never changes."""

    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.node import Node
    from rclpy.serialization import serialize_message

    from lifelong_learning.nodes.learner import FINALIZED
    from lifelong_learning.nodes.model_data import parse_model_file

    topic = "finalized_test_model_data"
    node = make_node(
        executor.context,
        model_directory=str(tmp_path),
        checkpoint_path="",
        model_topic="",
        model_data_topic=topic,
        diagnostics_period_s=0.0,
    )
    executor.add_node(node)
    peer = Node("finalized_test_peer", context=executor.context)
    executor.add_node(peer)
    raw = serialize_message(model_file_message(sent_model(), tmp_path, "sent.llm"))
    sent_model().save(tmp_path / "sent.llm")  # for a reload
    assert spin(executor, lambda: peer.count_subscribers(f"/{topic}") == 1, 20)
    node.trigger_shutdown()
    assert node.finalized
    assert spin(executor, lambda: peer.count_subscribers(f"/{topic}") == 0, 20)  # the receiver is gone
    header = parse_model_file(raw)
    node._on_model_data(header, memoryview(raw)[header.data_offset :])  # one it had in hand
    assert node.model_version == 0 and node.rejections.counts.get(FINALIZED) == 1
    ok, message = node.reload(tmp_path / "sent.llm")  # one promoted or loaded while it shut down
    assert not ok and "finalized" in message and node.model_version == 0, message
    assert node.on_error(None) == TransitionCallbackReturn.FAILURE  # a failed shutdown stays finalized


def test_between_cleanup_and_configure_no_model_is_loaded(executor, tmp_path):
    """A model read while the node cleans up (a reload under way, a promotion) is refused, and one
    received as bytes is refused before it is written; configured again, the node loads models."""
    from rclpy.serialization import serialize_message

    from lifelong_learning.nodes.learner import MODEL_WHILE_CLOSED
    from lifelong_learning.nodes.model_data import parse_model_file

    node = make_node(executor.context, model_directory=str(tmp_path), checkpoint_path="", model_topic="")
    executor.add_node(node)
    sent = sent_model()
    sent.save(tmp_path / "sent.llm")
    node.trigger_deactivate()
    node.trigger_cleanup()
    ok, message = node.reload(tmp_path / "sent.llm")
    assert not ok and "not configured" in message and node.model is None, message
    raw = serialize_message(model_file_message(sent, tmp_path, "bytes.llm"))
    header = parse_model_file(raw)
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    node._on_model_data(header, memoryview(raw)[header.data_offset :])  # received meanwhile
    assert node.rejections.counts.get(MODEL_WHILE_CLOSED) == 1 and node.model is None
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == files  # nothing written
    node.trigger_configure()
    assert node.reload(tmp_path / "sent.llm").ok
    assert np.array_equal(node.model.predict(np.eye(3)), sent.predict(np.eye(3)))


def test_checkpoint_on_shutdown_restore_and_corrupt_checkpoint_moved_aside(executor, tmp_path):
    ckpt = tmp_path / "ckpt.llm"
    node = make_node(executor.context, checkpoint_path=str(ckpt), diagnostics_period_s=0.0)
    node.learn([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[2.0], [3.0]])
    node.shutdown()
    expected = node.model.predict(np.eye(3))
    node.destroy_node()

    restored = make_node(executor.context, checkpoint_path=str(ckpt), diagnostics_period_s=0.0)
    assert np.array_equal(restored.model.predict(np.eye(3)), expected)
    restored.destroy_node()

    ckpt.write_bytes(ckpt.read_bytes()[:100])
    fresh = make_node(executor.context, checkpoint_path=str(ckpt), diagnostics_period_s=0.0)
    assert np.allclose(fresh.model.predict(np.eye(3)), 0.0)
    assert not ckpt.exists() and len(list(tmp_path.glob("ckpt.llm.unreadable-*"))) == 1
    fresh.destroy_node()


def test_rejections_counted_and_diagnostics_published(executor, spin):
    node = make_node(executor.context, diagnostics_period_s=0.1)
    executor.add_node(node)
    diag = diagnostics_listener(executor)
    for _ in range(5):
        node.learn([np.nan, 0.0, 0.0], [1.0])
    node.learn([1.0, 0.0], [1.0])
    assert node.rejections.counts == {"bad sample": 6}
    assert node.model.n_samples == 0

    assert spin(executor, lambda: diag.count(NODE, "rejected") == 6, 10)


def test_bad_configuration_exits_with_a_clear_error_not_a_traceback(tmp_path, built_interfaces):
    import subprocess

    argv = node_argv(
        "object_recognition", "-p", "lambdas:=[-1.0]", "-p", "diagnostics_period_s:=0.0", params_file=False
    )
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 2
    assert "cannot start the node: lambdas must be positive" in res.stderr
    assert "Traceback" not in res.stderr


def diagnostics_listener(executor):
    """A node reading /diagnostics (a :class:`DiagnosticsReader`), spun by ``executor``."""
    from rclpy.node import Node

    listener = Node("diag_listener", context=executor.context)
    executor.add_node(listener)
    return DiagnosticsReader(listener, depth=100)


def test_diagnostics_warn_while_rejections_rise_and_return_to_ok(executor, spin):
    from diagnostic_msgs.msg import DiagnosticStatus

    node = make_node(executor.context, diagnostics_period_s=0.1)
    executor.add_node(node)
    diag = diagnostics_listener(executor)
    statuses = diag.statuses(NODE)
    assert spin(executor, lambda: len(statuses) > 2, 10)
    assert statuses[-1].level == DiagnosticStatus.OK and statuses[-1].message == "running"
    for _ in range(3):
        node.learn([np.nan, 0.0, 0.0], [1.0])
    node.dropped += 2
    assert spin(executor, lambda: statuses[-1].level == DiagnosticStatus.WARN, 10)
    warned = statuses[-1].message
    assert "3 inputs rejected in the last" in warned and "(bad sample: 3)" in warned, warned
    assert "2 messages dropped in the last" in warned, warned
    # nothing new since: the next publication is OK again
    assert spin(executor, lambda: statuses[-1].level == DiagnosticStatus.OK, 10)
    assert statuses[-1].message == "running"
    assert diag.values(NODE)["rejected"] == "3"


def modes_do_not_stop_writes(directory):
    """Whether this process can create a file in a directory of mode 0o500 (root can)."""
    directory.mkdir()
    directory.chmod(0o500)
    try:
        (directory / "file").write_text("x")
    except PermissionError:
        return False
    finally:
        directory.chmod(0o700)
    return True


class Unwritable:
    """Make ``directory`` unwritable: chmod 0o500 (as a user), or (as root, whom modes do not stop)
    replace it by a file, so that no file can be created under its path."""

    def __init__(self, directory, how):
        self.directory, self.how = directory, how
        self.aside = directory.with_name(directory.name + ".aside")

    def __enter__(self):
        if self.how == "chmod":
            self.directory.chmod(0o500)
        else:
            self.directory.rename(self.aside)
            self.directory.write_text("not a directory")
        return self

    def __exit__(self, *exc):
        if self.how == "chmod":
            self.directory.chmod(0o700)
        else:
            self.directory.unlink()
            self.aside.rename(self.directory)


@pytest.mark.parametrize("how", ["chmod", "parent is a file"])
def test_a_failed_checkpoint_is_retried_reported_at_error_and_written_on_shutdown(
    executor, spin, tmp_path, how
):
    from diagnostic_msgs.msg import DiagnosticStatus

    from lifelong_learning.core.model_file import load_model_file

    folder = tmp_path / "checkpoints"
    folder.mkdir()
    if how == "chmod" and modes_do_not_stop_writes(tmp_path / "probe"):
        pytest.skip("this user (root) writes regardless of the directory's mode")
    ckpt = folder / "ckpt.llm"
    node = make_node(
        executor.context, checkpoint_path=str(ckpt), checkpoint_interval_s=0.2, diagnostics_period_s=0.1
    )
    executor.add_node(node)
    diag = diagnostics_listener(executor)
    statuses = diag.statuses(NODE)

    def saved():
        return int(load_model_file(ckpt).meta["n_samples"]) if ckpt.is_file() else -1

    rng = np.random.default_rng(0)
    node.learn(rng.normal(size=3), [1.0])
    assert spin(
        executor, lambda: saved() == 1 and diag.values(NODE).get("last checkpoint", "never") != "never", 10
    )
    assert statuses[-1].level == DiagnosticStatus.OK
    written = diag.values(NODE)["last checkpoint"]

    with Unwritable(folder, how):
        node.learn(rng.normal(size=3), [1.0])
        assert spin(executor, lambda: statuses[-1].level == DiagnosticStatus.ERROR, 10)
        assert "checkpoint failing" in statuses[-1].message and written in statuses[-1].message
        assert (
            diag.values(NODE)["last checkpoint error"] != "none"
            and diag.values(NODE)["last checkpoint"] == written
        )
        for _ in range(3):  # learning goes on while checkpoints fail
            node.learn(rng.normal(size=3), [1.0])
        assert node.model.n_samples == 5
        spin(executor, lambda: False, 0.5)  # several failed ticks
        assert statuses[-1].level == DiagnosticStatus.ERROR
    # writable again: the next tick writes everything, and the level returns to OK
    assert spin(executor, lambda: saved() == 5, 10)
    assert spin(executor, lambda: statuses[-1].level == DiagnosticStatus.OK, 10)
    assert diag.values(NODE)["last checkpoint error"] == "none"

    # fails again, then the disk recovers before the next tick: the final checkpoint writes it
    with Unwritable(folder, how):
        node.learn(rng.normal(size=3), [1.0])
        assert spin(executor, lambda: node.checkpoint_error is not None, 10)
    node.shutdown()
    assert saved() == 6 and node.checkpoint_error is None


def test_checkpoint_path_that_is_not_a_file_refuses_to_start(executor, tmp_path):
    from lifelong_learning.core.files import UnsafePathError

    (tmp_path / "a_directory").mkdir()
    (tmp_path / "link.llm").symlink_to(tmp_path / "target.llm")
    os.mkfifo(tmp_path / "fifo")
    for name, what in (("a_directory", "directory"), ("link.llm", "symbolic link"), ("fifo", "special file")):
        with pytest.raises(UnsafePathError, match=f"checkpoint_path .*{what}"):
            make_node(executor.context, checkpoint_path=str(tmp_path / name), diagnostics_period_s=0.0)
    assert (tmp_path / "a_directory").is_dir() and sorted(p.name for p in tmp_path.iterdir()) == [
        "a_directory",
        "fifo",
        "link.llm",
    ]


def test_stale_temporaries_are_removed_at_start(executor, tmp_path):
    ckpt_dir, models = tmp_path / "ckpt", tmp_path / "models"
    ckpt_dir.mkdir()
    models.mkdir()
    killed = ckpt_dir / ".ckpt.llm.k1ll3d_x.tmp"  # what a SIGKILL mid-checkpoint leaves
    other = ckpt_dir / ".someone_else.llm.abcdefgh.tmp"  # not this node's: left alone
    old_save = models / ".saved.llm.0ld5ave_.tmp"
    recent = models / ".tuned.llm.n0w_n0w_.tmp"  # maybe a tuner writing right now: left alone
    for p in (killed, other, old_save, recent):
        p.write_bytes(b"half a model")
    os.utime(old_save, (time.time() - 3600, time.time() - 3600))
    node = make_node(
        executor.context,
        checkpoint_path=str(ckpt_dir / "ckpt.llm"),
        model_directory=str(models),
        diagnostics_period_s=0.0,
    )
    assert not killed.exists() and not old_save.exists()
    assert other.exists() and recent.exists()
    node.destroy_node()


def test_save_load_and_announced_paths_are_confined_to_the_model_directory(executor, call, spin, tmp_path):
    from lifelong_learning.srv import LoadModel, SaveModel
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String

    models = tmp_path / "models"
    node = make_node(executor.context, model_directory=str(models), diagnostics_period_s=0.0)
    executor.add_node(node)
    save = node.create_client(SaveModel, "/rls_node/save_model")
    load = node.create_client(LoadModel, "/rls_node/load_model")
    node.learn([1.0, 2.0, 3.0], [1.0])
    assert call(save, SaveModel.Request(path="sub/a.llm"), timeout=10).success  # relative: under it
    assert RLSModel.load(models / "sub" / "a.llm").n_samples == 1
    RLSModel(3, 1).save(tmp_path / "outside.llm")
    (models / "notes.txt").write_text("mine")
    refused = {
        "outside": (save, SaveModel.Request(path=str(tmp_path / "x.llm"))),
        "escape": (save, SaveModel.Request(path="../x.llm")),
        "not ours": (save, SaveModel.Request(path="notes.txt")),
        "load outside": (load, LoadModel.Request(path=str(tmp_path / "outside.llm"))),
    }
    for n, (name, (client, request)) in enumerate(refused.items(), start=1):
        res = call(client, request, timeout=10)
        assert not res.success and "path refused" in res.message, (name, res.message)
        assert node.rejections.counts["path refused"] == n
    assert not (tmp_path / "x.llm").exists() and (models / "notes.txt").read_text() == "mine"
    assert node.model.n_samples == 1 and node.model_version == 0
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    announce = node.create_publisher(String, "tuned_model", latched)
    announce.publish(String(data=str(tmp_path / "outside.llm")))
    assert spin(executor, lambda: node.rejections.counts["path refused"] == 5, 10)
    assert node.model.n_samples == 1 and node.model_version == 0


def test_a_checkpoint_whose_header_claims_8_tib_is_moved_aside_and_the_node_starts_fresh(executor, tmp_path):
    from conftest import write_oversized_model_file

    ckpt = write_oversized_model_file(tmp_path / "ckpt.llm", RLSModel.kind)
    t0 = time.monotonic()
    node = make_node(executor.context, checkpoint_path=str(ckpt), diagnostics_period_s=0.0)
    assert time.monotonic() - t0 < 10.0
    assert node.model.n_samples == 0 and node.last_checkpoint == "never"
    assert not ckpt.exists() and len(list(tmp_path.glob("ckpt.llm.unreadable-*"))) == 1
    node.learn([1.0, 0.0, 0.0], [1.0])
    node.shutdown()  # and its next checkpoint is a good one
    assert RLSModel.load(ckpt).n_samples == 1
    node.destroy_node()


def test_a_checkpoint_path_that_is_a_directory_exits_2_and_leaves_the_directory(tmp_path, built_interfaces):
    import subprocess

    directory = tmp_path / "checkpoints"
    (directory / "sub").mkdir(parents=True)
    argv = node_argv(
        "object_recognition", "-p", f"checkpoint_path:={directory}", "-p", "diagnostics_period_s:=0.0"
    )
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert (
        f"cannot start the node: checkpoint_path '{directory}'" in res.stderr
        and "is a directory" in res.stderr
    )
    assert "Traceback" not in res.stderr
    assert (directory / "sub").is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints"]


def test_checkpoints_are_written_off_the_callback_path(executor, spin, tmp_path, monkeypatch):
    """A slow disk (each write takes 1 s here) does not hold up the executor: other callbacks run
    while the timer's checkpoint is being written, and the final checkpoint waits for it."""
    import threading

    from lifelong_learning.core import model_file
    from lifelong_learning.core.model_file import load_model_file
    from lifelong_learning.serving import checkpoints

    slow_write = model_file.save_model_file
    seen = threading.Event()  # set once the test has seen the executor run on during the write

    def save_slowly(path, snap):
        time.sleep(1.0)
        seen.wait(30)  # and on until then: however loaded the machine, the ticks come during the write
        slow_write(path, snap)

    monkeypatch.setattr(checkpoints, "save_model_file", save_slowly)
    ckpt = tmp_path / "ckpt.llm"
    node = make_node(executor.context, checkpoint_path=str(ckpt), checkpoint_interval_s=0.2)
    executor.add_node(node)
    ticks: list[float] = []
    timer = node.create_timer(0.02, lambda: ticks.append(time.monotonic()))
    node.learn(np.ones(3), [1.0])
    assert spin(
        executor, lambda: node._checkpoint_writer is not None and node._checkpoint_writer.is_alive(), 5
    )
    before = len(ticks)
    # while the write runs: a timer callback every 20 ms, none if the executor waits for the disk
    assert spin(executor, lambda: len(ticks) - before >= 10, 20), "the executor waited for the disk"
    assert node._checkpoint_writer.is_alive()
    node.learn(np.ones(3), [2.0])  # learned during the write: pending for the final checkpoint
    seen.set()
    node.destroy_timer(timer)
    node.shutdown()  # waits for the timer's write, then writes what came after
    assert int(load_model_file(ckpt).meta["n_samples"]) == 2
