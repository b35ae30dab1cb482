"""What a run added to the worktree, taken away before the next run of the same verification.

The runs of a verification's failing step, the impossible twin's among them,
must look alike to the step's code: the twin's place among them is random, and a
candidate that knew which run it is in would know where the twin can be. The
Docker harness empties `/tmp` (the step's `HOME`) and kills every process of the
step's user before each run (docs/harnesses.md, "The sandbox session"); the
worktree is the one place a run can leave something for the next (a counter in
an untracked file). So the verification takes the worktree's entries (every
file, folder and link, tracked or not, but `.git`) before its first run, and
before each later run of the failing step removes every entry that was not there
then: caches (`.pytest_cache`, `__pycache__`), build outputs and the step's
results files go too, and are made again, as in the first run.

What was there before the first run is left as it is: a tracked file a run
changed refuses the candidate already (`workspace/tracked.py`); an untracked one
that was there before (an install's `*.egg-info`, a virtual environment kept in
the worktree) is not restored, and a run that changes it can still leave a mark
(docs/verdict.md, "Impossible twins"). Links are removed as links, never
followed; a folder is removed with `shutil.rmtree`, which does not follow links
inside it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

Entries = frozenset[str]
_SKIP = ".git"


def snapshot(tree: Path) -> Entries:
    """Every entry of `tree` (relative paths), but `.git` at its top."""
    found: list[str] = []
    for root, dirs, files in os.walk(tree, followlinks=False):
        rel = os.path.relpath(root, tree)
        if rel == ".":
            dirs[:] = [d for d in dirs if d != _SKIP]
            files = [f for f in files if f != _SKIP]
            prefix = ""
        else:
            prefix = rel + os.sep
        found += [prefix + name for name in dirs]
        found += [prefix + name for name in files]
    return frozenset(found)


def remove_new(tree: Path, before: Entries) -> list[str]:
    """Remove each entry of `tree` that is not in `before`; returns the ones that could not
    be removed (with why), [] when all went."""
    failed: list[str] = []
    for root, dirs, files in os.walk(tree, followlinks=False):
        rel = os.path.relpath(root, tree)
        prefix = "" if rel == "." else rel + os.sep
        if not prefix:
            dirs[:] = [d for d in dirs if d != _SKIP]
            files = [f for f in files if f != _SKIP]
        kept_dirs = []
        for name in dirs:
            path = Path(root) / name
            if prefix + name in before:
                if not path.is_symlink():
                    kept_dirs.append(name)
                continue
            failed += _remove(path, prefix + name)
        dirs[:] = kept_dirs  # a new folder is gone; a link to one is never entered
        for name in files:
            if prefix + name not in before:
                failed += _remove(Path(root) / name, prefix + name)
    return failed


def _remove(path: Path, shown: str) -> list[str]:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [f"{shown}: {exc.strerror or exc}"]
    return []
