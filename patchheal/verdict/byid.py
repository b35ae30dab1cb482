"""The verdict by test id, from the harness's structured results (never from printed output).

`fixed` needs every test that failed at reproduction to be observed passing
by id, no test failing, no fewer tests run, no test's function moved to
another file, no runner internals replaced, and no results file the
collectors did not sign. Where the baseline run had structured results and
this run has none, that alone is not a pass: the session was cut short or a
collector was bypassed. Pure functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from patchheal.models import TestResults
from patchheal.verdict.standins import children
from patchheal.verdict.trust import untrusted

_BAD = ("failed", "error")


def _listed(ids: Sequence[str], limit: int = 3) -> str:
    return ", ".join(ids[:limit]) + (f" (+{len(ids) - limit} more)" if len(ids) > limit else "")


def observed_passing(results: TestResults, test: str) -> bool:
    """`test` passed by id; for a collector that errored, its tests now ran and all passed."""
    outcome = results.outcomes.get(test)
    if outcome is not None:
        return outcome == "passed"
    held = children(results, test)
    return bool(held) and all(results.outcomes[t] == "passed" for t in held)


def why_not_passing(results: TestResults | None, baseline: TestResults | None) -> str | None:
    """Why the structured results do not show a pass; None when they do (or there are none)."""
    if results is None:
        if baseline is not None and baseline.runners:
            return (
                "the harness's test collectors reported no results although they did for the "
                "baseline run (the session was cut short or a collector was bypassed)"
            )
        return None
    if results.collector_errors:
        return untrusted(results)
    # Before a silent collector: a full or hostile results directory is why it went silent.
    if results.rejected:
        return (
            "results files were rejected (not written by a collector, or refused by the "
            f"bounded reader): {_listed(results.rejected)}"
        )
    silent = sorted(set(baseline.runners) - set(results.runners)) if baseline else []
    if silent:
        # Another channel's results (a JUnit file dropped into the directory) do
        # not stand in for the collector of the runner the baseline ran.
        return f"the {', '.join(silent)} collector reported nothing, unlike in the baseline run"
    if results.tampered:
        return (
            "test-runner internals were replaced or outcomes rewritten during the run: "
            f"{_listed(results.tampered)}"
        )
    bad = results.with_outcome(*_BAD)
    if bad:
        return f"{len(bad)} test(s) failed by id: {_listed(bad)}"
    if baseline is not None:
        expected = baseline.with_outcome(*_BAD)
        unseen = [t for t in expected if not observed_passing(results, t)]
        if unseen:
            got = [f"{t} ({results.outcomes.get(t, 'not run')})" for t in unseen]
            return f"the originally failing tests were not observed passing: {_listed(got)}"
        moved = _moved(results, baseline)
        if moved:
            return f"test functions were replaced by code from other files: {_listed(moved)}"
        if results.ran < baseline.ran:
            return f"fewer tests ran by id than in the baseline ({results.ran} < {baseline.ran})"
    if not results.with_outcome("passed"):
        return "no test passed by id"
    return None


def got_worse(before: TestResults | None, after: TestResults | None) -> list[str]:
    """Regression reasons by id: tests that passed before and do not pass now."""
    if before is None or not before.runners:
        return []
    if after is None:
        return ["the test collectors reported no results, unlike before"]
    why = []
    if after.collector_errors:
        why.append(untrusted(after) or "")
    if after.rejected or after.tampered:
        why.append(f"untrusted results: {_listed([*after.rejected, *after.tampered])}")
    unstable = set(before.unstable)
    lost = [
        t
        for t in before.with_outcome("passed")
        if after.outcomes.get(t) != "passed" and t not in unstable
    ]
    if lost:
        why.append(f"passed before, not now: {_listed(lost, 5)}")
    moved = _moved(after, before)
    if moved:
        why.append(f"test functions replaced by code from other files: {_listed(moved, 5)}")
    if after.ran < before.ran:
        why.append(f"fewer tests ran by id ({after.ran} < {before.ran})")
    return why


def _moved(results: TestResults, baseline: TestResults) -> list[str]:
    """Tests whose function is now defined in another file than in the baseline run: a
    stand-in the item calls instead of the test (collected, or swapped in by a fixture)."""
    return [
        f"{t} (now in {where}, was in {baseline.defined_in[t]})"
        for t, where in sorted(results.defined_in.items())
        if t in baseline.defined_in and baseline.defined_in[t] != where
    ]
