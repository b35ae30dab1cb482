"""Similar-failure memory: what fixed, and what failed, for failures that look like this one.

The fingerprints with a verified attempt (fixed, or ran and failed) are scanned
most recent first, at most `scan` of them, each compared with the failure by
`patchheal.failure.analysis.similarity`. Above `threshold`, a fingerprint's
latest fix becomes a hint and its failed attempts become approaches to avoid.
The search is bounded and never blocks the loop: when its time budget runs out
or the store cannot be read, what was found so far is returned with
`degraded` set and `degrade_reason` saying why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sqlalchemy import func
from sqlmodel import Session, col, select

from patchheal.memory.records import stored_failure
from patchheal.memory.tables import AttemptRow, FailureRow, OutcomeRow
from patchheal.models import Failure, Hint, Outcome

_FAILED = (Outcome.NO_EFFECT.value, Outcome.REGRESSION.value)
_FAILED_PER_FINGERPRINT = 2


@dataclass(frozen=True)
class SimilarLimits:
    """How much the search may return and spend (the job spec's `[memory]` table)."""

    fixes: int = 3
    failed: int = 3
    threshold: float = 0.6
    scan: int = 500
    time_budget_seconds: float = 2.0


@dataclass
class Similar:
    """The search's answer: fixes, failed approaches, and whether it is complete."""

    fixes: list[Hint] = field(default_factory=list)
    failed: list[Hint] = field(default_factory=list)
    scanned: int = 0
    degraded: bool = False
    degrade_reason: str = ""


def _hint(session: Session, row: AttemptRow, score: float) -> Hint:
    return Hint(
        fingerprint=row.fingerprint,
        similarity=round(score, 4),
        strategy=row.strategy,
        diff=row.diff,
        job_id=row.job_id,
        outcome=Outcome(row.outcome),
        reason=row.reason,
        real_ci=_real_ci(session, row) if row.outcome == Outcome.FIXED.value else "",
    )


def _real_ci(session: Session, fix: AttemptRow) -> str:
    """What real CI said of a verified fix (`patchheal outcome`), when it was not fixed."""
    said = session.execute(
        select(col(OutcomeRow.outcome))
        .where(
            col(OutcomeRow.fingerprint) == fix.fingerprint,
            col(OutcomeRow.normalized_diff_hash) == fix.normalized_diff_hash,
            col(OutcomeRow.ci_status) != "pending",
        )
        .order_by(col(OutcomeRow.id).desc())
        .limit(1)
    ).scalar_one_or_none()
    return "" if said in (None, Outcome.FIXED.value) else str(said)


def similar_failures(
    session: Session, failure: Failure, limits: SimilarLimits, *, exclude: str | None = None
) -> Similar:
    """Fixes and failed approaches of other fingerprints with similarity >= the threshold."""
    try:
        from patchheal.failure.analysis import similarity
    except ImportError:  # a trimmed install without the analysis module: no memory, no block
        return Similar(degraded=True, degrade_reason="failure similarity is not available")
    started = time.monotonic()
    found = Similar()
    excluded = {failure.fingerprint, exclude}
    recent = (
        select(col(AttemptRow.fingerprint), func.max(col(AttemptRow.id)))
        .where(col(AttemptRow.outcome).in_((Outcome.FIXED.value, *_FAILED)))
        .group_by(col(AttemptRow.fingerprint))
        .order_by(func.max(col(AttemptRow.id)).desc())
        .limit(limits.scan)
    )
    candidates = [fp for fp, _ in session.execute(recent).all() if fp not in excluded]
    for fingerprint in candidates:
        if time.monotonic() - started > limits.time_budget_seconds:
            found.degraded = True
            found.degrade_reason = (
                f"time budget of {limits.time_budget_seconds:g} s spent after "
                f"{found.scanned} of {len(candidates)} similar-failure candidates"
            )
            break
        found.scanned += 1
        seen = session.execute(
            select(FailureRow)
            .where(col(FailureRow.fingerprint) == fingerprint)
            .order_by(col(FailureRow.id).desc())
            .limit(1)
        ).scalar_one_or_none()
        if seen is None:
            continue
        score = float(similarity(failure, stored_failure(seen).failure))
        if score < limits.threshold:
            continue
        rows = session.execute(
            select(AttemptRow)
            .where(col(AttemptRow.fingerprint) == fingerprint)
            .where(col(AttemptRow.outcome).in_((Outcome.FIXED.value, *_FAILED)))
            .order_by(col(AttemptRow.id).desc())
        ).scalars()
        fixed = False
        failed = 0
        for row in rows:
            if row.outcome == Outcome.FIXED.value and not fixed:
                found.fixes.append(_hint(session, row, score))
                fixed = True
            elif row.outcome in _FAILED and failed < _FAILED_PER_FINGERPRINT:
                found.failed.append(_hint(session, row, score))
                failed += 1
    found.fixes = sorted(found.fixes, key=lambda h: -h.similarity)[: limits.fixes]
    found.failed = sorted(found.failed, key=lambda h: -h.similarity)[: limits.failed]
    return found


def same_failure(session: Session, fingerprint: str, limits: SimilarLimits) -> Similar:
    """What memory holds for this very fingerprint: its verified fixes (one per patch, newest
    first) and its failed attempts, as hints of similarity 1."""
    found = Similar()
    rows = session.execute(
        select(AttemptRow)
        .where(col(AttemptRow.fingerprint) == fingerprint)
        .where(col(AttemptRow.outcome).in_((Outcome.FIXED.value, *_FAILED)))
        .order_by(col(AttemptRow.id).desc())
    ).scalars()
    patches: set[str] = set()
    for row in rows:
        key = row.normalized_diff_hash or row.diff_hash or str(row.id)
        if key in patches:
            continue
        patches.add(key)
        wanted = found.fixes if row.outcome == Outcome.FIXED.value else found.failed
        if len(wanted) < (limits.fixes if wanted is found.fixes else limits.failed):
            wanted.append(_hint(session, row, 1.0))
    return found


def similar_fixes(
    session: Session, failure: Failure, *, limit: int, threshold: float, exclude: str | None
) -> list[Hint]:
    """The best `limit` fixes of other fingerprints with similarity >= `threshold`."""
    limits = SimilarLimits(fixes=limit, failed=0, threshold=threshold, time_budget_seconds=60.0)
    return similar_failures(session, failure, limits, exclude=exclude).fixes
