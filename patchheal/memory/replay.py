"""Reading and checking event logs, and replaying what they say into a store.

Used by `patchheal store rebuild` (every log, into a fresh store) and by the
crash recovery at the start of a run (one job's log, what the store lacks).

Each `<runs>/<job-id>/events.jsonl` is checked as a sequence of runs, a run
being everything from one `job.started` to the next. What cannot have
happened is refused with its file and line: duplicate event ids, unknown
types, events of a job no `job.started` introduced, events after the run's
`job.finished`, an attempt that ends without having started. What passes
becomes a list of store actions, merged across jobs in time order.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from patchheal.errors import BadInput, StoreIntegrityError, validation_problems
from patchheal.memory.store import JUDGED, AttemptStore
from patchheal.models import AttemptRecord, Classification, Failure
from patchheal.telemetry.events import EVENT_TYPES, Event, read_numbered

_MAX_REPORTED = 40
M = TypeVar("M", bound=BaseModel)
_ENDS = ("step.attempt.finished", "step.attempt.failed")


@dataclass(frozen=True)
class Action:
    """One change to the store that an event describes."""

    kind: str  # "job", "status", "failure" or "attempt"
    job_id: str
    values: dict[str, Any]
    where: str  # file:line, for messages


@dataclass
class _Run:
    """What one run of a job has done so far."""

    finished_at: str | None = None
    open: set[tuple[int, int]] = field(default_factory=set)
    ended: dict[tuple[int, int], bool] = field(default_factory=dict)  # key -> has a record


@dataclass
class _Checker:
    problems: list[str] = field(default_factory=list)
    seen_ids: dict[str, str] = field(default_factory=dict)
    events: int = 0

    def file(self, path: Path) -> list[tuple[float, Action]]:
        job_dir = path.parent.name
        actions: list[tuple[float, Action]] = []
        run: _Run | None = None
        try:
            numbered = read_numbered(path)
        except StoreIntegrityError as exc:
            self.problems.append(str(exc))
            return []
        self.events += len(numbered)
        for line, event in numbered:
            where = f"{path}:{line}"
            before = len(self.problems)
            run, action = self._event(event, where, job_dir, run)
            if action is not None and len(self.problems) == before:
                actions.append((event.time, action))
        return actions

    def _event(
        self, event: Event, where: str, job_dir: str, run: _Run | None
    ) -> tuple[_Run | None, Action | None]:
        first = self.seen_ids.setdefault(event.event_id, where)
        if first != where:
            self.problems.append(f"{where}: duplicate event id {event.event_id} (first at {first})")
            return run, None
        if event.type not in EVENT_TYPES:
            self.problems.append(f"{where}: unknown event type {event.type!r}")
            return run, None
        if event.job_id != job_dir:
            self.problems.append(
                f"{where}: event for job {event.job_id!r} in the event log of job {job_dir!r}"
            )
            return run, None
        if event.type == "job.started":
            values = {k: event.data.get(k) for k in ("repo", "base", "spec_toml")}
            if not isinstance(values["repo"], str) or not isinstance(values["base"], str):
                self.problems.append(f"{where}: job.started without data.repo and data.base")
                return _Run(), None
            values["spec_toml"] = values["spec_toml"] or ""
            return _Run(), Action("job", event.job_id, values, where)
        if run is None:
            self.problems.append(
                f"{where}: {event.type} for unknown job {event.job_id!r} (no job.started before it)"
            )
            return run, None
        if run.finished_at is not None:
            self.problems.append(
                f"{where}: {event.type} after job.finished of the same run ({run.finished_at})"
            )
            return run, None
        return run, self._in_run(event, where, run)

    def _in_run(self, event: Event, where: str, run: _Run) -> Action | None:
        if event.type == "job.finished":
            run.finished_at = where
            status = event.data.get("status")
            if not isinstance(status, str) or not status:
                self.problems.append(f"{where}: job.finished without data.status")
                return None
            detail = str(event.data.get("reason") or "")
            return Action("status", event.job_id, {"status": status, "detail": detail}, where)
        if event.type == "failure.recorded":
            return self._failure(event, where)
        if event.type == "step.attempt.started" or event.type in _ENDS:
            return self._attempt(event, where, run)
        return None

    def _failure(self, event: Event, where: str) -> Action | None:
        if event.step_index is None:
            self.problems.append(f"{where}: failure.recorded without step_index")
            return None
        failure = self._model(Failure, event.data.get("failure"), where, "data.failure")
        raw_class = event.data.get("classification")
        classification = (
            None
            if raw_class is None
            else self._model(Classification, raw_class, where, "data.classification")
        )
        if failure is None or (raw_class is not None and classification is None):
            return None
        values = {
            "failure": failure,
            "step_index": event.step_index,
            "classification": classification,
        }
        return Action("failure", event.job_id, values, where)

    def _attempt(self, event: Event, where: str, run: _Run) -> Action | None:
        if event.step_index is None or event.attempt is None:
            self.problems.append(f"{where}: {event.type} without step_index and attempt")
            return None
        key = (event.step_index, event.attempt)
        name = f"attempt {event.attempt} of step {event.step_index}"
        if event.type == "step.attempt.started":
            if key in run.open or key in run.ended:
                self.problems.append(f"{where}: {name} started twice in one run")
            run.open.add(key)
            return None
        # `failed` may follow `finished` of the same attempt (an annotation);
        # anything else must end an attempt that is open.
        annotates = event.type == "step.attempt.failed" and run.ended.get(key) is True
        if key not in run.open and not annotates:
            what = "ended again" if key in run.ended else "never started"
            self.problems.append(f"{where}: {event.type} for {name}, which {what}")
            return None
        run.open.discard(key)
        raw = event.data.get("record")
        if raw is None:
            if event.type == "step.attempt.finished":
                self.problems.append(f"{where}: step.attempt.finished without data.record")
            run.ended.setdefault(key, False)
            return None
        record = self._model(AttemptRecord, raw, where, "data.record")
        if record is None:
            return None
        if (record.job_id, record.step_index, record.attempt_number) != (
            event.job_id,
            event.step_index,
            event.attempt,
        ):
            self.problems.append(
                f"{where}: data.record is attempt {record.attempt_number} of step"
                f" {record.step_index} of job {record.job_id!r}, the event says {name}"
                f" of job {event.job_id!r}"
            )
            return None
        if run.ended.get(key) is True:
            return None  # already recorded by `finished`
        run.ended[key] = True
        return Action("attempt", event.job_id, {"record": record}, where)

    def _model(self, model: type[M], raw: Any, where: str, name: str) -> M | None:
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            first = validation_problems(exc, top="")[0]
            self.problems.append(f"{where}: {name} is not a valid {model.__name__}: {first}")
            return None


def read_runs(runs_dir: Path) -> tuple[list[Action], list[Path], int]:
    """Store actions from every event log under `runs_dir`, in time order.

    Returns (actions, log files, event count); StoreIntegrityError lists every
    problem found, each with its file and line.
    """
    if not runs_dir.is_dir():
        raise BadInput(f"no runs directory at {runs_dir}")
    logs = sorted(runs_dir.glob("*/events.jsonl"))
    checker = _Checker()
    per_file = [checker.file(path) for path in logs]
    if checker.problems:
        shown = checker.problems[:_MAX_REPORTED]
        more = len(checker.problems) - len(shown)
        shown += [f"... and {more} more"] if more > 0 else []
        raise StoreIntegrityError("the event logs cannot be replayed:\n  " + "\n  ".join(shown))
    # Merge by time across jobs; heapq.merge keeps each file's own order even
    # if the clock stepped back during a run.
    merged = heapq.merge(*per_file, key=lambda item: item[0])
    return [action for _, action in merged], logs, checker.events


def replay_attempt(store: AttemptStore, record: AttemptRecord) -> None:
    """Store an attempt the event log has, as the live run left it.

    The loop claims a patch before applying it and releases the claim only
    after a transient outcome: a judged patch holds its claim (check -> claim
    -> record), so replaying it keeps "never the same patch twice".
    """
    if record.outcome in JUDGED and record.normalized_diff_hash:
        store.claim(record.fingerprint, record.normalized_diff_hash, job_id=record.job_id)
    store.record_attempt(record)
