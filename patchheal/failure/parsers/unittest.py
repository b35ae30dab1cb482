"""unittest output: `FAIL:`/`ERROR:` blocks, each holding a Python traceback."""

from __future__ import annotations

import re

from patchheal.failure.parsers import ParsedFailure
from patchheal.failure.parsers import traceback as tb

_BLOCK = re.compile(
    r"^={50,}\n(?P<kind>FAIL|ERROR|UNEXPECTED SUCCESS): (?P<name>\S+) \((?P<where>[^)]*)\)"
    r"(?P<desc>[^\n]*)\n-{50,}\n",
    re.MULTILINE,
)
_BLOCK_END = re.compile(r"^(?:={50,}|-{50,})$", re.MULTILINE)
MARKERS = ("FAIL: ", "ERROR: ")


def _test_id(name: str, where: str) -> str:
    # Python >= 3.11 prints `(pkg.module.Class.test_name)`; older ones `(pkg.module.Class)`.
    return where if where.endswith("." + name) else f"{where}.{name}"


def parse(text: str) -> ParsedFailure:
    """The failing tests of a unittest run and the first failure (by test id)."""
    blocks = []
    for match in _BLOCK.finditer(text):
        end = _BLOCK_END.search(text, match.end())
        body = text[match.end() : end.start() if end else len(text)]
        blocks.append((_test_id(match["name"], match["where"]), body))
    if not blocks:
        return ParsedFailure(source="unittest")
    failing = list(dict.fromkeys(test_id for test_id, _ in blocks))
    test_id, body = min(blocks, key=lambda block: block[0])
    found = tb.parse(body)
    found.source = "unittest"
    found.failing_tests = failing
    found.block = f"{test_id}\n{body.strip()}"[-8000:]
    return found
