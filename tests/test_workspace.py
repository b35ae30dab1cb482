"""JobWorkspace on real git repositories: oracle integrity, apply chain, publish."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from patchheal.errors import (
    BadInput,
    NotADiff,
    NotAGitRepository,
    PatchApplyError,
    PatchhealError,
    UnknownRef,
)
from patchheal.workspace.worktrees import (
    JobWorkspace,
    PublishRefused,
    file_checksums,
    worktree_diff,
    worktree_root,
)

APP = "".join(f"value_{i} = {i}\n" for i in range(1, 31))


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def commit_file(repo: Path, rel: str, text: str, message: str) -> str:
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(make_repo) -> Path:
    return make_repo({"app.py": APP, ".gitignore": "*.log\n", "docs/readme.md": "hi\n"})


@pytest.fixture
def ws(repo: Path, tmp_path: Path) -> JobWorkspace:
    workspace = JobWorkspace(repo, "main", "job-1", root=tmp_path / "wtroot")
    workspace.open()
    return workspace


def make_diff(ws: JobWorkspace, edit: dict[str, str | bytes | None]) -> str:
    """A diff made by really editing a scratch worktree at the base."""
    tree = ws.worktree("scratch")
    for rel, content in edit.items():
        target = tree / rel
        if content is None:
            target.unlink()
        elif isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
    diff = worktree_diff(tree)
    ws.remove(tree)
    return diff


def user_state(repo: Path) -> tuple[str, str, str, str]:
    return (
        git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "diff", "--cached"),
    )


# -- open -------------------------------------------------------------------------------


def test_open_refuses_a_directory_that_is_not_a_git_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(NotAGitRepository, match="plain is not a git repository"):
        JobWorkspace(plain, "main", "j").open()
    with pytest.raises(NotAGitRepository, match="does not exist"):
        JobWorkspace(tmp_path / "missing", "main", "j").open()


def test_a_repository_owned_by_another_user_gets_the_safe_directory_advice(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git's dubious-ownership refusal (an unpacked tarball, a mounted volume) is named as
    such, with the command that lifts it, not as 'not a git repository (<a hint line>)'."""
    if os.getuid() != 0:
        pytest.skip("giving the repository to another user needs root")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global-gitconfig"))
    for path in [repo, *repo.rglob("*")]:
        os.lchown(path, 54321, 54321)
    with pytest.raises(NotAGitRepository, match=r"owned by another user.*safe\.directory"):
        JobWorkspace(repo, "main", "j").open()


def test_open_refuses_an_unknown_ref_naming_ref_and_repo(repo: Path) -> None:
    with pytest.raises(UnknownRef, match=rf"'no-such-branch'.*{repo.name}"):
        JobWorkspace(repo, "no-such-branch", "j").open()
    with pytest.raises(UnknownRef):
        JobWorkspace(repo, "HEAD:app.py", "j").open()  # a blob, not a commit


def test_open_refuses_a_subdirectory_of_a_repository(repo: Path) -> None:
    with pytest.raises(NotAGitRepository, match="top directory"):
        JobWorkspace(repo / "docs", "main", "j").open()


def test_job_id_and_worktree_names_cannot_escape_the_root(ws: JobWorkspace, repo: Path) -> None:
    with pytest.raises(BadInput):
        JobWorkspace(repo, "main", "../evil")
    with pytest.raises(BadInput):
        ws.worktree("../evil")


def test_worktree_root_defaults_to_a_per_user_temp_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PATCHHEAL_WORKTREE_ROOT")
    assert worktree_root().name == "worktrees"
    assert worktree_root().parent.name.startswith("patchheal-")
    monkeypatch.setenv("PATCHHEAL_WORKTREE_ROOT", "/somewhere/else")
    assert worktree_root() == Path("/somewhere/else")


def test_open_uses_the_workspace_root_from_the_environment(repo: Path) -> None:
    workspace = JobWorkspace(repo, "main", "env-job")
    workspace.open()
    assert workspace.private.is_relative_to(worktree_root())


