"""What dependency setup reads: a worktree's committed tree, never a candidate's edits.

A job worktree's HEAD is the step's starting commit (the base plus verified
fixes); a candidate is applied on top, uncommitted. Setup runs the project's
packaging code (setup.py, build backends) as root and its result is cached as
an image, so it gets an export of HEAD, made by host git through the
worktree's trusted location (`proc.git_location`). A directory that is not a
job worktree (an ad-hoc `patchheal run` over a plain directory) is used as is.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

from patchheal import proc
from patchheal.harness.engine import leftovers


class CommittedSources:
    """Exports of worktree commits, one directory per commit, removed on close."""

    def __init__(self) -> None:
        self._root: Path | None = None
        self._exports: dict[str, Path] = {}

    def source(self, worktree: Path) -> Path:
        """The directory dependency setup reads for `worktree`."""
        if not proc.git_location(worktree):
            return worktree
        head = proc.git("rev-parse", "--verify", "HEAD^{commit}", cwd=worktree).output.strip()
        if head not in self._exports:
            self._exports[head] = self._export(worktree, head)
        return self._exports[head]

    def _export(self, worktree: Path, commit: str) -> Path:
        if self._root is None:
            self._root = leftovers.make_temp_dir("patchheal-sources-")
        target = self._root / commit
        archive = self._root / f"{commit}.tar"
        proc.git("archive", "--format=tar", f"--output={archive}", commit, cwd=worktree)
        target.mkdir()
        with tarfile.open(archive) as tar:
            _extract(tar, target)
        archive.unlink()
        _as_repository(target, worktree, commit)
        return target

    def close(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
            self._exports.clear()


def _extract(tar: tarfile.TarFile, target: Path) -> None:
    """Extract `git archive`'s tarball with the 'data' filter, or, on a Python older than
    the filter (Debian bookworm's 3.11.2), its members that stay inside `target`: a git
    tree cannot hold a path under one of its own symlinks, so no member is written through one."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(target, filter="data")
        return
    inside = [
        member
        for member in tar.getmembers()
        if (member.isfile() or member.isdir() or member.issym())
        and not member.name.startswith("/")
        and ".." not in Path(member.name).parts
    ]
    tar.extractall(target, members=inside)


def _as_repository(target: Path, worktree: Path, commit: str) -> None:
    """Make the export a git repository at `commit` (that commit only, depth 1).

    Build backends read versions from git (setuptools-scm, hatch-vcs,
    versioneer): a plain export has no `.git`, and `pip install -e .` of such a
    project fails in setup though it installs in CI's checkout. The objects come
    from the job's private repository (the base commit and patchheal's own
    commits, nothing later); the index is the commit's, so the tree is clean.
    It has no tags: the version CI's checkout gives reaches the tools that
    honour an override through it (scmversion.py); versioneer, which has none,
    reads this depth-1 history.
    """
    common = proc.git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=worktree)
    here = {"GIT_DIR": str(target / ".git"), "GIT_WORK_TREE": str(target)}
    proc.git("init", "-q", cwd=target, location={})
    proc.git("fetch", "-q", "--depth=1", "--no-tags", common.output.strip(), commit,
             cwd=target, location=here)  # fmt: skip
    proc.git("reset", "-q", commit, cwd=target, location=here)
