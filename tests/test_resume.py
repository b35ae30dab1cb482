"""Resume and --from-step: a multi-step job continues from its checkpoints, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchheal.memory.store import AttemptStore
from tests.healjobs import (
    events_of,
    fixer_calls,
    fixer_proposer,
    git,
    make_multi_repo,
    multi_steps,
    patchheal_cli,
    state_args,
    write_fixer,
    write_spec,
)

JOB = "multi"


def three_step_job(root: Path) -> Path:
    repo = make_multi_repo(root, 3)
    fixer = write_fixer(root)
    return write_spec(
        root / "job.toml",
        repo,
        job_id=JOB,
        steps=multi_steps(3),
        proposer=fixer_proposer(fixer, root / "calls.log"),
    )


def attempts_by_step(root: Path) -> list[tuple[int, str, str]]:
    store = AttemptStore(str(root / "store.sqlite3"))
    try:
        return [(a.step_index, a.outcome.value, a.proposer) for a in store.attempts(job_id=JOB)]
    finally:
        store.close()


def heal(root: Path, spec: Path, *extra: str) -> tuple[int, dict[str, object], str]:
    done = patchheal_cli("heal", str(spec), *state_args(root), "--json", *extra)
    summary = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, summary, done.stderr


@pytest.mark.slow
def test_resume_continues_at_the_step_after_the_last_checkpoint(tmp_path: Path) -> None:
    """Steps 1-2 are verified once: --resume heals step 3 without re-running their attempts."""
    spec = three_step_job(tmp_path)
    code, summary, _ = heal(tmp_path, spec, "--max-proposer-calls", "2")
    assert code == 1
    assert summary["status"] == "manual_handoff"
    assert "proposer budget of 2 calls is spent" in str(summary["stop_reason"])
    assert [c["target"] for c in fixer_calls(tmp_path / "calls.log")] == ["b1.py", "b2.py"]
    assert attempts_by_step(tmp_path) == [(1, "fixed", "agent"), (2, "fixed", "agent")]

    code, summary, stderr = heal(tmp_path, spec, "--resume")
    assert code == 0, stderr
    assert summary["status"] == "fixed"
    assert "2 step(s) already verified, continuing at step 3" in stderr
    # Only step 3 ran: one more proposer call, one more attempt, no reproduction of 1-2.
    assert [c["target"] for c in fixer_calls(tmp_path / "calls.log")] == ["b1.py", "b2.py", "b3.py"]
    assert attempts_by_step(tmp_path)[2:] == [(3, "fixed", "agent")]
    last_run = _last_run(events_of(tmp_path, JOB))
    assert {e["step_index"] for e in last_run if e["type"] == "step.started"} == {3}
    [resumed] = [e for e in last_run if e["type"] == "resume.from_step"]
    assert resumed["step_index"] == 3
    repo = tmp_path / "multi-repo"
    assert git(repo, "log", "--format=%s", f"main..patchheal/local/{JOB}").count("heal step") == 3


@pytest.mark.slow
def test_from_step_rebuilds_from_the_earlier_checkpoints_and_heals_again(tmp_path: Path) -> None:
    spec = three_step_job(tmp_path)
    code, _, _ = heal(tmp_path, spec)
    assert code == 0
    steps = tmp_path / "var" / "runs" / JOB / "steps"
    first_meta = {i: json.loads((steps / f"step-{i:04d}.json").read_text()) for i in (1, 2, 3)}

    code, summary, stderr = heal(tmp_path, spec, "--from-step", "2")
    assert code == 0, stderr
    assert summary["status"] == "fixed"
    # Steps 2 and 3 are healed again (their verified fixes are reused first, from memory);
    # step 1 is replayed from its checkpoint, not healed.
    assert attempts_by_step(tmp_path)[3:] == [(2, "fixed", "memory"), (3, "fixed", "memory")]
    last_run = _last_run(events_of(tmp_path, JOB))
    assert [e["step_index"] for e in last_run if e["type"] == "step.started"] == [2, 3]
    [resumed] = [e for e in last_run if e["type"] == "resume.from_step"]
    assert resumed["step_index"] == 2
    again = {i: json.loads((steps / f"step-{i:04d}.json").read_text()) for i in (1, 2, 3)}
    assert again[1] == first_meta[1]
    for index in (2, 3):
        assert again[index]["finished_at"] > first_meta[index]["finished_at"]
        assert again[index]["files"] == first_meta[index]["files"]


def test_from_step_beyond_the_checkpoints_is_bad_input(tmp_path: Path) -> None:
    """Nothing is started, locked or changed: exit 2 with a message naming what exists."""
    spec = three_step_job(tmp_path)
    code, _, stderr = heal(tmp_path, spec, "--from-step", "3")
    assert code == 2
    assert "--from-step 3: only 0 step checkpoint(s) exist" in stderr
    assert "Traceback" not in stderr
    code, _, stderr = heal(tmp_path, spec, "--from-step", "4")
    assert code == 2
    assert "--from-step 4: the job has 3 step(s)" in stderr
    assert events_of(tmp_path, JOB) == []
    assert fixer_calls(tmp_path / "calls.log") == []


@pytest.mark.slow
def test_resume_of_a_finished_job_only_replays_and_publishes(tmp_path: Path) -> None:
    spec = three_step_job(tmp_path)
    assert heal(tmp_path, spec)[0] == 0
    code, summary, _ = heal(tmp_path, spec, "--resume")
    assert code == 0
    assert summary["status"] == "fixed"
    assert summary["attempts"] == []
    assert len(fixer_calls(tmp_path / "calls.log")) == 3


def _last_run(events: list[dict[str, object]]) -> list[dict[str, object]]:
    starts = [i for i, e in enumerate(events) if e["type"] == "job.started"]
    return events[starts[-1] :]


@pytest.mark.slow
def test_store_rebuild_from_the_event_logs_reproduces_the_live_attempts(tmp_path: Path) -> None:
    """Two runs of one job (a handoff, then --resume) and a --from-step run: replaying their
    event log into a fresh store gives the live store's jobs, attempts, failures, claims."""
    spec = three_step_job(tmp_path)
    assert heal(tmp_path, spec, "--max-proposer-calls", "2")[0] == 1
    assert heal(tmp_path, spec, "--resume")[0] == 0
    assert heal(tmp_path, spec, "--from-step", "3")[0] == 0
    db = str(tmp_path / "store.sqlite3")
    done = patchheal_cli("store", "rebuild", "--runs", str(tmp_path / "var" / "runs"), "--db", db)
    assert done.returncode == 0, done.stderr
    assert "1 jobs, 4 attempts" in done.stdout
    assert "matches the event logs" in done.stdout, done.stdout
