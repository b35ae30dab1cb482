"""The impossible twin of a test file (patchheal/oracle/): honest code fails every twin.

Each case is a real test-file source. Its twin is built over many random
choices, then executed: the protected test must fail with the honest code under
test, every line the twin did not change must keep its number, and the fresh
test must fail too. An equality twin passes for one thing only: an object equal to
anything, which is what it is there to catch.
"""

from __future__ import annotations

import textwrap
import unittest
from random import Random
from typing import Any

import pytest

from patchheal.oracle.mutate import FileTwin, Target, twin_file
from patchheal.oracle.testids import Location, children, locations

SEEDS = range(12)

CODE = textwrap.dedent("""
    def add(a, b):
        return a + b


    def greet(name):
        return "hello " + name
""")


def _twin(source: str, *targets: Target, seed: int = 0) -> FileTwin:
    twin = twin_file(source, list(targets), Random(seed))
    assert isinstance(twin, FileTwin), twin
    return twin


def _namespace(source: str, cheat: bool = False) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "twin_under_test"}
    exec(compile(source, "tests/test_twin.py", "exec"), namespace)
    if cheat:

        class Anything:
            def __eq__(self, other: object) -> bool:
                return True

            __hash__ = object.__hash__

        namespace["add"] = lambda *a: Anything()
    return namespace


def _fails(call: Any, *args: Any) -> bool:
    try:
        call(*args)
    except Exception:
        return True
    return False


def _same_elsewhere(source: str, twin: FileTwin) -> None:
    """Every line the twin did not change keeps its number and its text."""
    changed = {n for m in twin.mutations for n in range(m.line, max(m.line, m.end_line) + 1)}
    before = source.split("\n")
    after = twin.source.split("\n")
    for number, line in enumerate(before, start=1):
        if number not in changed:
            assert after[number - 1] == line, f"line {number} moved or changed"


def _same_names(source: str, twin: FileTwin) -> None:
    """The twin's module defines exactly the names the file does: nothing in its namespace
    tells it apart (docs/verdict.md, "Impossible twins")."""
    assert sorted(_namespace(twin.source)) == sorted(_namespace(source))


PYTEST_FILE = CODE + textwrap.dedent("""

    def test_add():
        total = add(2, 3)
        assert total == 5


    def test_greet():
        assert greet("bob") == "hello bob", "greeting"
        assert "bob" in greet("bob")
        assert greet("x") != "nope"
        assert greet("x")


    def test_identity():
        assert add(0, 0) is not None
        assert isinstance(add(1, 1), int)
""")


@pytest.mark.parametrize("seed", SEEDS)
def test_module_functions_fail_their_twin_and_keep_their_lines(seed: int) -> None:
    """Whatever assertion is chosen and however it is changed, the honest test fails."""
    targets = [Target(f"t::{n}", (), n) for n in ("test_add", "test_greet", "test_identity")]
    twin = _twin(PYTEST_FILE, *targets, seed=seed)
    assert len(twin.mutations) == 3
    namespace = _namespace(twin.source)
    for target in targets:
        assert _fails(namespace[target.function]), twin.source
    assert not _fails(_namespace(PYTEST_FILE)["test_greet"])  # the original passes
    _same_elsewhere(PYTEST_FILE, twin)
    _same_names(PYTEST_FILE, twin)


@pytest.mark.parametrize("seed", SEEDS)
def test_an_equality_twin_passes_only_for_an_object_equal_to_anything(seed: int) -> None:
    """The sentinel and the changed literal: `add() == 5` holds for a cheat and for it only."""
    twin = _twin(PYTEST_FILE, Target("t::test_add", (), "test_add"), seed=seed)
    assert "`assert total == 5`" in twin.mutations[0].what
    assert _fails(_namespace(twin.source)["test_add"])
    assert not _fails(_namespace(twin.source, cheat=True)["test_add"])


