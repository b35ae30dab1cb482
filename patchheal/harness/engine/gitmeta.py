"""A worktree's git metadata as patchheal recorded it, never as the worktree says (issue 25, H1).

A step owns the worktree it runs in, `.git` file included once a reset has
recreated it under a live session (unlinking a file on the host detaches a
bind mount over it in the container). What a step container mounts must not
follow that file: a `gitdir: <any host directory>` written there would have
the next container mount that directory. So both mounts come from the
private repository's own records (`proc.git_location`, which host git uses
too): its common directory, read-only, and a `.git` file patchheal writes
from the record outside the worktree, bound read-only over the worktree's.
"""

from __future__ import annotations

from pathlib import Path

from patchheal import proc

# Written into the worktree's admin directory (`repo.git/worktrees/<name>/`),
# which the step sees read-only: the source of the `.git` bind mount.
GIT_FILE = "patchheal-gitfile"


def recorded(worktree: Path) -> tuple[Path, Path] | None:
    """(admin directory, common directory) of a job worktree from the private repository's
    records; None for a directory that is no job worktree (its own `.git`, if any, is
    part of the bind-mounted tree and nothing else is mounted for it)."""
    location = proc.git_location(worktree)
    if not location:
        return None
    admin = Path(location["GIT_DIR"])  # as `git worktree add` wrote it into the `.git` file
    return admin, admin.parent.parent.resolve()  # <job>/repo.git/worktrees/<name> -> repo.git


def git_file(worktree: Path) -> Path | None:
    """The `.git` file to bind over the worktree's, written from the record; the worktree's
    own `.git` is put back too if a step replaced it (a directory cannot take a file mount)."""
    found = recorded(worktree)
    if found is None:
        return None
    admin, _ = found
    text = f"gitdir: {admin}\n"
    source = admin / GIT_FILE
    if not source.is_file() or source.read_text(errors="replace") != text:
        source.write_text(text, encoding="utf-8")
    restore(worktree / ".git", text)
    return source


def restore(marker: Path, text: str) -> None:
    """`marker` as a regular file holding `text`; left alone when it already is (rewriting it
    would detach the read-only mount a live session holds over it)."""
    regular = marker.is_file() and not marker.is_symlink()
    if regular and marker.read_text(encoding="utf-8", errors="replace") == text:
        return
    if marker.is_dir() and not marker.is_symlink():
        import shutil

        shutil.rmtree(marker)
    else:
        marker.unlink(missing_ok=True)
    marker.write_text(text, encoding="utf-8")
