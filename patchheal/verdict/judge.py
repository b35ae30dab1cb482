"""The verdict: a pure function of what the harness captured, cross-checked.

A step passes only when every signal agrees: it exited 0 without a timeout,
and, for a test step, the test runner's own summary shows at least one pass
and no failure or error, the originally failing tests were not skipped or
deselected away, and no fewer tests ran than in the baseline. A patch that
prints its own "N passed" line but exits non-zero is not believed; of several
summaries in the output the last one (the runner's own, printed at the end)
counts. No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from patchheal.models import CommandResult, TestCounts, TestResults, Verdict
from patchheal.verdict.byid import got_worse, why_not_passing

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ITEM = r"\d+ [a-z][a-z-]*(?: [a-z]+)?"
_PYTEST_SUMMARY = re.compile(
    rf"^=*\s*(?P<items>{_ITEM}(?:, {_ITEM})*|no tests ran)"
    r"\s+in\s+[\d.]+\s*s(?:econds)?(?:\s*\([^)]*\))?\s*=*$"
)
_PYTEST_WORDS = {
    "passed": "passed",
    "failed": "failed",
    "error": "errors",
    "errors": "errors",
    "skipped": "skipped",
    "deselected": "deselected",
    "xfailed": "xfailed",
}
_COLLECTED = re.compile(r"^collected (\d+) items?\b")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s$")
_UNITTEST_RESULT = re.compile(r"^(OK|FAILED|NO TESTS RAN)(?: \((.*)\))?$")
_UNITTEST_WORDS = {
    "failures": "failed",
    "errors": "errors",
    "skipped": "skipped",
    "expected failures": "xfailed",
    "unexpected successes": "failed",
}
_FAILED_LINE = re.compile(
    r"^(?:(?:FAILED|ERROR) (?P<pytest>\S+::\S+|\S+\.py)(?: - .*)?"
    r"|(?P<verbose>\S+::\S+) (?:FAILED|ERROR)\b.*"
    r"|(?:FAIL|ERROR): \w+ \((?P<unittest>[\w.]+)\).*)$"
)
_NOT_RUN = re.compile(r"\b(?:SKIPPED|SKIP|XFAIL|XPASS|skipped|expected failure|deselected)\b")
_PYTEST_EXIT = {
    2: "the test run was interrupted",
    3: "the test runner hit an internal error",
    4: "the test runner was called wrongly (usage error)",
    5: "no tests ran",
}


def _lines(output: str) -> list[str]:
    return [line.strip() for line in _ANSI.sub("", output).replace("\r", "\n").split("\n")]


def parse_counts(output: str) -> TestCounts:
    """Counts from the last pytest or unittest summary in `output`; all None if there is none."""
    lines = _lines(output)
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        match = _PYTEST_SUMMARY.match(line)
        if match:
            return _pytest_counts(match.group("items"), lines[:index])
        result = _UNITTEST_RESULT.match(line)
        if result:
            ran = _unittest_ran(lines, index)
            if ran is not None:
                return _unittest_counts(ran, result.group(2) or "")
    return TestCounts()


def _pytest_counts(items: str, before: list[str]) -> TestCounts:
    counts = dict.fromkeys(("passed", "failed", "errors", "skipped", "deselected", "xfailed"), 0)
    if items != "no tests ran":
        for item in items.split(", "):
            number, _, word = item.partition(" ")
            if word in _PYTEST_WORDS:
                counts[_PYTEST_WORDS[word]] += int(number)
    collected = next(
        (int(m.group(1)) for line in reversed(before) if (m := _COLLECTED.match(line))), None
    )
    return TestCounts(**counts, collected=collected)


def _unittest_ran(lines: list[str], index: int) -> int | None:
    """The `Ran N tests` line just above a unittest result line (blank lines between)."""
    for line in reversed(lines[max(0, index - 3) : index]):
        match = _UNITTEST_RAN.match(line)
        if match:
            return int(match.group(1))
        if line:
            return None
    return None


def _unittest_counts(ran: int, detail: str) -> TestCounts:
    counts = dict.fromkeys(("failed", "errors", "skipped", "xfailed"), 0)
    for part in filter(None, (p.strip() for p in detail.split(","))):
        word, _, number = part.partition("=")
        if word in _UNITTEST_WORDS and number.isdigit():
            counts[_UNITTEST_WORDS[word]] += int(number)
    passed = max(0, ran - sum(counts.values()))
    return TestCounts(**counts, passed=passed, deselected=0, collected=ran)


def failing_tests(output: str) -> tuple[str, ...]:
    """Failing or erroring test ids reported by pytest (summary or -v lines) or unittest."""
    found: dict[str, None] = {}
    for line in _lines(output):
        match = _FAILED_LINE.match(line)
        if match:
            found[match.group("pytest") or match.group("verbose") or match.group("unittest")] = None
    return tuple(found)


def _reported(counts: TestCounts) -> bool:
    return any(value is not None for value in counts.model_dump().values())


def _ran(counts: TestCounts) -> int:
    return (counts.passed or 0) + (counts.failed or 0) + (counts.errors or 0)


def _set_aside(counts: TestCounts) -> int:
    return (counts.skipped or 0) + (counts.deselected or 0) + (counts.xfailed or 0)


def _describe(counts: TestCounts) -> str:
    fields = ("failed", "errors", "passed", "skipped", "deselected", "xfailed")
    parts = [f"{getattr(counts, f)} {f}" for f in fields if getattr(counts, f)]
    # As pytest says it: "1 error", "2 errors".
    parts = ["1 error" if part == "1 errors" else part for part in parts]
    return ", ".join(parts) or "no tests ran"


def _short_name(test_id: str) -> str:
    return re.split(r"::|\.", test_id)[-1]


def _set_aside_tests(lines: list[str], expected: Sequence[str]) -> list[str]:
    """Expected tests that the output reports as skipped, xfailed or deselected."""
    hits = []
    for test in expected:
        unittest_form = f"{_short_name(test)} ("
        if any((test in line or unittest_form in line) and _NOT_RUN.search(line) for line in lines):
            hits.append(test)
    return hits


def _mentioned(lines: list[str], test: str) -> bool:
    name = _short_name(test)
    return any(test in line or re.search(rf"\b{re.escape(name)}\b", line) for line in lines)


def _describe_results(tests: TestResults | None) -> str:
    if tests is None:
        return "no tests ran"
    passed = len(tests.with_outcome("passed"))
    return f"{passed} passed by id ({', '.join(tests.runners)})"


def judge(
    result: CommandResult, *, baseline: Verdict | None = None, expected_tests: Sequence[str] = ()
) -> Verdict:
    """Whether a step run passed, and a short sentence saying why."""
    counts = parse_counts(result.output)
    failing = failing_tests(result.output)
    if result.tests is not None:
        failing = tuple(dict.fromkeys((*result.tests.with_outcome("failed", "error"), *failing)))

    def verdict(passed: bool, reason: str) -> Verdict:
        return Verdict(
            passed=passed, reason=reason, counts=counts, failing_tests=failing, tests=result.tests
        )

    code = result.exit_code
    if result.timed_out == "wall":
        return verdict(False, f"timed out after {result.duration_seconds:.0f} s (wall clock)")
    if result.timed_out == "idle":
        return verdict(False, "killed after printing nothing for too long (idle timeout)")
    if result.oom_killed:
        return verdict(False, "killed for running out of memory")
    if result.stopped:
        return verdict(False, f"stopped: {result.stopped}")
    if code is None:
        return verdict(False, "killed before it exited")
    prior = baseline.tests if baseline is not None else None
    test_step = (
        _reported(counts)
        or result.tests is not None
        or (baseline is not None and (_reported(baseline.counts) or prior is not None))
    )
    if code != 0:
        if code in _PYTEST_EXIT and test_step:
            return verdict(False, f"{_PYTEST_EXIT[code]} (exit code {code})")
        if _reported(counts) and not counts.failed and not counts.errors and counts.passed:
            return verdict(
                False,
                f"exited with code {code} although its output claims {_describe(counts)}; "
                "a printed summary is not believed over the exit code",
            )
        if _reported(counts):
            return verdict(False, f"{_describe(counts)} (exit code {code})")
        return verdict(False, f"exited with code {code}")
    if not test_step:
        return verdict(True, "exited with code 0")
    by_id = why_not_passing(result.tests, prior)
    if by_id is not None:
        return verdict(False, f"exited 0 but {by_id}")
    if not _reported(counts) and result.tests is None:
        return verdict(False, "exited 0 but printed no test summary, unlike the baseline run")
    if not _reported(counts):
        return verdict(True, _describe_results(result.tests))
    if counts.failed or counts.errors:
        return verdict(False, f"exited 0 but reports {_describe(counts)}; that is not a pass")
    if not counts.passed:
        return verdict(False, f"no test passed ({_describe(counts)})")
    lines = _lines(result.output)
    set_aside = _set_aside_tests(lines, expected_tests)
    if set_aside:
        return verdict(
            False, f"the originally failing {', '.join(set_aside)} was skipped, not passed"
        )
    if baseline is not None and _reported(baseline.counts):
        now, before = _ran(counts), _ran(baseline.counts)
        absent = [t for t in expected_tests if not _mentioned(lines, t)]
        more_aside = _set_aside(counts) > _set_aside(baseline.counts)
        if now < before and (absent or more_aside or not expected_tests):
            return verdict(
                False,
                f"fewer tests ran than in the baseline ({now} < {before}: {_describe(counts)} "
                f"against {_describe(baseline.counts)}), so the failing tests may not have run",
            )
    return verdict(True, _describe(counts))


def worse(before: Verdict, after: Verdict) -> tuple[bool, str]:
    """Whether regression steps got worse from `before` to `after`, and why."""
    if before.passed and not after.passed:
        return True, f"passed before, fails now: {after.reason}"
    why: list[str] = []
    b, a = before.counts, after.counts
    if (a.failed or 0) > (b.failed or 0):
        why.append(f"more failures ({a.failed} > {b.failed or 0})")
    if (a.errors or 0) > (b.errors or 0):
        why.append(f"more errors ({a.errors} > {b.errors or 0})")
    if _reported(b) and (a.passed or 0) < (b.passed or 0):
        why.append(f"fewer tests passed ({a.passed or 0} < {b.passed})")
    why += got_worse(before.tests, after.tests)
    new = [t for t in after.failing_tests if t not in before.failing_tests]
    if new:
        why.append(f"newly failing: {', '.join(new[:5])}" + (" ..." if len(new) > 5 else ""))
    if why:
        return True, "; ".join(why)
    return False, f"no worse than before ({_describe(a) if _reported(a) else after.reason})"
