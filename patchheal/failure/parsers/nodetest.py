"""Node's built-in test runner (`node --test`), whose output off a terminal is TAP 13.

A failing test is a `not ok N - name` line followed by a YAML diagnostic block
(`---` … `...`) holding its `location`, `error`, `name` and `stack`; subtests
are indented under `# Subtest: name`. Each failing leaf test becomes a failing
test id `FILE::outer > inner`, and the first one gives the error type, the
message (the `error: |-` block as text, not its YAML header) and the frames.
A suite that failed only because a subtest did (`failureType: subtestsFailed`)
is not a failure of its own.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from patchheal.failure.parsers import ParsedFailure, RawFrame

MARKERS = ("TAP version 13", "# Subtest: ")
_SUBTEST = re.compile(r"^(?P<indent> *)# Subtest: (?P<name>.+?)\s*$")
_RESULT = re.compile(r"^(?P<indent> *)(?P<ok>not ok|ok) \d+ - (?P<name>.+?)(?:\s+#\s.*)?\s*$")
# `TestContext.<anonymous> (/app/test/sum.test.js:4:41)` or a bare `/app/x.js:4:41`.
_FRAME = re.compile(
    r"^(?:(?P<func>\S.*?) \()?(?:file://)?(?P<file>[^\s()]+?):(?P<line>\d+):\d+\)?$"
)
_MAX_BLOCK_LINES = 400


def _diagnostic(lines: list[str], start: int, indent: str) -> tuple[dict[str, Any], int]:
    """The YAML block after a result line at `start` (and the index after it), or {}."""
    import yaml

    opener = f"{indent}  ---"
    if start >= len(lines) or lines[start].rstrip() != opener:
        return {}, start
    end = start + 1
    closer = f"{indent}  ..."
    while end < len(lines) and end - start < _MAX_BLOCK_LINES and lines[end].rstrip() != closer:
        end += 1
    block = textwrap.dedent("\n".join(lines[start + 1 : end]))
    try:
        data = yaml.safe_load(block)
    except yaml.YAMLError:
        data = None
    return (data if isinstance(data, dict) else {}), end + 1


def _frames(stack: object) -> list[RawFrame]:
    """Frames of a node stack, innermost last; node's own internals left out."""
    frames = []
    for line in str(stack or "").splitlines():
        found = _FRAME.match(line.strip())
        if found and not found["file"].startswith("node:"):
            function = (found["func"] or "").strip()
            frames.append(RawFrame(found["file"], function, int(found["line"])))
    return frames[::-1]


def _message(diag: dict[str, Any]) -> str:
    text = str(diag.get("error") or "").strip()
    return re.sub(r"\n\s*\n", "\n", text)  # node pads the assertion diff with blank lines


def parse(text: str) -> ParsedFailure:
    """The failing tests of a node:test TAP log, the first one as the primary failure."""
    lines = text.split("\n")
    names: dict[int, str] = {}  # indent -> the subtest open at that depth
    failing: list[tuple[str, dict[str, Any]]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        subtest = _SUBTEST.match(line)
        if subtest:
            depth = len(subtest["indent"])
            names = {d: n for d, n in names.items() if d < depth}
            names[depth] = subtest["name"]
            continue
        result = _RESULT.match(line)
        if result is None:
            continue
        depth = len(result["indent"])
        diag, index = _diagnostic(lines, index, result["indent"])
        path = [n for d, n in sorted(names.items()) if d < depth] + [result["name"]]
        if result["ok"] == "not ok" and diag.get("failureType") != "subtestsFailed":
            failing.append((" > ".join(path), diag))
    if not failing:
        return ParsedFailure(source="node:test")
    ids = []
    for name, diag in failing:
        location = str(diag.get("location") or "")
        file = re.sub(r":\d+:\d+$", "", location).removeprefix("file://")
        ids.append(f"{file}::{name}" if file else name)
    first = failing[0][1]
    message = _message(first)
    block = "\n".join(
        f"not ok - {test}\n" + textwrap.indent(_message(diag), "    ")
        for test, (_, diag) in zip(ids, failing, strict=True)
    )
    return ParsedFailure(
        source="node:test",
        error_type=str(first.get("name") or first.get("code") or "Error"),
        message=message,
        frames=_frames(first.get("stack")),
        failing_tests=ids,
        block=block,
    )
