"""Render a RetryContext as compact markdown within a token budget.

The failure and the avoid-list (earlier attempts, exhausted buckets) are
never dropped. When the text is over budget, the least important sections
shrink first and then go: the file map, then the memory hints, then the
recent history, then the diff that broke the job, then the code excerpts (the
lowest ranked first). Only if the essentials alone
are still over budget is the failure summary cut (its head and tail kept).
"""

from __future__ import annotations

from collections.abc import Callable

from patchheal.evidence.tokens import count_tokens
from patchheal.models import CodeExcerpt, Hint, RetryContext

_TASK = {
    "first": "Make the failing step pass with the smallest correct change to the code.",
    "more_context": "An earlier attempt failed (see below). More code is shown this time: "
    "find the real cause before changing anything.",
    "different_approach": "Earlier attempts failed. Use a different approach from every one "
    "listed below: another strategy, or other files.",
    "widen": "Several attempts failed. Look wider: the failing tests, callers and related "
    "files are shown. Do not repeat any earlier strategy on the same files.",
}


_APPROACH = {
    "simplify_approach": "Propose the simplest change that could work; the last one did not "
    "apply, was refused or timed out.",
    "break_into_smaller_steps": "The last patch broke other tests: change less, one thing at "
    "a time.",
    "gather_more_context": "Read the code shown (the code under test, the breaking change) "
    "before editing; find the cause first.",
    "try_alternative": "The earlier idea is exhausted: use another strategy or other files.",
}


def _fence(text: str, lang: str = "") -> str:
    ticks = "````" if "```" in text else "```"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def _lang(path: str) -> str:
    suffix = path.rsplit(".", 1)[-1] if "." in path else ""
    return {"py": "python", "js": "javascript", "ts": "typescript", "sh": "bash"}.get(
        suffix, suffix
    )


def _essentials(ctx: RetryContext, summary: str) -> str:
    out = [
        "# Fix a failing CI step",
        f"Job `{ctx.job_id}`, step `{ctx.step_name}`: `{ctx.command}`",
    ]
    if ctx.objective:
        out.append(f"Objective of the job: {ctx.objective}")
    out += ["", "## Task", _TASK[ctx.escalation]]
    if ctx.approach:
        out.append(
            f"Approach for this attempt: `{ctx.approach}`. {_APPROACH.get(ctx.approach, '')}"
        )
    out += ["", "## Failure"]
    facts = [f"class `{ctx.failure_class.value}`", f"fingerprint `{ctx.fingerprint[:16]}`"]
    if ctx.error_type:
        facts.insert(0, f"error `{ctx.error_type}`")
    out.append(", ".join(facts))
    if ctx.failing_tests:
        out += ["Failing tests:", *(f"- `{t}`" for t in ctx.failing_tests)]
    if summary:
        out.append(_fence(summary, "text"))
    if ctx.prior_attempts:
        out += ["", "## Do not repeat: earlier attempts on this failure"]
        out.append("| # | strategy | files | diff | outcome | why it failed |")
        out.append("|---|---|---|---|---|---|")
        for p in ctx.prior_attempts:
            why = p.reason.replace("|", "\\|") or "-"
            files = ", ".join(p.touched_files) or "-"
            out.append(
                f"| {p.attempt_number} | {p.strategy} | {files} | {p.diff_hash or '-'} "
                f"| {p.outcome.value} | {why} |"
            )
    if ctx.memory_degraded:
        out += ["", f"(Memory search degraded: {ctx.memory_degraded}; hints may be incomplete.)"]
    if ctx.exhausted_buckets:
        out += ["", "Exhausted (failed twice; do not propose these again):"]
        out += [f"- {b}" for b in ctx.exhausted_buckets]
    if ctx.constraints:
        out += ["", "## Constraints", *(f"- {c}" for c in ctx.constraints)]
    return "\n".join(out)


def _excerpts(items: tuple[CodeExcerpt, ...]) -> str:
    if not items:
        return ""
    out = ["## Code around the failure"]
    for e in items:
        last = e.start_line + max(0, e.text.count("\n"))
        out += [f"`{e.file}` lines {e.start_line}-{last}:", _fence(e.text, _lang(e.file))]
    return "\n".join(out)


def _breaking(diff: str) -> str:
    return f"## The change that broke the job\n{_fence(diff, 'diff')}" if diff else ""


def _history(text: str) -> str:
    return f"## Recent commits touching these files\n{_fence(text, 'text')}" if text else ""


