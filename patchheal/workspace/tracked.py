"""Whether a run changed the worktree's tracked files (issue 25, C2).

A verification run judges the candidate's tree. Anything that rewrites a
tracked file while the run goes on — a process a candidate started, the
candidate's own code under test — makes the run judge another tree than the
one that would be committed and published. So the tracked files that differ
from HEAD are fingerprinted before the run and compared after it; a file
that changed in between, other than the step's declared outputs (its
`results` glob), taints the run. Untracked files (`.pytest_cache`,
`__pycache__`, build outputs) are the step's to write and never count.

Host git reads the worktree through its trusted location (`proc.git_location`)
with the private repository's index, which the step sees read-only.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from patchheal import proc
from patchheal.harness.results.untrusted import glob_matches

# path -> its state: content digest and exec bit, a symlink's target, or absent.
TrackedState = dict[str, str]


def _changed_paths(tree: Path) -> list[str] | None:
    """Tracked paths whose working-tree state differs from HEAD (deleted ones included);
    None when `tree` is no git worktree (an ad-hoc directory: nothing is tracked)."""
    argv = ("diff", "--name-only", "-z", "--no-renames", "HEAD", "--")
    done = proc.git(*argv, cwd=tree, check=False)
    if done.exit_code != 0:
        return None
    return [name for name in done.output.split("\0") if name]


def _state(tree: Path, name: str) -> str:
    path = tree / name
    try:
        if path.is_symlink():
            return "link:" + str(path.readlink())
        if path.is_dir():
            return "dir"
        mode = "x" if path.stat().st_mode & 0o111 else "-"
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return f"file:{mode}:{digest.hexdigest()}"
    except FileNotFoundError:
        return "absent"
    except OSError as exc:  # unreadable now: a change all the same
        return f"error:{exc.errno}"


def snapshot(tree: Path) -> TrackedState | None:
    """The state of every tracked file that differs from HEAD, before a run."""
    names = _changed_paths(tree)
    return None if names is None else {name: _state(tree, name) for name in names}


def touched(before: TrackedState | None, tree: Path, declared: str | None = None) -> list[str]:
    """Tracked files whose state changed since `before`, the `declared` glob's excepted."""
    if before is None:
        return []
    after = _changed_paths(tree)
    if after is None:  # the worktree stopped being one during the run: all of it changed
        return ["(the worktree's git metadata)"]
    now = set(after)
    changed = [
        name
        for name in sorted(now | set(before))
        if (name not in before) or _state(tree, name) != before[name]
    ]
    return [name for name in changed if not (declared and glob_matches(name, declared))]


def tainted_reason(names: list[str], run: str) -> str:
    """Why a run that changed tracked files judges nothing (empty when none changed)."""
    if not names:
        return ""
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"tracked files changed during {run} by something other than the step's declared "
        f"outputs: {shown}; the run judged another tree than the candidate's"
    )
