"""benchmarks/harness/: latencies, node parameters, the per-seed runner, a node under test."""

from __future__ import annotations

import json
import math
import os
import re
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from harness import (  # benchmarks/ is not a package: on sys.path above
    Latencies,
    NodeUnderTest,
    param_args,
    per_seed_table,
    percentiles,
    private_domain,
    provenance_line,
    run_seeds,
)


def test_percentiles_interpolate_and_are_nan_without_values() -> None:
    assert percentiles([1.0, 2.0, 3.0, 4.0, 5.0], (0, 50, 100)) == (1.0, 3.0, 5.0)
    assert percentiles(range(101), (99,)) == (99.0,)
    assert all(math.isnan(v) for v in percentiles([], (50, 99)))


def test_latencies_count_the_first_answer_to_each_request_sent() -> None:
    now = [10.0]
    latencies = Latencies(clock=lambda: now[0])
    latencies.send("a")
    latencies.send("b")
    now[0] = 10.5
    latencies.receive("a")
    latencies.receive("a", at=20.0)  # a second answer: ignored
    latencies.receive("never sent")
    latencies.receive("b", at=12.0)
    assert latencies.answered == 2
    assert latencies.latency == {"a": 0.5, "b": 2.0}
    assert latencies.percentiles((0, 100)) == (0.5, 2.0)
    latencies.clear()
    latencies.receive("a")  # sent before the clear: ignored
    assert latencies.answered == 0


def test_param_args_are_typed_as_ros_args_read_them() -> None:
    params = {"learning": False, "n_features": 500, "rate": 250.0, "joints": ["a", "b"], "path": Path("/x")}
    assert param_args(params) == [
        "learning:=false",
        "n_features:=500",
        "rate:=250.0",
        "joints:=[a,b]",
        "path:=/x",
    ]


def test_private_domain_keeps_a_chosen_id_and_draws_one_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROS_DOMAIN_ID", "42")
    monkeypatch.delenv("ROS_AUTOMATIC_DISCOVERY_RANGE", raising=False)
    assert private_domain() == "42"
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    monkeypatch.delenv("ROS_DOMAIN_ID")
    assert 1 <= int(private_domain()) <= 101


def test_provenance_line_names_the_commit_and_the_load() -> None:
    assert re.fullmatch(r"Git [0-9a-f]*, load average before: \S+ \S+ \S+", provenance_line())


