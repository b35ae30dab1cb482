"""The attempt store on a real PostgreSQL server, shared by real processes.

docs/scaling.md tells users to point many workers at one PostgreSQL database;
these tests hold the store to that on a throwaway server (tests/pg_support.py),
each test in a database of its own.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from patchheal.errors import BadInput, LockHeld
from patchheal.memory.locks import this_host
from patchheal.memory.rebuild import rebuild
from patchheal.memory.store import AttemptStore
from patchheal.models import Classification, Failure, FailureClass, Frame, Outcome
from tests.healjobs import FIX, WRONG, diff_for, make_calc_repo, write_spec
from tests.pg_support import PgServer, pg_server_fixture, pg_url_fixture  # noqa: F401 (fixtures)

# The SQLite suite's builders: the same records on another back end.
from tests.test_store import AWS_KEY, GH_TOKEN, record


@pytest.fixture
def db_url(pg_server: PgServer) -> str:
    return pg_server.fresh_database()


@pytest.fixture
def store(db_url: str) -> Iterator[AttemptStore]:
    s = AttemptStore(db_url)
    s.ensure_job("job-a", repo="/r/a", base="main", spec_toml="[job]\nid = 'job-a'\n")
    s.ensure_job("job-b", repo="/r/b", base="main", spec_toml="")
    yield s
    s.close()


def sql(store: AttemptStore, query: str) -> list[tuple[object, ...]]:
    """Raw SQL on the store's database, bypassing the store (autocommit)."""
    with store._engine.connect() as conn:
        result = conn.execute(text(query))
        rows = [tuple(r) for r in result] if result.returns_rows else []
        conn.commit()
    return rows


def python(code: str, *args: str, timeout: float = 120) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def outputs(children: list[subprocess.Popen[str]]) -> list[str]:
    out = []
    for child in children:
        stdout, stderr = child.communicate(timeout=180)
        assert child.returncode == 0, stderr[-3000:]
        out.append(stdout)
    return out


# -- schema and round trips ----------------------------------------------------------


def test_the_schema_is_created_on_postgres_with_the_claims_unique_constraint(
    store: AttemptStore,
) -> None:
    assert not store.is_sqlite
    tables = {r[0] for r in sql(store, "SELECT tablename FROM pg_tables WHERE schemaname='public'")}
    assert tables == {
        "jobs",
        "failures",
        "attempts",
        "claims",
        "controls",
        "locks",
        "lock_audit",
        "outcomes",
        "proposal_leases",
    }
    [(definition,)] = sql(
        store,
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname='uq_claims_fp_ndh'",
    )
    assert definition == "UNIQUE (fingerprint, normalized_diff_hash)"
    # Times are epoch seconds with sub-millisecond parts: a 4-byte float would drop them.
    [(kind,)] = sql(
        store,
        "SELECT data_type FROM information_schema.columns"
        " WHERE table_name='attempts' AND column_name='started_at'",
    )
    assert kind == "double precision"


def test_reopening_an_existing_store_keeps_its_rows(pg_url: str) -> None:
    """The session database: a second open finds the tables and rows the first left."""
    with AttemptStore(pg_url) as first:
        first.ensure_job("reopen", repo="/r", base="main", spec_toml="")
    with AttemptStore(pg_url) as second:
        job = second.job("reopen")
        assert job is not None
        assert job.repo == "/r"
        assert second.integrity_check() == []


