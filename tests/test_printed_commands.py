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


def _fresh_shell(lines: list[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **extra,
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


def _branches(repo: Path) -> set[str]:
    return set(git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split())


def test_every_printed_command_runs_clean_and_the_same_heal_succeeds_again(
    tmp_path: Path,
) -> None:
    """Invariant (issue 34): every `sh` block of a healed job's report, run exactly as
    printed, leaves no worktree, venv or branch behind, and installs nothing into the
    environment it was pasted in; the same `patchheal heal` then succeeds again (the check
    once left the fixed branch checked out in a worktree, and the next heal refused to
    publish), and `--branch` publishes where it is told."""
    work = tmp_path / "work"
    result = _patchheal("demo", "--workdir", str(work), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report_md = Path(json.loads(result.stdout)["reports"]["md"])
    repo = work / "pricing"
    branches_before = _branches(repo)
    scratch = tmp_path / "scratch"  # mktemp's TMPDIR: whatever is left there was not removed
    scratch.mkdir()
    blocks = _SH_BLOCK.findall(report_md.read_text())
    assert len(blocks) == 2, blocks  # "Check it", then "Reproduce"
    for block in blocks:
        ran = _fresh_shell(block.splitlines(), tmp_path, TMPDIR=str(scratch))
        expected = 0 if "worktree add" in block else 1  # a reproduction fails as the job did
        assert ran.returncode == expected, ran.stdout[-2000:] + ran.stderr[-2000:]
        assert list(scratch.iterdir()) == [], "the printed commands left files behind"
        assert len(git(repo, "worktree", "list").splitlines()) == 1
        assert _branches(repo) == branches_before
    again = _patchheal("heal", str(work / "job.toml"), "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    assert json.loads(again.stdout)["branch"] == "patchheal/local/demo-pricing"
    chosen = _patchheal(
        "heal", str(work / "job.toml"), "--branch", "review/pricing", "--json", cwd=tmp_path
    )
    assert chosen.returncode == 0, chosen.stderr[-3000:]
    assert json.loads(chosen.stdout)["branch"] == "review/pricing"
    assert ">= 10" in git(repo, "show", "review/pricing:pricing/rules.py")


def test_a_failing_check_still_removes_its_worktree_and_venv(tmp_path: Path) -> None:
    """Invariant: the printed check removes what it made when one of its commands fails
    (the trap runs on the subshell's exit, whatever its status)."""
    from patchheal.report.wording import check_locally
    from tests.test_report import job

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "x.txt").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "x")
    git(repo, "branch", "patchheal/local/ci-4821")
    report = job(repo=str(repo), setup=("true",))
    lines = [line for line in check_locally(report) if not line.startswith("patchheal ")]
    lines[-2] = "  false"  # the step's command fails
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    ran = _fresh_shell(lines, tmp_path, TMPDIR=str(scratch))
    assert ran.returncode != 0
    assert list(scratch.iterdir()) == []
    assert len(git(repo, "worktree", "list").splitlines()) == 1
