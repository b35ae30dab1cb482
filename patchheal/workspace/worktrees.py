"""Git workspaces of a job: a private repository, its worktrees, apply, commit, publish.

Oracle integrity: every job gets a private bare repository holding the base
commit alone, grafted at depth 1 (no ancestors, branches, tags, remotes or
FETCH_HEAD), so a proposer in a worktree cannot read a later fix with
`git log --all`; copying one commit also keeps setup cost independent of the
history's length and works on shallow and partial clones (see `history.py`).
The user's repository is read once by `open()` (in a partial clone, git may
fetch missing blobs of the base into it, as a checkout would) and written only
by `publish()`, which adds one branch and never touches the checked-out branch,
the index or the working tree.

Attempts reuse one worktree: `reset --hard` + `clean -ffdx` is far cheaper
than a fresh `worktree add` (see benchmarks/bench_workspace.py), which is why
caches belong in `cache_dir`, outside the worktree.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from patchheal import proc
from patchheal.errors import BadInput, NotAGitRepository, PatchhealError, UnknownRef
from patchheal.workspace.gitrepo import PrivateRefs
from patchheal.workspace.history import copy_base_commit
from patchheal.workspace.patching import apply_patch, git_out, temp_index

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# Settings of the private repository that keep a user's global git config
# (hooks, signing, autocrlf, whitespace errors) from changing what we do.
_PRIVATE_CONFIG = {
    "core.hooksPath": "/dev/null",
    "core.autocrlf": "false",
    "core.logAllRefUpdates": "false",
    "commit.gpgsign": "false",
    "gc.auto": "0",
    "apply.whitespace": "nowarn",
    "advice.detachedHead": "false",
    "uploadpack.allowAnySHA1InWant": "true",
}

# Explicit prefixes and no renames: the same diff whatever the user's git config says.
_DIFF_ARGV = ("git", "diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "--no-textconv",
              "--no-renames", "--src-prefix=a/", "--dst-prefix=b/")  # fmt: skip


def _rev_parse(ref: str, cwd: Path) -> str:
    """The full sha `ref` names in the repository at `cwd`, or "" when it names nothing."""
    return git_out("rev-parse", "--verify", "--quiet", ref, cwd=cwd, check=False)


def _restore_git_file(path: Path) -> None:
    """Write a worktree's `.git` file back from the private repository's record.

    Host git never follows it (see `proc.git_location`), but the Docker harness
    reads it to decide what to mount, and the local harness's steps can rewrite it.
    """
    location = proc.git_location(path)
    if location:  # rewritten only when changed: a live session's mount over it stays
        marker, text = path / ".git", f"gitdir: {location['GIT_DIR']}\n"
        if marker.is_file() and not marker.is_symlink() and marker.read_text() == text:
            return
        if marker.is_dir() and not marker.is_symlink():
            shutil.rmtree(marker)
        else:
            marker.unlink(missing_ok=True)
        marker.write_text(text, encoding="utf-8")


def _checked_out_in(listing: str, ref: str) -> str | None:
    """The worktree of `git worktree list --porcelain` that has `ref` checked out, if any."""
    worktree = None
    for line in listing.splitlines():
        if line.startswith("worktree "):
            worktree = line[len("worktree ") :]
        elif line == f"branch {ref}":
            return worktree or "a worktree of the repository"
    return None


class PublishRefused(BadInput):
    """publish() would touch a branch the user has checked out or would rewrite."""


# A workspace being deleted; gc removes any such directory it finds.
TRASH_PREFIX = ".trash-"


def worktree_root() -> Path:
    """$PATCHHEAL_WORKTREE_ROOT, else <tmp>/patchheal-<uid>/worktrees."""
    configured = os.environ.get("PATCHHEAL_WORKTREE_ROOT")
    if configured:
        return Path(configured).expanduser()
    return Path(tempfile.gettempdir()) / f"patchheal-{os.getuid()}" / "worktrees"


# Between a job id and its store's key in a workspace's folder name; never in a job id.
STORE_SEPARATOR = "@"


def store_key(store_url: str) -> str:
    """A short stable name for a store (its resolved URL hashed: no path, no password)."""
    return hashlib.sha256(store_url.encode()).hexdigest()[:12]


def workspace_name(job_id: str, store_url: str = "") -> str:
    """The folder of a job's workspace: keyed by store and job, so two runs of one job id
    against two stores never share a private repository or a worktree."""
    return f"{job_id}{STORE_SEPARATOR}{store_key(store_url)}" if store_url else job_id


def workspace_job(folder: str) -> tuple[str, str]:
    """(job id, store key) of a workspace folder's name ('' key: not keyed by a store)."""
    job_id, _, key = folder.rpartition(STORE_SEPARATOR)
    return (job_id, key) if job_id else (folder, "")


