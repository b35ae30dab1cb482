"""Recent history: the change that broke the job, recent commits of the implicated files.

`last_green..HEAD` is the change a bisection would point at; a model that sees
it can often undo or complete it. Both reads are bounded (characters, commits,
a git timeout) and never fail the caller: no `last_green`, a ref that is not
in the checkout or a shallow clone give an empty section and a note why.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from patchheal import proc

MAX_DIFF_CHARS = 12000
MAX_LOG_COMMITS = 5
_GIT_TIMEOUT = 20.0
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(?P<start>\d+)(?:,(?P<count>\d+))? @@", re.MULTILINE)
_COMMIT_LINE = re.compile(r"^[0-9a-f]{7,40} \d{4}-\d{2}-\d{2} ")
_REF = re.compile(r"^[\w./@^~-]{1,200}$")


@dataclass
class BreakingChange:
    """`last_green..HEAD`: its diff (bounded), changed lines per file, or why it is missing."""

    diff: str = ""
    changed: dict[str, list[int]] = field(default_factory=dict)
    note: str = ""


def changed_lines(diff: str) -> dict[str, list[int]]:
    """New-side line numbers each file's hunks cover, from a unified diff."""
    out: dict[str, list[int]] = {}
    current: str | None = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            name = line[4:].strip()
            current = None if name == "/dev/null" else name.removeprefix("b/")
            continue
        match = _HUNK.match(line)
        if match and current is not None:
            start = int(match["start"])
            count = int(match["count"]) if match["count"] is not None else 1
            out.setdefault(current, []).extend(range(start, start + max(count, 1)))
    return out


def _commit_of(ref: str, repo: Path) -> str | None:
    result = proc.git(
        "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
        cwd=repo, check=False, timeout=_GIT_TIMEOUT,
    )  # fmt: skip
    return result.output.strip() if result.exit_code == 0 and result.output.strip() else None


def breaking_change(
    worktree: Path,
    last_green: str | None,
    *,
    user_repo: Path | None = None,
    base_commit: str | None = None,
) -> BreakingChange:
    """The diff from `last_green` to the base, at most `MAX_DIFF_CHARS`.

    The job's private repository holds the base commit alone (workspace/history.py), so
    the history lives in the user's repository: with `user_repo` and `base_commit` the diff
    `last_green..base` is read there; without them, `last_green..HEAD` in the worktree.
    """
    if not last_green:
        return BreakingChange(note="no last_green ref in the job spec")
    if not _REF.match(last_green) or last_green.startswith("-"):
        return BreakingChange(note=f"last_green {last_green!r} is not a git ref")
    where, target = worktree, "HEAD"
    if user_repo is not None and base_commit and user_repo.is_dir():
        where, target = user_repo, base_commit
    commit = _commit_of(last_green, where)
    if commit is None:
        return BreakingChange(note=f"last_green {last_green} is not in the repository")
    result = proc.git(
        "diff", "--no-color", "--no-ext-diff", "--no-textconv", "-U3", f"{commit}..{target}",
        "--",
        cwd=where, check=False, timeout=_GIT_TIMEOUT,
    )  # fmt: skip
    if result.exit_code != 0:
        return BreakingChange(note=f"last_green {last_green} is not in the repository")
    diff = result.output
    if not diff.strip():
        return BreakingChange(note=f"no change since last_green {last_green}")
    changed = changed_lines(diff)
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + f"\n[... {len(result.output) - MAX_DIFF_CHARS} chars cut]"
    return BreakingChange(diff=diff, changed=changed)


def recent_history(
    worktree: Path,
    files: Sequence[str],
    limit: int = MAX_LOG_COMMITS,
    *,
    user_repo: Path | None = None,
    base_commit: str | None = None,
) -> str:
    """One line per recent commit touching `files` (newest first), with the files it touched.

    Read from the user's repository up to the base when given (the private one holds the
    base commit alone), else from the worktree's own history.
    """
    if not files:
        return ""
    where, target = worktree, "HEAD"
    if user_repo is not None and base_commit and user_repo.is_dir():
        where, target = user_repo, base_commit
    result = proc.git(
        "log", f"-n{limit}", "--no-color", "--date=short", "--format=%h %ad %s", "--name-only",
        target, "--", *files[:20],
        cwd=where, check=False, timeout=_GIT_TIMEOUT,
    )  # fmt: skip
    if result.exit_code != 0:
        return ""
    wanted = set(files)
    commits: list[tuple[str, list[str]]] = []
    for line in result.output.splitlines():
        if _COMMIT_LINE.match(line):
            commits.append((line, []))
        elif line.strip() and commits and line in wanted:
            commits[-1][1].append(line)
    return "\n".join(head + (f" ({', '.join(t)})" if t else "") for head, t in commits)
