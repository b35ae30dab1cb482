"""SQLModel tables of the attempt store.

"Never the same patch twice" lives in the schema: `claims` holds one row per
(fingerprint, normalized diff hash), enforced by a UNIQUE constraint whose
index is also the repeat check's lookup path. Lists (touched files, frames)
are stored as JSON text so that every back end SQLAlchemy supports works.
"""

from __future__ import annotations

from sqlalchemy import Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

# Long free text goes into TEXT columns; SQLModel's default VARCHAR is fine on
# SQLite but truncates or fails elsewhere.


def _text(default: str = "") -> str:
    return Field(default=default, sa_type=Text)  # type: ignore[no-any-return]


class JobRow(SQLModel, table=True):
    """One job: its repository, base ref, spec, and latest status."""

    __tablename__ = "jobs"

    id: str = Field(primary_key=True)
    repo: str = ""
    base: str = ""
    spec_toml: str = _text()
    status: str = "pending"
    detail: str = _text()
    created_at: float = 0.0
    updated_at: float = 0.0


class FailureRow(SQLModel, table=True):
    """A step's failure as seen in one run, with its classification."""

    __tablename__ = "failures"
    __table_args__ = (Index("ix_failures_job_step", "job_id", "step_index"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(foreign_key="jobs.id")
    step_index: int
    fingerprint: str = Field(index=True)
    error_type: str = ""
    message: str = _text()
    summary: str = _text()
    frames_json: str = _text("[]")
    failing_tests_json: str = _text("[]")
    source: str = "generic"
    failure_class: str = ""
    retryable: bool | None = None
    classification_json: str = _text()
    recorded_at: float = 0.0


class AttemptRow(SQLModel, table=True):
    """One candidate taken through the gates and the harness."""

    __tablename__ = "attempts"
    __table_args__ = (
        Index("ix_attempts_fp_outcome", "fingerprint", "outcome"),
        Index("ix_attempts_job_step", "job_id", "step_index", "attempt_number"),
        Index("ix_attempts_outcome_fp", "outcome", "fingerprint"),
    )

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(foreign_key="jobs.id")
    step_index: int
    attempt_number: int
    fingerprint: str
    outcome: str
    reason: str = _text()
    diff: str = _text()
    diff_hash: str = ""
    normalized_diff_hash: str = ""
    touched_files_json: str = _text("[]")
    strategy: str = "unspecified"
    rationale: str = _text()
    proposer: str = ""
    label: str = ""
    log_excerpt: str = _text()
    started_at: float = 0.0
    duration_seconds: float = 0.0
    attempt_class: str = ""
    approach: str = Field(default="", description="the approach the loop asked for")
    memory_degraded: str = _text()
    recorded_at: float = 0.0


# Text columns (default '') added to a table after stores existed: `create_all` does not
# add them to an existing table, so the store adds them on open (db.add_missing_columns).
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {"attempts": ("approach", "memory_degraded")}


class ClaimRow(SQLModel, table=True):
    """The right to verify one normalized patch for one fingerprint, held once ever."""

    __tablename__ = "claims"
    __table_args__ = (
        UniqueConstraint("fingerprint", "normalized_diff_hash", name="uq_claims_fp_ndh"),
    )

    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str
    normalized_diff_hash: str
    job_id: str = Field(foreign_key="jobs.id", index=True)
    attempt_id: int | None = Field(default=None, foreign_key="attempts.id")
    claimed_at: float = 0.0


class ControlRow(SQLModel, table=True):
    """An operator command for a running job, queued by `patchheal control`."""

    __tablename__ = "controls"
    __table_args__ = (Index("ix_controls_job_status", "job_id", "status", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: str
    command: str
    arg: int | None = None
    issued_by: str = ""
    issued_at: float = 0.0
    status: str = "pending"
    result: str = _text()
    finished_at: float | None = None


class LockRow(SQLModel, table=True):
    """One run per job at a time: who holds the job, and until when."""

    __tablename__ = "locks"

    job_id: str = Field(primary_key=True)
    owner: str
    pid: int
    host: str
    # The holder's process start time (Linux /proc), so that a recycled pid
    # is not mistaken for the holder still running.
    pid_started: int | None = None
    created_at: float
    expires_at: float


class LockAuditRow(SQLModel, table=True):
    """A lock removed by someone other than its holder, and why."""

    __tablename__ = "lock_audit"

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(index=True)
    action: str
    reason: str = _text()
    owner: str
    pid: int
    host: str
    created_at: float
    expires_at: float
    by_owner: str = ""
    by_pid: int
    by_host: str
    at: float


class LeaseRow(SQLModel, table=True):
    """The right to ask a proposer about one fingerprint: one run at a time, until it lapses.

    Not a claim: a claim is held once ever; a lease is held while its run heals the
    step (its heartbeat pushes `expires_at`) and is released when the step ends."""

    __tablename__ = "proposal_leases"

    fingerprint: str = Field(primary_key=True)
    job_id: str
    owner: str
    pid: int
    host: str
    pid_started: int | None = None
    acquired_at: float
    expires_at: float


class OutcomeRow(SQLModel, table=True):
    """What happened to a verified patch after it left: its pull request and what real CI
    said. A new table, so an existing store gets it from `create_all` with no migration."""

    __tablename__ = "outcomes"
    __table_args__ = (Index("ix_outcomes_fp_ndh", "fingerprint", "normalized_diff_hash"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(index=True)
    step_index: int
    fingerprint: str
    normalized_diff_hash: str
    pull_request: str = ""
    ci_status: str = Field(default="pending", description="pending (PR opened), pass or fail")
    outcome: str = Field(default="", description="fixed, no_effect or regression; '' pending")
    new_fingerprint: str = ""
    detail: str = _text()
    recorded_at: float = 0.0


ALL_TABLES = [
    JobRow.__table__,  # type: ignore[attr-defined]
    FailureRow.__table__,  # type: ignore[attr-defined]
    AttemptRow.__table__,  # type: ignore[attr-defined]
    ClaimRow.__table__,  # type: ignore[attr-defined]
    ControlRow.__table__,  # type: ignore[attr-defined]
    LockRow.__table__,  # type: ignore[attr-defined]
    LockAuditRow.__table__,  # type: ignore[attr-defined]
    OutcomeRow.__table__,  # type: ignore[attr-defined]
    LeaseRow.__table__,  # type: ignore[attr-defined]
]
