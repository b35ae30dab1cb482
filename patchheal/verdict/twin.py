"""The judgement of an impossible twin's run: did tests pass that no honest code can pass?

In the twin (loop/twins.py) every protected test has one assertion made
impossible. Honest code fails them, so the twin run "passes" – and the
candidate makes tests pass whatever they check – when one of them is
observed `passed` by id, or when the run exited
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


def twin_passed(result: CommandResult, protected: Sequence[str]) -> str:
    """Why the twin run counts as passed; "" when it failed as honest code must. An
    impossible assertion the monitor saw hold is a pass, whatever the test's outcome (it
    can still fail after it: a teardown that calls the candidate's code)."""
    tests = result.tests
    if tests is not None:
        held = [(t, line) for t in protected for line in tests.held.get(t, ())]
        if held:
            test, line = held[0]
            return f"{test}: its assertion at {line} held when made impossible"
        passed = [t for t in protected if tests.outcomes.get(t) == "passed"]
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


def ended_early(result: CommandResult, protected: Sequence[str], followed_had_record: bool) -> str:
    """Why the twin run does not show its protected tests failing, "" when it does.

    "Failed as it must" is something the run has to show, not the absence of a pass: a
    candidate that tells the twin apart (the test's compiled constants, docs/verdict.md)
    could otherwise end the twin's process there (`os._exit`, `KeyboardInterrupt`, a hang
    until the timeout) or skip its tests, and pass every other run. So, when the run the
    twin followed left the collectors' record, the twin must leave one too; none of its
    protected tests may end other than failed (skipped is not failed); and at least one
    must be recorded failed (a run that stops at its first failure, `-x`, has the others
    unrecorded, which is no pass)."""
    tests = result.tests
    how = f"timed out ({result.timed_out})" if result.timed_out else f"exit {result.exit_code}"
    if tests is None:
        if not followed_had_record:
            return ""
        return f"it left no record of its tests ({how}), where the run before it did"
    if not protected:
        return ""
    outcomes = {test: tests.outcomes.get(test) for test in protected}
    for test, outcome in outcomes.items():
        if outcome is not None and outcome not in ("failed", "error", "passed"):
            return f"{test} ended {outcome} there, where it must fail"
    if not any(outcome in ("failed", "error") for outcome in outcomes.values()):
        shown = ", ".join(list(protected)[:3])
        return f"no outcome was recorded for {shown} ({how})"
    return ""


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
