"""patchheal's unittest collector: per-test outcomes from `unittest.TestResult`.

Imported by sitecustomize at interpreter start-up, before any of the step's
code, so it wraps the base TestResult methods every runner calls (TextTestResult
calls them through super()) and snapshots the unittest internals a patch could
replace to fake a pass. The record is written when the run stops. Every wrapper
runs its own part under a guard (patchheal_guard.py): an internal error never
reaches the test run; the collector stops observing and its record says so.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import unittest
import unittest.case
import unittest.result
import unittest.suite
from typing import Any

import patchheal_results as channel
import patchheal_unittest_names as names
from patchheal_guard import Guard

# unittest leaves frames of modules with this global out of a failure's traceback: the
# assertion helpers' wrappers below are not part of what a test printed before.
__unittest = True
_Result = unittest.result.TestResult
# What runs each part of a test (not in typeshed: a private class, there since Python 3.4).
_PART_OWNER: Any = vars(unittest.case)["_Outcome"]
_guard = Guard()
# Evidence and outcomes go to the monitor (patchheal_watch.py) as audit events, checked and
# kept in its closure: an assertion helper that returned is raised from the test's frame.
ASSERT_EVENT = "patchheal.assert_pass"
TEST_EVENT = "patchheal.test"
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
    test_id = names.test_id(test)
    sys.audit(TEST_EVENT, "report", test_id, "")
    outcomes[test_id] = channel.worst(outcomes.get(test_id), outcome)
    sys.audit(TEST_EVENT, "outcome", test_id, outcome)


def _passed() -> None:
    sys.audit(ASSERT_EVENT)


def _evidence(original: Any) -> Any:
    """`original` (a TestCase assertion helper) that tells the monitor when it passed. A
    helper that returns a context (`with self.assertRaises(...)`) has not passed yet."""

    @functools.wraps(original)
    def helper(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if result is None:
            _guard.run(_passed)
        return result

    return helper


def _start(test: Any) -> None:
    sys.audit(TEST_EVENT, "start", names.test_id(test), "")


def _stop(test: Any) -> None:
    sys.audit(TEST_EVENT, "stop", names.test_id(test), "")


def _stop_test(original: Any) -> Any:
    def stopTest(self: Any, test: Any) -> Any:
        _guard.run(_stop, test)
        return original(self, test)

    return stopTest


def _called() -> None:
    sys.audit(TEST_EVENT, "called", "", "")


def _call_test_method(original: Any) -> Any:
    """`TestCase._callTestMethod` that has the monitor check the runner the moment the test
    method returns, before unittest makes its outcome (a change the body made to the
    outcome path, even one that puts itself back while the outcome is made, is still in
    place here: patchheal_runnerwatch.py). A method that raised is checked by the part's
    executor below, before its error is reported."""

    @functools.wraps(original)
    def _callTestMethod(self: Any, method: Any) -> Any:
        done = original(self, method)
        _guard.run(_called)
        return done

    return _callTestMethod


# Python < 3.11 feeds a test's outcome to the result after tearDown and the cleanups:
# the check after every part is then the one before the outcome is made.
_FED_LATE = sys.version_info < (3, 11)


def _part_executor(original: Any) -> Any:
    """`_Outcome.testPartExecutor`, the context every part of a test runs in (setUp, the
    method, tearDown, each cleanup, each subTest; an `IsolatedAsyncioTestCase`'s
    asyncSetUp, method and asyncTearDown too, which it calls its own way), that has the
    monitor check the runner when the part raised, before unittest reports its error: a
    change made there to hide that error, even one that puts itself back as it does, is
    still in place. A part that returns has no error to hide, and what it changed for
    later is in place at the next check; but a test whose class calls its method its own
    way (not through the wrapper above) is checked when each part returns too, so its body
    is checked before its outcome is made, as any other test's is."""

    @contextlib.contextmanager
    def testPartExecutor(self: Any, test_case: Any, *args: Any, **kwargs: Any) -> Any:
        with original(self, test_case, *args, **kwargs):
            try:
                yield
            except BaseException:
                _guard.run(_called)
                raise
            _guard.run(_returned, test_case)

    return testPartExecutor


# The collector's own `TestCase._callTestMethod`, once installed.
_CALL_TEST_METHOD: list[Any] = [None]


def _returned(test_case: Any) -> None:
    method = getattr(type(test_case), "_callTestMethod", None)
    if _FED_LATE or method is None or method is not _CALL_TEST_METHOD[0]:
        _called()


_PARTS = ("_callSetUp", "_callTearDown", "_callCleanup")


def _wrap_outcome(name: str, outcome: str) -> Any:
    original = getattr(_Result, name)

    def wrapper(self: Any, test: Any, *args: Any) -> Any:
        _guard.run(_record, self, test, outcome)
        return original(self, test, *args)

    return wrapper


