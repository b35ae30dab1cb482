"""The verdict: counts from real pytest/unittest runs, and the spoofing cases."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patchheal import proc
from patchheal.models import CommandResult, TestCounts, TestResults, Verdict
from patchheal.verdict.judge import failing_tests, judge, parse_counts, worse

SUITE = """
import pytest

def test_one():
    assert 1 + 1 == 2

def test_two():
    assert 2 * 2 == 4

def test_target():
    assert {target}
"""


def result(output: str, exit_code: int | None = 0, **extra: object) -> CommandResult:
    return CommandResult(
        command="pytest -q", exit_code=exit_code, output=output, duration_seconds=1.0, **extra
    )


def run_pytest(tmp_path: Path, body: str, *args: str) -> CommandResult:
    (tmp_path / "test_suite.py").write_text(body)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "test_suite.py"]
    return proc.run(argv, cwd=tmp_path, timeout=60)


@pytest.fixture
def baseline(tmp_path: Path) -> Verdict:
    """The failing step as it ran before any patch: test_target fails."""
    verdict = judge(run_pytest(tmp_path, SUITE.format(target="False")))
    assert not verdict.passed
    return verdict


EXPECTED = ("test_suite.py::test_target",)


# -- parse_counts -------------------------------------------------------------------------


def test_parse_counts_from_a_real_pytest_run(tmp_path: Path) -> None:
    body = SUITE.format(target="False") + (
        "\n@pytest.mark.skip\ndef test_skip(): pass\n"
        "\n@pytest.mark.xfail\ndef test_xfail(): assert 0\n"
    )
    run = run_pytest(tmp_path, body)
    counts = parse_counts(run.output)
    assert counts == TestCounts(passed=2, failed=1, errors=0, skipped=1, deselected=0, xfailed=1)
    assert failing_tests(run.output) == ("test_suite.py::test_target",)


def test_parse_counts_verbose_run_knows_collected_and_deselected(tmp_path: Path) -> None:
    run = run_pytest(tmp_path, SUITE.format(target="True"), "-v", "-k", "not two")
    counts = parse_counts(run.output)
    assert (counts.passed, counts.deselected, counts.collected) == (2, 1, 3)


def test_parse_counts_from_a_real_unittest_run(tmp_path: Path) -> None:
    (tmp_path / "test_u.py").write_text(
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_ok(self): pass\n"
        "    def test_bad(self): self.assertEqual(1, 2)\n"
        "    def test_err(self): raise RuntimeError\n"
        "    @unittest.skip('x')\n"
        "    def test_skip(self): pass\n"
    )
    run = proc.run([sys.executable, "-m", "unittest", "test_u"], cwd=tmp_path, timeout=60)
    counts = parse_counts(run.output)
    assert counts == TestCounts(
        passed=1, failed=1, errors=1, skipped=1, deselected=0, xfailed=0, collected=4
    )
    assert set(failing_tests(run.output)) == {"test_u.T.test_bad", "test_u.T.test_err"}
    assert not judge(run).passed


def test_parse_counts_handles_colour_and_no_summary() -> None:
    coloured = "\x1b[32m\x1b[1m3 passed\x1b[0m\x1b[32m in 0.01s\x1b[0m\n"
    assert parse_counts(coloured).passed == 3
    assert parse_counts("hello\nworld\n") == TestCounts()
    assert parse_counts("INFO: we expect 3 passed in 1s soon\n") == TestCounts()


def test_the_last_summary_wins_over_a_printed_fake() -> None:
    output = (
        "===== 10 passed in 0.01s =====\n"
        "F..\n"
        "FAILED tests/test_x.py::test_y - assert 0\n"
        "========== 1 failed, 2 passed in 0.05s ==========\n"
    )
    assert parse_counts(output).failed == 1
    verdict = judge(result(output, exit_code=1))
    assert not verdict.passed
    assert verdict.counts.passed == 2


# -- judge: passes and plain failures ------------------------------------------------------


def test_a_real_fix_passes(tmp_path: Path, baseline: Verdict) -> None:
    run = run_pytest(tmp_path, SUITE.format(target="True"))
    verdict = judge(run, baseline=baseline, expected_tests=EXPECTED)
    assert verdict.passed, verdict.reason
    assert verdict.reason == "3 passed"


def test_a_failing_run_fails(tmp_path: Path, baseline: Verdict) -> None:
    assert not baseline.passed
    assert baseline.reason == "1 failed, 2 passed (exit code 1)"
    assert baseline.failing_tests == EXPECTED


def test_a_plain_command_passes_on_exit_zero_only() -> None:
    assert judge(result("All checks passed!\n")).passed
    verdict = judge(result("x.py:1:1: F401 unused import\n", exit_code=1))
    assert not verdict.passed
    assert verdict.reason == "exited with code 1"


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"timed_out": "wall", "exit_code": None}, "wall clock"),
        ({"timed_out": "idle", "exit_code": None}, "idle timeout"),
        ({"oom_killed": True, "exit_code": 137}, "out of memory"),
        ({"exit_code": None}, "killed before it exited"),
    ],
)
def test_timeouts_and_kills_are_not_a_pass(extra: dict[str, object], words: str) -> None:
    fields: dict[str, object] = {"exit_code": 0, **extra}
    code = fields.pop("exit_code")
    verdict = judge(result("3 passed in 0.1s\n", exit_code=code, **fields))  # type: ignore[arg-type]
    assert not verdict.passed
    assert words in verdict.reason


# -- judge: spoofing -------------------------------------------------------------------------


def test_no_tests_ran_is_not_a_pass(tmp_path: Path) -> None:
    run = run_pytest(tmp_path, SUITE.format(target="True"), "-k", "nothing_matches")
    assert run.exit_code == 5
    verdict = judge(run)
    assert not verdict.passed
    assert "no tests ran" in verdict.reason


def test_a_printed_pass_line_with_a_non_zero_exit_is_not_believed() -> None:
    verdict = judge(result("===== 12 passed in 0.2s =====\n", exit_code=1))
    assert not verdict.passed
    assert "not believed" in verdict.reason


def test_a_fake_summary_printed_by_a_test_does_not_hide_the_real_one(tmp_path: Path) -> None:
    body = SUITE.format(target="False").replace(
        "def test_target():", "def test_target():\n    print('===== 99 passed in 0.01s =====')"
    )
    run = run_pytest(tmp_path, body)
    assert "99 passed" in run.output
    verdict = judge(run)
    assert not verdict.passed
    assert verdict.counts.failed == 1


def test_exit_zero_with_failures_in_the_summary_is_not_a_pass() -> None:
    verdict = judge(result("1 failed, 2 passed in 0.1s\n", exit_code=0))
    assert not verdict.passed
    assert "not a pass" in verdict.reason


@pytest.mark.parametrize(
    ("marker", "reason"),
    [
        ("@pytest.mark.skip(reason='later')", "fewer tests ran than in the baseline (2 < 3"),
        ("@pytest.mark.xfail(reason='known')", "test_suite.py::test_target was skipped"),
    ],
)
def test_the_failing_test_skipped_or_xfailed_is_not_a_pass(
    tmp_path: Path, baseline: Verdict, marker: str, reason: str
) -> None:
    body = SUITE.format(target="False").replace("def test_target", f"{marker}\ndef test_target")
    run = run_pytest(tmp_path, body, "-rA")
    assert run.exit_code == 0
    verdict = judge(run, baseline=baseline, expected_tests=EXPECTED)
    assert not verdict.passed
    assert reason in verdict.reason


def test_the_failing_test_reported_skipped_by_name_is_not_a_pass(baseline: Verdict) -> None:
    output = (
        "test_suite.py::test_one PASSED\ntest_suite.py::test_two PASSED\n"
        "test_suite.py::test_three PASSED\ntest_suite.py::test_target SKIPPED (later)\n"
        "===== 3 passed, 1 skipped in 0.1s =====\n"
    )
    verdict = judge(result(output), baseline=baseline, expected_tests=EXPECTED)
    assert not verdict.passed
    assert "test_suite.py::test_target was skipped" in verdict.reason


def test_the_failing_test_deselected_is_not_a_pass(tmp_path: Path, baseline: Verdict) -> None:
    run = run_pytest(tmp_path, SUITE.format(target="False"), "--deselect", EXPECTED[0])
    assert run.exit_code == 0
    verdict = judge(run, baseline=baseline, expected_tests=EXPECTED)
    assert not verdict.passed
    assert "fewer tests ran than in the baseline (2 < 3" in verdict.reason


def test_the_failing_test_deleted_is_not_a_pass(tmp_path: Path, baseline: Verdict) -> None:
    body = SUITE.format(target="False").split("def test_target")[0]
    run = run_pytest(tmp_path, body)
    verdict = judge(run, baseline=baseline, expected_tests=EXPECTED)
    assert not verdict.passed
    assert "fewer tests ran" in verdict.reason
    # Without knowing which tests failed, fewer tests is still not a pass.
    assert not judge(run, baseline=baseline).passed


def test_a_silent_exit_zero_after_a_test_baseline_is_not_a_pass(baseline: Verdict) -> None:
    verdict = judge(result(""), baseline=baseline, expected_tests=EXPECTED)
    assert not verdict.passed
    assert "no test summary" in verdict.reason


def test_only_skips_is_not_a_pass() -> None:
    verdict = judge(result("3 skipped in 0.1s\n"))
    assert not verdict.passed
    assert "no test passed" in verdict.reason


# -- worse ---------------------------------------------------------------------------------


def _v(ok: bool, failing: tuple[str, ...] = (), **counts: int) -> Verdict:
    return Verdict(passed=ok, reason="r", counts=TestCounts(**counts), failing_tests=failing)


def test_worse_when_passing_turns_failing() -> None:
    got_worse, why = worse(_v(True, passed=5), _v(False, failed=1, passed=4))
    assert got_worse
    assert "passed before" in why


def test_worse_with_more_failures_fewer_passes_or_new_failing_tests() -> None:
    before = _v(False, ("t::a",), passed=9, failed=1)
    assert worse(before, _v(False, ("t::a", "t::b"), passed=8, failed=2))[0]
    assert "fewer tests passed" in worse(before, _v(False, ("t::a",), passed=7, failed=1))[1]
    assert "more errors" in worse(before, _v(False, ("t::a",), passed=9, failed=1, errors=1))[1]
    swapped, why = worse(before, _v(False, ("t::b",), passed=9, failed=1))
    assert swapped
    assert "newly failing: t::b" in why


def test_not_worse_when_fixed_or_unchanged() -> None:
    before = _v(False, ("t::a",), passed=9, failed=1)
    assert not worse(before, _v(True, passed=10, failed=0))[0]
    assert not worse(before, before)[0]
    assert not worse(_v(True), _v(True))[0]


def test_regression_run_for_real(tmp_path: Path) -> None:
    """The demo's regression case: the target test passes, another one breaks."""
    before = judge(run_pytest(tmp_path, SUITE.format(target="False")))
    broken = SUITE.format(target="True").replace("2 * 2 == 4", "2 * 2 == 5")
    after = judge(run_pytest(tmp_path, broken))
    got_worse, why = worse(before, after)
    assert got_worse
    assert "newly failing: test_suite.py::test_two" in why


