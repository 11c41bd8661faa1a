"""The import graph of lifelong_learning/, function-local imports included:

- it follows LAYERS: no module imports from a layer above its own or from a sibling subpackage of
  its layer;
- it has no cycle between any two modules, inside a subpackage too (``from lifelong_learning.x
  import y`` where ``y`` is a submodule imports that submodule; an ``importlib.import_module`` of a
  constant name is an import; an import under ``if TYPE_CHECKING:`` is not: it never runs, so it
  makes no cycle, though it must follow the layers like any other);
- a private module (``_name.py``) is imported only from its own package: not from another
  subpackage, nor from the tests, the benchmarks, the launch files or the scripts (they use the
  public API like any user).
"""

import ast
import itertools
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

import lifelong_learning

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "lifelong_learning"
#: the Python files outside the package that import it: each may import public modules only
USERS = ("test", "benchmarks", "launch", "scripts")
LAYER_OF = {name: level for level, names in enumerate(lifelong_learning.LAYERS) for name in names}
GENERATED = {"msg", "srv", "action"}  # built by colcon from msg/, srv/, action/


def _unit(module: str) -> str:
    """``lifelong_learning.<unit>...`` → unit (a subpackage, or a top-level module like ``cli``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<package>"


def _short(module: str) -> str:
    """``lifelong_learning.nodes._base`` → ``nodes._base`` (for messages)."""
    return module.removeprefix("lifelong_learning.")


def module_of(path: Path, root: Path) -> str:
    """The dotted name of ``path`` in the lifelong_learning tree ``root`` (a package: its name)."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes under an ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``) block."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            inside |= {id(n) for statement in node.body for n in ast.walk(statement)}
    return inside


def imports(tree: ast.AST, package: str | None = None, run_time: bool = False) -> list[tuple[int, str]]:
    """(line, imported name) of every lifelong_learning import, at any depth of the file (those
    that run, without the ones under ``if TYPE_CHECKING:``, with ``run_time``).

    ``from M import n`` gives ``M.n``: ``n`` is a submodule or a name defined in ``M``
    (:func:`resolve` tells). ``package`` is the package of the file, for relative imports.
    """
    found = []
    skipped = _type_checking_only(tree) if run_time else set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from the file's package, up level - 1
                if package is None:
                    continue
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([module] if module else [])])
            if module != "lifelong_learning" and not module.startswith("lifelong_learning."):
                continue
            for alias in node.names:
                dunder = alias.name == "*" or alias.name.startswith("__")  # __version__: the package
                found.append((node.lineno, module if dunder else f"{module}.{alias.name}"))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("lifelong_learning.")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # importlib.import_module("...")
            match = re.fullmatch(r"lifelong_learning\.(\w+)(?:\.\w+)*", node.value)
            if match and match.group(1) in LAYER_OF:  # not e.g. the format name "lifelong_learning.model"
                found.append((node.lineno, node.value))
    return found


def package_modules(root: Path) -> set[str]:
    """The dotted names of every module and package of the lifelong_learning tree ``root``."""
    return {module_of(path, root) for path in root.rglob("*.py")}


def resolve(name: str, modules: set[str]) -> str | None:
    """The module that importing ``name`` runs: its longest prefix that is a module of the tree (a
    name defined in a package's ``__init__``: the package); None for the generated interfaces."""
    if _unit(name) in GENERATED:
        return None
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


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


