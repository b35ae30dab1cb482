"""What the pytest collector needs from pytest, on every version it supports (4.6 to 8.x).

pytest's internals move between versions (`Config.rootpath` exists from 6.1
on; older versions have only `rootdir`, a py.path). The collector asks here
instead of assuming the newest pytest; an internal a version does not have is
left unwatched rather than failing the collector (docs/verdict.md,
"Collector compatibility").
"""

from __future__ import annotations

import importlib
import inspect
import unittest
from typing import Any

# Where each watched owner lives: (module, attribute path inside it or "").
_WHERE = {
    "python.Function": ("_pytest.python", "Function"),
    "python": ("_pytest.python", ""),
    "runner": ("_pytest.runner", ""),
    "runner.CallInfo": ("_pytest.runner", "CallInfo"),
    "reports.TestReport": ("_pytest.reports", "TestReport"),
    "unittest.TestCaseFunction": ("_pytest.unittest", "TestCaseFunction"),
    "fixtures.FixtureDef": ("_pytest.fixtures", "FixtureDef"),
}


def owners() -> dict[str, Any]:
    """The objects whose attributes the collector watches, those this pytest has."""
    found: dict[str, Any] = {"stdlib.TestCase": unittest.TestCase}
    for name, (module_name, attr) in _WHERE.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        holder = getattr(module, attr, None) if attr else module
        if holder is not None:
            found[name] = holder
    return found


def rootdir(config: Any) -> str:
    """The session's root directory: `rootpath` (pytest >= 6.1), else `rootdir`."""
    root = getattr(config, "rootpath", None)
    if root is None:
        root = config.rootdir
    return str(root)


def has_assertion_pass_hook() -> bool:
    """pytest >= 5.0 calls `pytest_assertion_pass` for each passing rewritten assert."""
    try:
        hookspec = importlib.import_module("_pytest.hookspec")
    except ImportError:
        return False
    return hasattr(hookspec, "pytest_assertion_pass")


def enable_assertion_pass(config: Any) -> bool:
    """Turn the assertion-pass hook on for this session, as `enable_assertion_pass_hook`
    in an ini file would (test modules are rewritten after configuration, so setting the
    ini's cached value here is in time); False when asserts are not rewritten."""
    if not has_assertion_pass_hook():
        return False
    if getattr(config.option, "assertmode", "rewrite") != "rewrite":
        return False
    config._inicache["enable_assertion_pass_hook"] = True
    return True


def has_new_style_wrappers() -> bool:
    """pluggy >= 1.1 takes `wrapper=True`: a wrapper that the call loop throws a hook's
    error into, before it makes a result object of it."""
    import pytest

    try:
        parameters = inspect.signature(type(pytest.hookimpl).__call__).parameters
    except (TypeError, ValueError):
        return False
    return "wrapper" in parameters
