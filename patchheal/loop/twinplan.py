"""Which tests an impossible twin changes, and where their functions are (loop/twins.py).

The protected tests are the originally failing ones; a module or class that
failed to collect stands for the tests under it that passed in the first
verification run (bounded). Each id is looked up in the tree: the file the
reproduction recorded its function in first, then the file its id names
(`oracle/testids.py`), parsed once per file.
"""

from __future__ import annotations

import ast
import hashlib
import os
import random
import unittest
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from patchheal.models import Failure, Frame, TestResults, Verdict
from patchheal.oracle.assertions import executed
from patchheal.oracle.mutate import Target, find, find_by_name
from patchheal.oracle.testids import Location, children, locations
from patchheal.pysource import parse_module
from patchheal.verdict.ran import Required
from patchheal.workspace import inplace

# Bounds: a collection error stands for every test of its module; a big break for many.
MAX_CHILDREN = 20
MAX_TESTS = 100
_SEARCH_FILES = 20_000
_SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "venv", ".tox", "__pycache__"})
# TestCase's own helpers, whose passing the unittest collector reports
# (patchheal_unittest.py); a project's own `assertValid` helper is not one of them.
_HELPERS = frozenset(
    n for n in vars(unittest.TestCase) if n.startswith("assert") and n != "assertLogs"
) - {"assertNoLogs"}
_CONTEXTS = frozenset(n for n in _HELPERS if n.startswith(("assertRaises", "assertWarns")))


@dataclass
class Plan:
    files: dict[str, list[Target]] = field(default_factory=dict)
    missing: list[tuple[str, str]] = field(default_factory=list)
    asserts: dict[str, Required] = field(default_factory=dict)
    """Test id -> its file and the assertions its every passing run executes (verdict/ran.py)."""


def protected_tests(baseline: Verdict, failure: Failure) -> list[str]:
    """The originally failing tests: the failure's and the baseline verdict's, by id."""
    ids = list(failure.failing_tests)
    ids += baseline.tests.with_outcome("failed", "error") if baseline.tests else []
    ids += [] if baseline.tests else list(baseline.failing_tests)
    return list(dict.fromkeys(ids))


def expand(ids: Sequence[str], first: TestResults | None, rng: random.Random) -> list[str]:
    """Each protected id as the tests to twin: itself, or for a module or class that failed
    to collect, the tests under it that passed in the first run (at most MAX_CHILDREN)."""
    tests: list[str] = []
    for test in ids:
        if first is None or test in first.outcomes:
            tests.append(test)
            continue
        under = [t for t in children(first.outcomes, test) if first.outcomes[t] == "passed"]
        tests += rng.sample(under, MAX_CHILDREN) if len(under) > MAX_CHILDREN else under or [test]
    unique = list(dict.fromkeys(tests))
    return rng.sample(unique, MAX_TESTS) if len(unique) > MAX_TESTS else unique


def _inside(path: str) -> bool:
    pure = PurePosixPath(path)
    return bool(path) and not pure.is_absolute() and ".." not in pure.parts


def _by_suffix(tree: Path, path: str) -> str | None:
    """The one file of the tree whose path ends with `path` (pytest's rootdir may be a
    subdirectory); None when none or several."""
    found, seen = [], 0
    for root, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        seen += len(files)
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), tree)  # noqa: PTH118
            if rel.endswith(f"/{path}"):
                found.append(rel)
        if seen > _SEARCH_FILES:
            break
    return found[0] if len(found) == 1 else None


class _Resolver:
    """Finds each test's function in the tree, parsing each file once."""

    def __init__(self, tree: Path, defined_in: dict[str, str]) -> None:
        self.tree, self.defined_in = tree, defined_in
        self.modules: dict[str, ast.Module | None] = {}
        self.hashes: dict[str, str] = {}

    def _module(self, rel: str) -> ast.Module | None:
        if rel not in self.modules:
            try:
                content = inplace.read(self.tree, rel).content
                self.hashes[rel] = hashlib.sha256(content).hexdigest()
                self.modules[rel] = parse_module(content.decode())
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
                self.modules[rel] = None
        return self.modules[rel]

    def locate(self, test: str) -> Location | None:
        options = locations(test)
        where = self.defined_in.get(test, "")
        if options and _inside(where):  # the reproduction saw the function's code there
            first = options[0]
            options.insert(0, Location(where, first.classes, first.function, first.style))
        if options and options[0].style == "pytest" and not self._module(options[0].file):
            moved = _by_suffix(self.tree, options[0].file)
            if moved:
                first = options[0]
                options.append(Location(moved, first.classes, first.function, first.style))
        for option in options:
            module = self._module(option.file)
            if module is None:
                continue
            if find(module, option.classes, option.function) is not None:
                return option
            if option.file == where and find_by_name(module, option.function):
                return option
        return None


def plan(
    tree: Path, tests: Sequence[str], defined_in: dict[str, str], frames: Sequence[Frame] = ()
) -> Plan:
    """Which files to change, and for which tests; the tests no twin can be made for.
    `frames`: the reproduced failure's, which name the line a test failed at."""
    made = Plan()
    resolver = _Resolver(tree, defined_in)
    for test in tests:
        where = resolver.locate(test)
        if where is None:
            made.missing.append((test, "no test function of a Python file has that id"))
            continue
        target = Target(test, where.classes, where.function, _failed_at(frames, where))
        made.files.setdefault(where.file, []).append(target)
        module = resolver._module(where.file)
        made.asserts[test] = Required(
            where.file,
            resolver.hashes.get(where.file, ""),
            _assert_lines(module, where),
            _call_lines(module, where),
        )
    return made


def _failed_at(frames: Sequence[Frame], where: Location) -> int:
    """The innermost line of the test's own function among the failure's frames, 0 if
    none: the statement its failure was raised at."""
    lines = [
        f.line
        for f in frames
        if f.line and f.function == where.function and _same_path(f.file, where.file)
    ]
    return lines[-1] if lines else 0


def _same_path(shown: str, rel: str) -> bool:
    shown, rel = shown.replace("\\", "/"), rel.replace("\\", "/")
    return shown == rel or shown.endswith("/" + rel) or rel.endswith("/" + shown)


def _body(module: ast.Module | None, where: Location) -> list[ast.stmt]:
    """The statements every passing run of the test's function executes."""
    if module is None:
        return []
    function = find(module, where.classes, where.function) or find_by_name(module, where.function)
    return [] if function is None else list(executed(function.body))


def _assert_lines(module: ast.Module | None, where: Location) -> tuple[int, ...]:
    """The top-level `assert` lines of the test's function: pytest reports each one that
    passes when it rewrites the module, which it does not under PYTEST_DONT_REWRITE."""
    if module is None or "PYTEST_DONT_REWRITE" in (ast.get_docstring(module) or ""):
        return ()
    return tuple(s.lineno for s in _body(module, where) if isinstance(s, ast.Assert))


def _call_lines(module: ast.Module | None, where: Location) -> tuple[int, ...]:
    """The top-level `self.assert*(...)`/`self.fail*(...)` calls of a TestCase method: the
    unittest collector's helpers report each one that returns (a context-manager form,
    `with self.assertRaises(...)`, is a `with`, not a call statement)."""
    lines = []
    for statement in _body(module, where):
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            continue
        owner, name = call.func.value, call.func.attr
        if not (isinstance(owner, ast.Name) and owner.id == "self" and name in _HELPERS):
            continue
        # Without a callable, assertRaises & co. return a context: no pass to see here.
        if name in _CONTEXTS and len(call.args) < 2:
            continue
        lines.append(statement.lineno)
    return tuple(lines)
