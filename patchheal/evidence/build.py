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

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from patchheal import proc
from patchheal.config import JobSpec
from patchheal.errors import BadInput
from patchheal.evidence.excerpts import (
    frame_windows,
    merge_spans,
    read_excerpts,
    repo_path,
    test_targets,
)
from patchheal.evidence.executed import calls_of, frames_of, passed_tests
from patchheal.evidence.history import changed_lines
from patchheal.evidence.localize import localize
from patchheal.evidence.render import render_context
from patchheal.evidence.tokens import count_tokens
from patchheal.models import (
    AttemptRecord,
    Classification,
    CodeExcerpt,
    Failure,
    Hint,
    Outcome,
    PriorAttempt,
    RetryContext,
    TestTrace,
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


def _localized(
    ctx: RetryContext,
    failure: Failure,
    worktree: Path,
    files: Sequence[str],
    windows: list[tuple[str, int, int]],
    code_budget_tokens: int,
    clean: Callable[[str], str],
    traces: Mapping[str, TestTrace],
) -> tuple[CodeExcerpt, ...]:
    """The frame windows plus the code under test, packed into what the budget leaves."""
    spans = list(windows)
    base = count_tokens(render_context(ctx.model_copy(update={"file_map": ()}), max_tokens=10**9))
    left = code_budget_tokens - base - 200  # headroom for the section headers and fences
    if left > 200 and failure.failing_tests:
        # The trace's frames are complete (pytest may print a short traceback); the
        # printed ones still count where there is no trace.
        frames = frames_of(traces, files) + [
            (rel, f.line)
            for f in reversed(failure.project_frames)
            if f.line and (rel := repo_path(f.file, worktree, files)) is not None
        ]
        found = localize(
            worktree,
            files,
            failing_tests=failure.failing_tests,
            frames=frames,
            message=f"{failure.message}\n{failure.summary}",
            changed=changed_lines(ctx.breaking_diff),
            executed=calls_of(traces, failure.failing_tests),
            passed_tests=passed_tests(traces),
            budget_tokens=left,
        )
        if found.test_span is not None:
            spans.append((found.test_span.file, found.test_span.start, found.test_span.end))
        spans += [(s.file, s.start, s.end) for s in found.spans]
    return tuple(read_excerpts(merge_spans(spans), worktree, clean))


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
    history: str = "",
    widen: bool = False,
    approach: str = "",
    failed_elsewhere: Sequence[Hint] = (),
    memory_degraded: str = "",
    code_budget_tokens: int = 8000,
    traces: Mapping[str, TestTrace] | None = None,
) -> RetryContext:
    """The retry context for one attempt on `failure`; every string in it is scrubbed.

    `step_index` counts from 1, like step indices everywhere else (events, checkpoints,
    attempt records). `code_budget_tokens` is the budget the context is meant to fit: the
    code under test (see localize.py) fills what the other sections leave; 0 shows only
    the code around frames. `traces` are the failing tests' traces from the reproduction
    run (TestResults.traces): what they executed ranks the code shown.
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
        frames += test_targets(failure.failing_tests)
    windows = [
        (rel, start, min(end, start + _MAX_EXCERPT_LINES - 1))
        for rel, start, end in frame_windows(
            frames, worktree, files, _RADIUS[level], _FRAMES[level]
        )
    ]
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
    kept_failed = tuple(
        h.model_copy(
            update={
                "diff": _clip(clean(h.diff), _MAX_HINT_CHARS),
                "job_id": clean(h.job_id),
                "reason": _clip(clean(" ".join(h.reason.split())), _MAX_REASON_CHARS),
            }
        )
        for h in failed_elsewhere[:_MAX_HINTS]
    )
    near = [w[0] for w in windows] + [f.file for f in test_targets(failure.failing_tests)]
    ctx = RetryContext(
        job_id=job.job.id,
        objective=clean(job.job.objective),
        step_name=step.name,
        command=clean(step.command),
        fingerprint=failure.fingerprint,
        failure_class=classification.failure_class,
        error_type=clean(failure.error_type),
        failure_summary=_clip(clean(failure.summary or failure.message), _MAX_SUMMARY_CHARS),
        failing_tests=tuple(clean(t) for t in failure.failing_tests),
        excerpts=tuple(read_excerpts(windows, worktree, clean)),
        breaking_diff=_clip(clean(breaking_diff), _MAX_DIFF_CHARS),
        history=clean(history),
        file_map=tuple(clean(f) for f in _prioritized_map(files, near, _FILE_MAP[level])),
        constraints=tuple(clean(c) for c in _constraints(job)),
        prior_attempts=priors,
        hints=kept_hints,
        failed_elsewhere=kept_failed,
        memory_degraded=clean(memory_degraded),
        escalation=level,
        approach=approach,
        exhausted_buckets=tuple(clean(b) for b in exhausted_buckets(same)),
    )
    if code_budget_tokens <= 0:
        return ctx
    excerpts = _localized(
        ctx, failure, worktree, files, windows, code_budget_tokens, clean, traces or {}
    )
    return ctx.model_copy(update={"excerpts": excerpts})
