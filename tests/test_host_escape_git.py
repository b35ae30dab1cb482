"""Issue 17: a step must not get host-side git to run its code (the attack, twice).

The attack: a step writes a git directory of its own whose config sets
`core.fsmonitor` (and a hook) to a command that leaves a marker on the host,
then points the worktree's `.git` file at it. patchheal's next host-side
`reset --hard`, `clean`, diff and apply must not run that command.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness_support import engine, python_def, python_image

from patchheal.harness.config import HarnessDef
from patchheal.harness.docker.harness import DockerHarness
from patchheal.workspace.worktrees import JobWorkspace, worktree_diff

__all__ = ["engine", "python_def", "python_image"]


def evil_script(tree: Path, marker: Path) -> str:
    """Shell (run in the worktree) that plants a git directory running `touch marker`
    and points `.git` at its host path (which a step learns from the read-only mounts)."""
    evil = tree / ".evil-git"
    payload = f"touch {marker}"
    return (
        "adm=$(sed 's/^gitdir: //' .git) && cp -r $adm/../.. .evil-git && "
        "cp $adm/HEAD $adm/index .evil-git/ && rm -rf .evil-git/worktrees; "
        f'printf \'[core]\\n\\tbare = false\\n\\tfsmonitor = "{payload}; false"\\n'
        f"\\thooksPath = {evil}/hooks\\n"
        f'[filter "x"]\\n\\tclean = "{payload}; cat"\\n\\tsmudge = "{payload}; cat"\\n\' '
        ">> .evil-git/config; "
        f"printf '#!/bin/sh\\n{payload}\\n' > .evil-git/hooks/post-checkout; "
        "chmod +x .evil-git/hooks/post-checkout; "
        "printf '* filter=x\\n' > .gitattributes; "
        f"echo 'gitdir: {evil}' > .git; echo wrote=$?"
    )


def host_git_pass(workspace: JobWorkspace, tree: Path) -> None:
    """What the loop does with a worktree after a step: diff it, reset it, apply to it."""
    worktree_diff(tree)
    workspace.reset(tree)
    (tree / "new.txt").write_text("x\n")
    worktree_diff(tree)
    workspace.reset(tree)


@pytest.fixture
def workspace(make_repo: Any, tmp_path: Path) -> JobWorkspace:
    repo = make_repo({"a.txt": "one\n"})
    ws = JobWorkspace(repo, "HEAD", "escape", root=tmp_path / "wt-root")
    ws.open()
    return ws


def test_a_rewritten_dot_git_does_not_run_code_on_the_host(
    workspace: JobWorkspace, tmp_path: Path
) -> None:
    """Host-side git hardening alone (the local harness: a step there may write anything)."""
    tree = workspace.worktree("verify")
    marker = tmp_path / "pwned"
    result = subprocess.run(["sh", "-c", evil_script(tree, marker)], cwd=tree, check=True,
                            capture_output=True, text=True)  # fmt: skip
    assert "wrote=0" in result.stdout, result.stderr
    assert (tree / ".evil-git" / "HEAD").is_file(), result.stderr
    assert (tree / ".git").read_text().strip() == f"gitdir: {tree / '.evil-git'}"
    host_git_pass(workspace, tree)
    assert not marker.exists()
    # Legitimate use still works: the worktree is pristine at the base, `.git` restored.
    assert not (tree / ".evil-git").exists()
    assert (tree / "a.txt").read_text() == "one\n"
    assert workspace.commit(tree, "ok") != workspace.base_commit


@pytest.mark.docker
def test_a_docker_step_cannot_rewrite_dot_git_nor_run_code_on_the_host(
    python_image: str, python_def: HarnessDef, workspace: JobWorkspace, tmp_path: Path
) -> None:
    tree = workspace.worktree("verify")
    marker = tmp_path / "pwned"
    original = (tree / ".git").read_text()
    harness = DockerHarness(python_def, job_id=f"escape-git-{os.getpid()}")
    try:
        result = harness.run(evil_script(tree, marker), tree, timeout=60, idle_timeout=60)
        git_in_step = harness.run("git status --short >/dev/null && echo git-ok", tree,
                                  timeout=60, idle_timeout=60)  # fmt: skip
    finally:
        harness.close()
    assert "wrote=0" not in result.output, result.output
    assert (tree / ".git").read_text() == original
    assert "git-ok" in git_in_step.output
    host_git_pass(workspace, tree)
    assert not marker.exists()
