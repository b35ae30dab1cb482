"""The stop: turning a finished loop into a JobReport and the `--json` summary."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from patchheal import __version__
from patchheal.failure.classify import runbook
from patchheal.loop.state import JobState
from patchheal.models import JobStatus
from patchheal.report.model import JobReport, StepReport

BRANCH_PREFIX = "patchheal/local/"


def branch_name(job_id: str) -> str:
    return f"{BRANCH_PREFIX}{job_id}"


def _next_actions(state: JobState, steps: list[StepReport]) -> tuple[str, ...]:
    if state.status is JobStatus.FIXED:
        return (
            f"Inspect the verified patch: git -C {state.spec.job.repo} log -p "
            f"{state.spec.job.base}..{state.branch}",
            "Open a pull request from that branch once reviewed.",
        )
    actions: list[str] = []
    for step in steps:
        if step.classification is not None and step.status != "fixed":
            actions.extend(
                step.classification.next_actions or runbook(step.classification.failure_class)
            )
    if state.status is JobStatus.MANUAL_HANDOFF:
        actions.append("Hand the step to a person: the timeline of attempts lists what was tried.")
    if state.retryable:
        actions.append(
            f"Requeue later or continue with: patchheal heal JOB.toml --resume (job {state.job_id})"
        )
    return tuple(dict.fromkeys(actions))


def build_report(state: JobState) -> JobReport:
    """The report of a run, from its state alone."""
    steps = state.steps()
    outcomes = Counter(a.outcome.value for s in steps for a in s.attempts)
    spec = state.spec
    return JobReport(
        job_id=state.job_id,
        run_id=state.run_id,
        repo=spec.job.repo,
        base=spec.job.base,
        base_commit=state.base_commit,
        harness=state.harness_name,
        harness_reason=state.harness_reason,
        python=state.python,
        node=state.node,
        setup=tuple(spec.job.setup),
        env=tuple(spec.job.env),
        regression=state.regression,
        status=state.status,
        retryable=state.retryable,
        stop_reason=state.stop_reason,
        started_at=state.started,
        finished_at=time.time(),
        steps=tuple(steps),
        branch=state.branch,
        pull_request=state.pull_request,
        final_diff=state.final_diff,
        next_actions=_next_actions(state, steps),
        totals={"attempts": sum(outcomes.values()), **dict(sorted(outcomes.items()))},
        patchheal_version=__version__,
        queue_attempt=state.queue_attempt,
    )


def json_summary(report: JobReport, paths: dict[str, Path]) -> dict[str, Any]:
    """The `--json` output: what a CI job or scheduler needs, nothing more."""
    classification = None
    for step in report.steps:
        if step.classification is not None:
            classification = step.classification.failure_class.value
    return {
        "job_id": report.job_id,
        "status": report.status,
        "retryable": report.retryable,
        "queue_attempt": report.queue_attempt,
        "classification": classification,
        "stop_reason": report.stop_reason,
        "branch": report.branch,
        "pull_request": report.pull_request,
        "attempts": [
            {
                "step": s.index,
                "attempt": a.attempt_number,
                "label": a.label,
                "outcome": a.outcome.value,
                "diff_hash": a.diff_hash,
                "strategy": a.strategy,
                "reason": a.reason,
            }
            for s in report.steps
            for a in s.attempts
        ],
        "reports": {kind: str(path) for kind, path in paths.items()},
    }
