"""What the monitor kept in its own closure and added to each record it signed.

The collectors stream each test's outcome to the monitor as the runner reports
it, and the monitor records each assertion it saw pass from a test file's own
frame (collectors/patchheal_watch.py). Both arrive in the signed record, beside
what the collector itself wrote at the end of the session, which the step's
code can reach and rewrite. Here the two are put side by side: a test the
collector's final outcomes show better than it was reported while it ran (or
that was never reported) was rewritten after the fact. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# Runners whose outcomes are streamed to the monitor as they happen.
STREAMING = ("pytest", "unittest")
_RANK = {"error": 0, "failed": 1, "passed": 2, "xfailed": 3, "skipped": 4}
MAX_NAMED = 5


def rewritten(runner: str, final: Mapping[str, str], streamed: Mapping[str, str]) -> list[str]:
    """Tampering lines for the tests whose recorded outcome is not what the runner reported
    while they ran: better than it, or never reported at all."""
    if runner not in STREAMING:
        return []
    found = []
    for test, outcome in final.items():
        during = streamed.get(test)
        if during is None:
            found.append(f"{runner}: {test} recorded {outcome} but never reported while it ran")
        elif _RANK.get(outcome, 0) > _RANK.get(during, 0):
            found.append(f"{runner}: {test} reported {during} while it ran, recorded {outcome}")
        if len(found) >= MAX_NAMED:
            break
    return found


@dataclass
class Evidence:
    """The monitor's evidence over every record of a run."""

    lines: dict[str, set[str]] = field(default_factory=dict)
    kinds: set[str] = field(default_factory=set)
    sources: dict[str, set[str]] = field(default_factory=dict)

    def add(
        self,
        evidence: Mapping[str, Iterable[str]],
        kinds: Iterable[str],
        sources: Mapping[str, Iterable[str]],
    ) -> None:
        self.kinds.update(kinds)
        for test, seen in evidence.items():
            self.lines.setdefault(test, set()).update(seen)
        for path, hashes in sources.items():
            self.sources.setdefault(path, set()).update(hashes)

    def asserted(self) -> dict[str, tuple[str, ...]] | None:
        """Per test, the 'file:line' seen passing; None when the monitor could see none."""
        if not self.kinds:
            return None
        return {t: tuple(sorted(lines)) for t, lines in self.lines.items()}
