"""What each status, outcome and failure class means, in the report's words.

One place for the sentences so the Markdown and HTML reports say the same
thing, and the runbook a report ends with.
"""

from __future__ import annotations

import re
import shlex

from patchheal.models import AttemptRecord, FailureClass, Outcome
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

# The headline of a report: (status, a pattern of the loop's own stop reason) → what
# happened, in words. First match wins; every stop reason the loop writes has a row
# (tests/test_report_wording.py walks them all), the last row of a status is its fallback.
HEADLINES: tuple[tuple[str, str, str], ...] = (
    ("fixed", "", "Every failing step was fixed, and the patch verified in the harness."),
    (
        "not_fixed",
        r"attempt budget spent",
        "The attempt budget ran out: every candidate that was verified failed, "
        "none fixed the step.",
    ),
    (
        "not_fixed",
        r"no progress in",
        "The proposers kept offering patches that were already tried (no progress), and "
        "hard resets did not help.",
    ),
    ("not_fixed", "", "The run ended without a verified fix."),
    (
        "manual_handoff",
        r"run out of candidates",
        "Every proposer ran out of new candidates before a fix verified; a person takes over "
        "from here. No budget was exhausted.",
    ),
    (
        "manual_handoff",
        r"wall time",
        "The job's wall-time budget is spent before a fix verified; a person takes over from here.",
    ),
    (
        "manual_handoff",
        r"proposer budget of",
        "The job's budget of proposer calls is spent before a fix verified; a person takes over "
        "from here.",
    ),
    (
        "manual_handoff",
        r"token budget",
        "The job's model-token budget is spent before a fix verified; a person takes over "
        "from here.",
    ),
    (
        "manual_handoff",
        r"proposer unavailable",
        "The proposer could not be reached (its service was down or refused); the job can be "
        "retried later.",
    ),
    (
        "manual_handoff",
        r"proposer failed",
        "The proposer failed in a way a retry does not fix; a person takes over from here.",
    ),
    ("manual_handoff", "", "The run handed the job to a person before a fix verified."),
    (
        "not_patchable",
        r"passes on its starting point",
        "The step passes on its starting point in the harness: there is nothing to heal.",
    ),
    (
        "not_patchable",
        "",
        "The failure is not one a code patch can fix, so no patch was tried.",
    ),
    (
        "cancelled",
        r"interrupted",
        "The run was interrupted (Ctrl-C or SIGTERM) before it finished; its state is saved.",
    ),
    ("cancelled", "", "An operator cancelled the run; its state is saved."),
    (
        "taken_over",
        "",
        "An operator took over; automation stopped and left the worktree to them.",
    ),
    ("error", "", "patchheal stopped on an error that is not the step's own failure."),
)


def headline(report: JobReport) -> str:
    """The report's first sentence: what happened, for this status and stop reason."""
    for status, pattern, sentence in HEADLINES:
        if status == report.status and re.search(pattern, report.stop_reason):
            return sentence
    return STATUS_MEANING[report.status]


def requeue(report: JobReport) -> str:
    """The Requeue row: what a scheduler should do with this job, in words that fit its status."""
    if report.status == "fixed":
        return "no need: the job is fixed"
    if report.retryable:
        return "yes: an outer scheduler may requeue it with backoff"
    return "no: a rerun of the same job would stop the same way"


# The attempt classes are the loop's words; a reader gets these.
ATTEMPT_CLASS_MEANING: dict[str, str] = {
    "recovered": "fixed the step",
    "code_bug": "the patch ran and did not fix it",
    "transient_runtime": "the run broke for a passing reason (timeout, harness); may be retried",
    "stuck_no_progress": "a repeat of a patch already tried; not run",
    "deterministic_policy": "refused by the policy gate; not run",
    "deterministic_contract": "not a patch that applies; not run",
}

# Policy-class outcomes decided after the candidate ran: its passing run was not believed.
_RAN_THEN_REFUSED = {
    Outcome.REJECTED_ORACLE: "ran; refused by the impossible-twin oracle",
    Outcome.REJECTED_TRIPWIRE: "ran; refused by the tripwire",
}


def attempt_meaning(attempt: AttemptRecord) -> str:
    """What an attempt's class means for a reader; never "not run" for one that ran."""
    ran = _RAN_THEN_REFUSED.get(attempt.outcome)
    return ran or ATTEMPT_CLASS_MEANING.get(attempt.attempt_class, attempt.attempt_class)


