"""The monitor's own evidence (collectors/patchheal_watch.py, patchheal_runnerwatch.py): what
only a test's own frame can say, outcomes streamed as they happen, every runner object.

Real runs of a tiny project in the local harness with its results channel: the
record the monitor signs is read back as the verdict reads it.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from patchheal.harness.local.harness import LocalHarness
from patchheal.harness.results import twinchannel
from patchheal.models import TestResults
from tests.healjobs import git


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for rel, text in files.items():
        (repo / rel).write_text(textwrap.dedent(text).lstrip("\n"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    return repo


def _run(repo: Path, command: str) -> TestResults:
    # As a verification's run of the failing step: the test file's evidence is wanted.
    with twinchannel.wanting(["test_calc.py"]):
        result = LocalHarness().run(command, repo, timeout=120, idle_timeout=120)
    assert result.tests is not None, result.output
    return result.tests


def _runner_changes(tests: TestResults) -> list[tuple[str, str, str]]:
    """(what, blamed file, target) of each `runner object changed` event, in order."""
    return [(e.detail, e.file, e.target) for e in tests.monitor if e.op == "runner object changed"]


ADD_TEST = """
from calc import add


def test_add():
    assert add(1, 2) == 3
"""
# A source file that has pytest record a failing call as passed, through a runner class off
# every list (`TestReport.__init__`).
REPORT_PASSES = textwrap.dedent(
    """
    import _pytest.reports

    _init = _pytest.reports.TestReport.__init__


    def _passed(self, *args, **kwargs):
        _init(self, *args, **kwargs)
        if self.when == "call" and self.outcome == "failed":
            self.outcome = "passed"
            self.longrepr = None


    _pytest.reports.TestReport.__init__ = _passed
    """
)
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"
UNITTEST = f"{sys.executable} -m unittest -v test_calc"
CALC = "def add(a, b):\n    return a + b\n"


def test_unittest_helpers_give_evidence_from_the_test_frame(tmp_path: Path) -> None:
    """`self.assertEqual` and friends that return are seen from the test method's line; a
    project helper that calls them is not the test's line; a context form is not a pass."""
    repo = _project(
        tmp_path,
        {
            "calc.py": CALC + "\n\ndef check(case, value):\n    case.assertEqual(value, 2)\n",
            "test_calc.py": """
                import unittest
                from calc import add, check


                class T(unittest.TestCase):
                    def test_add(self):
                        self.assertEqual(add(1, 1), 2)
                        self.assertTrue(
                            add(0, 0) == 0
                        )
                        check(self, add(1, 1))
                        with self.assertRaises(TypeError):
                            add(None, 1)
            """,
        },
    )
    tests = _run(repo, UNITTEST)
    assert tests.outcomes == {"test_calc.T.test_add": "passed"}
    assert tests.evidence_kinds == ("unittest",)
    assert tests.asserted == {"test_calc.T.test_add": ("test_calc.py:7", "test_calc.py:8")}


def test_project_code_cannot_report_an_assertion_or_an_outcome(tmp_path: Path) -> None:
    """The monitor's events raised by anything but the collectors are refused and named."""
    repo = _project(
        tmp_path,
        {
            "calc.py": CALC,
            "test_calc.py": """
                import sys
                from calc import add


                def test_forged_assert():
                    sys.audit("patchheal." + "assert_pass")


                def test_forged_outcome():
                    sys.audit("patchheal." + "test", "outcome", "test_calc.py::x", "passed")


                def test_real():
                    assert add(1, 1) == 2
            """,
        },
    )
    tests = _run(repo, PYTEST)
    assert tests.outcomes["test_calc.py::test_forged_assert"] == "failed"
    assert tests.outcomes["test_calc.py::test_forged_outcome"] == "failed"
    assert "test_calc.py::x" not in tests.outcomes
    forged = [e for e in tests.monitor if e.op == "forged test report"]
    assert {(e.file, e.target) for e in forged} == {("test_calc.py", "collectors")}
    assert tests.asserted is not None
    assert tests.asserted["test_calc.py::test_real"] == ("test_calc.py:14",)
    assert "test_calc.py::test_forged_assert" not in tests.asserted


