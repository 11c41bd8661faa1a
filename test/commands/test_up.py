"""`lifelong-learning up`: real nodes from a params file, in one process or one per node, stopped
by SIGINT or SIGTERM with a final checkpoint; configuration errors exit 2 before anything starts."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest
from conftest import call_service

from lifelong_learning.cli import main

REPO = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def up(*argv: str) -> int:
    return main(["up", *map(str, argv)])


# --------------------------------------------------------------------------- configuration errors
def test_bad_yaml_is_a_clear_error(tmp_path, capsys):
    bad = write(tmp_path / "bad.yaml", "object_recognition:\n  ros__parameters: {lambdas: [1.0\n")
    assert up(bad, "--dry-run") == 2
    err = capsys.readouterr().err
    assert f"{bad}: not valid YAML" in err and "Traceback" not in err


def test_unknown_node_lists_the_known_ones(tmp_path, capsys):
    cfg = write(tmp_path / "sys.yaml", "object_recognizer:\n  ros__parameters: {alpha: auto}\n")
    assert up(cfg, "--dry-run") == 2
    err = capsys.readouterr().err
    assert "unknown node 'object_recognizer'" in err
    for name in ("feature_extractor", "inverse_dynamics", "nystrom_tuner", "object_recognition"):
        assert name in err
    ok = write(tmp_path / "ok.yaml", "nystrom_tuner:\n  ros__parameters: {}\n")
    assert up(ok, "--nodes", "nystrom_tuner,tuner", "--dry-run") == 2
    assert "--nodes: unknown node(s) tuner; the nodes of lifelong_learning are:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "object_recognition:\n  ros__parameters:\n    lambda: [1.0]\n",
            "node object_recognition declares no parameter 'lambda'",
        ),
        (
            "object_recognition:\n  ros__parameters:\n    warn_period_s: 5\n",
            "object_recognition.warn_period_s is integer 5, the parameter is double (write 5.0)",
        ),
        (
            "object_recognition:\n  ros__parameters:\n    lambdas: [1, 10.0]\n",
            "object_recognition.lambdas is mixed list [1, 10.0], the parameter is double[]",
        ),
        (
            "object_recognition:\n  ros__parameters:\n    alpha: 0.5\n",
            'object_recognition.alpha is double 0.5, the parameter is string (quote it: "0.5")',
        ),
        ("object_recognition:\n  ros__parameters:\n    lambdas: []\n", "lambdas is an empty list"),
        ("object_recognition:\n  alpha: auto\n", "object_recognition: expected 'ros__parameters:'"),
        (
            "/**:\n  ros__parameters: {checkpoint_interval_s: 5.0}\nnystrom_tuner:\n  ros__parameters: {}\n",
            "parameter 'checkpoint_interval_s' is declared by none of the nodes it applies to "
            "(nystrom_tuner)",
        ),
        ("/**:\n  ros__parameters: {warn_period_s: 1.0}\n", "no node to start"),
        ("- object_recognition\n", "expected node names at the top level"),
    ],
)
def test_undeclared_or_mistyped_parameters_are_clear_errors(tmp_path, capsys, text, message):
    cfg = write(tmp_path / "sys.yaml", text)
    assert up(cfg, "--dry-run") == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert str(cfg) in err or "no node to start" in err


def test_shipped_robot_yaml_and_every_config_file_are_valid(capsys):
    assert up(REPO / "config" / "robot.yaml", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "one process: feature_extractor, object_recognition, inverse_dynamics, nystrom_tuner" in out
    # each node's defaults file first, then the user's file
    assert out.index("feature_extractor.yaml") < out.index("robot.yaml")
    assert up(*sorted((REPO / "config").glob("*.yaml")), "--dry-run") == 0


def test_a_key_names_its_node_in_any_namespace(tmp_path, capsys):
    from lifelong_learning.commands.system_config import node_of_key

    assert [
        node_of_key(k) for k in ("inverse_dynamics", "/robot1/inverse_dynamics", "/**/inverse_dynamics")
    ] == ["inverse_dynamics"] * 3
    assert node_of_key("/**") is None and node_of_key("/robot1/*") is None
    cfg = write(
        tmp_path / "sys.yaml",
        "/robot1/nystrom_tuner:\n  ros__parameters: {default_centers: 10}\n"
        "/**/inverse_dynamics:\n  ros__parameters: {n_features: 50}\n",
    )
    assert up(cfg, "--dry-run") == 0
    assert "one process: nystrom_tuner, inverse_dynamics" in capsys.readouterr().out
    bad = write(tmp_path / "bad.yaml", "/**/inverse_dynamics:\n  ros__parameters: {n_feature: 50}\n")
    assert up(bad, "--dry-run") == 2
    assert "node inverse_dynamics declares no parameter 'n_feature'" in capsys.readouterr().err


def test_a_parameter_that_also_takes_auto_takes_a_number_in_range_or_auto(tmp_path, capsys):
    """``forgetting`` (default ``auto``): a number in its range or ``auto``; anything else is refused."""
    for value in ("auto", "0.999", "1"):
        cfg = write(
            tmp_path / "ok.yaml", f"/**/inverse_dynamics:\n  ros__parameters: {{forgetting: {value}}}\n"
        )
        assert up(cfg, "--dry-run") == 0, capsys.readouterr().err
    capsys.readouterr()
    for value, why in (
        ("2.0", "outside the parameter's range [0.5, 1] or auto"),
        ("fast", "a number or auto"),
    ):
        cfg = write(
            tmp_path / "bad.yaml", f"/**/inverse_dynamics:\n  ros__parameters: {{forgetting: {value}}}\n"
        )
        assert up(cfg, "--dry-run") == 2
        assert why in capsys.readouterr().err


def test_processes_dry_run_gives_each_node_its_files_and_the_ros_args(tmp_path, capsys):
    cfg = write(tmp_path / "sys.yaml", "/**:\n  ros__parameters: {use_sim_time: false}\n")
    argv = [cfg, "--nodes", "nystrom_tuner", "--processes", "--dry-run", "--ros-args", "-r", "a:=b"]
    assert up(*argv) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert "-m lifelong_learning.nodes.nystrom_tuner --ros-args --params-file" in line
    assert line.endswith(f"nystrom_tuner.yaml --params-file {cfg} -r a:=b")


# --------------------------------------------------------------------------- real nodes
SYSTEM = """\
/**:
  ros__parameters:
    diagnostics_period_s: 0.0
object_recognition:
  ros__parameters:
    checkpoint_path: "{checkpoint}"
    checkpoint_interval_s: 0.0
nystrom_tuner:
  ros__parameters:
    default_centers: 10
"""


def wait_for_services(executor, spin, peer, proc) -> None:
    from lifelong_learning.action import TuneModel
    from lifelong_learning.srv import GetClassifierInfo
    from rclpy.action import ActionClient

    client = peer.create_client(GetClassifierInfo, "/object_recognition/info")
    assert spin(executor, client.service_is_ready, 60), f"/object_recognition/info not offered:\n{proc.log()}"
    action = ActionClient(peer, TuneModel, "/nystrom_tuner/tune")
    assert spin(executor, action.server_is_ready, 60), f"/nystrom_tuner/tune not offered:\n{proc.log()}"


def teach(executor, spin, peer, labels=("mug", "duck")) -> None:
    """Teach object_recognition one sample per label (reliable topic), until its info shows them."""
    from lifelong_learning.msg import LabeledFeatures
    from lifelong_learning.srv import GetClassifierInfo
    from rclpy.qos import QoSProfile

    pub = peer.create_publisher(LabeledFeatures, "labeled_features", QoSProfile(depth=100))
    assert spin(executor, lambda: pub.get_subscription_count() > 0, 30)
    for i, label in enumerate(labels):
        pub.publish(LabeledFeatures(data=[float(i == k) for k in range(4)], label=label))
    client = peer.create_client(GetClassifierInfo, "/object_recognition/info")

    def seen() -> int:  # a query, sent again every 3 s: a first reply may be lost before discovery matched
        request = GetClassifierInfo.Request()
        return call_service(executor, client, request, 30, answer_timeout=3, attempts=10).samples_seen

    assert spin(executor, lambda: seen() == len(labels), 20)


@pytest.mark.graph
@pytest.mark.parametrize(
    ("mode", "sig"),
    [
        ("one process", signal.SIGINT),
        ("one process", signal.SIGTERM),
        # the children always get one SIGINT from `up`; SIGINT to `up` itself: the next test
        ("--processes", signal.SIGTERM),
    ],
    ids=["one-process-SIGINT", "one-process-SIGTERM", "processes-SIGTERM"],
)
def test_up_runs_real_nodes_and_stops_with_a_final_checkpoint(
    executor, spin, start_process, tmp_path, mode, sig
):
    from rclpy.node import Node

    from lifelong_learning.core.model_file import load_model_file
    from lifelong_learning.learners.rlsc import IncrementalRLSC

    checkpoint = tmp_path / "ckpt" / "object_recognition.llm"
    cfg = write(tmp_path / "system.yaml", SYSTEM.format(checkpoint=checkpoint))
    exe = shutil.which("lifelong-learning")
    assert exe, "lifelong-learning is not on PATH (source install/setup.bash)"
    proc = start_process([exe, "up", str(cfg), *(["--processes"] if mode == "--processes" else [])])
    peer = Node("up_test_peer", context=executor.context)
    executor.add_node(peer)
    wait_for_services(executor, spin, peer, proc)
    teach(executor, spin, peer)
    assert not checkpoint.exists()  # only the final checkpoint writes it (interval 0)
    if sig == signal.SIGINT:  # a terminal and `ros2 launch` may both send one: the second is ignored
        proc.proc.send_signal(sig)
    code = proc.stop(sig)
    log = proc.log_path.read_text()  # (the log file is closed once stopped)
    assert code == 0, log
    assert "final checkpoint written to" in log and "Traceback" not in log, log
    model = IncrementalRLSC.from_model_file(load_model_file(checkpoint, kind=IncrementalRLSC.kind))
    assert sorted(model.classes_.tolist()) == ["duck", "mug"]
    if mode == "--processes":
        assert "[object_recognition] " in log and "nystrom_tuner stopped with status 0" in log


@pytest.mark.graph
def test_a_child_that_fails_is_reported_and_the_exit_status_is_non_zero(
    executor, spin, start_process, tmp_path
):
    from lifelong_learning.action import TuneModel
    from rclpy.action import ActionClient
    from rclpy.node import Node

    cfg = write(
        tmp_path / "system.yaml",
        "object_recognition:\n  ros__parameters: {lambdas: [-1.0]}\nnystrom_tuner:\n  ros__parameters: {}\n",
    )
    proc = start_process([shutil.which("lifelong-learning"), "up", str(cfg), "--processes"])
    assert spin(executor, lambda: "object_recognition exited early with status 2" in proc.log(), 60), (
        proc.log()
    )
    peer = Node("up_test_peer", context=executor.context)
    executor.add_node(peer)
    client = ActionClient(peer, TuneModel, "/nystrom_tuner/tune")
    assert spin(executor, client.server_is_ready, 60), proc.log()  # the other node keeps running
    assert proc.alive()
    code = proc.stop(signal.SIGINT)
    log = proc.log_path.read_text()
    assert code == 1 and "nystrom_tuner stopped with status 0" in log, log
