"""Operator control of a running heal, from a second real process; job locks.

The heal runs as `python -m patchheal heal` in the background. Its proposer is
the fixer agent, which waits for a gate file before it proposes, so a test can
queue a command with `python -m patchheal control` while an attempt is in
flight and know that the loop reads it before the next attempt.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from patchheal.memory.store import AttemptStore
from tests.healjobs import (
    events_of,
    fixer_calls,
    fixer_proposer,
    make_multi_repo,
    multi_steps,
    patchheal_cli,
    start_heal,
    state_args,
    wait_for,
    write_fixer,
    write_spec,
)

JOB = "multi"
pytestmark = pytest.mark.slow


class GatedJob:
    """A multi-step job whose fixer agent waits for `gate/go-N` before its N-th proposal."""

    def __init__(self, root: Path, steps: int = 1, budget: str = "", **fixer: Any) -> None:
        self.root = root
        self.gate = root / "gate"
        self.gate.mkdir()
        self.log = root / "calls.log"
        repo = make_multi_repo(root, steps)
        self.spec = write_spec(
            root / "job.toml",
            repo,
            job_id=JOB,
            steps=multi_steps(steps),
            proposer=fixer_proposer(write_fixer(root), self.log, gate=self.gate, **fixer),
            budget=budget,
        )
        self.proc: subprocess.Popen[str] | None = None

    def start(self, *extra: str) -> None:
        self.proc = start_heal(self.spec, self.root, *extra)

    def open(self, *calls: int) -> None:
        for call in calls:
            (self.gate / f"go-{call}").touch()

    def wait_call(self, n: int) -> None:
        """Wait until the fixer's n-th call is running (an attempt is in flight)."""
        try:
            wait_for(lambda: len(fixer_calls(self.log)) >= n, what=f"fixer call {n}")
        except AssertionError:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
            _, err = self.proc.communicate() if self.proc else ("", "")
            raise AssertionError(f"no fixer call {n}; heal said:\n{err}") from None

    def control(self, *args: str) -> str:
        done = patchheal_cli("control", JOB, *args, "--db", str(self.root / "store.sqlite3"))
        assert done.returncode == 0, done.stderr
        return done.stdout

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        assert self.proc is not None
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            calls = fixer_calls(self.log)
            raise AssertionError(f"heal did not finish:\n{err}\ncalls: {calls}") from None
        return self.proc.returncode, out, err

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        events = events_of(self.root, JOB)
        return [e for e in events if kind is None or e["type"] == kind]

    def report(self) -> dict[str, Any]:
        return json.loads((self.root / "reports" / JOB / "report.json").read_text())

    def outcomes(self) -> list[tuple[int, str, str]]:
        store = AttemptStore(str(self.root / "store.sqlite3"))
        try:
            return [(a.step_index, a.outcome.value, a.proposer) for a in store.attempts(job_id=JOB)]
        finally:
            store.close()


@pytest.fixture
def cleanup() -> Any:
    jobs: list[GatedJob] = []
    yield jobs.append
    for job in jobs:
        if job.proc is not None and job.proc.poll() is None:
            job.proc.kill()
            job.proc.communicate()


def _applied(job: GatedJob, command: str) -> list[dict[str, Any]]:
    return [e for e in job.events("control.applied") if e["data"]["command"] == command]


