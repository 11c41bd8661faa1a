"""Rooms a newcomer can hold in their head: no module of lifelong_learning/ over 800 lines, no
function over 80 lines not counting its docstring, unless a comment line in the function starts
with ``# longer than 80 lines:`` and says why that one must be."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lifelong_learning"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80
WHY_LONGER = "# longer than 80 lines:"


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function, methods and nested functions included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{prefix}{node.name}", node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def function_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of a function from its first decorator (or ``def``) to its end, less its docstring."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    lines = node.end_lineno - first + 1
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            lines -= body[0].end_lineno - body[0].lineno + 1
    return lines


def oversized(root: Path) -> dict[str, str]:
    """``path`` or ``path:function`` → what is too long, for every module and function under
    ``root`` (a lifelong_learning tree) beyond the limits and not explained by a comment."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        if len(lines) > MAX_MODULE_LINES:
            found[rel] = f"{rel}: {len(lines)} lines (at most {MAX_MODULE_LINES})"
        for name, node in _functions(ast.parse(source)):
            n = function_lines(node)
            body = lines[node.lineno - 1 : node.end_lineno]
            if n > MAX_FUNCTION_LINES and not any(line.strip().startswith(WHY_LONGER) for line in body):
                found[f"{rel}:{name}"] = f"{rel}:{node.lineno}: {name} has {n} lines without its docstring"
    return found


def test_no_module_or_function_is_too_long():
    assert list(oversized(PACKAGE).values()) == []


def _body(n: int, indent: str = "    ") -> str:
    return "".join(f"{indent}x{i} = {i}\n" for i in range(n))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (f"def f():\n{_body(79)}", []),  # 80 lines with the def
        (f"def f():\n{_body(80)}", ["f"]),
        (f'def f():\n    """Doc.\n\n    More.\n    """\n{_body(79)}', []),  # the docstring does not count
        (f"@decorator\ndef f():\n{_body(79)}", ["f"]),  # the decorator does
        (f"class C:\n    def g(self):\n{_body(80, ' ' * 8)}", ["C.g"]),
        (f"def f():\n    def inner():\n{_body(80, ' ' * 8)}", ["f", "f.inner"]),
        (f"def f():\n    # longer than 80 lines: one table\n{_body(80)}", []),
        ("x = 1\n" * 800, []),
    ],
)
def test_the_checker_counts_functions_without_their_docstring(tmp_path, source, expected):
    root = tmp_path / "lifelong_learning"
    root.mkdir()
    (root / "m.py").write_text(source)
    assert sorted(oversized(root)) == [f"lifelong_learning/m.py:{name}" for name in expected]


def test_the_checker_counts_the_lines_of_a_module(tmp_path):
    root = tmp_path / "lifelong_learning"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "m.py").write_text("x = 1\n" * 801)
    assert oversized(root) == {
        "lifelong_learning/sub/m.py": "lifelong_learning/sub/m.py: 801 lines (at most 800)"
    }
