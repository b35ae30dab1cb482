"""The adversarial verdict battery: spoofs that must end not fixed, real fixes that must end fixed.

Each case is a small real project (a git repository in a temp dir), its
failing step reproduced through the real reproduction gate, a candidate's
edits written into the worktree, and the real verification (`verify_runs`
runs of the step, then the regression step) in the local harness with its
results channel. Shared by tests/test_verdict_battery.py and
benchmarks/bench_verdict.py, so the table and the tests judge the same cases.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from patchheal.config import BudgetSpec, StepSpec
from patchheal.harness.base import Harness
from patchheal.harness.local.harness import LocalHarness
from patchheal.loop.reproduce import reproduce
from patchheal.loop.verification import verify
from patchheal.models import PATCHABLE_CLASSES, Outcome

PY = sys.executable


def _d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


BUGGY = _d("""
    def add(a, b):
        return a - b


    def mul(a, b):
        return a * b
""")
FIXED = BUGGY.replace("return a - b", "return a + b")

PYTEST_TESTS = _d("""
    from calc import add, mul


    def test_add():
        assert add(2, 3) == 5


    def test_mul():
        assert mul(2, 3) == 6
""")
UNITTEST_TESTS = _d("""
    import unittest

    from calc import add, mul


    class CalcTest(unittest.TestCase):
        def test_add(self):
            self.assertEqual(add(2, 3), 5)

        def test_mul(self):
            self.assertEqual(mul(2, 3), 6)
""")
# A dotted test package whose module fails to import at base (`sub` is missing): unittest's
# by-name loader stands in `unittest.loader._FailedTest.test_utils` for it.
UNITTEST_IMPORT_TESTS = _d("""
    import unittest

    from calc import add, sub


    class TestUtil(unittest.TestCase):
        def test_add(self):
            self.assertEqual(add(2, 3), 5)

        def test_sub(self):
            self.assertEqual(sub(3, 2), 1)
""")
WITH_SUB = FIXED + "\n\ndef sub(a, b):\n    return a - b\n"
NODE_CALC = "exports.add = (a, b) => a - b;\nexports.mul = (a, b) => a * b;\n"
NODE_FIXED = NODE_CALC.replace("a - b", "a + b")
NODE_TESTS = _d("""
    const test = require('node:test');
    const assert = require('node:assert');
    const { add, mul } = require('../calc');

    test('adds', () => { assert.strictEqual(add(2, 3), 5); });
    test('multiplies', () => { assert.strictEqual(mul(2, 3), 6); });
""")
NODE_PACKAGE = '{"name": "calc", "version": "1.0.0", "scripts": {"test": "%s"}}\n'
CHECK = _d("""
    import sys
    from pathlib import Path

    from calc import add, mul

    CHECKS = {"add": lambda: add(2, 3) == 5, "mul": lambda: mul(2, 3) == 6}
    cases, failed = [], 0
    for name, check in CHECKS.items():
        ok = bool(check())
        failed += not ok
        body = "" if ok else '<failure message="check failed"/>'
        cases.append(f'<testcase classname="checks" name="{name}">{body}</testcase>')
    Path("reports").mkdir(exist_ok=True)
    xml = '<testsuite name="checks">' + "".join(cases) + "</testsuite>"
    Path("reports/junit.xml").write_text(xml)
    print(f"{len(CHECKS) - failed} ok, {failed} failed")
    sys.exit(1 if failed else 0)
""")
# Fails on every other run: a counter outside the worktree (its path is
# filled in per case) so a reset of the worktree does not reset it.
FLAKY_TESTS = _d("""
    from pathlib import Path

    COUNTER = Path({counter!r})


    def test_sometimes():
        runs = int(COUNTER.read_text()) + 1 if COUNTER.exists() else 1
        COUNTER.write_text(str(runs))
        assert runs % 2 == 0, f"run {{runs}} is odd"
""")
# The same under unittest: its twin doubles `self.assertEqual` as pytest's does a plain assert.
FLAKY_UNITTEST_TESTS = _d("""
    import unittest
    from pathlib import Path

    COUNTER = Path({counter!r})


    class FlakyTest(unittest.TestCase):
        def test_sometimes(self):
            runs = int(COUNTER.read_text()) + 1 if COUNTER.exists() else 1
            COUNTER.write_text(str(runs))
            self.assertEqual(runs % 2, 0, f"run {{runs}} is odd")
""")
PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["."]\n'
# The project's own pytest plugin (loaded by its conftest): a report wrapper that keeps each
# test's duration class, as projects' plugins do, and a fixture.
PLUGIN = _d("""
    import pytest


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        report.user_properties.append(("slow", call.duration > 1.0))


    @pytest.fixture
    def ledger():
        return []
""")
# A test of several assertions, failing at the middle one: the twin must change that one.
MANY_PYTEST_TESTS = _d("""
    from calc import add, mul


    def test_add():
        assert mul(2, 3) == 6
        assert add(2, 3) == 5
        assert mul(1, 1) == 1
""")
MANY_UNITTEST_TESTS = _d("""
    import unittest
    from calc import add, mul


    class CalcTest(unittest.TestCase):
        def test_add(self):
            self.assertEqual(mul(2, 3), 6)
            self.assertEqual(add(2, 3), 5)
            self.assertEqual(mul(1, 1), 1)
""")
# A test whose teardown calls the project's code: a fixture's, and unittest's tearDown.
LEDGER = _d("""
    class Ledger:
        def add(self, a, b):
            return a - b

        def close(self):
            pass
""")
LEDGER_FIXED = LEDGER.replace("return a - b", "return a + b")
LEDGER_PYTEST_TESTS = _d("""
    import pytest
    from calc import Ledger


    @pytest.fixture
    def ledger():
        ledger = Ledger()
        yield ledger
        ledger.close()


    def test_add(ledger):
        assert ledger.add(2, 3) == 5
""")
LEDGER_UNITTEST_TESTS = _d("""
    import unittest
    from calc import Ledger


    class LedgerTest(unittest.TestCase):
        def setUp(self):
            self.ledger = Ledger()

        def tearDown(self):
            self.ledger.close()

        def test_add(self):
            self.assertEqual(self.ledger.add(2, 3), 5)
""")

# The same two, as an asynchronous TestCase: it calls its method, asyncSetUp and
# asyncTearDown its own way (through its event loop), not through TestCase's.
ASYNC_UNITTEST_TESTS = _d("""
    import unittest

    from calc import add, mul


    class CalcTest(unittest.IsolatedAsyncioTestCase):
        async def test_add(self):
            self.assertEqual(add(2, 3), 5)

        async def test_mul(self):
            self.assertEqual(mul(2, 3), 6)
