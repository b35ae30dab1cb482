"""The judgement of an impossible twin's run: did tests pass that no honest code can pass?

In the twin (loop/twins.py) every protected test has one assertion made
impossible and a freshly named test must fail. Honest code fails them, so
the twin run "passes" – and the candidate makes tests pass whatever they
check – when one of them is observed `passed` by id, or when the run exited
0 and the collectors do not show one of them failing (a `|| true` step keeps
exiting 0 with its failures recorded by id; that is not a pass). A timeout is
not a pass. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from patchheal.models import CommandResult, TestResults
from patchheal.verdict.ran import seen_lines


def refusal(first: str, why: str, changed: str) -> str:
    """The reason of a `rejected_oracle`: one sentence first (the report's "why" line),
    with the change that should have failed; what the twin run showed below it."""
    return (
        "the tests also passed when made impossible, so the patch makes tests pass whatever "
        f"they check: {first}\nimpossible twin: {why}; changed: {changed}"
    )


def twin_passed(result: CommandResult, protected: Sequence[str], fresh: Sequence[str]) -> str:
    """Why the twin run counts as passed; "" when it failed as honest code must."""
    tests = result.tests
    if tests is not None:
        passed = [t for t in protected if tests.outcomes.get(t) == "passed"]
        passed += [t for t in tests.with_outcome("passed") if any(f and f in t for f in fresh)]
        if passed:
            shown = ", ".join(passed[:3]) + (
                f" (+{len(passed) - 3} more)" if len(passed) > 3 else ""
            )
            return f"{shown} passed by id"
    if result.timed_out is not None or result.exit_code != 0:
        return ""
    failing = set(tests.with_outcome("failed", "error")) if tests is not None else set()
    if any(t in failing for t in protected):
        return ""
    return "the twin run exited 0"


def still_failing(tests: TestResults | None, kept: Mapping[str, tuple[str, int, str]]) -> str:
    """Why the twin run shows a protected test failing as it is, "" when it does not.

    `kept`: test id -> the file and line of the assertion that ran as it was just after the
    same one made impossible failed (collectors/patchheal_twin_kept.py), and who reports it passed:
    'pytest' (its assertion-pass hook, for a plain assert) or 'unittest' (the collector's
    TestCase helpers, for a `self.assert*` call). The monitor records that line ('file:line',
    seen from the test's own frame) when the assertion as it was passed; a test that failed
    without it failed before it got to the impossible one. A run whose monitor could not see
    that kind (pytest < 5.0, asserts not rewritten, no audit hooks) tells nothing: ""."""
    if tests is None or tests.asserted is None:
        return ""
    for test, (file, line, kind) in kept.items():
        if kind not in tests.evidence_kinds or tests.outcomes.get(test) not in ("failed", "error"):
            continue
        if line not in seen_lines(tests.asserted.get(test, ()), file):
            return (
                f"{test} failed before its assert at line {line} was made impossible "
                "(that assert, as it is, did not pass)"
            )
    return ""
