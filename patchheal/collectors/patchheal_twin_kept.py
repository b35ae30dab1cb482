"""In the twin, each changed assertion runs as made impossible, then as it is.

`patchheal_twin.py` compiles a planned module from its twin's syntax tree; on
the lines it was told to keep (`keep`: the changed assertions whose passing
the monitor can see), this runs the impossible assertion first and puts the
assertion as it is after it, on the same line, with what they share
evaluated once:

* a plain `assert`: the operand both compare (or the whole test, negated)
  goes into a name of its own (`x = add(2, 3)`), then `assert x == <fresh
  object>`, then `assert x == 5`;
* a `self.assert*(...)` call: every argument, keywords and `msg` included,
  evaluated once, in order, into names of their own; then the twin's call
  with them, but for the one argument it changed (a literal or a fresh
  object, with no side effect) or under its opposite's name (`assertTrue` ->
  `assertFalse`), then the helper as it is with them.

The impossible one comes first because it is the first comparison the
operand sees, as the one comparison of every other run is: a value that
holds only on its first comparison (or its first truth test) holds against
the impossible one and is caught, where after the one as it is it would fail
the impossible one as honest code does. When the impossible assertion holds,
the test says so to the monitor and returns there (it passes, and the twin
with it). What it says cannot be kept from the monitor: it reads the
`__code__` of a function it defines there, named `@patchheal_impossible_held`
(an audit event no code of the step can stop or forge: the name is not an
identifier, and the function's code is the test file's), so a test that then
fails anyway, in a fixture's teardown or `tearDown` that calls the
candidate's code, still has its impossible assertion seen holding
(verdict/twin.py). When it fails, its failure is held, the one as it
is runs, and the held failure is raised. pytest's assertion-pass hook, or the
unittest collector's helper, reports the line to the monitor when the one as
it is passed; a test that fails in the twin without it failed as it is
(verdict/twin.py). Any other shape of change (a call that unpacks `*args` or
`**kwargs`, two changes) keeps the impossible assertion alone. The names are
not identifiers: no source code can name them. Pure (syntax trees only); it
must never import patchheal (any Python 3.7+).
"""

from __future__ import annotations

import ast
from typing import Any

KEPT = "@patchheal_kept"
HELD = "@patchheal_held"
IMPOSSIBLE_HELD = "@patchheal_impossible_held"
"""The name of the function whose `__code__` is read when an impossible assertion held
(patchheal_watch.py records the line for the running test)."""


