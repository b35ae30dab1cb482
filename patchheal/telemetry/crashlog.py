"""Crash logs: beside the store, with unique names, never written through a symlink.

The CLI used to write `/tmp/patchheal-crash-<epoch>.log`: a predictable name in a
shared directory, opened with a plain `open` that follows symlinks, so another
user could plant a link there and have patchheal overwrite any file it can write
(issue 25, item 7); two crashes in one second shared a file. Now the log goes to
`<state dir>/crash/` of the store the command names (`--db`, `--state-dir`, the
default `var/`), else to a private per-user directory under the temp dir, else to
a `mkstemp` file. The name holds the UTC time, the pid and a random tail; the file
is created with O_CREAT|O_EXCL|O_NOFOLLOW (mode 0600) relative to a directory
opened with O_NOFOLLOW.
"""

from __future__ import annotations

import os
import secrets
import stat
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from patchheal.errors import BadInput
from patchheal.runs import default_db, state_dir_for

CRASH_DIR = "crash"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _option(argv: Sequence[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` in `argv` (the last one), else None."""
    found = None
    for index, arg in enumerate(argv):
        if arg == name and index + 1 < len(argv):
            found = argv[index + 1]
        elif arg.startswith(f"{name}="):
            found = arg.split("=", 1)[1]
    return found


def candidate_dirs(argv: Sequence[str]) -> list[Path]:
    """Where a crash log of the command `argv` may go, best first."""
    dirs: list[Path] = []
    try:
        state = state_dir_for(_option(argv, "--db") or default_db(), _option(argv, "--state-dir"))
        dirs.append(state / CRASH_DIR)
    except (BadInput, ValueError, OSError):
        pass  # a server store without --state-dir: no folder of its own
    dirs.append(Path(tempfile.gettempdir()) / f"patchheal-{os.getuid()}" / CRASH_DIR)
    return dirs


def _private(directory: Path) -> bool:
    """A real directory (not a symlink) owned by this user."""
    try:
        info = os.lstat(directory)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def write_crash_log(text: str, argv: Sequence[str]) -> Path:
    """Write `text` (already scrubbed) to a new crash log; its path."""
    name = (
        f"patchheal-crash-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        f"-{os.getpid()}-{secrets.token_hex(4)}.log"
    )
    data = text.encode("utf-8", "replace")
    for directory in candidate_dirs(argv):
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not _private(directory):
                continue
            dir_fd = os.open(directory, _DIR_FLAGS)
            try:
                fd = os.open(name, _FILE_FLAGS, 0o600, dir_fd=dir_fd)
            finally:
                os.close(dir_fd)
        except OSError:
            continue
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return directory / name
    fd, path = tempfile.mkstemp(prefix="patchheal-crash-", suffix=".log")  # O_EXCL, 0600
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return Path(path)
