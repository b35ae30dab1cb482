"""The append-only event log of a job: `<state dir>/runs/<job-id>/events.jsonl`.

An event is written (and fsync'd) before the state change it describes is
committed to the store, so a crash can leave an event without its state
change, never the reverse; `patchheal store rebuild` replays the log. A crash
in the middle of a write leaves a torn last line: reading tolerates it, and
the next run's EventLog cuts it off before appending.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from pydantic_core import to_jsonable_python

from patchheal.errors import StoreIntegrityError, validation_problems

if TYPE_CHECKING:
    from patchheal.scrub.scrubber import Scrubber

EVENT_TYPES: frozenset[str] = frozenset(
    {
        "job.started",
        "job.finished",
        "failure.recorded",
        "step.started",
        "step.attempt.started",
        "step.attempt.finished",
        "step.attempt.failed",
        "step.checkpointed",
        "self_heal.triggered",
        "self_heal.escalated",
        "self_heal.exhausted",
        "self_heal.recovered",
        "resume.from_step",
        "control.received",
        "control.applied",
        "lock.reclaimed",
        "lease.acquired",
        "lease.waiting",
        "lease.waited",
    }
)
# The seed spec names events `task.<name>` (`task.self_heal.exhausted`). The log is
# written with that prefix; code compares the short names, and reading strips the
# prefix, so logs written before it (no prefix) replay the same.
EVENT_PREFIX = "task."
# Fields with a column of their own; any other keyword of emit() goes into `data`.
COLUMNS = (
    "step_id",
    "step_index",
    "attempt",
    "failure_class",
    "fingerprint",
    "diff_hash",
    "strategy",
)
_MAX_REPORTED = 20


class Event(BaseModel):
    """One line of events.jsonl."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: str
    time: float
    type: str
    job_id: str
    step_id: str | None = None
    step_index: int | None = None
    attempt: int | None = None
    failure_class: str | None = None
    fingerprint: str | None = None
    diff_hash: str | None = None
    strategy: str | None = None
    data: dict[str, Any] = {}

    @field_validator("type")
    @classmethod
    def _short_type(cls, value: str) -> str:
        return value.removeprefix(EVENT_PREFIX)


def _repair_tail(path: Path) -> None:
    """End the file on a newline: drop a torn last line, or terminate a complete one.

    A last line without its newline is a write the crash interrupted. If it
    still parses as an event, only the newline was lost and it is kept, so
    that the log reads the same before and after the repair.
    """
    with path.open("rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        start, end, chunk = size, size, 64 * 1024
        while end > 0:
            begin = max(0, end - chunk)
            handle.seek(begin)
            newline = handle.read(end - begin).rfind(b"\n")
            if newline >= 0:
                start = begin + newline + 1
                break
            start = end = begin
        handle.seek(start)
        if _parses(handle.read(size - start)):
            handle.write(b"\n")
        else:
            handle.truncate(start)
        handle.flush()
        os.fsync(handle.fileno())


def _parses(line: bytes) -> bool:
    try:
        Event.model_validate_json(line)
    except ValueError:
        return False
    return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class EventLog:
    """Appends scrubbed events of one job to one file, durably."""

    def __init__(self, path: Path, *, job_id: str, scrubber: Scrubber | None = None) -> None:
        from patchheal.scrub.active import current as default_scrubber

        self.path = Path(path)
        self.job_id = job_id
        self._scrubber = scrubber if scrubber is not None else default_scrubber()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        if not created:
            _repair_tail(self.path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if created:  # the new directory entry must survive a crash too
            _fsync_dir(self.path.parent)

    def emit(self, type: str, **fields: Any) -> Event:
        """Write one event and return once it is on disk."""
        if type not in EVENT_TYPES:
            raise ValueError(
                f"unknown event type {type!r}; known: {', '.join(sorted(EVENT_TYPES))}"
            )
        if self._fd is None:
            raise ValueError(f"the event log {self.path} is closed")
        data = dict(fields.pop("data", None) or {})
        columns = {name: fields.pop(name) for name in COLUMNS if name in fields}
        data.update(fields)
        payload = to_jsonable_python({"columns": columns, "data": data})
        clean = self._scrubber.scrub_obj(payload)
        event = Event(
            event_id=uuid.uuid4().hex,
            time=time.time(),
            type=type,
            job_id=self._scrubber.scrub(self.job_id),
            data=clean["data"],
            **clean["columns"],
        )
        on_disk = event.model_copy(update={"type": EVENT_PREFIX + event.type})
        line = (on_disk.model_dump_json() + "\n").encode()
        view = memoryview(line)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)
        return event

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @staticmethod
    def read(path: Path) -> list[Event]:
        """Every event of a log, in order; a torn last line is skipped."""
        return [event for _, event in read_numbered(path)]


def read_numbered(path: Path) -> list[tuple[int, Event]]:
    """(line number, event) pairs; StoreIntegrityError names each corrupt line."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise StoreIntegrityError(f"cannot read the event log {path}: {exc}") from None
    lines = raw.split(b"\n")
    torn_possible = not raw.endswith(b"\n")
    events: list[tuple[int, Event]] = []
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            fields = json.loads(line.decode("utf-8"))
            events.append((number, Event.model_validate(fields)))
        except (UnicodeDecodeError, ValueError, ValidationError) as exc:
            if torn_possible and number == len(lines):
                break  # the crash interrupted this write; its state change never happened
            problems.append(f"{path}:{number}: {_why(exc)}")
    if problems:
        more = len(problems) - _MAX_REPORTED
        tail = [f"... and {more} more"] if more > 0 else []
        raise StoreIntegrityError(
            "corrupt event log:\n  " + "\n  ".join(problems[:_MAX_REPORTED] + tail)
        )
    return events


def _why(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return f"not an event: {validation_problems(exc, top='(line)')[0]}"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    return f"not JSON: {exc}"