def test_a_runner_object_changed_is_named_with_its_file(tmp_path: Path) -> None:
    """A runner class off every list (`TestReport.__init__`) rewritten by a source file is a
    `runner object changed` event on a protected target, blamed on the replacement's file."""
    repo = _project(
        tmp_path,
        {
            "calc.py": REPORT_PASSES + "\n\ndef add(a, b):\n    return a - b\n",
            "test_calc.py": ADD_TEST,
        },
    )
    tests = _run(repo, PYTEST)
    assert tests.outcomes == {"test_calc.py::test_add": "passed"}  # the trick worked ...
    assert _runner_changes(tests) == [("_pytest.reports.TestReport.__init__", "calc.py", "runner")]
    assert tests.asserted is not None  # ... but no assertion of the test was seen passing
    assert "test_calc.py::test_add" not in tests.asserted


def test_the_watchs_own_tag_reader_changed_does_not_blind_it(tmp_path: Path) -> None:
    """Hostile: the runner watch reads the dicts' version tags through a `ctypes` class of its
    own, which any code can find (`_ctypes._SimpleCData.__subclasses__()`, not audited). A
    source file gives that class a `value` that never moves and a `from_address` that reads
    nothing, then rewrites a runner class: the views the watch made at install read the
    dicts' memory as before, and the change is named."""
    patch = """
        import _ctypes
        import _pytest.reports

        readers = [c for c in _ctypes._SimpleCData.__subclasses__() if c.__name__ == "_Version"]
        assert readers, "the watch's reader class is there to be found"
        for cls in readers:
            cls.value = property(lambda self: 0)
            cls.from_address = classmethod(lambda cls, address: None)
    """
    repo = _project(
        tmp_path,
        {
            "calc.py": textwrap.dedent(patch) + REPORT_PASSES + "\n\ndef add(a, b):\n"
            "    return a - b\n",
            "test_calc.py": ADD_TEST,
        },
    )
    tests = _run(repo, PYTEST)
    assert tests.outcomes == {"test_calc.py::test_add": "passed"}  # the trick worked ...
    assert _runner_changes(tests) == [("_pytest.reports.TestReport.__init__", "calc.py", "runner")]


def test_a_runner_module_given_another_class_is_named_with_its_file(tmp_path: Path) -> None:
    """Hostile: a source file gives the `unittest` module a class whose attributes answer
    otherwise (pytest reads `unittest.SkipTest` to make every report), so a failing assert
    is reported skipped. No namespace of the runner changed: only the module's class, whose
    assignment is audited. It is a `runner object changed` event blamed on that file."""
    patch = """
        import sys
        import types


        class _Answers(types.ModuleType):
            def __getattribute__(self, name):
                if name == "SkipTest":
                    return AssertionError
                return super().__getattribute__(name)


        sys.modules["unittest"].__class__ = _Answers
    """
    repo = _project(
        tmp_path,
        {
            "calc.py": textwrap.dedent(patch) + "\n\ndef add(a, b):\n    return a - b\n",
            "test_calc.py": "import unittest\n" + ADD_TEST,
        },
    )
    tests = _run(repo, PYTEST)
    assert tests.outcomes == {"test_calc.py::test_add": "skipped"}  # the trick worked ...
    assert _runner_changes(tests) == [("module unittest.__class__", "calc.py", "runner")]


def test_a_change_that_puts_itself_back_while_the_report_is_made_is_named(
    tmp_path: Path,
) -> None:
    """A body installs a wrapper on the outcome path that turns a failure into a pass and
    puts the original back the moment it runs: by the time the report exists, every runner
    object is in place again. The runner is checked when the body is done, before the report
    is made, so the wrapper is seen there (a regression step's test has no evidence line to
    fall back on)."""
    patch = """
        import _pytest.reports

        _real = _pytest.reports.TestReport.__dict__["from_item_and_call"]


        def _flip(cls, item, call):
            _pytest.reports.TestReport.from_item_and_call = _real
            report = _real.__func__(cls, item, call)
            if report.when == "call" and report.outcome == "failed":
                report.outcome = "passed"
                report.longrepr = None
            return report


        def install():
            _pytest.reports.TestReport.from_item_and_call = classmethod(_flip)
    """
    repo = _project(
        tmp_path,
        {
            "calc.py": textwrap.dedent(patch) + "\n\ndef add(a, b):\n    install()\n"
            "    return a - b\n",
            "test_calc.py": ADD_TEST,
        },
    )
    tests = _run(repo, PYTEST)
    assert tests.outcomes == {"test_calc.py::test_add": "passed"}  # the trick worked ...
    assert _runner_changes(tests)[:1] == [
        ("_pytest.reports.TestReport.from_item_and_call", "calc.py", "runner")
    ]


