"""`patchheal batch`: several jobs per process, shards across workers sharing one store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from patchheal.commands.batch import in_shard
from patchheal.memory.store import AttemptStore
from tests.healjobs import FIX, WRONG, diff_for, make_calc_repo, write_spec


def test_shards_partition_the_job_files() -> None:
    files = [Path(f"job-{i}.toml") for i in range(40)]
    shards = [{f for f in files if in_shard(f, (i, 3))} for i in range(3)]
    assert set().union(*shards) == set(files)
    assert sum(len(s) for s in shards) == len(files)
    assert all(shards)


def test_two_workers_share_one_store_and_never_verify_a_patch_twice(tmp_path: Path) -> None:
    """Two real worker processes heal jobs with the same bug concurrently against one
    SQLite store: across both, the wrong patch is verified at most once."""
    specs = []
    for i in range(4):
        root = tmp_path / f"j{i}"
        repo = make_calc_repo(root)
        wrong, fix = diff_for(repo, {"calc.py": WRONG}), diff_for(repo, {"calc.py": FIX})
        specs.append(
            write_spec(root / f"job-{i}.toml", repo, job_id=f"job-{i}", diffs=[wrong, fix])
        )
    db = tmp_path / "shared.sqlite3"
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "patchheal",
                "batch",
                *map(str, specs),
                "--shard",
                f"{i}/2",
                "--db",
                str(db),
                "--state-dir",
                str(tmp_path / "var"),
                "--reports",
                str(tmp_path / "reports"),
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
        assert worker.returncode == 0, err[-2000:]
    store = AttemptStore(str(db))
    try:
        attempts = store.attempts()
        assert store.integrity_check() == []
    finally:
        store.close()
    wrong_verified = [a for a in attempts if a.outcome.value == "no_effect"]
    assert len(wrong_verified) == 1
    assert {a.job_id for a in attempts if a.outcome.value == "fixed"} == {
        f"job-{i}" for i in range(4)
    }
    for i in range(4):
        report = json.loads((tmp_path / "reports" / f"job-{i}" / "report.json").read_text())
        assert report["status"] == "fixed"
