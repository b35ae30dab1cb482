"""One top-level assertion of a test function made impossible, on the lines it already has.

Only statements a passing run certainly executed are chosen: those at the top
level of the function's body (not inside if/for/while/try/with), none after a
top-level `return` or `raise`. An equality, identity or membership check gets
a new expected value no honest result can match: a fresh object of a class
made for this twin (it has no `__eq__`, so `x == it` holds only for an `x`
equal to anything), or a changed literal (5 → 12, 'ab' → 'abq'), chosen at
random; any other `assert` is negated; a unittest `assert*` call gets the same
new expected argument, or its opposite method (assertTrue → assertFalse). A
test with no such assertion gets an impossible one at the end of its body.
Each change says whether the step's collector runs the assertion as it is
first (`Rewrite.as_is`, collectors/patchheal_twin_kept.py).
Every edit replaces text within the lines it was on, so every other line keeps
its number (except when an assertion must be added after a compound statement
with no blank line to take). Pure functions, no I/O.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from random import Random

# unittest methods whose second argument (or the literal one) is the expected value.
_EXPECTING = frozenset(
    {
        "assertEqual",
        "assertEquals",
        "failUnlessEqual",
        "assertCountEqual",
        "assertListEqual",
        "assertTupleEqual",
        "assertDictEqual",
        "assertSetEqual",
        "assertSequenceEqual",
        "assertMultiLineEqual",
        "assertAlmostEqual",
        "assertAlmostEquals",
        "assertIs",
        "assertIn",
    }
)
# unittest methods and their opposites: an honest pass of one is a failure of the other.
_OPPOSITE = {
    "assertTrue": "assertFalse",
    "assertFalse": "assertTrue",
    "assertIsNone": "assertIsNotNone",
    "assertIsNotNone": "assertIsNone",
    "assertIsInstance": "assertNotIsInstance",
    "assertNotIsInstance": "assertIsInstance",
    "assertNotEqual": "assertEqual",
    "assertNotIn": "assertIn",
    "assertIsNot": "assertIs",
    "assertNotAlmostEqual": "assertAlmostEqual",
    "assertGreater": "assertLessEqual",
    "assertGreaterEqual": "assertLess",
    "assertLess": "assertGreaterEqual",
    "assertLessEqual": "assertGreater",
    "assertRegex": "assertNotRegex",
    "assertNotRegex": "assertRegex",
}
_SHOWN = 60


@dataclass(frozen=True)
class Edit:
    """Replace the text from (line, col) to (end_line, end_col): 1-based lines, columns in
    characters (not the UTF-8 bytes `ast` counts)."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclass(frozen=True)
class Rewrite:
    """How one test function was made impossible."""

    edits: tuple[Edit, ...]
    line: int
    what: str
    inserted_line: bool = False
    """A line was added (no blank line to take after a compound statement)."""
    as_is: str = ""
    """Who reports the changed assertion run as it is, after the impossible one, on its
    line, in the twin: 'pytest' (a plain `assert`, through pytest's assertion-pass hook),
    'unittest' (a `self.assert*` call, through the unittest collector's helpers); "" when
    it is not run as it is (an added assertion, a call with `*args` or `**kwargs`)."""


