"""Parsers for what CI jobs print, one module per format.

Each parser takes cleaned text (see `patchheal.failure.normalize.clean`) and returns
`ParsedFailure`s: raw, not yet normalized. `failure.py` picks the best,
normalizes it and hashes it. `sections.py` finds the failure-relevant parts of
a large log with byte searches, so parsers never see the noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RawFrame:
    """A stack frame as printed: the path may be absolute, temporary, or in a library."""

    file: str
    function: str = ""
    line: int | None = None


@dataclass
class RawException:
    """One exception of a (possibly chained) traceback."""

    error_type: str
    message: str = ""
    frames: list[RawFrame] = field(default_factory=list)


@dataclass
class ParsedFailure:
    """What one parser found: the primary exception, its chain, tests and the excerpt."""

    source: str
    error_type: str = ""
    message: str = ""
    frames: list[RawFrame] = field(default_factory=list)
    chain: list[RawException] = field(default_factory=list)  # causes, root first, excl. primary
    failing_tests: list[str] = field(default_factory=list)
    block: str = ""  # the lines the parser read, for the summary
    rootdir: str = ""  # a project root the output itself names (pytest's `rootdir:`)

    @property
    def found(self) -> bool:
        return bool(self.error_type or self.failing_tests or self.frames)
