"""Files the dependency setup generated inside the tree, carried into every run's worktree.

Setup runs over an export of the worktree's commit (sources.py); steps run in
the attempt's worktree. What setup writes into the tree — a hatch-vcs or
setuptools-scm `version-file` (`humanize/_version.py`), extension modules
built in place, `*.egg-info`, generated parsers — never reached the step,
whose imports then failed (`No module named 'humanize._version'`) where CI,
which installs in the tree it tests, has them.

So, generally and not by kind: the export's files are listed before setup;
after it, every new regular file (outside `.git` and bytecode caches) is put
into a tar stored in the committed dependency image (`ARCHIVE`), keyed like the
image by the dependency fingerprint. Before every run (reproduction, each
verification, the twin, regression steps: all go through the harness's
`run_image`), those files are laid over the worktree byte-exact (content,
mode, modification time), and their paths are listed in the private
repository's `info/exclude`, so they never enter a candidate's diff, a
commit, the published branch or the tracked-files check (`git add -A`, which
builds every diff and commit, skips excluded untracked files; a reset's
`clean -ffdx` removes them, and the next run lays them again).

Decisions:

* A candidate that edits or creates a generated file has that edit dropped:
  the path is excluded from its diff, and the generated copy is laid again
  before each run, as CI regenerates it at install.
* A path the worktree tracks is never overwritten (the project's committed
  file wins; a later commit may track what an older setup generated).
* Setup's changes to files the tree tracks, its deletions and the symbolic
  links it makes are not carried: carrying a tracked file's change would put
  it into every diff.
* Past `MAX_BYTES` the remaining files are not carried (and named).
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from patchheal import proc

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

# Inside the committed dependency image.
DIRECTORY = "/opt/patchheal"
ARCHIVE = f"{DIRECTORY}/generated.tar"
# Directories never walked or carried: git's, and bytecode a run writes anew.
_SKIPPED_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".tox", ".nox"})
MAX_BYTES = 512 * 1024 * 1024
_HEADER = "# patchheal: files the dependency setup generated (laid over each run, never committed)"
# Part of the dependency fingerprint: an image made before (or by another) capture lacks
# or misreads the archive, so it is not reused.
RECIPE = "generated-files:1:" + ARCHIVE


@dataclass(frozen=True)
class Generated:
    """One generated file as setup left it."""

    path: str  # relative, POSIX
    content: bytes
    mode: int
    mtime_ns: int


def listing(tree: Path) -> frozenset[str]:
    """Every path (files, links, directories) under `tree` but the skipped directories'."""
    found: set[str] = set()
    for root, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS]
        base = Path(root).relative_to(tree)
        for name in (*dirs, *files):
            found.add((base / name).as_posix())
    return frozenset(found)


def capture(tree: Path, before: frozenset[str], say: Callable[[str], None]) -> list[Generated]:
    """The regular files under `tree` that were not there `before` setup."""
    carried: list[Generated] = []
    total = 0
    left: list[str] = []
    for root, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(files):
            path = Path(root) / name
            relative = path.relative_to(tree).as_posix()
            info = path.lstat()
            if relative in before or not stat.S_ISREG(info.st_mode):
                continue
            if total + info.st_size > MAX_BYTES:
                left.append(relative)
                continue
            total += info.st_size
            mode, content = stat.S_IMODE(info.st_mode), path.read_bytes()
            carried.append(Generated(relative, content, mode, info.st_mtime_ns))
    if carried:
        shown = ", ".join(g.path for g in carried[:8]) + (" ..." if len(carried) > 8 else "")
        say(f"setup generated {len(carried)} files in the tree, carried into every run: {shown}")
    if left:
        say(f"not carried (past {MAX_BYTES >> 20} MiB of generated files): {', '.join(left[:8])}")
    return carried


