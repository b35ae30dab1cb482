"""The attempt store: jobs, failures, attempts and the claims that stop repeats.

The repeat check is the hot path (it runs for every candidate, against every
attempt ever recorded), so its read goes straight to the driver with one
prepared statement on the claims' composite UNIQUE index; everything else uses
SQLModel sessions. Every text written here goes through the secret scrubber.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from patchheal.errors import BadInput
from patchheal.memory.controls import ControlMixin
from patchheal.memory.db import resolve_db_url
from patchheal.memory.leases import LeaseMixin
from patchheal.memory.locks import LockMixin
from patchheal.memory.outcomes import OutcomeMixin
from patchheal.memory.records import (
    StoredAttempt,
    StoredFailure,
    attempt_row,
    failure_row,
    stored_attempt,
    stored_failure,
)
from patchheal.memory.tables import AttemptRow, ClaimRow, ControlRow, FailureRow, JobRow, LockRow
from patchheal.models import AttemptRecord, Classification, Failure, Hint, Outcome
from patchheal.runs import DEFAULT_DB, default_db
from patchheal.scrub.active import scrub

if TYPE_CHECKING:
    from patchheal.memory.hints import Similar, SimilarLimits

__all__ = [
    "DEFAULT_DB",
    "AttemptStore",
    "ControlRow",
    "JobRow",
    "LockRow",
    "StoredAttempt",
    "StoredFailure",
    "default_db",
    "resolve_db_url",
]

log = logging.getLogger(__name__)

# Outcomes whose verdict on the patch is final: their claim is never released.
JUDGED = frozenset(
    {
        Outcome.FIXED,
        Outcome.NO_EFFECT,
        Outcome.REGRESSION,
        Outcome.APPLY_FAILED,
        Outcome.REJECTED_ORACLE,
        Outcome.REJECTED_TRIPWIRE,
    }
)
_CLAIM_SQL = "SELECT attempt_id FROM claims WHERE fingerprint = ? AND normalized_diff_hash = ?"


class AttemptStore(LockMixin, LeaseMixin, ControlMixin, OutcomeMixin):
    """What the loop remembers across steps, runs and jobs."""

    def __init__(self, url: str | Path, *, create: bool = True) -> None:
        super().__init__(url, create=create)
        self._fast: Any = None
        if self.is_sqlite:
            # One connection kept for the repeat lookup: sqlite3 caches the
            # prepared statement per connection, so a lookup is one index probe.
            self._raw = self._engine.raw_connection()
            self._fast = self._raw.driver_connection
        self._claim_stmt = select(col(ClaimRow.attempt_id)).where(
            col(ClaimRow.fingerprint) == bindparam("fp"),
            col(ClaimRow.normalized_diff_hash) == bindparam("ndh"),
        )

    def close(self) -> None:
        if self._fast is not None:
            self._raw.close()
            self._fast = None
        super().close()

    # -- jobs -----------------------------------------------------------------

    def ensure_job(self, job_id: str, *, repo: str, base: str, spec_toml: str) -> None:
        now = self._now()
        with self._write() as session:
            row = session.get(JobRow, job_id)
            if row is None:
                row = JobRow(id=job_id, created_at=now)
            row.repo, row.base, row.spec_toml = scrub(repo), scrub(base), scrub(spec_toml)
            row.updated_at = now
            session.add(row)
            session.commit()

    def set_job_status(self, job_id: str, status: str, *, detail: str = "") -> None:
        with self._write() as session:
            row = session.get(JobRow, job_id)
            if row is None:
                raise BadInput(f"unknown job {job_id!r}")
            row.status, row.detail, row.updated_at = status, scrub(detail), self._now()
            session.add(row)
            session.commit()

    def job(self, job_id: str) -> JobRow | None:
        with self._read() as session:
            return session.get(JobRow, job_id)

    def jobs(self) -> list[JobRow]:
        with self._read() as session:
            return list(session.execute(select(JobRow).order_by(col(JobRow.id))).scalars())

    # -- failures -------------------------------------------------------------

    def record_failure(
        self,
        failure: Failure,
        *,
        job_id: str,
        step_index: int,
        classification: Classification | None = None,
    ) -> None:
        row = failure_row(
            failure,
            job_id=job_id,
            step_index=step_index,
            classification=classification,
            recorded_at=self._now(),
        )
        self._insert(row, job_id)

    def failures(self, job_id: str) -> list[StoredFailure]:
        query = (
            select(FailureRow).where(col(FailureRow.job_id) == job_id).order_by(col(FailureRow.id))
        )
        with self._read() as session:
            return [stored_failure(r) for r in session.execute(query).scalars()]

    # -- claims: never the same patch twice -----------------------------------

    def _claim_holder(
        self, fingerprint: str, normalized_diff_hash: str
    ) -> tuple[int | None] | None:
        if self._fast is not None:
            row = self._fast.execute(_CLAIM_SQL, (fingerprint, normalized_diff_hash)).fetchone()
            return None if row is None else (row[0],)
        with self._engine.connect() as conn:
            found = conn.execute(
                self._claim_stmt, {"fp": fingerprint, "ndh": normalized_diff_hash}
            ).first()
        return None if found is None else (found[0],)

    def claim(self, fingerprint: str, normalized_diff_hash: str, *, job_id: str) -> bool:
        """True: newly claimed, go verify. False: this patch was tried for this fingerprint."""
        if not fingerprint or not normalized_diff_hash:
            raise BadInput("a claim needs a fingerprint and a normalized diff hash")
        if self._claim_holder(fingerprint, normalized_diff_hash) is not None:
            return False
        row = ClaimRow(
            fingerprint=fingerprint,
            normalized_diff_hash=normalized_diff_hash,
            job_id=job_id,
            claimed_at=self._now(),
        )
        try:
            with self._write() as session:
                session.add(row)
                session.commit()
        except IntegrityError:
            # Another process claimed it between our check and our insert.
            if self._claim_holder(fingerprint, normalized_diff_hash) is not None:
                return False
            raise BadInput(f"cannot claim a patch for unknown job {job_id!r}") from None
        return True

    def is_claimed(self, fingerprint: str, normalized_diff_hash: str) -> bool:
        """Whether any run holds this claim, judged or still being verified."""
        return self._claim_holder(fingerprint, normalized_diff_hash) is not None

    def prior_claim(self, fingerprint: str, normalized_diff_hash: str) -> StoredAttempt | None:
        holder = self._claim_holder(fingerprint, normalized_diff_hash)
        if holder is None or holder[0] is None:
            return None
        return self.attempt(holder[0])

    def release(self, fingerprint: str, normalized_diff_hash: str) -> None:
        """Give a claim back after a transient outcome; a judged patch stays claimed."""
        judged = [o.value for o in JUDGED]
        with self._write() as session:
            claim = session.execute(
                select(ClaimRow).where(
                    col(ClaimRow.fingerprint) == fingerprint,
                    col(ClaimRow.normalized_diff_hash) == normalized_diff_hash,
                )
            ).scalar_one_or_none()
            if claim is None:
                return
            if claim.attempt_id is not None:
                holder = session.get(AttemptRow, claim.attempt_id)
                if holder is not None and holder.outcome in judged:
                    log.warning("not releasing %s: attempt %s judged it", fingerprint, holder.id)
                    return
            session.delete(claim)
            session.commit()

    # -- attempts -------------------------------------------------------------

    def record_attempt(self, record: AttemptRecord) -> int:
        row = attempt_row(record, recorded_at=self._now())
        links = record.normalized_diff_hash and record.outcome not in (
            Outcome.REJECTED_REPEAT,
            Outcome.REJECTED_POLICY,
        )
        try:
            with self._write() as session:
                session.add(row)
                session.flush()
                if links:
                    # Only this job's own open claim: another job may be
                    # verifying the same patch right now under its claim.
                    session.execute(
                        update(ClaimRow)
                        .where(
                            col(ClaimRow.fingerprint) == record.fingerprint,
                            col(ClaimRow.normalized_diff_hash) == record.normalized_diff_hash,
                            col(ClaimRow.job_id) == record.job_id,
                            col(ClaimRow.attempt_id).is_(None),
                        )
                        .values(attempt_id=row.id)
                    )
                session.commit()
        except IntegrityError:
            raise BadInput(f"cannot record an attempt for unknown job {record.job_id!r}") from None
        assert row.id is not None
        return row.id

    def attempt(self, attempt_id: int) -> StoredAttempt:
        with self._read() as session:
            row = session.get(AttemptRow, attempt_id)
        if row is None:
            raise BadInput(f"no attempt with id {attempt_id} in {self.display_url}")
        return stored_attempt(row)

    def attempts(
        self,
        *,
        job_id: str | None = None,
        fingerprint: str | None = None,
        step_index: int | None = None,
    ) -> list[StoredAttempt]:
        query = select(AttemptRow).order_by(col(AttemptRow.id))
        if job_id is not None:
            query = query.where(col(AttemptRow.job_id) == job_id)
        if fingerprint is not None:
            query = query.where(col(AttemptRow.fingerprint) == fingerprint)
        if step_index is not None:
            query = query.where(col(AttemptRow.step_index) == step_index)
        with self._read() as session:
            return [stored_attempt(r) for r in session.execute(query).scalars()]

    def verified_fixes(self, fingerprint: str, *, limit: int = 5) -> list[StoredAttempt]:
        """Fixes verified for this fingerprint, newest first, one per normalized patch."""
        query = (
            select(AttemptRow)
            .where(
                col(AttemptRow.fingerprint) == fingerprint,
                col(AttemptRow.outcome) == Outcome.FIXED.value,
            )
            .order_by(col(AttemptRow.id).desc())
        )
        found: dict[str, StoredAttempt] = {}
        with self._read() as session:
            for row in session.execute(query).scalars():
                key = row.normalized_diff_hash or row.diff_hash or str(row.id)
                found.setdefault(key, stored_attempt(row))
                if len(found) >= limit:
                    break
        return list(found.values())

    def similar_fixes(
        self,
        failure: Failure,
        *,
        limit: int = 3,
        threshold: float = 0.6,
        exclude_fingerprint: str | None = None,
    ) -> list[Hint]:
        """Fixes verified for other fingerprints whose failure looks like this one."""
        from patchheal.memory.hints import similar_fixes

        with self._read() as session:
            return similar_fixes(
                session, failure, limit=limit, threshold=threshold, exclude=exclude_fingerprint
            )

    def similar(
        self,
        failure: Failure,
        limits: SimilarLimits | None = None,
        *,
        exclude_fingerprint: str | None = None,
    ) -> Similar:
        """Fixes and failed approaches for similar failures; never raises (see hints.py)."""
        from patchheal.memory.hints import Similar, SimilarLimits, similar_failures

        limits = limits or SimilarLimits()
        try:
            with self._read() as session:
                return similar_failures(session, failure, limits, exclude=exclude_fingerprint)
        except Exception as exc:  # advisory memory: an unreadable store degrades, never blocks
            return Similar(degraded=True, degrade_reason=f"memory unavailable: {exc}"[:300])

    def same_failure(self, fingerprint: str, limits: SimilarLimits | None = None) -> Similar:
        """Fixes and failed attempts recorded for this very fingerprint (`similar` leaves it
        out: it looks for other failures)."""
        from patchheal.memory.hints import SimilarLimits, same_failure

        with self._read() as session:
            return same_failure(session, fingerprint, limits or SimilarLimits())

    # -- consistency ----------------------------------------------------------

    def integrity_check(self) -> list[str]:
        """Problems found, [] when the store is consistent."""
        from patchheal.memory.integrity import check

        with self._engine.connect() as conn:
            return check(conn, sqlite=self.is_sqlite)

    def _insert(self, row: Any, job_id: str) -> None:
        try:
            with self._write() as session:
                session.add(row)
                session.commit()
        except IntegrityError:
            raise BadInput(f"unknown job {job_id!r}: call ensure_job first") from None