def worktree_diff(path: Path, base: str | None = None) -> str:
    """Every change in a worktree against `base` (default HEAD), untracked files
    included, binary-safe; built in a temporary index so the real one is untouched."""
    with temp_index(path) as env:
        proc.run(["git", "add", "-A"], cwd=path, env=env, check=True)
        fd, out_name = tempfile.mkstemp(prefix="patchheal-diff-")
        os.close(fd)
        out = Path(out_name)
        try:
            # The diff goes to a file: the output helper caps what it captures.
            proc.run(
                [*_DIFF_ARGV, f"--output={out}", base or "HEAD", "--"],
                cwd=path,
                env=env,
                check=True,
            )
            return out.read_bytes().decode("utf-8", "replace")
        finally:
            out.unlink(missing_ok=True)


def file_checksums(root: Path, files: Iterable[str]) -> dict[str, str | None]:
    """sha256 of each repo-relative file under `root`, None when it is absent."""
    sums: dict[str, str | None] = {}
    for name in files:
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise BadInput(f"file_checksums: {name!r} is not a path inside {root}")
        target = root / name
        sums[name] = hashlib.sha256(target.read_bytes()).hexdigest() if target.is_file() else None
    return sums


class JobWorkspace:
    """The private repository and worktrees of one job under root/<job_id>@<store key>/
    (root/<job_id>/ when no store is named: `patchheal harness run`)."""

    def __init__(
        self, repo: Path, base: str, job_id: str, root: Path | None = None, *, store: str = ""
    ) -> None:
        if not _SAFE_NAME.match(job_id):
            raise BadInput(f"job id {job_id!r} cannot name a workspace directory")
        self.repo = Path(repo).expanduser().absolute()
        self.base = base
        self.job_id = job_id
        self.dir = (root or worktree_root()).absolute() / workspace_name(job_id, store)
        self.private = self.dir / "repo.git"
        self.worktrees_dir = self.dir / "wt"
        self.cache_dir = self.dir / "cache"
        self.base_commit = ""
        self._refs: PrivateRefs | None = None

    # -- the private repository -------------------------------------------------

    def open(self) -> None:
        """Check the user's repository and base, then create the private repository."""
        self.base_commit = self._resolve_user_base()
        if self.private.is_dir():
            if self._private_refs().commit("refs/patchheal/base") == self.base_commit:
                return
            # Another base: start over, or objects of a later commit could linger.
            self.destroy()
        self.dir.mkdir(parents=True, exist_ok=True)
        staging = self.dir / "repo.git.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        git_out("init", "--bare", "--quiet", str(staging), cwd=self.dir)
        for key, value in _PRIVATE_CONFIG.items():
            git_out("config", key, value, cwd=staging)
        copy_base_commit(self.repo, self.base_commit, staging)
        git_out("update-ref", "refs/patchheal/base", self.base_commit, cwd=staging)
        staging.rename(self.private)  # atomic: a crash never leaves a half-made repo.git
        self.cache_dir.mkdir(exist_ok=True)

    def _resolve_user_base(self) -> str:
        # proc.git rather than GitPython here: GitPython's git subprocesses inherit
        # a leaked GIT_DIR/GIT_OBJECT_DIRECTORY, which would redirect us to another repo.
        if not self.repo.is_dir():
            raise NotAGitRepository(f"repository {self.repo} does not exist or is not a directory")
        probe = proc.git("rev-parse", "--is-bare-repository", cwd=self.repo, check=False)
        if probe.exit_code != 0:
            said = probe.output.strip()
            if "dubious ownership" in said:
                # git's safe.directory check: a repository owned by another user (an
                # unpacked tarball, a mounted volume) is refused before anything is read.
                raise NotAGitRepository(
                    f"git refuses to read {self.repo}: it is owned by another user. If you "
                    "trust it, run `git config --global --add safe.directory "
                    f"{self.repo.resolve()}` (or chown it to yourself)"
                )
            why = said.splitlines()[-1:] or [""]
            raise NotAGitRepository(f"{self.repo} is not a git repository ({why[0]})")
        if probe.output.strip() == "false":
            top = Path(git_out("rev-parse", "--show-toplevel", cwd=self.repo))
            if top.resolve() != self.repo.resolve():
                raise NotAGitRepository(
                    f"{self.repo} is not a git repository's top directory; it lies inside {top}: "
                    "point [job] repo there"
                )
        sha = _rev_parse(f"{self.base}^{{commit}}", self.repo) if self.base else ""
        if not sha:
            raise UnknownRef(f"base ref {self.base!r} does not resolve to a commit in {self.repo}")
        return sha

    def _require_open(self) -> None:
        if not self.base_commit or not self.private.is_dir():
            raise PatchhealError(f"workspace of job {self.job_id} is not open: call open() first")

    def _private_refs(self) -> PrivateRefs:
        """GitPython on the private repository: ref lookups without a subprocess each."""
        if self._refs is None:
            self._refs = PrivateRefs(self.private)
        return self._refs

    def close(self) -> None:
        """End the git processes this workspace keeps for lookups; reopened on demand."""
        if self._refs is not None:
            self._refs.close()
            self._refs = None

    def _resolve_private(self, ref: str) -> str:
        sha = self._private_refs().commit(ref)
        if not sha:
            raise UnknownRef(f"{ref!r} is not a commit of job {self.job_id}'s workspace")
        return sha

    # -- worktrees ---------------------------------------------------------------

    def _own(self, path: Path) -> Path:
        """Refuse to reset or delete anything but this job's worktrees."""
        resolved = Path(path).resolve()
        if resolved.parent != self.worktrees_dir.resolve():
            raise BadInput(f"{path} is not a worktree of job {self.job_id}")
        return resolved

    @staticmethod
    def _registered(path: Path) -> bool:
        marker = path / ".git"
        if not marker.is_file():
            return False
        gitdir = marker.read_text(encoding="utf-8", errors="replace").partition("gitdir:")[2]
        return bool(gitdir.strip()) and Path(gitdir.strip()).is_dir()

    def worktree(self, name: str, at: str | None = None) -> Path:
        """Create or reuse wt/<name>, detached and pristine at `at` (default base)."""
        self._require_open()
        if not _SAFE_NAME.match(name):
            raise BadInput(f"worktree name {name!r} must be letters, digits, '.', '_' or '-'")
        target = self._resolve_private(at) if at else self.base_commit
        path = self.worktrees_dir / name
        if self._registered(path):
            self.reset(path, to=target)
            return path
        if path.exists():
            shutil.rmtree(path)
        git_out("worktree", "prune", cwd=self.private)
        self.worktrees_dir.mkdir(parents=True, exist_ok=True)
        git_out(
            "worktree", "add", "--force", "--detach", "--quiet", str(path), target, cwd=self.private
        )
        return path

    def reset(self, path: Path, to: str | None = None) -> None:
        """Make a worktree pristine: `reset --hard` (to `to` or its HEAD) + `clean -ffdx`."""
        path = self._own(path)
        target = self._resolve_private(to) if to else "HEAD"
        # A killed git leaves index.lock behind; the job lock makes us its only user.
        _restore_git_file(path)
        lock = Path(git_out("rev-parse", "--git-path", "index.lock", cwd=path))
        (lock if lock.is_absolute() else path / lock).unlink(missing_ok=True)
        git_out("reset", "--quiet", "--hard", target, cwd=path)
        git_out("clean", "-ffdxq", cwd=path)

    def remove(self, path: Path) -> None:
        """Remove one worktree and prune its registration."""
        path = self._own(path)
        if self.private.is_dir():
            proc.git(
                "worktree", "remove", "--force", "--force", str(path), cwd=self.private, check=False
            )
        shutil.rmtree(path, ignore_errors=True)
        if self.private.is_dir():
            git_out("worktree", "prune", cwd=self.private)

    def list_worktrees(self) -> list[Path]:
        """Worktrees registered in the private repository, in path order."""
        if not self.private.is_dir():
            return []
        listing = git_out("worktree", "list", "--porcelain", cwd=self.private)
        paths = [
            Path(line[len("worktree ") :])
            for line in listing.splitlines()
            if line.startswith("worktree ")
        ]
        return sorted(p for p in paths if p.resolve().parent == self.worktrees_dir.resolve())

    def destroy(self) -> None:
        """Remove the private repository, every worktree and the job's cache.

        The job's directory is first renamed to a trash name (atomic), so a run
        killed halfway through the deletion leaves something gc recognises as
        garbage, not a half-deleted workspace that looks like a kept one.
        """
        self.close()
        if not self.dir.is_dir():
            return
        trash = self.dir.with_name(f"{TRASH_PREFIX}{self.dir.name}.{os.getpid()}")
        self.dir.rename(trash)
        shutil.rmtree(trash)

    # -- patches and commits -----------------------------------------------------

    def apply(self, path: Path, diff: str) -> str:
        """Apply a candidate through the fallback chain (see patching.py); return the
        method that worked. On any failure the worktree is left as it was."""
        return apply_patch(self._own(path), diff)

    def commit(self, path: Path, message: str) -> str:
        """Commit everything in the worktree; the commit is kept by a private ref."""
        path = self._own(path)
        git_out("add", "-A", cwd=path)
        git_out("commit", "--quiet", "--no-verify", "--allow-empty", "-m", message, cwd=path)
        sha = git_out("rev-parse", "HEAD", cwd=path)
        git_out("update-ref", f"refs/patchheal/commits/{sha}", sha, cwd=self.private)
        return sha

    def publish(self, commit: str, branch: str) -> None:
        """Point `branch` of the user's repository at `commit`, touching nothing else."""
        self._require_open()
        sha = self._resolve_private(commit)
        if proc.git("check-ref-format", "--branch", branch, cwd=self.repo, check=False).exit_code:
            raise BadInput(f"{branch!r} is not a valid branch name")
        ref = f"refs/heads/{branch}"
        listing = git_out("worktree", "list", "--porcelain", cwd=self.repo)
        if (holder := _checked_out_in(listing, ref)) is not None:
            raise PublishRefused(
                f"refusing to publish onto {branch!r}: it is checked out in {holder} "
                "(patchheal never moves a checked-out branch); remove that worktree "
                f"(`git -C {self.repo} worktree remove {holder}`) or choose another branch "
                "name (`[job] branch` or `heal --branch`)"
            )
        # Objects only: nothing in the user's repository points at them until update-ref.
        git_out(
            "fetch",
            "--no-tags",
            "--no-write-fetch-head",
            "--quiet",
            str(self.private),
            sha,
            cwd=self.repo,
        )
        old = _rev_parse(ref, self.repo)
        if old and not branch.startswith("patchheal/"):
            ancestor = proc.git("merge-base", "--is-ancestor", old, sha, cwd=self.repo, check=False)
            if ancestor.exit_code != 0:
                raise PublishRefused(
                    f"refusing to rewrite branch {branch!r} of {self.repo}: {sha[:12]} does not "
                    "descend from it; only branches under patchheal/ are force-updated"
                )
        # Compare-and-swap on the old value: a concurrent change to the branch wins.
        git_out(
            "update-ref",
            "-m",
            f"patchheal: publish job {self.job_id}",
            ref,
            sha,
            old or "0" * len(sha),
            cwd=self.repo,
        )
