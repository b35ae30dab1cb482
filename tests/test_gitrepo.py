"""GitPython on the private repository: leaked GIT_* variables cannot redirect its lookups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from patchheal.errors import UnknownRef
from patchheal.workspace.gitrepo import PrivateRefs
from patchheal.workspace.worktrees import JobWorkspace
from tests.healjobs import git


@pytest.fixture
def other(make_repo: Any) -> tuple[Path, str]:
    """Another repository, with a commit of its own under the private repository's ref name."""
    repo = make_repo({"other.txt": "not this one\n"})
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "update-ref", "refs/patchheal/base", sha)
    return repo, sha


def leak_everything(monkeypatch: pytest.MonkeyPatch, other: Path) -> None:
    """What a parent git (a hook, `git rebase -x`) or a hostile environment leaves behind."""
    dot_git = other / ".git"
    leaks = {
        "GIT_DIR": dot_git,
        "GIT_COMMON_DIR": dot_git,
        "GIT_OBJECT_DIRECTORY": dot_git / "objects",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": dot_git / "objects",
        "GIT_WORK_TREE": other,
        "GIT_INDEX_FILE": dot_git / "index",
    }
    for name, value in leaks.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='touch /tmp/x; false'")
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.alternateRefsCommand")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "false")


def test_lookups_see_only_the_private_repository_whatever_leaks_in(
    make_repo: Any, other: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    repo = make_repo({"a.txt": "one\n"})
    workspace = JobWorkspace(repo, "main", "leaky", root=tmp_path / "wt-root")
    workspace.open()
    base = workspace.base_commit
    other_repo, other_sha = other
    leak_everything(monkeypatch, other_repo)
    refs = PrivateRefs(workspace.private)
    try:
        assert refs.commit("refs/patchheal/base") == base
        assert refs.commit(base) == base
        assert refs.commit(base[:10]) == base
        # The other repository's objects and refs are out of reach.
        assert refs.commit(other_sha) == ""
        assert refs.commit(other_sha[:10]) == ""
    finally:
        refs.close()
    # The workspace, GitPython and subprocess git together, under the same leaks.
    assert workspace.worktree("w", at="refs/patchheal/base").joinpath("a.txt").is_file()
    with pytest.raises(UnknownRef):
        workspace.worktree("x", at=other_sha)
    workspace.close()


def test_a_lookup_answers_a_commit_or_nothing(make_repo: Any, tmp_path: Path) -> None:
    """Legitimate refs resolve; everything else is "" (never an exception, never a non-commit)."""
    repo = make_repo({"a.txt": "one\n"})
    git(repo, "tag", "-a", "-m", "annotated", "v1")
    workspace = JobWorkspace(repo, "v1", "lookups", root=tmp_path / "wt-root")
    workspace.open()
    tree = workspace.worktree("w")
    (tree / "b.txt").write_text("two\n")
    made = workspace.commit(tree, "second")
    refs = PrivateRefs(workspace.private)
    try:
        assert refs.commit(made) == made
        assert refs.commit(f"{made}~1") == workspace.base_commit
        assert refs.commit(f"refs/patchheal/commits/{made}") == made
        tree_sha = git(tree, "rev-parse", "HEAD^{tree}")
        for bad in ("", "0" * 40, "nope", "--all", tree_sha, f"{workspace.base_commit}~1", "HEAD"):
            assert refs.commit(bad) == "", bad
    finally:
        refs.close()
        workspace.close()
