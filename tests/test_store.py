"""The attempt store on a real SQLite file, shared by real processes."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from patchheal.errors import BadInput
from patchheal.memory.store import AttemptStore, resolve_db_url
from patchheal.models import AttemptRecord, Classification, Failure, FailureClass, Frame, Outcome

# Built at run time so that no secret-looking literal sits in the source.
GH_TOKEN = "ghp_" + "Zq8Xw2Lk5Mn7Pb3Vc9Rt1Ys4Ud6Fe0Ga2Hj"
AWS_KEY = "AKIA" + "QX7RZ4LMPB2WNC6Y"


def record(job: str = "job-a", n: int = 1, **fields: object) -> AttemptRecord:
    values: dict[str, object] = {
        "job_id": job,
        "step_index": 0,
        "attempt_number": n,
        "fingerprint": "fp-1",
        "outcome": Outcome.NO_EFFECT,
        "diff": "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n",
        "diff_hash": f"d{n}",
        "normalized_diff_hash": f"n{n}",
        "strategy": "fix_logic",
    }
    values.update(fields)
    return AttemptRecord.model_validate(values)


@pytest.fixture
def store(tmp_path: Path) -> AttemptStore:
    s = AttemptStore(tmp_path / "mem" / "attempts.sqlite3")
    s.ensure_job("job-a", repo="/r/a", base="main", spec_toml="[job]\nid = 'job-a'\n")
    s.ensure_job("job-b", repo="/r/b", base="main", spec_toml="")
    yield s
    s.close()


def test_resolve_db_url_makes_paths_absolute_and_creates_parents(tmp_path: Path) -> None:
    url = resolve_db_url("deep/er/attempts.sqlite3")
    assert url == f"sqlite:///{tmp_path / 'deep/er/attempts.sqlite3'}"
    assert (tmp_path / "deep/er").is_dir()
    assert resolve_db_url(Path("x.db")) == f"sqlite:///{tmp_path / 'x.db'}"
    assert resolve_db_url("postgresql://u@127.0.0.1/db") == "postgresql://u@127.0.0.1/db"


@pytest.mark.parametrize("value", ["", "   ", "://nothing", "not a url://x"])
def test_resolve_db_url_rejects_garbage(value: str) -> None:
    with pytest.raises(BadInput, match="store") as info:
        resolve_db_url(value)
    assert value.strip() in str(info.value)


def test_a_directory_or_an_unknown_dialect_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    with pytest.raises(BadInput, match="adir"):
        AttemptStore(tmp_path / "adir")
    with pytest.raises(BadInput, match="nosuchdb"):
        AttemptStore("nosuchdb://127.0.0.1/x")


def test_sqlite_runs_in_wal_with_a_long_busy_timeout(store: AttemptStore) -> None:
    with store._engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 30_000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_jobs_and_failures_round_trip(store: AttemptStore) -> None:
    store.set_job_status("job-a", "running")
    job = store.job("job-a")
    assert job is not None
    assert job.status == "running"
    assert job.repo == "/r/a"
    assert store.job("nope") is None
    failure = Failure(
        fingerprint="fp-1",
        error_type="ZeroDivisionError",
        message="division by zero",
        frames=(Frame(file="calc.py", function="div", line=3),),
        failing_tests=("tests/test_calc.py::test_div",),
        source="pytest",
    )
    classification = Classification(
        failure_class=FailureClass.CODE_BUG, retryable=True, evidence=("E  ZeroDivisionError",)
    )
    store.record_failure(failure, job_id="job-a", step_index=0, classification=classification)
    [stored] = store.failures("job-a")
    assert stored.failure == failure
    assert stored.classification == classification
    with pytest.raises(BadInput, match="nope"):
        store.record_failure(failure, job_id="nope", step_index=0)
    with pytest.raises(BadInput, match="nope"):
        store.set_job_status("nope", "fixed")


def test_claim_then_repeat_across_jobs(store: AttemptStore) -> None:
    """Invariant: the same normalized patch is never verified twice for one fingerprint."""
    assert store.claim("fp-1", "n1", job_id="job-a") is True
    assert store.prior_claim("fp-1", "n1") is None  # claimed, not yet recorded
    attempt_id = store.record_attempt(record())
    assert store.claim("fp-1", "n1", job_id="job-a") is False
    assert store.claim("fp-1", "n1", job_id="job-b") is False
    prior = store.prior_claim("fp-1", "n1")
    assert prior is not None
    assert prior.id == attempt_id
    assert prior.outcome is Outcome.NO_EFFECT
    assert store.claim("fp-2", "n1", job_id="job-b") is True  # another fingerprint
    with pytest.raises(BadInput, match="ghost"):
        store.claim("fp-3", "n1", job_id="ghost")


def test_release_frees_transient_claims_but_never_judged_ones(store: AttemptStore) -> None:
    assert store.claim("fp-1", "n1", job_id="job-a")
    store.release("fp-1", "n1")  # e.g. the harness timed out
    assert store.claim("fp-1", "n1", job_id="job-a") is True
    store.record_attempt(record(outcome=Outcome.REGRESSION))
    store.release("fp-1", "n1")
    assert store.claim("fp-1", "n1", job_id="job-b") is False


def test_a_repeat_rejection_does_not_take_over_the_claim(store: AttemptStore) -> None:
    assert store.claim("fp-1", "n1", job_id="job-a")
    first = store.record_attempt(record(n=1))
    store.record_attempt(record(n=2, outcome=Outcome.REJECTED_REPEAT, normalized_diff_hash="n1"))
    prior = store.prior_claim("fp-1", "n1")
    assert prior is not None
    assert prior.id == first
    assert store.integrity_check() == []


def test_attempt_queries(store: AttemptStore) -> None:
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
    # The same fix again, later, under another exact diff: one entry per normalized hash.
    store.record_attempt(record("job-b", 5, outcome=Outcome.FIXED, normalized_diff_hash="n2"))
    assert [a.attempt_number for a in store.attempts(job_id="job-a")] == [1, 2]
    assert [a.attempt_number for a in store.attempts(fingerprint="fp-2")] == [4]
    assert len(store.attempts(step_index=0)) == 5
    assert store.attempts(step_index=1) == []
    fixes = store.verified_fixes("fp-1")
    assert [(f.attempt_number, f.normalized_diff_hash) for f in fixes] == [(5, "n2"), (3, "n3")]
    assert len(store.verified_fixes("fp-1", limit=1)) == 1
    assert store.attempt(fixes[0].id).attempt_number == 5
    with pytest.raises(BadInput, match="999"):
        store.attempt(999)


def test_secrets_never_reach_the_database_file(store: AttemptStore, tmp_path: Path) -> None:
    url_secret = "hunter2-" + "Sup3rS3cret"
    store.record_attempt(
        record(
            diff=f"+TOKEN = '{GH_TOKEN}'\n+aws = '{AWS_KEY}'\n",
            reason=f"failed calling https://bob:{url_secret}@127.0.0.1/x",
            log_excerpt=f"Authorization: token {GH_TOKEN}\n",
            rationale=f"use {AWS_KEY}",
        )
    )
    store.enqueue_control("job-a", "pause", arg=None, issued_by=f"bob {GH_TOKEN}")
    stored = store.attempts(job_id="job-a")[0]
    assert GH_TOKEN not in stored.diff
    assert "[REDACTED]" in stored.diff
    store.close()
    raw = b"".join(p.read_bytes() for p in (tmp_path / "mem").iterdir())
    for secret in (GH_TOKEN, AWS_KEY, url_secret):
        assert secret.encode() not in raw


def test_integrity_check_finds_broken_invariants(store: AttemptStore, tmp_path: Path) -> None:
    assert store.claim("fp-1", "n1", job_id="job-a")
    store.record_attempt(record())
    assert store.integrity_check() == []
    with contextlib.closing(sqlite3.connect(tmp_path / "mem" / "attempts.sqlite3")) as conn, conn:
        conn.execute("DELETE FROM claims")  # the judged patch is no longer protected
        conn.execute(
            "INSERT INTO failures (job_id, step_index, fingerprint, error_type, message,"
            " summary, frames_json, failing_tests_json, source, failure_class,"
            " classification_json, recorded_at) VALUES"
            " ('ghost', 0, 'f', '', '', '', '[]', '[]', 'g', '', '', 0)"
        )
    problems = store.integrity_check()
    assert any("no claim protects" in p for p in problems), problems
    assert any("foreign key: failures" in p for p in problems), problems


def test_similar_fixes_come_from_other_fingerprints(
    store: AttemptStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    failure = Failure(fingerprint="fp-1", error_type="KeyError", message="'user'")
    near = Failure(fingerprint="fp-2", error_type="KeyError", message="'user'")
    far = Failure(fingerprint="fp-3", error_type="OSError", message="disk full", summary="x")
    for n, f in enumerate((failure, near, far), start=1):
        store.record_failure(f, job_id="job-b", step_index=0)
        store.record_attempt(record("job-b", n, fingerprint=f.fingerprint, outcome=Outcome.FIXED))
    try:
        import patchheal.failure.analysis  # noqa: F401
    except ImportError:
        assert store.similar_fixes(failure) == []
        return
    hints = store.similar_fixes(failure, threshold=0.6)
    assert [h.fingerprint for h in hints] == ["fp-2"]
    assert hints[0].job_id == "job-b"
    assert hints[0].diff.startswith("---")
    assert store.similar_fixes(failure, exclude_fingerprint="fp-2") == []
    monkeypatch.setitem(sys.modules, "patchheal.failure.analysis", None)  # as if not installed
    assert store.similar_fixes(failure) == []


RACER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from patchheal.memory.store import AttemptStore
    db, go, job = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    store = AttemptStore(db)
    while not go.exists():
        time.sleep(0.002)
    wins = [k for k in range(60) if store.claim("fp-race", f"n{k}", job_id=job)]
    store.close()
    print(json.dumps(wins))
    """
)


