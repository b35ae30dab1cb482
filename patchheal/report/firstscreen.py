"""The first screen of a report: what failed, where the cause was, what the fix changed,
why it is believed, and what the proposer said, in that order (issue 34).

For a job that is not fixed the first screen is its classification, the evidence for it
and the next action, then what failed. Built from the report alone, so the Markdown,
HTML and JSON renderings say the same things in the same order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from patchheal.evidence.cause import diffstat
from patchheal.models import AttemptRecord, Failure, Outcome
from patchheal.report.model import CauseSite, JobReport, StepReport

# A diff longer than this many lines is folded on the first screen.
DIFF_FOLD_LINES = 40
MESSAGE_LIMIT = 300
EXPLANATION_LIMIT = 600
MAX_TESTS = 3
# pytest's assertion rewriting explains a comparison on the lines after it.
_WHERE = re.compile(r"^[+\s]*(where|and)\s+(.*)$")


@dataclass(frozen=True)
class Failed:
    """One failing test (or a step with no test ids) and its error, one line."""

    test: str
    step: str
    error: str


@dataclass(frozen=True)
class FirstScreen:
    fixed: bool
    failed: tuple[Failed, ...]
    where: tuple[str, ...] = ()
    diffstat: tuple[tuple[str, int, int], ...] = ()
    diff: str = ""
    fold_diff: bool = False
    why: tuple[str, ...] = ()
    explanation: tuple[tuple[str, str], ...] = ()
    """(who, what they said) per fixed step's proposer that gave an explanation."""
    classification: str = ""
    evidence: tuple[str, ...] = ()
    next_action: str = ""

    @property
    def diff_lines(self) -> int:
        return len(self.diff.splitlines())


