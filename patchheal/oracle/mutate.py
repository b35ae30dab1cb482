"""A test file's impossible twin: each protected test made impossible.

`twin_file` takes the file's text, the protected test functions in it and a
random generator; it returns the twin's text and one line per change (or
why a test got none). Every protected function gets one change
(`assertions.rewrite`); nothing is added to the module (no test, no name), so
the twin's module holds the same names as the file's, in every run alike
(docs/verdict.md, "Impossible twins"). The lines of everything else keep
their numbers. Pure, no I/O.
"""

from __future__ import annotations

import ast
import string
from collections.abc import Sequence
from dataclasses import dataclass
from random import Random

from patchheal.oracle.assertions import Edit, Rewrite, Source, rewrite
from patchheal.pysource import parse_module

Function = ast.FunctionDef | ast.AsyncFunctionDef
_BASES_DEPTH = 5


@dataclass(frozen=True)
class Target:
    """A protected test function in the file: its id, enclosing classes and name."""

    test_id: str
    classes: tuple[str, ...]
    function: str
    failed_at: int = 0
    """The line of this function the reproduction's failure was raised at (0: unknown): the
    assertion there is the one the twin changes, the one a cheat has to get past."""


@dataclass(frozen=True)
class Mutation:
    test_id: str
    line: int
    what: str
    end_line: int = 0
    """The last line the change touched (a multi-line operand), 0 for `line` alone."""
    as_is: str = ""
    """Who reports the changed assertion run as it is, after the impossible one ('pytest',
    'unittest'), "" when it is not (`assertions.Rewrite.as_is`)."""


@dataclass(frozen=True)
class FileTwin:
    source: str
    mutations: tuple[Mutation, ...]
    missing: tuple[tuple[str, str], ...]
    """(test id, why it has no twin)."""
    edits: tuple[Edit, ...] = ()
    """The changes that make `source` from the file's text (what the step's collector
    applies in memory: collectors/patchheal_twin_plan.py)."""


def _name(rng: Random, length: int) -> str:
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(length))


def _last(body: Sequence[ast.stmt], kind: type | tuple[type, ...], name: str) -> ast.stmt | None:
    # Redefined names: the last definition is the one that runs.
    found = [s for s in body if isinstance(s, kind) and getattr(s, "name", None) == name]
    return found[-1] if found else None


def _method(module: ast.Module, cls: ast.ClassDef, name: str, depth: int = 0) -> Function | None:
    found = _last(cls.body, (ast.FunctionDef, ast.AsyncFunctionDef), name)
    if found is not None or depth >= _BASES_DEPTH:
        return found  # type: ignore[return-value]
    for base in cls.bases:  # inherited from a base class of the same file
        if isinstance(base, ast.Name):
            parent = _last(module.body, ast.ClassDef, base.id)
            if isinstance(parent, ast.ClassDef):
                method = _method(module, parent, name, depth + 1)
                if method is not None:
                    return method
    return None


def find(module: ast.Module, classes: Sequence[str], name: str) -> Function | None:
    """The function a test id names: module-level, or a method of nested classes (also
    inherited from a base class defined in the same file)."""
    if not classes:
        return _last(module.body, (ast.FunctionDef, ast.AsyncFunctionDef), name)  # type: ignore[return-value]
    body: Sequence[ast.stmt] = module.body
    cls: ast.stmt | None = None
    for class_name in classes:
        cls = _last(body, ast.ClassDef, class_name)
        if not isinstance(cls, ast.ClassDef):
            return None
        body = cls.body
    assert isinstance(cls, ast.ClassDef)
    return _method(module, cls, name)


def find_by_name(module: ast.Module, name: str) -> Function | None:
    """The only function of that name at module level or in a module-level class (a test
    inherited from a class of another file: the reproduction recorded this file)."""
    owners: list[ast.Module | ast.ClassDef] = [module]
    owners += [c for c in module.body if isinstance(c, ast.ClassDef)]
    found = [
        s
        for owner in owners
        for s in owner.body
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == name
    ]
    return found[0] if len(found) == 1 else None


def _apply(text: str, edits: Sequence[Edit]) -> str:
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    for edit in sorted(edits, key=lambda e: (e.line, e.col), reverse=True):
        begin = starts[edit.line - 1] + edit.col
        end = starts[edit.end_line - 1] + edit.end_col
        text = text[:begin] + edit.text + text[end:]
    return text


def _parses(text: str) -> bool:
    try:
        parse_module(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def twin_file(text: str, targets: Sequence[Target], rng: Random) -> FileTwin | str:
    """The impossible twin of a test file with these protected tests; a string says why
    there is none (the file does not parse)."""
    try:
        module = parse_module(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return f"the test file does not parse ({type(exc).__name__})"
    sentinel = f'type("_{_name(rng, 1).upper()}{_name(rng, 7)}", (), {{}})()'
    source = Source(text, sentinel)
    chosen: list[tuple[Target, Rewrite]] = []
    missing: list[tuple[str, str]] = []
    done: dict[int, Rewrite] = {}  # one change per function (several params, inherited)
    for target in targets:
        function = find(module, target.classes, target.function)
        if function is None:
            function = find_by_name(module, target.function)
        if function is None:
            missing.append((target.test_id, "its function is not defined in the file"))
            continue
        if id(function) not in done:
            done[id(function)] = rewrite(source, function, rng, failed_at=target.failed_at)
            chosen.append((target, done[id(function)]))
    kept: list[tuple[Target, Rewrite]] = []
    for target, change in chosen:  # one at a time only if all at once does not parse
        if _parses(_apply(text, [e for _, r in [*kept, (target, change)] for e in r.edits])):
            kept.append((target, change))
        else:
            missing.append((target.test_id, "its twin would not parse"))
    edits = tuple(e for _, r in kept for e in r.edits)
    mutated = _apply(text, edits)
    mutations = tuple(
        Mutation(t.test_id, r.line, r.what, max(e.end_line for e in r.edits), r.as_is)
        for t, r in kept
    )
    return FileTwin(mutated, mutations, tuple(missing), edits)
