"""Every command a report prints works when a person pastes it into a fresh shell.

The commands are taken from the rendered report (report.md's `sh` blocks), not
rebuilt from the model, and run with `bash -e` in an environment that carries
only what a person's shell would: PATH, HOME, and where patchheal keeps its
worktrees.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchheal.failure.analysis import analyze
from tests.healjobs import git
from tests.test_missing_setup import PROJECT

pytestmark = [pytest.mark.docker, pytest.mark.slow]

_SH_BLOCK = re.compile(r"^```sh\n(.*?)\n```$", re.MULTILINE | re.DOTALL)


def _patchheal(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchheal", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )


def _printed(report_md: Path, heading: str) -> list[str]:
    """The lines of the `sh` block that follows `heading` in report.md."""
    text = report_md.read_text()
    block = _SH_BLOCK.search(text, text.index(heading))
    assert block is not None, f"no sh block after {heading!r}"
    return block.group(1).splitlines()


def _fresh_shell(lines: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "PATCHHEAL_WORKTREE_ROOT": os.environ["PATCHHEAL_WORKTREE_ROOT"],
    }
    if os.environ.get("PYTHONPATH"):  # a checkout under test, as `pip install -e` gives it
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(
        ["bash", "-e", "-c", "\n".join(lines)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )


def _same_failure(report: dict[str, object], step_output: str, repo: str) -> None:
    step = report["steps"][0]  # type: ignore[index]
    again = analyze(step_output, repo_root=repo, command=step["command"])
    assert again.fingerprint == step["failure"]["fingerprint"], step_output[-2000:]


def test_demo_reports_commands_reproduce_the_failure_and_check_the_fix(tmp_path: Path) -> None:
    """Invariant: "Reproduce the failure in the harness" fails with the fingerprint the job's
    reproduction had, and "Check it" passes, both exactly as printed."""
    result = _patchheal("demo", "--workdir", str(tmp_path / "work"), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    report_md = Path(summary["reports"]["md"])
    report = json.loads(Path(summary["reports"]["json"]).read_text())

    reproduce = _printed(report_md, "Reproduce the failure in the harness")
    assert len(reproduce) == 1
    assert reproduce[0].startswith("patchheal harness run python ")
    ran = _fresh_shell(reproduce, tmp_path)
    assert ran.returncode == 1, ran.stderr[-2000:]
    _same_failure(report, ran.stdout, report["repo"])

    check = _printed(report_md, "Check it (in the harness, then on your machine)")
    checked = _fresh_shell(check, tmp_path)
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    assert checked.stdout.count(" passed") == 2  # in the harness, then in the local worktree


# The src/ project that only imports once installed (its setup is `pip install -e .`).
SETUP_PROJECT = PROJECT


def test_a_job_with_setup_reproduces_with_its_setup(tmp_path: Path) -> None:
    """Invariant: the printed reproduction runs the job's setup, so a src/ project that only
    imports once installed fails in its test (the job's failure), not at collection."""
    repo = tmp_path / "inventory"
    for rel, text in SETUP_PROJECT.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "inventory")
    # One wrong candidate: the heal ends not fixed, with a report.
    (tmp_path / "candidates").mkdir()
    (repo / "src/inventory/__init__.py").write_text(
        "def restock(level, amount):\n    return level * amount\n"
    )
    wrong = subprocess.run(["git", "diff"], cwd=repo, capture_output=True, text=True, check=True)
    (tmp_path / "candidates" / "01-wrong.patch").write_text(wrong.stdout)
    git(repo, "checkout", "-q", "--", ".")
    job = tmp_path / "job.toml"
    job.write_text(
        textwrap.dedent(f"""\
            [job]
            id = "inventory-printed"
            repo = "{repo}"
            harness = "python"
            setup = ["pip install -e ."]

            [[steps]]
            name = "unit"
            command = "python -m pytest -q tests/test_stock.py"

            [proposer]
            kind = "patchfiles"
            dir = "{tmp_path / "candidates"}"
        """)
    )
    result = _patchheal("heal", str(job), "--json", cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    report = json.loads(Path(summary["reports"]["json"]).read_text())
    assert report["steps"][0]["failure"]["error_type"] == "AssertionError"

    reproduce = _printed(Path(summary["reports"]["md"]), "Reproduce the failure in the harness")
    assert "--setup 'pip install -e .'" in reproduce[0]
    ran = _fresh_shell(reproduce, tmp_path)
    assert ran.returncode == 1, ran.stderr[-2000:]
    assert "1 failed" in ran.stdout
    _same_failure(report, ran.stdout, str(repo))
