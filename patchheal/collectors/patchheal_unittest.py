"""patchheal's unittest collector: per-test outcomes from `unittest.TestResult`.

Imported by sitecustomize at interpreter start-up, before any of the step's
code, so it wraps the base TestResult methods every runner calls (TextTestResult
calls them through super()) and snapshots the unittest internals a patch could
replace to fake a pass. The record is written when the run stops.
"""

from __future__ import annotations

import inspect
import os
import unittest
import unittest.case
import unittest.result
import unittest.suite
from typing import Any

import patchheal_results as channel

_Result = unittest.result.TestResult
_OUTCOME = {
    "addSuccess": "passed",
    "addFailure": "failed",
    "addError": "error",
    "addSkip": "skipped",
    "addExpectedFailure": "xfailed",
    "addUnexpectedSuccess": "failed",
}


def _state(result: Any) -> dict[str, dict[str, str]]:
    state: dict[str, dict[str, str]] = result.__dict__.setdefault(
        "_patchheal_results", {"outcomes": {}, "defined_in": {}}
    )
    return state


def _record(result: Any, test: Any, outcome: str) -> None:
    outcomes = _state(result)["outcomes"]
    test_id = test.id()
    outcomes[test_id] = channel.worst(outcomes.get(test_id), outcome)


def _wrap_outcome(name: str, outcome: str) -> Any:
    original = getattr(_Result, name)

    def wrapper(self: Any, test: Any, *args: Any) -> Any:
        _record(self, test, outcome)
        return original(self, test, *args)

    return wrapper


def _start_test(original: Any) -> Any:
    def startTest(self: Any, test: Any) -> Any:
        method = getattr(test, getattr(test, "_testMethodName", ""), None)
        code = getattr(inspect.unwrap(method), "__code__", None) if method else None
        if code is not None:
            defined = os.path.abspath(code.co_filename)  # noqa: PTH100
            where = channel.where(defined, os.getcwd())  # noqa: PTH109
            _state(self)["defined_in"][test.id()] = where
        return original(self, test)

    return startTest


def _add_subtest(original: Any) -> Any:
    def addSubTest(self: Any, test: Any, subtest: Any, err: Any) -> Any:
        if err is not None:
            _record(self, test, "failed")
        return original(self, test, subtest, err)

    return addSubTest


def _stop_test_run(original: Any) -> Any:
    def stopTestRun(self: Any) -> Any:
        state = _state(self)
        tampered = [name for name, obj in _WATCHED.items() if _current(name) is not obj]
        channel.write(
            "unittest",
            {
                "outcomes": state["outcomes"],
                "defined_in": state["defined_in"],
                "tampered": tampered,
            },
        )
        return original(self)

    return stopTestRun


for _name, _outcome in _OUTCOME.items():
    setattr(_Result, _name, _wrap_outcome(_name, _outcome))
_Result.startTest = _start_test(_Result.startTest)  # type: ignore[method-assign]
_Result.addSubTest = _add_subtest(_Result.addSubTest)  # type: ignore[method-assign]
_Result.stopTestRun = _stop_test_run(_Result.stopTestRun)  # type: ignore[method-assign]

_OWNERS: dict[str, Any] = {
    "TestCase": unittest.case.TestCase,
    "BaseTestSuite": unittest.suite.BaseTestSuite,
    "TestSuite": unittest.suite.TestSuite,
    "TestResult": _Result,
}
_METHODS = {
    "TestCase": ("run", "__call__", "_callTestMethod", "_callSetUp", "_callTearDown"),
    "BaseTestSuite": ("run", "__call__"),
    "TestSuite": ("run",),
    "TestResult": (*_OUTCOME, "startTest", "addSubTest", "stopTestRun", "wasSuccessful"),
}


# The assertion helpers too: a no-op assertEqual makes every test "pass".
_METHODS["TestCase"] += tuple(
    name for name in vars(unittest.case.TestCase) if name.startswith(("assert", "fail"))
)


def _current(name: str) -> Any:
    owner, _, attr = name.partition(".")
    return inspect.getattr_static(_OWNERS[owner], attr, None)


_WATCHED = {f"{o}.{m}": _current(f"{o}.{m}") for o, ms in _METHODS.items() for m in ms}