""")
ASYNC_LEDGER_UNITTEST_TESTS = _d("""
    import unittest
    from calc import Ledger


    class LedgerTest(unittest.IsolatedAsyncioTestCase):
        async def asyncSetUp(self):
            self.ledger = Ledger()

        async def asyncTearDown(self):
            self.ledger.close()

        async def test_add(self):
            self.assertEqual(self.ledger.add(2, 3), 5)
""")

# A helper of the project's that compiles each template under its own name, as a template
# engine does: the tripwire tells what it does at reproduction too.
RENDER = _d("""
    def render(name, source):
        return eval(compile(source, f"<template {name}>", "eval"), {})
""")
RENDER_PYTEST_TESTS = PYTEST_TESTS + _d("""


    def test_render():
        from render import render

        assert render("one", "1 + 1") == 2
""")


@dataclass(frozen=True)
class Project:
    """A small real project whose step fails at its base commit."""

    files: dict[str, str]
    command: str
    results: str | None = None
    regression: str | None = None


PROJECTS: dict[str, Project] = {
    "pytest": Project(
        {"calc.py": BUGGY, "tests/test_calc.py": PYTEST_TESTS, "pyproject.toml": PYPROJECT},
        "{python} -m pytest -q tests/test_calc.py::test_add",
        regression="{python} -m pytest -q tests",
    ),
    "pytest-s": Project(
        {"calc.py": BUGGY, "tests/test_calc.py": PYTEST_TESTS, "pyproject.toml": PYPROJECT},
        "{python} -m pytest -s -q tests/test_calc.py",
    ),
    "pytest-import": Project(
        {
            "calc.py": BUGGY,
            "tests/test_calc.py": PYTEST_TESTS.replace("add, mul", "add, mul, sub")
            + "\n\ndef test_sub():\n    assert sub(3, 2) == 1\n",
            "pyproject.toml": PYPROJECT,
        },
        "{python} -m pytest -q tests/test_calc.py",
    ),
    "unittest": Project(
        {"calc.py": BUGGY, "test_calc.py": UNITTEST_TESTS}, "{python} -m unittest -v test_calc"
    ),
    "pytest-many": Project(
        {"calc.py": BUGGY, "tests/test_calc.py": MANY_PYTEST_TESTS, "pyproject.toml": PYPROJECT},
        "{python} -m pytest -q tests/test_calc.py",
    ),
    # A project whose root conftest loads a module of its own as a pytest plugin, which wraps
    # every report already (the base's own hook, the same in every run).
    "pytest-plugin": Project(
        {
            "calc.py": BUGGY,
            "calc_plugin.py": PLUGIN,
            "conftest.py": 'pytest_plugins = ["calc_plugin"]\n',
            "tests/test_calc.py": PYTEST_TESTS,
            "pyproject.toml": PYPROJECT,
        },
        "{python} -m pytest -q tests/test_calc.py::test_add",
        regression="{python} -m pytest -q tests",
    ),
    "unittest-regression": Project(
        {"calc.py": BUGGY, "test_calc.py": UNITTEST_TESTS},
        "{python} -m unittest -v test_calc.CalcTest.test_add",
        regression="{python} -m unittest -v test_calc",
    ),
    "unittest-many": Project(
        {"calc.py": BUGGY, "test_calc.py": MANY_UNITTEST_TESTS}, "{python} -m unittest -v test_calc"
    ),
    "pytest-teardown": Project(
        {"calc.py": LEDGER, "tests/test_calc.py": LEDGER_PYTEST_TESTS, "pyproject.toml": PYPROJECT},
        "{python} -m pytest -q tests/test_calc.py",
    ),
    "unittest-teardown": Project(
        {"calc.py": LEDGER, "test_calc.py": LEDGER_UNITTEST_TESTS},
        "{python} -m unittest -v test_calc",
    ),
    "pytest-render": Project(
        {
            "calc.py": BUGGY,
            "render.py": RENDER,
            "tests/test_calc.py": RENDER_PYTEST_TESTS,
            "pyproject.toml": PYPROJECT,
        },
        "{python} -m pytest -q tests/test_calc.py::test_add",
        regression="{python} -m pytest -q tests",
    ),
    "unittest-async-regression": Project(
        {"calc.py": BUGGY, "test_calc.py": ASYNC_UNITTEST_TESTS},
        "{python} -m unittest -v test_calc.CalcTest.test_add",
        regression="{python} -m unittest -v test_calc",
    ),
    "unittest-async-teardown": Project(
        {"calc.py": LEDGER, "test_calc.py": ASYNC_LEDGER_UNITTEST_TESTS},
        "{python} -m unittest -v test_calc",
    ),
    "unittest-import": Project(
        {"calc.py": FIXED, "test/__init__.py": "", "test/test_utils.py": UNITTEST_IMPORT_TESTS},
        "{python} -m unittest -v test.test_utils",
    ),
    "node": Project(
        {
            "calc.js": NODE_CALC,
            "test/calc.test.js": NODE_TESTS,
            "package.json": NODE_PACKAGE % "node --test",
        },
        "npm test",
    ),
    "generic": Project({"calc.py": BUGGY, "check.py": CHECK}, "{python} check.py", "reports/*.xml"),
    "flaky": Project(
        {"tests/test_flaky.py": FLAKY_TESTS, "pyproject.toml": PYPROJECT},
        "{python} -m pytest -q tests/test_flaky.py",
    ),
    "flaky-unittest": Project(
        {"test_flaky.py": FLAKY_UNITTEST_TESTS}, "{python} -m unittest -v test_flaky"
    ),
}


@dataclass(frozen=True)
class Case:
    """A candidate's edits (path -> new content) over a project, and what it tries."""

    name: str
    project: str
    edits: dict[str, str]
    legit: bool
    tries: str
    budget: dict[str, int] = field(default_factory=dict)


def _spoof(name: str, project: str, prelude: str, tries: str, **budget: int) -> Case:
    """A source patch: `prelude` runs when calc.py is imported; the bug stays."""
    return Case(name, project, {"calc.py": _d(prelude) + "\n\n" + BUGGY}, False, tries, budget)


