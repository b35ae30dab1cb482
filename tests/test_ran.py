"""Evidence that a protected test's body ran (verdict/ran.py, the monitor's record of the
assertions it saw pass from the test's own frame): a test reported passed whose asserts
never ran did not run."""

from __future__ import annotations

import hashlib
import sys
import textwrap
from pathlib import Path

import pytest

from patchheal.harness.local.harness import LocalHarness
from patchheal.harness.results import twinchannel
from patchheal.models import Outcome, TestResults
from patchheal.verdict.ran import Required, unexecuted
from tests.healjobs import git
from tests.verdict_battery import BUGGY, Case, _spoof, evaluate

TESTS = textwrap.dedent("""\
    import pytest
    from calc import add


    def test_add():
        x = add(2, 3)
        assert x == 5
        assert add(1, 1) == 2


    @pytest.mark.parametrize("a", [1, 2])
    def test_p(a):
        assert add(a, 0) == a


    class TestC:
        def test_m(self):
            with pytest.raises(TypeError):
                add(None, 1)
            assert add(0, 0) == 0
""")
NO_OP_RUNTEST = (
    "import _pytest.python\n"
    "_orig = _pytest.python.Function.runtest\n"
    "def _once(self):\n"
    "    _pytest.python.Function.runtest = _orig  # put back: the snapshot sees nothing\n"
    "_pytest.python.Function.runtest = _once\n"
)


def _project(tmp_path: Path, calc: str) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text(calc)
    (repo / "test_calc.py").write_text(TESTS)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")
    return repo


def _run(repo: Path, options: str = "") -> TestResults:
    # As a verification's run of the failing step: the test file's evidence is wanted.
    with twinchannel.wanting(["test_calc.py"]):
        result = LocalHarness().run(
            f"{sys.executable} -m pytest -q -p no:cacheprovider {options} test_calc.py",
            repo,
            timeout=120,
            idle_timeout=120,
        )
    assert result.tests is not None, result.output
    return result.tests


def _needs(lines: dict[str, tuple[int, ...]], sha: str = "") -> dict[str, Required]:
    return {t: Required("test_calc.py", sha, asserts) for t, asserts in lines.items()}


def test_the_monitor_records_each_passing_assert_line_by_test_id(tmp_path: Path) -> None:
    """Functions, parametrized instances and methods each get the lines of their passing
    asserts, seen from the test file's own frame; the assert inside `with` too (it ran),
    by the line pytest reports; and the test file's hash when it was compiled."""
    repo = _project(tmp_path, BUGGY.replace("a - b", "a + b"))
    tests = _run(repo)
    assert tests.asserted == {
        "test_calc.py::test_add": ("test_calc.py:7", "test_calc.py:8"),
        "test_calc.py::test_p[1]": ("test_calc.py:13",),
        "test_calc.py::test_p[2]": ("test_calc.py:13",),
        "test_calc.py::TestC::test_m": ("test_calc.py:20",),
    }
    assert "pytest" in tests.evidence_kinds
    sha = hashlib.sha256((repo / "test_calc.py").read_bytes()).hexdigest()
    assert tests.sources == {"test_calc.py": (sha,)}
    required = _needs({"test_calc.py::test_add": (7, 8), "test_calc.py::TestC::test_m": (20,)})
    assert unexecuted(required, tests) == ""
    assert unexecuted(_needs({"test_calc.py::test_add": (7, 8)}, sha), tests) == ""
    other = unexecuted(_needs({"test_calc.py::test_add": (7, 8)}, "0" * 64), tests)
    assert "had other bytes when it ran" in other


def test_a_test_passed_without_running_its_body_is_named(tmp_path: Path) -> None:
    """Invariant: a source file that makes the first test's call a no-op (and puts the
    runner back, so no snapshot of pytest's internals sees it) leaves that test `passed`
    with no assert seen: the verdict's evidence line names it."""
    tests = _run(_project(tmp_path, NO_OP_RUNTEST + BUGGY))
    assert tests.outcomes["test_calc.py::test_add"] == "passed"
    assert not tests.tampered
    assert "test_calc.py::test_add" not in (tests.asserted or {})
    why = unexecuted(_needs({"test_calc.py::test_add": (7, 8)}), tests)
    assert "test_calc.py::test_add was reported passed" in why
    assert "lines 7, 8 never ran" in why


