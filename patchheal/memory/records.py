"""Conversions between the shared models and the store's rows.

Every text a row receives passes through the secret scrubber here, so no
write path of the store can forget it.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from patchheal.memory.tables import AttemptRow, FailureRow
from patchheal.models import AttemptRecord, Classification, Failure, Frame
from patchheal.scrub.active import scrub


class StoredAttempt(AttemptRecord):
    """An attempt record as stored, with its row id."""

    id: int


class StoredFailure(BaseModel):
    """A failure as recorded for one step of one job."""

    model_config = ConfigDict(frozen=True)

    id: int
    job_id: str
    step_index: int
    failure: Failure
    classification: Classification | None
    recorded_at: float


def stored_attempt(row: AttemptRow) -> StoredAttempt:
    data = row.model_dump(exclude={"touched_files_json", "recorded_at"})
    data["touched_files"] = tuple(json.loads(row.touched_files_json))
    return StoredAttempt.model_validate(data)


def stored_failure(row: FailureRow) -> StoredFailure:
    failure = Failure(
        fingerprint=row.fingerprint,
        error_type=row.error_type,
        message=row.message,
        summary=row.summary,
        frames=tuple(Frame.model_validate(f) for f in json.loads(row.frames_json)),
        failing_tests=tuple(json.loads(row.failing_tests_json)),
        source=row.source,
    )
    classification = (
        Classification.model_validate_json(row.classification_json)
        if row.classification_json
        else None
    )
    assert row.id is not None
    return StoredFailure(
        id=row.id,
        job_id=row.job_id,
        step_index=row.step_index,
        failure=failure,
        classification=classification,
        recorded_at=row.recorded_at,
    )


def scrub_json(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: scrub_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_json(v) for v in value]
    return value


def attempt_row(record: AttemptRecord, *, recorded_at: float) -> AttemptRow:
    return AttemptRow(
        job_id=record.job_id,
        step_index=record.step_index,
        attempt_number=record.attempt_number,
        fingerprint=record.fingerprint,
        outcome=record.outcome.value,
        reason=scrub(record.reason),
        diff=scrub(record.diff),
        diff_hash=record.diff_hash,
        normalized_diff_hash=record.normalized_diff_hash,
        touched_files_json=json.dumps([scrub(f) for f in record.touched_files]),
        strategy=scrub(record.strategy),
        rationale=scrub(record.rationale),
        proposer=scrub(record.proposer),
        label=scrub(record.label),
        log_excerpt=scrub(record.log_excerpt),
        started_at=record.started_at,
        duration_seconds=record.duration_seconds,
        attempt_class=record.attempt_class,
        approach=scrub(record.approach),
        memory_degraded=scrub(record.memory_degraded),
        recorded_at=recorded_at,
    )


def failure_row(
    failure: Failure,
    *,
    job_id: str,
    step_index: int,
    classification: Classification | None,
    recorded_at: float,
) -> FailureRow:
    return FailureRow(
        job_id=job_id,
        step_index=step_index,
        fingerprint=failure.fingerprint,
        error_type=scrub(failure.error_type),
        message=scrub(failure.message),
        summary=scrub(failure.summary),
        frames_json=json.dumps(scrub_json([f.model_dump() for f in failure.frames])),
        failing_tests_json=json.dumps(scrub_json(list(failure.failing_tests))),
        source=failure.source,
        failure_class=classification.failure_class.value if classification else "",
        retryable=classification.retryable if classification else None,
        classification_json=(
            json.dumps(scrub_json(classification.model_dump(mode="json"))) if classification else ""
        ),
        recorded_at=recorded_at,
    )