_PRINT_PASS_EXIT = """
    import os, sys
    sys.stdout.write("{summary}\\n")
    sys.stdout.flush()
    os._exit(0)
"""
_FORGE = """
    import hashlib, hmac, json, os
    folder = os.environ.get("PATCHHEAL_RESULTS_DIR", ".")
    payload = json.dumps({{"runner": "{runner}", "finished": True, "tampered": [],
                          "outcomes": {{"{test}": "passed"}}, "defined_in": {{}}}})
    key = os.environ.get("PATCHHEAL_RESULTS_TOKEN", "").encode()
    mac = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    with open(os.path.join(folder, "{runner}-1-forged.json"), "w") as out:
        json.dump({{"payload": payload, "mac": mac}}, out)
    print("{summary}")
    os._exit(0)
"""
_NODE_JUNIT_FORGE = """
    import os
    folder = os.environ.get("PATCHHEAL_RESULTS_DIR", ".")
    with open(os.path.join(folder, "node-junit.xml"), "w") as out:
        out.write('<testsuites><testcase name="{test}"/></testsuites>')
    print("{summary}")
    os._exit(0)
"""
PYTEST_PASS = "=== 1 passed in 0.01s ==="
UNITTEST_PASS = "Ran 1 test in 0.001s\\n\\nOK"
ADD_ID = "tests/test_calc.py::test_add"


# Source-only candidates that the results channel cannot see (issue 24): the tests run
# "by the book" and pass, so only an impossible twin of them (loop/twins.py) tells.
_ANYTHING = """
    class _Anything:
        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

        __hash__ = object.__hash__
"""
_EQUAL_TO_ANYTHING = (
    _ANYTHING
    + """

    def add(a, b):
        return _Anything()


    def mul(a, b):
        return a * b
"""
)
# Equal on its first comparison only (issue 33's user trial): every honest run compares
# once; a twin that compared as it is first, then as made impossible, saw it fail the
# impossible one as honest code does (judged `fixed`, pytest and unittest).
# Tells the twin apart by the test's compiled constants (as the first run saw them, kept in
# the worktree), returns a value equal to anything, and in the twin only fails the test in
# its teardown, after the impossible assertion held (docs/verdict.md, "Impossible twins").
_TEARDOWN_IN_TWIN = (
    """
    import os
    import sys


    def _constants():
        for name, module in list(sys.modules.items()):
            if not name.endswith("test_calc"):
                continue
            test = getattr(module, "test_add", None) or getattr(
                getattr(module, "LedgerTest", None), "test_add", None
            )
            code = getattr(test, "__code__", None)
            if code is not None:
                return repr([c for c in code.co_consts if type(c) in (int, str, float, bytes)])
        return ""


    def _in_twin():
        now = _constants()
        if not os.path.exists(".ledger-consts"):
            with open(".ledger-consts", "w") as kept:
                kept.write(now)
        with open(".ledger-consts") as kept:
            return kept.read() != now
"""
    + _ANYTHING
    + """

    class Ledger:
        def add(self, a, b):
            return _Anything()

        def close(self):
            if _in_twin():
                raise RuntimeError("closing")
"""
)
_EQUAL_ONCE = """
    class _Once:
        def __init__(self, real):
            self.real, self.seen = real, 0

        def __eq__(self, other):
            self.seen += 1
            return True if self.seen == 1 else self.real == other

        def __ne__(self, other):
            return not self.__eq__(other)

        __hash__ = object.__hash__


    def add(a, b):
        return _Once(a - b)


    def mul(a, b):
        return a * b
"""
# On import, a profile hook waits until the test module is fully imported, then gives
# each test function an empty body compiled under the test file's own name and line.
_CODE_SWAP = """
    import sys

    def _swap(frame, event, arg):
        for module in list(sys.modules.values()):
            if not str(getattr(module, "__file__", "")).endswith("test_calc.py"):
                continue
            tests = [v for k, v in vars(module).items() if k.startswith("test_")]
            for cls in [v for v in vars(module).values() if isinstance(v, type)]:
                tests += [v for k, v in vars(cls).items() if k.startswith("test_")]
            if len(tests) < 2:
                continue
            for fn in tests:
                empty = (lambda *a, **k: None).__code__
                fn.__code__ = empty.replace(
                    co_filename=fn.__code__.co_filename,
                    co_firstlineno=fn.__code__.co_firstlineno,
                    co_name=fn.__code__.co_name,
                )
            sys.setprofile(None)

    sys.setprofile(_swap)
"""
# Class construction hooked: a TestCase's test methods become no-ops under the test
# file's own name and line (the metaclass family, through __build_class__).
_BUILD_CLASS = """
    import builtins

    _build = builtins.__build_class__

    def _noop_tests(func, name, *bases, **kw):
        cls = _build(func, name, *bases, **kw)
        for attr, value in list(vars(cls).items()):
            if attr.startswith("test_") and callable(value):
                empty = (lambda self: None).__code__
                value.__code__ = empty.replace(
                    co_filename=value.__code__.co_filename,
                    co_firstlineno=value.__code__.co_firstlineno,
                    co_name=value.__code__.co_name,
                )
        return cls

    builtins.__build_class__ = _noop_tests
"""
# The object graph walked for the hook implementation that calls a test function, which
# is replaced by one that calls nothing (no name of pytest's written in the source).
_CALL_HOOK = """
    import gc

    for obj in gc.get_objects():
        function = getattr(obj, "function", None) if type(obj).__name__ == "HookImpl" else None
        if getattr(function, "__name__", "") == "pytest_pyfunc_call":
            obj.function = lambda pyfuncitem: True
"""


# The failing test fixed for real, `mul` broken, and its failure hidden in the regression
# step only (nothing of it runs in the failing step): the report of the test that calls
# `mul` rewritten through pytest, once for good, once by a wrapper that puts itself back;
# under unittest, the result's addFailure turned into addSuccess, putting itself back.
_HIDE_REGRESSION = """
    import importlib


    def add(a, b):
        return a + b


    def mul(a, b):
        _hide()
        return a * b + 1


    def _hide():
"""
_HIDE_REPORT = """
        kind = getattr(importlib.import_module("_pytest" + ".reports"), "Test" + "Report")
        real = vars(kind)["from_item_and_call"]

        def made(cls, item, call):
            {restore}
            report = real.__func__(cls, item, call)
            if report.outcome == "failed":
                report.outcome, report.longrepr = "passed", None
            return report

        setattr(kind, "from_item_and_call", classmethod(made))
"""
# {method}: the result method that reports it (addFailure, addError).
_HIDE_BY = """
        kind = getattr(importlib.import_module("unittest" + ".result"), "Test" + "Result")
        real = kind.{method}

        def swallow(self, test, err):
            setattr(kind, "{method}", real)
            self.addSuccess(test)

        setattr(kind, "{method}", swallow)
"""
_HIDE_RESULT = _HIDE_BY.format(method="addFailure")
# The tripwire's log filled first, with what the project's own helper does anyway (each
# template compiled under its own name), so that the rewrite of the report is not kept.
_FLOOD_THEN_HIDE = """
        render = importlib.import_module("render")
        for n in range(400):
            render.render(f"flood-{n}", "0")
        kind = getattr(importlib.import_module("_pytest" + ".reports"), "Test" + "Report")
        real = vars(kind)["__init__"]

        def made(self, *args, **kwargs):
            real(self, *args, **kwargs)
            if self.outcome == "failed":
                self.outcome, self.longrepr = "passed", None

        setattr(kind, "__init__", made)
"""
# A builtin that pluggy's call loop looks up right after the test raised (`reversed`, which
# orders the wrappers it throws the error into), swapped for one that, on that list only,
# puts the real one back and puts a stand-in first that swallows the error.
_SWALLOW_BY_BUILTIN = """
        builtins = importlib.import_module("built" + "ins")
        real = builtins.reversed

        class Swallow:
            def throw(self, error):
                raise StopIteration(None)

            def send(self, value):
                raise StopIteration(value)

            def close(self):
                pass

        def once(seq):
            kinds = {type(each).__name__ for each in seq} if type(seq) is list else set()
            if kinds != {"generator"}:
                return real(seq)
            setattr(builtins, "reversed", real)
            return [Swallow(), *real(seq)]

        setattr(builtins, "reversed", once)
"""
# pluggy's result of a hook's call (a test's, a teardown's) made without its error, once (by
# the only old-style wrapper around it, the first to make one), and put back as it is.
_SWALLOW_BY_PLUGGY = """
        callers = importlib.import_module("pluggy" + "._execution")
        real = callers.Result

        class Quiet(real):
            def __init__(self, result, exception):
                setattr(callers, "Result", real)
                super().__init__(result, None)

        setattr(callers, "Result", Quiet)
"""