def _hints(items: tuple[Hint, ...]) -> str:
    if not items:
        return ""
    out = ["## Fixes that verified for the same or a similar failure elsewhere"]
    for h in items:
        where = f" in job {h.job_id}" if h.job_id else ""
        out += [
            f"Strategy `{h.strategy}`, similarity {h.similarity:.2f}{where}"
            + (f"; FAILED in real CI ({h.real_ci}), do not reuse as is:" if h.real_ci else ":"),
            _fence(h.diff, "diff"),
        ]
    return "\n".join(out)


def _failed_elsewhere(items: tuple[Hint, ...]) -> str:
    if not items:
        return ""
    out = ["## Approaches that failed for similar failures: do not repeat them"]
    for h in items:
        why = f": {h.reason}" if h.reason else ""
        out += [
            f"Strategy `{h.strategy}`, similarity {h.similarity:.2f}, {h.outcome.value}{why}",
            _fence(h.diff, "diff"),
        ]
    return "\n".join(out)


def _file_map(items: tuple[str, ...]) -> str:
    return "## Repository files\n" + "\n".join(items) if items else ""


def _shrinkers(ctx: RetryContext) -> list[tuple[str, int, Callable[[int], str]]]:
    """(name, size, render at size n): sections from least to most important."""
    diff_lines = ctx.breaking_diff.splitlines()
    history = ctx.history.splitlines()

    def diff_at(n: int) -> str:
        text = "\n".join(diff_lines[:n])
        return _breaking(text + ("\n[... trimmed ...]" if n < len(diff_lines) else "") if n else "")

    return [
        ("file map", len(ctx.file_map), lambda n: _file_map(ctx.file_map[:n])),
        ("hints", len(ctx.hints), lambda n: _hints(ctx.hints[:n])),
        (
            "failed approaches",
            len(ctx.failed_elsewhere),
            lambda n: _failed_elsewhere(ctx.failed_elsewhere[:n]),
        ),
        ("history", len(history), lambda n: _history("\n".join(history[:n]))),
        ("breaking diff", len(diff_lines), diff_at),
        ("code excerpts", len(ctx.excerpts), lambda n: _excerpts(ctx.excerpts[:n])),
    ]


def _join(parts: list[str]) -> str:
    return "\n\n".join(p for p in parts if p) + "\n"


def render_context(ctx: RetryContext, *, max_tokens: int) -> str:
    """Compact markdown for a proposer, at most `max_tokens` tokens where the essentials allow."""
    shrinkers = _shrinkers(ctx)
    sizes = [size for _, size, _ in shrinkers]
    # Later sections are more important, so they are rendered in reverse: excerpts first.
    order = list(range(len(shrinkers) - 1, -1, -1))

    def compose(summary: str, trimmed: list[str]) -> str:
        parts = [_essentials(ctx, summary)] + [shrinkers[i][2](sizes[i]) for i in order]
        if trimmed:
            parts.append(f"(Trimmed to fit the context budget: {', '.join(trimmed)}.)")
        return _join(parts)

    trimmed: list[str] = []
    text = compose(ctx.failure_summary, trimmed)
    for index, (name, size, _) in enumerate(shrinkers):
        if count_tokens(text) <= max_tokens:
            return text
        # The largest size that fits, by bisection (0 drops the section).
        low, high = 0, size
        while low < high:
            mid = (low + high + 1) // 2
            sizes[index] = mid
            if count_tokens(compose(ctx.failure_summary, [*trimmed, name])) <= max_tokens:
                low = mid
            else:
                high = mid - 1
        sizes[index] = low
        trimmed.append(name)
        text = compose(ctx.failure_summary, trimmed)
    if count_tokens(text) <= max_tokens:
        return text
    return _cut_summary(ctx, max_tokens, lambda s: compose(s, [*trimmed, "failure summary"]))


def _cut_summary(ctx: RetryContext, max_tokens: int, compose: Callable[[str], str]) -> str:
    """The essentials with the longest head+tail of the summary that fits (maybe none)."""
    summary = ctx.failure_summary

    def clipped(n: int) -> str:
        if n >= len(summary):
            return summary
        head = n // 3
        return (
            f"{summary[:head]}\n[... trimmed ...]\n{summary[len(summary) - (n - head) :]}"
            if n
            else ""
        )

    low, high = 0, len(summary)
    while low < high:
        mid = (low + high + 1) // 2
        if count_tokens(compose(clipped(mid))) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return compose(clipped(low))
