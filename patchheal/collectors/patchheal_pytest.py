"""patchheal's pytest collector: per-test outcomes by node id, from pytest's own reports.

Loaded by the harness through PYTEST_PLUGINS, so it registers before any
conftest or test module is imported. It snapshots the pytest internals a
patch could replace to make a test "pass" without running it
(`Function.runtest = lambda self: None`) and reports them as tampered if they
changed by the end of the session. A session that never finishes (os._exit,
a crash) writes nothing, which the verdict treats as no results.

When the run asks for it (PATCHHEAL_TRACE=1: the reproduction), it also traces
the project functions each test executes around its call phase
(patchheal_trace.py); the traces of failing tests, contrasted with the passing
ones, go into the record as evidence for localization, never for the verdict.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import unittest
from typing import Any

import patchheal_pytest_compat as compat
import patchheal_results as channel
import patchheal_trace
import pytest
from patchheal_guard import Guard

# Every hook body runs under the guard: an internal error disables the collector and its
# record says so (patchheal_guard.py); it never makes a test error.
_guard = Guard()
_OWNERS: dict[str, Any] = _guard.run(compat.owners) or {}
_ATTRS = {
    "python.Function": ("runtest", "setup"),
    "python": ("pytest_pyfunc_call",),
    "runner": (
        "call_and_report",
        "call_runtest_hook",
        "runtestprotocol",
        "pytest_runtest_call",
        "pytest_runtest_makereport",
    ),
    "runner.CallInfo": ("from_call",),
    "reports.TestReport": ("from_item_and_call",),
    "unittest.TestCaseFunction": ("runtest",),
    # unittest-style tests under pytest: a no-op assertEqual makes them "pass".
    "stdlib.TestCase": tuple(
        n for n in vars(unittest.TestCase) if n.startswith(("assert", "fail"))
    ),
}


def _current(name: str) -> Any:
    owner, _, attr = name.rpartition(".")
    holder = _OWNERS.get(owner)  # an internal this pytest version does not have: unwatched
    return None if holder is None else inspect.getattr_static(holder, attr, None)


def _snapshot() -> dict[str, Any]:
    return {f"{o}.{a}": _current(f"{o}.{a}") for o, attrs in _ATTRS.items() for a in attrs}


_WATCHED: dict[str, Any] = _guard.run(_snapshot) or {}


class _Absent:
    """An item class this pytest does not have: no item is one."""


_FUNCTION_ITEM: Any = _OWNERS.get("python.Function", _Absent)
_UNITTEST_ITEM: Any = _OWNERS.get("unittest.TestCaseFunction", _Absent)
_outcomes: dict[str, str] = {}
_defined_in: dict[str, str] = {}
# Evidence that a test's body ran is the monitor's, not this module's: pytest's
# assertion-pass hook raises an audit event, and the monitor checks, in its own closure,
# that the frame which ran the assert is the test file's (patchheal_watch.py). Each test's
# start and outcome are streamed to it the same way, as they happen.
ASSERT_EVENT = "patchheal.assert_pass"
TEST_EVENT = "patchheal.test"


def _stream(what: str, test_id: str, outcome: str = "") -> None:
    sys.audit(TEST_EVENT, what, test_id, outcome)


# The four events of every test (its item, its body done, its outcome, its end) are raised
# straight from the hook function pluggy calls, under the guard's rule written out (a failure
# disables the collector, never the test): the monitor names who reported a test by walking
# past the collectors' frames, and each frame costs it an audited `f_code` read (one more
# call of its hook), on top of the call itself.


def pytest_configure(config: Any) -> None:
    _guard.run(_enable_assertion_pass, config)
    _guard.run(_stream, "ready", "")


def _enable_assertion_pass(config: Any) -> None:
    if compat.enable_assertion_pass(config):
        _stream("evidence", "pytest")


def _assertion_passed() -> None:
    sys.audit(ASSERT_EVENT)


if compat.has_assertion_pass_hook():  # pytest < 5.0 refuses a plugin with an unknown hook

    def pytest_assertion_pass(item: Any, lineno: int, orig: str, expl: str) -> None:
        _guard.run(_assertion_passed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
    # Inside pytest's own wrapper (tryfirst), which has just armed the assertion-pass
    # callback for this test; it disarms it after the test, whatever happens here.
    _guard.run(_explain_passes_only_where_wanted, item)
    # The test's start, with its item: without dict version tags, the monitor checks
    # unittest's objects for this test only if the item is not a plain pytest function
    # (patchheal_runnerwatch.py). Nothing of the test runs between here and `logstart`.
    if not _guard.error:
        try:
            sys.audit(TEST_EVENT, "item", item.nodeid, item)
        except Exception as exc:
            _guard.fail(exc)
    yield


def _explain_passes_only_where_wanted(item: Any) -> None:
    """Disarm pytest's assertion-pass callback for a test the verdict wants no evidence of.

    Armed, every passing rewritten assert builds the explanation a failure would print
    (the `repr` of its operands) before the callback runs: an exception group of shared
    leaves 25 deep costs 0.08 s to compare plainly and more than 20 s explained (filelock's
    suite timed out in the harness). The verdict needs evidence only of its protected
    tests, whose files each run of the failing step names (patchheal_twin.EVIDENCE);
    elsewhere the test runs as it would without this collector. Code of the step that
    disarms it for a protected test only takes away that test's evidence: not passed."""
    wanted = getattr(sys.modules.get("patchheal_twin"), "EVIDENCE", None)
    if wanted is None or _is_wanted(item, wanted):
        return
    util = sys.modules.get("_pytest.assertion.util")
    if util is not None and getattr(util, "_assertion_pass", None) is not None:
        util._assertion_pass = None  # type: ignore[attr-defined]


