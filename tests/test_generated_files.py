"""What setup generated in the tree: captured, laid over a job worktree, hidden from git.

Real git repositories and a real job workspace; the Docker path (setup in a
container, the archive in the committed image) is tests/test_setup_checkout_docker.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from conftest import git

from patchheal.harness.setup import generated
from patchheal.workspace import tracked
from patchheal.workspace.worktrees import JobWorkspace, worktree_diff


def _setup_output(tmp_path: Path) -> list[generated.Generated]:
    """A tree before and after a setup that wrote a version file, an egg-info and bytecode."""
    tree = tmp_path / "export"
    (tree / "src/pkg").mkdir(parents=True)
    (tree / "src/pkg/__init__.py").write_text("")
    (tree / ".git").mkdir()
    before = generated.listing(tree)
    (tree / "src/pkg/_version.py").write_text("version = '1.4.3'\n")
    os.utime(tree / "src/pkg/_version.py", ns=(1_600_000_000_123_456_789,) * 2)
    (tree / "src/pkg.egg-info").mkdir()
    (tree / "src/pkg.egg-info/PKG-INFO").write_text("Name: pkg\n")
    (tree / "src/pkg/__pycache__").mkdir()
    (tree / "src/pkg/__pycache__/x.pyc").write_bytes(b"\0")
    (tree / ".git/index").write_bytes(b"\0")
    (tree / "src/pkg/__init__.py").write_text("changed\n")  # a tracked file: not carried
    said: list[str] = []
    files = generated.capture(tree, before, said.append)
    assert "setup generated 2 files" in said[0]
    return generated.from_tar(generated.to_tar(files))


def test_only_new_files_are_captured_byte_exact_through_the_archive(tmp_path: Path) -> None:
    files = _setup_output(tmp_path)
    assert sorted(f.path for f in files) == ["src/pkg.egg-info/PKG-INFO", "src/pkg/_version.py"]
    version = next(f for f in files if f.path.endswith("_version.py"))
    assert version.content == b"version = '1.4.3'\n"
    assert version.mtime_ns == 1_600_000_000_123_456_789


def test_laid_over_a_worktree_they_stay_out_of_diffs_commits_and_the_tracked_check(
    tmp_path: Path, make_repo: Any
) -> None:
    files = _setup_output(tmp_path)
    repo = make_repo({"src/pkg/__init__.py": "", "src/pkg.egg-info/PKG-INFO": "tracked\n"})
    workspace = JobWorkspace(repo, "main", f"gen-{os.getpid()}")
    workspace.open()
    try:
        tree = workspace.worktree("attempt")
        before = tracked.snapshot(tree)
        laid = generated.lay_over(tree, files)
        # The project's tracked file wins over what an older setup generated.
        assert laid == ["src/pkg/_version.py"]
        assert (tree / "src/pkg.egg-info/PKG-INFO").read_text() == "tracked\n"
        assert (tree / "src/pkg/_version.py").stat().st_mtime_ns == 1_600_000_000_123_456_789
        assert tracked.touched(before, tree) == []
        assert worktree_diff(tree) == ""
        # A candidate editing the generated file: the edit is dropped, the copy laid again.
        (tree / "src/pkg/_version.py").write_text("forged\n")
        (tree / "src/pkg/fix.py").write_text("x = 1\n")
        diff = worktree_diff(tree)
        assert "fix.py" in diff
        assert "_version" not in diff
        generated.lay_over(tree, files)
        assert (tree / "src/pkg/_version.py").read_text() == "version = '1.4.3'\n"
        commit = workspace.commit(tree, "fix")
        names = git(workspace.private, "show", "--name-only", "--format=", commit).split()
        assert names == ["src/pkg/fix.py"]
        # Laid again: the exclude lists each path once.
        generated.lay_over(tree, files)
        exclude = Path(git(tree, "rev-parse", "--git-path", "info/exclude"))
        exclude = exclude if exclude.is_absolute() else tree / exclude
        assert exclude.read_text().count("/src/pkg/_version.py") == 1
    finally:
        workspace.destroy()


def test_a_link_the_step_planted_is_never_written_through(tmp_path: Path) -> None:
    # Hostile: the step made the package directory a link to a host directory.
    files = _setup_output(tmp_path)
    outside = tmp_path / "host"
    outside.mkdir()
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "src/pkg").symlink_to(outside)
    assert generated.lay_over(tree, files) == ["src/pkg.egg-info/PKG-INFO"]
    assert list(outside.iterdir()) == []
    # A link in the file's own place is replaced, never followed.
    (tree / "src/pkg").unlink()
    (tree / "src/pkg").mkdir()
    (tree / "src/pkg/_version.py").symlink_to(outside / "target")
    assert "src/pkg/_version.py" in generated.lay_over(tree, files)
    assert not (tree / "src/pkg/_version.py").is_symlink()
    assert list(outside.iterdir()) == []
