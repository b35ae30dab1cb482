"""A regression step's verdict: its failing ids, and what its output says broke."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from patchheal.failure.analysis import analyze
from patchheal.models import CommandResult, Verdict
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
