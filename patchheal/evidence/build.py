"""What a proposer is shown: the compact retry context, built from evidence and memory.

`build_context` gathers the failure, code around its in-project frames, a
bounded file map, the job's constraints, the earlier attempts on the same
fingerprint (the avoid-list) and memory hints; every string in it is
scrubbed. The amount of code shown grows with the escalation level, which
follows from the earlier attempts: first → more_context → different_approach
→ widen. `render_context` (from evidence_render.py, re-exported here) turns it
into compact markdown within a token budget.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from patchheal import proc
from patchheal.config import JobSpec
from patchheal.errors import BadInput
from patchheal.evidence.render import render_context
from patchheal.models import (
    AttemptRecord,
    Classification,
    CodeExcerpt,
    Failure,
    Frame,
    Hint,
    Outcome,
    PriorAttempt,
    RetryContext,
)
from patchheal.scrub.scrubber import Scrubber

# Per escalation level: lines of code either side of a frame, frames shown, file-map entries.
_RADIUS = {"first": 6, "more_context": 15, "different_approach": 15, "widen": 30}
_FRAMES = {"first": 4, "more_context": 6, "different_approach": 6, "widen": 10}
_FILE_MAP = {"first": 150, "more_context": 150, "different_approach": 150, "widen": 400}
_MAX_EXCERPT_LINES = 120
_MAX_SUMMARY_CHARS = 6000
_MAX_DIFF_CHARS = 12000
_MAX_HINTS = 3
_MAX_HINT_CHARS = 3000
_MAX_REASON_CHARS = 300
_MAX_PRIORS = 15
_ESCALATION = ("first", "more_context", "different_approach", "widen")

__all__ = ["build_context", "escalation_for", "exhausted_buckets", "render_context"]


def _failed(prior: Sequence[AttemptRecord]) -> list[AttemptRecord]:
    return [a for a in prior if a.outcome is not Outcome.FIXED]


def escalation_for(prior: Sequence[AttemptRecord]) -> str:
    """first (no failure yet) → more_context → different_approach → widen (3+ failures)."""
    return _ESCALATION[min(len(_failed(prior)), len(_ESCALATION) - 1)]


def bucket_of(strategy: str, touched_files: Sequence[str]) -> str:
    """The equivalence bucket of an attempt: its strategy tag and the files it touched."""
    return f"{strategy}: {', '.join(sorted(touched_files)) or '(no files)'}"


def exhausted_buckets(prior: Sequence[AttemptRecord]) -> tuple[str, ...]:
    """Buckets (same strategy + same touched files) that failed twice or more, first seen first."""
    counts = Counter(bucket_of(a.strategy, a.touched_files) for a in _failed(prior))
    return tuple(bucket for bucket, n in counts.items() if n >= 2)


def _clip(text: str, limit: int) -> str:
    """Head and tail of `text` within `limit` characters (the end of a log matters most)."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters elided ...]\n{text[-tail:]}"


def _distinct_recent(prior: Sequence[AttemptRecord]) -> list[AttemptRecord]:
    """The latest record of each distinct diff, at most `_MAX_PRIORS`, oldest first.

    Across runs the same diff comes back as `rejected_repeat` again and again; the
    avoid-list names it once, so it stays short however long the memory grows.
    """
    seen: set[str] = set()
    kept: list[AttemptRecord] = []
    for a in reversed(prior):
        key = a.normalized_diff_hash or a.diff_hash or f"#{a.job_id}/{a.attempt_number}"
        if key not in seen:
            seen.add(key)
            kept.append(a)
    return list(reversed(kept[:_MAX_PRIORS]))


def tracked_files(worktree: Path) -> list[str]:
    """`git ls-files` of the worktree; empty when it is not a git checkout."""
    result = proc.git("ls-files", "-z", cwd=worktree, check=False, timeout=60)
    if result.exit_code != 0:
        return []
    return sorted(name for name in result.output.split("\0") if name)


def _repo_path(name: str, worktree: Path, files: Sequence[str]) -> str | None:
    """A frame's file as a worktree-relative path, if it is one of the repository's files."""
    posix = name.replace("\\", "/")
    if posix in files:
        return posix
    pure = PurePosixPath(posix)
    if pure.is_absolute():
        try:
            rel = Path(posix).resolve().relative_to(worktree.resolve()).as_posix()
        except ValueError:
            rel = None
        if rel in files:
            return rel
    # A path from another checkout or container (/app/src/x.py): the longest tracked suffix.
    suffixes = [f for f in files if posix.endswith("/" + f)]
    return max(suffixes, key=len) if suffixes else None


def _def_line(lines: Sequence[str], function: str) -> int | None:
    pattern = re.compile(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(function)}\b")
    return next((i + 1 for i, line in enumerate(lines) if pattern.match(line)), None)


def _test_targets(failing_tests: Sequence[str]) -> list[Frame]:
    """`tests/t.py::Class::test_x[param]` → a frame at the test function."""
    frames = []
    for test_id in failing_tests:
        file, sep, rest = test_id.partition("::")
        if sep and rest:
            function = rest.split("::")[-1].split("[")[0]
            frames.append(Frame(file=file, function=function, line=None))
    return frames


