"""JUnit XML reports, from any language's test runner (pytest --junitxml, Maven, Jest...).

Streams the XML (iterparse, elements cleared as they close) so a large report
stays in bounded memory. The failure body is read as pytest output when it
looks like it, else as a Python traceback, else for Java/JS stack frames.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from patchheal.errors import BadInput
from patchheal.failure.parsers import ParsedFailure, RawException
from patchheal.failure.parsers import pytest as pytest_parser
from patchheal.failure.parsers import traceback as tb
from patchheal.failure.parsers.generic import stack_frames

_MAX_FAILURES = 200  # failing testcases kept; the rest are only counted as ids
_PYTEST_BODY = re.compile(r"^E   |^\S+\.py:\d+: ", re.MULTILINE)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _body(text: str, error_type: str, message: str) -> RawException:
    text = text or ""
    if _PYTEST_BODY.search(text):
        parts = pytest_parser._CHAIN.split(text)
        found = pytest_parser._parse_part(parts[-1])
        return RawException(found.error_type or error_type, found.message or message, found.frames)
    if tb.START in text:
        parsed = tb.parse(text)
        return RawException(
            parsed.error_type or error_type, parsed.message or message, parsed.frames
        )
    return RawException(error_type, message, stack_frames(text))


def _split_type(message: str) -> tuple[str, str]:
    head = tb._EXCEPTION.match(message.split("\n", 1)[0])
    if head and ": " in message and "." not in head["type"][:1]:
        return head["type"], (head["msg"] or "")
    return "", message


def parse(source: str | bytes | Path) -> ParsedFailure:
    """Failing testcases of a JUnit XML report; the first (by id) is the primary failure."""
    if isinstance(source, Path):
        stream: io.IOBase | str = str(source)
    else:
        data = source.encode("utf-8") if isinstance(source, str) else source
        stream = io.BytesIO(data)
    failures: list[tuple[str, RawException, str]] = []
    failing: list[str] = []
    try:
        for _, elem in ET.iterparse(stream, events=("end",)):
            if _local(elem.tag) != "testcase":
                continue
            bad = next((c for c in elem if _local(c.tag) in ("failure", "error")), None)
            if bad is not None:
                classname, name = elem.get("classname", ""), elem.get("name", "")
                test_id = f"{classname}.{name}" if classname else name
                failing.append(test_id)
                if len(failures) < _MAX_FAILURES:
                    message = bad.get("message", "") or ""
                    error_type, msg = bad.get("type", ""), message
                    if not error_type:
                        error_type, msg = _split_type(message)
                    exc = _body(bad.text or "", error_type, msg)
                    failures.append((test_id, exc, (bad.text or message)[-8000:]))
            elem.clear()
    except ET.ParseError as exc:
        raise BadInput(f"the JUnit XML report is not well-formed: {exc}") from None
    if not failures:
        return ParsedFailure(source="junit", failing_tests=failing)
    test_id, primary, block = min(failures, key=lambda item: item[0])
    return ParsedFailure(
        source="junit",
        error_type=primary.error_type,
        message=primary.message,
        frames=primary.frames,
        failing_tests=list(dict.fromkeys(failing)),
        block=f"{test_id}\n{block.strip()}",
    )
