"""pytest output: the FAILURES/ERRORS sections, the short test summary, `-v` result lines.

Handles the long (default) and short tracebacks, assertion introspection
(`E` lines), chained exceptions inside a test, setup/teardown errors and
collection errors. Test ids come from the short summary when pytest printed
one, from `-v` lines, else from the section headers.
"""

from __future__ import annotations

import re

from patchheal.failure.parsers import ParsedFailure, RawException, RawFrame
from patchheal.failure.parsers.traceback import _EXCEPTION

_SECTION = re.compile(r"^=+ (FAILURES|ERRORS) =+$", re.MULTILINE)
_SECTION_END = re.compile(
    r"^=+ .*(?:short test summary info|warnings summary|\d+ (?:failed|passed|error)|captured"
    r"|coverage|Interrupted).* =+$|^!+ .* !+$",
    re.MULTILINE,
)
_HEADER = re.compile(r"^_{3,} (.+?) _{3,}$", re.MULTILINE)
_HEADER_PREFIX = re.compile(r"^(?:ERROR at (?:setup|teardown) of |ERROR collecting |Failed: )")
_ENTRY_SEPARATOR = re.compile(r"^(?:_ ){5,}_?\s*$")
_LOCATION = re.compile(
    r"^(?P<file>(?:[A-Za-z]:)?[^\s:>|][^:\n]*?\.\w+):(?P<line>\d+):(?: (?P<rest>.*?))?\s*$"
)
_DEF = re.compile(r"^\s*>?\s*(?:async\s+)?def (\w+)\(")
_SUMMARY = re.compile(
    r"^(?P<kind>FAILED|ERROR) (?P<id>[^\s\[]+(?:\[.*?\])?)(?: - (?P<msg>.*))?$", re.MULTILINE
)
_VERBOSE = re.compile(
    r"^(?P<id>[^\s\[]+::[^\s\[]+(?:\[.*?\])?) (?P<kind>FAILED|ERROR)\b", re.MULTILINE
)
_ROOTDIR = re.compile(r"^rootdir: (\S+)", re.MULTILINE)
_CHAIN = re.compile(
    r"^(?:The above exception was the direct cause of the following exception:"
    r"|During handling of the above exception, another exception occurred:)$",
    re.MULTILINE,
)
MARKERS = ("= FAILURES =", "= ERRORS =", "short test summary info")


def _failing_ids(text: str) -> list[str]:
    ids = [m["id"] for m in _SUMMARY.finditer(text)]
    if not ids:
        ids = [m["id"] for m in _VERBOSE.finditer(text)]
    return list(dict.fromkeys(ids))


def _sections(text: str) -> list[tuple[str, str]]:
    """(header, body) of each test section under FAILURES/ERRORS."""
    out: list[tuple[str, str]] = []
    starts = list(_SECTION.finditer(text))
    for n, section in enumerate(starts):
        end_match = _SECTION_END.search(text, section.end())
        end = end_match.start() if end_match else len(text)
        if n + 1 < len(starts):
            end = min(end, starts[n + 1].start())
        body = text[section.end() : end]
        headers = list(_HEADER.finditer(body))
        for n, header in enumerate(headers):
            stop = headers[n + 1].start() if n + 1 < len(headers) else len(body)
            out.append((header.group(1).strip(), body[header.end() : stop]))
    return out


def _parse_part(part: str) -> RawException:
    """One exception of a test section: its frames, E lines and location lines."""
    frames: list[RawFrame] = []
    entry: list[str] = []
    e_lines: list[str] = []
    located_type = ""
    for line in part.split("\n"):
        if _ENTRY_SEPARATOR.match(line):
            entry = []
            continue
        if line.startswith("E ") or line == "E":
            e_lines.append(line[1:].strip())
            continue
        location = _LOCATION.match(line)
        if location:
            rest = location["rest"] or ""
            if rest.startswith("in "):
                function = rest[3:]
            else:
                defs = [d.group(1) for d in map(_DEF.match, entry) if d]
                function = defs[0] if defs else ""
                located_type = rest if rest and _EXCEPTION.match(rest) else located_type
            frames.append(RawFrame(location["file"], function, int(location["line"])))
            entry = []
            continue
        entry.append(line)
    message = "\n".join(e_lines).strip()
    first = e_lines[0] if e_lines else ""
    head = _EXCEPTION.match(first)
    if head and ":" in first and " " not in head["type"]:
        return RawException(
            head["type"], (head["msg"] or "").strip() + message[len(first) :], frames
        )
    return RawException(
        located_type or ("AssertionError" if first.startswith("assert") else ""), message, frames
    )


def _match_id(header: str, ids: list[str]) -> str:
    name = _HEADER_PREFIX.sub("", header)
    dotted = name.replace(".", "::")
    for test_id in ids:
        if test_id == name or test_id.endswith("::" + dotted) or test_id.endswith("::" + name):
            return test_id
    return name


def parse(text: str) -> ParsedFailure:
    """The failing tests and the first failure (by test id) of a pytest run."""
    ids = _failing_ids(text)
    rootdir = m.group(1) if (m := _ROOTDIR.search(text)) else ""
    parsed: list[tuple[str, list[RawException], str]] = []
    for header, body in _sections(text):
        parts = _CHAIN.split(body)
        chain = [_parse_part(part) for part in parts]
        parsed.append((_match_id(header, ids), chain, body))
    failing = list(dict.fromkeys(ids + [test_id for test_id, _, _ in parsed]))
    if not parsed:
        if not failing:
            return ParsedFailure(source="pytest", rootdir=rootdir)
        summary = _SUMMARY.search(text)
        message = (summary["msg"] or "") if summary else ""
        head = _EXCEPTION.match(message)
        error_type = head["type"] if head and ": " in message else ""
        msg = (head["msg"] or "") if error_type and head else message
        block = text[summary.start() :] if summary else ""
        return ParsedFailure(
            "pytest", error_type, msg, failing_tests=failing, block=block[:4000], rootdir=rootdir
        )
    test_id, chain, body = min(parsed, key=lambda item: item[0])
    primary = chain[-1]
    return ParsedFailure(
        source="pytest",
        error_type=primary.error_type,
        message=primary.message,
        frames=primary.frames,
        chain=chain[:-1],
        failing_tests=failing,
        block=f"{test_id}\n{body.strip()}"[-8000:],
        rootdir=rootdir,
    )
