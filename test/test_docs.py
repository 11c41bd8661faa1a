"""The README and the guides in docs/ stay current with the code they describe.

The README is what a newcomer reads first, so it stays short (at most 300 lines) and links every
guide in ``docs/``. Every relative link in the README and in ``docs/**/*.md`` resolves (the file
exists; a ``#anchor`` is a heading of the target, slugged as GitHub does). The README and the
guides (``docs/*.md``) name only what exists: modules and their attributes
(``lifelong_learning.x.y``), repository paths in backticks (``config/robot.yaml``, or a path
inside the package such as ``core/files.py``), ``make`` targets, ``lifelong-learning``
sub-commands, node executables and ``~/`` services. The tables under ``docs/benchmarks/`` are
records of a measurement at a commit, so only their links are checked: the code they name is
the code that was measured.

Everything is read statically (no import of the package, no ROS). Each checker takes the
repository root and returns its problems, one line each; the self-tests at the end run each
checker on a small repository in a temporary folder and show that it catches a bad case.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "lifelong_learning"
MAX_README_LINES = 300

#: top-level folders and files of the repository: a backticked path that starts with one of
#: them (or with a subpackage of lifelong_learning/) is a path that must exist
ROOT_FOLDERS = (
    ".ci",
    "action",
    "benchmarks",
    "config",
    "docs",
    "launch",
    PACKAGE,
    "msg",
    "requirements",
    "scripts",
    "srv",
    "test",
)
ROOT_FILES = ("CMakeLists.txt", "Makefile", "README.md", "package.xml", "pyproject.toml", "setup.py")
INTERFACE_KINDS = ("msg", "srv", "action")

#: services every rclpy node (parameters) or lifecycle node offers without code of ours
RCLPY_SERVICES = frozenset(
    {
        "change_state",
        "get_state",
        "get_available_states",
        "get_available_transitions",
        "get_transition_graph",
        "describe_parameters",
        "get_parameter_types",
        "get_parameters",
        "list_parameters",
        "set_parameters",
        "set_parameters_atomically",
        "get_type_description",
    }
)


# ----------------------------------------------------------------------------- reading Markdown


@dataclass
class Document:
    """One Markdown file, split into prose (fenced blocks removed), fenced code and inline code."""

    path: Path
    text: str

    @cached_property
    def _split(self) -> tuple[str, list[str]]:
        prose: list[str] = []
        fences: list[str] = []
        fence: list[str] | None = None
        marker = ""
        for line in self.text.splitlines():
            stripped = line.lstrip()
            if fence is None and stripped.startswith(("```", "~~~")):
                fence, marker = [], stripped[:3]
                prose.append("")
            elif fence is not None and stripped.startswith(marker):
                fences.append("\n".join(fence))
                fence = None
                prose.append("")
            elif fence is not None:
                fence.append(line)
            else:
                prose.append(line)
        if fence is not None:
            fences.append("\n".join(fence))
        return "\n".join(prose), fences

    @property
    def prose(self) -> str:
        """The text outside fenced code blocks (inline code included)."""
        return self._split[0]

    @property
    def fences(self) -> list[str]:
        """The contents of the fenced code blocks."""
        return self._split[1]

    @cached_property
    def spans(self) -> list[str]:
        """Inline code spans of the prose, whitespace collapsed (a span may wrap a line)."""
        return [" ".join(m.group(2).split()) for m in re.finditer(r"(`+)([^`]+?)\1", self.prose)]

    @property
    def code(self) -> list[str]:
        """Inline spans and fenced blocks: where commands are written."""
        return self.spans + self.fences

    @cached_property
    def anchors(self) -> set[str]:
        """GitHub's anchors of the headings (``slug``, then ``slug-1``... for repeats)."""
        seen: dict[str, int] = {}
        out = set()
        for line in self.prose.splitlines():
            m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
        return out

    def links(self) -> list[str]:
        """Targets of inline links and images and of reference definitions (code spans excluded)."""
        prose = re.sub(r"(`+)[^`]+?\1", "", self.prose)
        targets = re.findall(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", prose)
        targets += re.findall(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", prose, flags=re.M)
        return targets


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: the rendered text in lower case, punctuation
    removed (hyphens and underscores kept), each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"[`*]", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def read(path: Path) -> Document:
    """The document at ``path``."""
    return Document(path, path.read_text(encoding="utf-8"))


def all_documents(repo: Path) -> list[Document]:
    """The README and every Markdown file under docs/ (benchmark tables included)."""
    return [read(repo / "README.md")] + [read(p) for p in sorted((repo / "docs").rglob("*.md"))]


def guide_paths(repo: Path) -> list[Path]:
    """The guides: docs/*.md (not the benchmark tables under docs/benchmarks/)."""
    return sorted((repo / "docs").glob("*.md"))


def named_documents(repo: Path) -> list[Document]:
    """The README and the guides: the documents whose names of code must exist."""
    return [read(repo / "README.md")] + [read(p) for p in guide_paths(repo)]


def where(repo: Path, doc: Document) -> str:
    """The document's path relative to the repository, for messages."""
    return str(doc.path.relative_to(repo))


# ----------------------------------------------------------------------------- the checkers


def check_readme_length(repo: Path) -> list[str]:
    """The README fits on a few screens; the rest belongs in a guide."""
    n = len((repo / "README.md").read_text(encoding="utf-8").splitlines())
    if n > MAX_README_LINES:
        return [f"README.md has {n} lines, more than {MAX_README_LINES}: move the detail to a guide in docs/"]
    return []


def check_links(repo: Path) -> list[str]:
    """Every relative link resolves: its file or folder exists, and its anchor is a heading there."""
    problems = []
    for doc in all_documents(repo):
        for target in doc.links():
            if re.match(r"[a-zA-Z][\w+.-]*:|//", target):  # http:, mailto:, ...
                continue
            path_text, _, anchor = target.partition("#")
            path = (doc.path.parent / path_text).resolve() if path_text else doc.path
            if not path.exists():
                problems.append(f"{where(repo, doc)}: link to {target}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in read(path).anchors:
                problems.append(f"{where(repo, doc)}: link to {target}: no heading #{anchor} there")
    return problems


def check_guides_linked(repo: Path) -> list[str]:
    """Every guide in docs/ is reachable from the README."""
    readme = read(repo / "README.md")
    linked = {(repo / t.partition("#")[0]).resolve() for t in readme.links() if t.partition("#")[0]}
    return [
        f"docs/{p.name} is not linked from README.md" for p in guide_paths(repo) if p.resolve() not in linked
    ]


def _top_level_names(body: list[ast.stmt]) -> set[str]:
    """Names a module or class body binds (definitions, assignments, imports, also under if/try)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody"):
                names |= _top_level_names(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                names |= _top_level_names(handler.body)
    return names


def _has_attribute(module_file: Path, attributes: list[str]) -> bool:
    """Whether ``module.a[.b]`` exists: ``a`` bound at the top of the module and, when ``a`` is a
    class defined there, ``b`` bound in its body (deeper names are not checked)."""
    tree = ast.parse(module_file.read_text(encoding="utf-8"))
    names = _top_level_names(tree.body)
    if "__getattr__" in names:
        return True
    if attributes[0] not in names:
        return False
    if len(attributes) == 1:
        return True
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == attributes[0]:
            return attributes[1] in _top_level_names(node.body)
    return True  # imported or assigned: not followed


def dotted_name_exists(repo: Path, name: str) -> bool:
    """Whether ``lifelong_learning.x.y[.z]`` names a module, a generated interface, or an
    attribute of a module."""
    parts = name.split(".")[1:]
    if parts and parts[0] in INTERFACE_KINDS:  # generated by colcon from msg/, srv/, action/
        folder = repo / parts[0]
        if len(parts) == 1:
            return folder.is_dir()
        return len(parts) == 2 and (folder / f"{parts[1]}.{parts[0]}").is_file()
    path = repo / PACKAGE
    i = 0
    while i < len(parts) and path.is_dir():
        if (path / parts[i] / "__init__.py").is_file():
            path = path / parts[i]
        elif (path / f"{parts[i]}.py").is_file():
            path = path / f"{parts[i]}.py"
        else:
            break
        i += 1
    module_file = path / "__init__.py" if path.is_dir() else path
    if not module_file.is_file():
        return False
    return i == len(parts) or _has_attribute(module_file, parts[i:])


def check_module_names(repo: Path) -> list[str]:
    """Every ``lifelong_learning.x.y`` in the README and the guides names what exists."""
    problems = []
    for doc in named_documents(repo):
        for m in re.finditer(rf"(?<![\w/.-]){PACKAGE}(?:\.[A-Za-z_]\w*)+", doc.text):
            name = m.group(0)
            if name.endswith(".launch.py"):  # a launch file's name (check_paths), not a module
                continue
            if not dotted_name_exists(repo, name):
                problems.append(f"{where(repo, doc)}: {name} is neither a module nor a module attribute")
    return problems


def _path_exists(repo: Path, token: str) -> bool:
    """Whether a backticked path exists, from the repository root or inside the package;
    ``<placeholder>`` and ``*`` match any name; an interface may be named without its suffix."""
    token = token.rstrip("/")
    interface = re.fullmatch(rf"(?:{PACKAGE}/)?({'|'.join(INTERFACE_KINDS)})/(\w+)", token)
    if interface:
        kind, name = interface.groups()
        return (repo / kind / f"{name}.{kind}").is_file() or (repo / kind / name).exists()
    if re.fullmatch(rf"{PACKAGE}/[A-Z]\w*", token):  # a ROS type name, package/Type
        name = token.split("/")[1]
        return any((repo / kind / f"{name}.{kind}").is_file() for kind in INTERFACE_KINDS)
    pattern = re.sub(r"<[^>/]*>", "*", token)
    for base in (repo, repo / PACKAGE):
        if "*" in pattern:
            if any(base.glob(pattern)):
                return True
        elif (base / pattern).exists():
            return True
    return False


def repository_paths(repo: Path, doc: Document) -> list[str]:
    """The tokens of the inline code spans that are paths in this repository."""
    subpackages = {p.name for p in (repo / PACKAGE).iterdir() if (p / "__init__.py").is_file()}
    starts = set(ROOT_FOLDERS) | subpackages
    out = []
    for span in doc.spans:
        for token in span.split():
            token = token.strip("\"'(),;").rstrip(".:")
            first = token.split("/")[0]
            if token in ROOT_FILES or ("/" in token and first in starts):
                out.append(token)
    return out


def check_paths(repo: Path) -> list[str]:
    """Every repository path in backticks in the README and the guides exists, and so does every
    launch file named in their code (``ros2 launch <package> X.launch.py``)."""
    problems = []
    for doc in named_documents(repo):
        problems += [
            f"{where(repo, doc)}: `{token}` does not exist"
            for token in repository_paths(repo, doc)
            if not _path_exists(repo, token)
        ]
        for code in doc.code:
            for name in re.findall(r"(?<![\w/.-])([\w-]+\.launch\.py)\b", code):
                if not (repo / "launch" / name).is_file():
                    problems.append(f"{where(repo, doc)}: launch file {name} does not exist (launch/)")
    return problems


def make_targets(repo: Path) -> set[str]:
    """The targets the Makefile defines."""
    text = (repo / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z_][\w.-]*)\s*:(?!=)", text, flags=re.M))


def check_make_targets(repo: Path) -> list[str]:
    """Every ``make <target>`` in the README and the guides is a target of the Makefile."""
    targets = make_targets(repo)
    return [
        f"{where(repo, doc)}: `make {target}`: no such target in the Makefile"
        for doc in named_documents(repo)
        for code in doc.code
        for target in re.findall(r"(?<![\w-])make\s+([A-Za-z_][\w.-]*)(?![\w.=-])", code)
        if target not in targets
    ]


def subcommands(repo: Path) -> set[str]:
    """The sub-commands of ``lifelong-learning``: a module each in lifelong_learning/commands/
    (``_`` modules are helpers), named by its ``NAME`` or its module name with hyphens, as
    lifelong_learning/cli.py registers them."""
    names = set()
    for path in (repo / PACKAGE / "commands").glob("*.py"):
        if path.name.startswith("_"):
            continue
        name = path.stem.replace("_", "-")
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "NAME" for t in node.targets)
                and isinstance(node.value, ast.Constant)
            ):
                name = str(node.value.value)
        names.add(name)
    return names


def check_subcommands(repo: Path) -> list[str]:
    """Every ``lifelong-learning <sub-command>`` in the README and the guides exists."""
    known = subcommands(repo)
    return [
        f"{where(repo, doc)}: `lifelong-learning {name}`: no such sub-command"
        for doc in named_documents(repo)
        for code in doc.code
        for name in re.findall(r"(?<![\w-])lifelong-learning\s+([a-z][\w-]*)", code)
        if name not in known
    ]


def node_executables(repo: Path) -> set[str]:
    """The node executables: scripts/nodes/*, which CMakeLists.txt installs into lib/<package>."""
    return {p.name for p in (repo / "scripts" / "nodes").iterdir() if p.is_file()}


def _service_calls(code: str) -> list[tuple[str, str]]:
    """(node, service) of each ``ros2 service call /[ns/]node/service`` or ``ros2 action
    send_goal`` in a piece of code."""
    pattern = r"ros2\s+(?:service\s+call|action\s+send_goal)(?:\s+-[-\w]+)*\s+/((?:[\w]+/)+)(\w+)"
    return [(m.group(1).rstrip("/").split("/")[-1], m.group(2)) for m in re.finditer(pattern, code)]


def _named_nodes(doc: Document) -> list[str]:
    """Node executables a document names: ``ros2 run <package> X``, ``--nodes X,Y``, the node of a
    service call, and the first column of tables whose first header cell is ``node``."""
    names = []
    for code in doc.code:
        names += re.findall(rf"ros2\s+run\s+{PACKAGE}\s+(\w+)", code)
        for group in re.findall(r"--nodes[ =]([\w,]+)", code):
            names += [n for n in group.split(",") if n]
        names += [node for node, _ in _service_calls(code)]
    in_node_table = False
    for line in doc.prose.splitlines():
        row = line.strip()
        cells = [c.strip() for c in row.strip("|").split("|")] if row.startswith("|") else []
        if not cells:
            in_node_table = False
        elif cells[0] == "node":
            in_node_table = True
        elif in_node_table and re.fullmatch(r"`\w+`", cells[0]):
            names.append(cells[0].strip("`"))
    return names


def check_node_executables(repo: Path) -> list[str]:
    """Every node executable the README and the guides name is installed."""
    known = node_executables(repo)
    return [
        f"{where(repo, doc)}: node executable {name} does not exist (scripts/nodes/)"
        for doc in named_documents(repo)
        for name in _named_nodes(doc)
        if name not in known
    ]


def node_services(repo: Path) -> set[str]:
    """The private (``~/``) services and actions the node code creates, and rclpy's own."""
    names = set(RCLPY_SERVICES)
    for path in (repo / PACKAGE / "nodes").rglob("*.py"):
        names |= set(re.findall(r"[\"']~/(\w+)[\"']", path.read_text(encoding="utf-8")))
    return names


def check_services(repo: Path) -> list[str]:
    """Every ``~/service`` and every service of a ``ros2 service call`` in the README and the
    guides is created by the node code (or by rclpy)."""
    known = node_services(repo)
    problems = []
    for doc in named_documents(repo):
        # in the prose and its code spans: a fenced shell block's ~/ is a home folder
        named = re.findall(r"(?<![\w.])~/([A-Za-z_]\w*)(?![\w/.])", doc.prose)
        named += [service for code in doc.code for _, service in _service_calls(code)]
        problems += [
            f"{where(repo, doc)}: service ~/{name} does not exist" for name in named if name not in known
        ]
    return problems


CHECKERS = (
    check_readme_length,
    check_links,
    check_guides_linked,
    check_module_names,
    check_paths,
    check_make_targets,
    check_subcommands,
    check_node_executables,
    check_services,
)


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
def test_readme_and_guides_are_current(checker):
    problems = checker(REPO)
    assert problems == [], "\n".join(problems)


def test_the_node_executables_are_what_cmake_installs():
    cmake = (REPO / "CMakeLists.txt").read_text(encoding="utf-8")
    assert "scripts/nodes/*" in cmake and "lib/${PROJECT_NAME}" in cmake
    assert {"inverse_dynamics", "object_recognition", "nystrom_tuner"} <= node_executables(REPO)


def test_every_guide_says_who_it_is_for():
    """A guide is read on its own: it opens with a paragraph saying whom it is for (the generated
    parameters.md opens with what it lists)."""
    for path in guide_paths(REPO):
        if path.name == "parameters.md":
            continue
        paragraphs = [p for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
        assert paragraphs[0].startswith("# "), path.name
        assert paragraphs[1].startswith("For "), f"docs/{path.name}: first paragraph: who is it for?"


# ----------------------------------------------------------------------------- self-tests


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small repository of which every checker approves."""
    files = {
        "README.md": "# tool\n\n`make demo`, `lifelong-learning up`.\n\n- [Guide](docs/guide.md)\n",
        "docs/guide.md": (
            "# Guide\n\nFor testers.\n\n## Use `it` (here)\n\n"
            "[back](../README.md#tool), [here](#use-it-here), [table](benchmarks/t.md#t).\n\n"
            "`lifelong_learning.core.files.atomic_write`, `lifelong_learning.msg.Features`, "
            "`lifelong_learning.core.files.Writer.close`, `config/<node>.yaml`, `core/files.py: "
            "atomic_write`, `msg/Features`, `lifelong_learning/srv/Save`, `package.xml`,\n"
            "`ros2 launch lifelong_learning lifelong_learning.launch.py`, `lifelong_learning/Features`,\n"
            "`~/predict`, `~/get_state`.\n\n"
            "| node | does |\n|---|---|\n| `inverse_dynamics` | answers |\n| every node | logs |\n\n"
            "```bash\nros2 service call /robot1/inverse_dynamics/predict x\nmake test ARGS=-x\n"
            "lifelong-learning up c.yaml --nodes inverse_dynamics\n```\n"
        ),
        "docs/benchmarks/t.md": "# T\n\n`lifelong_learning.gone` is history.\n",
        "Makefile": ".PHONY: demo test\n\ndemo:\n\tbash demo.sh\n\ntest:\n\tbash test.sh\n",
        "lifelong_learning/__init__.py": "",
        "lifelong_learning/core/__init__.py": "",
        "lifelong_learning/core/files.py": (
            "import os\n\n\ndef atomic_write(path):\n    pass\n\n\nclass Writer:\n"
            "    def close(self):\n        pass\n"
        ),
        "lifelong_learning/commands/__init__.py": "",
        "lifelong_learning/commands/_helper.py": "",
        "lifelong_learning/commands/up.py": "HELP = 'start nodes'\n",
        "lifelong_learning/nodes/__init__.py": "",
        "lifelong_learning/nodes/inverse_dynamics.py": "SERVICE = '~/predict'\n",
        "scripts/nodes/inverse_dynamics": "#!/bin/sh\n",
        "config/inverse_dynamics.yaml": "{}\n",
        "launch/lifelong_learning.launch.py": "",
        "msg/Features.msg": "float32[] data\n",
        "srv/Save.srv": "---\n",
        "package.xml": "<package/>\n",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def append(repo: Path, name: str, text: str) -> None:
    path = repo / name
    path.write_text(path.read_text() + text)


def test_the_checkers_approve_the_small_repository(repo):
    for checker in CHECKERS:
        assert checker(repo) == [], checker.__name__


def test_slugs_are_githubs():
    assert slug("Offline retraining: `lifelong-learning tune`") == "offline-retraining-lifelong-learning-tune"
    assert slug("Across processes and machines (`torchrun`)") == "across-processes-and-machines-torchrun"
    assert slug("Files, model files and checkpoints (every learner)") == (
        "files-model-files-and-checkpoints-every-learner"
    )
    assert slug("The 2 ms p99 of a 1 kHz torque loop") == "the-2-ms-p99-of-a-1-khz-torque-loop"


def test_a_long_readme_is_caught(repo):
    append(repo, "README.md", "line\n" * MAX_README_LINES)
    assert check_readme_length(repo) == [
        f"README.md has {MAX_README_LINES + 5} lines, more than {MAX_README_LINES}: "
        "move the detail to a guide in docs/"
    ]


@pytest.mark.parametrize(
    ("link", "problem"),
    [
        ("[x](missing.md)", "link to missing.md: no such file"),
        ("[x](../README.md#nowhere)", "link to ../README.md#nowhere: no heading #nowhere there"),
        ("[x](#use-it)", "link to #use-it: no heading #use-it there"),
        ("![plot](plot.png)", "link to plot.png: no such file"),
        ("[x]: gone.md", "link to gone.md: no such file"),
    ],
)
def test_a_broken_link_or_anchor_is_caught(repo, link, problem):
    append(repo, "docs/guide.md", f"\n{link}\n")
    assert check_links(repo) == [f"docs/guide.md: {problem}"]


def test_links_inside_code_are_not_links(repo):
    append(repo, "docs/guide.md", "\n`[x](missing.md)`\n\n```\n[y](gone.md)\n```\n")
    assert check_links(repo) == []


def test_a_broken_link_in_a_benchmark_table_is_caught(repo):
    append(repo, "docs/benchmarks/t.md", "\n[plot](t.png)\n")
    assert check_links(repo) == ["docs/benchmarks/t.md: link to t.png: no such file"]


def test_a_guide_missing_from_the_readme_is_caught(repo):
    (repo / "docs" / "orphan.md").write_text("# Orphan\n\nFor nobody.\n")
    assert check_guides_linked(repo) == ["docs/orphan.md is not linked from README.md"]


@pytest.mark.parametrize(
    "name",
    [
        "lifelong_learning.core.gone",
        "lifelong_learning.core.files.missing_function",
        "lifelong_learning.core.files.Writer.open",
        "lifelong_learning.nodes._base",
        "lifelong_learning.msg.Missing",
    ],
)
def test_a_stale_module_name_is_caught(repo, name):
    append(repo, "docs/guide.md", f"\nSee {name}.\n")
    problems = check_module_names(repo)
    assert problems == [f"docs/guide.md: {name} is neither a module nor a module attribute"]


def test_a_missing_launch_file_is_caught(repo):
    append(repo, "README.md", "\n`ros2 launch lifelong_learning lifelong_learning_all.launch.py`\n")
    problem = "README.md: launch file lifelong_learning_all.launch.py does not exist (launch/)"
    assert check_paths(repo) == [problem]


@pytest.mark.parametrize(
    "path",
    [
        "config/gone.yaml",
        "nodes/_runner.py",
        "benchmarks/bench_gone.py",
        "srv/Missing",
        "lifelong_learning/Missing",
        "launch/*.xml",
    ],
)
def test_a_missing_path_is_caught(repo, path):
    append(repo, "docs/guide.md", f"\nRun `python {path} --quick`.\n")
    assert check_paths(repo) == [f"docs/guide.md: `{path}` does not exist"]


def test_other_packages_and_machine_paths_are_not_repository_paths(repo):
    append(repo, "docs/guide.md", "\n`sensor_msgs/Image`, `/etc/limits.conf`, `install/setup.bash`.\n")
    assert check_paths(repo) == []


def test_a_missing_make_target_is_caught(repo):
    append(repo, "README.md", "\n```\nmake bench\n```\n")
    assert check_make_targets(repo) == ["README.md: `make bench`: no such target in the Makefile"]


def test_a_missing_subcommand_is_caught(repo):
    text = "`lifelong-learning train BAG`; `lifelong-learning --help`; `lifelong-learning helper`"
    append(repo, "docs/guide.md", f"\n{text}\n")
    assert check_subcommands(repo) == [
        "docs/guide.md: `lifelong-learning train`: no such sub-command",
        "docs/guide.md: `lifelong-learning helper`: no such sub-command",
    ]


def test_a_subcommand_named_by_its_module_is_found(repo):
    (repo / "lifelong_learning" / "commands" / "make_model.py").write_text("NAME = 'make'\n")
    append(repo, "docs/guide.md", "\n`lifelong-learning make`\n")
    assert check_subcommands(repo) == []


@pytest.mark.parametrize(
    "text",
    [
        "`ros2 run lifelong_learning tuner`",
        "`lifelong-learning up c.yaml --nodes inverse_dynamics,tuner`",
        "```\nros2 action send_goal --feedback /tuner/tune x\n```",
        "| node | does |\n|---|---|\n| `tuner` | tunes |",
    ],
)
def test_a_missing_node_executable_is_caught(repo, text):
    append(repo, "docs/guide.md", f"\n{text}\n")
    problem = "docs/guide.md: node executable tuner does not exist (scripts/nodes/)"
    assert check_node_executables(repo) == [problem]


@pytest.mark.parametrize(
    "text",
    ["`~/rollback`", "```\nros2 service call /inverse_dynamics/rollback std_srvs/srv/Trigger\n```"],
)
def test_a_missing_service_is_caught(repo, text):
    append(repo, "docs/guide.md", f"\n{text}\n")
    assert check_services(repo) == ["docs/guide.md: service ~/rollback does not exist"]


def test_home_folders_are_not_services(repo):
    text = "`~/.ros/lifelong_learning`, `cd ~/ros2_ws/src`\n\n```\ncd ~/ws && ls\n```"
    append(repo, "docs/guide.md", f"\n{text}\n")
    assert check_services(repo) == []
