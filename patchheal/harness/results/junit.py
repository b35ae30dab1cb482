"""A bounded JUnit XML reader: outcome by test id, or the reason the file is refused.

A JUnit file is written by the step (node's reporter runs in the step's process; a
declared `results` glob is the step's own file), so it is hostile input. The old
reader built the whole tree and walked it recursively: 100,000 nested `testsuite`
elements raised `RecursionError` and stopped the whole heal. This one streams the
file through a pull parser with a depth limit, refuses any DTD (no entity
expansion, internal or external), and is only ever handed bytes already capped by
`untrusted.py`, so its time and memory are bounded by that cap.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from typing import cast

# Real reports nest suites a handful deep (file > describe > describe); far past
# that is an attack on the parser, not a test report.
MAX_DEPTH = 64
# A parse that takes longer than this (on capped bytes, it should not) is refused.
MAX_SECONDS = 10.0
_CHUNK = 64 * 1024
# Worst first, as in collectors/patchheal_results.py.
_RANK = {"error": 0, "failed": 1, "passed": 2, "xfailed": 3, "skipped": 4}
_CONTAINERS = {"testsuites", "testsuite"}


def worst(before: str | None, now: str) -> str:
    if before is None:
        return now
    return before if _RANK.get(before, 0) <= _RANK.get(now, 0) else now


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


class _Walk:
    """Test ids from start/end events: suite names on a stack, no recursion, no tree kept."""

    def __init__(self) -> None:
        self.found: dict[str, str] = {}
        # Per open element: its tag and whether testcases/testsuites directly under it count
        # (the document itself, testsuites and testsuite do; a testcase's children do not).
        self._open: list[tuple[str, bool]] = []
        self._suites: list[str] = []
        # The open testcase: its id, the tags of its direct children, its depth.
        self._case: tuple[str, set[str], int] | None = None

    def start(self, element: ET.Element) -> str | None:
        tag = _local(element.tag)
        parent_counts = not self._open or self._open[-1][1]
        if len(self._open) >= MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} elements"
        if self._case is not None and len(self._open) == self._case[2] + 1:
            self._case[1].add(tag)
        counts = parent_counts and tag in _CONTAINERS
        if parent_counts and tag == "testsuite" and element.get("name"):
            self._suites.append(element.get("name", ""))
        if parent_counts and tag == "testcase":
            name = element.get("name", "")
            classname = element.get("classname", "")
            test_id = ".".join(
                filter(None, (*self._suites, classname if classname != "test" else "", name))
            )
            self._case = (test_id, set(), len(self._open))
        self._open.append((tag, counts))
        return None

    def end(self, element: ET.Element) -> None:
        tag, _ = self._open.pop()
        parent_counts = not self._open or self._open[-1][1]
        if parent_counts and tag == "testsuite" and element.get("name"):
            self._suites.pop()
        if parent_counts and tag == "testcase" and self._case is not None:
            test_id, kinds, _ = self._case
            outcome = (
                "error"
                if "error" in kinds
                else "failed"
                if "failure" in kinds
                else "skipped"
                if "skipped" in kinds
                else "passed"
            )
            self.found[test_id] = worst(self.found.get(test_id), outcome)
            self._case = None
        element.clear()


def _drain(parser: ET.XMLPullParser[ET.Element], walk: _Walk) -> str | None:
    """Hand the parser's pending events to `walk`; why the file is refused, or None."""
    for item in parser.read_events():
        event, element = cast("tuple[str, object]", item)
        if not isinstance(element, ET.Element):
            continue  # only start/end were asked for: always elements
        if event == "start":
            refused = walk.start(element)
            if refused:
                return refused
        else:
            walk.end(element)
    return None


def parse_junit(data: bytes) -> dict[str, str] | str:
    """Outcome by test id (enclosing suite names + case name), or why `data` is refused."""
    # JUnit reports carry no DTD; one is either a mistake or an entity-expansion bomb.
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        return "declares a DTD or entities"
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    walk = _Walk()
    deadline = time.monotonic() + MAX_SECONDS
    try:
        for offset in range(0, max(len(data), 1), _CHUNK):
            parser.feed(data[offset : offset + _CHUNK])
            refused = _drain(parser, walk)
            if refused:
                return refused
            if time.monotonic() > deadline:
                return f"took over {MAX_SECONDS:.0f}s to parse"
        parser.close()
        refused = _drain(parser, walk)
    except ET.ParseError as exc:
        return f"not well-formed XML ({exc})"
    return refused or walk.found
