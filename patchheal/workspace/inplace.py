"""A worktree file read, or swapped in place and put back exactly, never through a link.

The impossible twin (loop/twins.py) reads the protected test files it makes
twins of after the step has run in the tree (it no longer writes them: the
twin is made in the step's memory, collectors/patchheal_twin.py). Any path
in that tree may have become a symbolic link meant to make a host-side read
or write land elsewhere: every open here walks
the path one directory at a time from the worktree with `O_NOFOLLOW`, and a
path that no longer leads to a regular file is refused (`UnsafePath`).
Writes keep the inode (a bind mount sees them) and set the access and
modification times back; only the change time moves, as it does for every
file `touch` refreshes (`refresh`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


class UnsafePath(OSError):
    """The path is outside the worktree, or leads through a symbolic link or a non-file."""


@dataclass(frozen=True)
class Saved:
    """A file's bytes and times as they were."""

    relative: str
    content: bytes
    atime_ns: int
    mtime_ns: int
    mode: int


def _parts(relative: str) -> tuple[str, ...]:
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
        raise UnsafePath(f"{relative}: not a path inside the worktree")
    return parts


@contextmanager
def _directory(tree: Path, parts: tuple[str, ...]) -> Iterator[int]:
    """A descriptor of the file's directory, reached without following a link."""
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                raise UnsafePath(f"{part}: not a directory of the worktree ({exc})") from None
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def _open(directory: int, name: str, flags: int) -> int:
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW, dir_fd=directory)
    except OSError as exc:
        raise UnsafePath(f"{name}: not a regular file ({exc})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(f"{name}: not a regular file")
    return fd


def read(tree: Path, relative: str) -> Saved:
    """The file's bytes and times."""
    parts = _parts(relative)
    with _directory(tree, parts) as directory:
        fd = _open(directory, parts[-1], os.O_RDONLY)
        try:
            info = os.fstat(fd)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        finally:
            os.close(fd)
    return Saved(relative, b"".join(chunks), info.st_atime_ns, info.st_mtime_ns, info.st_mode)


def write(tree: Path, saved: Saved, content: bytes) -> None:
    """`content` in place of the file, with `saved`'s times; a file the step removed or
    replaced by a link is created anew (the link removed, never followed)."""
    parts = _parts(saved.relative)
    with _directory(tree, parts) as directory:
        try:
            fd = _open(directory, parts[-1], os.O_WRONLY)
        except UnsafePath:
            with suppress(FileNotFoundError):
                info = os.stat(parts[-1], dir_fd=directory, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    raise
                os.unlink(parts[-1], dir_fd=directory)
            fd = _open(directory, parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            os.fchmod(fd, stat.S_IMODE(saved.mode))
        try:
            os.ftruncate(fd, 0)
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            os.utime(fd, ns=(saved.atime_ns, saved.mtime_ns))
        finally:
            os.close(fd)


def refresh(tree: Path, saved: Saved) -> None:
    """Set the file's times to `saved`'s again: its change time becomes now, as after a
    twin's restore, so a run cannot tell from it whether a twin came just before."""
    parts = _parts(saved.relative)
    with _directory(tree, parts) as directory:
        fd = _open(directory, parts[-1], os.O_RDONLY)
        try:
            os.utime(fd, ns=(saved.atime_ns, saved.mtime_ns))
        finally:
            os.close(fd)