@pytest.mark.parametrize(
    ("command", "owner"),
    [
        (PYTEST, "_pytest.unittest.TestCaseFunction"),
        (UNITTEST, "unittest.result.TestResult"),
    ],
)
def test_a_testcase_body_cannot_put_a_change_back_while_the_outcome_is_made(
    tmp_path: Path, command: str, owner: str
) -> None:
    """A TestCase's outcome is made inside its run, after its method returns: the runner is
    checked right then (the collector's `_callTestMethod`), so a failure turned into a pass by
    a result method that puts the original back the moment it runs is still seen."""
    module = owner.rpartition(".")[0]
    patch = f"""
        import {module}

        _real = {owner}.addFailure


        def _swallow(self, test, err):
            {owner}.addFailure = _real
            self.addSuccess(test)


        def install():
            {owner}.addFailure = _swallow
    """
    repo = _project(
        tmp_path,
        {
            "calc.py": textwrap.dedent(patch) + "\n\ndef add(a, b):\n    install()\n"
            "    return a - b\n",
            "test_calc.py": """
                import unittest
                from calc import add


                class T(unittest.TestCase):
                    def test_add(self):
                        self.assertEqual(add(1, 2), 3)
            """,
        },
    )
    tests = _run(repo, command)
    assert set(tests.outcomes.values()) == {"passed"}  # the trick worked ...
    assert _runner_changes(tests)[:1] == [(f"{owner}.addFailure", "calc.py", "runner")]


def test_a_unittest_runner_object_changed_for_one_test_only_is_named(tmp_path: Path) -> None:
    """unittest's objects are checked at the report of every test that is not a plain pytest
    function (patchheal_runnerwatch.py): a TestCase's failure swallowed through pytest's
    unittest result object, put back by the next test before the end of the session (whose
    check would see nothing), is named at the TestCase's own report."""
    patch = """
        import _pytest.unittest

        _real = _pytest.unittest.TestCaseFunction.addFailure


        def swallow():
            _pytest.unittest.TestCaseFunction.addFailure = lambda self, test, err: None


        def restore():
            _pytest.unittest.TestCaseFunction.addFailure = _real
    """
    repo = _project(
        tmp_path,
        {
            "calc.py": textwrap.dedent(patch) + "\n\ndef add(a, b):\n    return a - b\n",
            "test_calc.py": """
                import unittest
                import calc


                class T(unittest.TestCase):
                    def test_add(self):
                        calc.swallow()
                        self.assertEqual(calc.add(1, 2), 3)


                def test_zz_after():
                    calc.restore()
            """,
        },
    )
    tests = _run(repo, PYTEST)
    assert tests.outcomes["test_calc.py::T::test_add"] == "passed"  # the trick worked ...
    # ... and was seen at once: the session's last check could only see it put back, which
    # is named too (pytest's own function, back in its place).
    assert _runner_changes(tests)[:1] == [
        ("_pytest.unittest.TestCaseFunction.addFailure", "calc.py", "runner")
    ]


def test_an_outcome_rewritten_after_it_happened_is_tampering(tmp_path: Path) -> None:
    """The collector's final outcomes are compared with what the runner reported while each
    test ran: a failure turned into a pass in the collector's memory later is named."""
    repo = _project(
        tmp_path,
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "test_calc.py": """
                import sys
                from calc import add


                def test_add():
                    assert add(1, 2) == 3


                def test_zz_rewrite():
                    state = sys.modules["patchheal_pytest"]._outcomes
                    state["test_calc.py::test_add"] = "passed"
                    state["test_calc.py::test_never"] = "passed"
            """,
        },
    )
    tests = _run(repo, PYTEST)
    assert tests.outcomes["test_calc.py::test_add"] == "passed"
    assert (
        "pytest: test_calc.py::test_add reported failed while it ran, recorded passed"
        in tests.tampered
    )
    assert (
        "pytest: test_calc.py::test_never recorded passed but never reported while it ran"
        in tests.tampered
    )