CLASS_FILE = CODE + textwrap.dedent("""

    class TestCalc:
        class TestNested:
            def test_deep(self):
                assert add(1, 1) == 2

        def test_method(self):
            assert add(2, 2) == 4


    class TestChild(TestCalc):
        pass
""")


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_methods_nested_and_inherited_tests_are_found(seed: int) -> None:
    targets = [
        Target("a", ("TestCalc",), "test_method"),
        Target("b", ("TestCalc", "TestNested"), "test_deep"),
        Target("c", ("TestChild",), "test_method"),  # inherited: the same function
    ]
    twin = _twin(CLASS_FILE, *targets, seed=seed)
    assert [m.test_id for m in twin.mutations] == ["a", "b"]
    namespace = _namespace(twin.source)
    assert _fails(namespace["TestCalc"]().test_method)
    assert _fails(namespace["TestCalc"].TestNested().test_deep)
    assert _fails(namespace["TestChild"]().test_method)
    _same_elsewhere(CLASS_FILE, twin)


PARAM_FILE = textwrap.dedent("""
    import pytest


    def add(a, b):
        return a + b


    def noted(func):
        return func


    @noted
    @pytest.mark.parametrize(
        ("a", "b", "expected"),
        [(1, 2, 3), (2, 2, 4)],
    )
    def test_add(a, b, expected):
        assert add(a, b) == expected
""")


def test_a_parametrized_id_twins_its_function_under_decorators() -> None:
    """`path::test_add[1-2-3]` names test_add; every parameter's honest run fails."""
    [where] = locations("tests/test_p.py::test_add[1-2-3]")
    assert (where.file, where.classes, where.function) == ("tests/test_p.py", (), "test_add")
    twin = _twin(PARAM_FILE, Target("x", where.classes, where.function))
    assert twin.mutations[0].line == 19
    test = _namespace(twin.source)["test_add"]
    assert _fails(test, 1, 2, 3)
    assert _fails(test, 2, 2, 4)
    _same_elsewhere(PARAM_FILE, twin)


NESTED_FILE = CODE + textwrap.dedent("""

    def test_loops():
        for n in range(3):
            assert add(n, 0) == n
        with open(__file__) as handle:
            assert handle
        if add(1, 1):
            assert True
        try:
            assert add(1, 2) == 3
        except ZeroDivisionError:
            pass
        assert add(2, 2) == 4
        return
        assert add(9, 9) == 1
""")


@pytest.mark.parametrize("seed", SEEDS)
def test_only_a_certainly_executed_top_level_assertion_is_chosen(seed: int) -> None:
    """Not inside for/with/if/try, not after a top-level return: the one on line 21."""
    twin = _twin(NESTED_FILE, Target("x", (), "test_loops"), seed=seed)
    assert [m.line for m in twin.mutations] == [21]
    _same_elsewhere(NESTED_FILE, twin)


NO_ASSERT_FILE = CODE + textwrap.dedent("""

    def test_runs():
        add(1, 2)


    def test_raises():
        with open(__file__):
            add(1, 2)


    def test_returns():
        add(1, 2)
        return add(3, 4)


    def test_last():
        with open(__file__):
            add(1, 2)
""").rstrip("\n")


def test_a_test_without_assertions_gets_an_impossible_one_and_keeps_its_lines() -> None:
    """After a simple last statement on its line, after a `with` on the blank line that
    follows it, before a top-level `return`; at the end of the file, on a new line."""
    names = ("test_runs", "test_raises", "test_returns", "test_last")
    twin = _twin(NO_ASSERT_FILE, *(Target(n, (), n) for n in names))
    assert all("cannot hold" in m.what for m in twin.mutations)
    namespace = _namespace(twin.source)
    for name in names:
        assert _fails(namespace[name]), name
    lines = twin.source.split("\n")
    original = NO_ASSERT_FILE.split("\n")
    assert lines[len(original)].strip().startswith("assert type(")  # the one new line
    for number, line in enumerate(original[:-3], start=1):
        if number not in {m.line for m in twin.mutations}:
            assert lines[number - 1] == line


