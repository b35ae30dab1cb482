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

import inspect
import os
import unittest
from typing import Any

import _pytest.python
import _pytest.reports
import _pytest.runner
import _pytest.unittest
import patchheal_results as channel
import patchheal_trace
import pytest

_OWNERS: dict[str, Any] = {
    "python.Function": _pytest.python.Function,
    "python": _pytest.python,
    "runner": _pytest.runner,
    "runner.CallInfo": _pytest.runner.CallInfo,
    "reports.TestReport": _pytest.reports.TestReport,
    "unittest.TestCaseFunction": _pytest.unittest.TestCaseFunction,
    "stdlib.TestCase": unittest.TestCase,
}
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
    holder = _OWNERS[owner]
    return inspect.getattr_static(holder, attr, None)


_WATCHED = {f"{o}.{a}": _current(f"{o}.{a}") for o, attrs in _ATTRS.items() for a in attrs}
_outcomes: dict[str, str] = {}
_defined_in: dict[str, str] = {}


def _record(test_id: str, outcome: str) -> None:
    _outcomes[test_id] = channel.worst(_outcomes.get(test_id), outcome)


# Asked for by the reproduction run only: tracing slows a test run down (docs/proposers.md).
_TRACING = os.environ.get("PATCHHEAL_TRACE") == "1"
_traces: dict[str, Any] = {}
_failed_traces: dict[str, Any] = {}
_spectrum = patchheal_trace.Spectrum()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: Any) -> Any:
    function = getattr(item, "obj", None)
    code = getattr(inspect.unwrap(function), "__code__", None) if function else None
    root = str(item.config.rootpath)
    if code is not None:
        _defined_in[item.nodeid] = channel.where(os.path.abspath(code.co_filename), root)  # noqa: PTH100
    if not _TRACING:
        yield
        return
    trace = patchheal_trace.TestTrace(root)
    trace.start()
    try:
        outcome = yield
    finally:
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
    if report.when == "call":
        _keep_trace(report.nodeid, "failed" if report.failed else report.outcome)
        if hasattr(report, "wasxfail"):
            _record(report.nodeid, "xfailed" if report.skipped else "failed")
        else:
            _record(report.nodeid, report.outcome)
    elif report.failed:
        _record(report.nodeid, "error")
    elif report.skipped:
        _record(report.nodeid, "skipped")


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _record(report.nodeid or "<collection>", "error")


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    tampered = [name for name, obj in _WATCHED.items() if _current(name) is not obj]
    channel.write(
        "pytest",
        {
            "outcomes": _outcomes,
            "defined_in": _defined_in,
            "tampered": tampered,
            "traces": {t: trace.record(_spectrum) for t, trace in _failed_traces.items()},
        },
    )