def check_locally(report: JobReport) -> tuple[str, ...]:
    """The exact commands that check the verified branch: in the job's harness (what the
    verdict saw), then on one's own machine in a subshell that makes a temporary worktree
    (detached at the branch, so the branch stays free for the next heal to publish to) and
    a temporary virtual environment, runs the job's setup and steps there, and removes both
    on its way out, also when a command fails (the EXIT trap)."""
    if report.status != "fixed" or not report.branch:
        return ()
    repo = shlex.quote(report.repo)
    commands = [_harness_run(report, report.branch, step.command) for step in report.steps]
    cleanup = (
        f'cd /; git -C {repo} worktree remove --force "$tree" 2>/dev/null; rm -rf "$tree" "$venv"'
    )
    body = [
        "set -e",
        "tree=$(mktemp -d -t patchheal-check-XXXXXX)",
        "venv=$(mktemp -d -t patchheal-venv-XXXXXX)",
        f"trap {shlex.quote(cleanup)} EXIT",
        f'git -C {repo} worktree add --quiet --detach "$tree" {shlex.quote(report.branch)}',
        'cd "$tree"',
        # The system's packages stay visible (a test runner the job's setup does not
        # install); whatever the setup installs goes into this venv alone.
        'python3 -m venv --system-site-packages "$venv"',
        '. "$venv/bin/activate"',
        *report.setup,
        *(step.command for step in report.steps),
    ]
    commands += ["(", *(f"  {line}" for line in body), ")"]
    return tuple(commands)


def reproduce_in_harness(report: JobReport) -> tuple[str, ...]:
    """`patchheal harness run` of each step that failed, on the base commit the job started at,
    with the job's setup and variables, so it fails as the job's reproduction did."""
    ref = report.base_commit or report.base
    return tuple(
        _harness_run(report, ref, step.command) for step in report.steps if step.failure is not None
    )


def _harness_run(report: JobReport, ref: str, command: str) -> str:
    # The definition's name: `harness run` takes it (and the `docker:` form a report shows).
    name = report.harness.partition(":")[2] or report.harness
    # The job's Python and Node: without them the command runs on the harness's default.
    options = [f"--python {shlex.quote(report.python)}"] if report.python else []
    options += [f"--node {shlex.quote(report.node)}"] if report.node else []
    options += [f"--setup {shlex.quote(s)}" for s in report.setup]
    options += [f"--env {shlex.quote(e)}" for e in report.env]
    return " ".join(
        [
            f"patchheal harness run {shlex.quote(name)} --repo {shlex.quote(report.repo)}",
            f"--ref {shlex.quote(ref)}",
            *options,
            f"-- sh -c {shlex.quote(command)}",
        ]
    )


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
    Outcome.REJECTED_ORACLE: (
        "the tests passed, but so did an impossible version of them: the patch makes "
        "tests pass whatever they check"
    ),
    Outcome.REJECTED_TRIPWIRE: (
        "the tests passed, but the patch's own code tampered with the test run while it ran"
    ),
}

# Why a failure of each class is not patched: the "not patched because …" sentence.
NOT_PATCHED_BECAUSE: dict[FailureClass, str] = {
    FailureClass.ENV_MISMATCH: (
        "the environment the step runs in is at fault, not the code (see the evidence: a "
        "missing install step, tool or credential, or a failure that differs from CI)"
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
            "Look at any attempt of the timeline as a worktree (its base plus its diff): "
            "`patchheal worktree open ATTEMPT`."
        )
    if report.status == "manual_handoff":
        actions.append(
            "Fix it by hand from the timeline of attempts, or raise the job's `[budget]` and "
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
    tests = [t for step in report.steps if step.failure for t in step.failure.failing_tests]
    if tests:
        # The class runbooks say TEST_ID; this job knows which test it is.
        candidates = [a.replace("TEST_ID", shlex.quote(tests[0])) for a in candidates]
    if report.status == "fixed":
        # "heal it" after a heal is advice for a job that is not done.
        candidates = [a for a in candidates if "patchheal heal" not in a]
    return tuple(dict.fromkeys(a.strip() for a in candidates if a.strip()))
