"""Verification of a patched worktree: the failing step `verify_runs` times, then regression.

Every run of the failing step must pass the verdict (`verdict/judge.py`,
by test id when the harness's collectors reported): one green run of a flaky
test proves nothing. The regression steps must not get worse than their
baseline, by counts and by test id. The caller has applied the patch.
"""

from __future__ import annotations

from pathlib import Path

from patchheal.config import BudgetSpec, StepSpec
from patchheal.errors import HarnessError
from patchheal.failure.analysis import analyze
from patchheal.harness.base import Harness
from patchheal.models import CommandResult, Failure, Outcome, Verdict
from patchheal.verdict.airflow import check_tasks
from patchheal.verdict.environment import environmental
from patchheal.verdict.judge import judge, worse

_NOT_JUDGED = "not judged: the environment failed, not the patch"


def _run(
    harness: Harness, command: str, tree: Path, budget: BudgetSpec, results: str | None
) -> CommandResult:
    return harness.run(
        command,
        tree,
        timeout=budget.step_timeout_seconds,
        idle_timeout=budget.idle_timeout_seconds,
        results=results,
    )


def _timeout(result: CommandResult, budget: BudgetSpec) -> str:
    limit = (
        budget.idle_timeout_seconds if result.timed_out == "idle" else budget.step_timeout_seconds
    )
    return f"{result.timed_out} timeout after {limit:g} s"


def verify(
    harness: Harness,
    step: StepSpec,
    tree: Path,
    budget: BudgetSpec,
    *,
    baseline: Verdict,
    failure: Failure,
    regression: str | None,
    regression_baseline: Verdict | None,
) -> tuple[Outcome, str, str]:
    """The outcome of a patched `tree`, why, and the log of the runs."""
    runs = budget.verify_runs
    log = ""
    passed: Verdict | None = None
    for run in range(1, runs + 1):
        try:
            result = _run(harness, step.command, tree, budget, step.results)
        except HarnessError as exc:
            return Outcome.HARNESS_ERROR, f"harness error: {exc}", log
        log += f"$ {step.command}  (verification run {run} of {runs})\n{result.output}"
        if result.timed_out is not None:
            return Outcome.TIMEOUT, _timeout(result, budget), log
        verdict = judge(result, baseline=baseline, expected_tests=failure.failing_tests)
        if failure.source == "airflow":  # `tasks test` exits 0 for a skipped task
            verdict = check_tasks(verdict, result.output, failure.failing_tests, result.tests)
        unjudged = "" if verdict.passed else environmental(result, tree)
        if unjudged:
            # Not the patch's verdict: recorded so, its claim is released (never poisoned).
            return Outcome.HARNESS_ERROR, f"{_NOT_JUDGED}: {unjudged}", log
        if not verdict.passed:
            after = analyze(result.output, repo_root=str(tree), command=step.command).fingerprint
            change = (
                "failure unchanged"
                if after == failure.fingerprint
                else f"failure changed to {after}"
            )
            which = f" in verification run {run} of {runs}" if runs > 1 else ""
            return (
                Outcome.NO_EFFECT,
                f"the failing step still fails{which} ({change}): {verdict.reason}",
                log,
            )
        passed = verdict
    assert passed is not None  # verify_runs >= 1
    if regression is None:
        return Outcome.FIXED, f"the failing step passes: {passed.reason}", log
    bad, why, reg_log = _regression(harness, regression, tree, budget, regression_baseline)
    log += reg_log
    if bad is Outcome.REGRESSION:
        return bad, f"the failing step passes but the regression steps got worse: {why}", log
    if bad is not None:
        return bad, why, log
    return (
        Outcome.FIXED,
        f"the failing step passes and the regression steps did not get worse: {passed.reason}",
        log,
    )


def _regression(
    harness: Harness,
    command: str,
    tree: Path,
    budget: BudgetSpec,
    baseline: Verdict | None,
) -> tuple[Outcome | None, str, str]:
    """What went wrong in the regression steps (None: they did not get worse), why, their log."""
    try:
        result = _run(harness, command, tree, budget, None)
    except HarnessError as exc:  # as transient as in the failing step: never a job error
        return Outcome.HARNESS_ERROR, f"harness error in the regression steps: {exc}", ""
    log = f"\n$ {command}\n{result.output}"
    if result.timed_out is not None:
        return Outcome.TIMEOUT, f"regression steps: {result.timed_out} timeout", log
    verdict = judge(result, baseline=baseline)
    if baseline is not None:
        got_worse, why = worse(baseline, verdict)
    else:
        got_worse, why = not verdict.passed, verdict.reason
    unjudged = environmental(result, tree) if got_worse else ""
    if unjudged:
        return Outcome.HARNESS_ERROR, f"{_NOT_JUDGED} in the regression steps: {unjudged}", log
    if got_worse:
        why += _what_failed(result.output, command, tree)
    return (Outcome.REGRESSION if got_worse else None), why, log


def _what_failed(output: str, command: str, tree: Path) -> str:
    """' — ImportError in dags/weekly_report.py: ...': what the regression output says broke
    (an exit code alone does not tell a reviewer which DAG file stopped parsing)."""
    failure = analyze(output, repo_root=str(tree), command=command)
    if not failure.error_type:
        return ""
    where = f" in {', '.join(failure.failing_tests[:3])}" if failure.failing_tests else ""
    first = failure.message.split("\n", 1)[0][:200]
    return f" — {failure.error_type}{where}: {first}"
