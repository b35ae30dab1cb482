"""The stop: turning a finished loop into a JobReport and the `--json` summary."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchheal import __version__
from patchheal.classify import runbook
from patchheal.memory.store import AttemptStore
from patchheal.report.model import JobReport, StepReport

if TYPE_CHECKING:
    from patchheal.loop import HealLoop

BRANCH_PREFIX = "patchheal/local/"


def branch_name(job_id: str) -> str:
    return f"{BRANCH_PREFIX}{job_id}"


def _next_actions(loop: HealLoop, steps: list[StepReport]) -> tuple[str, ...]:
    if loop.status == "fixed":
        return (
            f"Inspect the verified patch: git -C {loop.spec.job.repo} log -p "
            f"{loop.spec.job.base}..{loop.branch}",
            "Open a pull request from that branch once reviewed.",
        )
    actions: list[str] = []
    for step in steps:
        if step.classification is not None and step.status != "fixed":
            actions.extend(
                step.classification.next_actions or runbook(step.classification.failure_class)
            )
    if loop.status == "manual_handoff":
        actions.append("Hand the step to a person: the attempts above list what was tried.")
    if loop.retryable:
        actions.append(
            f"Requeue later or continue with: patchheal heal JOB.toml --resume (job {loop.job_id})"
        )
    return tuple(dict.fromkeys(actions))


def build_report(loop: HealLoop, store: AttemptStore) -> JobReport:
    steps = [loop.step_reports[i] for i in sorted(loop.step_reports)]
    outcomes = Counter(a.outcome.value for s in steps for a in s.attempts)
    spec = loop.spec
    return JobReport(
        job_id=loop.job_id,
        repo=spec.job.repo,
        base=spec.job.base,
        base_commit=loop.base_commit,
        harness=loop.harness_name,
        harness_reason=loop.harness_reason,
        status=loop.status,
        retryable=loop.retryable,
        stop_reason=loop.stop_reason,
        started_at=loop.started,
        finished_at=time.time(),
        steps=tuple(steps),
        branch=loop.branch,
        pull_request=loop.pull_request,
        final_diff=loop.final_diff,
        next_actions=_next_actions(loop, steps),
        totals={"attempts": sum(outcomes.values()), **dict(sorted(outcomes.items()))},
        patchheal_version=__version__,
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