def test_oracle_integrity_no_later_commit_is_reachable_from_a_worktree(
    repo: Path, tmp_path: Path
) -> None:
    """Invariant: a proposer in a worktree cannot read commits after the base."""
    base = git(repo, "rev-parse", "HEAD")
    later = commit_file(repo, "app.py", APP + "fixed = True\n", "the fix, later")
    git(repo, "branch", "feature")
    git(repo, "tag", "v1")
    git(repo, "remote", "add", "origin", "https://example.invalid/x.git")
    workspace = JobWorkspace(repo, base, "oracle", root=tmp_path / "root")
    workspace.open()
    tree = workspace.worktree("attempt")
    log_all = git(tree, "log", "--all", "--format=%H")
    assert log_all.splitlines() == [base]
    refs = git(tree, "for-each-ref", "--format=%(refname) %(objectname)")
    assert refs == f"refs/patchheal/base {base}"
    assert git(tree, "remote") == ""
    assert subprocess.run(["git", "cat-file", "-e", later], cwd=tree).returncode != 0
    assert not (workspace.private / "FETCH_HEAD").exists()
    assert "fixed" not in (tree / "app.py").read_text()


def test_open_and_worktrees_never_modify_the_user_repository(repo: Path, ws: JobWorkspace) -> None:
    (repo / "app.py").write_text("uncommitted work\n")
    before = user_state(repo)
    tree = ws.worktree("a")
    ws.apply(tree, make_diff(ws, {"new.py": "x = 1\n"}))
    ws.commit(tree, "attempt")
    ws.reset(tree)
    ws.open()
    assert user_state(repo) == before
    assert (repo / "app.py").read_text() == "uncommitted work\n"


def test_open_is_idempotent_and_a_new_base_starts_over(repo: Path, ws: JobWorkspace) -> None:
    tree = ws.worktree("keep")
    ws.open()
    assert ws.list_worktrees() == [tree.resolve()]
    later = commit_file(repo, "b.txt", "b\n", "later")
    moved = JobWorkspace(repo, later, "job-1", root=ws.dir.parent)
    moved.open()
    assert moved.list_worktrees() == []
    assert git(moved.worktree("fresh"), "rev-parse", "HEAD") == later


def test_a_leaked_git_dir_does_not_redirect_the_workspace(
    repo: Path, make_repo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    other = make_repo({"other.txt": "not this one\n"})
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    workspace = JobWorkspace(repo, "main", "leak", root=tmp_path / "r")
    workspace.open()
    monkeypatch.delenv("GIT_DIR")
    assert workspace.base_commit == git(repo, "rev-parse", "HEAD")
    assert (workspace.worktree("w") / "app.py").is_file()


# -- worktrees ------------------------------------------------------------------------


def test_worktree_is_detached_at_base_and_reuse_makes_it_pristine(ws: JobWorkspace) -> None:
    tree = ws.worktree("attempt")
    assert git(tree, "rev-parse", "HEAD") == ws.base_commit
    detached = subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=tree)
    assert detached.returncode == 1
    (tree / "app.py").write_text("broken\n")
    (tree / "untracked.py").write_text("x\n")
    (tree / "cache.log").write_text("ignored\n")
    (tree / "nested").mkdir()
    git(tree / "nested", "init", "-q")
    again = ws.worktree("attempt")
    assert again == tree
    assert (tree / "app.py").read_text() == APP
    assert sorted(p.name for p in tree.iterdir()) == [".git", ".gitignore", "app.py", "docs"]


def test_worktree_at_a_commit_of_the_workspace(ws: JobWorkspace) -> None:
    tree = ws.worktree("a")
    (tree / "step1.txt").write_text("one\n")
    step1 = ws.commit(tree, "checkpoint 1")
    other = ws.worktree("b", at=step1)
    assert (other / "step1.txt").read_text() == "one\n"
    ws.reset(other, to=ws.base_commit)
    assert not (other / "step1.txt").exists()
    with pytest.raises(UnknownRef, match="nope"):
        ws.worktree("c", at="nope")


