"""Host directories a container reads, made readable by its user wherever they live.

A step or sandbox container runs as an unprivileged user (the worktree's
owner, or uid 1000 when root owns it: `sandbox.resolve_user`). What it must
read from the host (the wheelhouse, the npm cache, the collectors) is bind
mounted at a container-owned path under /opt/patchheal, never at its host
path: the image's own /root is 0700, so a host path under a root's home
(`HOME=/root`, the usual CI container) would be a directory the container
user cannot traverse. The directories' modes must let that user read them
too, whatever the umask they were written with (077 makes pip's downloads
0600), so the owner-only bits are widened to everyone's read (and search).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

# Container paths of what the host lends a container, read-only.
WHEELHOUSE = "/opt/patchheal/wheelhouse"
NPM_CACHE = "/opt/patchheal/npm-cache"


def share_readable(root: Path) -> None:
    """Add read (and, for directories and executables, search) bits for everyone under `root`.

    Only bits are added, never removed; a symlink is left alone (its target
    is what a container would read, and it is judged where it lies).
    """
    for folder, dirs, files in os.walk(root):
        _add(Path(folder), 0o555)
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                mode = path.lstat().st_mode
                _add(path, 0o555 if mode & stat.S_IXUSR else 0o444)
        for name in dirs:
            if (Path(folder) / name).is_symlink():
                dirs.remove(name)


def readable_by_all(root: Path) -> bool:
    """Whether every directory and file under `root` is readable by any user."""
    for folder, _dirs, files in os.walk(root):
        if stat.S_IMODE(Path(folder).stat().st_mode) & 0o005 != 0o005:
            return False
        for name in files:
            if stat.S_IMODE((Path(folder) / name).stat().st_mode) & 0o004 == 0:
                return False
    return True


def shared_copy(source: Path, cache: Path) -> Path:
    """`source` itself when any user can read it, else a readable copy of it under `cache`.

    The copy is keyed by the content (names and bytes), so an upgraded
    source gets a fresh copy and an unchanged one is copied once.
    """
    if readable_by_all(source):
        return source
    digest = hashlib.sha256()
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes())
    target = cache / f"{source.name}-{digest.hexdigest()[:16]}"
    if not target.is_dir():
        staging = cache / f".{target.name}.{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(source, staging, ignore=shutil.ignore_patterns("__pycache__"))
        share_readable(staging)
        try:
            staging.rename(target)
        except OSError:  # another process made it first
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _add(path: Path, bits: int) -> None:
    mode = stat.S_IMODE(path.lstat().st_mode)
    if mode & bits != bits:
        path.chmod(mode | bits)


def cache_dir() -> Path:
    """Where patchheal keeps wheelhouses, npm caches and locks."""
    if explicit := os.environ.get("PATCHHEAL_CACHE_DIR"):
        return Path(explicit)
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg) / "patchheal"
    try:
        home = Path("~").expanduser()
    except RuntimeError:  # no HOME and no passwd entry (a bare `docker run -u 1234`)
        home = Path()
    if not home.is_absolute():
        return Path(tempfile.gettempdir()) / f"patchheal-cache-{os.getuid()}"
    return home / ".cache" / "patchheal"


@contextlib.contextmanager
def file_lock(name: str) -> Iterator[None]:
    """An exclusive lock shared by every patchheal process of this host."""
    path = cache_dir() / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _hold_path(name: str) -> Path:
    # Apart from the build locks: gc reads any held build lock as a build in progress.
    return cache_dir() / "holds" / f"{name.replace('/', '_').replace(':', '_')}.lock"


def hold(name: str) -> IO[str]:
    """A shared lock on `name`, kept until the returned handle is closed (or its process
    dies): while any process holds it, `held(name)` is True everywhere on this host."""
    path = _hold_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a")
    fcntl.flock(handle, fcntl.LOCK_SH)
    return handle


def held(name: str) -> bool:
    """True while a `hold` on `name` is open, in this process or any other."""
    path = _hold_path(name)
    return path.is_file() and locked(path)


def locked(path: Path) -> bool:
    """True while any open handle holds a lock on the lock file `path` (never waits)."""
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False