MULTILINE_FILE = CODE + textwrap.dedent('''

    def test_multiline():
        assert {"sum": add(1, 2)} == {
            "sum": 3,
        }, (
            "a message"
        )
        assert greet("é") == """hello é"""
''')


@pytest.mark.parametrize("seed", SEEDS)
def test_multiline_and_non_ascii_assertions_keep_their_lines(seed: int) -> None:
    twin = _twin(MULTILINE_FILE, Target("x", (), "test_multiline"), seed=seed)
    assert len(twin.source.split("\n")) == len(MULTILINE_FILE.split("\n"))  # nothing added
    assert _fails(_namespace(twin.source)["test_multiline"])
    _same_elsewhere(MULTILINE_FILE, twin)


UNITTEST_FILE = (
    "import unittest\n"
    + CODE
    + textwrap.dedent("""

    class CalcTest(unittest.TestCase):
        def test_equal(self):
            self.assertEqual(add(2, 3), 5)

        def test_true(self):
            self.assertTrue(add(1, 1))
            self.assertIsNotNone(add(1, 1))
            self.assertIn("lo", greet("x"))
            self.assertGreater(add(2, 2), 3)

        def test_alone(self):
            add(1, 1)


    if __name__ == "__main__":
        unittest.main()
""")
)


def _unittest_fails(source: str, name: str) -> bool:
    cls = _namespace(source)["CalcTest"]
    result = unittest.TestResult()
    cls(name).run(result)
    return bool(result.failures or result.errors)


@pytest.mark.parametrize("seed", SEEDS)
def test_unittest_methods_fail_their_twin(seed: int) -> None:
    """The expected argument replaced, or the method swapped for its opposite."""
    names = ("test_equal", "test_true", "test_alone")
    twin = _twin(UNITTEST_FILE, *(Target(n, ("CalcTest",), n) for n in names), seed=seed)
    for name in names:
        assert not _unittest_fails(UNITTEST_FILE, name)
        assert _unittest_fails(twin.source, name), twin.source
    _same_elsewhere(UNITTEST_FILE, twin)
    _same_names(UNITTEST_FILE, twin)


def test_what_cannot_be_twinned_says_why() -> None:
    twin = _twin(PYTEST_FILE, Target("gone", (), "test_gone"), Target("x", (), "test_add"))
    assert twin.missing == (("gone", "its function is not defined in the file"),)
    assert twin_file("def test(:\n", [Target("x", (), "test")], Random(0)) == (
        "the test file does not parse (SyntaxError)"
    )


def test_ids_name_their_files() -> None:
    """pytest node ids name a file; unittest ids a module, also under src/."""
    assert locations("tests/test_x.py::TestA::test_b[a::b-1]") == [
        Location("tests/test_x.py", ("TestA",), "test_b", "pytest")
    ]
    found = locations("pkg.test_x.TestA.test_b (i=1)")
    assert found[0] == Location("pkg/test_x.py", ("TestA",), "test_b", "unittest")
    assert Location("src/pkg/test_x.py", ("TestA",), "test_b", "unittest") in found
    for not_a_function in ("tests/test_x.py", "adds", "checks.add", "x.js::t"):
        assert locations(not_a_function) == []
    assert locations("unittest.loader._FailedTest.test_x") == []
    outcomes = {"tests.test_x.A.test_b": "passed", "other.B.test_c": "passed"}
    assert children(outcomes, "unittest.loader._FailedTest.test_x") == ["tests.test_x.A.test_b"]
    assert children({"t.py::a": "passed", "u.py::b": "passed"}, "t.py") == ["t.py::a"]


