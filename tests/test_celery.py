"""Scale-out on Celery: a real Redis broker, two real `patchheal worker`s, one real store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from patchheal.celery.settings import QueueSettings, decide
from patchheal.memory.store import AttemptStore
from tests.healjobs import (
    FIX,
    WRONG,
    diff_for,
    events_of,
    fixer_calls,
    fixer_proposer,
    make_calc_repo,
    make_multi_repo,
    multi_steps,
    state_args,
    wait_for,
    write_fixer,
    write_spec,
)
from tests.redis_support import start_redis

BACKOFF = 2.0  # the workers' first retry delay, seconds


def test_exit_codes_map_to_queue_moves() -> None:
    settings = QueueSettings(max_queue_attempts=3, backoff_seconds=2, backoff_cap_seconds=5)
    moves = {
        (code, retryable, attempt): decide(
            code, retryable, queue_attempt=attempt, infra_requeues=0, settings=settings
        ).action
        for code, retryable, attempt in [
            (0, False, 1),
            (1, False, 1),
            (1, True, 1),
            (1, True, 3),
            (2, False, 1),
            (3, False, 3),
            (130, True, 3),
        ]
    }
    assert moves == {
        (0, False, 1): "done",
        (1, False, 1): "done",
        (1, True, 1): "retry",
        (1, True, 3): "done",  # the counted attempts are spent
        (2, False, 1): "fail",
        (3, False, 3): "requeue",  # not counted: the job never ran
        (130, True, 3): "requeue",
    }
    assert [settings.backoff(n) for n in (1, 2, 3, 4)] == [2, 4, 5, 5]
    spent = decide(3, False, queue_attempt=1, infra_requeues=10, settings=QueueSettings())
    assert spent.action == "done"


def test_without_the_extra_submit_says_how_to_get_it(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "job.toml", make_calc_repo(tmp_path), diffs=[])
    # A real process in which `import celery` fails, as without the extra.
    code = "import sys; sys.modules['celery'] = None; from patchheal.cli import main; main()"
    argv = [sys.executable, "-c", code, "submit", str(spec), "--broker", "redis://127.0.0.1:1/0"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "pip install 'patchheal[celery]'" in done.stderr


@dataclass
class Fleet:
    broker: str
    workers: list[subprocess.Popen[bytes]]
    logs: list[Path]
    worktree_root: Path

    def log_text(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in self.logs)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Redis on loopback and two `patchheal worker` processes (one job at a time each)."""
    try:
        import celery  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("the celery extra is not installed, and CI is set")
        pytest.skip("the celery extra is not installed (pip install -e '.[celery]')")
    root = tmp_path_factory.mktemp("fleet")
    redis = start_redis(root / "redis")
    broker = next(redis)
    env = {**os.environ, "PATCHHEAL_WORKTREE_ROOT": str(root / "wt")}
    workers, logs = [], []
    for i in range(2):
        logs.append(root / f"worker-{i}.log")
        argv = [sys.executable, "-m", "patchheal", "worker", "--broker", broker]
        argv += ["--name", f"w{i}@%h", "--backoff", str(BACKOFF), "--queue-attempts", "3"]
        with logs[-1].open("wb") as log:
            workers.append(
                subprocess.Popen(
                    argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            )
    fleet = Fleet(broker, workers, logs, root / "wt")
    try:
        for log_path in logs:
            wait_for(
                lambda p=log_path: "ready." in p.read_text(errors="replace"),
                timeout=90,
                what=f"worker ready in {log_path}",
            )
        yield fleet
    finally:
        for worker in workers:  # our own sessions: the worker and its pool children
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=30)
        redis.close()


def submit(fleet: Fleet, root: Path, *specs: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "patchheal", "submit", *map(str, specs)]
    argv += ["--broker", fleet.broker, "--wait", "--json", "--timeout", "240", *state_args(root)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], fleet: Fleet) -> tuple[int, list[dict[str, Any]]]:
    out, err = proc.communicate(timeout=300)
    assert out.strip(), f"{err[-2000:]}\n{fleet.log_text()}"
    return proc.returncode, [json.loads(line) for line in out.splitlines() if line.strip()]


def verified(db: Path) -> list[tuple[str, str, str, str]]:
    """(job, fingerprint, diff hash, outcome) of every candidate that reached the harness."""
    store = AttemptStore(str(db))
    try:
        assert store.integrity_check() == []
        attempts = store.attempts()
    finally:
        store.close()
    return [
        (a.job_id, a.fingerprint, a.diff_hash, a.outcome.value)
        for a in attempts
        if a.outcome.value not in ("rejected_repeat", "rejected_policy", "apply_failed")
    ]


@pytest.mark.slow
def test_two_workers_heal_a_batch_and_never_verify_a_patch_twice(
    fleet: Fleet, tmp_path: Path
) -> None:
    specs = []
    for i in range(4):
        repo = make_calc_repo(tmp_path / f"j{i}")
        wrong, fix = diff_for(repo, {"calc.py": WRONG}), diff_for(repo, {"calc.py": FIX})
        specs.append(
            write_spec(tmp_path / f"job-{i}.toml", repo, job_id=f"q-{i}", diffs=[wrong, fix])
        )
    code, summaries = finish(submit(fleet, tmp_path, *specs), fleet)
    assert code == 0, fleet.log_text()
    assert [s["status"] for s in summaries] == ["fixed"] * 4
    assert {s["queue"]["attempt"] for s in summaries} == {1}
    assert len({s["queue"]["worker"] for s in summaries}) == 2  # both workers took jobs
    runs = verified(tmp_path / "store.sqlite3")
    # The same bug in four repositories: the wrong patch is verified once across both
    # workers (the claim on (fingerprint, diff) is shared), the fix once per repository.
    assert Counter(outcome for *_, outcome in runs) == {"no_effect": 1, "fixed": 4}