def _excerpts(
    frames: Sequence[Frame], worktree: Path, files: Sequence[str], radius: int, limit: int
) -> list[tuple[str, int, int]]:
    """(file, first line, last line) windows, innermost frame first, overlaps merged."""
    windows: list[tuple[str, int, int]] = []
    for frame in frames:
        if len(windows) >= limit:
            break
        rel = _repo_path(frame.file, worktree, files)
        if rel is None:
            continue
        try:
            lines = (worktree / rel).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        line = frame.line or _def_line(lines, frame.function)
        if line is None:
            continue
        start, end = max(1, line - radius), min(len(lines), line + radius)
        for k, (f, s, e) in enumerate(windows):
            if f == rel and s <= end + 1 and start <= e + 1:
                windows[k] = (f, min(s, start), max(e, end))
                break
        else:
            windows.append((rel, start, end))
    return windows


def _constraints(job: JobSpec) -> tuple[str, ...]:
    policy = job.policy
    protected = ", ".join((*policy.protected_paths, *policy.extra_protected_paths))
    items = [
        "Edit only files inside the repository working tree; never touch .git.",
        f"Do not modify protected paths: {protected}." if protected else "",
        (
            "Test files may be edited, but never delete, skip (skip/xfail markers) or weaken tests."
            if policy.allow_test_changes
            else "Do not edit, delete, skip (skip/xfail markers) or weaken tests; test files: "
            + ", ".join(policy.test_paths)
            + "."
        ),
        f"Keep the patch small: at most {policy.max_changed_lines} changed lines "
        f"in at most {policy.max_files} files.",
        "Fix the cause in the code under test; do not special-case the test's inputs.",
    ]
    return tuple(item for item in items if item)


def _prioritized_map(files: Sequence[str], near: Sequence[str], cap: int) -> tuple[str, ...]:
    """Files in the directories of the failure first, then the rest; capped, with a count."""
    dirs = {str(PurePosixPath(f).parent) for f in near}
    first = [f for f in files if str(PurePosixPath(f).parent) in dirs]
    rest = [f for f in files if str(PurePosixPath(f).parent) not in dirs]
    chosen = (first + rest)[:cap]
    if len(files) > cap:
        return (*sorted(chosen), f"... and {len(files) - cap} more files")
    return tuple(sorted(chosen))


def build_context(
    *,
    job: JobSpec,
    step_index: int,
    failure: Failure,
    classification: Classification,
    worktree: Path,
    prior: Sequence[AttemptRecord],
    hints: Sequence[Hint],
    breaking_diff: str = "",
    widen: bool = False,
) -> RetryContext:
    """The retry context for one attempt on `failure`; every string in it is scrubbed.

    `step_index` counts from 1, like step indices everywhere else (events, checkpoints,
    attempt records).
    """
    if not 1 <= step_index <= len(job.steps):
        raise BadInput(f"job {job.job.id} has no step {step_index} (steps are 1-{len(job.steps)})")
    step = job.steps[step_index - 1]
    clean = Scrubber.from_env(job.job.env).scrub
    same = [a for a in prior if a.fingerprint == failure.fingerprint]
    level = "widen" if widen else escalation_for(same)
    files = tracked_files(worktree)
    # Innermost frames are closest to the bug; the failing tests themselves come after them,
    # and always when there is no frame at all.
    frames = list(reversed(failure.project_frames))
    if level in {"different_approach", "widen"} or not frames:
        frames += _test_targets(failure.failing_tests)
    windows = _excerpts(frames, worktree, files, _RADIUS[level], _FRAMES[level])
    excerpts = []
    for rel, start, end in windows:
        lines = (worktree / rel).read_text(encoding="utf-8").splitlines()
        end = min(end, start + _MAX_EXCERPT_LINES - 1)
        excerpts.append(
            CodeExcerpt(file=rel, start_line=start, text=clean("\n".join(lines[start - 1 : end])))
        )
    priors = tuple(
        PriorAttempt(
            attempt_number=a.attempt_number,
            strategy=clean(a.strategy),
            touched_files=tuple(clean(f) for f in a.touched_files),
            diff_hash=(a.normalized_diff_hash or a.diff_hash)[:12],
            outcome=a.outcome,
            reason=_clip(clean(" ".join(a.reason.split())), _MAX_REASON_CHARS),
            label=clean(a.label),
        )
        for a in _distinct_recent(same)
    )
    kept_hints = tuple(
        h.model_copy(
            update={"diff": _clip(clean(h.diff), _MAX_HINT_CHARS), "job_id": clean(h.job_id)}
        )
        for h in hints[:_MAX_HINTS]
    )
    near = [w[0] for w in windows] + [f.file for f in _test_targets(failure.failing_tests)]
    return RetryContext(
        job_id=job.job.id,
        objective=clean(job.job.objective),
        step_name=step.name,
        command=clean(step.command),
        fingerprint=failure.fingerprint,
        failure_class=classification.failure_class,
        error_type=clean(failure.error_type),
        failure_summary=_clip(clean(failure.summary or failure.message), _MAX_SUMMARY_CHARS),
        failing_tests=tuple(clean(t) for t in failure.failing_tests),
        excerpts=tuple(excerpts),
        breaking_diff=_clip(clean(breaking_diff), _MAX_DIFF_CHARS),
        file_map=tuple(clean(f) for f in _prioritized_map(files, near, _FILE_MAP[level])),
        constraints=tuple(clean(c) for c in _constraints(job)),
        prior_attempts=priors,
        hints=kept_hints,
        escalation=level,
        exhausted_buckets=tuple(clean(b) for b in exhausted_buckets(same)),
    )