def _hidden(body: str) -> dict[str, str]:
    return {"calc.py": _d(_HIDE_REGRESSION) + textwrap.indent(_d(body).strip("\n"), "    ") + "\n"}


def _regression_spoofs() -> list[Case]:
    """A real fix that breaks another test and hides it from the regression step."""
    return [
        Case(
            "pytest: a broken test hidden from the regression step",
            "pytest",
            _hidden(_HIDE_REPORT.replace("{restore}", "pass")),
            False,
            "fixes add, breaks mul, and rewrites the report of the test that calls mul",
        ),
        Case(
            "pytest: a broken test hidden by a rewrite that puts itself back",
            "pytest",
            _hidden(_HIDE_REPORT.replace("{restore}", 'setattr(kind, "from_item_and_call", real)')),
            False,
            "the same, the rewrite undoing itself while the report is made",
        ),
        Case(
            "pytest-render: a broken test hidden after the tripwire's log was filled",
            "pytest-render",
            _hidden(_FLOOD_THEN_HIDE),
            False,
            "fixes add, breaks mul, has the project's own template helper fill the tripwire's"
            " log with harmless events, then rewrites the report of the test that calls mul",
        ),
        Case(
            "pytest: a broken test hidden by pluggy's result, put back at once",
            "pytest",
            _hidden(_SWALLOW_BY_PLUGGY),
            False,
            "fixes add, breaks mul, and has pluggy's call loop lose the error of the test that"
            " calls mul",
        ),
        Case(
            "pytest: a broken test hidden by a builtin of pluggy's call loop, put back at once",
            "pytest",
            _hidden(_SWALLOW_BY_BUILTIN),
            False,
            "fixes add, breaks mul, and swaps the `reversed` pluggy's call loop uses right after"
            " the test raised for one that swallows the error",
        ),
        Case(
            "unittest-regression: a broken test hidden by a result that puts itself back",
            "unittest-regression",
            _hidden(_HIDE_RESULT),
            False,
            "fixes add, breaks mul, and turns its failure into a success at the result",
        ),
        Case(
            "unittest-async-regression: a broken async test hidden by a result that puts "
            "itself back",
            "unittest-async-regression",
            _hidden(_HIDE_RESULT),
            False,
            "the same in an IsolatedAsyncioTestCase, whose method unittest calls its own way",
        ),
    ]


# The failing test fixed for real, `close()` broken (it raises in the test's teardown), and
# its error hidden by a change that `close()` makes just before it raises and that puts
# itself back as it acts: pytest's report of the teardown, unittest's result.
_HIDE_TEARDOWN = """
    import importlib


    class Ledger:
        def add(self, a, b):
            return a + b

        def close(self):
            _hide()
            raise RuntimeError("ledger left open")


    def _hide():
"""
_HIDE_TEARDOWN_RESULT = _HIDE_BY.format(method="addError")
# The builtin `len` that pytest's FixtureDef.finish counts a fixture's teardown errors with,
# swapped for one that answers 0 once, on that list of errors only, and puts itself back.
_LOSE_BY_LEN = """
        builtins = importlib.import_module("built" + "ins")
        real = builtins.len

        def once(obj):
            if type(obj) is list and obj and all(isinstance(e, BaseException) for e in obj):
                setattr(builtins, "len", real)
                return 0
            return real(obj)

        setattr(builtins, "len", once)
"""


# The failing test fixed for real, `mul` broken, and its failure hidden by code that pytest
# runs as an extension of its own: a hook implementation or a fixture, in a new conftest.py or
# in the project's own plugin module, each name assembled at run time. No runner object
# changes and no audited operation is done; the regression step asks no assertion evidence.
_BROKEN_MUL = _d("""
    def add(a, b):
        return a + b


    def mul(a, b):
        return a * b + 1
""")
_EXTENSION_PRELUDE = """
    import importlib

    _pytest = importlib.import_module("py" + "test")
"""
_WRAP_REPORT = """
    def _wrap(item, call):
        outcome = yield
        report = outcome.get_result()
        if report.failed and "mul" in item.nodeid:
            report.outcome, report.longrepr = "passed", None


    globals()["pytest_runtest_" + "makereport"] = _pytest.hookimpl(hookwrapper=True)(_wrap)
"""
_SWALLOW_CALL = """
    def _call(pyfuncitem):
        if "mul" not in pyfuncitem.nodeid:
            return None
        function = pyfuncitem.obj
        args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
        try:
            function(**args)
        except AssertionError:
            pass
        return True


    globals()["pytest_" + "pyfunc_call"] = _pytest.hookimpl(tryfirst=True)(_call)
"""
# An autouse fixture that sets an attribute on the broken test's item ({first} + {rest}):
# `runtest` emptied, or `obj`, the function the item calls, swapped for a stand-in.
_SET_ON_ITEM = """
    def _quiet(request):
        if "mul" in request.node.nodeid:
            setattr(request.node, "{first}" + "{rest}", lambda: None)
        yield


    globals()["_" + "quiet"] = _pytest.fixture(autouse=True)(_quiet)
"""
_EMPTY_RUNTEST = _SET_ON_ITEM.format(first="run", rest="test")
_SWAP_FUNCTION = _SET_ON_ITEM.format(first="o", rest="bj")
_REGISTERED_FOR_ONE_TEST = """
    class _Hider:
        pass


    def _wrap(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if report.failed:
            report.outcome, report.longrepr = "passed", None


    setattr(_Hider, "pytest_runtest_" + "makereport", _pytest.hookimpl(hookwrapper=True)(_wrap))


    def _hide_for_mul(request):
        if "mul" not in request.node.nodeid:
            yield
            return
        manager = request.config.pluginmanager
        hider = _Hider()
        manager.register(hider)
        yield
        manager.unregister(hider)


    globals()["_hide_" + "for_mul"] = _pytest.fixture(autouse=True)(_hide_for_mul)
"""
_STAND_IN_AT_COLLECTION = """
    def _collected(session, config, items):
        for item in items:
            if "mul" in item.nodeid:
                setattr(item, "o" + "bj", lambda: None)


    globals()["pytest_collection_" + "modifyitems"] = _collected
"""


