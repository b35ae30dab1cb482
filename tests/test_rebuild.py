"""`store rebuild`: event logs written the way the loop writes them, replayed into a fresh store."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchheal.cli import cli
from patchheal.errors import BadInput, StoreIntegrityError
from patchheal.memory.rebuild import rebuild
from patchheal.memory.store import AttemptStore
from patchheal.models import AttemptRecord, Classification, Failure, FailureClass, Outcome
from patchheal.telemetry.events import EventLog

VERIFIED = {Outcome.FIXED, Outcome.NO_EFFECT, Outcome.REGRESSION, Outcome.TIMEOUT}
FAILURE = Failure(fingerprint="fp-shared", error_type="KeyError", message="'user'")
CLASS = Classification(failure_class=FailureClass.CODE_BUG, retryable=True)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "var" / "runs"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "var" / "memory" / "attempts.sqlite3"


@pytest.fixture
def store(db: Path) -> Iterator[AttemptStore]:
    s = AttemptStore(db)
    yield s
    s.close()


def sql(db: Path, statement: str) -> None:
    """Damage the store behind its back, as a crash or a hand edit would."""
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(statement)


def heal(
    runs: Path,
    store: AttemptStore,
    job_id: str,
    candidates: list[tuple[str, Outcome]],
    *,
    status: str,
    crash_before_record: int | None = None,
) -> Path:
    """Events first, then the store, in the order attempt.py and loop.py use."""
    log = EventLog(runs / job_id / "events.jsonl", job_id=job_id)
    spec = f"[job]\nid = '{job_id}'\n"
    log.emit("job.started", data={"repo": "/r", "base": "main", "spec_toml": spec})
    store.ensure_job(job_id, repo="/r", base="main", spec_toml=spec)
    store.set_job_status(job_id, "running")
    log.emit("step.started", step_id="unit", step_index=0)
    log.emit(
        "failure.recorded",
        step_index=0,
        data={
            "failure": FAILURE.model_dump(mode="json"),
            "classification": CLASS.model_dump(mode="json"),
        },
    )
    store.record_failure(FAILURE, job_id=job_id, step_index=0, classification=CLASS)
    for number, (patch, planned) in enumerate(candidates, start=1):
        log.emit("step.attempt.started", step_index=0, attempt=number, strategy=f"s-{patch}")
        outcome = planned
        if planned is not Outcome.REJECTED_POLICY and not store.claim(
            FAILURE.fingerprint, f"n-{patch}", job_id=job_id
        ):
            outcome = Outcome.REJECTED_REPEAT
        if outcome in (Outcome.TIMEOUT, Outcome.HARNESS_ERROR):
            store.release(FAILURE.fingerprint, f"n-{patch}")
        record = AttemptRecord(
            job_id=job_id,
            step_index=0,
            attempt_number=number,
            fingerprint=FAILURE.fingerprint,
            outcome=outcome,
            diff=f"+{patch}\n",
            diff_hash=f"d-{patch}-{number}",
            normalized_diff_hash=f"n-{patch}",
            strategy=f"s-{patch}",
        )
        kind = "step.attempt.finished" if outcome in VERIFIED else "step.attempt.failed"
        log.emit(
            kind, step_index=0, attempt=number, data={"record": record.model_dump(mode="json")}
        )
        if number == crash_before_record:
            log.close()
            return log.path  # killed between the event and the store commit
        store.record_attempt(record)
    log.emit("job.finished", data={"status": status, "reason": "done"})
    store.set_job_status(job_id, status)
    log.close()
    return log.path


def two_jobs(runs: Path, store: AttemptStore) -> None:
    heal(
        runs,
        store,
        "job-a",
        [
            ("bad", Outcome.APPLY_FAILED),
            ("wrong", Outcome.NO_EFFECT),
            ("slow", Outcome.TIMEOUT),
            ("tamper", Outcome.REJECTED_POLICY),
            ("good", Outcome.FIXED),
        ],
        status="fixed",
    )
    heal(
        runs,
        store,
        "job-b",
        [("wrong", Outcome.NO_EFFECT), ("slow", Outcome.NO_EFFECT)],
        status="exhausted",
    )


def summary(store: AttemptStore) -> list[tuple[object, ...]]:
    return [
        (
            a.job_id,
            a.step_index,
            a.attempt_number,
            a.outcome,
            a.diff_hash,
            a.normalized_diff_hash,
            a.strategy,
        )
        for a in store.attempts()
    ]


def test_rebuild_of_finished_runs_reproduces_the_live_store(
    runs: Path, store: AttemptStore, db: Path
) -> None:
    two_jobs(runs, store)
    assert [a.outcome for a in store.attempts(job_id="job-b")] == [
        Outcome.REJECTED_REPEAT,  # job-a judged "wrong" already
        Outcome.NO_EFFECT,  # "slow" only timed out in job-a: its claim was released
    ]
    store.enqueue_control("job-a", "pause", arg=None, issued_by="alice")
    before = summary(store)
    store.close()

    report = rebuild(runs, f"sqlite:///{db}", apply=False)
    assert report.differences == ()
    assert (report.logs, report.jobs, report.attempts) == (2, 2, 7)
    assert report.events == 2 * 4 + 2 * (5 + 2)  # per job: started, step, failure, finished
    assert "matches the event logs" in report.render()

    applied = rebuild(runs, f"sqlite:///{db}", apply=True)
    assert applied.applied
    assert applied.backup is not None
    assert Path(applied.backup).exists()
    with AttemptStore(db) as swapped:
        assert summary(swapped) == before
        assert swapped.integrity_check() == []
        assert [c.command for c in swapped.controls("job-a")] == ["pause"]
        assert swapped.claim("fp-shared", "n-good", job_id="job-b") is False
        assert swapped.claim("fp-shared", "n-tamper", job_id="job-b") is True
        assert swapped.job("job-b").status == "exhausted"  # type: ignore[union-attr]


def test_rebuild_shows_then_repairs_what_the_live_store_lost(
    runs: Path, store: AttemptStore, db: Path
) -> None:
    two_jobs(runs, store)
    heal(runs, store, "job-c", [("other", Outcome.NO_EFFECT)], status="", crash_before_record=1)
    store.close()
    sql(db, "DELETE FROM attempts WHERE job_id = 'job-b' AND attempt_number = 2")
    sql(db, "UPDATE attempts SET strategy = 'edited' WHERE attempt_number = 5")
    report = rebuild(runs, str(db), apply=False)
    assert set(report.differences) == {
        "job job-a step 0 attempt 5: strategy edited live, s-good in the events",
        "job job-b step 0 attempt 2: in the events (no_effect), missing from the live store",
        "job job-c step 0 attempt 1: in the events (no_effect), missing from the live store",
    }
    assert "dry run" in report.render()
    with AttemptStore(db) as live:
        assert len(live.attempts()) == 6  # a dry run changes nothing

    rebuild(runs, str(db), apply=True)
    assert rebuild(runs, str(db), apply=False).differences == ()
    with AttemptStore(db) as live:
        assert len(live.attempts()) == 8
        assert live.integrity_check() == []


def rewrite(
    path: Path, change: Callable[[list[dict[str, object]]], list[dict[str, object]]]
) -> None:
    events = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(e) + "\n" for e in change(events)))


def _retype(events: list[dict[str, object]]) -> list[dict[str, object]]:
    events[1]["type"] = "step.exploded"
    return events


def _other_job(events: list[dict[str, object]]) -> list[dict[str, object]]:
    events[1]["job_id"] = "job-z"
    return events


def _bad_record(events: list[dict[str, object]]) -> list[dict[str, object]]:
    events[4]["data"]["record"]["outcome"] = "exploded"  # type: ignore[index]
    return events


def _late(events: list[dict[str, object]]) -> list[dict[str, object]]:
    extra = dict(events[1], event_id="late-one")
    return [*events, extra]


# (how the log is damaged, the line the error must name, what it must say)
DAMAGE = {
    "duplicate id": (lambda ev: [*ev[:3], ev[1], *ev[3:]], 4, "duplicate event id"),
    "unknown type": (_retype, 2, "unknown event type 'step.exploded'"),
    "never started": (lambda ev: [*ev[:3], *ev[4:]], 4, "which never started"),
    "after finished": (_late, 9, "after job.finished of the same run"),
    "unknown job": (lambda ev: ev[1:], 1, "for unknown job 'job-a' (no job.started before it)"),
    "job of another log": (_other_job, 2, "event for job 'job-z' in the event log of job 'job-a'"),
    "bad record": (_bad_record, 5, "data.record is not a valid AttemptRecord: outcome"),
    "ended twice": (lambda ev: [*ev[:5], dict(ev[4], event_id="again"), *ev[5:]], 6, "ended again"),
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_rebuild_rejects_impossible_logs_naming_file_and_line(
    kind: str, runs: Path, store: AttemptStore, db: Path
) -> None:
    path = heal(
        runs, store, "job-a", [("wrong", Outcome.NO_EFFECT), ("x", Outcome.FIXED)], status="fixed"
    )
    change, line, words = DAMAGE[kind]
    rewrite(path, change)
    with pytest.raises(StoreIntegrityError) as info:
        rebuild(runs, str(db), apply=True)
    assert f"{path}:{line}: " in str(info.value)
    assert words in str(info.value)
    assert len(store.attempts()) == 2  # nothing was swapped in


def test_apply_is_refused_where_it_cannot_be_atomic_or_safe(
    runs: Path, store: AttemptStore, db: Path
) -> None:
    heal(runs, store, "job-a", [("x", Outcome.FIXED)], status="fixed")
    with pytest.raises(BadInput, match="only an SQLite store"):
        rebuild(runs, "postgresql://patchheal@127.0.0.1:1/memory", apply=True)
    store.acquire_lock("job-a", owner="a run in progress")
    with pytest.raises(BadInput, match="job job-a is running"):
        rebuild(runs, str(db), apply=True)
    with pytest.raises(BadInput, match="no runs directory"):
        rebuild(runs / "nope", str(db), apply=False)


def test_store_commands(runs: Path, store: AttemptStore, db: Path) -> None:
    heal(runs, store, "job-a", [("x", Outcome.FIXED)], status="fixed")
    runner = CliRunner()
    checked = runner.invoke(cli, ["store", "check", "--db", str(db)])
    assert checked.exit_code == 0
    assert "is consistent" in checked.output
    dry = runner.invoke(cli, ["store", "rebuild", "--runs", str(runs), "--db", str(db)])
    assert dry.exit_code == 0
    assert "matches the event logs" in dry.output
    sql(db, "DELETE FROM claims")
    bad = runner.invoke(cli, ["store", "check", "--db", str(db)])
    assert bad.exit_code != 0
    assert "no claim protects" in str(bad.exception)
    refused = runner.invoke(
        cli, ["store", "rebuild", "--apply", "--runs", str(runs), "--db", str(db)]
    )
    assert "is a patchheal process using it?" in str(refused.exception)  # our `store` is open
    store.close()
    applied = runner.invoke(
        cli, ["store", "rebuild", "--apply", "--runs", str(runs), "--db", str(db)]
    )
    assert applied.exit_code == 0
    assert "applied" in applied.output
    assert runner.invoke(cli, ["store", "check", "--db", str(db)]).exit_code == 0