def test_jobs_failures_and_attempts_round_trip(store: AttemptStore) -> None:
    store.set_job_status("job-a", "running", detail="step 0")
    job = store.job("job-a")
    assert job is not None
    assert (job.status, job.detail, job.repo, job.spec_toml) == (
        "running",
        "step 0",
        "/r/a",
        "[job]\nid = 'job-a'\n",
    )
    assert [j.id for j in store.jobs()] == ["job-a", "job-b"]
    assert store.job("nope") is None
    failure = Failure(
        fingerprint="fp-1",
        error_type="ZeroDivisionError",
        message="division by zero " + "é" * 3000,  # long, non-ASCII text
        frames=(Frame(file="calc.py", function="div", line=3),),
        failing_tests=("tests/test_calc.py::test_div",),
        source="pytest",
    )
    classification = Classification(
        failure_class=FailureClass.CODE_BUG, retryable=True, evidence=("E  ZeroDivisionError",)
    )
    store.record_failure(failure, job_id="job-a", step_index=0, classification=classification)
    store.record_failure(failure, job_id="job-a", step_index=1)
    first, second = store.failures("job-a")
    assert first.failure == failure
    assert first.classification == classification
    assert second.classification is None
    started = 1_700_000_000.123456
    attempt_id = store.record_attempt(
        record(started_at=started, duration_seconds=0.25, touched_files=("x.py", "y.py"))
    )
    stored = store.attempt(attempt_id)
    assert stored.started_at == started
    assert stored.duration_seconds == 0.25
    assert stored.touched_files == ("x.py", "y.py")
    assert stored.outcome is Outcome.NO_EFFECT
    assert [a.id for a in store.attempts(job_id="job-a")] == [attempt_id]
    with pytest.raises(BadInput, match="nope"):
        store.record_failure(failure, job_id="nope", step_index=0)
    with pytest.raises(BadInput, match="nope"):
        store.record_attempt(record("nope"))
    with pytest.raises(BadInput, match="nope"):
        store.set_job_status("nope", "fixed")
    with pytest.raises(BadInput, match="999"):
        store.attempt(999)


def test_attempt_queries_and_verified_fixes(store: AttemptStore) -> None:
    for n, (job, fp, outcome) in enumerate(
        [
            ("job-a", "fp-1", Outcome.NO_EFFECT),
            ("job-a", "fp-1", Outcome.FIXED),
            ("job-b", "fp-1", Outcome.FIXED),
            ("job-b", "fp-2", Outcome.FIXED),
        ],
        start=1,
    ):
        store.record_attempt(record(job, n, fingerprint=fp, outcome=outcome))
    store.record_attempt(record("job-b", 5, outcome=Outcome.FIXED, normalized_diff_hash="n2"))
    assert [a.attempt_number for a in store.attempts(job_id="job-a")] == [1, 2]
    assert [a.attempt_number for a in store.attempts(fingerprint="fp-2")] == [4]
    assert len(store.attempts(step_index=0)) == 5
    assert store.attempts(step_index=1) == []
    fixes = store.verified_fixes("fp-1")
    assert [(f.attempt_number, f.normalized_diff_hash) for f in fixes] == [(5, "n2"), (3, "n3")]
    assert len(store.verified_fixes("fp-1", limit=1)) == 1


def test_similar_fixes_on_postgres(store: AttemptStore) -> None:
    pytest.importorskip("patchheal.failure.analysis")
    failure = Failure(fingerprint="fp-1", error_type="KeyError", message="'user'")
    near = Failure(fingerprint="fp-2", error_type="KeyError", message="'user'")
    far = Failure(fingerprint="fp-3", error_type="OSError", message="disk full", summary="x")
    for n, f in enumerate((failure, near, far), start=1):
        store.record_failure(f, job_id="job-b", step_index=0)
        store.record_attempt(record("job-b", n, fingerprint=f.fingerprint, outcome=Outcome.FIXED))
    assert [h.fingerprint for h in store.similar_fixes(failure, threshold=0.6)] == ["fp-2"]


# -- claims ----------------------------------------------------------------------------


def test_claim_is_true_once_then_false(store: AttemptStore) -> None:
    assert store.claim("fp-1", "n1", job_id="job-a") is True
    assert store.claim("fp-1", "n1", job_id="job-a") is False  # claimed, not yet recorded
    assert store.prior_claim("fp-1", "n1") is None
    attempt_id = store.record_attempt(record())
    assert store.claim("fp-1", "n1", job_id="job-b") is False
    prior = store.prior_claim("fp-1", "n1")
    assert prior is not None
    assert prior.id == attempt_id
    assert store.claim("fp-2", "n1", job_id="job-b") is True  # another fingerprint
    with pytest.raises(BadInput, match="ghost"):
        store.claim("fp-3", "n1", job_id="ghost")
    # A transient outcome gives the claim back; a judged one keeps it.
    assert store.claim("fp-4", "n9", job_id="job-a")
    store.release("fp-4", "n9")
    assert store.claim("fp-4", "n9", job_id="job-a") is True
    store.record_attempt(record(n=9, fingerprint="fp-4", outcome=Outcome.REGRESSION))
    store.release("fp-4", "n9")
    assert store.claim("fp-4", "n9", job_id="job-b") is False
    assert store.integrity_check() == []


