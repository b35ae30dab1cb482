"""Existing tests are read-only: what `allow_test_changes = false` means (issue 34).

The policy's named rules (deleted tests, skips, weakened assertions) missed
changes to a test's *data*: a patch that deleted four `parametrize` rows, and
one that rewrote the expected values to the buggy output, were run instead of
refused. So the rule is now the one docs/job-spec.md states: in a test file
that exists, a candidate may add (new tests, imports, helpers) but not change,
delete or move anything that is there.

Python test files whose pre-patch text the gate can read are compared as
syntax trees (formatting and comments are free): every top-level statement of
the file, and every statement of a test class, must still be there unchanged,
and no added statement may rebind a name the file already defines (a second
`def test_x` would replace the first). Other files, or when a side does not
parse, are compared line by line: no non-blank line may be removed or changed
(whitespace inside a line is free).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable

from patchheal.workspace import diffs

_SHOWN = 3


def changed_tests(name: str, before: str | None, after: str | None) -> list[str] | None:
    """Why the patch changes existing tests of the Python file `name`, judged on its
    trees; None when a side is unknown or does not parse (the caller compares lines)."""
    if before is None or after is None:
        return None
    try:
        old, new = ast.parse(before), ast.parse(after)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    reasons: list[str] = []
    _compare(name, old.body, new.body, "", reasons)
    return reasons


def changed_lines(name: str, removed: Iterable[str], added: Iterable[str]) -> list[str]:
    """One sentence if the hunks remove or change non-blank lines (moves inside the
    patch are fine; whitespace within a line is free)."""
    lost = Counter(diffs.canonical_line(line) for line in removed if line.strip())
    lost -= Counter(diffs.canonical_line(line) for line in added if line.strip())
    if not lost:
        return []
    count = sum(lost.values())
    example = next(iter(lost))
    return [
        f"{name}: changes or deletes {count} existing line(s) of a test file (e.g. "
        f"`{example[:80]}`); with allow_test_changes = false a candidate may add tests "
        "but not change the ones there"
    ]


def _compare(
    name: str, old: list[ast.stmt], new: list[ast.stmt], where: str, reasons: list[str]
) -> None:
    """Every statement of `old` must be in `new` unchanged (a class recursively), and
    nothing added may rebind a name `old` binds."""
    new_classes = {s.name: s for s in new if isinstance(s, ast.ClassDef)}
    remaining = Counter(_dump(s) for s in new)
    kept: set[int] = set()
    lost: list[ast.stmt] = []
    for statement in old:
        dumped = _dump(statement)
        if remaining[dumped] > 0:
            remaining[dumped] -= 1
            continue
        if isinstance(statement, ast.ClassDef):
            twin = new_classes.get(statement.name)
            if twin is not None and _same_header(statement, twin):
                # The same class with statements added or changed: judged member by member.
                kept.add(id(twin))
                _compare(name, statement.body, twin.body, f"{where}{twin.name}.", reasons)
                continue
        lost.append(statement)
    for statement in lost[:_SHOWN]:
        what, line = _label(statement, where), _first_line(statement)
        reasons.append(
            f"{name}: changes or deletes {what} (line {line}); "
            "with allow_test_changes = false a candidate may add tests but not change the "
            "ones there"
        )
    if len(lost) > _SHOWN:
        reasons.append(f"{name}: and {len(lost) - _SHOWN} more existing statement(s) changed")
    # A changed statement's new version binds its old name: reported above, not again.
    bound = {n for s in old for n in _bound(s)} - {n for s in lost for n in _bound(s)}
    old_dumps = Counter(_dump(s) for s in old)
    for statement in new:
        if id(statement) in kept:
            continue
        if old_dumps[_dump(statement)] > 0:
            old_dumps[_dump(statement)] -= 1
            continue
        for rebound in sorted(set(_bound(statement)) & bound):
            reasons.append(
                f"{name}: line {statement.lineno} redefines the existing `{where}{rebound}`, "
                "which replaces it; a candidate may add tests under new names only"
            )


def _first_line(statement: ast.stmt) -> int:
    """Where a statement starts as a reader sees it: its first decorator, if any."""
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return min([statement.lineno, *(d.lineno for d in statement.decorator_list)])
    return statement.lineno


def _dump(statement: ast.stmt) -> str:
    return ast.dump(statement, include_attributes=False)


def _same_header(old: ast.ClassDef, new: ast.ClassDef) -> bool:
    def header(c: ast.ClassDef) -> str:
        parts: list[ast.AST] = [*c.bases, *c.keywords, *c.decorator_list]
        return "|".join(ast.dump(p, include_attributes=False) for p in parts)

    return header(old) == header(new)


def _label(statement: ast.stmt, where: str) -> str:
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
        kind = "test" if statement.name.startswith("test") else "function"
        return f"the {kind} `{where}{statement.name}`"
    if isinstance(statement, ast.ClassDef):
        return f"the class `{where}{statement.name}`"
    names = _bound(statement)
    if names:
        return f"the definition of `{where}{', '.join(names)}`"
    return "a statement"


def _bound(statement: ast.stmt) -> list[str]:
    """Names a statement binds at its own level (defs, classes, assignments, imports)."""
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [statement.name]
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return [(a.asname or a.name).split(".")[0] for a in statement.names if a.name != "*"]
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        targets = list(statement.targets)
    elif isinstance(statement, ast.AnnAssign | ast.AugAssign):
        targets = [statement.target]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