def _is_wanted(item: Any, wanted: tuple[str, ...]) -> bool:
    if str(getattr(item, "nodeid", "")).partition("::")[0] in wanted:
        return True
    path = str(getattr(item, "path", None) or getattr(item, "fspath", "")).replace(os.sep, "/")
    return any(path == w or path.endswith("/" + w) for w in wanted)


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    if not _guard.error:
        try:
            sys.audit(TEST_EVENT, "stop", nodeid, "")
        except Exception as exc:
            _guard.fail(exc)


def _kept(test_id: str, outcome: str) -> tuple[str, str]:
    _outcomes[test_id] = channel.worst(_outcomes.get(test_id), outcome)
    return test_id, outcome


def _record(test_id: str, outcome: str) -> None:
    _stream("outcome", *_kept(test_id, outcome))


# Asked for by the reproduction run only: tracing slows a test run down (docs/proposers.md).
_TRACING = os.environ.get("PATCHHEAL_TRACE") == "1"
_traces: dict[str, Any] = {}
_failed_traces: dict[str, Any] = {}
_spectrum = patchheal_trace.Spectrum()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item: Any) -> Any:
    trace = _guard.run(_before_call, item)
    body = _guard.run(_watch_body, item)
    outcome = yield
    if body is not None:
        _guard.run(_unwatch_body, item, body)
    # The runner checked the moment the test's body is done, before its outcome is made: a
    # change the body made to the outcome path is still in place here, even one that puts
    # itself back while it makes the report. Outermost (tryfirst), so every other plugin's
    # code around the call has run by now.
    if not _guard.error:
        try:
            sys.audit(TEST_EVENT, "called", item.nodeid, "")
        except Exception as exc:
            _guard.fail(exc)
    if trace is not None:
        _guard.run(_after_call, item, trace, outcome)