RACER = """
    import json, os, sys, time
    from pathlib import Path
    from patchheal.memory.store import AttemptStore
    db, go, job, keys = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    store = AttemptStore(db)
    store.claim("fp-warm", job, job_id=job)  # connect before the start line
    (go.parent / f"ready-{os.getpid()}").touch()
    while not go.exists():
        time.sleep(0.001)
    wins = [k for k in range(keys) if store.claim("fp-race", f"n{k}", job_id=job)]
    store.close()
    print(json.dumps(wins))
"""


@pytest.mark.slow
def test_processes_racing_claim_on_one_database_each_patch_is_won_once(
    store: AttemptStore, db_url: str, tmp_path: Path
) -> None:
    """Invariant: the UNIQUE constraint decides each race between processes."""
    go = tmp_path / "go"
    keys = 200
    racers = [python(RACER, db_url, str(go), job, str(keys)) for job in ("job-a", "job-b", "job-a")]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("ready-*"))) < len(racers) and time.monotonic() < deadline:
        time.sleep(0.05)  # every racer connected and waiting at the start line
    go.touch()
    wins = [json.loads(out) for out in outputs(racers)]
    assert sorted(k for won in wins for k in won) == list(range(keys))  # each exactly once
    # They really raced: at least two processes won some (on a loaded machine one racer
    # can be scheduled late and lose every key, as in CI at load 4: [[], [0..10], [11..]]).
    assert sum(bool(won) for won in wins) >= 2, wins
    assert store.integrity_check() == []


# -- locks ------------------------------------------------------------------------------

HOLDER = """
    import sys, time
    from patchheal.memory.store import AttemptStore
    store = AttemptStore(sys.argv[1])
    store.acquire_lock(sys.argv[2], owner="holder-process")
    print("locked", flush=True)
    time.sleep(600)
"""


def test_locks_live_holder_then_dead_pid_reclaimed(store: AttemptStore, db_url: str) -> None:
    lock = store.acquire_lock("job-1", owner="me", ttl_seconds=5)
    again = store.acquire_lock("job-1", owner="me", ttl_seconds=50)  # re-entrant
    assert again.expires_at > lock.expires_at
    store.refresh_lock("job-1", ttl_seconds=500)
    store.release_lock("job-1")
    assert store.list_locks() == []

    child = python(HOLDER, db_url, "job-2")
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "locked"
        with pytest.raises(LockHeld) as info:
            store.acquire_lock("job-2", owner="second-run")
        assert f"pid {child.pid}" in str(info.value)
        assert "holder-process" in str(info.value)
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=30)
    seen: list[str] = []
    taken = store.acquire_lock(
        "job-2", owner="second-run", on_reclaim=lambda _, why: seen.append(why)
    )
    assert (taken.pid, taken.host) == (os.getpid(), this_host())
    assert seen == [f"pid {child.pid} is gone (the lock had not expired yet)"]
    [audit] = store.lock_audit("job-2")
    assert (audit.action, audit.pid, audit.by_owner) == ("reclaimed", child.pid, "second-run")


def test_reclaim_stale_on_postgres(store: AttemptStore) -> None:
    from patchheal.memory.tables import LockRow

    now = time.time()
    with store._write() as session:
        session.add(
            LockRow(
                job_id="far",
                owner="x",
                pid=1,
                host="elsewhere.invalid",
                created_at=now - 7200,
                expires_at=now - 3600,
            )
        )
        session.commit()
    [(lock, why)] = store.reclaim_stale(apply=True)
    assert lock.job_id == "far"
    assert why.startswith("stale: expired")
    assert store.list_locks() == []
    assert [a.action for a in store.lock_audit()] == ["reclaimed"]