# -- the verdict by test id (structured results from the harness's collectors) --


def by_id(**outcomes: str) -> TestResults:
    return TestResults(
        outcomes={k.replace("__", "::"): v for k, v in outcomes.items()}, runners=("pytest",)
    )


BASELINE = Verdict(
    passed=False,
    reason="1 failed",
    tests=by_id(t__target="failed", t__one="passed", t__two="passed"),
)
PRINTED_PASS = "=== 3 passed in 0.01s ==="


def test_by_id_a_run_with_every_test_passing_passes() -> None:
    tests = by_id(t__target="passed", t__one="passed", t__two="passed")
    assert judge(result(PRINTED_PASS, tests=tests), baseline=BASELINE).passed


@pytest.mark.parametrize(
    ("tests", "why"),
    [
        (None, "reported no results"),
        (by_id(t__one="passed", t__two="passed"), "not observed passing: t::target (not run)"),
        (by_id(t__target="skipped", t__one="passed", t__two="passed"), "t::target (skipped)"),
        (by_id(t__target="xfailed", t__one="passed", t__two="passed"), "t::target (xfailed)"),
        (by_id(t__target="passed", t__one="failed", t__two="passed"), "failed by id: t::one"),
        (by_id(t__target="passed", t__one="passed"), "fewer tests ran by id"),
        (
            TestResults(outcomes={"t::target": "passed"}, runners=("node",)),
            "the pytest collector reported nothing",
        ),
        (
            TestResults(
                outcomes={"t::target": "passed", "t::one": "passed", "t::two": "passed"},
                runners=("pytest",),
                tampered=("pytest: python.Function.runtest",),
            ),
            "internals were replaced",
        ),
        (
            TestResults(
                outcomes={"t::target": "passed", "t::one": "passed", "t::two": "passed"},
                runners=("pytest",),
                rejected=("pytest-1-forged.json",),
            ),
            "not written by a collector",
        ),
    ],
)
def test_by_id_an_exit_0_with_a_pass_summary_is_not_believed_over_the_results(
    tests: TestResults | None, why: str
) -> None:
    """Every spoof class of issue 9 ends here: exit 0 and a printed pass, but not by id."""
    verdict = judge(result(PRINTED_PASS, tests=tests), baseline=BASELINE)
    assert not verdict.passed
    assert why in verdict.reason


