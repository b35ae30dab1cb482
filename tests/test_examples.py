"""The GitHub Actions example heals a failing job on failure and uploads the report."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOW = (
    Path(__file__).resolve().parents[1] / "examples" / "github-actions" / "ci-with-patchheal.yml"
)


def _load() -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_the_heal_job_runs_only_when_the_tests_fail() -> None:
    jobs = _load()["jobs"]
    assert jobs["heal"]["needs"] == "test"
    assert jobs["heal"]["if"] == "failure()"


def test_the_heal_job_runs_patchheal_and_uploads_the_report_whatever_the_outcome() -> None:
    steps = _load()["jobs"]["heal"]["steps"]
    runs = "\n".join(str(step.get("run", "")) for step in steps)
    assert "patchheal heal job.toml" in runs
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert uploads, "the report is not uploaded"
    assert uploads[0].get("if") == "always()", "a job that is not fixed must still upload"
    assert "reports/" in uploads[0]["with"]["path"]


def test_the_embedded_job_spec_is_a_valid_spec(tmp_path: Path) -> None:
    """The spec the workflow writes loads (with the variables GitHub would substitute)."""
    from patchheal.config import load_spec

    step = next(s for s in _load()["jobs"]["heal"]["steps"] if s.get("name") == "job spec")
    heredoc = step["run"].split("<<TOML\n", 1)[1].rsplit("TOML", 1)[0]
    text = heredoc.replace("${GITHUB_RUN_ID}", "4821").replace("${GITHUB_SHA}", "0" * 40)
    (tmp_path / "ci.log").write_text("E   assert 1 == 2\n")
    (tmp_path / "job.toml").write_text(text)
    spec = load_spec(tmp_path / "job.toml")
    assert spec.job.id == "gh-4821"
    assert spec.proposer_chain[0].kind == "llm"


def test_actionlint_accepts_the_workflow() -> None:
    """actionlint checks expressions, needs/if, action inputs and (with shellcheck) every
    `run:` script. CI installs both (.ci/run, .ci/actionlint.txt): there a missing one is a
    failure, not a skip, so the check cannot silently stop running."""
    actionlint = shutil.which("actionlint")
    missing = [name for name in ("actionlint", "shellcheck") if shutil.which(name) is None]
    if missing and os.environ.get("CI"):
        pytest.fail(f"{', '.join(missing)} not installed in CI (see .ci/run)")
    if actionlint is None:
        pytest.skip("actionlint is not installed (pip install -r .ci/actionlint.txt)")
    result = subprocess.run(
        [actionlint, "-no-color", str(WORKFLOW)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_rejects_a_broken_copy_of_the_workflow(tmp_path: Path) -> None:
    """The check above can fail: a `needs:` naming no job is reported."""
    actionlint = shutil.which("actionlint")
    if actionlint is None:
        pytest.skip("actionlint is not installed (pip install -r .ci/actionlint.txt)")
    text = WORKFLOW.read_text(encoding="utf-8").replace("needs: test", "needs: tset", 1)
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(text, encoding="utf-8")
    result = subprocess.run(
        [actionlint, "-no-color", str(broken)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "tset" in result.stdout
