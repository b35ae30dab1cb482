"""Scale-out on Celery: throughput with 1 and 2 workers, and proposer calls on a shared bug.

Run: python benchmarks/bench_scale.py [--jobs 8] [--shared 4]

Needs the `celery` extra and Debian's redis-server (started here on loopback,
thrown away at the end). Every job is a real heal: a git repository with a
bug, reproduced, patched, verified by the local harness, all state in one
SQLite store per row.

- throughput: `patchheal submit --wait` of --jobs jobs (each a repository
  whose scripted proposer offers the fix) to a fleet of 1, then 2,
  `patchheal worker`s that are already up; timed from submit to the last
  result. The baseline, in the same run, is `patchheal batch` of the same
  jobs in one process, then the 1-worker fleet is the ratio's base.
- pool wait: from the 1-worker fleet's own log, how long each job after the
  first waited between its receipt and its start (the pool process replaced
  between jobs: `worker_max_tasks_per_child=1`).
- shared fingerprint: --shared jobs (separate repositories, the same bug,
  so one fingerprint) whose proposer is a logging agent, submitted at once to
  2 workers; the table counts the agent's calls (target: 1, the other jobs
  reuse the verified fix).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.healjobs import (  # noqa: E402
    FIX,
    diff_for,
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
from tests.redis_support import start_redis  # noqa: E402


@contextmanager
def fleet(broker: str, workers: int, root: Path) -> Iterator[None]:
    """`workers` real `patchheal worker` processes, up and ready, stopped at the end."""
    env = {**os.environ, "PATCHHEAL_WORKTREE_ROOT": str(root / "wt")}
    procs, logs = [], []
    for i in range(workers):
        logs.append(root / f"worker-{i}.log")
        argv = [sys.executable, "-m", "patchheal", "worker", "--broker", broker]
        with logs[-1].open("wb") as log:
            procs.append(
                subprocess.Popen(
                    [*argv, "--name", f"b{i}@%h"],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    try:
        for path in logs:
            wait_for(lambda p=path: "ready." in p.read_text(errors="replace"), timeout=120)
        yield
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)


_STAMP = r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): "
_RECEIVED = re.compile(_STAMP + r".*Task patchheal\.heal_job\[([\w-]+)\] received")
_SUCCEEDED = re.compile(_STAMP + r".*Task patchheal\.heal_job\[([\w-]+)\] succeeded in ([\d.]+)s")


def pool_waits(log: Path) -> list[float]:
    """Per job after the first, from a worker's own log: seconds from the job's receipt to
    the start of its run in a pool process (the process replacement between jobs)."""

    def stamp(text: str) -> float:
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()

    received: dict[str, float] = {}
    waits = []
    for line in log.read_text(errors="replace").splitlines():
        if found := _RECEIVED.search(line):
            received[found[2]] = stamp(found[1])
        elif (found := _SUCCEEDED.search(line)) and found[2] in received:
            waits.append(stamp(found[1]) - float(found[3]) - received[found[2]])
    return waits[1:]  # the first job finds its process already started


def calc_jobs(root: Path, count: int) -> list[Path]:
    specs = []
    for i in range(count):
        repo = make_calc_repo(root / f"j{i}")
        fix = diff_for(repo, {"calc.py": FIX})
        specs.append(write_spec(root / f"job-{i}.toml", repo, job_id=f"t-{i}", diffs=[fix]))
    return specs


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def submit_argv(broker: str, specs: list[Path], root: Path) -> list[str]:
    argv = [sys.executable, "-m", "patchheal", "submit", *map(str, specs), "--broker", broker]
    return [*argv, "--wait", "--timeout", "600", *state_args(root)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--shared", type=int, default=4)
    opts = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    redis = start_redis(base / "redis")
    url = next(redis)
    rows: list[tuple[str, float]] = []
    try:
        work = base / "batch"
        env = {**os.environ, "PATCHHEAL_WORKTREE_ROOT": str(work / "wt")}
        specs = calc_jobs(work, opts.jobs)
        batch = [sys.executable, "-m", "patchheal", "batch", *map(str, specs), *state_args(work)]
        rows.append(("`patchheal batch` (one process, baseline)", timed(batch, env)))
        for db, workers in ((1, 1), (2, 2)):
            work = base / f"fleet{workers}"
            specs = calc_jobs(work, opts.jobs)
            broker = url.rsplit("/", 1)[0] + f"/{db}"
            with fleet(broker, workers, work):
                seconds = timed(submit_argv(broker, specs, work), os.environ.copy())
            rows.append((f"{workers} `patchheal worker`(s)", seconds))
            if workers == 1:
                waits = pool_waits(work / "worker-0.log")
        work = base / "shared"
        work.mkdir()
        fixer, log = write_fixer(work), work / "fixer.log"
        shared = []
        for i in range(opts.shared):
            repo = make_multi_repo(work / f"r{i}", 1)
            proposer = fixer_proposer(fixer, log)
            shared.append(
                write_spec(
                    work / f"s-{i}.toml",
                    repo,
                    job_id=f"s-{i}",
                    steps=multi_steps(1),
                    proposer=proposer,
                )
            )
        broker = url.rsplit("/", 1)[0] + "/3"
        with fleet(broker, 2, work):
            shared_seconds = timed(submit_argv(broker, shared, work), os.environ.copy())
        calls = len(fixer_calls(log))
    finally:
        redis.close()
    print(f"{opts.jobs} jobs (local harness, scripted fix); {os.cpu_count()} cores")
    print("| run | wall s | jobs/min | × 1 worker |\n| --- | ---: | ---: | ---: |")
    one = rows[1][1]
    for label, seconds in rows:
        print(f"| {label} | {seconds:.1f} | {opts.jobs * 60 / seconds:.1f} | {one / seconds:.2f} |")
    if waits:
        print(
            f"\n1 worker, a job's wait for its pool process (receipt to start), {len(waits)} "
            f"jobs: mean {sum(waits) / len(waits):.2f} s, max {max(waits):.2f} s"
        )
    print()
    print(
        f"{opts.shared} jobs, one fingerprint, 2 workers: {calls} proposer call(s) "
        f"(target 1) in {shared_seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
