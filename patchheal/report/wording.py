"""What each status, outcome and failure class means, in the report's words.

One place for the sentences so the Markdown and HTML reports say the same
thing, and the runbook a report ends with.
"""

from __future__ import annotations

from patchheal.models import FailureClass, Outcome
from patchheal.report.model import JobReport

STATUS_MEANING: dict[str, str] = {
    "fixed": "Every failing step was fixed, and the patch verified in the harness.",
    "not_fixed": "The attempt budget ran out without a verified fix.",
    "not_patchable": "The failure is not one a code patch can fix, so no patch was tried.",
    "manual_handoff": (
        "The job's budget (proposer calls, model tokens or wall time) is spent; "
        "a person takes over from here."
    ),
    "cancelled": "An operator cancelled the run.",
    "taken_over": "An operator took over; automation stopped and left the worktree to them.",
    "error": "patchheal stopped on an error that is not the step's own failure.",
}

STEP_STATUS_MEANING: dict[str, str] = {
    "fixed": "fixed and verified",
    "not_fixed": "not fixed",
    "not_patchable": "not patched",
    "skipped": "skipped",
    "pending": "not reached",
}

OUTCOME_MEANING: dict[Outcome, str] = {
    Outcome.FIXED: "the failing step passed and the regression steps did not get worse",
    Outcome.NO_EFFECT: "the patch applied and ran, and the step still failed",
    Outcome.REGRESSION: "the failing step passed but the regression steps got worse",
    Outcome.REJECTED_REPEAT: "the same patch was already tried for this fingerprint; not run",
    Outcome.REJECTED_POLICY: (
        "the policy gate refused it (protected path, test tampering or size); not run"
    ),
    Outcome.APPLY_FAILED: "the patch does not apply to the base",
    Outcome.TIMEOUT: "the step hit its wall-clock or idle timeout",
    Outcome.HARNESS_ERROR: "the harness failed for a reason that is not the step's own",
}

# Why a failure of each class is not patched: the "not patched because …" sentence.
NOT_PATCHED_BECAUSE: dict[FailureClass, str] = {
    FailureClass.ENV_MISMATCH: (
        "the step does not fail the same way in the harness as in CI, so the environment "
        "differs, not the code"
    ),
    FailureClass.DEPENDENCY_ISSUE: (
        "a third-party dependency is missing or its versions conflict; the dependency "
        "specification or the package index needs the fix, not the project's code"
    ),
    FailureClass.INFRA_ISSUE: (
        "the machine, the network or an outside service failed (memory, disk, DNS, TLS, "
        "upstream errors); a code change cannot fix that"
    ),
    FailureClass.DATA_ISSUE: (
        "an input or data set is missing or breaks its schema; the data needs the fix"
    ),
    FailureClass.FLAKY: (
        "the step sometimes passes on the unchanged base ref; a patch cannot be verified "
        "against a result that changes by itself"
    ),
    FailureClass.CODE_BUG: "the run stopped before any patch was tried",
    FailureClass.UNKNOWN: "the run stopped before any patch was tried",
}


def _status_actions(report: JobReport) -> list[str]:
    short = report.base_commit[:12] or report.base
    if report.status == "fixed" and report.branch:
        return [
            f"Review the verified patch: `git -C {report.repo} log -p {short}..{report.branch}`.",
            f"Open a pull request from `{report.branch}` once a person has reviewed it.",
        ]
    actions: list[str] = []
    if report.status in {"not_fixed", "manual_handoff"} and any(s.attempts for s in report.steps):
        actions.append(
            "Look at any attempt above as a worktree (its base plus its diff): "
            "`patchheal worktree open ATTEMPT`."
        )
    if report.status == "manual_handoff":
        actions.append(
            "Fix it by hand from the timeline above, or raise the job's `[budget]` and "
            "continue: `patchheal heal JOB.toml --resume`."
        )
    elif report.status in {"cancelled", "taken_over"}:
        actions.append("Continue from the last checkpoint: `patchheal heal JOB.toml --resume`.")
    elif report.status == "error":
        actions.append(
            "Read the stop reason above, fix the cause, then `patchheal heal JOB.toml --resume`."
        )
    if report.retryable and report.status != "fixed":
        actions.append(
            "This job is retryable: requeue it with backoff, or run "
            "`patchheal heal JOB.toml --resume`."
        )
    return actions


def runbook(report: JobReport) -> tuple[str, ...]:
    """Next actions: the loop's own when it gave some, else each unfixed step's class
    runbook followed by what the job's status calls for. `code spans` render as code."""
    if report.next_actions:
        # The loop already folded in the classes' runbooks; adding ours would
        # print the same advice twice in different words.
        candidates: list[str] = list(report.next_actions)
    else:
        candidates = [
            action
            for step in report.steps
            if step.status != "fixed" and step.classification is not None
            for action in step.classification.next_actions
        ]
        candidates += _status_actions(report)
    return tuple(dict.fromkeys(a.strip() for a in candidates if a.strip()))