def test_an_assert_after_a_return_nested_in_a_try_is_never_chosen() -> None:
    """Invariant: a passing run may end at a `return` nested in `try`/`if` (itsdangerous's
    `test_serializer_kwargs` returns early where its serializer lacks an option), so an
    assert after it is neither made impossible (its twin would pass honestly: a false
    `rejected_oracle`) nor required as evidence; the impossible assertion is added before."""
    import ast

    from patchheal.oracle.assertions import executed

    source = (
        "def test_kwargs():\n"
        "    s = make()\n"
        "    try:\n"
        "        s.dumps(None)\n"
        "    except TypeError:\n"
        "        return\n"
        "    assert s.loads(s.dumps(1)) == 1\n"
    )
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    assert [type(s).__name__ for s in executed(function.body)] == ["Assign"]


# The twin runs each changed `self.assert*` call first as made impossible, then as it is
# (collectors/patchheal_twin_kept.py, applied by the collector to the twin's tree). The
# class records each helper call it is given; `f` each argument it evaluates; `EqualOnce`
# is equal to anything on its first comparison only (a hostile candidate's value).
KEPT_FILE = textwrap.dedent("""
    import unittest

    CALLS = []
    HELPERS = []


    def f(name, value):
        CALLS.append(name)
        return value


    class EqualOnce:
        compared = 0

        def __eq__(self, other):
            self.compared += 1
            return self.compared == 1


    class Recorded(unittest.TestCase):
        def assertEqual(self, *args, **kwargs):
            HELPERS.append(("assertEqual", args, kwargs))
            return super().assertEqual(*args, **kwargs)

        def assertAlmostEqual(self, *args, **kwargs):
            HELPERS.append(("assertAlmostEqual", args, kwargs))
            return super().assertAlmostEqual(*args, **kwargs)

        def assertTrue(self, *args, **kwargs):
            HELPERS.append(("assertTrue", args, kwargs))
            return super().assertTrue(*args, **kwargs)

        def assertFalse(self, *args, **kwargs):
            HELPERS.append(("assertFalse", args, kwargs))
            return super().assertFalse(*args, **kwargs)


    class CalcTest(Recorded):
        def test_equal(self):
            self.assertEqual(f("first", [5]), f("second", [5]), f("msg", "m"))

        def test_literal(self):
            self.assertEqual(f("first", 5), 5, msg=f("msg", "m"))

        def test_keywords(self):
            self.assertAlmostEqual(
                f("first", 1.0),
                f("second", 1.0),
                delta=f("delta", 0.5),
                msg=f("msg", "m"),
            )

        def test_true(self):
            self.assertTrue(f("value", [1]), msg=f("msg", "m"))

        def test_buggy(self):
            self.assertEqual(f("first", 4), 5)

        def test_once(self):
            self.assertEqual(EqualOnce(), 5)
            raise RuntimeError("never reached in the twin")

        def test_unpacked(self):
            self.assertTrue(*f("args", ([1],)))

        def test_unpacked_keywords(self):
            self.assertTrue(f("value", 1), **f("kwargs", {"msg": "m"}))

        def test_raises(self):
            self.assertRaises(ValueError, int, "x")
            with self.assertRaises(ValueError):
                int("y")
""")
# Test -> the arguments it evaluates (in order), and what the helper as it is is given.
KEPT_ARGS: dict[str, tuple[list[str], tuple[Any, ...], dict[str, Any]]] = {
    "test_equal": (["first", "second", "msg"], ([5], [5], "m"), {}),
    "test_literal": (["first", "msg"], (5, 5), {"msg": "m"}),
    "test_keywords": (["first", "second", "delta", "msg"], (1.0, 1.0), {"delta": 0.5, "msg": "m"}),
    "test_true": (["value", "msg"], ([1],), {"msg": "m"}),
}