def _limit(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def one_line_error(error_type: str, message: str) -> str:
    """A failure's message as one readable line: its first line, pytest's `where …`
    explanations in parentheses, and `…` when more lines were left out."""
    lines = [line.strip() for line in message.replace("\r\n", "\n").split("\n") if line.strip()]
    if not lines:
        return error_type
    first, rest = lines[0], lines[1:]
    wheres = [f"{m[1]} {m[2]}" for line in rest if (m := _WHERE.match(line))]
    text = first
    if error_type and not first.startswith(error_type):
        text = f"{error_type}: {first}"
    if wheres:
        text += f" ({'; '.join(wheres)})"
    if len(wheres) < len(rest):
        text += " …"
    return _limit(text, MESSAGE_LIMIT)


def _owner(failure: Failure) -> str:
    """The failing test the recorded message belongs to: the parsers keep one failure's
    message and start its summary with that test's id. "" when the summary does not say."""
    first = failure.summary.lstrip().partition("\n")[0].strip()
    return first if first in failure.failing_tests else ""


def _step_failed(name: str, failure: Failure) -> list[Failed]:
    """One row per shown test. A failure records one test's message, so only that test
    carries it: another test's row must not claim an error it did not raise."""
    error = one_line_error(failure.error_type, failure.message)
    tests = failure.failing_tests
    if len(tests) <= 1:
        return [Failed(test, name, error) for test in tests or ("",)]
    owner = _owner(failure)
    if not owner:
        rows = [Failed(test, name, "") for test in tests[:MAX_TESTS]]
        return [*rows, Failed("", f"{name}, the error of one of them", error)]
    others = [test for test in tests if test != owner][: MAX_TESTS - 1]
    return [Failed(owner, name, error)] + [Failed(test, name, "") for test in others]


def _failed(report: JobReport) -> tuple[Failed, ...]:
    out: list[Failed] = []
    for step in report.steps:
        if step.failure is None:
            continue
        tests = step.failure.failing_tests
        out += _step_failed(step.name, step.failure)
        if len(tests) > MAX_TESTS:
            more = f"{step.name}: and {len(tests) - MAX_TESTS} more failing test(s)"
            out.append(Failed("", more, ""))
    return tuple(out)


def _site(site: CauseSite) -> str:
    if site.executed is None:
        ran = "no trace of the failing test was recorded at reproduction"
    elif site.executed:
        ran = "the failing test executed it at reproduction (traced)"
    else:
        ran = "the failing test did not execute it at reproduction (traced)"
    if not site.file.endswith(".py"):
        # Only Python is read for definitions (evidence/symbols.py); say so, not "module level".
        return f"`{site.file}` (its functions are not mapped: only Python files are)"
    where = f"`{site.file}` (module level)"
    if site.function:
        where = f"`{site.function}` in `{site.file}`"
    return f"{where}: {ran}"


def _fix_of(step: StepReport) -> AttemptRecord | None:
    fixed = [a for a in step.attempts if a.outcome is Outcome.FIXED]
    return fixed[-1] if fixed else None


def _where(report: JobReport) -> tuple[str, ...]:
    out: list[str] = []
    for step in report.steps:
        if step.cause_sites:
            out += [_site(s) for s in step.cause_sites]
        elif (fix := _fix_of(step)) is not None:
            # A report written before cause sites were recorded: the files are all it has.
            files = fix.touched_files
            out += [f"`{f}` (changed by the fix; functions not recorded)" for f in files]
    return tuple(out)


def split_verdict(reason: str) -> list[str]:
    """A verdict's reason, one held check per line: its lines, and each line's
    `; `-separated clauses (never inside a `code span`)."""
    out: list[str] = []
    for line in reason.replace("\r\n", "\n").split("\n"):
        parts = re.split(r"(`[^`\n]*`)", line)
        clause = ""
        for i, part in enumerate(parts):
            if i % 2:
                clause += part
                continue
            pieces = part.split("; ")
            clause += pieces[0]
            for piece in pieces[1:]:
                out.append(clause)
                clause = piece
        out.append(clause)
    return [c.strip() for c in out if c.strip()]


def _why(report: JobReport) -> tuple[str, ...]:
    out: list[str] = []
    for step in report.steps:
        if (fix := _fix_of(step)) is not None:
            out += split_verdict(fix.reason)
    return tuple(dict.fromkeys(out))


def _explanation(report: JobReport) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for step in report.steps:
        fix = _fix_of(step)
        if fix is not None and fix.rationale.strip():
            who = fix.proposer or "the proposer"
            if fix.label:
                who += f" ({fix.label})"
            out.append((who, _limit(" ".join(fix.rationale.split()), EXPLANATION_LIMIT)))
    return tuple(out)


def _unfixed(report: JobReport) -> tuple[str, tuple[str, ...]]:
    for step in report.steps:
        if step.status != "fixed" and step.classification is not None:
            return step.classification.failure_class.value, step.classification.evidence
    return "", ()


def first_screen(report: JobReport, runbook: tuple[str, ...]) -> FirstScreen:
    """What a person reads first, for this report's status."""
    failed = _failed(report)
    if report.status == "fixed":
        return FirstScreen(
            fixed=True,
            failed=failed,
            where=_where(report),
            diffstat=tuple(diffstat(report.final_diff)),
            diff=report.final_diff,
            fold_diff=len(report.final_diff.splitlines()) > DIFF_FOLD_LINES,
            why=_why(report),
            explanation=_explanation(report),
        )
    classification, evidence = _unfixed(report)
    return FirstScreen(
        fixed=False,
        failed=failed,
        classification=classification or "unclassified",
        evidence=evidence,
        next_action=runbook[0] if runbook else "",
    )


def as_json(screen: FirstScreen) -> dict[str, Any]:
    """The first screen for report.json, keys in reading order."""
    failed = [{"test": f.test, "step": f.step, "error": f.error} for f in screen.failed]
    if not screen.fixed:
        return {
            "classification": screen.classification,
            "evidence": list(screen.evidence),
            "next_action": screen.next_action,
            "what_failed": failed,
        }
    return {
        "what_failed": failed,
        "where_the_cause_was": list(screen.where),
        "what_the_fix_changed": {
            "diffstat": [{"file": f, "added": a, "removed": r} for f, a, r in screen.diffstat],
            "diff_lines": screen.diff_lines,
        },
        "why_it_is_believed": list(screen.why),
        "proposer_explanation": [{"by": who, "text": text} for who, text in screen.explanation],
    }
