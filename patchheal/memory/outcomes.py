"""Outcome tracking: what happened to a verified patch once it left patchheal.

The pull request's URL is recorded when `pr_command` prints one; `patchheal
outcome JOB --status pass|fail` records what real CI said about the job's
verified patches. Memory reads it back: a fix that failed in real CI is never
reused first, and shows as failed in the hints a proposer is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlmodel import col

from patchheal.memory.db import StoreBase
from patchheal.memory.tables import AttemptRow, OutcomeRow
from patchheal.models import Outcome

CI_STATUSES = ("pass", "fail")


@dataclass(frozen=True)
class VerifiedPatch:
    """One step's verified patch of a job's newest fixed run."""

    step_index: int
    fingerprint: str
    normalized_diff_hash: str


class OutcomeMixin(StoreBase):
    """The outcome half of the attempt store."""

    def verified_patches(self, job_id: str) -> list[VerifiedPatch]:
        """The newest fix of each step of the job, in step order."""
        query = (
            select(AttemptRow)
            .where(col(AttemptRow.job_id) == job_id, col(AttemptRow.outcome) == Outcome.FIXED)
            .order_by(col(AttemptRow.id).desc())
        )
        newest: dict[int, VerifiedPatch] = {}
        with self._read() as session:
            for row in session.execute(query).scalars():
                newest.setdefault(
                    row.step_index,
                    VerifiedPatch(row.step_index, row.fingerprint, row.normalized_diff_hash),
                )
        return [newest[i] for i in sorted(newest)]

    def record_outcome(
        self,
        job_id: str,
        patch: VerifiedPatch,
        *,
        ci_status: str,
        outcome: str = "",
        pull_request: str = "",
        new_fingerprint: str = "",
        detail: str = "",
    ) -> int:
        from patchheal.scrub.scrubber import scrub

        row = OutcomeRow(
            job_id=job_id,
            step_index=patch.step_index,
            fingerprint=patch.fingerprint,
            normalized_diff_hash=patch.normalized_diff_hash,
            pull_request=scrub(pull_request or self._pull_request(job_id)),
            ci_status=ci_status,
            outcome=outcome,
            new_fingerprint=new_fingerprint,
            detail=scrub(detail),
            recorded_at=self._now(),
        )
        with self._write() as session:
            session.add(row)
            session.commit()
        assert row.id is not None
        return row.id

    def outcomes(self, job_id: str | None = None) -> list[OutcomeRow]:
        query = select(OutcomeRow).order_by(col(OutcomeRow.id))
        if job_id is not None:
            query = query.where(col(OutcomeRow.job_id) == job_id)
        with self._read() as session:
            return list(session.execute(query).scalars())

    def failed_in_ci(self, fingerprint: str) -> dict[str, str]:
        """normalized diff hash → real-CI outcome, for fixes of this fingerprint whose
        newest real-CI verdict was not `fixed`."""
        query = (
            select(OutcomeRow)
            .where(
                col(OutcomeRow.fingerprint) == fingerprint, col(OutcomeRow.ci_status) != "pending"
            )
            .order_by(col(OutcomeRow.id))
        )
        newest: dict[str, str] = {}
        with self._read() as session:
            for row in session.execute(query).scalars():
                newest[row.normalized_diff_hash] = row.outcome
        return {h: o for h, o in newest.items() if o != Outcome.FIXED.value}

    def _pull_request(self, job_id: str) -> str:
        """The job's newest recorded pull-request URL, '' when none was recorded."""
        query = (
            select(col(OutcomeRow.pull_request))
            .where(col(OutcomeRow.job_id) == job_id, col(OutcomeRow.pull_request) != "")
            .order_by(col(OutcomeRow.id).desc())
            .limit(1)
        )
        with self._read() as session:
            found = session.execute(query).scalar_one_or_none()
        return str(found or "")
