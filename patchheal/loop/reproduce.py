"""The reproduction gate: before any patch, the failing step runs on its starting point.

A step that passes there is not patched: it is `flaky` when some reruns fail,
else `env_mismatch` (the CI environment differs from the harness). A step that
fails with another fingerprint than the job's CI log is `env_mismatch` too,
reported with both fingerprints. A step whose dependencies cannot be installed
never runs: `dependency_issue`, naming what could not be had.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from patchheal.config import BudgetSpec, StepSpec
from patchheal.errors import DependencySetupError, HarnessError
from patchheal.failure.analysis import analyze, analyze_file
from patchheal.failure.classify import classify, flaky, runbook
from patchheal.harness.base import Harness
from patchheal.harness.results import twinchannel
from patchheal.models import (
    PATCHABLE_CLASSES,
    Classification,
    CommandResult,
    Failure,
    FailureClass,
    Verdict,
)
from patchheal.verdict.judge import judge
from patchheal.verdict.regression import judge_regression, steadied
from patchheal.verdict.trust import untrusted

# A step that passes on reproduction is rerun this many times to tell a
# flake from an environment mismatch, unless the budget asks for more.
MIN_RERUNS_WHEN_PASSING = 2


@dataclass(frozen=True)
class Reproduction:
    """The outcome of the reproduction gate for one step."""

    result: CommandResult
    verdict: Verdict
    failure: Failure | None
    classification: Classification | None
    ci_fingerprint: str | None
    regression_baseline: dict[str, Verdict]
    """Each regression step's verdict on the starting point, by command."""


def _run(
    harness: Harness,
    command: str,
    tree: Path,
    budget: BudgetSpec,
    results: str | None = None,
    *,
    trace: bool = False,
) -> CommandResult:
    result = harness.run(
        command,
        tree,
        timeout=budget.step_timeout_seconds,
        idle_timeout=budget.idle_timeout_seconds,
        results=results,
        trace=trace,
    )
    if no_trust := untrusted(result.tests):
        # Never fingerprinted or classified as the project's failure: the harness's own
        # collector broke (exit code 3, as for any harness error).
        raise HarnessError(f"reproducing `{command}`: {no_trust}")
    return result


def _passes(harness: Harness, step: StepSpec, tree: Path, budget: BudgetSpec) -> bool:
    """One rerun of the step, judged as a candidate's run would be (not by exit code alone)."""
    return judge(_run(harness, step.command, tree, budget, step.results)).passed


def _when_passing(
    harness: Harness,
    step: StepSpec,
    tree: Path,
    budget: BudgetSpec,
    basis: Failure,
    ci_fingerprint: str | None,
) -> Classification:
    """A step that passed on reproduction: flaky if a rerun fails, else an env mismatch."""
    reruns = max(budget.flaky_reruns, MIN_RERUNS_WHEN_PASSING)
    failures = sum(0 if _passes(harness, step, tree, budget) else 1 for _ in range(reruns))
    runs = reruns + 1
    if failures:
        return flaky(basis, passes=runs - failures, runs=runs)
    return Classification(
        failure_class=FailureClass.ENV_MISMATCH,
        retryable=False,
        evidence=(
            f"the step passed {runs} of {runs} runs in the harness",
            *([f"the CI log fails with fingerprint {ci_fingerprint}"] if ci_fingerprint else []),
        ),
        next_actions=(
            "Compare the CI runner's environment (versions, variables, services) "
            "with the harness: the step passes here.",
        ),
        pass_rate=1.0,
    )


def _setup_failed(step: StepSpec, exc: DependencySetupError) -> Reproduction:
    """The job's dependencies could not be installed: the step never ran, and no code
    patch can help. `dependency_issue`, with what could not be had as the evidence."""
    output = str(exc)
    result = CommandResult(command=step.command, exit_code=None, output=output,
                           duration_seconds=0.0)  # fmt: skip
    failure = analyze(output, command=step.command)
    missing = [f"cannot get {name}" for name in exc.missing]
    classification = Classification(
        failure_class=FailureClass.DEPENDENCY_ISSUE,
        retryable=False,
        evidence=(*missing, output.splitlines()[0]),
        next_actions=(
            "Make the named dependency available (a version that exists for the harness's "
            "Python, a reachable index: PIP_INDEX_URL in [job] env), then heal again.",
        ),
    )
    # Not the judge's "killed before it exited" (no exit code): the step never started.
    verdict = Verdict(passed=False, reason="the job's setup failed, so the step never ran")
    return Reproduction(result, verdict, failure, classification, None, {})