def _functions(module: ast.Module) -> list[Any]:
    return [n for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def keep_originals(twin: ast.Module, pristine: ast.Module, keep: set[int]) -> None:
    """`twin` with each changed assertion on a `keep` line run as made impossible,
    then as it is in `pristine` (the file's own tree)."""
    originals = {
        stmt.lineno: stmt
        for function in _functions(pristine)
        for stmt in function.body
        if isinstance(stmt, (ast.Assert, ast.Expr)) and stmt.lineno in keep
    }
    for function in _functions(twin):
        body: list[ast.stmt] = []
        for stmt in function.body:
            original = originals.get(stmt.lineno)
            both: list[ast.stmt] | None = None
            if isinstance(original, ast.Assert) and isinstance(stmt, ast.Assert):
                both = _asserts(original, stmt)
            elif isinstance(original, ast.Expr) and isinstance(stmt, ast.Expr):
                both = _calls(original, stmt)
            body.extend(both or [stmt])
        function.body = body


def _load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def _asserts(original: ast.Assert, twin: ast.Assert) -> list[ast.stmt] | None:
    """The assert as made impossible, then as it is, the operand they share evaluated once
    (a call with side effects runs once, as in every other run)."""
    test, made = original.test, twin.test
    shared: ast.expr
    first: ast.expr
    second: ast.expr
    if isinstance(made, ast.UnaryOp) and isinstance(made.op, ast.Not):
        if ast.dump(made.operand) != ast.dump(test):
            return None
        shared, first, second = test, _load(KEPT), ast.UnaryOp(ast.Not(), _load(KEPT))
    elif isinstance(test, ast.Compare) and isinstance(made, ast.Compare):
        if len(test.ops) != 1 or ast.dump(test) == ast.dump(made):
            return None
        if [type(o) for o in test.ops] != [type(o) for o in made.ops]:
            return None
        if ast.dump(test.left) == ast.dump(made.left):
            shared = test.left
            first = ast.Compare(_load(KEPT), test.ops, test.comparators)
            second = ast.Compare(_load(KEPT), made.ops, made.comparators)
        elif ast.dump(test.comparators[0]) == ast.dump(made.comparators[0]):
            shared = test.comparators[0]
            first = ast.Compare(test.left, test.ops, [_load(KEPT)])
            second = ast.Compare(made.left, made.ops, [_load(KEPT)])
        else:
            return None
    else:
        return None
    kept: ast.stmt = ast.Assign([ast.Name(KEPT, ast.Store())], shared)
    ordered = _impossible_first(ast.Assert(second, twin.msg), ast.Assert(first, original.msg))
    return _placed([kept, *ordered], twin)


def _helper(node: ast.expr) -> ast.Call | None:
    """`self.assert*(...)`/`self.fail*(...)` with no `*args` or `**kwargs`."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    owner, name = node.func.value, node.func.attr
    if not (isinstance(owner, ast.Name) and owner.id == "self"):
        return None
    if not name.startswith(("assert", "fail")):
        return None
    if any(isinstance(a, ast.Starred) for a in node.args):
        return None
    return None if any(k.arg is None for k in node.keywords) else node


def _calls(original: ast.Expr, twin: ast.Expr) -> list[ast.stmt] | None:
    """The helper called as made impossible, then as it is, every argument evaluated once,
    in order (positional ones, then keywords, as Python evaluates a call without `*`/`**`);
    None unless the twin changed exactly one argument, or the helper's name alone."""
    was, made = _helper(original.value), _helper(twin.value)
    if was is None or made is None or len(was.args) != len(made.args):
        return None
    if [k.arg for k in was.keywords] != [k.arg for k in made.keywords]:
        return None
    # No zip(): its strict= is Python 3.10's, and this runs on the step's Python (3.7+).
    values = [*was.args, *(k.value for k in was.keywords)]
    twin_values = [*made.args, *(k.value for k in made.keywords)]
    changed = [ast.dump(values[i]) != ast.dump(twin_values[i]) for i in range(len(values))]
    renamed = was.func.attr != made.func.attr  # type: ignore[attr-defined]
    if sum(changed) + renamed != 1:
        return None
    names = [f"{KEPT}{i}" for i in range(len(values))]
    kept: list[ast.stmt] = [
        ast.Assign([ast.Name(names[i], ast.Store())], values[i]) for i in range(len(values))
    ]
    given: list[ast.expr] = [_load(name) for name in names]
    impossible = [twin_values[i] if changed[i] else given[i] for i in range(len(values))]
    count = len(was.args)
    calls: list[ast.stmt] = []
    for func, args in ((made.func, impossible), (was.func, given)):
        named = [ast.keyword(k.arg, args[count + i]) for i, k in enumerate(was.keywords)]
        calls.append(ast.Expr(ast.Call(func, args[:count], named)))
    return _placed([*kept, *_impossible_first(*calls)], twin)


def _impossible_first(impossible: ast.stmt, as_is: ast.stmt) -> list[ast.stmt]:
    """`impossible`; if it held, the monitor is told and the test returns (passes); else
    its failure is held while `as_is` runs, then raised. What an operand is first compared
    with is the impossible."""
    held = ast.ExceptHandler(
        ast.Name("Exception", ast.Load()),
        f"{HELD}_caught",  # unbound at the handler's end: kept under a name of its own
        [ast.Assign([ast.Name(HELD, ast.Store())], _load(f"{HELD}_caught"))],
    )
    return [
        ast.Try([impossible], [held], [*_tell_held(), ast.Return(None)], []),
        as_is,
        ast.Raise(_load(HELD), None),
    ]


def _tell_held() -> list[ast.stmt]:
    """`def @patchheal_impossible_held(): pass` then its `__code__` read: the audit event
    the monitor records the holding line by. Parsed, so that the function's fields are
    those of the Python this runs on (3.7 has no `posonlyargs`)."""
    marker = ast.parse("def _held():\n    pass\n").body[0]
    marker.name = IMPOSSIBLE_HELD  # type: ignore[attr-defined]
    for node in ast.walk(marker):  # placed on the twin's line, as the rest (_placed)
        for name in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
            if hasattr(node, name):
                delattr(node, name)
    read = ast.Expr(ast.Attribute(_load(IMPOSSIBLE_HELD), "__code__", ast.Load()))
    return [marker, read]


def _placed(made: list[ast.stmt], twin: ast.stmt) -> list[ast.stmt]:
    """The new statements on the twin's line (its traceback and the monitor's evidence name
    it); the expressions taken from the file keep their own places."""
    for stmt in made:
        ast.copy_location(stmt, twin)
        for node in ast.walk(stmt):
            if not hasattr(node, "lineno") or getattr(node, "lineno", None) is None:
                ast.copy_location(node, twin)
    return made
