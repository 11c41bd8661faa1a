"""`pip install .` in a clean venv gives the ROS-free library and the `lifelong-learning` command."""

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

CHECK = """
import sys
import numpy as np
import lifelong_learning, lifelong_learning.learners, lifelong_learning.io
from lifelong_learning.learners import RecursiveRLS
rls = RecursiveRLS(4, 2, lam=0.1)
rls.update(np.eye(4), np.ones((4, 2)))
assert np.allclose(rls.predict(np.eye(4)), 1 / 1.1)
from lifelong_learning.vision.room_directions import RoomDirections  # room-directions' numerics
room = RoomDirections.fit(np.r_[np.eye(4), 2 * np.eye(4)], list("abcd") * 2, [0] * 4 + [1] * 4, 2)
assert np.allclose(np.linalg.norm(room.project(np.ones((3, 4))), axis=1), 16.0)
for name in ("rclpy", "torch", "cv2"):
    assert name not in sys.modules, name + " was imported"
print("ok", lifelong_learning.__file__)
"""


def clean_env() -> dict[str, str]:
    """The environment of a shell with neither the venv nor the ROS overlay."""
    drop = (
        "PYTHONPATH",
        "LD_LIBRARY_PATH",
        "AMENT_PREFIX_PATH",
        "CMAKE_PREFIX_PATH",
        "COLCON_PREFIX_PATH",
        "VIRTUAL_ENV",
        "PYTHONHOME",
    )
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("ROS_WHEELS")}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p and "install" not in p
    )
    return env


@pytest.mark.slow
def test_pip_install_gives_ros_free_library_and_cli(tmp_path):
    src = tmp_path / "src"  # a copy, so that the build leaves nothing in the repository
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(
            ".venv", "build", "install", "log", ".git", "runs", "__pycache__", "*.egg-info"
        ),
    )
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    res = subprocess.run(
        [py, "-m", "pip", "install", "--quiet", "--no-compile", str(src)],
        capture_output=True,
        text=True,
        timeout=600,
        env=clean_env(),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    res = subprocess.run(
        [py, "-c", "import rclpy"], capture_output=True, text=True, cwd=tmp_path, env=clean_env()
    )
    assert res.returncode != 0, "the clean venv must not have rclpy"
    res = subprocess.run(
        [py, "-c", CHECK], capture_output=True, text=True, cwd=tmp_path, timeout=300, env=clean_env()
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert str(env_dir) in res.stdout
    cli = env_dir / "bin" / "lifelong-learning"
    res = subprocess.run(
        [cli, "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=120, env=clean_env()
    )
    assert res.returncode == 0 and "lifelong-learning" in res.stdout, res.stderr
    assert sys.executable != str(py)