def test_reset_refuses_paths_that_are_not_this_jobs_worktrees(ws: JobWorkspace, repo: Path) -> None:
    """Invariant: reset --hard + clean -fdx can never hit the user's repository."""
    (repo / "precious.txt").write_text("uncommitted\n")
    with pytest.raises(BadInput, match="not a worktree of job job-1"):
        ws.reset(repo)
    with pytest.raises(BadInput):
        ws.remove(repo)
    assert (repo / "precious.txt").exists()


def test_list_remove_and_destroy(ws: JobWorkspace) -> None:
    a, b = ws.worktree("a"), ws.worktree("b")
    assert ws.list_worktrees() == sorted([a.resolve(), b.resolve()])
    ws.remove(a)
    assert not a.exists()
    assert ws.list_worktrees() == [b.resolve()]
    ws.destroy()
    assert not ws.dir.exists()
    assert ws.list_worktrees() == []


def test_a_worktree_directory_deleted_behind_our_back_is_recreated(ws: JobWorkspace) -> None:
    import shutil

    tree = ws.worktree("a")
    shutil.rmtree(tree)
    assert (ws.worktree("a") / "app.py").read_text() == APP


# -- worktree_diff ----------------------------------------------------------------------


def test_worktree_diff_includes_untracked_and_binary_files_and_leaves_the_index(
    ws: JobWorkspace,
) -> None:
    tree = ws.worktree("a")
    (tree / "app.py").write_text(APP.replace("value_3 = 3", "value_3 = 33"))
    (tree / "docs/readme.md").unlink()
    (tree / "new.txt").write_text("new\n")
    (tree / "logo.bin").write_bytes(bytes(range(256)))
    (tree / "ignored.log").write_text("not part of the change\n")
    status_before = git(tree, "status", "--porcelain")
    diff = worktree_diff(tree)
    assert git(tree, "status", "--porcelain") == status_before
    assert git(tree, "diff", "--cached") == ""
    for name in ("a/app.py", "b/new.txt", "b/logo.bin", "a/docs/readme.md"):
        assert name in diff
    assert "ignored.log" not in diff
    assert "GIT binary patch" in diff
    # The diff reproduces the state exactly in a fresh worktree.
    fresh = ws.worktree("b")
    ws.apply(fresh, diff)
    assert (fresh / "logo.bin").read_bytes() == bytes(range(256))
    assert not (fresh / "docs/readme.md").exists()
    assert file_checksums(fresh, ["app.py", "new.txt"]) == file_checksums(
        tree, ["app.py", "new.txt"]
    )


def test_worktree_diff_against_a_base_sees_commits_made_in_the_worktree(ws: JobWorkspace) -> None:
    tree = ws.worktree("agent")
    (tree / "app.py").write_text("committed by an agent\n")
    git(tree, "commit", "-q", "-am", "agent commit")
    assert worktree_diff(tree) == ""
    assert "+committed by an agent" in worktree_diff(tree, base=ws.base_commit)