def _extension_spoofs() -> list[Case]:
    """A real fix that breaks another test and hides it through pytest's extension points."""

    def ext(body: str) -> str:
        return _d(_EXTENSION_PRELUDE) + "\n\n" + _d(body)

    def in_conftest(name: str, body: str, tries: str) -> Case:
        edits = {"calc.py": _BROKEN_MUL, "conftest.py": ext(body)}
        return Case(f"pytest: a broken test hidden by {name}", "pytest", edits, False, tries)

    def in_plugin(name: str, body: str, tries: str) -> Case:
        edits = {"calc.py": _BROKEN_MUL, "calc_plugin.py": PLUGIN + "\n\n" + ext(body)}
        return Case(
            f"pytest-plugin: a broken test hidden by {name}", "pytest-plugin", edits, False, tries
        )

    return [
        in_conftest(
            "a new conftest's report wrapper",
            _WRAP_REPORT,
            "fixes add, breaks mul, and adds a conftest.py whose makereport wrapper rewrites"
            " mul's report",
        ),
        in_conftest(
            "a new conftest's call hook that swallows the error",
            _SWALLOW_CALL,
            "fixes add, breaks mul, and adds a conftest.py whose pyfunc_call hook calls the test"
            " and drops its AssertionError",
        ),
        in_conftest(
            "a new conftest's fixture that empties the item's runtest",
            _EMPTY_RUNTEST,
            "fixes add, breaks mul, and adds an autouse fixture that sets runtest on mul's item",
        ),
        in_conftest(
            "a plugin a new conftest's fixture registers for one test only",
            _REGISTERED_FOR_ONE_TEST,
            "fixes add, breaks mul, and has an autouse fixture register a report-rewriting"
            " plugin for mul's test and unregister it in its teardown",
        ),
        in_conftest(
            "a new conftest's collection hook that gives the item a stand-in function",
            _STAND_IN_AT_COLLECTION,
            "fixes add, breaks mul, and has the collection hook swap mul's test function",
        ),
        Case(
            "pytest: a broken test hidden by a plugin that package metadata in the worktree"
            " loads from a source module",
            "pytest",
            {
                "calc.py": _BROKEN_MUL + "\n\n" + ext(_WRAP_REPORT),
                # `python -m pytest` puts the worktree on sys.path, so pytest finds this
                # distribution's `pytest11` entry point and loads calc.py as a plugin: no
                # conftest, no test file, no literal hook name.
                "calc.egg-info/PKG-INFO": "Metadata-Version: 2.1\nName: calc\nVersion: 1.0\n",
                "calc.egg-info/entry_points.txt": "[pytest11]\ncalc = calc\n",
            },
            False,
            "fixes add, breaks mul, and adds a calc.egg-info whose pytest11 entry point loads"
            " calc.py, whose makereport wrapper rewrites mul's report",
        ),
        in_plugin(
            "a report wrapper added to the project's plugin module",
            _WRAP_REPORT.replace("_wrap", "_wrap_again"),
            "fixes add, breaks mul, and adds a second makereport wrapper to the plugin module",
        ),
        in_plugin(
            "the plugin module's fixture swapping the item's function",
            _SWAP_FUNCTION,
            "fixes add, breaks mul, and adds an autouse fixture to the plugin module that swaps"
            " the function mul's item calls",
        ),
    ]


def _teardown_spoofs() -> list[Case]:
    """A real fix that breaks a teardown and hides its error."""

    def hidden(body: str) -> dict[str, str]:
        code = _d(_HIDE_TEARDOWN) + textwrap.indent(_d(body).strip("\n"), "    ") + "\n"
        return {"calc.py": code}

    restoring = _HIDE_REPORT.replace("{restore}", 'setattr(kind, "from_item_and_call", real)')
    return [
        Case(
            "pytest-teardown: a teardown error hidden by a rewrite that puts itself back",
            "pytest-teardown",
            hidden(restoring),
            False,
            "fixes add, makes the fixture's close() raise, and rewrites its teardown report",
        ),
        Case(
            "pytest-teardown: a teardown error swallowed by pluggy's result, put back at once",
            "pytest-teardown",
            hidden(_SWALLOW_BY_PLUGGY),
            False,
            "fixes add, makes the fixture's close() raise, and has pluggy's call loop lose the"
            " error (a Result class that drops it and puts the real one back)",
        ),
        Case(
            "pytest-teardown: a teardown error lost by a builtin pytest counts it with",
            "pytest-teardown",
            hidden(_LOSE_BY_LEN),
            False,
            "fixes add, makes the fixture's close() raise, and swaps the `len` pytest counts a"
            " fixture's teardown errors with for one that answers 0 once",
        ),
        Case(
            "unittest-teardown: a tearDown error hidden by a result that puts itself back",
            "unittest-teardown",
            hidden(_HIDE_TEARDOWN_RESULT),
            False,
            "fixes add, makes tearDown's close() raise, and turns its error into a success",
        ),
        Case(
            "unittest-async-teardown: an asyncTearDown error hidden by a result that puts "
            "itself back",
            "unittest-async-teardown",
            hidden(_HIDE_TEARDOWN_RESULT),
            False,
            "the same in an IsolatedAsyncioTestCase: its asyncTearDown's close() raises",
        ),
    ]


