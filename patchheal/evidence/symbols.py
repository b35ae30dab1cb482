"""What Python code defines and uses, read with `ast`: the raw material of localization.

`index_definitions` lists every function and class of a file with its line span;
`test_usage` reads a test function (and its module's imports) for the names it
exercises; `module_files` maps a dotted module name to the repository files that
can hold it. Nothing here runs or imports the code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from patchheal.pysource import parse_module

# A file bigger than this is generated or vendored; parsing it costs more than it tells.
MAX_PARSE_BYTES = 512 * 1024
# A keyword argument passed by more than this share of a test module's tests (`name=`,
# `catch_exceptions=` in a CLI's suite) names the suite's habits, not a test's subject.
# Why 0.2: measured in benchmarks/README.md (0.15 to 0.25 gave the same recall).
MAX_KEYWORD_SHARE = 0.2
_MIN_TESTS_FOR_SHARE = 4
# The test file is the project's, so it may be anything: each keyword is matched against
# every executed definition, and a real test sets a handful of options.
MAX_KEYWORDS = 64


@dataclass(frozen=True)
class Definition:
    """A function, method or class: where it is and what it refers to."""

    file: str
    name: str
    qualname: str
    start: int
    end: int
    is_class: bool
    refers_to: frozenset[str] = frozenset()


@dataclass
class TestUsage:
    """What a test touches: names it uses, modules and names it imports."""

    file: str
    span: tuple[int, int] | None = None
    used: set[str] = field(default_factory=set)
    imported_modules: set[str] = field(default_factory=set)
    imported_names: dict[str, tuple[str, str]] = field(default_factory=dict)
    """local name → (module, name in that module) for `from m import name as local`."""
    keywords: set[str] = field(default_factory=set)
    """Keyword arguments the test's body passes (`hide_input=True`), but those most of its
    module's tests pass too: the options this test exercises."""


def parse(path: Path) -> ast.Module | None:
    """The module's syntax tree, or None when it cannot be read or parsed."""
    try:
        if path.stat().st_size > MAX_PARSE_BYTES:
            return None
        return parse_module(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError, SystemError):
        return None  # SystemError: the interpreter's fault twice over (see pysource.py)


def names_in(node: ast.AST) -> set[str]:
    """Identifiers a piece of code refers to: bare names and attribute names."""
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


def _start(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def index_definitions(rel: str, tree: ast.Module) -> list[Definition]:
    """Every def and class in `tree`, methods with their class in the qualname."""
    out: list[Definition] = []

    def visit(body: Iterable[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qual = f"{prefix}{node.name}"
                out.append(
                    Definition(
                        file=rel,
                        name=node.name,
                        qualname=qual,
                        start=_start(node),
                        end=node.end_lineno or node.lineno,
                        is_class=isinstance(node, ast.ClassDef),
                        refers_to=frozenset(names_in(node) - {node.name}),
                    )
                )
                visit(node.body, qual + ".")
            elif isinstance(node, ast.If | ast.Try):  # `if TYPE_CHECKING:`, `try: import`
                visit(node.body, prefix)
                visit(node.orelse, prefix)

    visit(tree.body, "")
    return out


def _imports(tree: ast.Module, usage: TestUsage) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                usage.imported_modules.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            usage.imported_modules.add(node.module)
            for alias in node.names:
                usage.imported_names[alias.asname or alias.name] = (node.module, alias.name)
                usage.imported_modules.add(f"{node.module}.{alias.name}")


def _keywords(test: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Keyword arguments passed in the test's body (its decorators' `ids=` are pytest's)."""
    return {
        k.arg for stmt in test.body for k in ast.walk(stmt) if isinstance(k, ast.keyword) and k.arg
    }


def _keyword_share(tree: ast.Module) -> dict[str, float]:
    """Per keyword, the share of the module's `test_*` functions (methods too) passing it;
    empty for a module of too few tests to tell a habit from a subject."""
    tests = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test")
    ]
    if len(tests) < _MIN_TESTS_FOR_SHARE:
        return {}
    counts: dict[str, int] = {}
    for test in tests:
        for keyword in _keywords(test):
            counts[keyword] = counts.get(keyword, 0) + 1
    return {keyword: n / len(tests) for keyword, n in counts.items()}


def _find_test(
    tree: ast.Module, function: str, klass: str | None
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    if klass:
        bodies = [n.body for n in classes if n.name == klass] + [tree.body]
    else:  # a bare name may still be a method of a test class
        bodies = [tree.body, *(n.body for n in classes)]
    for body in bodies:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function:
                return node
    return None


def test_usage(worktree: Path, test_id: str) -> TestUsage | None:
    """`tests/t.py::Class::test_x[param]` → what the test uses; None if its file is unreadable."""
    file, _, rest = test_id.partition("::")
    parts = [p.split("[")[0] for p in rest.split("::") if p]
    tree = parse(worktree / file)
    if tree is None:
        return None
    usage = TestUsage(file=file)
    _imports(tree, usage)
    node = _find_test(tree, parts[-1], parts[0] if len(parts) > 1 else None) if parts else None
    if node is None:
        usage.used = names_in(tree)  # the test is unknown: the whole module is the evidence
        return usage
    usage.span = (_start(node), node.end_lineno or node.lineno)
    usage.used = names_in(node) | {a.arg for a in node.args.args}
    share = _keyword_share(tree)
    subjects = [k for k in _keywords(node) if share.get(k, 0.0) <= MAX_KEYWORD_SHARE]
    usage.keywords = set(sorted(subjects, key=lambda k: (share.get(k, 0.0), k))[:MAX_KEYWORDS])
    # Helpers of the same module the test calls (fixtures, builders) count as the test's own.
    local = {d.name: d for d in index_definitions(file, tree)}
    for name in list(usage.used):
        helper = local.get(name)
        if helper is not None and helper.name != node.name:
            usage.used |= helper.refers_to
    return usage


def module_files(module: str, by_suffix: dict[str, list[str]]) -> list[str]:
    """Repository files that can hold `module` (`pkg/mod.py`, `pkg/mod/__init__.py`, src/...)."""
    path = module.replace(".", "/")
    found: list[str] = []
    for candidate in (f"{path}.py", f"{path}/__init__.py"):
        found += by_suffix.get(candidate, [])
    return found


def suffix_index(files: Sequence[str]) -> dict[str, list[str]]:
    """Each file under every path suffix of it (`src/pkg/mod.py` under `pkg/mod.py`, ...)."""
    index: dict[str, list[str]] = {}
    for f in files:
        parts = PurePosixPath(f).parts
        for i in range(len(parts)):
            index.setdefault("/".join(parts[i:]), []).append(f)
    return index
