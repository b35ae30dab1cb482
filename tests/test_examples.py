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


def _heal_step(steps: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(s for s in steps if s.get("name") == name)


def test_patchheal_comes_from_a_repository_checkout_not_the_index() -> None:
    """Regression (issue 27): the heal job ran `pip install patchheal`, which the package
    index does not have. It checks out the repository the user names and installs that."""
    steps = _load()["jobs"]["heal"]["steps"]
    runs = "\n".join(str(step.get("run", "")) for step in steps)
    assert "pip install patchheal" not in runs
    checkout = next(
        s for s in steps if s.get("uses", "").startswith("actions/checkout@") and "with" in s
        and "repository" in s["with"]
    )  # fmt: skip
    assert checkout["with"]["repository"] == "${{ vars.PATCHHEAL_REPOSITORY }}"
    assert (
        f"pip install ./{checkout['with']['path']}" in _heal_step(steps, "install patchheal")["run"]
    )
    guard = _heal_step(steps, "where patchheal comes from")
    assert guard["if"] == "vars.PATCHHEAL_REPOSITORY == ''"


@pytest.mark.slow
def test_the_install_step_installs_patchheal_from_the_checkout(tmp_path: Path) -> None:
    """Invariant: the workflow's install script, run as written in a fresh venv over a
    checkout of this repository at the step's path, gives a working `patchheal` and leaves
    nothing of patchheal's in the job's repository. The venv sees this interpreter's
    packages, so pip fetches only the build backend (setuptools, wheel) from the package
    index, as test_wheel.py's wheel build does."""
    import venv

    steps = _load()["jobs"]["heal"]["steps"]
    checkout = next(s for s in steps if "repository" in s.get("with", {}))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    source = workspace / checkout["with"]["path"]
    shutil.copytree(
        WORKFLOW.parents[2],
        source,
        ignore=shutil.ignore_patterns(".git", "var", "reports", "*.egg-info", "build", ".*cache*"),
    )
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    script = _heal_step(steps, "install patchheal")["run"]
    env = {
        "PATH": f"{env_dir / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    # `pip` in the venv: the interpreter's own, run for the venv's python.
    (env_dir / "bin" / "pip").write_text(f'#!/bin/sh\nexec "{env_dir}/bin/python" -m pip "$@"\n')
    (env_dir / "bin" / "pip").chmod(0o755)
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=workspace, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "patchheal, version" in done.stdout
    assert not source.exists()
    where = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", "import patchheal; print(patchheal.__file__)"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(env_dir)), where.stdout  # installed, not the checkout
