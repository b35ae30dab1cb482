"""Evidence that a protected test's body ran: the monitor saw its assertions pass, from its frame.

A candidate's code runs in the test's process and can make a failing test be
recorded as passed (an outcome rewritten through a runner object, the body
emptied), and it can write anything into a collector's memory. So the evidence
is the monitor's (collectors/patchheal_watch.py): when pytest's rewritten assert
or a `TestCase.assert*` helper passes, the monitor, inside its audit hook, checks
that the frame which ran it is the test file's own code, called straight from
that frame, and keeps `file:line` in its closure, per test, until it signs the
record (`TestResults.asserted`); it also hashes the test file when it is compiled
and when its assertions are seen (`TestResults.sources`).

The protected test's top-level assertions (those every passing run executes:
`oracle/assertions.py`'s `executed`) are read from the pristine test file before
the step first runs in the tree (`loop/twinplan.py`). A protected test reported
passed whose assertions were not all seen passing from that file, or whose file
had other bytes than the pristine one when it ran, did not run its body. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from patchheal.models import TestResults


@dataclass(frozen=True)
class Required:
    """What a protected test's passing run must show: its file and its assertions."""

    file: str
    """The test's file, relative to the tree."""
    sha256: str
    """Of the file's bytes before the step first ran in the tree."""
    asserts: tuple[int, ...] = ()
    """Lines of its top-level `assert` statements (seen through pytest's rewritten asserts)."""
    calls: tuple[int, ...] = ()
    """Lines of its top-level `self.assert*(...)`/`self.fail*(...)` calls (TestCase helpers)."""


def _same_file(seen: str, planned: str) -> bool:
    """The monitor names a file relative to the repository, the plan relative to the tree;
    one may be a suffix of the other (a step run from a subdirectory)."""
    return seen == planned or seen.endswith(f"/{planned}") or planned.endswith(f"/{seen}")


def seen_lines(seen: tuple[str, ...], planned: str) -> set[int]:
    lines = set()
    for entry in seen:
        path, _, line = entry.rpartition(":")
        if line.isdigit() and _same_file(path, planned):
            lines.add(int(line))
    return lines


def _needed(need: Required, kinds: tuple[str, ...]) -> tuple[int, ...]:
    return (need.asserts if "pytest" in kinds else ()) + (need.calls if "unittest" in kinds else ())


def unexecuted(required: Mapping[str, Required], tests: TestResults | None) -> str:
    """Why a run's passing protected tests did not run their bodies ("" when they did, or
    when the run gave no such evidence: pytest < 5.0, asserts not rewritten, no monitor)."""
    if tests is None or tests.asserted is None:
        return ""
    for test, need in required.items():
        lines = _needed(need, tests.evidence_kinds)
        if not lines or tests.outcomes.get(test) != "passed":
            continue
        seen = seen_lines(tests.asserted.get(test, ()), need.file)
        missing = sorted(set(lines) - seen)
        if missing:
            shown = ", ".join(str(line) for line in missing[:5])
            plural = "s" if len(missing) > 1 else ""
            it = "them" if missing[1:] else "it"
            return (
                f"{test} was reported passed, but its assertion{plural} at line{plural} {shown} "
                f"never ran from the test's own code in {need.file} (the monitor did not see "
                f"{it} pass): the test's body did not run as written"
            )
        hashes = [
            h for f, found in tests.sources.items() if _same_file(f, need.file) for h in found
        ]
        if need.sha256 and any(h != need.sha256 for h in hashes):
            return (
                f"{test} was reported passed, but {need.file} had other bytes when it ran "
                "than in the tree: its assertions were not the test's"
            )
    return ""