def test_processes_racing_on_one_file_each_claim_wins_once(
    store: AttemptStore, tmp_path: Path
) -> None:
    """Invariant: the UNIQUE constraint makes claim atomic across processes."""
    go = tmp_path / "go"
    db = str(tmp_path / "mem" / "attempts.sqlite3")
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, db, str(go), job],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for job in ("job-a", "job-b", "job-a")
    ]
    time.sleep(1.0)  # let all three open the store
    go.touch()
    wins: list[int] = []
    for racer in racers:
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
        wins += json.loads(out)
    assert sorted(wins) == list(range(60))  # each key won by exactly one process


def test_control_queue_written_by_another_process(store: AttemptStore, tmp_path: Path) -> None:
    db = str(tmp_path / "mem" / "attempts.sqlite3")
    writer = (
        "import sys\n"
        "from patchheal.memory.store import AttemptStore\n"
        "s = AttemptStore(sys.argv[1])\n"
        "s.enqueue_control('job-a', 'pause', arg=None, issued_by='alice@tty1')\n"
        "s.enqueue_control('job-a', 'resume-from-step', arg=2, issued_by='alice@tty1')\n"
        "s.close()\n"
    )
    subprocess.run([sys.executable, "-c", writer, db], check=True, timeout=60)
    pending = store.pending_controls("job-a")
    assert [(c.command, c.arg, c.issued_by) for c in pending] == [
        ("pause", None, "alice@tty1"),
        ("resume-from-step", 2, "alice@tty1"),
    ]
    assert pending[0].issued_at <= pending[1].issued_at
    assert pending[0].id is not None
    store.finish_control(pending[0].id, result="applied")
    assert [c.command for c in store.pending_controls("job-a")] == ["resume-from-step"]
    assert store.controls("job-a")[0].result == "applied"
    with pytest.raises(BadInput, match="already finished"):
        store.finish_control(pending[0].id, result="again")
    with pytest.raises(BadInput, match="unknown control command 'explode'"):
        store.enqueue_control("job-a", "explode", arg=None, issued_by="x")
    with pytest.raises(BadInput, match="needs a step number"):
        store.enqueue_control("job-a", "resume-from-step", arg=None, issued_by="x")
    assert store.pending_controls("job-b") == []


