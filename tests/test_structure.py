"""The layout is the architecture: these checks keep it that way as the code grows."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import patchheal

PACKAGE = Path(patchheal.__file__).resolve().parent

# The shared modules at the top of the package; everything else lives in a package
# named after its part of the loop (see docs/architecture.md).
TOP_LEVEL_MODULES = {
    "__init__",
    "__main__",
    "atomic",
    "cli",
    "config",
    "errors",
    "models",
    "proc",
    "pysource",
    "retry",
    "runs",
}
LOOP_FUNCTION_LINES = 60


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Every patchheal module `path` imports, at module level or inside a function:
    a lazy or TYPE_CHECKING import still ties the two modules together."""

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("patchheal"):
            assert node.module is not None
            for alias in node.names:
                target = owner(f"{node.module}.{alias.name}")
                if target is not None:
                    yield target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("patchheal"):
                    target = owner(alias.name)
                    if target is not None:
                        yield target


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_import_cycles_are_found() -> None:
    """The cycle finder itself finds a cycle (so the next test can fail)."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycles_in_the_package() -> None:
    """No two patchheal modules import each other, directly or around a circle, even lazily."""
    modules = _modules()
    graph = {
        name: {t for t in _imports(path, modules) if t not in (name, "patchheal")}
        for name, path in modules.items()
    }
    assert import_cycles(graph) == []


def _sibling_imports(directory: Path) -> dict[str, set[str]]:
    """The import graph of a folder of scripts that import each other by bare name
    (`benchmarks/`, which puts itself on sys.path), lazy imports included."""
    names = {path.stem for path in directory.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in directory.glob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in names and not node.level:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in names)
        graph[path.stem] = found - {path.stem}
    return graph


@pytest.mark.parametrize("folder", ["benchmarks", "tests"])
def test_no_import_cycles_among_the_scripts(folder: str) -> None:
    """No circle in the repository outside the package either (issue 35)."""
    directory = PACKAGE.parent / folder
    assert directory.is_dir(), directory
    assert import_cycles(_sibling_imports(directory)) == []


def test_only_shared_modules_sit_at_the_top() -> None:
    """`ls patchheal/` shows the loop: its parts are packages, not flat modules."""
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top <= TOP_LEVEL_MODULES, f"move {sorted(top - TOP_LEVEL_MODULES)} into a package"


@pytest.mark.parametrize(
    "package", sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
)
def test_every_package_says_what_it_is_for(package: str) -> None:
    docstring = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text()))
    assert docstring, f"patchheal/{package}/__init__.py needs a docstring"


def test_the_loop_has_no_long_functions() -> None:
    """Each function of the controller reads in one screen."""
    long = []
    for path in sorted((PACKAGE / "loop").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > LOOP_FUNCTION_LINES:
                    long.append(f"{path.name}:{node.name} ({lines} lines)")
    assert long == []


# What loop/verification.py may take from verdict/: the one door and the evidence it reads.
VERIFICATION_VERDICT_IMPORTS = {
    ("patchheal.verdict.decide", "decide"),
    ("patchheal.verdict.evidence", "VerificationEvidence"),
}


def _verdict_imports(path: Path) -> set[tuple[str, str]]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("patchheal.verdict"):
            found |= {(node.module or "", alias.name) for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {
                (alias.name, "*")
                for alias in node.names
                if alias.name.startswith("patchheal.verdict")
            }
    return found


def test_verification_enters_the_verdict_by_one_door() -> None:
    """Issue 33: the loop gathers evidence and asks `decide` once per piece of it; it does
    not ask the verdict's lines of defence one by one."""
    imports = _verdict_imports(PACKAGE / "loop" / "verification.py")
    assert imports == VERIFICATION_VERDICT_IMPORTS


def test_the_one_door_check_sees_a_second_door(tmp_path: Path) -> None:
    """The check above can fail: a module that also asks the tripwire is caught."""
    module = tmp_path / "verification.py"
    module.write_text(
        "from patchheal.verdict.decide import decide\n"
        "from patchheal.verdict.evidence import VerificationEvidence\n"
        "def f():\n    from patchheal.verdict.tripwire import why_tainted\n"
        "import patchheal.verdict.judge\n"
    )
    found = _verdict_imports(module)
    assert ("patchheal.verdict.tripwire", "why_tainted") in found
    assert ("patchheal.verdict.judge", "*") in found
    assert found != VERIFICATION_VERDICT_IMPORTS
