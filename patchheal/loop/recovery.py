"""After a crash: bring the store up to what the job's event log already says happened.

Every event is written before the store change it describes, so a run killed
between the two leaves the log one step ahead: an attempt that finished (its
`step.attempt.finished|failed` event carries the whole record) or a failure
that was recorded, missing from the store. Left alone, the attempt's claim
is released when the lock is reclaimed and the very same patch could be
verified again for that fingerprint. The next run of the job records them
from the log before it does anything else.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from patchheal.memory.replay import replay_attempt
from patchheal.memory.store import AttemptStore
from patchheal.models import AttemptRecord, Classification, Failure
from patchheal.telemetry.events import EventLog


def recover(events: Path, store: AttemptStore, job_id: str) -> tuple[int, int]:
    """Record what the log has and the store lacks; returns (attempts, failures) recorded."""
    if not events.exists():
        return 0, 0
    logged = EventLog.read(events)
    known = {a.attempt_number for a in store.attempts(job_id=job_id)}
    attempts = 0
    for event in logged:
        raw = event.data.get("record")
        if event.type not in ("step.attempt.finished", "step.attempt.failed") or raw is None:
            continue
        record = AttemptRecord.model_validate(raw)
        if record.job_id != job_id or record.attempt_number in known:
            continue
        replay_attempt(store, record)
        known.add(record.attempt_number)
        attempts += 1
    have = Counter((f.step_index, f.failure.fingerprint) for f in store.failures(job_id))
    failures = 0
    for event in logged:
        raw = event.data.get("failure")
        if event.type != "failure.recorded" or raw is None or event.step_index is None:
            continue
        failure = Failure.model_validate(raw)
        key = (event.step_index, failure.fingerprint)
        if have[key] > 0:  # this one (or an earlier one like it) is in the store
            have[key] -= 1
            continue
        raw_class = event.data.get("classification")
        classification = None if raw_class is None else Classification.model_validate(raw_class)
        store.record_failure(
            failure, job_id=job_id, step_index=event.step_index, classification=classification
        )
        failures += 1
    return attempts, failures
