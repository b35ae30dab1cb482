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
from patchheal.verdict.tripwire import why_tainted
from patchheal.verdict.trust import untrusted
from patchheal.workspace import tracked

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


def _run_watched(
    harness: Harness, command: str, tree: Path, budget: BudgetSpec, results: str | None
) -> tuple[CommandResult, list[str]]:
    """A run, and the tracked files it changed besides its declared `results` (issue 25)."""
    before = tracked.snapshot(tree)
    result = _run(harness, command, tree, budget, results)
    return result, tracked.touched(before, tree, results)


def _tainted(touched: list[str], passed: bool, run: str) -> tuple[Outcome, str]:
    """A run that changed tracked files judged another tree: never `fixed`. Passing, it is
    the candidate's code tampering with the run; failing, it is no effect either way."""
    outcome = Outcome.REJECTED_TRIPWIRE if passed else Outcome.NO_EFFECT
    return outcome, tracked.tainted_reason(touched, run)


def _judged(result: CommandResult, baseline: Verdict, failure: Failure) -> Verdict:
    verdict = judge(result, baseline=baseline, expected_tests=failure.failing_tests)
    if failure.source == "airflow":  # `tasks test` exits 0 for a skipped task
        verdict = check_tasks(verdict, result.output, failure.failing_tests, result.tests)
    return verdict


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
    changed: Sequence[str] = (),
) -> tuple[Outcome, str, str]:
    """The outcome of a patched `tree` (`changed`: the candidate's files), why, the log."""
    runs = budget.verify_runs
    log = ""
    passed: Verdict | None = None
    twin = TwinRun(harness, step, tree, budget, baseline=baseline, failure=failure)
    for run in range(1, runs + 1):
        try:
            result, touched = _run_watched(harness, step.command, tree, budget, step.results)
        except HarnessError as exc:
            return Outcome.HARNESS_ERROR, f"harness error: {exc}", log
        log += f"$ {step.command}  (verification run {run} of {runs})\n{result.output}"
        verdict, ended = _check_run(
            result, touched, (run, runs), tree, step, budget, baseline, failure, changed
        )
        if ended is not None:
            return (*ended, log)
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


def _check_run(
    result: CommandResult,
    touched: list[str],
    run_of: tuple[int, int],
    tree: Path,
    step: StepSpec,
    budget: BudgetSpec,
    baseline: Verdict,
    failure: Failure,
    changed: Sequence[str],
) -> tuple[Verdict, tuple[Outcome, str] | None]:
    """One verification run's verdict, and the outcome that ends the verification with it
    (None: the run passed every line the verdict has)."""
    run, runs = run_of
    which = f" in verification run {run} of {runs}" if runs > 1 else ""
    verdict = _judged(result, baseline, failure)
    if result.timed_out is not None:
        return verdict, (Outcome.TIMEOUT, _timeout(result, budget))
    if result.stopped:  # a limit of the run (the worktree's size): the patch was not judged
        return verdict, (Outcome.HARNESS_ERROR, f"the run was stopped{which}: {result.stopped}")
    if no_trust := untrusted(result.tests):  # the harness's collector broke, not the patch
        return verdict, (Outcome.HARNESS_ERROR, no_trust)
    if touched:  # the run judged another tree than the candidate's
        return verdict, _tainted(touched, verdict.passed, f"verification run {run}")
    unjudged = "" if verdict.passed else environmental(result, tree)
    if unjudged:
        # Not the patch's verdict: recorded so, its claim is released (never poisoned).
        return verdict, (Outcome.HARNESS_ERROR, f"{_NOT_JUDGED}: {unjudged}")
    if not verdict.passed:
        after = analyze(result.output, repo_root=str(tree), command=step.command).fingerprint
        change = (
            "failure unchanged" if after == failure.fingerprint else f"failure changed to {after}"
        )
        why = f"the failing step still fails{which} ({change}): {verdict.reason}"
        return verdict, (Outcome.NO_EFFECT, why)
    if tainted := why_tainted(result.tests, baseline.tests, changed):
        return verdict, (Outcome.REJECTED_TRIPWIRE, tainted)
    return verdict, None


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
        result, touched = _run_watched(harness, command, tree, budget, None)
    except HarnessError as exc:  # as transient as in the failing step: never a job error
        return Outcome.HARNESS_ERROR, f"harness error in the regression steps: {exc}", ""
    log = f"\n$ {command}\n{result.output}"
    if touched:  # the tree that would be committed is not the one the candidate made
        return (*_tainted(touched, True, "the regression steps"), log)
    if result.timed_out is not None:
        return Outcome.TIMEOUT, f"regression steps: {result.timed_out} timeout", log
    if result.stopped:
        return Outcome.HARNESS_ERROR, f"the regression steps were stopped: {result.stopped}", log
    if no_trust := untrusted(result.tests):
        return Outcome.HARNESS_ERROR, f"in the regression steps, {no_trust}", log
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
