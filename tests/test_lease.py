"""Proposal leases: M runs sharing a fingerprint ask one proposer once, never deadlock.

The store's half against real SQLite files and real holder processes (a
holder is a process: its pid and liveness are what a lease names); the loop's
half with real `patchheal heal` processes on one store, whose proposer is the
fixer agent (a real command that logs every call and can wait on a gate file).
The Celery fleet's version is in tests/test_celery.py, PostgreSQL's in
tests/test_store_postgres.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from patchheal.loop.heartbeat import LeaseHeartbeat
from patchheal.memory.store import AttemptStore
from tests.healjobs import (
    events_of,
    fixer_calls,
    fixer_proposer,
    make_multi_repo,
    multi_steps,
    start_heal,
    wait_for,
    write_fixer,
    write_spec,
)

FP = "f" * 16

# A real holder: takes the lease, says whether it got it, then lives until killed
# (beating when asked to, as a healing run's heartbeat does).
HOLDER = textwrap.dedent("""\
    import sys, time
    from patchheal.loop.heartbeat import LeaseHeartbeat
    from patchheal.memory.store import AttemptStore
    db, fp, job, ttl, beat = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
    store = AttemptStore(db)
    grant = store.take_lease(fp, job_id=job, owner="holder", ttl_seconds=ttl)
    print("granted" if grant.granted else "refused", flush=True)
    if beat == "beat":
        LeaseHeartbeat(db, fp, ttl).start()
    time.sleep(600)
""")


@pytest.fixture
def holders() -> Iterator[Any]:
    started: list[subprocess.Popen[str]] = []

    def start(db: Path, job: str, *, ttl: float = 60, beat: bool = False) -> subprocess.Popen[str]:
        argv = [sys.executable, "-c", HOLDER, str(db), FP, job, str(ttl)]
        proc = subprocess.Popen(
            [*argv, "beat" if beat else "still"], stdout=subprocess.PIPE, text=True
        )
        started.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "granted"
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def test_a_live_holder_keeps_the_lease_and_a_killed_one_loses_it_at_once(
    tmp_path: Path, holders: Any
) -> None:
    db = tmp_path / "store.sqlite3"
    holder = holders(db, "job-a")
    with AttemptStore(db) as store:
        refused = store.take_lease(FP, job_id="job-b", owner="b", ttl_seconds=60)
        assert not refused.granted
        assert (refused.holder.job_id, refused.holder.pid) == ("job-a", holder.pid)
        kill(holder)  # SIGKILL: no release, the lease row stays behind
        assert store.lease(FP) is not None
        taken = store.take_lease(FP, job_id="job-b", owner="b", ttl_seconds=60)
        assert taken.granted
        assert f"pid {holder.pid}, is gone" in taken.taken_over
        assert store.lease(FP).job_id == "job-b"  # type: ignore[union-attr]
        store.release_lease(FP)
        assert store.lease(FP) is None


def test_a_lease_from_another_host_lapses_only_after_its_expiry(tmp_path: Path) -> None:
    """Another machine's pid cannot be checked: only its missing heartbeat frees the lease."""
    with AttemptStore(tmp_path / "store.sqlite3") as store:
        with store._write_engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO proposal_leases (fingerprint, job_id, owner, pid, host,"
                    " acquired_at, expires_at) VALUES (:fp, 'far', 'far', 1, 'elsewhere', :t, :e)"
                ),
                {"fp": FP, "t": time.time(), "e": time.time() + 1.5},
            )
        assert not store.take_lease(FP, job_id="near", owner="n", ttl_seconds=60).granted
        time.sleep(1.6)
        taken = store.take_lease(FP, job_id="near", owner="n", ttl_seconds=60)
        assert taken.granted
        assert "expired" in taken.taken_over
        assert "elsewhere" in taken.taken_over


