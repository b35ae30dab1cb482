"""Text helpers the report templates use: Markdown escaping, fences, times, excerpts.

Pure functions of their input, so a report renders byte for byte the same
whenever it is rendered. The HTML side relies on Jinja2's autoescape; only
`html_inline_code` builds markup, and it escapes first.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from patchheal.models import AttemptRecord

# Inline Markdown that would change how text reads: emphasis, links, raw HTML,
# code, tables, strikethrough, entities, GitHub math. Escaped with a backslash,
# which CommonMark allows before any ASCII punctuation.
_MD_ACTIVE = re.compile(r"([\\`*\[\]<>|&~$])")
# `_` only opens or closes emphasis next to a non-word character, so
# `test_parser_x` stays readable and `__init__` is escaped.
_MD_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# What would turn a line's start into a heading, list item or quote.
_MD_LINE_START = re.compile(r"^(>|[#+-](?=\s|$))")
_MD_ORDERED_START = re.compile(r"^(\d{1,9})([.)])(?=\s|$)")
_BACKTICK_RUN = re.compile(r"`+")
_HTML_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_ERRORISH = re.compile(
    r"(error|exception|failed|failure|assert|traceback|timed? ?out|killed|refused|denied)",
    re.IGNORECASE,
)


def one_line(text: str) -> str:
    """Collapse whitespace runs (newlines included) to single spaces."""
    return " ".join(text.split())


def _md_escape(flat: str) -> str:
    flat = _MD_ACTIVE.sub(r"\\\1", flat)
    return _MD_UNDERSCORE.sub(r"\\_", flat)


def _md_line_start(flat: str) -> str:
    flat = _MD_LINE_START.sub(r"\\\1", flat)
    return _MD_ORDERED_START.sub(r"\1\\\2", flat)


def cut_at_word(text: str, limit: int) -> str:
    """`text` in at most `limit` characters plus ` …`, cut between words (a word cut in two
    reads as another word: `tests/test_r`) or after a path's `/`; one very long word is
    cut where it must."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:
        return cut[:space].rstrip(" ,;:") + " …"
    slash = cut.rfind("/")  # a long path: at a folder's end
    if slash > limit // 2:
        return cut[: slash + 1] + " …"
    return cut + " …"


def md_text(text: object) -> str:
    """Plain text for a Markdown paragraph, list item or table cell: shown literally."""
    return _md_line_start(_md_escape(one_line(str(text))))


def md_code(text: object, *, cell: bool = False) -> str:
    """An inline code span that holds any text, even backticks, on one line.

    In a table cell a `|` is escaped as `\\|` (GFM strips that even inside
    code spans). A backslash right before a pipe cannot be expressed inside a
    code span, so that rare text falls back to escaped plain text.
    """
    flat = one_line(str(text))
    if not flat:
        return ""
    if cell:
        if "\\|" in flat:
            return md_text(flat)
        flat = flat.replace("|", "\\|")
    longest = max((len(run) for run in _BACKTICK_RUN.findall(flat)), default=0)
    fence = "`" * (longest + 1)
    # A span that starts or ends with a backtick needs a space of padding,
    # which CommonMark strips again.
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def md_fence(text: object, info: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside it."""
    body = str(text).replace("\r\n", "\n").replace("\r", "\n")
    longest = max((len(run) for run in _BACKTICK_RUN.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    if body and not body.endswith("\n"):
        body += "\n"
    return f"{fence}{info}\n{body}{fence}"


def md_actions(text: object) -> str:
    """A runbook line for Markdown: keeps its `code spans`, escapes everything else."""
    parts = re.split(r"(`[^`\n]+`)", one_line(str(text)))
    out = [md_code(part[1:-1]) if i % 2 else _md_escape(part) for i, part in enumerate(parts)]
    return _md_line_start("".join(out))


def html_inline_code(text: object) -> Any:
    """A runbook line for HTML: escaped, with `code spans` turned into <code>."""
    from markupsafe import Markup, escape

    escaped = str(escape(one_line(str(text))))
    return Markup(_HTML_CODE_SPAN.sub(r"<code>\1</code>", escaped))


def html_diff(text: object) -> Any:
    """A unified diff for HTML: escaped, each line wrapped in a span by its kind."""
    from markupsafe import Markup, escape

    kinds = (("+++", "file"), ("---", "file"), ("@@", "hunk"), ("+", "add"), ("-", "del"))
    out = []
    for line in str(text).replace("\r\n", "\n").split("\n"):
        kind = next((k for prefix, k in kinds if line.startswith(prefix)), "")
        escaped = escape(line)
        out.append(f'<span class="{kind}">{escaped}</span>' if kind else str(escaped))
    return Markup("\n".join(out))


def utc(timestamp: float) -> str:
    """A Unix time as a fixed UTC string (never the renderer's local zone)."""
    if timestamp <= 0:
        return "unknown"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(seconds: float) -> str:
    """A short human duration: `0.42 s`, `12.3 s`, `4 min 05 s`, `2 h 03 min`."""
    if seconds < 0:
        return "unknown"
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def short_hash(value: str, length: int = 12) -> str:
    """The first characters of a hash, enough to tell attempts apart in a table."""
    return value[:length] if value else ""


def percent(rate: float | None) -> str:
    return "unknown" if rate is None else f"{rate * 100:.0f}%"


def tail(text: str, max_lines: int = 40) -> str:
    """The last lines of a log excerpt (the failure is near the end), with what was cut."""
    lines = text.replace("\r\n", "\n").rstrip("\n").split("\n")
    if len(lines) <= max_lines:
        return "\n".join(lines)
    cut = len(lines) - max_lines
    return f"[… {cut} earlier line(s) omitted …]\n" + "\n".join(lines[-max_lines:])


WHY_LIMIT = 200


def _short(line: str) -> str:
    line = line.strip()
    return line if len(line) <= WHY_LIMIT else line[: WHY_LIMIT - 1] + "…"


def why(attempt: AttemptRecord) -> str:
    """Why an attempt ended, in one line: the first line of its recorded reason (a git
    error dump is folded under the attempt, not printed here), else the telling line
    of its log excerpt."""
    reason_lines = [line.strip() for line in attempt.reason.splitlines() if line.strip()]
    if reason_lines:
        first = reason_lines[0]
        if first.endswith(":") and len(reason_lines) > 1:
            # A heading for the details below it ("… by any method:"): the telling
            # detail goes with it, or the line reads as cut off.
            rest = reason_lines[1:]
            detail = next((line for line in rest if _ERRORISH.search(line)), rest[0])
            return _short(f"{first} {detail}")
        return _short(first)
    lines = [line.strip() for line in attempt.log_excerpt.splitlines() if line.strip()]
    for line in reversed(lines):
        if _ERRORISH.search(line):
            return _short(line)
    return _short(lines[-1]) if lines else ""


def diff_only(text: str) -> str:
    """A candidate's diff without what a patch file carries before it (mail headers,
    comments): the report shows the change, from its first `diff --git` or `---` line."""
    lines = text.replace("\r\n", "\n").split("\n")
    for i, line in enumerate(lines):
        if line.startswith(("diff --git ", "--- ")):
            return "\n".join(lines[i:])
    return text


FILTERS = {
    "one_line": one_line,
    "md_text": md_text,
    "md_code": md_code,
    "md_fence": md_fence,
    "md_actions": md_actions,
    "html_inline_code": html_inline_code,
    "html_diff": html_diff,
    "utc": utc,
    "duration": duration,
    "short_hash": short_hash,
    "percent": percent,
    "tail": tail,
    "why": why,
    "diff_only": diff_only,
}
