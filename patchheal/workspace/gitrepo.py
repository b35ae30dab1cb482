"""GitPython for the private repository's ref and object queries, with a pinned location.

A persistent `git.Repo` resolves a ref in Python (refs and packed-refs are
read directly, objects through one long-lived `git cat-file --batch-check`):
about 0.5 ms against 5-8 ms for a `git rev-parse` subprocess (see
docs/architecture.md, "Git layer").

GitPython starts every git it runs from `os.environ` and cannot drop a
variable, and `Repo()` itself honours a leaked `GIT_OBJECT_DIRECTORY`,
`GIT_COMMON_DIR` or `GIT_WORK_TREE`. So nothing is left to discovery: the
location variables are set to this repository's own values, every other
variable through which a parent git leaks in is overridden with a harmless
value, `proc.no_git_env`'s hardening (no system/global config, the
`HOST_GIT_CONFIG` overrides) is applied on top, and the Python side's object
database and common directory are pinned after construction.
"""

from __future__ import annotations

import os
from pathlib import Path

import git
from git.db import GitCmdObjectDB
from gitdb.exc import ODBError

from patchheal import proc

# Harmless values for leaky variables GitPython cannot unset: each matches the
# `proc.HOST_GIT_CONFIG` setting it would otherwise bypass.
_NEUTRAL = {
    "GIT_CONFIG": os.devnull,
    "GIT_CONFIG_PARAMETERS": "",
    "GIT_EXTERNAL_DIFF": "",
    "GIT_SSH": "false",
    "GIT_SSH_COMMAND": "false",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": "false",
    "GIT_ASKPASS": "",
    "GIT_NAMESPACE": "",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES": "",
}


def pinned_environment(git_dir: Path) -> dict[str, str]:
    """Every variable a GitPython-run git gets on top of `os.environ`, so that it
    sees the bare repository `git_dir` and the hardening of `proc.no_git_env`."""
    hardened = proc.no_git_env({})
    env = {**_NEUTRAL, **hardened}
    # Leaked GIT_CONFIG_KEY_<n>/VALUE_<n> beyond our count are ignored by git;
    # blanking them leaves nothing to misread.
    for name in os.environ:
        if name.startswith("GIT_CONFIG_") and name not in env:
            env[name] = ""
    env.update(
        GIT_DIR=str(git_dir),
        GIT_COMMON_DIR=str(git_dir),
        GIT_OBJECT_DIRECTORY=str(git_dir / "objects"),
        GIT_INDEX_FILE=str(git_dir / "index"),
        # A bare repository has no work tree; pointing it at the git directory
        # keeps a leaked one from naming somebody else's files.
        GIT_WORK_TREE=str(git_dir),
        GIT_TERMINAL_PROMPT="0",
    )
    return env


class PrivateRefs:
    """Ref and commit lookups in one bare repository, through one persistent `git.Repo`."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = Path(git_dir).absolute()
        repo = git.Repo(str(self.git_dir), search_parent_directories=False)
        repo.git.update_environment(**pinned_environment(self.git_dir))
        # Repo() read GIT_COMMON_DIR / GIT_OBJECT_DIRECTORY from os.environ: pin both.
        repo._common_dir = str(self.git_dir)
        repo.odb = GitCmdObjectDB(str(self.git_dir / "objects"), repo.git)
        self._repo = repo

    def commit(self, ref: str) -> str:
        """The full sha of the commit `ref` names, or "" when it names none."""
        if not ref or ref.startswith("-"):
            return ""
        try:
            found = self._repo.rev_parse(ref)
        except (ODBError, ValueError, IndexError, KeyError):
            return ""
        # GitPython hands back the all-zero sha as a commit without looking it up.
        if found.binsha == git.Object.NULL_BIN_SHA:
            return ""
        while isinstance(found, git.TagObject):
            found = found.object
        return found.hexsha if isinstance(found, git.Commit) else ""

    def close(self) -> None:
        """End the persistent `git cat-file` processes."""
        self._repo.close()
