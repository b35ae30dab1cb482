"""The approach of the next attempt, and the buckets that stop being verified.

An attempt's approach follows from the failure class and from how the earlier
attempts on the same failure ended (the table below), not from their count
alone: a patch that broke other tests asks for smaller steps, a patch with no
effect asks for more context first and then for an alternative, a patch that
did not apply or was refused asks for something simpler.

A bucket is an equivalence class of attempts: the same strategy tag, the same
touched files, the same fingerprint. Once a bucket has failed `bucket_limit`
times, its next candidate is not verified (a harness run it would surely
waste) and the approach escalates to `try_alternative`.
"""

from __future__ import annotations

from collections.abc import Sequence

from patchheal.errors import NotADiff
from patchheal.evidence.build import bucket_of
from patchheal.models import AttemptRecord, Candidate, FailureClass, Outcome
from patchheal.workspace import diffs

SIMPLIFY = "simplify_approach"
SMALLER_STEPS = "break_into_smaller_steps"
MORE_CONTEXT = "gather_more_context"
ALTERNATIVE = "try_alternative"
APPROACHES = (SIMPLIFY, SMALLER_STEPS, MORE_CONTEXT, ALTERNATIVE)

# Outcomes that ran in the harness and failed: what fills a bucket.
_BUCKET_FAILURES = frozenset({Outcome.NO_EFFECT, Outcome.REGRESSION, Outcome.TIMEOUT})
# How the last failed attempt ended → the approach that answers it.
_AFTER: dict[Outcome, str] = {
    Outcome.REGRESSION: SMALLER_STEPS,
    Outcome.APPLY_FAILED: SIMPLIFY,
    Outcome.REJECTED_POLICY: SIMPLIFY,
    Outcome.TIMEOUT: SIMPLIFY,
    Outcome.HARNESS_ERROR: SIMPLIFY,
    Outcome.REJECTED_REPEAT: ALTERNATIVE,
    Outcome.REJECTED_ORACLE: ALTERNATIVE,
    Outcome.REJECTED_TRIPWIRE: ALTERNATIVE,
}


def choose_approach(
    failure_class: FailureClass, failed: Sequence[AttemptRecord], *, bucket_exhausted: bool
) -> str:
    """The approach for the next attempt on a failure whose earlier attempts are `failed`."""
    if bucket_exhausted:
        return ALTERNATIVE
    if not failed:
        # A known code bug starts with the smallest change; an unclassified failure first
        # needs to be understood.
        return SIMPLIFY if failure_class is FailureClass.CODE_BUG else MORE_CONTEXT
    last = failed[-1].outcome
    if last is Outcome.NO_EFFECT:
        no_effect = sum(1 for a in failed if a.outcome is Outcome.NO_EFFECT)
        return MORE_CONTEXT if no_effect == 1 else ALTERNATIVE
    return _AFTER.get(last, ALTERNATIVE)


def touched(candidate: Candidate) -> tuple[str, ...] | None:
    """The files a candidate touches; None when it is not a diff (the gates will say so)."""
    try:
        return diffs.touched_files(candidate.diff) if candidate.diff.strip() else None
    except NotADiff:
        return None


def exhausted_bucket(
    candidate: Candidate, fingerprint: str, prior: Sequence[AttemptRecord], limit: int
) -> str | None:
    """Why `candidate` is not worth verifying (its bucket failed `limit` times), or None."""
    files = touched(candidate)
    if files is None:
        return None
    bucket = bucket_of(candidate.strategy, files)
    failures = sum(
        1
        for a in prior
        if a.fingerprint == fingerprint
        and a.outcome in _BUCKET_FAILURES
        and bucket_of(a.strategy, a.touched_files) == bucket
    )
    if failures < limit:
        return None
    return (
        f"exhausted bucket: {bucket} failed {failures} time(s) on this fingerprint "
        f"(bucket_limit {limit}); not verified, the approach escalates to {ALTERNATIVE}"
    )