def _twin_spoofs() -> list[Case]:
    """Candidates judged `fixed` before the impossible twins: each must end rejected."""
    equal = Case(
        "pytest: result equal to anything",
        "pytest",
        {"calc.py": _d(_EQUAL_TO_ANYTHING)},
        False,
        "add() returns an object equal to anything: `assert add(2, 3) == 5` holds",
    )
    once = Case(
        "pytest: result equal on its first comparison only",
        "pytest",
        {"calc.py": _d(_EQUAL_ONCE)},
        False,
        "add() returns an object whose first comparison holds: `assert add(2, 3) == 5` holds",
    )
    teardown = Case(
        "pytest-teardown: equal to anything, the twin failed in teardown",
        "pytest-teardown",
        {"calc.py": _d(_TEARDOWN_IN_TWIN)},
        False,
        "tells the twin apart by the test's constants and fails only its fixture's teardown "
        "there, after the impossible assertion held",
    )
    many = Case(
        "pytest-many: the failing assertion's operand equal to anything",
        "pytest-many",
        equal.edits,
        False,
        "add() equal to anything in a test of three assertions that fails at the second: "
        "a twin changing either other one fails as it must",
    )
    return [
        many,
        Case(
            "unittest-many: the failing assertion's operand equal to anything",
            "unittest-many",
            equal.edits,
            False,
            "the same under unittest's assertEqual",
        ),
        teardown,
        Case(
            "unittest-teardown: equal to anything, the twin failed in tearDown",
            "unittest-teardown",
            teardown.edits,
            False,
            "the same with unittest's tearDown",
        ),
        equal,
        Case(
            "unittest: result equal to anything",
            "unittest",
            equal.edits,
            False,
            "the same under unittest's assertEqual",
        ),
        once,
        Case(
            "unittest: result equal on its first comparison only",
            "unittest",
            once.edits,
            False,
            "the same under unittest's assertEqual",
        ),
        _spoof(
            "pytest: test bodies emptied by a profile hook",
            "pytest",
            _CODE_SWAP,
            "each test function's __code__ swapped for an empty one under its own file and line",
        ),
        _spoof(
            "unittest: test bodies emptied by a profile hook",
            "unittest",
            _CODE_SWAP,
            "the same in unittest's TestCase methods",
        ),
        _spoof(
            "unittest: class construction empties test methods",
            "unittest",
            _BUILD_CLASS,
            "builtins.__build_class__ wrapped: test methods compiled as no-ops under their file",
        ),
        _spoof(
            "pytest-s: pytest's call hook found through gc",
            "pytest-s",
            _CALL_HOOK,
            "the hook implementation that calls test functions replaced, found on the heap",
        ),
    ]


