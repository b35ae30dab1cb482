"""Crash safety: SIGKILL a real `python -m patchheal heal` at random points, many times.

Each round is a fresh 3-step job. It is started with `--resume` and killed,
again and again, at a random moment: either a random delay after the process
starts (start-up, lock, workspace, reproduction) or a random delay after a
randomly chosen event appears in its events.jsonl (proposal, verification,
recording, checkpoint, publishing, report). After every kill the store passes
its integrity check and the event log reads back (a torn last line is
tolerated). After the kills, `patchheal gc` removes the dead run's workspace,
`--resume` finishes the job, nothing of the run is left under the worktree
root, and `patchheal store rebuild` finds the event log and the store in
agreement. The random seed is fixed, so a failure can be replayed.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from patchheal.memory.store import AttemptStore
from patchheal.telemetry.events import EventLog
from tests.healjobs import (
    FIX,
    WRONG,
    diff_for,
    fixer_proposer,
    heal_in_process,
    make_calc_repo,
    make_multi_repo,
    multi_steps,
    patchheal_cli,
    start_heal,
    state_args,
    workspace_of,
    write_fixer,
    write_spec,
)

SEED = 6_2024
MIN_KILLS = 50
KILLS_PER_ROUND = 10
MAX_ROUNDS = 20
# Events a kill may be aimed at (it lands a random 0-150 ms after the event).
TARGETS = (
    "job.started",
    "step.started",
    "failure.recorded",
    "self_heal.triggered",
    "step.attempt.started",
    "step.attempt.finished",
    "step.checkpointed",
    "self_heal.recovered",
    "job.finished",
)


def _events(path: Path) -> list[str]:
    """Event types of the log; reading it must never fail after a kill."""
    return [e.type for e in EventLog.read(path)] if path.exists() else []


def _check_store(db: Path) -> None:
    if not db.exists():
        return  # killed before the store was created
    store = AttemptStore(str(db))
    try:
        assert store.integrity_check() == []
    finally:
        store.close()


def _kill_once(
    rng: random.Random, spec: Path, root: Path, log: Path
) -> tuple[str, int | None, str]:
    """Start a resume and SIGKILL it; returns (how it was aimed, exit code if it ended
    first, the last event before the kill)."""
    before = len(_events(log))
    proc = start_heal(spec, root, "--resume")
    if rng.random() < 0.3:
        aim = f"after {rng.uniform(0.05, 2.0):.2f} s"
        deadline = time.monotonic() + float(aim.split()[1])
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
    else:
        target, lag = rng.choice(TARGETS), rng.uniform(0.0, 0.15)
        aim = f"{lag * 1000:.0f} ms after {target}"
        while proc.poll() is None and target not in _events(log)[before:]:
            time.sleep(0.005)
        time.sleep(lag)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.communicate()
    code = None if proc.returncode == -signal.SIGKILL else proc.returncode
    new = _events(log)[before:]
    return aim, code, new[-1] if new else "(start-up)"


@pytest.mark.slow
@pytest.mark.timeout(1200)  # 50+ kills of real runs (each verifies twice, reproduces twice)
def test_sigkill_at_random_points_then_resume_finishes_and_gc_cleans(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    kills: list[tuple[int, str, str]] = []
    rounds = 0
    while len(kills) < MIN_KILLS and rounds < MAX_ROUNDS:
        rounds += 1
        root = tmp_path / f"round-{rounds}"
        root.mkdir()
        job = f"crash-{rounds}"
        repo = make_multi_repo(root, 3)
        spec = write_spec(
            root / "job.toml",
            repo,
            job_id=job,
            steps=multi_steps(3),
            proposer=fixer_proposer(write_fixer(root), root / "calls.log"),
        )
        log = root / "var" / "runs" / job / "events.jsonl"
        db = root / "store.sqlite3"
        for _ in range(KILLS_PER_ROUND):
            aim, code, last = _kill_once(rng, spec, root, log)
            _check_store(db)
            _events(log)  # reads back, or raises
            if code is not None:
                assert code == 0, f"round {rounds}: the run ended with {code} ({aim})"
                break  # the job finished before the kill landed
            kills.append((rounds, aim, last))

        # The killed run's workspace is garbage now; gc finds and removes it.
        done = patchheal_cli("gc", "--db", str(db))
        assert done.returncode == 0, done.stderr
        assert not workspace_of(job, db).exists(), done.stdout
        done = patchheal_cli("heal", str(spec), *state_args(root), "--resume", "--json")
        assert done.returncode == 0, f"round {rounds}: resume failed:\n{done.stderr}"
        _check_store(db)
        done = patchheal_cli("gc", "--db", str(db))
        assert done.returncode == 0, done.stderr
        assert not workspace_of(job, db).exists()
        # The event log, torn lines and all, still tells the store's story.
        runs = str(root / "var" / "runs")
        done = patchheal_cli("store", "rebuild", "--runs", runs, "--db", str(db))
        assert "matches the event logs" in done.stdout, done.stdout + done.stderr
        for index in (1, 2, 3):
            shown = subprocess.run(
                ["git", "show", f"patchheal/local/{job}:bugs/b{index}.py"],
                cwd=repo, capture_output=True, text=True, check=True,
            )  # fmt: skip
            assert "a + b" in shown.stdout

    phases = Counter(last for _, _, last in kills)
    print(f"{len(kills)} kills in {rounds} rounds; last event before each kill: {dict(phases)}")
    assert len(kills) >= MIN_KILLS, f"only {len(kills)} kills in {rounds} rounds"
    # Kills landed across the run: start-up and at least five kinds of place in the loop.
    assert "(start-up)" in phases, phases
    assert len(phases) >= 6, phases


def test_attempt_logged_but_not_stored_is_recovered_before_the_next_run(tmp_path: Path) -> None:
    """A run killed after an attempt's event and before its store commit: the next run of
    the job records it from the log first, so the same patch is not verified twice."""
    repo = make_calc_repo(tmp_path)
    wrong, fix = diff_for(repo, {"calc.py": WRONG}), diff_for(repo, {"calc.py": FIX})
    spec = write_spec(tmp_path / "job.toml", repo, diffs=[wrong], budget="max_attempts = 1")
    assert heal_in_process(tmp_path, spec).report.status == "not_fixed"
    db = tmp_path / "store.sqlite3"
    # What the store looks like when the commit of attempt 1 never happened.
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM claims")
        conn.execute("DELETE FROM attempts")
    spec = write_spec(tmp_path / "job.toml", repo, diffs=[wrong, fix])
    result = heal_in_process(tmp_path, spec)
    assert [(a.attempt_number, a.outcome.value) for a in result.report.steps[0].attempts] == [
        (2, "rejected_repeat"),
        (3, "fixed"),
    ]
    store = AttemptStore(str(db))
    try:
        assert [a.outcome.value for a in store.attempts(job_id="calc")] == [
            "no_effect",
            "rejected_repeat",
            "fixed",
        ]
        assert store.integrity_check() == []
    finally:
        store.close()