def test_file_checksums(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    sums = file_checksums(tmp_path, ["a.txt", "gone.txt"])
    assert sums == {
        "a.txt": "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
        "gone.txt": None,
    }
    with pytest.raises(BadInput):
        file_checksums(tmp_path, ["../x"])


# -- apply ----------------------------------------------------------------------------


def test_apply_a_clean_diff_with_plain_git_apply(ws: JobWorkspace) -> None:
    diff = make_diff(ws, {"app.py": APP.replace("value_5 = 5", "value_5 = 50")})
    tree = ws.worktree("a")
    assert ws.apply(tree, diff) == "git-apply"
    assert "value_5 = 50" in (tree / "app.py").read_text()
    assert git(tree, "diff", "--cached") == ""


def test_apply_falls_back_to_fuzzy_when_context_drifted(ws: JobWorkspace) -> None:
    # Made against a variant whose neighbouring lines differ from the base.
    drifted = APP.replace("value_9 = 9", "value_9 = 9  # note").replace("value_11 = 11", "v11 = 11")
    diff = (
        "--- a/app.py\n+++ b/app.py\n@@ -8,5 +8,5 @@\n value_8 = 8\n value_9 = 9  # note\n"
        "-value_10 = 10\n+value_10 = 100\n v11 = 11\n value_12 = 12\n"
    )
    assert drifted  # the text the diff was written against
    tree = ws.worktree("a")
    method = ws.apply(tree, diff)
    assert method in {"git-apply-fuzzy", "patch-fuzz"}
    assert "value_10 = 100\n" in (tree / "app.py").read_text()


def test_apply_uses_three_way_merge_when_the_preimage_blob_is_known(
    ws: JobWorkspace, repo: Path
) -> None:
    tree = ws.worktree("a")
    (tree / "app.py").write_text(APP.replace("value_1 = 1", "value_1 = 10"))
    step1 = ws.commit(tree, "step 1 changed line one")
    # Made at the base: its context includes line one, as it was before step 1.
    diff = make_diff(ws, {"app.py": APP.replace("value_4 = 4", "value_4 = 40")})
    ws.reset(tree, to=step1)
    assert ws.apply(tree, diff) == "git-apply-3way"
    text = (tree / "app.py").read_text()
    assert "value_1 = 10\n" in text
    assert "value_4 = 40\n" in text
    assert git(tree, "diff", "--cached") == ""


def test_apply_repairs_wrong_hunk_counts_of_a_hand_written_diff(ws: JobWorkspace) -> None:
    head = (
        "--- a/app.py\n+++ b/app.py\n@@ -1,9 +1,9 @@\n value_1 = 1\n-value_2 = 2\n+value_2 = 22\n"
    )
    expected = APP.replace("value_2 = 2\n", "value_2 = 22\n")
    tree = ws.worktree("a")
    assert ws.apply(tree, head + " value_3 = 3\n") == "git-apply"
    assert (tree / "app.py").read_text() == expected
    # Less context after than before makes git assume the end of the file: fuzz fixes that.
    ws.reset(tree)
    assert ws.apply(tree, head) in {"git-apply-fuzzy", "patch-fuzz"}
    assert (tree / "app.py").read_text() == expected


def test_apply_rejects_text_that_is_not_a_diff(ws: JobWorkspace) -> None:
    tree = ws.worktree("a")
    with pytest.raises(NotADiff):
        ws.apply(tree, "Sure! Here is the fix: change line 3.")
    assert git(tree, "status", "--porcelain") == ""


def test_apply_detects_an_already_applied_patch(ws: JobWorkspace) -> None:
    diff = make_diff(ws, {"app.py": APP.replace("value_5 = 5", "value_5 = 50")})
    tree = ws.worktree("a")
    ws.apply(tree, diff)
    with pytest.raises(PatchApplyError, match="already applied"):
        ws.apply(tree, diff)


def test_a_patch_that_does_not_apply_leaves_the_worktree_pristine(ws: JobWorkspace) -> None:
    diff = (
        "--- a/app.py\n+++ b/app.py\n@@ -1,3 +1,3 @@\n nothing = 0\n-like = 1\n+this = 2\n"
        " here = 3\n--- a/docs/readme.md\n+++ b/docs/readme.md\n@@ -1 +1 @@\n-hi\n+hello\n"
    )
    tree = ws.worktree("a")
    with pytest.raises(PatchApplyError) as caught:
        ws.apply(tree, diff)
    message = str(caught.value)
    assert "does not apply" in message
    assert "git-apply (exit" in message
    assert "patch failed" in message or "does not apply" in message.split("\n", 1)[1]
    assert git(tree, "status", "--porcelain", "--untracked-files=all") == ""
    assert (tree / "docs/readme.md").read_text() == "hi\n"


@pytest.mark.parametrize(
    "path",
    ["../escaped.txt", "/tmp/patchheal-escape-test.txt", ".git/hooks/post-checkout"],
)
def test_apply_refuses_paths_outside_the_worktree(ws: JobWorkspace, path: str) -> None:
    src = "/dev/null"
    dst = path if path.startswith("/") else f"b/{path}"
    diff = f"--- {src}\n+++ {dst}\n@@ -0,0 +1 @@\n+pwned\n"
    tree = ws.worktree("a")
    with pytest.raises(PatchApplyError, match="refused to apply"):
        ws.apply(tree, diff)
    assert not (tree.parent / "escaped.txt").exists()
    assert not Path("/tmp/patchheal-escape-test.txt").exists()
    assert git(tree, "status", "--porcelain", "--untracked-files=all") == ""


def test_stacked_patches_and_a_failed_apply_restores_the_dirty_state(ws: JobWorkspace) -> None:
    first = make_diff(ws, {"one.txt": "1\n"})
    second = make_diff(ws, {"app.py": APP.replace("value_7 = 7", "value_7 = 70")})
    broken = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-not there\n+x\n"
    tree = ws.worktree("a")
    ws.apply(tree, first)
    ws.apply(tree, second)
    state = worktree_diff(tree)
    with pytest.raises(PatchApplyError):
        ws.apply(tree, broken)
    assert worktree_diff(tree) == state
    assert git(tree, "diff", "--cached") == ""


# -- commit and publish -------------------------------------------------------------------


def test_publish_creates_a_branch_without_touching_the_users_work(
    repo: Path, ws: JobWorkspace
) -> None:
    (repo / "app.py").write_text("my uncommitted edit\n")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "scratch.txt").write_text("untracked\n")
    refs_before, status_before, head_before, cached_before = user_state(repo)
    tree = ws.worktree("a")
    (tree / "fix.py").write_text("fixed = True\n")
    sha = ws.commit(tree, "patchheal: fix")
    ws.publish(sha, "patchheal/local/job-1")
    refs_after, status_after, head_after, cached_after = user_state(repo)
    assert git(repo, "rev-parse", "patchheal/local/job-1") == sha
    assert git(repo, "show", f"{sha}:fix.py") == "fixed = True"
    assert (status_after, head_after, cached_after) == (status_before, head_before, cached_before)
    assert set(refs_before.splitlines()) < set(refs_after.splitlines())
    assert (repo / "app.py").read_text() == "my uncommitted edit\n"


