"""Code excerpts for the retry context: windows around frames, spans localization chose.

Frames may name files by an absolute path from another checkout or a container;
`repo_path` maps them to the repository's own files. `merge_spans` joins
overlapping spans of one file so nothing is shown twice, keeping the order in
which they were ranked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from patchheal.models import CodeExcerpt, Frame


def repo_path(name: str, worktree: Path, files: Sequence[str]) -> str | None:
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


def test_targets(failing_tests: Sequence[str]) -> list[Frame]:
    """`tests/t.py::Class::test_x[param]` → a frame at the test function."""
    frames = []
    for test_id in failing_tests:
        file, sep, rest = test_id.partition("::")
        if sep and rest:
            function = rest.split("::")[-1].split("[")[0]
            frames.append(Frame(file=file, function=function, line=None))
    return frames


def frame_windows(
    frames: Sequence[Frame], worktree: Path, files: Sequence[str], radius: int, limit: int
) -> list[tuple[str, int, int]]:
    """(file, first line, last line) windows, innermost frame first, overlaps merged."""
    windows: list[tuple[str, int, int]] = []
    for frame in frames:
        if len(windows) >= limit:
            break
        rel = repo_path(frame.file, worktree, files)
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


def merge_spans(spans: Sequence[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """Spans in rank order, each overlapping or adjacent later one of a file folded into the
    first of that file it touches."""
    merged: list[tuple[str, int, int]] = []
    for file, start, end in spans:
        for k, (f, s, e) in enumerate(merged):
            if f == file and s <= end + 1 and start <= e + 1:
                merged[k] = (f, min(s, start), max(e, end))
                break
        else:
            merged.append((file, start, end))
    # A fold may make two earlier spans of a file touch: fold again until stable.
    return merged if len(merged) == len(spans) else merge_spans(merged)


def read_excerpts(
    spans: Sequence[tuple[str, int, int]], worktree: Path, clean: Callable[[str], str]
) -> list[CodeExcerpt]:
    """The scrubbed text of each span; unreadable files are left out."""
    out = []
    for rel, start, end in spans:
        try:
            lines = (worktree / rel).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        out.append(
            CodeExcerpt(file=rel, start_line=start, text=clean("\n".join(lines[start - 1 : end])))
        )
    return out