def import_graph(root: Path) -> dict[str, dict[str, str]]:
    """Module → {module it imports: where (``path:line`` of the first such import)}, over the
    lifelong_learning tree ``root``; imports of a module by itself and those for type checkers
    only (``if TYPE_CHECKING:``) left out."""
    modules = package_modules(root)
    graph: dict[str, dict[str, str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = module_of(path, root)
        edges = graph.setdefault(module, {})
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, name in imports(tree, _package_of(module, path), run_time=True):
            target = resolve(name, modules)
            if target is not None and target != module and target not in edges:
                edges[target] = f"{path.relative_to(root.parent)}:{line}"
    return graph


def _components(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _shortest_cycle(graph: dict[str, dict[str, str]], start: str, within: set[str]) -> list[str]:
    """The shortest path ``start → ... → start`` inside ``within`` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if w in within and w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{start} is on no cycle")


def import_cycles(root: Path) -> list[tuple[frozenset[str], str]]:
    """Every set of modules of ``root`` that import each other in a cycle (a strongly connected
    component of the import graph), short names, with a message naming each module and one cycle
    through them, import by import."""
    graph = import_graph(root)
    found = []
    for component in _components(graph):
        if len(component) < 2:
            continue
        cycle = _shortest_cycle(graph, component[0], set(component))
        steps = "; ".join(f"{graph[a][b]} imports {_short(b)}" for a, b in itertools.pairwise(cycle))
        names = frozenset(_short(m) for m in component)
        found.append(
            (
                names,
                f"cycle between {', '.join(sorted(names))}: {' → '.join(map(_short, cycle))} ({steps})",
            )
        )
    return found


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


def private_imports(root: Path, users: Iterable[Path] = ()) -> list[tuple[str, str]]:
    """(private module, where) of every import of a private module (``_name.py``, or one inside a
    ``_name`` package) from outside the package that holds it: from another subpackage of the
    lifelong_learning tree ``root``, or from any of the files ``users`` (tests, benchmarks ...)."""
    modules = package_modules(root)
    files = [(path, module_of(path, root)) for path in sorted(root.rglob("*.py"))]
    files += [(path, None) for path in users]
    bad = []
    for path, module in files:
        package = None if module is None else _package_of(module, path)
        for line, name in imports(ast.parse(path.read_text(encoding="utf-8")), package):
            target = resolve(name, modules)
            if target is None or not _is_private(target):
                continue
            home = target.rpartition(".")[0]  # the package that holds it
            if module is not None and (module == home or module.startswith(home + ".")):
                continue
            where = path.relative_to(root.parent) if root.parent in path.parents else path
            found = (_short(target), f"{where}:{line}: imports the private module {_short(target)}")
            if found not in bad:  # several names of the module in one import
                bad.append(found)
    return bad


def _user_files() -> list[Path]:
    files = [path for folder in USERS for path in sorted((REPO / folder).rglob("*.py"))]
    scripts = [p for p in sorted((REPO / "scripts").rglob("*")) if p.is_file() and p.suffix == ""]
    return files + [p for p in scripts if p.read_bytes().startswith(b"#!/usr/bin/env python")]


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


def test_no_import_cycle():
    assert [message for _, message in import_cycles(PACKAGE)] == []


def test_private_modules_are_imported_from_their_own_package_only():
    assert [where for _, where in private_imports(PACKAGE, _user_files())] == []


def test_the_users_scanned_for_private_imports_include_the_tests_and_benchmarks():
    scanned = {path.relative_to(REPO).parts[0] for path in _user_files()}
    assert scanned == set(USERS)
    assert Path(__file__).resolve() in _user_files()


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A lifelong_learning tree under ``tmp_path`` with ``files`` (path → source); packages get an
    empty ``__init__.py`` unless given."""
    root = tmp_path / "lifelong_learning"
    for where, source in files.items():
        path = root / where
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        for parent in [p for p in path.parents if p == root or root in p.parents]:
            if not (parent / "__init__.py").exists():
                (parent / "__init__.py").write_text("")
    return root


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("learners/x.py", "from lifelong_learning.io.bags import read_joint_states\n", "upward"),
        ("io/x.py", "def f():\n    from lifelong_learning.dynamics import acceleration\n", None),
        ("dynamics/x.py", "import lifelong_learning.nodes._base\n", "upward"),
        ("learners/x.py", "from lifelong_learning.vision import FeatureExtractor\n", "sideways"),
        ("core/x.py", "importlib.import_module('lifelong_learning.learners.rlsc')\n", "upward"),
        ("nodes/x.py", "from lifelong_learning.learners.rlsc import IncrementalRLSC\n", None),
        ("core/x.py", "if TYPE_CHECKING:\n    from lifelong_learning.io.bags import BagError\n", "upward"),
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


@pytest.mark.parametrize(
    ("files", "cycle"),
    [
        (  # two modules
            {
                "demo/run.py": "from lifelong_learning.demo.scenarios import SCENARIOS\n",
                "demo/scenarios.py": "from lifelong_learning.demo.run import main\n",
            },
            ["demo.run", "demo.scenarios", "demo.run"],
        ),
        (  # three modules, one of them through `from package import submodule`
            {
                "nodes/a.py": "from lifelong_learning.nodes import b\n",
                "nodes/b.py": "import lifelong_learning.nodes.c\n",
                "nodes/c.py": "from lifelong_learning.nodes.a import A\n",
            },
            ["nodes.a", "nodes.b", "nodes.c", "nodes.a"],
        ),
        (  # through a function-local import
            {
                "learners/a.py": "from lifelong_learning.learners.b import f\n",
                "learners/b.py": "def f():\n    from lifelong_learning.learners.a import g\n",
            },
            ["learners.a", "learners.b", "learners.a"],
        ),
        (  # through importlib.import_module of a constant name
            {
                "learners/a.py": "def f():\n    importlib.import_module('lifelong_learning.learners.b')\n",
                "learners/b.py": "from lifelong_learning.learners.a import register\n",
            },
            ["learners.a", "learners.b", "learners.a"],
        ),
        (  # through a package's __init__, with relative imports
            {
                "learners/__init__.py": "from .a import A\n",
                "learners/a.py": "from . import B\n",
            },
            ["learners", "learners.a", "learners"],
        ),
        (  # beside a block for type checkers, an import that runs
            {
                "retraining/job.py": "from lifelong_learning.retraining.report import is_report\n",
                "retraining/report.py": "if typing.TYPE_CHECKING:\n    pass\n"
                "else:\n    from lifelong_learning.retraining.job import J\n",
            },
            ["retraining.job", "retraining.report", "retraining.job"],
        ),
        (  # across subpackages (an upward import makes it)
            {
                "core/a.py": "def f():\n    from lifelong_learning.io.b import g\n",
                "io/b.py": "from lifelong_learning.core.a import f\n",
            },
            ["core.a", "io.b", "core.a"],
        ),
    ],
)
def test_the_checker_finds_each_cycle_and_names_its_modules(tmp_path, files, cycle):
    found = import_cycles(_tree(tmp_path, files))
    assert len(found) == 1, found
    names, message = found[0]
    assert names == frozenset(cycle)
    assert " → ".join(cycle) in message
    for module in set(cycle):
        assert f"imports {module}" in message  # each step names its file and line


@pytest.mark.parametrize(
    "files",
    [
        {  # a chain, a package importing its modules, a submodule importing a name of its package's sibling
            "learners/a.py": "from lifelong_learning.learners.b import f\n",
            "learners/b.py": "from lifelong_learning.core.c import g\n",
            "learners/__init__.py": "from lifelong_learning.learners.a import A\n",
            "core/c.py": "import numpy\n",
        },
        {  # importing a name (not a submodule) of a package whose __init__ imports nothing back
            "nodes/a.py": "from lifelong_learning.learners import RecursiveRLS\n",
            "learners/__init__.py": "from lifelong_learning.learners.rls import RecursiveRLS\n",
            "learners/rls.py": "import lifelong_learning.core.c\n",
            "core/c.py": "",
        },
        {  # the generated interfaces are not modules of the tree
            "nodes/a.py": "from lifelong_learning.msg import Features\n",
        },
        {  # one way for type checkers only: never run, no cycle
            "retraining/job.py": "from lifelong_learning.retraining.report import is_report\n",
            "retraining/report.py": "if TYPE_CHECKING:\n"
            "    from lifelong_learning.retraining.job import Job\n",
        },
    ],
)
def test_the_checker_finds_no_cycle_where_there_is_none(tmp_path, files):
    assert import_cycles(_tree(tmp_path, files)) == []


def test_the_checker_finds_separate_cycles_separately(tmp_path):
    root = _tree(
        tmp_path,
        {
            "demo/a.py": "import lifelong_learning.demo.b\n",
            "demo/b.py": "import lifelong_learning.demo.a\n",
            "io/c.py": "import lifelong_learning.io.d\n",
            "io/d.py": "def f():\n    import lifelong_learning.io.c\n",
        },
    )
    found = sorted(sorted(names) for names, _ in import_cycles(root))
    assert found == [["demo.a", "demo.b"], ["io.c", "io.d"]]


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"nodes/x.py": "from lifelong_learning.learners._cholesky import gram, chol\n"},
            ["learners._cholesky"],
        ),
        ({"nodes/x.py": "from lifelong_learning.learners import _cholesky\n"}, ["learners._cholesky"]),
        (
            {"nodes/x.py": "def f():\n    import lifelong_learning.learners._cholesky\n"},
            ["learners._cholesky"],
        ),
        ({"nodes/x.py": "import lifelong_learning.learners._impl.fast\n"}, ["learners._impl.fast"]),
        ({"nodes/x.py": "mock.patch('lifelong_learning.learners._cholesky.gram')\n"}, ["learners._cholesky"]),
        ({"learners/x.py": "from lifelong_learning.learners._cholesky import gram\n"}, []),  # own package
        ({"learners/sub/x.py": "from lifelong_learning.learners._cholesky import gram\n"}, []),  # inside it
        ({"learners/x.py": "from ._cholesky import gram\n"}, []),
        ({"learners/x.py": "from lifelong_learning.learners.rlsc import _check_label\n"}, []),  # a name
    ],
)
def test_the_checker_catches_a_private_module_imported_from_another_subpackage(tmp_path, files, expected):
    files = {**files, "learners/_cholesky.py": "", "learners/rlsc.py": "", "learners/_impl/fast.py": ""}
    found = private_imports(_tree(tmp_path, files))
    assert [target for target, _ in found] == expected
    assert all(f"imports the private module {target}" in where for target, where in found)


def test_the_checker_catches_a_private_module_imported_by_a_test(tmp_path):
    root = _tree(tmp_path, {"learners/_cholesky.py": "", "learners/cholesky.py": ""})
    (tmp_path / "test").mkdir()
    private, public = tmp_path / "test" / "test_a.py", tmp_path / "test" / "test_b.py"
    private.write_text(
        "import numpy\n\n\ndef test_a():\n    from lifelong_learning.learners._cholesky import f\n"
    )
    public.write_text("from lifelong_learning.learners.cholesky import gram\n")
    assert private_imports(root, [private, public]) == [
        ("learners._cholesky", "test/test_a.py:5: imports the private module learners._cholesky")
    ]
