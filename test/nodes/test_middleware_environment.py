"""The Fast DDS profile for large messages: what the shipped file holds, and the one rule
(supervisor.middleware_environment) by which scripts/env.sh, `up` and the demo apply it: set
FASTDDS_DEFAULT_PROFILES_FILE to the shipped file unless the user set one (theirs is kept).
The launch files: test/test_launch_files.py. That the profile delivers camera frames:
test_camera_input.py."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hangs import session_marks

from lifelong_learning.nodes.supervisor import (
    FASTDDS_PROFILE_NAME,
    FASTDDS_PROFILES_VARIABLE,
    fastdds_profile_path,
    middleware_environment,
)

REPO = Path(__file__).resolve().parents[2]
NS = {"dds": "http://www.eprosima.com"}


def test_the_shipped_profile_adds_a_16_mib_shared_memory_segment_and_keeps_udp():
    root = ET.parse(REPO / "config" / FASTDDS_PROFILE_NAME).getroot()
    (descriptor,) = root.findall("dds:profiles/dds:transport_descriptors/dds:transport_descriptor", NS)
    assert descriptor.findtext("dds:type", namespaces=NS) == "SHM"
    assert int(descriptor.findtext("dds:segment_size", namespaces=NS)) == 16 * 2**20
    (participant,) = root.findall("dds:profiles/dds:participant", NS)
    assert participant.get("is_default_profile") == "true"  # applies to every participant of the process
    rtps = participant.find("dds:rtps", NS)
    used = [e.text for e in rtps.findall("dds:userTransports/dds:transport_id", NS)]
    assert used == [descriptor.findtext("dds:transport_id", namespaces=NS)]
    # the builtin transports (UDPv4 + default SHM) stay: robots on other machines still connect
    assert rtps.findtext("dds:useBuiltinTransports", namespaces=NS) == "true"


def test_the_profile_is_set_unless_the_user_set_one():
    path = fastdds_profile_path()
    assert path is not None and path.name == FASTDDS_PROFILE_NAME and path.is_file()
    assert path.read_bytes() == (REPO / "config" / FASTDDS_PROFILE_NAME).read_bytes()
    assert middleware_environment({}) == {FASTDDS_PROFILES_VARIABLE: str(path)}
    assert middleware_environment({FASTDDS_PROFILES_VARIABLE: ""}) == {FASTDDS_PROFILES_VARIABLE: str(path)}
    assert middleware_environment({FASTDDS_PROFILES_VARIABLE: "/robot/mine.xml"}) == {}
    # whatever the RMW: other implementations ignore the variable
    assert middleware_environment({"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}) == {
        FASTDDS_PROFILES_VARIABLE: str(path)
    }


def _source_env_sh(cwd: Path, home: Path, **extra: str) -> str:
    """FASTDDS_DEFAULT_PROFILES_FILE after `source scripts/env.sh` in a clean bash."""
    if not (REPO / "install" / "setup.bash").exists():
        pytest.fail("no colcon install space: run scripts/bootstrap.sh first")
    out = subprocess.run(
        [
            "bash",
            "-c",
            f'source {REPO / "scripts" / "env.sh"} && echo "profile=${FASTDDS_PROFILES_VARIABLE}"',
        ],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), **session_marks(), **extra},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and not out.stderr.strip(), out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1].removeprefix("profile=")


@pytest.mark.parametrize("folder", ["root", "elsewhere"])
def test_env_sh_exports_the_shipped_profile_or_keeps_the_users(folder, tmp_path):
    cwd = REPO if folder == "root" else tmp_path
    exported = Path(_source_env_sh(cwd, tmp_path))
    assert exported.name == FASTDDS_PROFILE_NAME and exported.is_file()
    assert exported.parent.parent.name == "lifelong_learning"  # share/lifelong_learning/config of install/
    assert (
        _source_env_sh(cwd, tmp_path, **{FASTDDS_PROFILES_VARIABLE: "/robot/mine.xml"}) == "/robot/mine.xml"
    )


def test_up_gives_its_nodes_the_profile_or_keeps_the_users(monkeypatch, capsys):
    from lifelong_learning.cli import main
    from lifelong_learning.commands.up import apply_middleware_environment

    robot = str(REPO / "config" / "robot.yaml")
    monkeypatch.delenv(FASTDDS_PROFILES_VARIABLE, raising=False)
    assert main(["up", robot, "--dry-run"]) == 0
    assert f"Fast DDS profile: {FASTDDS_PROFILES_VARIABLE}={fastdds_profile_path()} (shipped" in (
        capsys.readouterr().err
    )
    assert FASTDDS_PROFILES_VARIABLE not in os.environ  # a dry run changes nothing
    assert apply_middleware_environment() == {FASTDDS_PROFILES_VARIABLE: str(fastdds_profile_path())}
    assert os.environ[FASTDDS_PROFILES_VARIABLE] == str(fastdds_profile_path())  # before rclpy.init
    monkeypatch.setenv(FASTDDS_PROFILES_VARIABLE, "/robot/mine.xml")
    assert apply_middleware_environment() == {}
    assert os.environ[FASTDDS_PROFILES_VARIABLE] == "/robot/mine.xml"
    assert "/robot/mine.xml (yours, kept)" in capsys.readouterr().err
