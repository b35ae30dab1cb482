"""Evidence that a protected test's body ran: its asserts were seen passing.

A candidate's code runs in the test's process and can make a test "pass" without
running its body (the runner's call hook swapped, the body emptied). The pytest
collector turns on pytest's assertion-pass hook and records, per test id, the
lines of its asserts that passed (`TestResults.asserted`). The protected test's
top-level asserts (those every passing run executes: `oracle/assertions.py`'s
`executed`) are read from the test file before the step first runs in the tree.
A protected test reported passed whose asserts were not all seen passing did not
run its body. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from patchheal.models import TestResults


def unexecuted(required: Mapping[str, Sequence[int]], tests: TestResults | None) -> str:
    """Why a run's passing protected tests did not run their bodies ("" when they did, or
    when the run gave no such evidence: pytest < 5.0, plain asserts, another runner)."""
    if tests is None or tests.asserted is None:
        return ""
    for test, lines in required.items():
        if not lines or tests.outcomes.get(test) != "passed":
            continue
        seen = set(tests.asserted.get(test, ()))
        missing = [line for line in lines if line not in seen]
        if missing:
            shown = ", ".join(str(line) for line in missing[:5])
            plural = "s" if len(missing) > 1 else ""
            return (
                f"{test} was reported passed, but its assert{plural} at line{plural} {shown} "
                "never ran: the test's body did not run"
            )
    return ""