LOCKER = """
    import json, os, sys, time
    from pathlib import Path
    from patchheal.errors import LockHeld
    from patchheal.memory.store import AttemptStore
    db, go = sys.argv[1], Path(sys.argv[2])
    store = AttemptStore(db)
    while not go.exists():
        time.sleep(0.001)
    won = []
    for k in range(40):
        try:
            store.acquire_lock(f"job-{k}", owner="racer")
            won.append(k)
        except LockHeld:
            pass
    print(json.dumps(won), flush=True)
    sys.stdin.read()  # hold the locks (the pid stays alive) until the test is done
"""


@pytest.mark.slow
def test_processes_racing_for_one_free_lock_one_wins_the_other_sees_lockheld(
    store: AttemptStore, db_url: str, tmp_path: Path
) -> None:
    """Without SQLite's whole-database write lock, a lock check-then-insert must not
    turn into a duplicate-key traceback: exactly one process gets each job's lock."""
    go = tmp_path / "go"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(LOCKER), db_url, str(go)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    try:
        time.sleep(1.5)
        go.touch()
        wins = []
        for racer in racers:
            assert racer.stdout is not None
            line = racer.stdout.readline()
            assert line, racer.communicate(timeout=30)[1][-3000:]
            wins += json.loads(line)
        assert sorted(wins) == list(range(40))
        assert len(store.list_locks()) == 40
    finally:
        for racer in racers:
            racer.communicate(input="", timeout=30)


# -- a fresh database opened by many workers at once --------------------------------------

OPENER = """
    import sys, time
    from pathlib import Path
    from patchheal.memory.store import AttemptStore
    db, go, me = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    while not go.exists():
        time.sleep(0.001)
    store = AttemptStore(db)
    store.ensure_job("shared-job", repo="/r", base="main", spec_toml=me)
    store.close()
    print("ok")
"""


@pytest.mark.slow
def test_workers_opening_a_fresh_database_at_once_all_succeed(
    pg_server: PgServer,
    tmp_path: Path,
) -> None:
    url = pg_server.fresh_database()  # no tables yet: each worker runs CREATE TABLE
    go = tmp_path / "go"
    workers = [python(OPENER, url, str(go), f"w{i}") for i in range(4)]
    time.sleep(1.5)
    go.touch()
    assert outputs(workers) == ["ok\n"] * 4
    with AttemptStore(url) as store:
        assert [j.id for j in store.jobs()] == ["shared-job"]
        assert store.integrity_check() == []


# -- the control queue ------------------------------------------------------------------


def test_control_queue_written_by_another_process(store: AttemptStore, db_url: str) -> None:
    writer = """
        import sys
        from patchheal.memory.store import AttemptStore
        s = AttemptStore(sys.argv[1])
        s.enqueue_control('job-a', 'pause', arg=None, issued_by='alice@tty1')
        s.enqueue_control('job-a', 'resume-from-step', arg=2, issued_by='alice@tty1')
        s.close()
    """
    outputs([python(writer, db_url)])
    pending = store.pending_controls("job-a")
    assert [(c.command, c.arg, c.issued_by) for c in pending] == [
        ("pause", None, "alice@tty1"),
        ("resume-from-step", 2, "alice@tty1"),
    ]
    assert pending[0].id is not None
    store.finish_control(pending[0].id, result="applied")
    assert [c.command for c in store.pending_controls("job-a")] == ["resume-from-step"]
    assert store.controls("job-a")[0].result == "applied"
    with pytest.raises(BadInput, match="already finished"):
        store.finish_control(pending[0].id, result="again")
    assert store.pending_controls("job-b") == []


# -- integrity and secrets ----------------------------------------------------------------


def test_integrity_check_on_postgres(store: AttemptStore) -> None:
    assert store.integrity_check() == []
    assert store.claim("fp-1", "n1", job_id="job-a")
    store.record_attempt(record())
    store.enqueue_control("job-a", "pause", arg=None, issued_by="me")
    store.acquire_lock("job-a", owner="me")
    assert store.integrity_check() == []
    sql(store, "DELETE FROM claims")  # the judged patch is no longer protected
    sql(store, "UPDATE controls SET status = 'lost'")
    problems = store.integrity_check()
    assert any("no claim protects" in p for p in problems), problems
    assert any("unknown status 'lost'" in p for p in problems), problems


