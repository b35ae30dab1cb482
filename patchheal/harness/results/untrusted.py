"""Reading files a step could write: regular files only, capped in count and bytes.

The results directory and a declared `results` glob are written by the step, so
everything in them is hostile until read safely. Measured before this module
(issue 25, H2-H4): a FIFO there blocked patchheal in `open` for ever, 3 GiB
there took patchheal to 6.4 GB RSS, and symlinks there were followed on the host
(a host XML file became test outcomes). Here:

- nothing is opened but a regular file: each entry is `lstat`ed, then opened with
  O_NOFOLLOW|O_NONBLOCK relative to a directory descriptor (a symlink anywhere,
  swapped in between, fails to open; a FIFO opens without blocking) and `fstat`ed
  again before a byte is read;
- at most MAX_FILES entries are looked at, MAX_FILE_BYTES read from one file and
  MAX_TOTAL_BYTES from all of them;
- a declared glob is matched component by component from the worktree without
  following a symlink, so it never leaves the worktree, and visits at most
  MAX_VISITED entries;
- a directory that lives in a container (the Docker harness's results tmpfs)
  arrives as the engine's tar stream of it (`tarreader.read_tar`): only
  regular-file members are read, under the same budget, and the stream itself
  is capped.

Each refused entry comes back with its reason; the caller lists it in
`TestResults.rejected`, which judges that run and nothing else.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_FILES = 1000
MAX_FILE_BYTES = 32 * 1024 * 1024
MAX_TOTAL_BYTES = 64 * 1024 * 1024
MAX_VISITED = 100_000
MAX_GLOB_DEPTH = 32
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Budget:
    """What one run's reading may still spend (files, bytes), shared by the channel and glob."""

    files: int = MAX_FILES
    bytes: int = MAX_TOTAL_BYTES


@dataclass
class Entry:
    """One file found: its name (relative to where reading started) and bytes, or a refusal."""

    name: str
    data: bytes = b""
    refused: str = ""