def _watch_body(item: Any) -> Any:
    """The test function, swapped for one that has the monitor check the runner the moment
    it raises, in the test's own caller: before any of pytest's or pluggy's code runs after
    it, so that nothing the body changed for them (a builtin their code looks up, even one
    that puts itself back at its first use) is gone by the check. Only a plain function or
    method of a `Function` item: an async test is run by its plugin's own code. Returns the
    original, put back before the report is made (pytest cuts a failure's traceback at it)."""
    if not isinstance(item, _FUNCTION_ITEM) or isinstance(item, _UNITTEST_ITEM):
        return None
    original = item.obj
    function = getattr(original, "__func__", original)
    if not inspect.isfunction(function):
        return None
    if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
        return None

    @functools.wraps(original)
    def body(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        except BaseException:
            _guard.run(_raised, item)
            raise

    item.obj = body
    return original


def _unwatch_body(item: Any, original: Any) -> None:
    item.obj = original


def _checked_finalizer(finalizer: Any) -> Any:
    """`finalizer` (a fixture's teardown) that has the monitor check the runner the moment it
    raises, before pytest's code that gathers its error runs (`FixtureDef.finish` counts the
    errors with the builtin `len`: one that answers 0 once and puts itself back would lose
    the error)."""

    def finalize() -> Any:
        try:
            return finalizer()
        except BaseException:
            _guard.run(_stream, "called", "")
            raise

    return finalize


def _check_fixture_teardowns() -> None:
    """Every finalizer a fixture adds, checked when it raises (`_checked_finalizer`): wrapped
    here, at import, before the monitor first sees pytest's fixture module."""
    owner: Any = _OWNERS.get("fixtures.FixtureDef")
    add = vars(owner).get("addfinalizer") if owner is not None else None
    if owner is None or not inspect.isfunction(add):
        return

    @functools.wraps(add)
    def addfinalizer(self: Any, finalizer: Any) -> Any:
        return add(self, _checked_finalizer(finalizer))

    owner.addfinalizer = addfinalizer


_guard.run(_check_fixture_teardowns)


def _raised(item: Any) -> None:
    """A phase (setup, the body, teardown) raised: the runner checked before anything makes
    its outcome, so a change its code (the body's, a fixture's, a finalizer's) made to hide
    its error is seen even if it puts itself back as it does. A setup or teardown that did
    not raise has no error to hide, and what it changed for later is still in place at the
    next check (the body's, made whether or not it raised)."""
    _stream("called", item.nodeid)


if compat.has_new_style_wrappers():
    # Innermost (trylast) and new-style: pluggy throws a phase's error into this wrapper
    # first, straight from its call loop, before any other wrapper's code runs and before
    # it makes a result object of it (an old-style wrapper is handed one: a result class
    # swapped in by the phase's code, one that drops the error and puts the real class back
    # as it is made, would hide the error from it and from the check).

    def _checked_phase(item: Any) -> Any:
        try:
            return (yield)
        except BaseException:
            _guard.run(_raised, item)
            raise

    @pytest.hookimpl(wrapper=True, trylast=True, specname="pytest_runtest_setup")
    def pytest_runtest_setup_raised(item: Any) -> Any:
        return (yield from _checked_phase(item))

    @pytest.hookimpl(wrapper=True, trylast=True, specname="pytest_runtest_call")
    def pytest_runtest_call_raised(item: Any) -> Any:
        return (yield from _checked_phase(item))

    @pytest.hookimpl(wrapper=True, trylast=True, specname="pytest_runtest_teardown")
    def pytest_runtest_teardown_raised(item: Any, nextitem: Any) -> Any:
        return (yield from _checked_phase(item))

else:  # pluggy < 1.1: old-style wrappers only, each handed the result pluggy made

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_setup(item: Any) -> Any:
        outcome = yield
        _guard.run(_phase_done, item, outcome)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_teardown(item: Any, nextitem: Any) -> Any:
        outcome = yield
        _guard.run(_phase_done, item, outcome)


def _phase_done(item: Any, outcome: Any) -> None:
    if outcome.excinfo is not None:
        _raised(item)


def _before_call(item: Any) -> patchheal_trace.TestTrace | None:
    """Where the test function is defined; a started trace when this run is traced."""
    function = getattr(item, "obj", None)
    code = getattr(inspect.unwrap(function), "__code__", None) if function else None
    root = compat.rootdir(item.config)
    if code is not None:
        _defined_in[item.nodeid] = channel.where(os.path.abspath(code.co_filename), root)  # noqa: PTH100
    if not _TRACING or patchheal_trace.broken():
        return None
    trace = patchheal_trace.TestTrace(root)
    trace.start()
    return trace


def _after_call(item: Any, trace: patchheal_trace.TestTrace, outcome: Any) -> None:
    trace.stop()
    excinfo = outcome.excinfo
    if excinfo is not None:
        trace.failed_with(excinfo[2])
    _traces[item.nodeid] = trace


def _keep_trace(test_id: str, outcome: str) -> None:
    trace = _traces.pop(test_id, None)
    if trace is None:
        return
    if outcome == "passed":
        _spectrum.passed(trace)
    elif outcome in {"failed", "error"} and len(_failed_traces) < patchheal_trace.MAX_TESTS:
        _failed_traces[test_id] = trace  # recorded at the end, against every passing test


def pytest_runtest_logreport(report: Any) -> None:
    recorded = _guard.run(_logreport, report)
    if recorded is not None and not _guard.error:
        try:
            sys.audit(TEST_EVENT, "outcome", *recorded)
        except Exception as exc:
            _guard.fail(exc)


def _logreport(report: Any) -> tuple[str, str] | None:
    """(test id, outcome) of a report that records one, recorded here and streamed by the
    caller; None for a report that records none (a passed setup or teardown)."""
    # The runner is checked once a test before its outcome is read: the call's when its body
    # is done (pytest_runtest_call above), a setup's or teardown's that did not pass here, so
    # an attribute that answers "passed" once and then puts the class back is seen while it
    # is still there.
    if report.when != "call" and report.outcome != "passed":
        _stream("report", report.nodeid)  # setup or teardown: the call's was checked above
    if report.when == "call":
        _keep_trace(report.nodeid, "failed" if report.failed else report.outcome)
        # pytest's own outcome: an xfail that failed is "skipped" (xfailed), a non-strict
        # xpass "passed" (pytest exits 0 on it), a strict xpass "failed".
        if hasattr(report, "wasxfail") and report.skipped:
            return _kept(report.nodeid, "xfailed")
        return _kept(report.nodeid, report.outcome)
    if report.failed:
        return _kept(report.nodeid, "error")
    if report.skipped:
        return _kept(report.nodeid, "skipped")
    return None


def pytest_collectreport(report: Any) -> None:
    _guard.run(_collectreport, report)


def _collectreport(report: Any) -> None:
    if report.failed:
        _record(report.nodeid or "<collection>", "error")


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    _guard.run(_finish)
    if _guard.error:
        # Disabled: a record that says why, and no outcomes the verdict could misread.
        channel.write("pytest", {"outcomes": {}, "collector_error": _guard.error})


def _finish() -> None:
    tampered = [name for name, obj in _WATCHED.items() if _current(name) is not obj]
    traces = {} if patchheal_trace.broken() else _failed_traces
    channel.write(
        "pytest",
        {
            "outcomes": _outcomes,
            "defined_in": _defined_in,
            "tampered": tampered,
            "traces": {t: trace.record(_spectrum) for t, trace in traces.items()},
        },
    )
