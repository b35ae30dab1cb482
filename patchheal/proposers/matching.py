"""Find where a SEARCH text sits in a file, tolerating whitespace and small drift.

Three passes, most exact first, each refusing ambiguity (more than one place
fits equally): an exact substring; the same lines with whitespace collapsed;
a fuzzy window of about the same number of lines whose character similarity
reaches a threshold and clearly beats every other non-overlapping window.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from patchheal.errors import PatchApplyError

DEFAULT_THRESHOLD = 0.88
# A runner-up this close to the best fuzzy window makes the match ambiguous.
_AMBIGUITY_MARGIN = 0.03
# Without a single shared line, a fuzzy scan of every window is done only up to this size.
_FULL_SCAN_LINES = 2000


class AmbiguousMatch(PatchApplyError):
    """The SEARCH text fits more than one place in the file."""


class NoMatch(PatchApplyError):
    """The SEARCH text fits nowhere in the file."""


@dataclass(frozen=True)
class Match:
    start: int  # character offsets into the file's text
    end: int
    method: str  # exact | whitespace | fuzzy
    # (indent in SEARCH, indent in the file) for matched line pairs, longest SEARCH indent first.
    indent_map: tuple[tuple[str, str], ...] = ()
    score: float = 1.0


def _norm(line: str) -> str:
    return " ".join(line.split())


def _lead(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _expand(line: str) -> str:
    lead = _lead(line)
    return lead.expandtabs(4) + line[len(lead) :]


def _indent_map(wanted: list[str], found: list[str]) -> tuple[tuple[str, str], ...]:
    """How SEARCH's indentation maps onto the file's, from lines that correspond."""
    if "\t" not in "".join(_lead(line) for line in found):
        wanted = [_expand(line) for line in wanted]  # a tab-indenting model, a space-indented file
    pairs = [(a, b) for a, b in zip(wanted, found, strict=False) if a.strip() and b.strip()]
    if len(wanted) != len(found):
        pairs = pairs[:1]  # fuzzy windows of another size: only the first lines correspond
    mapping: dict[str, str] = {}
    for a, b in pairs:
        mapping.setdefault(_lead(a), _lead(b.rstrip("\r\n")))
    return tuple(sorted(mapping.items(), key=lambda item: -len(item[0])))


def _trim_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def locate(
    text: str, search: str, *, threshold: float = DEFAULT_THRESHOLD, where: str = ""
) -> Match:
    """Where `search` is in `text`; raises AmbiguousMatch or NoMatch."""
    label = f" in {where}" if where else ""
    count = text.count(search)
    if count == 1:
        start = text.index(search)
        return Match(start, start + len(search), "exact")
    if count > 1:
        raise AmbiguousMatch(f"SEARCH text occurs {count} times{label}; add surrounding lines")
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    wanted = _trim_blank(search.splitlines())
    if not wanted:
        raise NoMatch(f"SEARCH text is blank{label}")
    normed = [_norm(line) for line in lines]
    goal = [_norm(line) for line in wanted]
    k = len(goal)
    hits = [i for i in range(len(lines) - k + 1) if normed[i : i + k] == goal]
    if len(hits) > 1:
        raise AmbiguousMatch(
            f"SEARCH text matches {len(hits)} places{label} when whitespace is ignored"
        )
    if hits:
        i = hits[0]
        found = [line for line in lines[i : i + k]]
        return Match(offsets[i], offsets[i + k], "whitespace", _indent_map(wanted, found))
    return _fuzzy(lines, normed, offsets, wanted, threshold, label)


def _windows(normed: list[str], goal_lines: list[str]) -> list[tuple[int, int]]:
    """(start, size) windows worth a character-level comparison, most promising first.

    A window is ranked by how many of its lines appear verbatim (whitespace aside)
    in SEARCH; only windows within half of the best overlap are compared, which
    keeps a 5000-line file to milliseconds. When no line at all is shared, every
    window is a candidate, but only in files small enough to scan.
    """
    k = len(goal_lines)
    wanted = set(goal_lines)
    shared = [0]
    for line in normed:
        shared.append(shared[-1] + (line in wanted and bool(line)))
    # A model often drops or adds a line of context: try k-1 .. k+1 lines.
    sizes = sorted({max(1, k - 1), k, k + 1})
    windows = [(i, n) for n in sizes for i in range(len(normed) - n + 1)]
    overlap = {w: shared[w[0] + w[1]] - shared[w[0]] for w in windows}
    best = max(overlap.values(), default=0)
    if best == 0:
        return windows if len(normed) <= _FULL_SCAN_LINES else []
    return [w for w in windows if overlap[w] * 2 >= best]


def _fuzzy(
    lines: list[str],
    normed: list[str],
    offsets: list[int],
    wanted: list[str],
    threshold: float,
    label: str,
) -> Match:
    goal_lines = [_norm(line) for line in wanted]
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2("\n".join(goal_lines))
    scored: list[tuple[float, int, int]] = []
    k = len(wanted)
    for i, size in _windows(normed, goal_lines):
        matcher.set_seq1("\n".join(normed[i : i + size]))
        if matcher.real_quick_ratio() < threshold or matcher.quick_ratio() < threshold:
            continue
        score = matcher.ratio()
        if score >= threshold:
            scored.append((score, i, size))
    if not scored:
        raise NoMatch(
            f"SEARCH text not found{label} (no window reaches {threshold:.0%} similarity)"
        )
    scored.sort(key=lambda item: (-item[0], abs(item[2] - k)))
    best, i, size = scored[0]
    for score, j, other in scored[1:]:
        overlaps = j < i + size and i < j + other
        if not overlaps and score >= best - _AMBIGUITY_MARGIN:
            raise AmbiguousMatch(
                f"SEARCH text is {best:.0%} similar to lines {i + 1}-{i + size} and "
                f"{score:.0%} similar to lines {j + 1}-{j + other}{label}"
            )
    return Match(
        offsets[i],
        offsets[i + size],
        "fuzzy",
        _indent_map(wanted, _trim_blank(lines[i : i + size])),
        score=best,
    )


def splice(text: str, match: Match, replace: str) -> str:
    """`text` with the matched span replaced, re-indented when the match was not exact."""
    if match.method == "exact":
        return text[: match.start] + replace + text[match.end :]
    new_lines = _trim_blank(replace.splitlines())
    old = text[match.start : match.end]
    if "\t" not in "".join(_lead(line) for line in old.splitlines()):
        new_lines = [_expand(line) for line in new_lines]
    new_lines = [_reindent(line, match.indent_map) for line in new_lines]
    block = "".join(line + "\n" for line in new_lines)
    if block and not old.endswith("\n"):
        block = block[:-1]  # the match was the file's last line, without a newline
    return text[: match.start] + block + text[match.end :]


def _reindent(line: str, indent_map: tuple[tuple[str, str], ...]) -> str:
    if not line.strip():
        return ""
    for old, new in indent_map:
        if line.startswith(old):
            return new + line[len(old) :]
    return line