def _defined_in(result: Any, test: Any) -> None:
    method = getattr(test, getattr(test, "_testMethodName", ""), None)
    code = getattr(inspect.unwrap(method), "__code__", None) if method else None
    if code is not None:
        defined = os.path.abspath(code.co_filename)  # noqa: PTH100
        where = channel.where(defined, os.getcwd())  # noqa: PTH109
        _state(result)["defined_in"][names.test_id(test)] = where


def _start_test(original: Any) -> Any:
    def startTest(self: Any, test: Any) -> Any:
        _guard.run(_start, test)
        _guard.run(_defined_in, self, test)
        return original(self, test)

    return startTest


def _add_subtest(original: Any) -> Any:
    def addSubTest(self: Any, test: Any, subtest: Any, err: Any) -> Any:
        if err is not None:
            _guard.run(_record, self, test, "failed")
        return original(self, test, subtest, err)

    return addSubTest


def _write(result: Any) -> None:
    state = _state(result)
    tampered = [name for name, obj in _WATCHED.items() if _current(name) is not obj]
    channel.write(
        "unittest",
        {
            "outcomes": state["outcomes"],
            "defined_in": state["defined_in"],
            "tampered": tampered,
        },
    )


def _stop_test_run(original: Any) -> Any:
    def stopTestRun(self: Any) -> Any:
        _guard.run(_write, self)
        if _guard.error:
            # Disabled: a record that says why, and no outcomes the verdict could misread.
            channel.write("unittest", {"outcomes": {}, "collector_error": _guard.error})
        return original(self)

    return stopTestRun


def _install() -> None:
    """Wrap the TestResult methods every runner calls, and the loader's by-name lookup."""
    wrapped = {name: _wrap_outcome(name, outcome) for name, outcome in _OUTCOME.items()}
    wrapped["startTest"] = _start_test(_Result.startTest)
    wrapped["addSubTest"] = _add_subtest(_Result.addSubTest)
    wrapped["stopTest"] = _stop_test(_Result.stopTest)
    stop = _stop_test_run(_Result.stopTestRun)
    names.install(_guard)
    for name, wrapper in wrapped.items():
        setattr(_Result, name, wrapper)
    _Result.stopTestRun = stop  # type: ignore[method-assign]
    case = unittest.case.TestCase
    call = vars(case).get("_callTestMethod")  # Python 3.8+; an async case has its own
    if inspect.isfunction(call):
        _CALL_TEST_METHOD[0] = _call_test_method(call)
        case._callTestMethod = _CALL_TEST_METHOD[0]  # type: ignore[attr-defined]
    _PART_OWNER.testPartExecutor = _part_executor(_PART_OWNER.testPartExecutor)
    for name, helper in list(vars(case).items()):
        if name.startswith(("assert", "fail")) and inspect.isfunction(helper):
            setattr(case, name, _evidence(helper))
    sys.audit(TEST_EVENT, "evidence", "unittest", "")


def _install_failed() -> None:
    """The collector could not install itself: a run's end still says so in a record."""
    _Result.stopTestRun = _stop_test_run(_Result.stopTestRun)  # type: ignore[method-assign]


_guard.run(_install)
if _guard.error:
    _install_failed()

_OWNERS: dict[str, Any] = {
    "TestCase": unittest.case.TestCase,
    "BaseTestSuite": unittest.suite.BaseTestSuite,
    "TestSuite": unittest.suite.TestSuite,
    "TestResult": _Result,
    "_Outcome": _PART_OWNER,
}
_METHODS = {
    "TestCase": ("run", "__call__", "_callTestMethod", *_PARTS, "doCleanups"),
    "BaseTestSuite": ("run", "__call__"),
    "TestSuite": ("run",),
    "_Outcome": ("testPartExecutor",),
    "TestResult": (
        *_OUTCOME,
        "startTest",
        "stopTest",
        "addSubTest",
        "stopTestRun",
        "wasSuccessful",
    ),
}


# The assertion helpers too: a no-op assertEqual makes every test "pass".
_METHODS["TestCase"] += tuple(
    name for name in vars(unittest.case.TestCase) if name.startswith(("assert", "fail"))
)


def _current(name: str) -> Any:
    owner, _, attr = name.partition(".")
    return inspect.getattr_static(_OWNERS[owner], attr, None)


def _snapshot() -> dict[str, Any]:
    return {f"{o}.{m}": _current(f"{o}.{m}") for o, ms in _METHODS.items() for m in ms}


_WATCHED: dict[str, Any] = _guard.run(_snapshot) or {}


def _ready() -> None:
    """The monitor snapshots the runner's objects now, before any of the step's code."""
    sys.audit(TEST_EVENT, "ready", "", "")


_guard.run(_ready)