def to_tar(files: list[Generated]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for item in files:
            info = tarfile.TarInfo(item.path)
            info.size, info.mode = len(item.content), item.mode
            info.mtime = item.mtime_ns / 1e9
            info.pax_headers = {"mtime": f"{item.mtime_ns // 10**9}.{item.mtime_ns % 10**9:09d}"}
            tar.addfile(info, io.BytesIO(item.content))
    return buffer.getvalue()


def from_tar(data: bytes) -> list[Generated]:
    """The files of an archive `to_tar` wrote; a member that is no plain relative file is
    dropped (the archive comes out of an image the project's setup ran in)."""
    files: list[Generated] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar.getmembers():
            parts = PurePosixPath(member.name).parts
            if not member.isfile() or member.name.startswith("/") or ".." in parts:
                continue
            if parts and parts[0] in _SKIPPED_DIRS:
                continue
            handle = tar.extractfile(member)
            if handle is None:
                continue
            mtime = member.pax_headers.get("mtime", str(member.mtime))
            seconds, _, fraction = mtime.partition(".")
            mtime_ns = int(seconds) * 10**9 + int((fraction + "000000000")[:9])
            files.append(Generated(member.name, handle.read(), member.mode & 0o7777, mtime_ns))
    return files


def store(container: Container, files: list[Generated]) -> None:
    """Put the archive into the setup container, to be committed with it."""
    outer = io.BytesIO()
    inner = to_tar(files)
    with tarfile.open(fileobj=outer, mode="w") as tar:
        info = tarfile.TarInfo(PurePosixPath(ARCHIVE).name)
        info.size, info.mode = len(inner), 0o644
        tar.addfile(info, io.BytesIO(inner))
    container.put_archive(DIRECTORY, outer.getvalue())


def load(client: DockerClient, image: str, labels: dict[str, str]) -> list[Generated]:
    """The generated files stored in dependency image `image` (none when it has no archive),
    read from a container created (never started) with the owner's `labels`."""
    import docker.errors

    container = client.containers.create(
        image, command=["true"], network_disabled=True, labels=labels
    )
    try:
        try:
            stream, _ = container.get_archive(ARCHIVE)
        except docker.errors.NotFound:
            return []
        outer = io.BytesIO(b"".join(stream))
    finally:
        container.remove(force=True)
    with tarfile.open(fileobj=outer, mode="r:") as tar:
        handle = tar.extractfile(PurePosixPath(ARCHIVE).name)
        return from_tar(handle.read()) if handle is not None else []


def digest(files: list[Generated]) -> str:
    """What identifies a set of generated files (to lay a worktree once per set and state)."""
    hashed = hashlib.sha256()
    for item in files:
        hashed.update(f"{item.path}\0{item.mode}\0{item.mtime_ns}\0".encode())
        hashed.update(hashlib.sha256(item.content).digest())
    return hashed.hexdigest()


def lay_over(worktree: Path, files: list[Generated]) -> list[str]:
    """Write `files` into `worktree` as setup left them, hidden from git; returns the paths
    laid. Paths the worktree tracks are left alone."""
    if not files:
        return []
    tracked = _tracked(worktree, [item.path for item in files])
    wanted = [item for item in files if item.path not in tracked]
    _exclude(worktree, [item.path for item in wanted])
    laid: list[str] = []
    for item in wanted:
        if _place(worktree, item):
            laid.append(item.path)
    return laid


def _tracked(worktree: Path, paths: list[str]) -> set[str]:
    if not proc.git_location(worktree):
        return set()
    done = proc.git("ls-files", "-z", "--", *(f":(literal){p}" for p in paths), cwd=worktree)
    return {name for name in done.output.split("\0") if name}


def _pattern(path: str) -> str:
    """An `info/exclude` line matching exactly `path` from the top of the work tree."""
    escaped = "".join("\\" + c if c in "\\*?[]!# " else c for c in path)
    return "/" + escaped


def _exclude(worktree: Path, paths: list[str]) -> None:
    """List `paths` in the private repository's `info/exclude` (a job worktree only)."""
    if not paths or not proc.git_location(worktree):
        return
    where = proc.git("rev-parse", "--git-path", "info/exclude", cwd=worktree).output.strip()
    exclude = Path(where) if Path(where).is_absolute() else worktree / where
    present = exclude.read_text(encoding="utf-8").splitlines() if exclude.is_file() else []
    known = set(present)
    added = [p for p in dict.fromkeys(map(_pattern, paths)) if p not in known]
    if not added:
        return
    lines = ([] if _HEADER in known else [_HEADER]) + added
    exclude.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(present)
    exclude.write_text((text + "\n" if text else "") + "\n".join(lines) + "\n", encoding="utf-8")


def _place(tree: Path, item: Generated) -> bool:
    """Write one file, walking from `tree` one directory at a time without following a link
    (a step may have made any path of its worktree a link meant to send a host-side write
    elsewhere); a missing directory is made, a link or file in the way replaced. False
    when a directory stands where the file goes."""
    parts = PurePosixPath(item.path).parts
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            fd = _enter(fd, part)
            if fd < 0:
                return False
        name = parts[-1]
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode):
            return False
        regular = info is not None and stat.S_ISREG(info.st_mode)
        if (
            regular
            and info is not None
            and info.st_size == len(item.content)
            and _same(fd, name, item)
        ):
            return True
        if info is not None:
            os.unlink(name, dir_fd=fd)
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
        try:
            view = memoryview(item.content)
            while view:
                view = view[os.write(out, view) :]
            os.fchmod(out, item.mode)
            os.utime(out, ns=(item.mtime_ns, item.mtime_ns))
        finally:
            os.close(out)
        return True
    finally:
        if fd >= 0:
            os.close(fd)


def _enter(fd: int, part: str) -> int:
    """The descriptor of directory `part` inside `fd` (made if missing; `fd` is closed);
    -1 when something else stands there."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        try:
            inner = os.open(part, flags, dir_fd=fd)
        except FileNotFoundError:
            os.mkdir(part, 0o755, dir_fd=fd)
            inner = os.open(part, flags, dir_fd=fd)
    except OSError:
        inner = -1
    os.close(fd)
    return inner


def _same(fd: int, name: str, item: Generated) -> bool:
    """Whether the file already holds `item`'s bytes and time (nothing to write; its mode
    may have gained the bits `sandbox.make_writable` adds)."""
    handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
    try:
        info = os.fstat(handle)
        chunks = []
        while chunk := os.read(handle, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(handle)
    return b"".join(chunks) == item.content and info.st_mtime_ns == item.mtime_ns