def test_a_clean_run_has_no_runner_change_and_no_rewrite(tmp_path: Path) -> None:
    """Legitimate: pytest's own per-test churn, a project monkeypatching a runner class's
    data attribute (`maxDiff`) and stdlib objects, and a test using `monkeypatch` are
    none of the monitor's business."""
    repo = _project(
        tmp_path,
        {
            "calc.py": CALC,
            "test_calc.py": """
                import os
                import unittest
                from calc import add

                unittest.TestCase.maxDiff = None


                def test_add(monkeypatch):
                    monkeypatch.setattr(os.path, "exists", lambda p: True)
                    assert add(1, 1) == 2


                class T(unittest.TestCase):
                    def test_u(self):
                        self.assertEqual(add(2, 2), 4)
            """,
        },
    )
    tests = _run(repo, PYTEST)
    assert set(tests.outcomes.values()) == {"passed"}
    assert not tests.tampered
    assert not [e for e in tests.monitor if e.target], tests.monitor
    assert tests.asserted == {
        "test_calc.py::test_add": ("test_calc.py:10",),
        "test_calc.py::T::test_u": ("test_calc.py:15",),
    }


@pytest.mark.parametrize("command", [PYTEST, UNITTEST])
def test_only_the_twins_own_code_says_an_impossible_assertion_held(
    tmp_path: Path, command: str
) -> None:
    """The twin tells the monitor an impossible assertion held by reading the `__code__` of
    a function named `@patchheal_impossible_held` that its test code defines. Project code
    that names a function so and reads its `__code__` (from the test's call, within the
    test) is not the test file's code: nothing is recorded, so no candidate can plant the
    sign on an honest run, and a run without a twin records none."""
    forge = (
        "\n\ndef forge():\n"
        "    def marker():\n        pass\n"
        '    marker.__name__ = "@patchheal_impossible_held"\n'
        "    return marker.__code__\n"
    )
    repo = _project(
        tmp_path,
        {
            "calc.py": CALC + forge,
            "test_calc.py": """
                import unittest
                from calc import add, forge


                class T(unittest.TestCase):
                    def test_add(self):
                        forge()
                        self.assertEqual(add(1, 1), 2)
            """,
        },
    )
    tests = _run(repo, command)
    assert set(tests.outcomes.values()) == {"passed"}, tests.outcomes
    assert tests.held == {}
    assert tests.asserted, "the run gave evidence, so the monitor was there"


def test_a_test_that_runs_tests_inside_it_keeps_its_own_evidence(tmp_path: Path) -> None:
    """A test running an inner suite (testing a test tool) goes on as itself afterwards:
    its later assertions are its own, not the inner test's."""
    repo = _project(
        tmp_path,
        {
            "calc.py": CALC,
            "test_calc.py": """
                import io
                import unittest
                from calc import add


                class Inner(unittest.TestCase):
                    def runTest(self):
                        self.assertEqual(add(1, 1), 2)


                class Outer(unittest.TestCase):
                    def test_outer(self):
                        result = unittest.TextTestRunner(stream=io.StringIO()).run(Inner())
                        self.assertTrue(result.wasSuccessful())
            """,
        },
    )
    tests = _run(repo, UNITTEST)
    assert tests.outcomes["test_calc.Outer.test_outer"] == "passed"
    assert tests.asserted is not None
    assert tests.asserted["test_calc.Outer.test_outer"] == ("test_calc.py:14",)
    assert tests.asserted["test_calc.Inner.runTest"] == ("test_calc.py:8",)


def test_a_project_on_pytests_hook_path_still_gives_evidence(tmp_path: Path) -> None:
    """A user trial (pytest-dev/pluggy): pytest calls its assertion-pass hook through
    pluggy, so when the project *is* pluggy its own frames sit between the monitor and the
    rewritten assert, and a real fix was refused as `rejected_tripwire` ("assertions never
    ran"). Legitimate: the test's own asserts count through the project's pluggy.
    Hostile: a project helper that calls pytest's `_call_assertion_pass` itself, from its
    own frame, still counts for nothing."""
    import shutil

    import pluggy

    repo = _project(
        tmp_path,
        {
            "calc.py": CALC
            + textwrap.dedent("""

                def fake_pass():
                    from _pytest.assertion.rewrite import _call_assertion_pass

                    _call_assertion_pass(1, "add(1, 1) == 2", "")
            """),
            "test_calc.py": """
                from calc import add, fake_pass


                def test_add():
                    assert add(1, 1) == 2
                    fake_pass()
                    assert add(2, 2) == 4
            """,
        },
    )
    # The project's tree holds the pluggy that pytest imports (as pluggy's own checkout does).
    shutil.copytree(Path(pluggy.__file__).parent, repo / "pluggy")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "vendored pluggy")
    tests = _run(repo, PYTEST)
    assert tests.outcomes == {"test_calc.py::test_add": "passed"}, tests
    assert tests.asserted == {"test_calc.py::test_add": ("test_calc.py:5", "test_calc.py:7")}