@pytest.mark.slow
def test_a_worker_killed_mid_job_gives_it_back_and_another_heals_it(
    fleet: Fleet, tmp_path: Path
) -> None:
    repo = make_multi_repo(tmp_path, 1)
    gate, log = tmp_path / "gate", tmp_path / "fixer.log"
    gate.mkdir()
    proposer = fixer_proposer(write_fixer(tmp_path), log, gate=gate)
    spec = write_spec(
        tmp_path / "kill.toml", repo, job_id="killed", steps=multi_steps(1), proposer=proposer
    )
    waiting = submit(fleet, tmp_path, spec)
    wait_for(lambda: fixer_calls(log), timeout=120, what="the first proposer call")
    store = AttemptStore(str(tmp_path / "store.sqlite3"))
    try:
        holder = next(lock for lock in store.list_locks() if lock.job_id == "killed")
    finally:
        store.close()
    # The run's workspace, mid-job (keyed by store and job).
    assert [p.name.split("@")[0] for p in fleet.worktree_root.iterdir()] == ["killed"]
    os.kill(holder.pid, signal.SIGKILL)  # the pool process healing the job, mid-proposal
    (gate / "go-1").touch()  # the killed run's agent, left alone, may end now
    (gate / "go-2").touch()
    code, [summary] = finish(waiting, fleet)
    assert code == 0, fleet.log_text()
    assert summary["status"] == "fixed"
    assert summary["queue"]["resumed"] is True
    assert summary["queue"]["attempt"] == 1  # a lost worker is not the job's fault
    events = events_of(tmp_path, "killed")
    assert [e["type"] for e in events].count("job.started") == 2
    assert any(e["type"] == "lock.reclaimed" for e in events)
    runs = verified(tmp_path / "store.sqlite3")
    assert runs
    assert max(Counter(runs).values()) == 1  # the redelivered job verified nothing twice
    assert list(fleet.worktree_root.iterdir()) == []  # no workspace left behind, not even trash


@pytest.mark.slow
def test_a_retryable_ending_is_retried_with_backoff_and_counted(
    fleet: Fleet, tmp_path: Path
) -> None:
    repo = make_calc_repo(tmp_path)
    wrong, fix = diff_for(repo, {"calc.py": WRONG}), diff_for(repo, {"calc.py": FIX})
    spec = write_spec(
        tmp_path / "retry.toml",
        repo,
        job_id="retried",
        diffs=[wrong, fix],
        budget="max_attempts = 1",
    )
    code, [summary] = finish(submit(fleet, tmp_path, spec), fleet)
    assert code == 0, fleet.log_text()
    assert (summary["status"], summary["queue"]["attempt"]) == ("fixed", 2)
    report = json.loads((tmp_path / "reports" / "retried" / "report.json").read_text())
    assert report["queue_attempt"] == 2
    assert "| Queue attempt | 2" in (tmp_path / "reports" / "retried" / "report.md").read_text()
    events = events_of(tmp_path, "retried")
    starts = [e["time"] for e in events if e["type"] == "job.started"]
    ends = [e for e in events if e["type"] == "job.finished"]
    assert len(starts) == 2
    assert ends[0]["data"]["status"] == "not_fixed"
    assert starts[1] - ends[0]["time"] >= BACKOFF  # the backoff was waited, by the queue


@pytest.mark.slow
def test_jobs_sharing_a_fingerprint_on_two_workers_make_one_proposer_call(
    fleet: Fleet, tmp_path: Path
) -> None:
    """Four jobs with one bug (separate repositories): the first to take the fingerprint's
    proposal lease asks its agent; the others wait for its fix and reuse it."""
    fixer, log, gate = write_fixer(tmp_path), tmp_path / "fixer.log", tmp_path / "gate"
    gate.mkdir()
    specs = [
        write_spec(
            tmp_path / f"s-{i}.toml",
            make_multi_repo(tmp_path / f"r{i}", 1),
            job_id=f"shared-{i}",
            steps=multi_steps(1),
            proposer=fixer_proposer(fixer, log, gate=gate),
        )
        for i in range(4)
    ]
    waiting = submit(fleet, tmp_path, *specs)

    def events() -> list[dict[str, Any]]:
        return [e for i in range(4) for e in events_of(tmp_path, f"shared-{i}")]

    # The holder's agent waits on its gate until the other worker's job waits on the lease.
    wait_for(lambda: fixer_calls(log), timeout=120, what="the first proposer call")
    wait_for(
        lambda: any(e["type"] == "lease.waiting" for e in events()),
        timeout=120,
        what="the other worker's job waiting on the lease",
    )
    (gate / "go-1").touch()
    (gate / "go-2").touch()  # a second call must not hang the test: it fails below
    code, summaries = finish(waiting, fleet)
    assert code == 0, fleet.log_text()
    assert [s["status"] for s in summaries] == ["fixed"] * 4
    assert len(fixer_calls(log)) == 1, fleet.log_text()
    store = AttemptStore(str(tmp_path / "store.sqlite3"))
    try:
        attempts = store.attempts()
    finally:
        store.close()
    assert Counter((a.outcome.value, a.proposer) for a in attempts) == {
        ("fixed", "agent"): 1,
        ("fixed", "memory"): 3,
    }
    ended = [e["data"]["ended"] for e in events() if e["type"] == "lease.waited"]
    assert ended
    assert set(ended) == {"fix verified"}