def test_integrity_check_wants_the_claims_unique_constraint(store: AttemptStore) -> None:
    """Without it two workers could verify one patch: a hand-made schema is caught."""
    sql(store, "ALTER TABLE claims DROP CONSTRAINT uq_claims_fp_ndh")
    assert store.integrity_check() == [
        "claims: no UNIQUE (fingerprint, normalized_diff_hash): a patch could be tried twice"
    ]
    store.claim("fp-1", "n1", job_id="job-a")
    sql(store, "INSERT INTO claims (fingerprint, normalized_diff_hash, job_id, claimed_at)"
               " VALUES ('fp-1', 'n1', 'job-b', 0)")  # fmt: skip
    # Rebuilding it online fails on the duplicate and leaves an invalid index behind.
    with store._engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        with pytest.raises(Exception, match="could not create unique index"):
            conn.exec_driver_sql(
                "CREATE UNIQUE INDEX CONCURRENTLY uq_again ON claims"
                " (fingerprint, normalized_diff_hash)"
            )
    problems = store.integrity_check()
    assert "postgresql: index uq_again is invalid" in problems, problems
    assert any("no UNIQUE" in p for p in problems), problems


def test_secrets_never_reach_the_database(
    store: AttemptStore, db_url: str, pg_server: PgServer
) -> None:
    url_secret = "hunter2-" + "Sup3rS3cret"
    store.ensure_job(
        "job-s",
        repo=f"https://bob:{url_secret}@127.0.0.1/r.git",
        base="main",
        spec_toml=f"token = '{GH_TOKEN}'\n",
    )
    store.set_job_status("job-s", "failed", detail=f"exported AWS_KEY={AWS_KEY}")
    store.record_failure(
        Failure(fingerprint="fp-s", error_type="AuthError", message=f"bad token {GH_TOKEN}"),
        job_id="job-s",
        step_index=0,
    )
    store.record_attempt(
        record(
            "job-s",
            diff=f"+TOKEN = '{GH_TOKEN}'\n+aws = '{AWS_KEY}'\n",
            reason=f"failed calling https://bob:{url_secret}@127.0.0.1/x",
            log_excerpt=f"Authorization: token {GH_TOKEN}\n",
            rationale=f"use {AWS_KEY}",
        )
    )
    store.enqueue_control("job-s", "pause", arg=None, issued_by=f"bob {GH_TOKEN}")
    [control] = store.pending_controls("job-s")
    store.finish_control(control.id or 0, result=f"paused by {AWS_KEY}")
    assert "[REDACTED]" in store.attempts(job_id="job-s")[0].diff
    # Every byte the server holds for this database, as pg_dump sees it.
    dump = subprocess.run(
        [str(pg_server.bindir / "pg_dump"), "--data-only", db_url.replace("+psycopg", "")],
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout
    assert b"job-s" in dump
    for secret in (GH_TOKEN, AWS_KEY, url_secret):
        assert secret.encode() not in dump


def test_a_missing_database_or_server_is_bad_input_not_a_traceback(pg_server: PgServer) -> None:
    password = "Hunter2" + "SecretPw9"  # the server trusts loopback, so any password is taken
    url = pg_server.url("no_such_database").replace("patchheal@", f"patchheal:{password}@")
    with pytest.raises(BadInput, match="cannot open the store") as info:
        AttemptStore(url)
    assert "no_such_database" in str(info.value)
    assert password not in str(info.value)
    assert "patchheal:***@" in str(info.value)
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(BadInput, match=f"127.0.0.1:{port}"):
        AttemptStore(f"postgresql+psycopg://patchheal@127.0.0.1:{port}/patchheal")
    assert time.monotonic() - started < 20
    result = subprocess.run(
        [sys.executable, "-m", "patchheal", "store", "check", "--db", pg_server.url("nope")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "cannot open the store" in result.stderr


# -- a real heal run against PostgreSQL ---------------------------------------------------


@pytest.mark.slow
def test_heal_cli_with_a_postgres_store(db_url: str, tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    wrong, fix = diff_for(repo, {"calc.py": WRONG}), diff_for(repo, {"calc.py": FIX})
    spec = write_spec(tmp_path / "job.toml", repo, job_id="calc-pg", diffs=[wrong, fix])
    state = ["--db", db_url, "--state-dir", str(tmp_path / "var")]
    state += ["--reports", str(tmp_path / "reports")]
    healed = subprocess.run(
        [sys.executable, "-m", "patchheal", "heal", str(spec), *state],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert healed.returncode == 0, healed.stdout[-2000:] + healed.stderr[-3000:]
    with AttemptStore(db_url) as store:
        job = store.job("calc-pg")
        assert job is not None
        assert job.status == "fixed"
        assert [a.outcome for a in store.attempts(job_id="calc-pg")] == [
            Outcome.NO_EFFECT,
            Outcome.FIXED,
        ]
        assert store.list_locks() == []
        assert store.integrity_check() == []
    checked = subprocess.run(
        [sys.executable, "-m", "patchheal", "store", "check", "--db", db_url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
    # The event logs replay into exactly what the PostgreSQL store holds.
    assert rebuild(tmp_path / "var" / "runs", db_url, apply=False).differences == ()
    with pytest.raises(BadInput, match="only an SQLite store"):
        rebuild(tmp_path / "var" / "runs", db_url, apply=True)
    with_password = db_url.replace("patchheal@", "patchheal:" + "Pw4Rebuild" + "Only@")
    shown = rebuild(tmp_path / "var" / "runs", with_password, apply=False).render()
    assert "Pw4RebuildOnly" not in shown
    assert "matches the event logs" in shown


@pytest.mark.slow
def test_two_workers_share_one_postgres_store_and_never_verify_a_patch_twice(
    db_url: str, tmp_path: Path
) -> None:
    """docs/scaling.md's promise on PostgreSQL: two batch workers, four jobs with one bug.

    Across both workers the wrong patch is verified exactly once. A job whose
    worker proposes the fix while the other worker is still verifying it gets
    `rejected_repeat` and, with no candidate left, fails (exit 1): that is the
    loop's choice, the same on SQLite, so either exit code is accepted here.
    """
    specs = []
    for i in range(4):
        root = tmp_path / f"j{i}"
        repo = make_calc_repo(root)
        wrong, fix = diff_for(repo, {"calc.py": WRONG}), diff_for(repo, {"calc.py": FIX})
        specs.append(
            write_spec(root / f"job-{i}.toml", repo, job_id=f"job-{i}", diffs=[wrong, fix])
        )
    state = ["--db", db_url, "--state-dir", str(tmp_path / "var")]
    state += ["--reports", str(tmp_path / "reports")]
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "patchheal",
                "batch",
                *map(str, specs),
                f"--shard={i}/2",
                *state,
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    for worker in workers:
        _out, err = worker.communicate(timeout=300)
        assert worker.returncode in (0, 1), err[-3000:]
        assert "Traceback" not in err, err[-3000:]
    with AttemptStore(db_url) as store:
        attempts = store.attempts()
        statuses = {job.id: job.status for job in store.jobs()}
        assert store.integrity_check() == []
    assert len([a for a in attempts if a.outcome is Outcome.NO_EFFECT]) == 1
    assert set(statuses) == {f"job-{i}" for i in range(4)}
    fixed = {a.job_id for a in attempts if a.outcome is Outcome.FIXED}
    assert fixed == {j for j, status in statuses.items() if status == "fixed"}
    assert fixed  # whoever claimed the fix verified it
    for job_id in statuses.keys() - fixed:
        outcomes = [a.outcome for a in attempts if a.job_id == job_id]
        assert Outcome.REJECTED_REPEAT in outcomes, (job_id, outcomes)


def test_racing_processes_on_postgres_get_one_proposal_lease(db_url: str) -> None:
    """The lease's read-decide-write runs under the store's advisory lock: one winner."""
    from tests.test_lease import race

    answers = race(db_url, 6)
    assert sorted(answers) == ["granted"] + ["refused"] * 5
