"""Which tests an impossible twin changes, and where their functions are (loop/twins.py).

The protected tests are the originally failing ones; a module or class that
failed to collect stands for the tests under it that passed in the first
verification run (bounded). Each id is looked up in the tree: the file the
reproduction recorded its function in first, then the file its id names
(`oracle/testids.py`), parsed once per file.
"""

from __future__ import annotations

import ast
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from patchheal.models import Failure, TestResults, Verdict
from patchheal.oracle.assertions import executed
from patchheal.oracle.mutate import Target, find, find_by_name
from patchheal.oracle.testids import Location, children, locations
from patchheal.pysource import parse_module
from patchheal.workspace import inplace

# Bounds: a collection error stands for every test of its module; a big break for many.
MAX_CHILDREN = 20
MAX_TESTS = 100
_SEARCH_FILES = 20_000
_SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "venv", ".tox", "__pycache__"})


@dataclass
class Plan:
    files: dict[str, list[Target]] = field(default_factory=dict)
    styles: dict[str, str] = field(default_factory=dict)
    missing: list[tuple[str, str]] = field(default_factory=list)
    asserts: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Test id -> the lines of the asserts its every passing run executes (verdict/ran.py)."""


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

    def _module(self, rel: str) -> ast.Module | None:
        if rel not in self.modules:
            try:
                text = inplace.read(self.tree, rel).content.decode()
                self.modules[rel] = parse_module(text)
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


def plan(tree: Path, tests: Sequence[str], defined_in: dict[str, str]) -> Plan:
    """Which files to change, and for which tests; the tests no twin can be made for."""
    made = Plan()
    resolver = _Resolver(tree, defined_in)
    for test in tests:
        where = resolver.locate(test)
        if where is None:
            made.missing.append((test, "no test function of a Python file has that id"))
            continue
        made.files.setdefault(where.file, []).append(Target(test, where.classes, where.function))
        made.styles[where.file] = where.style
        made.asserts[test] = _assert_lines(resolver._module(where.file), where)
    return made


def _assert_lines(module: ast.Module | None, where: Location) -> tuple[int, ...]:
    """The top-level `assert` lines of the test's function: pytest reports each one that
    passes when it rewrites the module, which it does not under PYTEST_DONT_REWRITE."""
    if module is None or "PYTEST_DONT_REWRITE" in (ast.get_docstring(module) or ""):
        return ()
    function = find(module, where.classes, where.function) or find_by_name(module, where.function)
    if function is None:
        return ()
    return tuple(s.lineno for s in executed(function.body) if isinstance(s, ast.Assert))
