"""`patchheal demo --example airflow`: the bundled DAG heals end to end inside Docker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.healjobs import git


@pytest.mark.docker
@pytest.mark.slow
# Without the images this builds them first (581 s measured under load: docs/harnesses.md).
@pytest.mark.timeout(1800)
@pytest.mark.usefixtures("require_docker")
def test_airflow_example_heals_and_the_parse_check_is_a_regression_step(tmp_path: Path) -> None:
    """The task's failure is parsed (task id, exception, frames in the DAG's code); a patch
    that makes the task pass but breaks another DAG's parsing is a regression; one that
    skips the task (exit 0) is not a fix; a wrong fix leaves the task failing; the fix
    verifies with the parse check green."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_DIR")}
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "demo", "--example", "airflow",
         "--workdir", str(tmp_path / "work"), "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    attempts = summary["attempts"]
    outcomes = [a["outcome"] for a in attempts]
    assert outcomes == ["regression", "no_effect", "no_effect", "fixed"], attempts
    assert "harness: docker:airflow" in done.stderr
    report = json.loads(Path(summary["reports"]["json"]).read_text())
    step = report["steps"][0]
    failure = step["failure"]
    assert failure["source"] == "airflow"
    assert failure["failing_tests"] == ["daily_revenue.summarize"]
    assert failure["error_type"] == "ValueError"
    assert "does not match format" in failure["message"]
    project = [f["file"] for f in failure["frames"] if f["in_project"]]
    assert project[0] == "dags/daily_revenue.py"
    assert project[-1] == "dags/shop/orders.py"
    # The rename fixed the task (it passed both verification runs) and broke weekly_report.
    renamed = step["attempts"][0]
    assert renamed["reason"].startswith("the failing step passes but the regression steps got")
    assert "ImportError in dags/weekly_report.py" in renamed["reason"]
    # `tasks test` exits 0 for a skipped task: the Airflow collector's signed record decides.
    skipped = step["attempts"][1]
    assert "not observed passing: daily_revenue.summarize (skipped)" in skipped["reason"]
    wrong = step["attempts"][2]
    assert "failure changed" in wrong["reason"]
    assert "unconverted data remains: +00:00" in wrong["log_excerpt"]
    markdown = Path(summary["reports"]["md"]).read_text()
    assert "daily_revenue.summarize" in markdown
    repo = tmp_path / "work" / "orders"
    fixed = git(repo, "show", f"{summary['branch']}:dags/shop/orders.py")
    assert "datetime.fromisoformat(text)" in fixed
    assert "def parse_order_time" in fixed
