"""`patchheal store rebuild`: replay the event logs into a fresh store.

The fresh store is a new SQLite file built beside the live one. A dry run
compares the two and reports what differs; `apply` swaps the fresh file in
with one rename, after keeping the live file as a backup. The operator
audit trail (control commands, lock reclaims) is not in the event logs, so
it is copied over from the live store.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from sqlalchemy import select
from sqlmodel import col

from patchheal.errors import BadInput
from patchheal.memory.db import display_url, resolve_db_url, sqlite_path
from patchheal.memory.records import StoredAttempt
from patchheal.memory.replay import Action, read_runs, replay_attempt
from patchheal.memory.store import AttemptStore
from patchheal.memory.tables import ClaimRow, ControlRow, LockAuditRow
from patchheal.models import JobStatus

_COMPARED = ("outcome", "diff_hash", "normalized_diff_hash", "strategy")


class RebuildReport(BaseModel):
    """What a rebuild read, what differs from the live store, and what it did."""

    model_config = ConfigDict(frozen=True)

    runs_dir: str
    live_url: str
    logs: int
    events: int
    jobs: int
    attempts: int
    differences: tuple[str, ...]
    applied: bool
    backup: str | None = None

    def render(self) -> str:
        lines = [
            f"replayed {self.events} events from {self.logs} event logs in {self.runs_dir}:"
            f" {self.jobs} jobs, {self.attempts} attempts",
        ]
        if self.differences:
            lines.append(
                f"{len(self.differences)} differences from the live store {self.live_url}:"
            )
            lines += [f"  {d}" for d in self.differences]
        else:
            lines.append(f"the live store {self.live_url} matches the event logs")
        if self.applied:
            lines.append(
                f"applied: the rebuilt store replaced the live one (backup: {self.backup})"
            )
        elif self.differences:
            lines.append("dry run: nothing changed; --apply writes the rebuilt store")
        return "\n".join(lines)


def _replay(store: AttemptStore, actions: list[Action]) -> None:
    for action in actions:
        values = action.values
        if action.kind == "job":
            store.ensure_job(action.job_id, **values)
            store.set_job_status(action.job_id, JobStatus.RUNNING)
        elif action.kind == "status":
            store.set_job_status(action.job_id, values["status"], detail=values["detail"])
        elif action.kind == "failure":
            store.record_failure(
                values["failure"],
                job_id=action.job_id,
                step_index=values["step_index"],
                classification=values["classification"],
            )
        else:
            replay_attempt(store, values["record"])


def _claims(store: AttemptStore) -> set[tuple[str, str]]:
    query = select(col(ClaimRow.fingerprint), col(ClaimRow.normalized_diff_hash))
    with store._read() as session:
        return {(fp, ndh) for fp, ndh in session.execute(query).all()}


def _by_key(attempts: list[StoredAttempt]) -> dict[tuple[int, int], StoredAttempt]:
    return {(a.step_index, a.attempt_number): a for a in attempts}


def compare(live: AttemptStore, fresh: AttemptStore) -> list[str]:
    """Differences between the live store and the one rebuilt from events."""
    out: list[str] = []
    live_jobs = {j.id: j for j in live.jobs()}
    fresh_jobs = {j.id: j for j in fresh.jobs()}
    for job_id in sorted(live_jobs.keys() - fresh_jobs.keys()):
        out.append(f"job {job_id}: in the live store, but no event log replays it")
    for job_id in sorted(fresh_jobs.keys() - live_jobs.keys()):
        out.append(f"job {job_id}: in the event logs, missing from the live store")
    for job_id in sorted(live_jobs.keys() & fresh_jobs.keys()):
        if live_jobs[job_id].status != fresh_jobs[job_id].status:
            out.append(
                f"job {job_id}: status {live_jobs[job_id].status!r} live,"
                f" {fresh_jobs[job_id].status!r} in the events"
            )
        out += _compare_job(job_id, live, fresh)
    for fp, ndh in sorted(_claims(live) - _claims(fresh)):
        out.append(f"claim {fp[:12]}/{ndh[:12]}: held in the live store, not by any event")
    for fp, ndh in sorted(_claims(fresh) - _claims(live)):
        out.append(f"claim {fp[:12]}/{ndh[:12]}: made by the events, missing from the live store")
    return out


def _compare_job(job_id: str, live: AttemptStore, fresh: AttemptStore) -> list[str]:
    out: list[str] = []
    mine = _by_key(live.attempts(job_id=job_id))
    theirs = _by_key(fresh.attempts(job_id=job_id))
    for step, number in sorted(mine.keys() | theirs.keys()):
        name = f"job {job_id} step {step} attempt {number}"
        a, b = mine.get((step, number)), theirs.get((step, number))
        if b is None:
            out.append(f"{name}: in the live store, not in the events")
        elif a is None:
            out.append(f"{name}: in the events ({b.outcome.value}), missing from the live store")
        else:
            for name_ in _COMPARED:
                left, right = getattr(a, name_), getattr(b, name_)
                if left != right:
                    out.append(f"{name}: {name_} {left!s} live, {right!s} in the events")
    live_failures = Counter((f.step_index, f.failure.fingerprint) for f in live.failures(job_id))
    fresh_failures = Counter((f.step_index, f.failure.fingerprint) for f in fresh.failures(job_id))
    for (step, fp), count in sorted((live_failures - fresh_failures).items()):
        out.append(f"job {job_id} step {step}: {count} failure(s) {fp[:12]} only in the live store")
    for (step, fp), count in sorted((fresh_failures - live_failures).items()):
        out.append(f"job {job_id} step {step}: {count} failure(s) {fp[:12]} only in the events")
    return out


def _copy_audit(live: AttemptStore, fresh: AttemptStore) -> None:
    with live._read() as session:
        rows = [
            *session.execute(select(ControlRow)).scalars(),
            *session.execute(select(LockAuditRow)).scalars(),
        ]
        copies = [type(row).model_validate(row.model_dump()) for row in rows]
    with fresh._write() as session:
        session.add_all(copies)
        session.commit()


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def rebuild(runs_dir: Path, live_url: str | Path, *, apply: bool) -> RebuildReport:
    """Replay `<runs_dir>/<job-id>/events.jsonl` into a fresh store and compare."""
    live_url = resolve_db_url(live_url)
    live_path = sqlite_path(live_url)
    if apply and live_path is None:
        raise BadInput(
            f"--apply can swap in only an SQLite store file; {display_url(live_url)} is not one."
            " Run without --apply to see the differences"
        )
    actions, logs, events = read_runs(Path(runs_dir))
    folder = live_path.parent if live_path is not None else Path(tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".rebuild-", suffix=".sqlite3", dir=folder)
    os.close(fd)
    fresh_path = Path(name)
    fresh_path.unlink()  # SQLite creates it; an empty file would do too, but this is plainer
    # A missing live file is an empty store: compare against one without creating it.
    live_source = live_url
    if live_path is not None and not live_path.exists():
        live_source = str(fresh_path.with_name(fresh_path.name + ".empty"))
    try:
        fresh = AttemptStore(fresh_path)
        live = AttemptStore(live_source)
        try:
            _replay(fresh, actions)
            differences = compare(live, fresh)
            counts = (len(fresh.jobs()), len(fresh.attempts()))
            if apply:
                _refuse_if_running(live)
                _copy_audit(live, fresh)
        finally:
            live.close()
            fresh.close()
        backup = None
        if apply:
            assert live_path is not None
            backup = _swap(fresh_path, live_path)
        return RebuildReport(
            runs_dir=str(runs_dir),
            live_url=display_url(live_url),
            logs=len(logs),
            events=events,
            jobs=counts[0],
            attempts=counts[1],
            differences=tuple(differences),
            applied=apply,
            backup=backup,
        )
    finally:
        _remove_db(fresh_path)
        if live_source != live_url:
            _remove_db(Path(live_source))


def _refuse_if_running(live: AttemptStore) -> None:
    for lock in live.list_locks():
        state, reason = live.lock_state(lock)
        if state == "live":
            raise BadInput(
                f"job {lock.job_id} is running ({reason}); rebuild --apply needs every run stopped"
            )


def _checkpointed(path: Path) -> None:
    """Fold the WAL into the main file, so that the file alone is the whole database."""
    import sqlite3

    conn = sqlite3.connect(path, timeout=60)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        mode = conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0]
    except sqlite3.Error as exc:
        raise BadInput(
            f"cannot swap the store {path}: {exc}; is a patchheal process using it?"
        ) from None
    finally:
        conn.close()
    if mode != "delete":
        raise BadInput(f"the store {path} is in use by another process; stop it and retry")


def _swap(fresh_path: Path, live_path: Path) -> str | None:
    _checkpointed(fresh_path)
    backup: str | None = None
    if live_path.exists():
        _checkpointed(live_path)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = live_path.with_name(f"{live_path.name}.bak-{stamp}")
        serial = 1
        while target.exists():
            serial += 1
            target = live_path.with_name(f"{live_path.name}.bak-{stamp}-{serial}")
        try:
            target.hardlink_to(live_path)  # the old file stays reachable under the backup name
        except OSError:  # a filesystem without hard links
            shutil.copy2(live_path, target)
        backup = str(target)
    fresh_path.replace(live_path)  # the one atomic step: readers see old or new, never half
    for suffix in ("-wal", "-shm"):
        Path(f"{live_path}{suffix}").unlink(missing_ok=True)
    return backup