def test_approach_and_degraded_memory_are_stored_per_attempt_scrubbed(
    store: AttemptStore, tmp_path: Path
) -> None:
    degraded = f"similar-failure search timed out (token {GH_TOKEN})"
    store.record_attempt(record(approach="gather_more_context", memory_degraded=degraded))
    stored = store.attempts(job_id="job-a")[0]
    assert stored.approach == "gather_more_context"
    assert "timed out" in stored.memory_degraded
    assert GH_TOKEN not in stored.memory_degraded
    store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "mem" / "attempts.sqlite3")) as db:
        row = db.execute("SELECT approach, memory_degraded FROM attempts").fetchone()
    assert row[0] == "gather_more_context"
    assert "timed out" in row[1]
    assert GH_TOKEN not in row[1]


def test_a_store_from_before_the_approach_columns_opens_and_keeps_its_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite3"
    with AttemptStore(path) as s:
        s.ensure_job("job-a", repo="/r/a", base="main", spec_toml="")
        s.record_attempt(record())
    # The schema as it was: the attempts table without the two columns.
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("ALTER TABLE attempts DROP COLUMN approach")
        db.execute("ALTER TABLE attempts DROP COLUMN memory_degraded")
        db.commit()
    with AttemptStore(path) as s:
        old = s.attempts(job_id="job-a")[0]
        assert (old.approach, old.memory_degraded) == ("", "")
        s.record_attempt(record(n=2, approach="try_alternative"))
        assert [a.approach for a in s.attempts(job_id="job-a")] == ["", "try_alternative"]
