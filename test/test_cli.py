"""The `lifelong-learning` command as installed by colcon."""

import shutil
import subprocess

from lifelong_learning import __version__
from lifelong_learning.cli import build_parser, main


def test_help_lists_every_command_module():
    import importlib
    import pkgutil

    import lifelong_learning.commands as commands

    text = build_parser().format_help()
    listed = set()
    for info in pkgutil.iter_modules(commands.__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"lifelong_learning.commands.{info.name}")
            if hasattr(module, "HELP"):
                assert info.name.replace("_", "-") in text
                listed.add(info.name)
    assert {"demo", "params", "tune", "up"} <= listed
    assert "system-config" not in text  # shared by the commands, not one of them


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "usage: lifelong-learning" in capsys.readouterr().out


def test_installed_executable_runs():
    exe = shutil.which("lifelong-learning")
    assert exe, "lifelong-learning is not on PATH (source install/setup.bash)"
    res = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and __version__ in res.stdout


def test_demo_with_an_unusable_run_folder_fails_clearly(capsys):
    assert main(["demo", "--quick", "--out", "/proc/no-such-dir/run"]) == 2
    assert "cannot create the run folder" in capsys.readouterr().err