@dataclass
class _Walk:
    budget: Budget
    visited: int = 0
    entries: list[Entry] = field(default_factory=list)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _read(dir_fd: int, name: str, shown: str, budget: Budget) -> Entry:
    """The bytes of regular file `name` under `dir_fd`, within the budget, or why not."""
    if budget.files <= 0:
        return Entry(shown, refused=f"more than {MAX_FILES} files")
    budget.files -= 1
    try:
        info = os.lstat(name, dir_fd=dir_fd)
        if not stat.S_ISREG(info.st_mode):
            return Entry(shown, refused=_kind(info.st_mode))
        fd = os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        return Entry(shown, refused=f"cannot open: {exc.strerror or exc}")
    try:
        info = os.fstat(fd)  # what was opened, not what was looked at
        if not stat.S_ISREG(info.st_mode):
            return Entry(shown, refused=_kind(info.st_mode))
        cap = min(MAX_FILE_BYTES, budget.bytes)
        if info.st_size > cap:
            return Entry(shown, refused=f"over {cap} bytes")
        chunks: list[bytes] = []
        got = 0
        while got <= cap:  # the file may still grow: read to the cap, never past it
            chunk = os.read(fd, min(1024 * 1024, cap + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > cap:
            return Entry(shown, refused=f"over {cap} bytes")
        budget.bytes -= got
        return Entry(shown, data=b"".join(chunks))
    except OSError as exc:
        return Entry(shown, refused=f"cannot read: {exc.strerror or exc}")
    finally:
        os.close(fd)


def read_regular(path: str | os.PathLike[str], cap: int) -> bytes:
    """The bytes of regular file `path` (never through a symlink, never a FIFO), at most
    `cap`; OSError saying why not."""
    parent, name = os.path.split(os.fspath(path))
    dir_fd = os.open(parent or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        entry = _read(dir_fd, name, name, Budget(files=1, bytes=cap))
    finally:
        os.close(dir_fd)
    if entry.refused:
        raise OSError(f"{path}: {entry.refused}")
    return entry.data


def read_directory(path: str | os.PathLike[str], budget: Budget) -> list[Entry]:
    """Every entry directly in `path` (not a symlink itself), read safely, in name order."""
    try:
        dir_fd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        return [Entry(".", refused=f"cannot open the results directory: {exc.strerror or exc}")]
    try:
        names: list[str] = []
        with os.scandir(dir_fd) as listing:
            for item in listing:
                if len(names) > MAX_FILES:
                    break
                names.append(item.name)
        return [_read(dir_fd, name, name, budget) for name in sorted(names)]
    finally:
        os.close(dir_fd)


def _glob_parts(pattern: str) -> list[str]:
    return [p for p in pattern.replace("\\", "/").split("/") if p not in ("", ".")]


def glob_matches(rel: str, pattern: str) -> bool:
    """Whether `read_glob` would reach the relative file path `rel` with `pattern`.

    The same rules as the walk: each name by `fnmatchcase`, `**` any number of
    directories (never the file itself). Not gitignore's: a `results` glob is
    pathlib's syntax, anchored at the worktree, and `*` never crosses a `/`.
    """
    parts, names = _glob_parts(pattern), rel.split("/")

    @functools.cache
    def match(i: int, j: int) -> bool:  # names[i:] against parts[j:]
        if j == len(parts):
            return i == len(names)
        if parts[j] == "**":
            return match(i, j + 1) or (i < len(names) - 1 and match(i + 1, j))
        return i < len(names) and fnmatch.fnmatchcase(names[i], parts[j]) and match(i + 1, j + 1)

    return match(0, 0)


def read_glob(root: str | os.PathLike[str], pattern: str, budget: Budget) -> list[Entry]:
    """Files under `root` matching `pattern` (pathlib's glob syntax, `**` included),
    found and read without following a symlink; symlinks and other non-regular
    matches are refused entries."""
    parts = _glob_parts(pattern)
    if not parts or len(parts) > MAX_GLOB_DEPTH or ".." in parts:
        return [Entry(pattern, refused="not a usable glob relative to the worktree")]
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        return [Entry(pattern, refused=f"cannot open the worktree: {exc.strerror or exc}")]
    walk = _Walk(budget)
    try:
        seen: set[str] = set()
        for rel, dir_fd, name in _matches(walk, root_fd, "", parts):
            if rel in seen:  # `**/**/x` reaches one file on several paths
                continue
            seen.add(rel)
            walk.entries.append(_read(dir_fd, name, rel, budget))
            if budget.files <= 0:
                break
    except _TooMany:
        walk.entries.append(
            Entry(pattern, refused=f"the glob looked at more than {MAX_VISITED} entries")
        )
    finally:
        os.close(root_fd)
    return sorted(walk.entries, key=lambda e: e.name)


class _TooMany(Exception):
    pass


def _listing(walk: _Walk, dir_fd: int) -> list[tuple[str, bool]]:
    """(name, is a real directory) of each entry under `dir_fd`; symlinks are not directories."""
    found: list[tuple[str, bool]] = []
    with contextlib.suppress(OSError), os.scandir(dir_fd) as listing:
        for item in listing:
            walk.visited += 1
            if walk.visited > MAX_VISITED:
                raise _TooMany
            found.append((item.name, item.is_dir(follow_symlinks=False)))
    return sorted(found)


def _matches(
    walk: _Walk, dir_fd: int, rel: str, parts: list[str]
) -> Iterator[tuple[str, int, str]]:
    """(relative path, parent directory fd, name) of each match of `parts` under `dir_fd`."""
    head, rest = parts[0], parts[1:]
    if head == "**":
        if rest:
            yield from _matches(walk, dir_fd, rel, rest)
        for name, is_dir in _listing(walk, dir_fd):
            if is_dir:
                yield from _descend(walk, dir_fd, rel, name, parts)
        return
    for name, is_dir in _listing(walk, dir_fd):
        if not fnmatch.fnmatchcase(name, head):
            continue
        if rest:
            if is_dir:
                yield from _descend(walk, dir_fd, rel, name, rest)
        else:
            yield (f"{rel}{name}", dir_fd, name)


def _descend(
    walk: _Walk, dir_fd: int, rel: str, name: str, parts: list[str]
) -> Iterator[tuple[str, int, str]]:
    if rel.count("/") >= MAX_GLOB_DEPTH:
        return
    try:
        child = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:  # swapped for a symlink since the listing: not followed
        return
    try:
        yield from _matches(walk, child, f"{rel}{name}/", parts)
    finally:
        os.close(child)
