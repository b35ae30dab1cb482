"""Verification of a patched worktree: the failing step `verify_runs` times, then regression.

Every run of the failing step must pass the verdict (`verdict/judge.py`,
by test id when the harness's collectors reported): one green run of a flaky
test proves nothing. Each regression step (the job's `[regression]` command,
then its harness's, e.g. Airflow's parse check) must not get worse than its
baseline at reproduction, by counts and by test id (for Airflow, by DAG file:
a file that did not import at base is not the patch's regression, a newly
broken one is). The caller has applied the patch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from patchheal.config import BudgetSpec, StepSpec
from patchheal.errors import HarnessError
from patchheal.failure.analysis import analyze
from patchheal.harness.base import Harness
from patchheal.loop.twins import TwinRun, ends_with_twin
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


@ends_with_twin  # an impossible twin that passes ends it: rejected_oracle (loop/twins.py)
def verify(
    harness: Harness,
    step: StepSpec,
    tree: Path,
    budget: BudgetSpec,
    *,
    baseline: Verdict,
    failure: Failure,
    regression: Sequence[str],
    regression_baseline: Mapping[str, Verdict],
) -> tuple[Outcome, str, str]:
    """The outcome of a patched `tree`, why, and the log of the runs."""
    runs = budget.verify_runs
    log = ""
    passed: Verdict | None = None
    twin = TwinRun(harness, step, tree, budget, baseline=baseline, failure=failure)
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
        passed = twin.after(run, verdict, log)
    assert passed is not None  # verify_runs >= 1
    if not regression:
        return Outcome.FIXED, f"the failing step passes: {passed.reason}", log
    bad, why, reg_log = _regressions(harness, regression, tree, budget, regression_baseline)
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


def _regressions(
    harness: Harness,
    regression: Sequence[str],
    tree: Path,
    budget: BudgetSpec,
    baselines: Mapping[str, Verdict],
) -> tuple[Outcome | None, str, str]:
    """The regression steps in order, each against its own baseline; the first that went
    wrong ends them (None: none got worse), why, and their log."""
    log = ""
    for command in regression:
        bad, why, step_log = _regression(harness, command, tree, budget, baselines.get(command))
        log += step_log
        if bad is not None:
            return bad, why, log
    return None, "", log


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
    verdict = judge_regression(result, tree, baseline)
    if baseline is not None:
        got_worse, why = worse(baseline, verdict)
    else:
        got_worse, why = not verdict.passed, verdict.reason
    unjudged = environmental(result, tree) if got_worse else ""
    if unjudged:
        return Outcome.HARNESS_ERROR, f"{_NOT_JUDGED} in the regression steps: {unjudged}", log
    if got_worse:
        known = baseline.failing_tests if baseline is not None else ()
        why += _what_failed(result.output, command, tree, known)
    return (Outcome.REGRESSION if got_worse else None), why, log


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


def _what_failed(output: str, command: str, tree: Path, known: Sequence[str]) -> str:
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