def test_by_id_a_test_function_moved_to_another_file_is_not_a_pass() -> None:
    assert BASELINE.tests is not None
    where = BASELINE.tests.model_copy(update={"defined_in": {"t::target": "t.py"}})
    baseline = BASELINE.model_copy(update={"tests": where})
    tests = by_id(t__target="passed", t__one="passed", t__two="passed").model_copy(
        update={"defined_in": {"t::target": "calc.py"}}
    )
    verdict = judge(result(PRINTED_PASS, tests=tests), baseline=baseline)
    assert not verdict.passed
    assert "now in calc.py, was in t.py" in verdict.reason


def test_by_id_a_module_that_failed_to_collect_passes_when_its_tests_all_pass() -> None:
    """A legitimate fix of an import error: the module id becomes the ids of its tests."""
    baseline = Verdict(passed=False, reason="error", tests=by_id(**{"tests/t.py": "error"}))
    fixed = TestResults(
        outcomes={"tests/t.py::a": "passed", "tests/t.py::b": "passed"}, runners=("pytest",)
    )
    assert judge(result(PRINTED_PASS, tests=fixed), baseline=baseline).passed
    half = fixed.model_copy(update={"outcomes": {"tests/t.py::a": "passed"}})
    half_skipped = half.model_copy(
        update={"outcomes": {"tests/t.py::a": "passed", "tests/t.py::b": "skipped"}}
    )
    assert not judge(result(PRINTED_PASS, tests=half_skipped), baseline=baseline).passed