def test_the_last_test_of_a_large_suite_has_its_evidence(tmp_path: Path) -> None:
    """Regression (pypa/packaging a33b2941bf33, bench_reproduce): 12,000 passing tests
    before the protected one; the collector once stopped recording after 10,000 tests, and
    the last test's real fix was refused as a body that never ran."""
    repo = _project(tmp_path, BUGGY.replace("a - b", "a + b"))
    many = "@pytest.mark.parametrize('n', range(12000))\ndef test_many(n):\n    assert n >= 0\n\n\n"
    (repo / "test_calc.py").write_text(TESTS.replace("def test_add():", many + "def test_add():"))
    tests = _run(repo)
    assert len(tests.with_outcome("passed")) == 12004
    # TestC.test_m's assert, five lines further down than in TESTS.
    assert tests.asserted is not None
    assert tests.asserted["test_calc.py::TestC::test_m"] == ("test_calc.py:25",)
    assert unexecuted(_needs({"test_calc.py::TestC::test_m": (25,)}), tests) == ""


def test_no_evidence_is_no_alarm(tmp_path: Path) -> None:
    """Plain asserts (`--assert=plain`, as old pytest on new Pythons needs) give no
    evidence of plain asserts: the line is silent rather than refusing a real fix."""
    tests = _run(_project(tmp_path, BUGGY.replace("a - b", "a + b")), "--assert=plain")
    assert "pytest" not in tests.evidence_kinds
    assert unexecuted(_needs({"test_calc.py::test_add": (7, 8)}), tests) == ""


@pytest.mark.parametrize(
    ("asserted", "outcome", "expected"),
    [
        ({"t::a": ("test_calc.py:3",)}, "passed", ""),
        ({"t::a": ("sub/test_calc.py:3",)}, "passed", ""),  # the repository above the tree
        ({}, "failed", ""),  # a failing test is the verdict's business, not this line's
        ({"t::a": ("test_calc.py:4",)}, "passed", "line 3 never ran"),
        ({"t::a": ("other_test.py:3",)}, "passed", "line 3 never ran"),
        ({}, "passed", "line 3 never ran"),
    ],
)
def test_unexecuted_rules(
    asserted: dict[str, tuple[str, ...]], outcome: str, expected: str
) -> None:
    tests = TestResults(outcomes={"t::a": outcome}, asserted=asserted, evidence_kinds=("pytest",))
    why = unexecuted({"t::a": Required("test_calc.py", "", (3,)), "t::b": Required("x", "")}, tests)
    assert (expected in why) if expected else why == ""


def test_unittest_helper_calls_need_the_unittest_evidence() -> None:
    """A TestCase's `self.assertEqual` lines are required when the unittest helpers gave
    evidence, plain `assert` lines only when pytest's rewritten asserts did."""
    need = {"t::a": Required("test_calc.py", "", asserts=(3,), calls=(5,))}
    unittest_only = TestResults(
        outcomes={"t::a": "passed"},
        asserted={"t::a": ("test_calc.py:5",)},
        evidence_kinds=("unittest",),
    )
    assert unexecuted(need, unittest_only) == ""
    none_seen = unittest_only.model_copy(update={"asserted": {}})
    assert "line 5 never ran" in unexecuted(need, none_seen)


@pytest.mark.slow
def test_verification_refuses_a_body_that_never_ran_before_any_twin(tmp_path: Path) -> None:
    """Through the real reproduction and verify(): the restore-on-first-call no-op, a
    source-only change the policy gate lets through, ends `rejected_tripwire` on the
    first run's evidence; the real fix of the same project is still `fixed`."""
    hostile = _spoof("no-op once", "pytest", NO_OP_RUNTEST, "runtest no-op, put back")
    judged = evaluate(hostile, tmp_path / "hostile")
    assert judged.outcome is Outcome.REJECTED_TRIPWIRE, judged.reason
    assert "never ran" in judged.reason
    fix = Case("fix", "pytest", {"calc.py": BUGGY.replace("a - b", "a + b")}, True, "fix")
    assert evaluate(fix, tmp_path / "fix").outcome is Outcome.FIXED
