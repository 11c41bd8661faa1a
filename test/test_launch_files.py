"""Launch files cannot run here (no `launch` wheel): check them statically instead."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_launch_files_refer_to_existing_executables_and_config_files():
    files = sorted((REPO / "launch").glob("*.launch.py"))
    assert files, "no launch files"
    executables = {p.name for p in (REPO / "scripts" / "nodes").iterdir()}
    for path in files:
        tree = ast.parse(path.read_text())
        names = [
            kw.value.value
            for call in ast.walk(tree)
            if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "Node"
            for kw in call.keywords
            if kw.arg == "executable" and isinstance(kw.value, ast.Constant)
        ]
        assert names, f"{path.name} starts no node"
        for name in names:
            assert name in executables, f"{path.name}: no executable scripts/nodes/{name}"
            assert (REPO / "config" / f"{name}.yaml").exists(), f"{path.name}: no config/{name}.yaml"
            assert f'"{name}.yaml"' in path.read_text(), f"{path.name}: {name} does not load its config file"
