"""Applying a candidate diff to a worktree: an explicit fallback chain.

`git apply`, then `git apply --3way`, then fuzzy (`git apply` ignoring
whitespace with one line of context, then GNU `patch --fuzz` when installed),
with the worktree put back as it was between tries and after a failure.
A diff that applies cleanly in reverse is reported as already applied.
Also home of the throwaway index that lets us read a worktree's full state
(untracked files included) without touching its real index.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from patchheal import proc
from patchheal.errors import PatchApplyError
from patchheal.workspace import diffs


def git_out(*args: str, cwd: Path, check: bool = True, stdin: bytes | None = None) -> str:
    """`proc.git` returning its stripped output."""
    return proc.git(*args, cwd=cwd, check=check, stdin=stdin).output.strip()


def git_env(path: Path) -> dict[str, str]:
    """The environment of a raw `git` (or `patch`) call in `path`: hardened, explicit location."""
    return {**proc.no_git_env(), **proc.git_location(path)}


@contextmanager
def temp_index(path: Path) -> Iterator[dict[str, str]]:
    """An environment whose GIT_INDEX_FILE is a throwaway copy of the worktree's index.

    Copying (rather than `read-tree HEAD`) keeps the stat cache, so `add -A`
    does not rehash every file of a large worktree.
    """
    index = Path(git_out("rev-parse", "--git-path", "index", cwd=path))
    index = index if index.is_absolute() else path / index
    fd, name = tempfile.mkstemp(prefix="index.patchheal-", dir=index.parent)
    os.close(fd)
    temp = Path(name)
    try:
        env = git_env(path)
        env.update(GIT_INDEX_FILE=str(temp), GIT_TERMINAL_PROMPT="0")
        if index.is_file():
            shutil.copy2(index, temp)
        else:
            temp.unlink()
            proc.run(["git", "read-tree", "HEAD"], cwd=path, env=env, check=True)
        yield env
    finally:
        temp.unlink(missing_ok=True)


def apply_methods() -> list[tuple[str, list[str], bool]]:
    """(name, argv, atomic) in the order tried; a non-atomic try is undone when it fails."""
    opts = ["--whitespace=nowarn"]
    methods = [
        ("git-apply", ["git", "apply", *opts], True),
        ("git-apply-3way", ["git", "apply", "--3way", *opts], False),
        (
            "git-apply-fuzzy",
            ["git", "apply", "--ignore-whitespace", "-C1", "--recount", *opts],
            True,
        ),
    ]
    if shutil.which("patch"):
        fuzz = ["patch", "-p1", "--forward", "--batch", "--fuzz=3", "--no-backup-if-mismatch"]
        methods.append(("patch-fuzz", [*fuzz, "--reject-file=-"], False))
    return methods


def apply_patch(path: Path, diff: str) -> str:
    """Apply `diff` in the worktree at `path`; return the name of the method that worked.

    Raises NotADiff for text that is no diff, and PatchApplyError (with each
    method's output) when no method applies it, when it is already applied,
    or when a path would land outside the worktree; the worktree is then as
    it was before the call.
    """
    text = diffs.repaired(diff)
    diffs.parse(text)  # NotADiff before anything is touched
    unsafe = diffs.unsafe_paths(text)
    if unsafe:
        listed = "; ".join(f"{p} {why}" for p, why in unsafe)
        raise PatchApplyError(f"refused to apply the patch in {path}: {listed}")
    data = text.encode("utf-8", "surrogateescape")
    head = git_out("rev-parse", "HEAD", cwd=path)
    snapshot = _snapshot(path)
    tried: list[str] = []
    for name, argv, atomic in apply_methods():
        result = proc.run(argv, cwd=path, env=git_env(path), stdin=data, timeout=300)
        if result.exit_code == 0:
            if name == "git-apply-3way":
                git_out("reset", "--quiet", cwd=path)  # the index back at HEAD, as we found it
            return name
        output = "\n".join("    " + line for line in result.output.strip().splitlines()[-20:])
        tried.append(f"  {name} (exit {result.exit_code}):\n{output}")
        if not atomic:
            _restore(path, head, snapshot)
        if name == "git-apply":
            reverse = ("apply", "--check", "--reverse", "--whitespace=nowarn")
            if proc.git(*reverse, cwd=path, stdin=data, check=False).exit_code == 0:
                raise PatchApplyError(
                    f"the patch is already applied in {path} (it applies cleanly in reverse)"
                )
    raise PatchApplyError(f"the patch does not apply to {path} by any method:\n" + "\n".join(tried))


def _snapshot(path: Path) -> str | None:
    """A commit of a dirty starting state (None when clean), to restore after a failed try.

    Lets checkpoints be replayed one after another without committing between them.
    """
    if not git_out("status", "--porcelain", "--untracked-files=all", cwd=path):
        return None
    with temp_index(path) as env:
        proc.run(["git", "add", "-A"], cwd=path, env=env, check=True)
        tree = proc.run(["git", "write-tree"], cwd=path, env=env, check=True).output.strip()
    return git_out("commit-tree", tree, "-p", "HEAD", "-m", "patchheal: before apply", cwd=path)


def _restore(path: Path, head: str, snapshot: str | None) -> None:
    git_out("reset", "--quiet", "--hard", snapshot or head, cwd=path)
    git_out("clean", "-ffdxq", cwd=path)
    if snapshot:
        git_out("reset", "--quiet", head, cwd=path)  # files as they were, index at HEAD
