"""The import graph of lifelong_learning/ is a DAG that follows LAYERS: no module imports from a
layer above its own or from a sibling subpackage of its layer (function-local imports included)."""

import ast
import re
from pathlib import Path

import pytest

import lifelong_learning

PACKAGE = Path(__file__).resolve().parents[1] / "lifelong_learning"
LAYER_OF = {name: level for level, names in enumerate(lifelong_learning.LAYERS) for name in names}
GENERATED = {"msg", "srv", "action"}  # built by colcon from msg/, srv/, action/


def _unit(module: str) -> str:
    """``lifelong_learning.<unit>...`` → unit (a subpackage, or a top-level module like ``cli``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<package>"


def imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, imported module) of every lifelong_learning import, at any depth of the file."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lifelong_learning"):
            if node.module == "lifelong_learning":  # from lifelong_learning import x: x is the unit
                names = [a.name for a in node.names if not a.name.startswith("__")]  # not __version__
                found += [(node.lineno, f"lifelong_learning.{name}") for name in names]
            else:
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("lifelong_learning.")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # importlib.import_module("...")
            match = re.fullmatch(r"lifelong_learning\.(\w+)(?:\.\w+)*", node.value)
            if match and match.group(1) in LAYER_OF:  # not e.g. the format name "lifelong_learning.model"
                found.append((node.lineno, node.value))
    return found


def violations(root: Path) -> list[str]:
    """Every upward or sideways import under ``root`` (a lifelong_learning tree)."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        own = _unit(".".join(rel.with_suffix("").parts))
        if own in ("__init__", "<package>"):
            continue
        for line, module in imports(ast.parse(path.read_text(encoding="utf-8"))):
            target = _unit(module)
            if target in ("<package>", own):
                continue
            if target not in LAYER_OF or own not in LAYER_OF:
                bad.append(f"{rel}:{line}: {own} → {target}: not in lifelong_learning.LAYERS")
            elif LAYER_OF[target] >= LAYER_OF[own]:
                kind = "upward" if LAYER_OF[target] > LAYER_OF[own] else "sideways"
                bad.append(f"{rel}:{line}: {kind} import {module} from layer {LAYER_OF[own]} ({own})")
    return bad


def test_every_subpackage_has_a_layer_and_is_documented():
    units = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    units |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert units - set(LAYER_OF) == set()
    assert set(LAYER_OF) - units <= GENERATED
    for unit in units:
        assert f"lifelong_learning.{unit}" in lifelong_learning.__doc__ or f"~lifelong_learning.{unit}" in (
            lifelong_learning.__doc__
        ), unit


def test_imports_point_down_only():
    assert violations(PACKAGE) == []


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("learners/x.py", "from lifelong_learning.io.bags import read_joint_states\n", "upward"),
        ("io/x.py", "def f():\n    from lifelong_learning.dynamics import acceleration\n", None),
        ("dynamics/x.py", "import lifelong_learning.nodes._base\n", "upward"),
        ("learners/x.py", "from lifelong_learning.vision import FeatureExtractor\n", "sideways"),
        ("core/x.py", "importlib.import_module('lifelong_learning.learners.rlsc')\n", "upward"),
        ("nodes/x.py", "from lifelong_learning.learners.rlsc import IncrementalRLSC\n", None),
    ],
)
def test_the_checker_catches_each_kind_of_violation(tmp_path, where, source, expected):
    root = tmp_path / "lifelong_learning"
    (root / where).parent.mkdir(parents=True)
    (root / where).write_text(source)
    found = violations(root)
    if expected is None:
        assert found == []
    else:
        assert len(found) == 1 and expected in found[0], found