def test_by_id_regression_steps_that_lose_a_passing_test_got_worse() -> None:
    before = Verdict(passed=False, reason="", tests=by_id(t__a="passed", t__b="failed"))
    after = Verdict(passed=False, reason="", tests=by_id(t__a="skipped", t__b="passed"))
    got_worse, why = worse(before, after)
    assert got_worse
    assert "passed before, not now: t::a" in why
    assert worse(before, Verdict(passed=False, reason="", tests=None))[0]
    now_green = Verdict(passed=True, reason="", tests=by_id(t__a="passed", t__b="passed"))
    assert not worse(before, now_green)[0]


def test_by_id_a_regression_step_whose_test_now_calls_code_of_another_file_got_worse() -> None:
    """A test that passed at base and passes now, but whose function is now another file's
    (a stand-in swapped in by a fixture or at collection): no passing test of its own."""
    base = by_id(t__a="passed", t__b="passed").model_copy(
        update={"defined_in": {"t::a": "t.py", "t::b": "t.py"}}
    )
    now = base.model_copy(update={"defined_in": {"t::a": "t.py", "t::b": "conftest.py"}})
    before = Verdict(passed=True, reason="", tests=base)
    got_worse, why = worse(before, Verdict(passed=True, reason="", tests=now))
    assert got_worse
    assert "replaced by code from other files: t::b (now in conftest.py, was in t.py)" in why
    assert not worse(before, Verdict(passed=True, reason="", tests=base))[0]
