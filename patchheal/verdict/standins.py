"""The tests a stand-in id holds: a module, package or class that failed to import or collect.

A runner reports what it could not load under an id of its own: pytest under
the module's or package's node id (`tests/test_x.py`, `tests`,
`tests/__init__.py` on older pytest), unittest under a `_FailedTest` stand-in
(`ModuleImportFailure` before Python 3.5) named after the module's full dotted
name (discovery, and the harness's collector for by-name loading) or after its
last part only (`python -m unittest test.test_utils` without the collector's
naming), or under `setUpClass (module.Class)` for a class fixture that
failed. After a fix, the same tests run under their own ids; this finds them,
by the module's full dotted name where there is one. Pure functions; no I/O.
"""

from __future__ import annotations

import re

from patchheal.models import TestResults

_STAND_INS = ("unittest.loader._FailedTest.", "unittest.loader.ModuleImportFailure.")
# unittest's `_ErrorHolder` for a class or module fixture that failed: `setUpClass (a.B)`.
_FIXTURE = re.compile(r"^(?:setUp|tearDown)(?:Class|Module) \(([\w.]+)\)$")
_PACKAGE = "/__init__.py"


def loaded_name(test_id: str) -> tuple[str, bool]:
    """What a failing id stood for (the dotted name behind a unittest stand-in, a pytest
    package's directory), and whether it was a unittest stand-in."""
    for prefix in _STAND_INS:
        if test_id.startswith(prefix):
            return test_id.removeprefix(prefix), True
    fixture = _FIXTURE.match(test_id)
    if fixture:
        return fixture.group(1), True
    return test_id.removesuffix(_PACKAGE), False


def children(results: TestResults, test_id: str) -> list[str]:
    """The ids in `results` that `test_id` (a module, package or class that failed to load,
    or a stand-in for one) holds; empty when it held none or was not such an id."""
    name, stand_in = loaded_name(test_id)
    # A dotted name's parts are separated by dots; a pytest node id's by `::` and `/` only
    # (`tests.py::t` is not in the package `tests`).
    prefixes = (f"{name}.",) if stand_in else (f"{name}::", f"{name}/")
    held = [t for t in results.outcomes if t.startswith(prefixes) or (stand_in and t == name)]
    if held or not stand_in or "." in name or not name:
        return held
    # Only the last part of a dotted name is known: the tests whose id has it as a part.
    return [t for t in results.outcomes if "::" not in t and name in t.split(".")]