def test_run_seeds_writes_the_report_and_the_results(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "report.md"

    def report(results: list, seconds: float) -> str:
        assert seconds >= 0
        return "\n".join(per_seed_table(results, ".1f")) + "\n"

    results = run_seeds([0, 1], lambda seed: {"seed": seed, "model": seed + 0.5}, report, out)
    assert results == [{"seed": 0, "model": 0.5}, {"seed": 1, "model": 1.5}]
    assert (
        out.read_text()
        == "| model | seed 0 | seed 1 | mean |\n|---|---:|---:|---:|\n| model | 0.5 | 1.5 | 1.0 |\n"
    )
    assert json.loads(out.with_suffix(".json").read_text()) == results
    assert "| model | 0.5 | 1.5 | 1.0 |" in capsys.readouterr().out

    rows = run_seeds([3], lambda seed: [{"seed": seed}, {"seed": seed}], lambda r, s: "", None, flatten=True)
    assert rows == [{"seed": 3}, {"seed": 3}]


def test_run_seeds_in_worker_processes_keeps_the_seeds_order() -> None:
    here, offset = os.getpid(), 10  # a closure: the workers are forked, nothing is pickled but results

    def one_seed(seed: int) -> dict:
        return {"seed": seed, "value": seed + offset, "pid": os.getpid()}

    results = run_seeds([2, 0, 1], one_seed, lambda r, s: "", None, jobs=2)
    assert [(r["seed"], r["value"]) for r in results] == [(2, 12), (0, 10), (1, 11)]
    assert here not in {r["pid"] for r in results}
    # one process per seed (maxtasksperchild=1): no seed inherits what another left in memory
    assert len({r["pid"] for r in results}) == 3


def test_node_under_test_needs_a_node_or_a_command() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        NodeUnderTest()
    with pytest.raises(ValueError, match="exactly one"):
        NodeUnderTest("object_recognition", argv=["true"])


class _Steps:
    """Stand-ins for the executor, the peer and the process of a NodeUnderTest: each records its
    step; ``failing``: the steps that raise."""

    def __init__(self, bench: NodeUnderTest, failing: tuple[str, ...] = ()) -> None:
        self.done: list[str] = []
        self.failing = failing
        bench.executor, bench.peer, bench.process, bench.context = self, self, self, object()

    def _step(self, name: str) -> None:
        self.done.append(name)
        if name in self.failing:
            raise RuntimeError(f"{name} failed")

    def shutdown(self, timeout_sec: float | None = None) -> None:
        self._step("executor shut down")

    def destroy_node(self) -> None:
        self._step("peer destroyed")

    def stop(self, timeout: float) -> int:
        self._step("process stopped")
        return 0


@pytest.mark.parametrize("failing", [(), ("executor shut down",), ("peer destroyed",)])
def test_on_exit_every_step_runs_in_order_even_after_one_failed(monkeypatch, failing) -> None:
    """The executor is shut down before the context, and the node's process stopped, whatever failed."""
    import rclpy

    bench = NodeUnderTest(argv=["true"])
    steps = _Steps(bench, failing)
    monkeypatch.setattr(rclpy, "try_shutdown", lambda context: steps.done.append("context shut down"))
    if failing:
        with pytest.raises(RuntimeError, match=f"{failing[0]} failed"):
            bench.__exit__(None, None, None)
    else:
        bench.__exit__(None, None, None)
    assert steps.done == ["executor shut down", "peer destroyed", "context shut down", "process stopped"]


def test_a_temporary_folder_is_removed_unless_the_block_failed(tmp_path, monkeypatch) -> None:
    import rclpy

    monkeypatch.setattr(rclpy, "try_shutdown", lambda context: None)
    for error in (None, RuntimeError("the measurement failed")):
        bench = NodeUnderTest(argv=["true"], name="stand-in")
        _Steps(bench)
        bench.folder, bench.temporary_folder = tmp_path / "temporary", True
        bench.folder.mkdir()
        bench.__exit__(None if error is None else RuntimeError, error, None)
        assert bench.folder.exists() == (error is not None)
    assert error.__notes__ == [f"stand-in's output: {tmp_path / 'temporary' / 'node.log'} (kept)"]
    given = NodeUnderTest(argv=["true"], folder=tmp_path / "given")
    _Steps(given)
    given.folder.mkdir()
    given.__exit__(None, None, None)
    assert given.folder.exists()  # the caller's


def test_a_peer_that_still_spins_after_the_block_is_an_error() -> None:
    release = threading.Event()

    class Blocked:
        def spin_once(self, timeout_sec: float) -> None:
            release.wait(10)  # a callback that blocks

    bench = NodeUnderTest(argv=["true"], name="stand-in")
    bench.executor, bench.SPIN_JOIN_S = Blocked(), 0.1
    try:
        with pytest.raises(RuntimeError, match=r"stand-in: the peer still spins 0.1 s"), bench.spinning():
            pass
    finally:
        release.set()


def test_wait_for_checks_at_the_period_asked() -> None:
    """bench_vision publishes a frame at each check while the node loads: 5 a second, as before."""
    waits: list[float] = []

    class Recording:
        def spin_once(self, timeout_sec: float) -> None:
            waits.append(timeout_sec)

    bench = NodeUnderTest(argv=["true"])
    bench.executor = Recording()
    bench.wait_for(lambda: len(waits) == 3, 10, "three checks", period=0.2)
    assert waits == [0.2, 0.2, 0.2]


@pytest.mark.graph
def test_node_under_test_starts_the_node_on_a_private_graph_and_stops_it(tmp_path: Path) -> None:
    from lifelong_learning.msg import LabeledFeatures

    params = {"model_directory": tmp_path, "diagnostics_period_s": 0.0}
    with NodeUnderTest("object_recognition", params=params, folder=tmp_path) as bench:
        publisher = bench.peer.create_publisher(LabeledFeatures, "labeled_features", 10)
        bench.wait_for(lambda: publisher.get_subscription_count() > 0, 60, "subscribed to labeled_features")
        assert bench.process.alive()
        with pytest.raises(RuntimeError, match=r"never: not within 0.2 s \(running\)"):
            bench.wait_for(lambda: False, 0.2, "never")
    assert bench.process.returncode == 0
    assert (tmp_path / "node.log").is_file()
