"""Verification of a patched worktree: gather what its runs produce, let the verdict decide.

The failing step runs `verify_runs` times (one green run of a flaky test
proves nothing), its impossible twin after one of those runs chosen at random
(loop/twins.py), then each regression step (the job's `[regression]`
command, then its harness's, e.g. Airflow's parse check). What each produced
goes into one evidence object (`verdict/evidence.py`); `verdict.decide` alone
says what it means (docs/verdict.md). It is asked after every run, so that a
run it refuses ends the verification without running the rest. The caller has
applied the patch.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from patchheal.config import BudgetSpec, StepSpec
from patchheal.errors import HarnessError
from patchheal.harness.base import Harness
from patchheal.harness.results import twinchannel
from patchheal.loop.twins import TwinRun
from patchheal.models import CommandResult, Failure, Outcome, Verdict
from patchheal.verdict.decide import decide
from patchheal.verdict.evidence import VerificationEvidence
from patchheal.workspace import added, tracked


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
    rng: random.Random | None = None,
) -> tuple[Outcome, str, str]:
    """The outcome of a patched `tree` (`changed`: the candidate's files), why, the log.
    `rng`: the twin's random choices (its place, what it changes), `random.SystemRandom`
    when None (the loop's; a test may fix them to put the twin in a given place)."""
    twin = TwinRun(harness, step, tree, budget, baseline=baseline, failure=failure, rng=rng)
    evidence = VerificationEvidence(
        command=step.command,
        tree=tree,
        baseline=baseline,
        failure=failure,
        changed=tuple(changed),
        verify_runs=budget.verify_runs,
        step_timeout_seconds=budget.step_timeout_seconds,
        idle_timeout_seconds=budget.idle_timeout_seconds,
        twin_at=twin.at,
        required=dict(twin.plan.asserts),
        regression=tuple(regression),
    )
    gathered = _gather(harness, step, tree, budget, evidence, twin, regression_baseline)
    for evidence, log in gathered:
        decision = decide(evidence)
        if decision.outcome is not None:
            return decision.outcome, decision.reason, log
    raise AssertionError("complete evidence always has an outcome")  # pragma: no cover


def _gather(
    harness: Harness,
    step: StepSpec,
    tree: Path,
    budget: BudgetSpec,
    evidence: VerificationEvidence,
    twin: TwinRun,
    regression_baseline: Mapping[str, Verdict],
) -> Iterator[tuple[VerificationEvidence, str]]:
    """The evidence after each run, with the log so far: the failing step's runs (the twin
    after the one it follows), then the regression steps. The caller stops asking when the
    evidence so far decides the verification."""
    log = ""
    # Each run of the failing step, the twin's too, starts from the worktree the first one
    # started from: nothing a run leaves there tells a later one which it is (added.py).
    first = added.snapshot(tree)

    def as_first() -> str:
        failed = added.remove_new(tree, first)
        return "".join(f"# not removed before the run: {line}\n" for line in failed[:5])

    for run in range(1, evidence.verify_runs + 1):
        if run > 1:
            log += as_first()
        try:
            with twinchannel.wanting(twin.wanted()):
                result, touched = _run_watched(harness, step.command, tree, budget, step.results)
        except HarnessError as exc:
            evidence = evidence.with_run(None, error=str(exc))
            yield evidence, log
            continue
        log += f"$ {step.command}  (verification run {run} of {evidence.verify_runs})\n"
        log += result.output
        evidence = evidence.with_run(result, tuple(touched))
        yield evidence, log
        if run == 1:  # the first run completes the twin's plan
            twin.learn(result.tests)
            evidence = evidence.with_plan(twin.plan.asserts)
            yield evidence, log
        if twin.due(run):
            log += as_first()
            with twinchannel.wanting(twin.wanted()):
                found, twin_log = twin.run()
            evidence = evidence.with_twin(found)
            yield evidence, log + twin_log  # the twin's run is logged when it decides
    for command in evidence.regression:
        try:
            with twinchannel.no_twin():
                result, touched = _run_watched(harness, command, tree, budget, None)
        except HarnessError as exc:
            baseline = regression_baseline.get(command)
            evidence = evidence.with_regression(command, baseline, None, error=str(exc))
            yield evidence, log
            continue
        log += f"\n$ {command}\n{result.output}"
        evidence = evidence.with_regression(
            command, regression_baseline.get(command), result, tuple(touched)
        )
        yield evidence, log


def _run_watched(
    harness: Harness, command: str, tree: Path, budget: BudgetSpec, results: str | None
) -> tuple[CommandResult, list[str]]:
    """A run, and the tracked files it changed besides its declared `results` (issue 25)."""
    before = tracked.snapshot(tree)
    result = harness.run(
        command,
        tree,
        timeout=budget.step_timeout_seconds,
        idle_timeout=budget.idle_timeout_seconds,
        results=results,
    )
    return result, tracked.touched(before, tree, results)
