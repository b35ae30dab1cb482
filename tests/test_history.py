"""Issue 16 (history): the private repository holds the base commit at depth 1, and jobs
open and heal on shallow, partial and long-history repositories; the fix published
back still sits on the user's real base commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from patchheal.config import load_spec
from patchheal.intake.toml import spec_to_toml
from patchheal.loop.controller import HealLoop, HealOptions, HealResult
from patchheal.workspace.history import BaseNotCopyable
from patchheal.workspace.worktrees import JobWorkspace
from tests.healjobs import FIX, WRONG, diff_for, git, make_calc_repo, write_spec


def add_history(repo: Path, commits: int) -> None:
    """Put `commits` commits (each touching one file) under the repository's root commit,
    generated with `git fast-import` (seconds even for tens of thousands)."""
    root = git(repo, "rev-list", "--max-parents=0", "HEAD")
    lines = []
    for index in range(commits):
        body = f"old {index}\n"
        message = f"old commit {index}\n"
        lines += [
            "commit refs/heads/old",
            f"committer a <a@b> {1_000_000_000 + index} +0000",
            f"data {len(message)}",
            message.rstrip("\n"),
            "M 644 inline old.txt",
            f"data {len(body)}",
            body.rstrip("\n"),
            "",
        ]
    stream = "\n".join(lines) + "\n"
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=stream.encode(), check=True)
    # The calc commit becomes the tip of that history (same tree, new parent).
    tree = git(repo, "rev-parse", f"{root}^{{tree}}")
    tip = git(repo, "commit-tree", tree, "-p", "refs/heads/old", "-m", "calc with a bug")
    git(repo, "update-ref", "refs/heads/main", tip)
    git(repo, "branch", "-D", "old")


def heal(tmp_path: Path, spec_path: Path) -> HealResult:
    spec = load_spec(spec_path)
    opts = HealOptions(
        state_dir=tmp_path / "var",
        db=str(tmp_path / "store.sqlite3"),
        reports_dir=tmp_path / "reports",
    )
    return HealLoop(spec, spec_to_toml(spec), opts).run()


def heal_and_check_publish(tmp_path: Path, user: Path, diffs: list[str], base: str) -> None:
    """Heal the calc job on `user`; the fix must land on a branch whose parent is `base`."""
    spec = write_spec(tmp_path / "job.toml", user, diffs=diffs)
    result = heal(tmp_path, spec)
    assert result.exit_code == 0, result.report.status
    assert [a.outcome.value for s in result.report.steps for a in s.attempts][-1] == "fixed"
    assert result.report.base_commit == base
    branch = "patchheal/local/calc"
    assert git(user, "rev-parse", f"{branch}^") == base
    assert "return a + b" in git(user, "show", f"{branch}:calc.py")
    # The user's repository is whole: every object the branch needs is there.
    git(user, "fsck", "--connectivity-only", "--no-dangling")


def test_a_shallow_clone_opens_heals_and_publishes_on_its_base(tmp_path: Path) -> None:
    origin = make_calc_repo(tmp_path / "origin")
    add_history(origin, 50)
    wrong, fix = diff_for(origin, {"calc.py": WRONG}), diff_for(origin, {"calc.py": FIX})
    user = tmp_path / "user"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(user))
    assert (user / ".git" / "shallow").is_file()
    base = git(user, "rev-parse", "HEAD")
    workspace = JobWorkspace(user, "main", "shallow", root=tmp_path / "wt-root")
    workspace.open()
    # A fetch from a shallow repository refuses to create the ref (and exits 0).
    assert git(workspace.private, "rev-parse", "refs/patchheal/base") == base
    git(workspace.private, "fsck", "--connectivity-only", "--no-dangling")
    heal_and_check_publish(tmp_path, user, [wrong, fix], base)


def test_a_partial_clone_opens_on_a_base_whose_blobs_it_lacks(tmp_path: Path) -> None:
    """`--filter=blob:none`: the blobs of an older base are not in the clone; the job
    still gets them (git's lazy fetch from the promisor), instead of upload-pack's error."""
    origin = make_calc_repo(tmp_path / "origin")
    base = git(origin, "rev-parse", "HEAD")
    (origin / "calc.py").write_text(FIX + "# later work\n")
    git(origin, "commit", "-q", "-am", "later: fixed upstream")
    git(origin, "config", "uploadpack.allowFilter", "true")
    user = tmp_path / "user"
    git(tmp_path, "clone", "-q", "--filter=blob:none", f"file://{origin}", str(user))
    missing = git(user, "rev-list", "--objects", "--missing=print", base)
    assert any(line.startswith("?") for line in missing.splitlines()), "no blob is missing"
    workspace = JobWorkspace(user, base, "partial", root=tmp_path / "wt-root")
    workspace.open()
    tree = workspace.worktree("verify")
    assert "return a - b" in (tree / "calc.py").read_text()
    assert git(workspace.private, "rev-list", "--all").splitlines() == [base]
    (tree / "calc.py").write_text(FIX)
    sha = workspace.commit(tree, "fix")
    workspace.publish(sha, "patchheal/local/partial")
    assert git(user, "rev-parse", "patchheal/local/partial^") == base


def test_a_partial_clone_whose_remote_is_gone_fails_with_a_clear_error(tmp_path: Path) -> None:
    origin = make_calc_repo(tmp_path / "origin")
    base = git(origin, "rev-parse", "HEAD")
    (origin / "calc.py").write_text(FIX)
    git(origin, "commit", "-q", "-am", "later")
    git(origin, "config", "uploadpack.allowFilter", "true")
    user = tmp_path / "user"
    git(tmp_path, "clone", "-q", "--filter=blob:none", f"file://{origin}", str(user))
    git(user, "remote", "set-url", "origin", f"file://{tmp_path / 'gone'}")
    workspace = JobWorkspace(user, base, "gone", root=tmp_path / "wt-root")
    with pytest.raises(BaseNotCopyable, match="could not be fetched") as caught:
        workspace.open()
    assert caught.value.exit_code == 2
    assert not workspace.private.exists()


def test_a_long_history_is_not_copied_and_publish_sits_on_the_real_base(tmp_path: Path) -> None:
    user = make_calc_repo(tmp_path / "user")
    add_history(user, 3000)
    base = git(user, "rev-parse", "HEAD")
    wrong, fix = diff_for(user, {"calc.py": WRONG}), diff_for(user, {"calc.py": FIX})
    workspace = JobWorkspace(user, "main", "long", root=tmp_path / "wt-root")
    workspace.open()
    assert git(workspace.private, "rev-list", "--all").splitlines() == [base]
    # The copied commit is the user's own (same sha, parent recorded), grafted as a root.
    assert git(workspace.private, "cat-file", "-p", base).splitlines()[1].startswith("parent ")
    assert (workspace.private / "shallow").read_text().split() == [base]
    heal_and_check_publish(tmp_path, user, [wrong, fix], base)