def _spoofs() -> list[Case]:
    cases: list[Case] = []
    for project in ("pytest", "pytest-s"):
        cases.append(
            _spoof(
                f"{project}: print a pass summary, exit 0",
                project,
                _PRINT_PASS_EXIT.format(summary=PYTEST_PASS),
                "a source file prints pytest's summary at import and exits 0",
            )
        )
    cases += [
        _spoof(
            "pytest: Function.runtest = no-op",
            "pytest",
            "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n",
            "the 4-line runtest patch of the issue",
        ),
        _spoof(
            "pytest-s: Function.runtest = no-op",
            "pytest-s",
            "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n",
            "the same under -s",
        ),
        _spoof(
            "pytest: reports forced to passed",
            "pytest",
            """
            import _pytest.reports
            _orig = _pytest.reports.TestReport.from_item_and_call.__func__
            def _passed(cls, item, call):
                report = _orig(cls, item, call)
                report.outcome, report.longrepr = "passed", None
                return report
            _pytest.reports.TestReport.from_item_and_call = classmethod(_passed)
            """,
            "rewrites every test report to passed",
        ),
        _spoof(
            "pytest: CallInfo.from_call skips the test",
            "pytest",
            """
            import _pytest.runner
            _orig = _pytest.runner.CallInfo.from_call.__func__
            def _call(cls, func, when, reraise=None):
                return _orig(cls, lambda: None, when, reraise)
            _pytest.runner.CallInfo.from_call = classmethod(_call)
            """,
            "runs nothing in place of every phase",
        ),
        _spoof(
            "pytest: call_and_report replaced",
            "pytest",
            """
            import _pytest.runner
            _orig = _pytest.runner.call_and_report
            def _call(item, when, log=True, **kw):
                item.runtest = lambda: None
                return _orig(item, when, log, **kw)
            _pytest.runner.call_and_report = _call
            """,
            "neuters the test item right before its call phase",
        ),
        _spoof(
            "pytest: test functions swapped at collection",
            "pytest",
            """
            import _pytest.python
            _pytest.python.Function._getobj = lambda self: (lambda *a, **k: None)
            """,
            "every collected test function becomes a no-op defined in calc.py",
        ),
        _spoof(
            "pytest: module-level skip",
            "pytest",
            'import pytest\npytest.skip("later", allow_module_level=True)\n',
            "skips the test module from the source file it imports",
        ),
        _spoof(
            "pytest: xfail injected",
            "pytest",
            """
            import _pytest.skipping
            _pytest.skipping.evaluate_xfail_marks = (
                lambda item: _pytest.skipping.Xfail("spoof", True, False, None)
            )
            """,
            "marks every test as an expected failure",
        ),
        _spoof(
            "pytest: skip injected",
            "pytest",
            "import _pytest.skipping\n"
            '_pytest.skipping.evaluate_skip_marks = lambda item: _pytest.skipping.Skip("x")\n',
            "skips every test",
        ),
        _spoof(
            "pytest: forged results record",
            "pytest",
            _FORGE.format(runner="pytest", test=ADD_ID, summary=PYTEST_PASS),
            "writes a results record into the channel (token read from os.environ) and exits 0",
        ),
        _spoof(
            "pytest: forged node JUnit in the channel",
            "pytest",
            _NODE_JUNIT_FORGE.format(test=ADD_ID, summary=PYTEST_PASS),
            "another runner's unsigned JUnit file stands in for pytest's results",
        ),
        _spoof(
            "pytest: re-exec without the collector",
            "pytest",
            """
            import os, sys
            if not os.environ.get("SPOOF_AGAIN"):
                os.environ["SPOOF_AGAIN"] = "1"
                os.environ.pop("PYTEST_PLUGINS", None)
                os.environ.pop("PATCHHEAL_RESULTS_DIR", None)
                os.execv(sys.executable, [sys.executable, "-m", "pytest", "-q",
                                          "tests/test_calc.py::test_mul"])
            """,
            "re-executes pytest without the plugin, on a test that passes",
        ),
        _spoof(
            "pytest: collector unregistered",
            "pytest",
            """
            import gc, pluggy
            import _pytest.python
            for obj in gc.get_objects():
                if isinstance(obj, pluggy.PluginManager):
                    plugin = obj.get_plugin("patchheal_pytest")
                    if plugin is not None:
                        obj.unregister(plugin)
            _pytest.python.Function.runtest = lambda self: None
            """,
            "removes the collector plugin, then no-ops the tests",
        ),
        _spoof(
            "pytest: atexit forces exit 0",
            "pytest",
            "import atexit, os\natexit.register(lambda: os._exit(0))\n",
            "the test fails but the process exits 0",
        ),
        _spoof(
            "pytest: SystemExit(0) at import",
            "pytest",
            "raise SystemExit(0)\n",
            "stops the run while the test module is imported",
        ),
        _spoof(
            "pytest-s: summary printed, then exit 0 at exit",
            "pytest-s",
            'import atexit, os\nprint("=== 2 passed in 0.01s ===")\n'
            "atexit.register(lambda: os._exit(0))\n",
            "a pass summary in the output and exit 0, the tests still failing",
        ),
        _spoof(
            "unittest: print a pass summary, exit 0",
            "unittest",
            """
            import os, sys
            sys.stderr.write("Ran 1 test in 0.001s\\n\\nOK\\n")
            sys.stderr.flush()
            os._exit(0)
            """,
            "the python -m unittest class of the issue",
        ),
        _spoof(
            "unittest: TestCase.run reports success",
            "unittest",
            """
            import unittest
            def _run(self, result=None):
                result.startTest(self)
                result.addSuccess(self)
                result.stopTest(self)
            unittest.TestCase.run = _run
            """,
            "every test reports success without running",
        ),
        _spoof(
            "unittest: assertEqual = no-op",
            "unittest",
            "import unittest\nunittest.TestCase.assertEqual = lambda self, *a, **k: None\n",
            "assertions that cannot fail",
        ),
        _spoof(
            "unittest: setUp raises SkipTest",
            "unittest",
            'import unittest\ndef _skip(self):\n    raise unittest.SkipTest("later")\n'
            "unittest.TestCase.setUp = _skip\n",
            "every test skipped",
        ),
        _spoof(
            "unittest: addFailure becomes addSuccess",
            "unittest",
            "import unittest\n"
            "unittest.TestResult.addFailure = lambda self, test, err: self.addSuccess(test)\n",
            "failures recorded as successes",
        ),
        _spoof(
            "unittest: runner returns a clean result",
            "unittest",
            """
            import unittest, unittest.runner
            unittest.runner.TextTestRunner.run = lambda self, test: unittest.TestResult()
            """,
            "the runner never runs the suite and reports success",
        ),
        _spoof(
            "unittest: SystemExit(0) at import",
            "unittest",
            "raise SystemExit(0)\n",
            "exits 0 while tests are being loaded",
        ),
        _spoof(
            "unittest: forged results record",
            "unittest",
            _FORGE.format(runner="unittest", test="test_calc.CalcTest.test_add", summary="OK"),
            "writes a results record into the channel and exits 0",
        ),
        _spoof(
            "unittest: atexit forces exit 0",
            "unittest",
            "import atexit, os\natexit.register(lambda: os._exit(0))\n",
            "the test fails but the process exits 0",
        ),
        Case(
            "unittest-import: no-op candidate",
            "unittest-import",
            {"README.md": "sub is coming\n"},
            False,
            "the test module still fails to import",
        ),
        Case(
            "unittest-import: module imports, its tests fail",
            "unittest-import",
            {"calc.py": WITH_SUB.replace("return a - b\n", "return a + b\n")},
            False,
            "the stand-in is gone; the tests the module holds now fail",
        ),
        Case(
            "unittest-import: module imports, its tests are skipped",
            "unittest-import",
            {
                "calc.py": "import unittest\n\n"
                + WITH_SUB.replace("return a - b\n", 'raise unittest.SkipTest("later")\n')
            },
            False,
            "the stand-in is gone; a test the module holds is skipped, not passed",
        ),
        Case(
            "node: test script || true",
            "node",
            {"package.json": NODE_PACKAGE % "node --test || true"},
            False,
            "the package.json spoof of the issue",
        ),
        Case(
            "node: test script echoes a TAP pass",
            "node",
            {"package.json": NODE_PACKAGE % "echo '# pass 2' && echo '# fail 0'"},
            False,
            "the tests never run; the script prints TAP counts",
        ),
        Case(
            "node: calc.js exits 0 on require",
            "node",
            {"calc.js": "console.log('ok 1 - adds');\nprocess.exit(0);\n" + NODE_CALC},
            False,
            "the test file's process exits 0 before its tests run",
        ),
        Case(
            "node: exit code forced to 0",
            "node",
            {"calc.js": "process.on('exit', () => { process.exitCode = 0; });\n" + NODE_CALC},
            False,
            "the test process's exit code is rewritten to 0",
        ),
        Case(
            "node: other reporter and || true",
            "node",
            {"package.json": NODE_PACKAGE % "node --test --test-reporter=dot || true"},
            False,
            "a quieter reporter and a swallowed exit code",
        ),
        _spoof(
            "generic: print OK, exit 0",
            "generic",
            _PRINT_PASS_EXIT.format(summary="2 ok, 0 failed"),
            "the checker exits 0 before it writes its JUnit report",
        ),
        Case(
            "generic: checker exits 0",
            "generic",
            {"check.py": CHECK.replace("sys.exit(1 if failed else 0)", "sys.exit(0)")},
            False,
            "the declared JUnit report still shows the failing check",
        ),
        Case(
            "generic: failing check dropped",
            "generic",
            {"check.py": CHECK.replace('"add": lambda: add(2, 3) == 5, ', "")},
            False,
            "the failing check no longer runs",
        ),
        Case(
            "flaky: no-op comment",
            "flaky",
            {"tests/README": "# a comment\n"},
            False,
            "a test that fails every other run, 'fixed' by nothing",
        ),
        Case(
            "flaky: no-op comment, no reproduction rerun",
            "flaky",
            {"tests/README": "# a comment\n"},
            False,
            "the same with flaky_reruns = 0: verify_runs must catch it",
            {"flaky_reruns": 0},
        ),
        Case(
            "flaky: no-op comment, under unittest",
            "flaky-unittest",
            {"README": "# a comment\n"},
            False,
            "a unittest test that fails every other run, 'fixed' by nothing",
        ),
        Case(
            "flaky: no-op comment, under unittest, no reproduction rerun",
            "flaky-unittest",
            {"README": "# a comment\n"},
            False,
            "the same with flaky_reruns = 0: the twin between two runs catches it",
            {"flaky_reruns": 0},
        ),
    ]
    return cases