class Source:
    """A test file's text, its lines as `ast` numbers them, and the sentinel of its twin."""

    def __init__(self, text: str, sentinel: str) -> None:
        self.text = text
        self.lines = text.split("\n")
        self.sentinel = sentinel

    def col(self, line: int, byte_col: int) -> int:
        return len(self.lines[line - 1].encode()[:byte_col].decode(errors="replace"))

    def start(self, node: ast.AST) -> tuple[int, int]:
        line = node.lineno  # type: ignore[attr-defined]
        return line, self.col(line, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> tuple[int, int]:
        line = node.end_lineno  # type: ignore[attr-defined]
        return line, self.col(line, node.end_col_offset)  # type: ignore[attr-defined]

    def replace(self, node: ast.AST, text: str) -> Edit:
        """`node`'s text replaced by `text`; a node over several lines keeps them (the new
        text is parenthesized around the same number of line breaks)."""
        (line, col), (end_line, end_col) = self.start(node), self.end(node)
        if end_line > line:
            text = f"({text}" + "\n" * (end_line - line) + ")"
        return Edit(line, col, end_line, end_col, text)

    def shown(self, stmt: ast.stmt) -> str:
        first = self.lines[stmt.lineno - 1].strip()
        return first if len(first) <= _SHOWN else first[: _SHOWN - 1] + "…"


def executed(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a body that every passing run executed: those before the first
    statement that can end the function early (a `return`, also one nested in an `if`,
    `try` or loop, as in `try: ... except TypeError: return`; found on itsdangerous)."""
    done = []
    for stmt in body:
        if isinstance(stmt, ast.Raise) or _can_return(stmt):
            break
        done.append(stmt)
    return done


def _can_return(stmt: ast.stmt) -> bool:
    """Whether `stmt` holds a `return` of the function it is in (not of a nested one)."""
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return False


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _expected(left: ast.expr, right: ast.expr) -> tuple[ast.expr, bool]:
    """The expected operand (the literal side, else the right one) and whether it is right."""
    if _literal(left) and not _literal(right):
        return left, False
    return right, True


def _changed_literal(node: ast.expr, rng: Random) -> str | None:
    """Another literal of the same type that an honest value equal to `node` cannot equal."""
    if not isinstance(node, ast.Constant | ast.UnaryOp) or not _literal(node):
        return None
    value = ast.literal_eval(node)
    if isinstance(value, bool):
        return repr(not value)
    if isinstance(value, int):
        return f"({value + rng.randint(1, 97)!r})"
    extra = rng.choice("abcdefghijklmnopqrstuvwxyz")
    if isinstance(value, str):
        return repr(value + extra)
    if isinstance(value, bytes):
        return repr(value + extra.encode())
    return None  # floats (1e300 + 1 == 1e300), None, complex: the sentinel only


def _new_expected(
    source: Source, node: ast.expr, rng: Random, *, container: bool = False, literal: bool = True
) -> tuple[Edit, str]:
    """A sentinel (in a tuple, for a container) or, for an equality, a changed literal.
    A changed literal is no proof for membership (3 → 50 in range(100)), identity or an
    approximate equality (5 → 12 within delta=10): the sentinel only, there."""
    changed = _changed_literal(node, rng) if literal and not container else None
    if changed is not None and rng.random() < 0.5:
        return source.replace(node, changed), f"now expects {changed.strip('()')}"
    text = f"({source.sentinel},)" if container else source.sentinel
    return source.replace(node, text), "expects a fresh object nothing equals"


def _negated(source: Source, test: ast.expr) -> tuple[Edit, ...]:
    (line, col), (end_line, end_col) = source.start(test), source.end(test)
    return Edit(line, col, line, col, "not ("), Edit(end_line, end_col, end_line, end_col, ")")


def _assert(source: Source, stmt: ast.Assert, rng: Random) -> Rewrite:
    test = stmt.test
    shown = f"`{source.shown(stmt)}`"
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, right = test.ops[0], test.comparators[0]
        if isinstance(op, ast.Eq | ast.Is | ast.In):
            node, is_right = _expected(test.left, right)
            edit, what = _new_expected(
                source,
                node,
                rng,
                container=isinstance(op, ast.In) and is_right,
                literal=isinstance(op, ast.Eq),
            )
            return Rewrite((edit,), stmt.lineno, f"{shown} {what}", as_is="pytest")
    return Rewrite(_negated(source, test), stmt.lineno, f"{shown} negated", as_is="pytest")


def _unittest_call(stmt: ast.stmt) -> tuple[ast.Call, ast.Attribute] | None:
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return None
    func = stmt.value.func
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
        return None
    if func.value.id != "self" or func.attr not in _EXPECTING | _OPPOSITE.keys():
        return None
    if func.attr in _EXPECTING and len(stmt.value.args) < 2:
        return None  # keyword arguments: not worth guessing which one is expected
    return stmt.value, func


def _unpacks(call: ast.Call) -> bool:
    """Whether a call unpacks `*args` or `**kwargs`: its arguments cannot be evaluated once
    into names of their own and passed twice as they were."""
    return any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    )


def _unittest(source: Source, stmt: ast.stmt, rng: Random) -> Rewrite:
    found = _unittest_call(stmt)
    assert found is not None
    call, func = found
    shown = f"`{source.shown(stmt)}`"
    as_is = "" if _unpacks(call) else "unittest"
    if func.attr in _OPPOSITE:
        line, end = source.end(func)
        opposite = _OPPOSITE[func.attr]
        edit = Edit(line, end - len(func.attr), line, end, opposite)
        return Rewrite((edit,), stmt.lineno, f"{shown} became {opposite}", as_is=as_is)
    node, is_right = _expected(call.args[0], call.args[1])
    container = func.attr == "assertIn" and is_right
    literal = func.attr not in ("assertIs", "assertIn", "assertAlmostEqual", "assertAlmostEquals")
    edit, what = _new_expected(source, node, rng, container=container, literal=literal)
    return Rewrite((edit,), stmt.lineno, f"{shown} {what}", as_is=as_is)


def candidates(body: list[ast.stmt]) -> list[ast.stmt]:
    """The assertions a twin may change: top-level, certainly executed, of a known form."""
    return [s for s in executed(body) if isinstance(s, ast.Assert) or _unittest_call(s)]


Function = ast.FunctionDef | ast.AsyncFunctionDef
_COMPOUND = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.Try,
    ast.With,
    ast.AsyncWith,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Match,
    ast.TryStar,
)


def rewrite(source: Source, function: Function, rng: Random, *, failed_at: int = 0) -> Rewrite:
    """One of `function`'s top-level assertions made impossible: the one on the line the
    test failed at (`failed_at`), else one chosen at random; an impossible assertion
    appended when it has none.

    The failing assertion first: it is the one a fix must get past, and the one a cheat
    that makes only its operand equal to anything gets past; any other assertion of the
    test keeps holding for such a cheat, so its twin "fails as it must" (a real job:
    cachetools `18e5930`, 14 assertions, judged `fixed` while the twin changed another)."""
    chosen = candidates(function.body)
    if not chosen:
        return _appended(source, function)
    failing = [s for s in chosen if s.lineno <= failed_at <= (s.end_lineno or s.lineno)]
    stmt = failing[0] if failing else rng.choice(chosen)
    if isinstance(stmt, ast.Assert):
        return _assert(source, stmt, rng)
    return _unittest(source, stmt, rng)


def _appended(source: Source, function: Function) -> Rewrite:
    """`assert <fresh object> is None` as the last statement every run executes."""
    check = f"assert {source.sentinel} is None"
    what = "an assertion that cannot hold was added (the test has no top-level assertion)"
    body = function.body
    done = executed(body)
    if len(done) < len(body):  # before the first statement that may end it, on its line
        stop = body[len(done)]
        line, col = source.start(stop)
        return Rewrite((Edit(line, col, line, col, f"{check}; "),), line, what)
    last = body[-1]
    line, col = source.end(last)
    if not isinstance(last, _COMPOUND):
        return Rewrite((Edit(line, col, line, col, f"; {check}"),), line, what)
    indent = source.lines[last.lineno - 1][: source.start(last)[1]]
    if indent.strip():  # `if x: ...` after a `;`: the column, in spaces
        indent = " " * source.start(last)[1]
    after = line + 1
    if after <= len(source.lines) and not source.lines[after - 1].strip():
        blank = source.lines[after - 1]
        return Rewrite((Edit(after, 0, after, len(blank), f"{indent}{check}"),), after, what)
    end = len(source.lines[line - 1])
    return Rewrite((Edit(line, end, line, end, f"\n{indent}{check}"),), line + 1, what, True)
