"""patchheal's own files inside the job's repository stay out of `git status`.

Healing from inside a repository (`cd myproject && patchheal heal job.toml`)
puts the reports `reports/` (and a store named by a relative `--db`, with its
runs) under the working directory, that is, inside the repository being healed.
They stay where they are (every read-only command run from the same directory
finds them there), and are added to the repository's own `info/exclude`: git's
per-clone ignore file, never committed, never shared, so nothing of the user's tracked content or
`.gitignore` changes. Only the exact paths patchheal writes are listed (the
store file and its journal, `runs/`, the job's report folder and the index),
so a `var/` or `reports/` folder of the project's own is not hidden.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from patchheal import proc
from patchheal.atomic import atomic_write

_HEADER = "# patchheal: its attempt store, runs and reports (not the project's files)"


def repository_top(path: Path) -> Path | None:
    """The top directory of the non-bare git work tree `path` lies in, or None."""
    if not path.is_dir():
        return None
    found = proc.git("rev-parse", "--show-toplevel", cwd=path, check=False, location={})
    top = found.output.strip()
    return Path(top).resolve() if found.passed and top else None


def state_paths(
    db_file: Path | None, state_dir: Path, reports_dir: Path, job_id: str
) -> list[Path]:
    """The paths a heal writes under its working directory: store, runs, the job's reports."""
    paths = [state_dir / "runs", reports_dir / job_id, reports_dir / "index.html"]
    if db_file is not None:
        paths.append(db_file.with_name(db_file.name + "*"))
    return paths


def hide_from_status(repo: Path, paths: Iterable[Path]) -> list[str]:
    """Add the `paths` that lie inside `repo`'s work tree to its `info/exclude`.

    Returns the patterns added (none when the paths are outside the repository
    or already listed). Each pattern is anchored at the top of the work tree.
    """
    top = repository_top(repo)
    if top is None:
        return []
    wanted: list[str] = []
    for path in paths:
        absolute = path.absolute()
        parent = absolute.parent.resolve()
        if not parent.is_relative_to(top):
            continue
        relative = (parent / absolute.name).relative_to(top).as_posix()
        if relative and relative != "." and not relative.startswith(".git/"):
            wanted.append("/" + relative)
    if not wanted:
        return []
    where = proc.git("rev-parse", "--git-path", "info/exclude", cwd=top, location={})
    exclude = Path(where.output.strip())
    exclude = exclude if exclude.is_absolute() else top / exclude
    present = exclude.read_text(encoding="utf-8").splitlines() if exclude.is_file() else []
    added = [pattern for pattern in dict.fromkeys(wanted) if pattern not in present]
    if added:
        lines = ([] if _HEADER in present else [_HEADER]) + added
        text = "\n".join(present)
        atomic_write(exclude, (text + "\n" if text else "") + "\n".join(lines) + "\n")
    return added