def test_publish_refuses_the_checked_out_branch(repo: Path, ws: JobWorkspace) -> None:
    tree = ws.worktree("a")
    (tree / "fix.py").write_text("x\n")
    sha = ws.commit(tree, "fix")
    before = user_state(repo)
    with pytest.raises(PublishRefused, match="'main': it is checked out") as caught:
        ws.publish(sha, "main")
    assert isinstance(caught.value, PatchhealError)
    assert f"checked out in {repo.resolve()}" in str(caught.value)
    git(repo, "worktree", "add", "-q", "-b", "side", str(repo.parent / "side-wt"))
    with pytest.raises(PublishRefused) as side:
        ws.publish(sha, "side")
    # The worktree that holds the branch, not the repository (issue 34).
    assert f"checked out in {(repo.parent / 'side-wt').resolve()} " in str(side.value)
    assert "--branch" in str(side.value)
    assert user_state(repo)[2:] == before[2:]
    assert git(repo, "rev-parse", "main") == ws.base_commit


def test_publish_force_updates_only_patchheal_branches(repo: Path, ws: JobWorkspace) -> None:
    tree = ws.worktree("a")
    (tree / "one.txt").write_text("1\n")
    first = ws.commit(tree, "one")
    ws.reset(tree, to=ws.base_commit)
    (tree / "two.txt").write_text("2\n")
    second = ws.commit(tree, "two")
    ws.publish(first, "patchheal/local/x")
    ws.publish(second, "patchheal/local/x")
    assert git(repo, "rev-parse", "patchheal/local/x") == second
    ws.publish(first, "user-branch")
    with pytest.raises(PublishRefused, match="does not descend"):
        ws.publish(second, "user-branch")
    assert git(repo, "rev-parse", "user-branch") == first


def test_publish_rejects_bad_branch_names_and_unknown_commits(ws: JobWorkspace) -> None:
    with pytest.raises(BadInput, match="not a valid branch name"):
        ws.publish(ws.base_commit, "bad..name")
    with pytest.raises(UnknownRef):
        ws.publish("0" * 40, "patchheal/local/x")


def test_methods_need_open(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(PatchhealError, match="call open"):
        JobWorkspace(repo, "main", "closed", root=tmp_path / "r").worktree("a")
