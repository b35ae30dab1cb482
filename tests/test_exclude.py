"""Healing from inside the job's repository: no untracked clutter, nothing said by git."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchheal.workspace.exclude import hide_from_status, state_paths
from tests.healjobs import FIX, WRONG, diff_for, git, make_calc_repo


def _status(repo: Path) -> str:
    return git(repo, "status", "--porcelain", "--untracked-files=all")


def _write_job(repo: Path, job_id: str, candidates: Path) -> None:
    """A job spec kept in the repository itself: heal it from inside, with patch files."""
    (repo / "job.toml").write_text(
        f'[job]\nid = "{job_id}"\nrepo = "."\nbase = "main"\nharness = "local"\n\n'
        f'[[steps]]\nname = "unit"\ncommand = "{sys.executable} -m pytest -q tests"\n\n'
        f'[proposer]\nkind = "patchfiles"\ndir = "{candidates}"\n'
    )


def _heal_inside(
    repo: Path, *flags: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`cd repo && patchheal [flags] heal job.toml`, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "patchheal", *flags, "heal", "job.toml"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_heal_from_inside_the_repository_leaves_no_clutter_and_no_git_hints(
    tmp_path: Path,
) -> None:
    """Invariant: `cd repo && patchheal heal` keeps the reports in the working directory
    (so later commands there find them) without leaving them as untracked files in the
    repository, the default store and runs in the user's state directory (issue 34),
    and its whole terminal output has no git hint or advice. Candidates: one that does
    not apply, a wrong fix, the fix."""
    repo = make_calc_repo(tmp_path)
    cands = tmp_path / "candidates"
    cands.mkdir()
    stale = diff_for(repo, {"calc.py": FIX}).replace("return a - b", "return a - b - 0")
    (cands / "01-stale.patch").write_text(stale)
    (cands / "02-wrong.patch").write_text(diff_for(repo, {"calc.py": WRONG}))
    (cands / "03-fix.patch").write_text(diff_for(repo, {"calc.py": FIX}))
    # The job spec lives in the repository and is committed, as a user would keep it.
    _write_job(repo, "inside", cands)
    git(repo, "add", "job.toml")
    git(repo, "commit", "-q", "-m", "job spec")
    # Later commits also make the base's checkout a detached one for git's advice.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["HOME"] = str(tmp_path / "home")  # no global git config to silence git for us
    healed = _heal_inside(repo, "-v", env=env)
    terminal = healed.stdout + healed.stderr
    assert healed.returncode == 0, terminal
    assert "apply_failed" in terminal
    assert "no_effect" in terminal
    assert "hint:" not in terminal
    assert "detached HEAD" not in terminal
    assert "advice." not in terminal
    assert _status(repo) == ""
    # The default store and its runs are the user's, outside any repository (issue 34).
    assert not (repo / "var").exists()
    state = Path(os.environ["XDG_STATE_HOME"]) / "patchheal"
    assert (state / "memory" / "attempts.sqlite3").is_file()
    assert (state / "runs" / "inside" / "events.jsonl").is_file()
    assert (repo / "reports" / "inside" / "report.md").is_file()
    listing = subprocess.run(
        [sys.executable, "-m", "patchheal", "attempts", "--job", "inside"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listing.returncode == 0, listing.stderr
    assert "fixed" in listing.stdout


def test_only_the_paths_patchheal_writes_are_hidden(tmp_path: Path) -> None:
    """A `var/` or `reports/` of the project's own stays visible to git; patchheal's store,
    runs and the job's reports do not; a second heal adds nothing twice."""
    repo = make_calc_repo(tmp_path)
    (repo / "var" / "memory").mkdir(parents=True)
    (repo / "var" / "memory" / "attempts.sqlite3").write_text("store")
    (repo / "var" / "memory" / "attempts.sqlite3-wal").write_text("wal")
    (repo / "var" / "runs" / "job").mkdir(parents=True)
    (repo / "var" / "runs" / "job" / "events.jsonl").write_text("{}\n")
    (repo / "var" / "project-data.csv").write_text("a,b\n")
    (repo / "reports" / "job").mkdir(parents=True)
    (repo / "reports" / "job" / "report.md").write_text("# r\n")
    (repo / "reports" / "index.html").write_text("<p>\n")
    (repo / "reports" / "coverage.xml").write_text("<c/>\n")
    paths = state_paths(repo / "var/memory/attempts.sqlite3", repo / "var", repo / "reports", "job")
    added = hide_from_status(repo, paths)
    assert sorted(added) == [
        "/reports/index.html",
        "/reports/job",
        "/var/memory/attempts.sqlite3*",
        "/var/runs",
    ]
    assert sorted(_status(repo).splitlines()) == [
        "?? reports/coverage.xml",
        "?? var/project-data.csv",
    ]
    assert hide_from_status(repo, paths) == []
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/var/runs") == 1


def test_paths_outside_the_repository_are_left_alone(tmp_path: Path) -> None:
    repo = make_calc_repo(tmp_path)
    before = (repo / ".git" / "info" / "exclude").read_text()
    paths = state_paths(tmp_path / "store.sqlite3", tmp_path / "state", tmp_path / "r", "job")
    assert hide_from_status(repo, paths) == []
    assert hide_from_status(tmp_path / "not-a-repo", paths) == []
    assert (repo / ".git" / "info" / "exclude").read_text() == before


@pytest.mark.slow
def test_an_exclude_file_that_cannot_be_written_is_a_warning_not_a_failed_heal(
    tmp_path: Path,
) -> None:
    """`.git/info/exclude` unwritable (here a directory, which root cannot write either):
    the heal still runs to its verdict and says why its state shows in `git status`."""
    repo = make_calc_repo(tmp_path)
    cands = tmp_path / "candidates"
    cands.mkdir()
    (cands / "01-fix.patch").write_text(diff_for(repo, {"calc.py": FIX}))
    _write_job(repo, "odd-git", cands)
    exclude = repo / ".git" / "info" / "exclude"
    exclude.unlink(missing_ok=True)
    exclude.mkdir(parents=True)
    healed = _heal_inside(repo)
    assert healed.returncode == 0, healed.stdout + healed.stderr
    assert "warning: could not list patchheal's state" in healed.stderr
    assert (repo / "reports" / "odd-git" / "report.md").is_file()