def test_pause_stops_between_attempts_until_resume(tmp_path: Path, cleanup: Any) -> None:
    job = GatedJob(tmp_path, default="wrong", fix_calls=(2,))
    cleanup(job)
    job.open(2)
    job.start()
    job.wait_call(1)
    assert "queued pause for multi" in job.control("pause")
    job.open(1)
    wait_for(lambda: _applied(job, "pause"), what="the pause to be applied")
    wait_for(lambda: job.events("step.attempt.finished"), what="attempt 1 to finish")
    time.sleep(1.5)
    # Paused: the process runs, no new proposal, no new attempt.
    assert job.running()
    assert len(fixer_calls(job.log)) == 1
    assert len(job.events("step.attempt.started")) == 1
    job.control("resume")
    code, _out, err = job.finish()
    assert code == 0, err
    assert "paused by" in err
    assert "resumed by" in err
    kinds = [
        (e["type"], e["data"].get("command"), e.get("attempt"))
        for e in job.events()
        if e["type"] in ("control.received", "step.attempt.finished", "step.attempt.started")
    ]
    assert kinds == [
        ("step.attempt.started", None, 1),
        ("step.attempt.finished", None, 1),
        ("control.received", "pause", None),
        ("control.received", "resume", None),
        ("step.attempt.started", None, 2),
        ("step.attempt.finished", None, 2),
    ]
    # Who issued each command and when: in the events and in the store's queue.
    for event in job.events("control.received"):
        assert "@" in event["data"]["issued_by"]
        assert event["data"]["issued_at"] <= event["time"]
    store = AttemptStore(str(tmp_path / "store.sqlite3"))
    try:
        rows = store.controls(JOB)
    finally:
        store.close()
    assert [(r.command, r.status, r.result) for r in rows] == [
        ("pause", "done", "applied"),
        ("resume", "done", "applied"),
    ]
    assert all(r.issued_by and r.issued_at <= (r.finished_at or 0) for r in rows)


def test_cancel_stops_the_job_retryable_and_resumable(tmp_path: Path, cleanup: Any) -> None:
    job = GatedJob(tmp_path, default="wrong", fix_calls=(2,))
    cleanup(job)
    job.start()
    job.wait_call(1)
    job.control("cancel")
    job.open(1)
    code, out, _err = job.finish()
    assert code == 1
    assert f"job {JOB}: cancelled (retryable)" in out
    assert "cancel by" in out
    report = job.report()
    assert (report["status"], report["retryable"]) == ("cancelled", True)
    assert job.outcomes() == [(1, "no_effect", "agent")]

    job.open(2)
    job.start("--resume")
    code, out, err = job.finish()
    assert code == 0, err
    assert job.report()["status"] == "fixed"
    assert job.outcomes()[-1] == (1, "fixed", "agent")


def test_takeover_stops_automation_and_keeps_the_worktree(tmp_path: Path, cleanup: Any) -> None:
    job = GatedJob(tmp_path, default="wrong")
    cleanup(job)
    job.start()
    job.wait_call(1)
    job.control("takeover")
    job.open(1, 2, 3)
    code, out, _err = job.finish()
    assert code == 1
    assert f"job {JOB}: taken_over" in out
    kept = [Path(line.split(": ", 1)[1]) for line in out.splitlines() if "worktree kept:" in line]
    assert kept, out
    for tree in kept:
        assert (tree / "bugs" / "b1.py").is_file()
    assert len(fixer_calls(job.log)) == 1  # no proposal after the takeover
    assert job.report()["status"] == "taken_over"
    # A worktree left for a person is not garbage: gc keeps it.
    done = patchheal_cli("gc", "--db", str(tmp_path / "store.sqlite3"))
    assert done.returncode == 0, done.stderr
    assert all(tree.is_dir() for tree in kept)


def test_retry_step_gives_the_step_a_fresh_budget(tmp_path: Path, cleanup: Any) -> None:
    job = GatedJob(tmp_path, default="wrong", fix_calls=(2,), budget="max_attempts = 1")
    cleanup(job)
    job.open(2)
    job.start()
    job.wait_call(1)
    job.control("retry-step")
    job.open(1)
    code, _out, err = job.finish()
    assert code == 0, err  # without retry-step, max_attempts = 1 ends after attempt 1
    assert job.outcomes() == [(1, "no_effect", "agent"), (1, "fixed", "agent")]
    assert "retry-step by" in err
    assert _applied(job, "retry-step")


