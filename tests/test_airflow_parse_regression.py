"""Every Airflow job gets the DAG parse check as a regression step, judged per DAG file.

Real Airflow 2.10.5 in the airflow harness's Docker image, healing a copy of the
bundled example through `patchheal heal JOB.toml` with a job spec that names no
`[regression]`. A third DAG file already fails to import at base. The rename
candidate makes the task pass but breaks `weekly_report.py`'s import: a
regression, although the parse check failed at base too (one more broken
file). The real fix leaves only the file that was broken at base broken:
fixed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchheal.commands.demo import example_dir
from tests.healjobs import git

PARSE_CHECK = "airflow dags list-import-errors -o plain"

# No [regression]: the harness adds the parse check by itself.
JOB = """\
[job]
id = "airflow-parse-regression"
repo = "{repo}"
base = "main"
harness = "airflow"

[[steps]]
name = "summarize"
command = "airflow tasks test daily_revenue summarize 2026-01-05"

[proposer]
kind = "patchfiles"
paths = [{candidates}]

[budget]
max_attempts = 3
step_timeout_seconds = 600
idle_timeout_seconds = 300
flaky_reruns = 0
"""

# Broken before any patch: the parse check fails at base, so it is compared per file.
# (Airflow's safe mode parses only files that mention both "airflow" and "dag".)
LEGACY_DAG = '''"""A retired export's DAG: its parser was removed long ago."""

import pendulum
from airflow.decorators import dag
from shop.orders import parse_legacy_export


@dag(dag_id="legacy_export", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"))
def legacy_export() -> None:
    parse_legacy_export()


legacy_export()
'''


def _job(tmp_path: Path) -> Path:
    example = example_dir("airflow")
    repo = tmp_path / "orders"
    shutil.copytree(example / "project", repo, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "dags" / "legacy_export.py").write_text(LEGACY_DAG, encoding="utf-8")
    who = ("-c", "user.name=t", "-c", "user.email=t@t.invalid")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, *who, "commit", "-qm", "orders, and a DAG that no longer imports")
    candidates = [
        example / "candidates" / "01-rename_parser.patch",
        example / "candidates" / "04-parse_iso_8601.patch",
    ]
    job = tmp_path / "job.toml"
    listed = ", ".join(json.dumps(str(c)) for c in candidates)
    job.write_text(JOB.format(repo=repo, candidates=listed), encoding="utf-8")
    return job


def _patchheal(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_DIR")}
    state = ["--db", str(tmp_path / "store.sqlite3"), "--reports", str(tmp_path / "reports")]
    return subprocess.run(
        [sys.executable, "-m", "patchheal", *args, *state],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip


def test_print_spec_names_the_parse_check_the_harness_adds(tmp_path: Path) -> None:
    job = _job(tmp_path)
    done = _patchheal(tmp_path, "heal", str(job), "--print-spec")
    assert done.returncode == 0, done.stderr
    assert "\n[regression]\n" not in done.stdout
    assert f"#   {PARSE_CHECK}\n" in done.stdout
    turned_off = job.read_text() + "\n[regression]\nharness = false\n"
    job.write_text(turned_off, encoding="utf-8")
    done = _patchheal(tmp_path, "heal", str(job), "--print-spec")
    assert done.returncode == 0, done.stderr
    assert PARSE_CHECK not in done.stdout


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.usefixtures("require_docker")
def test_a_job_without_regression_gets_the_parse_check_compared_per_dag_file(
    tmp_path: Path,
) -> None:
    done = _patchheal(tmp_path, "heal", str(_job(tmp_path)), "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"regression steps the harness adds: {PARSE_CHECK}" in done.stderr
    summary = json.loads(done.stdout)
    report = json.loads(Path(summary["reports"]["json"]).read_text())
    assert report["regression"] == [PARSE_CHECK]
    attempts = report["steps"][0]["attempts"]
    assert [a["outcome"] for a in attempts] == ["regression", "fixed"], attempts
    renamed, fix = attempts
    reason = renamed["reason"]
    assert reason.startswith("the failing step passes but the regression steps got worse")
    # Named by what the patch broke; the file broken at base is not blamed on it.
    assert "newly failing: dags/weekly_report.py" in reason
    assert "legacy_export" not in reason
    assert fix["reason"].startswith("the failing step passes: "), fix["reason"]
    # The parse check failed at base (legacy_export) and fails no worse now: told as such.
    assert "; the regression step did not get worse: " in fix["reason"], fix["reason"]
    assert ", as at base" in fix["reason"], fix["reason"]
    markdown = Path(summary["reports"]["md"]).read_text()
    assert f"`{PARSE_CHECK}`" in markdown
    fixed = git(tmp_path / "orders", "show", f"{summary['branch']}:dags/shop/orders.py")
    assert "datetime.fromisoformat(text)" in fixed
