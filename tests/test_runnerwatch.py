"""The runner watch (collectors/patchheal_runnerwatch.py) on both of its paths: the dicts'
version tags, where this Python keeps them, and the comparison of every value, where not.

Each test executes the module's code in a namespace of its own, as the monitor does, over
a private copy of `sys.modules` holding real modules made for the test (named as runner
modules are), and changes them as a candidate's code would.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import pytest

from patchheal.harness.results.collectors import COLLECTORS

# The checker, the runner's modules it watches, and whether it reads the dicts' tags.
Watch = tuple[Callable[..., Any], dict[str, Any], bool]


def _watch_module() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "patchheal_runnerwatch_under_test"}
    source = (COLLECTORS / "patchheal_runnerwatch.py").read_text()
    exec(compile(source, str(COLLECTORS / "patchheal_runnerwatch.py"), "exec"), namespace)
    return namespace


def _runner_modules() -> dict[str, types.ModuleType]:
    """`_pytest.reports`, on the outcome path, with a report class and a function, and
    `_pytest.python`, off it: modules made here under the runner's names."""
    reports = types.ModuleType("_pytest.reports")
    exec(
        "class Report:\n"
        "    maxDiff = 10\n"
        "    def outcome(self):\n"
        "        return 'failed'\n"
        "def make_report():\n"
        "    return Report()\n",
        reports.__dict__,
    )
    other = types.ModuleType("_pytest.python")
    exec("def collect():\n    return []\n", other.__dict__)
    return {"_pytest.reports": reports, "_pytest.python": other}


@pytest.fixture(params=["tags", "values"])
def watch(request: pytest.FixtureRequest) -> Watch:
    namespace = _watch_module()
    if request.param == "values":  # a Python whose dicts keep no usable tag (3.14, a debug build)
        namespace["make_version_marks"] = lambda: None
    elif namespace["make_version_marks"]() is None:
        pytest.skip("this Python keeps no dict version tag the probe accepts")
    modules: dict[str, Any] = dict(_runner_modules())
    changed = namespace["make_runner_watch"](modules, types.ModuleType)
    assert changed(True) == []
    return changed, modules, request.param == "tags"


def _labels(found: list[tuple[str, Any]]) -> list[str]:
    return [label for label, _ in found]


def test_a_replaced_method_is_named_once(
    watch: Watch,
) -> None:
    changed, modules, _tagged = watch
    modules["_pytest.reports"].Report.outcome = lambda self: "passed"
    assert _labels(changed(False)) == ["_pytest.reports.Report.outcome"]
    assert changed(False) == []  # named when it was made, not again


def test_behaviour_added_to_a_class_is_named(
    watch: Watch,
) -> None:
    changed, modules, _tagged = watch
    modules["_pytest.reports"].Report.passed = property(lambda self: True)
    assert _labels(changed(False)) == ["_pytest.reports.Report.passed (added)"]


def test_a_module_function_off_the_outcome_path_is_named(
    watch: Watch,
) -> None:
    """With tags, at the next check, as any change; comparing values, at the next check of
    all (a test module's compile, a signed record) or of its slice in rotation."""
    changed, modules, tagged = watch
    modules["_pytest.python"].collect = lambda: ["everything"]
    assert _labels(changed(not tagged)) == ["_pytest.python.collect"]


def test_a_module_imported_later_is_watched_from_when_it_is_seen(
    watch: Watch,
) -> None:
    changed, modules, _tagged = watch
    late = types.ModuleType("pluggy.fake_late")
    exec("def call():\n    return 1\n", late.__dict__)
    modules["pluggy.fake_late"] = late
    assert changed(False) == []
    late.call = lambda: 2  # type: ignore[attr-defined]
    assert _labels(changed(True)) == ["pluggy.fake_late.call"]


def test_legitimate_churn_is_not_named(
    watch: Watch,
) -> None:
    """Data set on a runner class (`maxDiff`), a data global added to a runner module, and a
    change put back before the check: none is a change of behaviour that is still there."""
    changed, modules, _tagged = watch
    reports = modules["_pytest.reports"]
    reports.Report.maxDiff = None
    reports.current_test = "test_calc.py::test_add"
    original = reports.make_report
    reports.make_report = lambda: None
    reports.make_report = original
    assert changed(True) == []


def test_the_probe_refuses_a_tag_that_does_not_move() -> None:
    namespace = _watch_module()

    def still(space: Any) -> tuple[memoryview, dict[str, Any]]:
        return memoryview(b"\0" * 8), {}

    assert namespace["_version_marks_work"](still, types.ModuleType) is False
    found = namespace["make_version_marks"]()
    if found is not None:  # this Python keeps tags: the real mark passes its own probe
        assert namespace["_version_marks_work"](found, types.ModuleType) is True