def reproduce(
    harness: Harness,
    step: StepSpec,
    tree: Path,
    budget: BudgetSpec,
    *,
    regression: Sequence[str],
) -> Reproduction:
    """Run the step (and the regression steps) on the untouched starting point."""
    try:
        harness.prepare(tree)
    except DependencySetupError as exc:
        return _setup_failed(step, exc)
    # Traced: what the failing tests execute is the proposer's best evidence (evidence/).
    result = _run(harness, step.command, tree, budget, step.results, trace=True)
    verdict = judge(result)
    ci_failure = (
        analyze_file(step.log, junit_path=step.junit)
        if step.log is not None and step.log.is_file()
        else None
    )
    ci_fingerprint = ci_failure.fingerprint if ci_failure is not None else None
    if verdict.passed:
        basis = ci_failure or analyze(result.output, repo_root=str(tree), command=step.command)
        classification = _when_passing(harness, step, tree, budget, basis, ci_fingerprint)
        return Reproduction(result, verdict, ci_failure, classification, ci_fingerprint, {})
    failure = analyze(result.output, repo_root=str(tree), command=step.command)
    classification = classify(
        failure,
        result.output,
        exit_code=result.exit_code,
        oom_killed=result.oom_killed,
        timed_out=result.timed_out,
        repo_root=str(tree),
        stopped=result.stopped,
    )
    if ci_fingerprint is not None and ci_fingerprint != failure.fingerprint:
        classification = Classification(
            failure_class=FailureClass.ENV_MISMATCH,
            retryable=False,
            evidence=(
                f"CI log fingerprint {ci_fingerprint}",
                f"harness fingerprint {failure.fingerprint}",
                *classification.evidence,
            ),
            next_actions=(
                # What the harness run itself lacks (e.g. the setup line) comes first.
                *_own_environment_actions(classification),
                "The step fails differently in the harness than in CI: align the harness "
                "(image, setup, environment) with the CI runner, then heal again.",
            ),
        )
    elif budget.flaky_reruns and classification.failure_class in PATCHABLE_CLASSES:
        # On by default (flaky_reruns = 1): a failure that does not come back is a
        # flake, and a no-op patch must never be "verified" as its fix.
        passes = sum(1 for _ in range(budget.flaky_reruns) if _passes(harness, step, tree, budget))
        if passes:
            classification = flaky(failure, passes=passes, runs=budget.flaky_reruns + 1)
    baselines = _regression_baselines(harness, regression, tree, budget)
    return Reproduction(result, verdict, failure, classification, ci_fingerprint, baselines)


def _own_environment_actions(classification: Classification) -> tuple[str, ...]:
    """The specific next actions of a harness run that failed for its environment."""
    if classification.failure_class is not FailureClass.ENV_MISMATCH:
        return ()
    generic = set(runbook(FailureClass.ENV_MISMATCH))
    return tuple(a for a in classification.next_actions if a not in generic)


def _regression_baselines(
    harness: Harness, regression: Sequence[str], tree: Path, budget: BudgetSpec
) -> dict[str, Verdict]:
    """The verdict each regression step is compared with: e.g. a DAG file that does not
    parse at base is known here, so it is not blamed on a patch. With `flaky_reruns`, the
    base is run twice, and what the two runs do not agree on (a flaky test, an id made
    from the clock) is not compared by id (`steadied`)."""
    baselines: dict[str, Verdict] = {}
    for command in regression:
        with twinchannel.no_twin():
            first = judge_regression(_run(harness, command, tree, budget), tree, None)
            if budget.flaky_reruns:
                again = judge_regression(_run(harness, command, tree, budget), tree, None)
                first = steadied(first, again)
        baselines[command] = first
    return baselines