def test_the_heartbeat_keeps_a_lease_past_its_ttl_and_stopping_it_lets_it_expire(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.sqlite3"
    with AttemptStore(db) as store:
        assert store.take_lease(FP, job_id="a", owner="a", ttl_seconds=0.6).granted
        with LeaseHeartbeat(str(db), FP, 0.6):
            time.sleep(1.5)
            assert store.lease(FP).expires_at > time.time()  # type: ignore[union-attr]
        time.sleep(0.8)
        assert store.lease(FP).expires_at < time.time()  # type: ignore[union-attr]


def test_the_same_job_takes_over_its_own_earlier_runs_lease(tmp_path: Path, holders: Any) -> None:
    """A redelivered job (its lock says the earlier run is gone) never waits for itself."""
    db = tmp_path / "store.sqlite3"
    holders(db, "job-a", ttl=600)
    with AttemptStore(db) as store:
        taken = store.take_lease(FP, job_id="job-a", owner="again", ttl_seconds=60)
        assert taken.granted
        assert "same job" in taken.taken_over


RACE = textwrap.dedent("""\
    import sys
    from patchheal.memory.store import AttemptStore
    store = AttemptStore(sys.argv[1])
    grant = store.take_lease(sys.argv[2], job_id=sys.argv[3], owner="race", ttl_seconds=600)
    print("granted" if grant.granted else "refused", flush=True)
    sys.stdin.read()  # hold on (alive) until the test has counted
""")


def race(db: str, processes: int) -> list[str]:
    """`processes` real processes take one fingerprint's lease at once; their answers."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, db, FP, f"job-{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    answers = []
    for proc in procs:
        assert proc.stdout is not None
        answers.append(proc.stdout.readline().strip())
    for proc in procs:
        proc.communicate("", timeout=60)
    return answers


def test_racing_processes_on_sqlite_get_one_lease(tmp_path: Path) -> None:
    answers = race(str(tmp_path / "store.sqlite3"), 6)
    assert sorted(answers) == ["granted"] + ["refused"] * 5


# -- the loop: real `patchheal heal` processes on one store ----------------------------


class SharedBug:
    """Jobs in separate repositories with one bug (one fingerprint), one gated fixer agent."""

    def __init__(self, root: Path, jobs: int, memory: str = "") -> None:
        self.root = root
        self.gate = root / "gate"
        self.gate.mkdir()
        self.log = root / "calls.log"
        fixer = write_fixer(root)
        self.specs = [
            write_spec(
                root / f"job-{i}.toml",
                make_multi_repo(root / f"r{i}", 1),
                job_id=f"share-{i}",
                steps=multi_steps(1),
                proposer=fixer_proposer(fixer, self.log, gate=self.gate),
                extra=f"[memory]\n{memory}\n",
            )
            for i in range(jobs)
        ]
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, i: int) -> subprocess.Popen[str]:
        self.procs.append(start_heal(self.specs[i], self.root))
        return self.procs[-1]

    def events(self, i: int, kind: str) -> list[dict[str, Any]]:
        return [e for e in events_of(self.root, f"share-{i}") if e["type"] == kind]

    def open(self, call: int) -> None:
        (self.gate / f"go-{call}").touch()

    def finish(self, proc: subprocess.Popen[str]) -> tuple[int, str]:
        try:
            _out, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            _out, err = proc.communicate()
            raise AssertionError(f"heal did not finish:\n{err}") from None
        return proc.returncode, err

    def proposers(self, job: str) -> list[tuple[str, str]]:
        with AttemptStore(self.root / "store.sqlite3") as store:
            return [(a.outcome.value, a.proposer) for a in store.attempts(job_id=job)]

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        for call in range(1, 10):  # an agent left behind by a killed run may end now
            self.open(call)


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Any]:
    made: list[SharedBug] = []

    def make(jobs: int, memory: str = "") -> SharedBug:
        made.append(SharedBug(tmp_path, jobs, memory))
        return made[-1]

    yield make
    for bug in made:
        bug.close()


@pytest.mark.slow
def test_two_heal_processes_on_one_fingerprint_make_one_proposer_call(shared: Any) -> None:
    bug = shared(2)
    first = bug.start(0)
    wait_for(lambda: fixer_calls(bug.log), timeout=120, what="the first job's proposer call")
    second = bug.start(1)
    wait_for(lambda: bug.events(1, "lease.waiting"), timeout=120, what="the second job waiting")
    [waiting] = bug.events(1, "lease.waiting")
    assert "share-0" in waiting["data"]["holder"]
    bug.open(1)  # the holder's agent proposes the fix now
    code_a, err_a = bug.finish(first)
    code_b, err_b = bug.finish(second)
    assert (code_a, code_b) == (0, 0), err_a + err_b
    assert len(fixer_calls(bug.log)) == 1  # the only proposer call of the two jobs
    assert bug.proposers("share-1") == [("fixed", "memory")]  # the holder's fix, reused
    [waited] = bug.events(1, "lease.waited")
    assert waited["data"]["ended"] == "fix verified"
    assert "waiting up to" in err_b  # the wait is shown, not silent
    with AttemptStore(bug.root / "store.sqlite3") as store:
        assert store.lease(waiting["fingerprint"]) is None  # released on the way out


@pytest.mark.slow
def test_a_holder_killed_mid_proposal_is_taken_over_and_the_waiter_heals(
    shared: Any,
) -> None:
    bug = shared(2, memory="lease_ttl_seconds = 3")
    first = bug.start(0)
    wait_for(lambda: fixer_calls(bug.log), timeout=120, what="the holder's proposer call")
    second = bug.start(1)
    wait_for(lambda: bug.events(1, "lease.waiting"), timeout=120, what="the second job waiting")
    killed_at = time.monotonic()
    os.kill(first.pid, signal.SIGKILL)  # mid-proposal: its agent still waits on go-1
    bug.open(2)  # the taker's own agent call may go through at once
    code, err = bug.finish(second)
    assert code == 0, err
    assert time.monotonic() - killed_at < 60
    [acquired] = [e for e in bug.events(1, "lease.acquired") if e["data"]["taken_over"]]
    assert f"pid {first.pid}, is gone" in acquired["data"]["taken_over"]
    assert bug.events(1, "lease.waited")[0]["data"]["ended"] == "lease acquired"
    assert [c["call"] for c in fixer_calls(bug.log)] == [1, 2]
    assert bug.proposers("share-1") == [("fixed", "agent")]


@pytest.mark.slow
def test_a_holder_that_never_finishes_delays_a_waiter_only_by_the_bound(
    shared: Any,
) -> None:
    """Never a deadlock: past `lease_wait_seconds` the waiter asks its own proposer."""
    bug = shared(2, memory="lease_wait_seconds = 2")
    first = bug.start(0)
    wait_for(lambda: fixer_calls(bug.log), timeout=120, what="the holder's proposer call")
    second = bug.start(1)
    bug.open(2)  # only the waiter's call: the holder stays stuck in its proposer
    code, err = bug.finish(second)
    assert code == 0, err
    [waited] = bug.events(1, "lease.waited")
    assert waited["data"]["ended"] == "bound reached"
    assert 2 <= waited["data"]["seconds"] < 10
    assert first.poll() is None  # the holder is still at it
    bug.open(1)
    assert bug.finish(first)[0] == 0


def test_a_lone_job_takes_the_lease_and_never_waits(shared: Any) -> None:
    bug = shared(1)
    bug.open(1)
    started = time.monotonic()
    code, err = bug.finish(bug.start(0))
    assert code == 0, err
    assert [e["type"] for e in events_of(bug.root, "share-0") if "lease" in e["type"]] == [
        "lease.acquired"
    ]
    assert time.monotonic() - started < 120


# -- the waiter's take racing the holder's last write ----------------------------------


def test_a_fix_recorded_just_before_the_lease_came_free_is_reused_not_proposed_again(
    tmp_path: Path, holders: Any
) -> None:
    """The holder records its verified fix and its run ends between the waiter's look for
    a fix and its next take: the waiter gets the lease, and must still see the fix (a
    loaded machine made this window real: two proposer calls for one fingerprint in a
    full test run). A real holder process on one SQLite file; its fix and its end happen
    from the waiter's own poll, exactly in that window."""
    from patchheal.loop.lease import ProposalLease
    from patchheal.telemetry.events import EventLog

    db = tmp_path / "store.sqlite3"
    holder = holders(db, "holder")
    fixed = False

    def holder_finishes_in_the_window() -> bool:
        nonlocal fixed
        fixed = True  # its verified fix is recorded ...
        kill(holder)  # ... and its run ends: the lease of a gone pid is free at once
        return False  # no operator command

    with AttemptStore(db) as store:
        events = EventLog(tmp_path / "waiter.jsonl", job_id="waiter")
        waiter = ProposalLease(store, events, "waiter", "run w", 60, 30, say=print)
        go = waiter.ready(
            FP,
            step_index=1,
            limit=60,
            fresh_fix=lambda: fixed,
            interrupted=holder_finishes_in_the_window,
        )
        waiter.release()
    assert go is False  # the fix is reused: no proposer call
    waited = [e for e in EventLog.read(tmp_path / "waiter.jsonl") if e.type == "lease.waited"]
    assert [e.data["ended"] for e in waited] == ["fix verified"]
