"""Where a verified patch changed the code, and whether the failing test ran that code.

A report's root cause is stated from evidence, not guessed: the functions the
verified diff changes (its hunks' old-side lines mapped onto the definitions of
the file as it was at reproduction), each with whether the failing test
executed it in the reproduction run, read from the trace the pytest collector
recorded (collectors/patchheal_trace.py). No trace (another runner, a file
that is not Python) leaves `executed` unknown rather than false.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from patchheal.evidence.executed import calls_of
from patchheal.evidence.symbols import Definition, index_definitions
from patchheal.models import TestTrace, TracedCall
from patchheal.pysource import parse_module

_HUNK = re.compile(r"^@@ -(?P<start>\d+)(?:,(?P<count>\d+))? \+\d+(?:,(?P<new_count>\d+))? @@")
# Read no more than this of one file to map its hunks: a bigger one is generated code.
MAX_SOURCE_BYTES = 512 * 1024
MODULE_LEVEL = ""


@dataclass(frozen=True)
class ChangedCode:
    """One function (or the module level) of one file the patch changes."""

    file: str
    function: str
    executed: bool | None


@dataclass(frozen=True)
class _DiffLine:
    old_file: str | None
    new_file: str | None
    kind: str  # "+", "-" or " "
    old_line: int


def _diff_lines(diff: str) -> Iterable[_DiffLine]:
    """The content lines of a unified diff, hunk by hunk; a hunk's line counts decide
    where it ends, so a removed line that reads `--- x` is content, not a file header."""
    old_file: str | None = None
    new_file: str | None = None
    old = old_left = new_left = 0
    for line in diff.replace("\r\n", "\n").split("\n"):
        if old_left > 0 or new_left > 0:
            kind = line[:1] or " "
            if kind not in "+- ":
                old_left = new_left = 0  # "\\ No newline at end of file", or a cut hunk
                continue
            yield _DiffLine(old_file, new_file, kind, old)
            if kind != "+":
                old += 1
                old_left -= 1
            if kind != "-":
                new_left -= 1
            continue
        if line.startswith("--- "):
            name = line[4:].strip().split("\t")[0]
            old_file = None if name == "/dev/null" else name.removeprefix("a/")
        elif line.startswith("+++ "):
            name = line[4:].strip().split("\t")[0]
            new_file = None if name == "/dev/null" else name.removeprefix("b/")
        elif match := _HUNK.match(line):
            old = int(match["start"])
            old_left = int(match["count"]) if match["count"] is not None else 1
            new_left = int(match["new_count"]) if match["new_count"] is not None else 1


def old_side_lines(diff: str) -> dict[str, list[int]]:
    """Per file (old-side path), the old lines the diff removes or inserts next to."""
    out: dict[str, list[int]] = {}
    for entry in _diff_lines(diff):
        if entry.old_file is None or entry.kind == " ":
            continue
        # An insertion sits between old lines: the line before it names its place.
        line = entry.old_line if entry.kind == "-" else max(entry.old_line - 1, 1)
        out.setdefault(entry.old_file, []).append(line)
    return {file: sorted(set(lines)) for file, lines in out.items()}


def _innermost_function(defs: Iterable[Definition], line: int) -> Definition | None:
    inside = [d for d in defs if d.start <= line <= d.end and not d.is_class]
    if not inside:
        inside = [d for d in defs if d.start <= line <= d.end]
    return min(inside, key=lambda d: d.end - d.start) if inside else None


def _ran(definition: Definition | None, calls: list[TracedCall]) -> bool:
    for call in calls:
        if call.file != (definition.file if definition else ""):
            continue
        qualname = ".".join(p for p in call.name.split(".") if p != "<locals>")
        if definition is not None and (
            qualname == definition.qualname or call.line == definition.start
        ):
            return True
    return False


def _definitions(file: str, source: str | None) -> list[Definition]:
    if source is None or len(source) > MAX_SOURCE_BYTES or not file.endswith(".py"):
        return []
    try:
        tree = parse_module(source.encode("utf-8"), filename=file)
    except (SyntaxError, ValueError, RecursionError, MemoryError, SystemError):
        return []
    return index_definitions(file, tree) if isinstance(tree, ast.Module) else []


def changed_code(
    diff: str,
    read_old: Callable[[str], str | None],
    traces: Mapping[str, TestTrace],
    failing_tests: Iterable[str],
) -> list[ChangedCode]:
    """What the diff changes, function by function, in the order of the diff.

    `read_old(file)` returns the file's text at reproduction (None when it did not exist).
    """
    calls = calls_of(traces, list(failing_tests))
    traced = bool(calls)
    out: list[ChangedCode] = []
    for file, lines in old_side_lines(diff).items():
        defs = _definitions(file, read_old(file))
        seen: set[str] = set()
        for line in lines:
            definition = _innermost_function(defs, line)
            name = definition.qualname if definition else MODULE_LEVEL
            if name in seen:
                continue
            seen.add(name)
            executed = _ran(definition, calls) if traced and definition else None
            out.append(ChangedCode(file, name, executed))
    return out


def diffstat(diff: str) -> list[tuple[str, int, int]]:
    """(file, lines added, lines removed) per file of a unified diff, in its order."""
    stats: dict[str, list[int]] = {}
    for entry in _diff_lines(diff):
        file = entry.new_file or entry.old_file or "?"
        counts = stats.setdefault(file, [0, 0])
        if entry.kind == "+":
            counts[0] += 1
        elif entry.kind == "-":
            counts[1] += 1
    return [(file, added, removed) for file, (added, removed) in stats.items()]