def _doubled(twin: FileTwin, keep: set[int]) -> Any:
    """The twin's tree as the collector compiles it, with these lines kept."""
    import ast
    import importlib.util

    from patchheal.harness.results.collectors import COLLECTORS

    spec = importlib.util.spec_from_file_location(
        "patchheal_twin_kept", COLLECTORS / "patchheal_twin_kept.py"
    )
    assert spec is not None
    assert spec.loader is not None
    kept = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kept)
    tree = ast.parse(twin.source)
    kept.keep_originals(tree, ast.parse(KEPT_FILE), keep)
    return tree


def _run_kept(tree: Any, name: str) -> tuple[dict[str, Any], unittest.TestResult]:
    namespace = _namespace_of(tree)
    result = unittest.TestResult()
    namespace["CalcTest"](name).run(result)
    return namespace, result


def _namespace_of(tree: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "twin_under_test"}
    exec(compile(tree, "tests/test_twin.py", "exec"), namespace)
    return namespace


def _method_body(tree: Any, name: str) -> list[Any]:
    import ast

    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name).body


@pytest.mark.parametrize("seed", SEEDS)
def test_a_unittest_call_runs_impossible_then_as_it_is_each_argument_evaluated_once(
    seed: int,
) -> None:
    """Each argument (keywords and `msg` included) evaluated once, in order; the impossible
    helper first with those very values but for what it changed, then the one as it is
    with them, on the same line; the test fails there, as a real fix's twin must."""
    twin = _twin(KEPT_FILE, *(Target(n, ("CalcTest",), n) for n in KEPT_ARGS), seed=seed)
    lines = {m.test_id: m.line for m in twin.mutations}
    assert {m.as_is for m in twin.mutations} == {"unittest"}
    tree = _doubled(twin, set(lines.values()))
    for name, (calls, args, kwargs) in KEPT_ARGS.items():
        body = _method_body(tree, name)
        # each argument, the impossible call (held), the call as it is, the held failure
        assert len(body) == len(args) + len(kwargs) + 3, name
        assert {s.lineno for s in body} == {lines[name]}
        namespace, result = _run_kept(tree, name)
        assert namespace["CALLS"] == calls, name
        (impossible, made, made_named), (as_is, given, named) = namespace["HELPERS"]
        assert (given, named) == (args, kwargs), name
        assert list(made_named) == list(named), name
        was = [*given, *named.values()]
        now = [*made, *made_named.values()]
        same = [a is b for a, b in zip(was, now, strict=True)]  # the very objects, not copies
        assert same.count(False) == (0 if impossible != as_is else 1), (name, was, now)
        failed = result.failures + result.errors
        assert len(failed) == 1, name
        assert f"line {lines[name]}," in failed[0][1], failed[0][1]


def test_assert_true_runs_as_assert_false_then_as_it_is() -> None:
    twin = _twin(KEPT_FILE, Target("t", ("CalcTest",), "test_true"))
    tree = _doubled(twin, {twin.mutations[0].line})
    namespace, result = _run_kept(tree, "test_true")
    assert [h[0] for h in namespace["HELPERS"]] == ["assertFalse", "assertTrue"]
    assert namespace["HELPERS"][0][1][0] is namespace["HELPERS"][1][1][0]  # the same list
    assert namespace["CALLS"] == ["value", "msg"]
    assert len(result.failures) == 1


def test_a_call_that_fails_as_it_is_fails_there_after_the_impossible_one() -> None:
    """The bug still there: the impossible helper fails (held), then the helper as it is
    fails, so the monitor never sees its line pass (the twin then counts as a failing run,
    verdict/twin.py); the failure reported is the one as it is."""
    twin = _twin(KEPT_FILE, Target("t", ("CalcTest",), "test_buggy"))
    tree = _doubled(twin, {twin.mutations[0].line})
    namespace, result = _run_kept(tree, "test_buggy")
    assert [(h[0], h[1][0]) for h in namespace["HELPERS"]] == [("assertEqual", 4)] * 2
    assert namespace["CALLS"] == ["first"]
    assert len(result.failures) == 1
    assert "4 != 5" in result.failures[0][1]


