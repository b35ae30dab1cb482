"""Job locks against real processes: a live holder, a killed one, another host."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchheal.cli import cli
from patchheal.errors import LockHeld
from patchheal.memory.locks import this_host
from patchheal.memory.store import AttemptStore
from patchheal.memory.tables import LockRow
from patchheal.proc import pid_alive, process_start

HOLDER = textwrap.dedent(
    """
    import sys, time
    from patchheal.memory.store import AttemptStore
    store = AttemptStore(sys.argv[1])
    store.acquire_lock(sys.argv[2], owner="holder-process", ttl_seconds=float(sys.argv[3]))
    print("locked", flush=True)
    time.sleep(600)
    """
)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "attempts.sqlite3"


@pytest.fixture
def store(db: Path) -> Iterator[AttemptStore]:
    s = AttemptStore(db)
    yield s
    s.close()


def hold(db: Path, job_id: str, ttl: float = 600) -> subprocess.Popen[str]:
    """A real process that takes the job's lock and keeps running."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), job_id, str(ttl)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "locked"
    return child


def kill(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)


def plant(store: AttemptStore, job_id: str, **fields: object) -> None:
    """A lock row as another process or host would have left it."""
    now = time.time()
    values: dict[str, object] = {
        "job_id": job_id,
        "owner": "planted",
        "pid": os.getpid(),
        "host": this_host(),
        "pid_started": process_start(os.getpid()),
        "created_at": now - 10,
        "expires_at": now + 600,
    }
    values.update(fields)
    with store._write() as session:
        session.add(LockRow.model_validate(values))
        session.commit()


def test_pid_alive_sees_dead_and_recycled_pids() -> None:
    me = os.getpid()
    assert pid_alive(me)
    assert pid_alive(me, process_start(me))
    assert not pid_alive(me, (process_start(me) or 0) + 1)  # same pid, another process
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not pid_alive(child.pid)
    assert not pid_alive(0)
    assert not pid_alive(-5)


def test_a_live_holder_keeps_the_job_until_it_dies(store: AttemptStore, db: Path) -> None:
    child = hold(db, "job-1")
    try:
        with pytest.raises(LockHeld) as info:
            store.acquire_lock("job-1", owner="second-run")
        message = str(info.value)
        assert "holder-process" in message
        assert f"pid {child.pid}" in message
        assert this_host() in message
        assert "--force" in message
    finally:
        kill(child)
    # Killed mid-run, before its lock expired: the pid is gone, so it is reclaimed at once.
    seen: list[tuple[int, str]] = []
    lock = store.acquire_lock(
        "job-1", owner="second-run", on_reclaim=lambda old, why: seen.append((old.pid, why))
    )
    assert lock.pid == os.getpid()
    assert lock.owner == "second-run"
    assert seen == [(child.pid, f"pid {child.pid} is gone (the lock had not expired yet)")]
    [audit] = store.lock_audit("job-1")
    assert (audit.action, audit.pid, audit.owner, audit.by_owner) == (
        "reclaimed",
        child.pid,
        "holder-process",
        "second-run",
    )


def test_acquire_refresh_release(store: AttemptStore) -> None:
    lock = store.acquire_lock("job-1", owner="me", ttl_seconds=5)
    again = store.acquire_lock("job-1", owner="me", ttl_seconds=50)  # the same process: re-entrant
    assert again.expires_at > lock.expires_at
    store.refresh_lock("job-1", ttl_seconds=500)
    [listed] = store.list_locks()
    assert listed.expires_at > time.time() + 400
    store.release_lock("job-1")
    assert store.list_locks() == []
    with pytest.raises(LockHeld, match="nobody holds it"):
        store.refresh_lock("job-1")


