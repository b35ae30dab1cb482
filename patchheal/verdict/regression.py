"""A regression step's verdict: its failing ids, and what its output says broke."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from patchheal.failure.analysis import analyze
from patchheal.models import CommandResult, TestCounts, Verdict
from patchheal.verdict.judge import judge


def judge_regression(result: CommandResult, tree: Path, baseline: Verdict | None) -> Verdict:
    """The verdict of a regression step's run, its failing ids including the DAG files that
    did not import: Airflow's parse check names them only in its own table, and without
    them a patch that breaks one more DAG while another was already broken at base would
    compare as no worse (both runs exit 1)."""
    verdict = judge(result, baseline=baseline)
    if verdict.passed:
        return verdict
    parsed = analyze(result.output, repo_root=str(tree), command=result.command)
    if parsed.source != "airflow" or not parsed.failing_tests:
        return verdict
    failing = tuple(dict.fromkeys((*verdict.failing_tests, *parsed.failing_tests)))
    return verdict.model_copy(update={"failing_tests": failing})


def what_failed(output: str, command: str, tree: Path, known: Sequence[str]) -> str:
    """' — ImportError in dags/weekly_report.py: ...': what the regression output says broke
    (an exit code alone does not tell a reviewer which DAG file stopped parsing). The
    headline exception is the first failure's: when that one already failed at base
    (`known`), it is not what the patch broke, and nothing is added."""
    failure = analyze(output, repo_root=str(tree), command=command)
    if not failure.error_type:
        return ""
    if failure.failing_tests and failure.failing_tests[0] in known:
        return ""
    new = [test for test in failure.failing_tests if test not in known]
    where = f" in {', '.join(new[:3])}" if new else ""
    first = failure.message.split("\n", 1)[0][:200]
    return f" — {failure.error_type}{where}: {first}"


_WORST_FIRST = ("error", "failed", "skipped", "xfailed", "passed")


def steadied(first: Verdict, again: Verdict) -> Verdict:
    """A regression step's baseline from two runs of the base: what either run failed is
    not blamed on a patch. An id the second run did not give again with the same outcome
    (a flaky test; a parameter made from the clock, `test_parse[11-28-2026 19:15:37]`)
    is marked unstable: compared by count, not by id. Only the base's own runs make an
    id unstable, so a candidate cannot rename a test it broke out of the comparison; the
    counts (failures, errors, passes, tests run by id) still see it fail or vanish."""
    counts = _lenient(first.counts, again.counts)
    failing = tuple(dict.fromkeys((*first.failing_tests, *again.failing_tests)))
    passed = first.passed and again.passed
    reason = first.reason if not first.passed or passed else again.reason
    tests = first.tests
    if tests is not None and again.tests is not None:
        other = again.tests.outcomes
        unstable = sorted(t for t, o in tests.outcomes.items() if other.get(t) != o)
        outcomes = {
            test: min(outcome, other.get(test, outcome), key=_WORST_FIRST.index)
            if outcome in _WORST_FIRST and other.get(test, outcome) in _WORST_FIRST
            else outcome
            for test, outcome in tests.outcomes.items()
        }
        monitor = (*tests.monitor, *(e for e in again.tests.monitor if e not in tests.monitor))
        tests = tests.model_copy(
            update={
                "outcomes": outcomes,
                "unstable": tuple(unstable),
                "monitor": monitor,
                "tampered": tuple(dict.fromkeys((*tests.tampered, *again.tests.tampered))),
            }
        )
    return first.model_copy(
        update={
            "passed": passed,
            "reason": reason,
            "counts": counts,
            "failing_tests": failing,
            "tests": tests,
        }
    )


def _lenient(a: TestCounts, b: TestCounts) -> TestCounts:
    """The counts a patch is held to: the most failures and errors, the fewest passes."""

    def most(x: int | None, y: int | None) -> int | None:
        return None if x is None and y is None else max(x or 0, y or 0)

    def fewest(x: int | None, y: int | None) -> int | None:
        return y if x is None else x if y is None else min(x, y)

    return a.model_copy(
        update={
            "failed": most(a.failed, b.failed),
            "errors": most(a.errors, b.errors),
            "passed": fewest(a.passed, b.passed),
        }
    )