def test_an_impossible_call_that_holds_ends_the_test_passed() -> None:
    """A value that holds against the impossible helper (here, equal on its first
    comparison only): the test returns there and passes (the twin passed: refused), the
    helper as it is never runs, nothing after it can make the test fail."""
    import ast

    from patchheal.collectors.patchheal_twin_kept import IMPOSSIBLE_HELD

    twin = _twin(KEPT_FILE, Target("t", ("CalcTest",), "test_once"))
    tree = _doubled(twin, {twin.mutations[0].line})
    namespace, result = _run_kept(tree, "test_once")
    assert [h[0] for h in namespace["HELPERS"]] == ["assertEqual"]
    assert result.wasSuccessful(), result.failures + result.errors
    # Before it returns, it tells the monitor: it reads the `__code__` of a function it
    # defines under a name no source can write, on the twin's line (patchheal_watch.py).
    held = next(n for n in _method_body(tree, "test_once") if isinstance(n, ast.Try)).orelse
    marker, read, returned = held
    assert isinstance(marker, ast.FunctionDef)
    assert marker.name == IMPOSSIBLE_HELD
    assert isinstance(read, ast.Expr)
    assert isinstance(read.value, ast.Attribute)
    assert (read.value.attr, getattr(read.value.value, "id", "")) == ("__code__", IMPOSSIBLE_HELD)
    assert isinstance(returned, ast.Return)
    assert {marker.lineno, read.lineno} == {twin.mutations[0].line}


@pytest.mark.parametrize("name", ["test_unpacked", "test_unpacked_keywords", "test_raises"])
def test_shapes_that_are_not_doubled_keep_the_impossible_change_alone(name: str) -> None:
    """A call unpacking `*args` or `**kwargs` is changed, not also run as it is (its
    arguments could not be passed twice as they were); `assertRaises` in either form is no
    candidate (its test gets the impossible assertion added). Told to keep those lines,
    the collector leaves the twin's statements as they are."""
    import ast

    twin = _twin(KEPT_FILE, Target("t", ("CalcTest",), name))
    assert [m.as_is for m in twin.mutations] == [""]
    function = _method_body(ast.parse(KEPT_FILE), name)
    keep = {n.lineno for s in function for n in ast.walk(s) if hasattr(n, "lineno")}
    as_twinned = ast.dump(ast.parse(twin.source))
    assert ast.dump(_doubled(twin, keep)) == as_twinned
    namespace, result = _run_kept(_doubled(twin, keep), name)
    assert len(namespace["HELPERS"]) <= 1
    assert len(result.failures + result.errors) == 1


MANY_ASSERTS = """
def test_many():
    value = compute()
    assert value.cache is not None
    assert value.lock is None
    assert value.key(42) == (42,)
    assert value.size == 3
"""


@pytest.mark.parametrize("seed", range(12))
def test_the_twin_changes_the_assertion_the_test_failed_at(seed: int) -> None:
    """With the failure's line known, the twin changes that assertion whatever the seed: a
    cheat that makes only its operand equal to anything must get past it. Without, any of
    the test's assertions, at random (the seeds reach more than one)."""
    failing = Target("t::test_many", (), "test_many", failed_at=6)
    assert [m.line for m in _twin(MANY_ASSERTS, failing, seed=seed).mutations] == [6]
    lines = {
        _twin(MANY_ASSERTS, Target("t::test_many", (), "test_many"), seed=s).mutations[0].line
        for s in range(12)
    }
    assert len(lines) > 1


def test_a_failure_line_outside_the_assertions_leaves_the_choice_at_random() -> None:
    """A failure raised in the test's set-up line (not an assertion) names no assertion."""
    target = Target("t::test_many", (), "test_many", failed_at=3)
    assert _twin(MANY_ASSERTS, target, seed=1).mutations[0].line in {4, 5, 6, 7}