def test_a_run_learns_it_lost_its_lock(store: AttemptStore, db: Path) -> None:
    store.acquire_lock("job-1", owner="me")
    with store._write() as session:  # someone forced it away and took it
        session.get(LockRow, "job-1").pid = 1  # type: ignore[union-attr]
        session.commit()
    with pytest.raises(LockHeld, match="lost the lock of job job-1"):
        store.refresh_lock("job-1")
    store.release_lock("job-1")  # not ours any more: left alone
    assert [lk.pid for lk in store.list_locks()] == [1]


def test_taking_the_lock_releases_claims_a_crashed_run_left_open(store: AttemptStore) -> None:
    store.ensure_job("job-1", repo=".", base="main", spec_toml="")
    assert store.claim("fp", "n1", job_id="job-1")  # the run died before recording the attempt
    store.acquire_lock("job-1", owner="resume")
    assert store.claim("fp", "n1", job_id="job-1") is True


def test_reclaim_dry_run_apply_and_force(store: AttemptStore, db: Path) -> None:
    live = hold(db, "live-here")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    now = time.time()
    try:
        plant(store, "dead-expired", pid=dead.pid, pid_started=None, expires_at=now - 3600)
        plant(store, "dead-fresh", pid=dead.pid, pid_started=None)
        plant(store, "far-expired", host="elsewhere.invalid", pid=1, expires_at=now - 3600)
        plant(store, "far-grace", host="elsewhere.invalid", pid=1, expires_at=now - 10)

        states = {lk.job_id: store.lock_state(lk)[0] for lk in store.list_locks()}
        assert states == {
            "dead-expired": "stale",
            "dead-fresh": "orphaned",
            "far-expired": "stale",
            "far-grace": "live",  # within the grace period: its host may still refresh it
            "live-here": "live",
        }
        dry = store.reclaim_stale(apply=False)
        assert sorted(lk.job_id for lk, _ in dry) == ["dead-expired", "dead-fresh", "far-expired"]
        assert len(store.list_locks()) == 5
        assert store.lock_audit() == []

        applied = store.reclaim_stale(apply=True)
        assert sorted(lk.job_id for lk, _ in applied) == sorted(lk.job_id for lk, _ in dry)
        assert sorted(lk.job_id for lk in store.list_locks()) == ["far-grace", "live-here"]
        assert {a.action for a in store.lock_audit()} == {"reclaimed"}

        assert [lk.job_id for lk, _ in store.reclaim_stale(apply=True, grace_seconds=1)] == [
            "far-grace"
        ]
        assert sorted(lk.job_id for lk, _ in store.reclaim_stale(apply=False, force=True)) == [
            "live-here"
        ]
        assert [lk.job_id for lk in store.list_locks()] == ["live-here"]  # force alone: dry run
        [(forced, why)] = store.reclaim_stale(apply=True, force=True)
        assert forced.job_id == "live-here"
        assert why.endswith("(forced)")
        assert store.lock_audit("live-here")[0].action == "forced"
        assert store.list_locks() == []
    finally:
        kill(live)


def test_locks_command(store: AttemptStore, db: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    plant(store, "gone", pid=dead.pid, pid_started=None, expires_at=time.time() - 3600)
    plant(store, "mine")  # this test process: alive
    runner = CliRunner()
    dry = runner.invoke(cli, ["locks", "--db", str(db)])
    assert dry.exit_code == 0, dry.output
    assert "gone: stale" in dry.output
    assert "mine: live" in dry.output
    assert "would reclaim gone" in dry.output
    assert "dry run" in dry.output
    assert len(store.list_locks()) == 2
    applied = runner.invoke(cli, ["locks", "--apply", "--db", str(db)])
    assert "reclaimed gone" in applied.output
    assert "mine" not in applied.output.split("reclaimed")[1]
    assert [lk.job_id for lk in store.list_locks()] == ["mine"]
    forced = runner.invoke(cli, ["locks", "--apply", "--force", "--db", str(db)])
    assert "reclaimed mine" in forced.output
    assert store.list_locks() == []
    assert runner.invoke(cli, ["locks", "--db", str(db)]).output.strip() == "no locks"