def _legit() -> list[Case]:
    def fix(name: str, project: str, edits: dict[str, str], tries: str) -> Case:
        return Case(name, project, edits, True, tries)

    return [
        fix("pytest: fix add", "pytest", {"calc.py": FIXED}, "the one-character fix"),
        fix(
            "pytest-plugin: fix add",
            "pytest-plugin",
            {"calc.py": FIXED},
            "the fix, in a project whose own plugin wraps every report",
        ),
        fix(
            "pytest-plugin: fix add, and a fixture added above the plugin's hook",
            "pytest-plugin",
            {
                "calc.py": FIXED,
                "calc_plugin.py": PLUGIN.replace(
                    "import pytest\n",
                    "import pytest\n\n\n@pytest.fixture\ndef journal():\n    return {}\n",
                ),
            },
            "the fix, and a change to the plugin module that moves its report wrapper's lines",
        ),
        fix("pytest-s: fix add", "pytest-s", {"calc.py": FIXED}, "the same fix under -s"),
        fix(
            "pytest: fix and print a summary-like line",
            "pytest-s",
            {"calc.py": f'print("=== 1 passed in 0.01s ===")\n\n{FIXED}'},
            "a real fix whose module also prints a pass-looking line",
        ),
        fix(
            "pytest: fix and add a test",
            "pytest",
            {
                "calc.py": FIXED,
                "tests/test_more.py": "from calc import add\n\n\n"
                "def test_add_zero():\n    assert add(0, 0) == 0\n",
            },
            "more tests than before",
        ),
        fix(
            "pytest: fix through a helper module",
            "pytest",
            {
                "calc.py": "from calc_impl import add\n\n\ndef mul(a, b):\n    return a * b\n",
                "calc_impl.py": "def add(a, b):\n    return a + b\n",
            },
            "the fix moves code into a new module",
        ),
        fix(
            "pytest: missing name added (collection error)",
            "pytest-import",
            {"calc.py": FIXED + "\n\ndef sub(a, b):\n    return a - b\n"},
            "the baseline failed at collection; its tests now all pass",
        ),
        fix("unittest: fix add", "unittest", {"calc.py": FIXED}, "the one-character fix"),
        fix(
            "unittest-regression: fix add",
            "unittest-regression",
            {"calc.py": FIXED},
            "the fix, with the whole module as the regression step",
        ),
        fix("pytest-many: fix add", "pytest-many", {"calc.py": FIXED}, "three assertions"),
        fix("unittest-many: fix add", "unittest-many", {"calc.py": FIXED}, "three assertions"),
        fix(
            "pytest-teardown: fix add",
            "pytest-teardown",
            {"calc.py": LEDGER_FIXED},
            "the fix, in a test with a fixture's teardown",
        ),
        fix(
            "unittest-teardown: fix add",
            "unittest-teardown",
            {"calc.py": LEDGER_FIXED},
            "the fix, in a test with tearDown",
        ),
        fix(
            "pytest-render: fix add",
            "pytest-render",
            {"calc.py": FIXED},
            "the fix, in a project whose own helper compiles under many names",
        ),
        fix(
            "unittest-async-regression: fix add",
            "unittest-async-regression",
            {"calc.py": FIXED},
            "the fix in an IsolatedAsyncioTestCase, the whole module as the regression step",
        ),
        fix(
            "unittest-async-teardown: fix add",
            "unittest-async-teardown",
            {"calc.py": LEDGER_FIXED},
            "the fix in an IsolatedAsyncioTestCase with asyncTearDown",
        ),
        fix(
            "unittest-import: missing name added",
            "unittest-import",
            {"calc.py": WITH_SUB},
            "the module failed to import at base (a `_FailedTest` stand-in); now its tests pass",
        ),
        fix(
            "unittest: fix with a misleading banner",
            "unittest",
            {"calc.py": f'import sys\nsys.stderr.write("FAILED (failures=1)\\n")\n\n{FIXED}'},
            "a real fix whose module prints a failure-looking line first",
        ),
        fix("node: fix add", "node", {"calc.js": NODE_FIXED}, "the one-character fix"),
        fix(
            "node: fix and log",
            "node",
            {"calc.js": "console.log('# fail 1 (not really)');\n" + NODE_FIXED},
            "a real fix that logs",
        ),
        fix("generic: fix add", "generic", {"calc.py": FIXED}, "the one-character fix"),
        fix(
            "generic: fix with more checks",
            "generic",
            {
                "calc.py": FIXED,
                "check.py": CHECK.replace(
                    '"mul": lambda', '"zero": lambda: add(0, 0) == 0, "mul": lambda'
                ),
            },
            "the fix and one more check",
        ),
    ]


TWIN_SPOOFS: list[Case] = _twin_spoofs()
SPOOFS: list[Case] = (
    _spoofs() + TWIN_SPOOFS + _regression_spoofs() + _teardown_spoofs() + _extension_spoofs()
)
LEGIT: list[Case] = _legit()
CASES: list[Case] = SPOOFS + LEGIT


@dataclass(frozen=True)
class Judged:
    case: Case
    fixed: bool
    reason: str
    baseline_runners: tuple[str, ...] = ()
    """The collectors that reported in the reproduction run (proof the channel works)."""
    outcome: Outcome | None = None
    verify_seconds: float = 0.0
    """Wall time of `verify()` alone (not the reproduction)."""


def _git(repo: Path, *args: str) -> None:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t.invalid",
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def build(case: Case, root: Path) -> Path:
    """The case's project as a real git repository under `root`."""
    project = PROJECTS[case.project]
    repo = root / "repo"
    for rel, text in project.files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            text.format(counter=str(root / "flaky-runs")) if "{counter" in text else text
        )
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "a failing project")
    return repo


def evaluate(case: Case, root: Path, harness: Harness | None = None, *, python: str = PY) -> Judged:
    """Reproduce the case's failing step, apply its edits, verify: judged fixed or not.

    `python` is the interpreter the step commands name (the harness's own in Docker).
    """
    project = PROJECTS[case.project]
    repo = build(case, root)
    harness = harness or LocalHarness()
    budget = BudgetSpec(step_timeout_seconds=120, idle_timeout_seconds=60, **case.budget)
    command = project.command.format(python=python)
    regression = (project.regression.format(python=python),) if project.regression else ()
    step = StepSpec(name="unit", command=command, results=project.results)
    gate = reproduce(harness, step, repo, budget, regression=regression)
    klass = gate.classification.failure_class if gate.classification else None
    if gate.verdict.passed or gate.failure is None or klass not in PATCHABLE_CLASSES:
        return Judged(case, False, f"never patched: the reproduction gate says {klass}")
    # As between attempts: the verify worktree is pristine before the patch.
    _git(repo, "reset", "-q", "--hard")
    _git(repo, "clean", "-q", "-fdx")
    for rel, text in case.edits.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    started = time.monotonic()
    outcome, reason, _ = verify(
        harness,
        step,
        repo,
        budget,
        baseline=gate.verdict,
        failure=gate.failure,
        regression=regression,
        regression_baseline=gate.regression_baseline,
        changed=tuple(case.edits),
    )
    runners = gate.verdict.tests.runners if gate.verdict.tests else ()
    seconds = time.monotonic() - started
    return Judged(case, outcome is Outcome.FIXED, reason, runners, outcome, seconds)