def test_hard_reset_step_rebuilds_the_worktree_and_reruns_the_step(
    tmp_path: Path, cleanup: Any
) -> None:
    job = GatedJob(tmp_path, steps=2, default="fix", wrong_calls=(2,))
    cleanup(job)
    job.open(1, 3)
    job.start()
    job.wait_call(2)  # step 2's first proposal
    job.control("hard-reset-step")
    job.open(2)
    code, _out, err = job.finish()
    assert code == 0, err
    calls = fixer_calls(job.log)
    assert [c["target"] for c in calls] == ["b1.py", "b2.py", "b2.py"]
    assert [c["fresh_worktree"] for c in calls] == [True, False, True]
    [escalated] = job.events("self_heal.escalated")
    assert escalated["step_index"] == 2
    assert "hard-reset-step by" in escalated["data"]["reason"]
    assert [e["step_index"] for e in job.events("step.started")] == [1, 2, 2]


def test_resume_from_step_heals_from_that_step_again(tmp_path: Path, cleanup: Any) -> None:
    job = GatedJob(tmp_path, steps=3, default="fix", wrong_calls=(3,))
    cleanup(job)
    job.open(1, 2, 4)
    job.start()
    job.wait_call(3)  # step 3's first proposal
    job.control("resume-from-step", "2")
    job.open(3)
    code, _out, err = job.finish()
    assert code == 0, err
    assert [e["step_index"] for e in job.events("step.started")] == [1, 2, 3, 2, 3]
    assert [e["step_index"] for e in job.events("resume.from_step")] == [2]
    # Step 2 again: its verified fix is reused from memory; step 3 gets a new proposal.
    assert job.outcomes() == [
        (1, "fixed", "agent"),
        (2, "fixed", "agent"),
        (3, "no_effect", "agent"),
        (2, "fixed", "memory"),
        (3, "fixed", "agent"),
    ]


def test_pause_and_cancel_during_a_checkpoint_replay(tmp_path: Path, cleanup: Any) -> None:
    """Commands queued before a resume are honored before any checkpoint is replayed;
    the checkpoints stay as they were, and a later resume finishes the job."""
    job = GatedJob(tmp_path, steps=3, default="fix")
    cleanup(job)
    job.open(1, 2, 3)
    first = patchheal_cli("heal", str(job.spec), *state_args(tmp_path), "--max-proposer-calls", "2")
    assert first.returncode == 1, first.stderr
    assert "proposer budget of 2 calls is spent" in first.stdout, first.stderr
    steps = tmp_path / "var" / "runs" / JOB / "steps"
    before = {p.name: p.read_bytes() for p in steps.iterdir()}
    job.control("pause", "--next-run")  # no live run: asked for explicitly
    job.start("--resume")
    wait_for(lambda: _applied(job, "pause"), what="the pause to be applied")
    time.sleep(1.0)
    assert job.running()
    runs = [i for i, e in enumerate(job.events()) if e["type"] == "job.started"]
    assert not [e for e in job.events()[runs[-1] :] if e["type"] == "step.started"]
    job.control("cancel")
    code, out, _err = job.finish()
    assert code == 1
    assert f"job {JOB}: cancelled (retryable)" in out
    assert {p.name: p.read_bytes() for p in steps.iterdir()} == before

    job.start("--resume")
    code, _out, err = job.finish()
    assert code == 0, err
    assert [c["target"] for c in fixer_calls(job.log)] == ["b1.py", "b2.py", "b3.py"]


def test_second_heal_of_a_running_job_is_refused(tmp_path: Path, cleanup: Any) -> None:
    job = GatedJob(tmp_path)
    cleanup(job)
    job.start()
    job.wait_call(1)
    second = patchheal_cli("heal", str(job.spec), *state_args(tmp_path))
    assert second.returncode == 2
    assert f"job {JOB} is locked by" in second.stderr
    assert job.proc is not None
    assert f"pid {job.proc.pid} is running on this host" in second.stderr
    assert "Traceback" not in second.stderr
    job.open(1)
    code, _out, err = job.finish()
    assert code == 0, err


