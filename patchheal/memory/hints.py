"""Memory hints: fixes verified for other fingerprints whose failure looks like this one.

Similarity comes from `patchheal.failure.analysis.similarity`; where that module is not
available, there are no hints (memory never blocks the loop).
"""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import Session, col, select

from patchheal.memory.records import stored_failure
from patchheal.memory.tables import AttemptRow, FailureRow, OutcomeRow
from patchheal.models import Failure, Hint, Outcome

# Compare against at most this many recently fixed fingerprints.
_SCAN = 500


def similar_fixes(
    session: Session, failure: Failure, *, limit: int, threshold: float, exclude: str | None
) -> list[Hint]:
    """The best `limit` fixes of other fingerprints with similarity >= `threshold`."""
    try:
        from patchheal.failure.analysis import similarity
    except ImportError:
        return []
    excluded = {failure.fingerprint, exclude}
    fixed = (
        select(col(AttemptRow.fingerprint), func.max(col(AttemptRow.id)))
        .where(col(AttemptRow.outcome) == Outcome.FIXED.value)
        .group_by(col(AttemptRow.fingerprint))
        .order_by(func.max(col(AttemptRow.id)).desc())
        .limit(_SCAN)
    )
    scored: list[Hint] = []
    for fingerprint, attempt_id in session.execute(fixed).all():
        if fingerprint in excluded:
            continue
        seen = session.execute(
            select(FailureRow)
            .where(col(FailureRow.fingerprint) == fingerprint)
            .order_by(col(FailureRow.id).desc())
            .limit(1)
        ).scalar_one_or_none()
        if seen is None:
            continue
        score = float(similarity(failure, stored_failure(seen).failure))
        if score < threshold:
            continue
        fix = session.get(AttemptRow, attempt_id)
        assert fix is not None
        real_ci = session.execute(
            select(col(OutcomeRow.outcome))
            .where(
                col(OutcomeRow.fingerprint) == fingerprint,
                col(OutcomeRow.normalized_diff_hash) == fix.normalized_diff_hash,
                col(OutcomeRow.ci_status) != "pending",
            )
            .order_by(col(OutcomeRow.id).desc())
            .limit(1)
        ).scalar_one_or_none()
        scored.append(
            Hint(
                fingerprint=fingerprint,
                similarity=round(score, 4),
                strategy=fix.strategy,
                diff=fix.diff,
                job_id=fix.job_id,
                real_ci="" if real_ci in (None, Outcome.FIXED.value) else str(real_ci),
            )
        )
    scored.sort(key=lambda h: -h.similarity)
    return scored[:limit]
