"""`patchheal demo --example dbt`: the bundled dbt project heals end to end inside Docker."""

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
@pytest.mark.timeout(1500)  # a cold run downloads dbt and DuckDB: ~9 min on a loaded machine
@pytest.mark.usefixtures("require_docker")
def test_dbt_example_heals_in_the_dbt_harness(tmp_path: Path) -> None:
    """The dbt failure is parsed (failing node, database error), a test-weakening patch is
    refused, a wrong fix fails the data test, and the fix verifies with `dbt build`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_DIR")}
    done = subprocess.run(
        [sys.executable, "-m", "patchheal", "demo", "--example", "dbt",
         "--workdir", str(tmp_path / "work"), "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1500,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    outcomes = [a["outcome"] for a in summary["attempts"]]
    assert outcomes == ["rejected_policy", "no_effect", "fixed"], outcomes
    assert "harness: docker:dbt" in done.stderr
    report = json.loads(Path(summary["reports"]["json"]).read_text())
    failure = report["steps"][0]["failure"]
    assert failure["source"] == "dbt"
    assert failure["failing_tests"] == ["model.customer_revenue"]
    assert 'Referenced column "amount" not found' in failure["message"]
    repo = tmp_path / "work" / "shop"
    model = git(repo, "show", f"{summary['branch']}:models/customer_revenue.sql")
    assert "sum(amount_cents) / 100.0" in model