@pytest.mark.parametrize("expired", [True, False], ids=["expired", "unexpired"])
def test_lock_of_a_dead_run_is_reclaimed_with_an_audit_record(
    tmp_path: Path, cleanup: Any, expired: bool
) -> None:
    job = GatedJob(tmp_path)
    cleanup(job)
    db = tmp_path / "store.sqlite3"
    # A real process takes the job's lock and dies without releasing it.
    ghost = subprocess.run(
        [sys.executable, "-c",
         "import os, sys; from patchheal.memory.store import AttemptStore;"
         "s = AttemptStore(sys.argv[1]); s.acquire_lock('multi', owner='ghost', ttl_seconds=600);"
         "print(os.getpid()); os._exit(0)", str(db)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    ghost_pid = int(ghost.stdout)
    if expired:
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE locks SET created_at = created_at - 7200, expires_at = ?", (
                time.time() - 3600,))  # fmt: skip
    job.open(1)
    job.start()
    code, _out, err = job.finish()
    assert code == 0, err
    store = AttemptStore(str(db))
    try:
        [audit] = store.lock_audit(JOB)
        assert store.list_locks() == []
    finally:
        store.close()
    assert (audit.action, audit.owner, audit.pid) == ("reclaimed", "ghost", ghost_pid)
    assert f"pid {ghost_pid} is gone" in audit.reason
    assert ("s ago" in audit.reason) is expired  # "expired 3600 s ago" / "had not expired yet"
    assert job.proc is not None
    assert audit.by_pid == job.proc.pid
    [event] = job.events("lock.reclaimed")
    assert event["data"]["pid"] == ghost_pid
    assert event["data"]["owner"] == "ghost"


def test_a_command_the_run_never_reached_does_not_stop_the_next_run(
    tmp_path: Path, cleanup: Any
) -> None:
    """A cancel queued while the attempt that fixes the last step runs comes too late:
    it is recorded as not applied, and the job's next run is not cancelled by it."""
    job = GatedJob(tmp_path)
    cleanup(job)
    job.start()
    job.wait_call(1)
    job.control("cancel")
    job.open(1)
    code, _out, err = job.finish()
    assert code == 0, err
    store = AttemptStore(str(tmp_path / "store.sqlite3"))
    try:
        [row] = store.controls(JOB)
    finally:
        store.close()
    assert (row.command, row.status) == ("cancel", "done")
    assert row.result == "not applied: the run ended first (fixed)"
    assert not _applied(job, "cancel")
    job.start("--resume")
    code, _out, err = job.finish()
    assert code == 0, err
    assert job.report()["status"] == "fixed"


def test_sigterm_stops_the_run_like_ctrl_c_and_it_resumes(tmp_path: Path, cleanup: Any) -> None:
    """A CI runner cancelling its job sends SIGTERM: exit 130, report written, resumable,
    and the agent's process group is gone with it."""
    job = GatedJob(tmp_path, steps=2)
    cleanup(job)
    job.open(1)
    job.start("--json")
    job.wait_call(2)
    assert job.proc is not None
    job.proc.terminate()
    code, out, err = job.finish()
    assert code == 130
    assert "continue with --resume" in err
    summary = json.loads(out)  # a scheduler still gets its summary of the stopped run
    assert (summary["status"], summary["retryable"]) == ("cancelled", True)
    report = job.report()
    assert (report["status"], report["retryable"]) == ("cancelled", True)
    assert [e["data"]["status"] for e in job.events("job.finished")] == ["cancelled"]
    assert len(fixer_calls(job.log)) == 2
    job.open(2, 3)  # the interrupted call 2 is never answered; a new call 3 is made
    time.sleep(0.5)
    assert len(fixer_calls(job.log)) == 2  # the agent of call 2 was killed, not waiting
    job.start("--resume")
    code, _out, err = job.finish()
    assert code == 0, err
    assert [c["target"] for c in fixer_calls(job.log)] == ["b1.py", "b2.py", "b2.py"]
