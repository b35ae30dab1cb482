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


# harness/ is a house of rooms (patchheal/harness/__init__.py): the shared words and
# the roof at its top, the rooms ranked lowest first. A module imports its own room,
# the rooms below it and the words, never a room above it or one of its own rank.
HARNESS_WORDS = {"__init__", "base", "config", "definitions", "tables"}
HARNESS_ROOF = {"registry"}
HARNESS_ROOMS = {
    "engine": 1,
    "results": 2,
    "images": 2,
    "setup": 3,
    "docker": 4,
    "local": 4,
    "ci": 4,
    "compose": 5,
    "inference": 6,
}
HARNESS_MODULE_LINES = 320
HARNESS = PACKAGE / "harness"
HARNESS_PREFIX = "patchheal.harness"


def _harness_rank(module: str) -> tuple[str, int]:
    """The room of `patchheal.harness.<...>` and its rank (words 0, roof above every room)."""
    part = module.removeprefix("patchheal.harness").lstrip(".").split(".")[0] or "__init__"
    if part in HARNESS_WORDS:
        return part, 0
    if part in HARNESS_ROOF:
        return part, max(HARNESS_ROOMS.values()) + 1
    return part, HARNESS_ROOMS[part]


def harness_layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import in `graph` (harness modules only) that goes up or sideways between rooms."""
    found = []
    for module, targets in sorted(graph.items()):
        room, rank = _harness_rank(module)
        for target in sorted(targets):
            other, other_rank = _harness_rank(target)
            if other != room and other_rank >= rank and other_rank > 0:
                found.append(f"{module} -> {target} ({room} {rank} imports {other} {other_rank})")
    return found


def _harness_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {
            t for t in _imports(path, modules) if t.startswith("patchheal.harness") and t != name
        }
        for name, path in modules.items()
        if name.startswith(HARNESS_PREFIX)
    }


def test_the_room_check_sees_an_upward_and_a_sideways_import() -> None:
    graph = {
        "patchheal.harness.engine.sandbox": {"patchheal.harness.images.rootfs"},
        "patchheal.harness.results.channel": {"patchheal.harness.images.build"},
        "patchheal.harness.setup.deps": {"patchheal.harness.engine.containers"},
        "patchheal.harness.compose.harness": {"patchheal.harness.docker.harness"},
        "patchheal.harness.config": {"patchheal.harness.registry"},
    }
    assert harness_layer_violations(graph) == [
        "patchheal.harness.config -> patchheal.harness.registry (config 0 imports registry 7)",
        "patchheal.harness.engine.sandbox -> patchheal.harness.images.rootfs"
        " (engine 1 imports images 2)",
        "patchheal.harness.results.channel -> patchheal.harness.images.build"
        " (results 2 imports images 2)",
    ]


def test_harness_rooms_import_only_downward() -> None:
    assert harness_layer_violations(_harness_graph()) == []


def test_the_harness_top_holds_only_the_words_and_the_roof() -> None:
    top = {p.stem for p in HARNESS.glob("*.py")}
    rooms = {p.name for p in HARNESS.iterdir() if (p / "__init__.py").is_file()}
    assert top == HARNESS_WORDS | HARNESS_ROOF, f"move {sorted(top - HARNESS_WORDS - HARNESS_ROOF)}"
    assert rooms == set(HARNESS_ROOMS), "a new room gets a rank in HARNESS_ROOMS"


@pytest.mark.parametrize("room", sorted(HARNESS_ROOMS))
def test_every_harness_room_says_what_it_owns_and_may_import(room: str) -> None:
    docstring = ast.get_docstring(ast.parse((HARNESS / room / "__init__.py").read_text()))
    assert docstring, f"harness/{room}/__init__.py needs a docstring"
    assert "import" in docstring, f"harness/{room}/__init__.py: say what the room may import"


def test_no_harness_module_is_long() -> None:
    """A module of harness/ reads in a sitting: about 300 lines at most."""
    long = {
        str(p.relative_to(HARNESS)): n
        for p in HARNESS.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > HARNESS_MODULE_LINES
    }
    assert long == {}
