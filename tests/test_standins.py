"""A module that failed to import or collect is matched to the tests it holds after a fix.

By the module's full dotted name (unittest) or node path (pytest), whatever
stand-in id the runner gave it, and to nothing else: a test of another module
whose name only starts alike, or a stand-in that still errors, is not a pass.
"""

from __future__ import annotations

import pytest

from patchheal.models import TestResults
from patchheal.verdict.byid import observed_passing
from patchheal.verdict.standins import children


def _results(**outcomes: str) -> TestResults:
    return TestResults(outcomes=dict(outcomes), runners=("unittest",))


def _of(outcomes: dict[str, str]) -> TestResults:
    return TestResults(outcomes=outcomes, runners=("pytest",))


AFTER = {
    "test.test_utils.TestUtil.test_add": "passed",
    "test.test_utils.TestUtil.test_sub": "passed",
    "test.test_utilsx.T.test_other": "failed",
}


@pytest.mark.parametrize(
    "stand_in",
    [
        "unittest.loader._FailedTest.test.test_utils",  # discovery; the collector's naming
        "unittest.loader._FailedTest.test_utils",  # by name, only the last part known
        "unittest.loader.ModuleImportFailure.test.test_utils",  # Python < 3.5
        "unittest.loader._FailedTest.test.test_utils.TestUtil",  # a class that was missing
    ],
)
def test_unittest_stand_in_holds_the_modules_tests(stand_in: str) -> None:
    held = children(_of(AFTER), stand_in)
    assert sorted(held) == [
        "test.test_utils.TestUtil.test_add",
        "test.test_utils.TestUtil.test_sub",
    ]
    assert observed_passing(_of(AFTER), stand_in)


@pytest.mark.parametrize(
    "holder", ["setUpClass (test.test_utils.TestUtil)", "setUpModule (test.test_utils)"]
)
def test_a_failed_class_or_module_fixture_holds_its_tests(holder: str) -> None:
    assert observed_passing(_of(AFTER), holder)
    assert not observed_passing(_of({**AFTER, holder: "error"}), holder)


def test_a_missing_test_method_stand_in_is_the_test_itself() -> None:
    stand_in = "unittest.loader._FailedTest.test.test_utils.TestUtil.test_add"
    assert children(_of(AFTER), stand_in) == ["test.test_utils.TestUtil.test_add"]


@pytest.mark.parametrize(
    ("stand_in", "expected"),
    [
        ("tests/test_x.py", ["tests/test_x.py::test_a", "tests/test_x.py::C::test_b"]),
        ("tests/test_x.py::C", ["tests/test_x.py::C::test_b"]),
        ("tests", ["tests/test_x.py::test_a", "tests/test_x.py::C::test_b", "tests/sub/t.py::t"]),
        (
            "tests/__init__.py",  # a package on pytest < 7
            ["tests/test_x.py::test_a", "tests/test_x.py::C::test_b", "tests/sub/t.py::t"],
        ),
    ],
)
def test_pytest_collection_error_holds_its_tests(stand_in: str, expected: list[str]) -> None:
    # Ids that only start alike: another module, another top-level directory.
    alike = {"testsuite/t.py::t": "passed", "tests.py::t": "passed"}
    if stand_in.startswith("tests/test_x.py"):
        alike["tests/test_xy.py::test_c"] = "passed"
    after = {t: "passed" for t in expected} | alike
    assert sorted(children(_of(after), stand_in)) == sorted(expected)


def test_a_stand_in_that_holds_a_failing_or_skipped_test_is_not_passing() -> None:
    for bad in ("failed", "skipped", "error", "xfailed"):
        after = {**AFTER, "test.test_utils.TestUtil.test_sub": bad}
        assert not observed_passing(_of(after), "unittest.loader._FailedTest.test_utils")


def test_a_stand_in_still_present_is_not_passing() -> None:
    """The module still fails to import: its stand-in errors again, whatever else passes."""
    stand_in = "unittest.loader._FailedTest.test_utils"
    after = {**AFTER, stand_in: "error"}
    assert not observed_passing(_of(after), stand_in)


def test_a_stand_in_holding_nothing_is_not_passing() -> None:
    """A name alike is not the module: `test_util` holds neither `test_utils` nor
    `test_utilsx`, and a pytest module holds no test of a file that only starts alike."""
    assert not observed_passing(_of(AFTER), "unittest.loader._FailedTest.test_util")
    assert not observed_passing(_of(AFTER), "unittest.loader._FailedTest.test.test_util")
    only_alike = {"tests/test_xy.py::test_c": "passed"}
    assert not observed_passing(_of(only_alike), "tests/test_x.py")
    assert not observed_passing(_of({}), "unittest.loader._FailedTest.test_utils")
