"""`--json` on listings prints JSON lines: one object per line, nothing else on stdout."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from patchheal.cli import cli
from patchheal.memory.store import AttemptStore
from tests.healjobs import FIX, diff_for, make_calc_repo, patchheal_cli, state_args, write_spec


def _lines(stdout: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert all(isinstance(row, dict) for row in rows)
    return rows


def test_harness_list_json() -> None:
    done = CliRunner().invoke(cli, ["harness", "list", "--json"])
    assert done.exit_code == 0, done.output
    rows = _lines(done.stdout)
    assert {"local", "python", "node", "generic", "compose"} <= {r["name"] for r in rows}
    python = next(r for r in rows if r["name"] == "python")
    assert (Path(python["path"]) / "harness.toml").is_file()


def test_worktree_list_json() -> None:
    root = Path(os.environ["PATCHHEAL_WORKTREE_ROOT"])
    (root / "job-a" / "wt" / "verify").mkdir(parents=True)
    done = CliRunner().invoke(cli, ["worktree", "list", "--json"])
    assert done.exit_code == 0, done.output
    assert _lines(done.stdout) == [
        {
            "job_id": "job-a",
            "store_key": "",
            "name": "verify",
            "path": str(root / "job-a" / "wt" / "verify"),
        }
    ]


def test_locks_json(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    with AttemptStore(str(db)) as store:
        store.acquire_lock("job-a", owner="me", ttl_seconds=600)
    done = CliRunner().invoke(cli, ["locks", "--json", "--db", str(db)])
    assert done.exit_code == 0, done.output
    [row] = _lines(done.stdout)
    assert (row["job_id"], row["state"], row["pid"]) == ("job-a", "live", os.getpid())
    assert row["reclaim"] is None


def test_batch_json_prints_one_summary_per_line(tmp_path: Path) -> None:
    """Regression: `batch --json` printed several pretty-printed documents, which no JSON
    reader takes as one stream."""
    repo = make_calc_repo(tmp_path)
    fix = diff_for(repo, {"calc.py": FIX})
    specs = [
        write_spec(tmp_path / f"{job}.toml", repo, job_id=job, diffs=[fix]) for job in ("a", "b")
    ]
    done = patchheal_cli("batch", *map(str, specs), *state_args(tmp_path), "--json", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = _lines(done.stdout)
    assert [(r["job_id"], r["status"]) for r in rows] == [("a", "fixed"), ("b", "fixed")]
