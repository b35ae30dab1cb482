"""What the failing tests executed, mapped onto the project's definitions and weighed.

The pytest collector traces each failing test of the reproduction run
(collectors/patchheal_trace.py): the project functions it called, in
order, with their call counts and call depth, and its traceback frames. That
is stronger evidence than names read from the test: a function the test never
ran cannot hold the bug it shows (short of a missing call, which the caller
then shows). The trace is written by the step's own process, so it is
untrusted: bounded by its model, matched only against files of the worktree,
and used to choose what to show, never to judge a patch.

Each executed definition gets a base weight, more when the test's own words
(its name, the identifiers and strings of its body) name it, and less the
deeper it ran below the test and the more often it was called: the code a test
is about is usually close to it, and a helper called a hundred times is rarely
where one behaviour went wrong. Much more when its code names a keyword argument
the test passes and few of its module's tests do (`prompt(..., hide_input=True)`
in the one test about hidden input): the option the test is about, read by the
one function that implements it, shared out among the executed definitions that
name it.

The contrast with the passing tests of the same run (Ochiai with one failing
test: 1 / sqrt(1 + passing tests that ran it)) is taken at the finest grain the
trace has: the least shared line of the function that the failing test ran,
when lines were traced, else the function itself. A constructor every test
calls is then still singled out by the branch only the failing test took, and
those rarest lines are kept to choose which part of a long function to show.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

from patchheal.evidence.symbols import Definition
from patchheal.models import TestTrace, TracedCall

_EXECUTED = 3.0
_AFFINITY = 2.5
# Why 15: a function that alone reads an option the test sets outranks any contrast (at
# most 6); measured in benchmarks/README.md (15 to 30 gave the same recall, 5 and 10 less).
_KEYWORD = 15.0
_DEPTH_DISCOUNT = 0.15
_CALLS_DISCOUNT = 0.25
_CONTRAST_POWER = 1.0  # 1: Ochiai; smaller trusts the contrast less
_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")
_STOP_WORDS = frozenset(
    {"test", "tests", "self", "cls", "the", "and", "for", "with", "not", "get", "set", "init"}
)


@dataclass(frozen=True)
class Executed:
    """An executed definition and the weight the trace gives it."""

    definition: Definition
    weight: float
    rare_lines: tuple[int, ...] = ()


def words(text: str) -> set[str]:
    """Lower-case words of identifiers and prose (`parse_args`, `ParseArgs` → parse, args)."""
    found = {w.lower() for w in _WORD.findall(text)}
    return {w for w in found if len(w) >= 3 and w not in _STOP_WORDS}


def calls_of(traces: Mapping[str, TestTrace], tests: Iterable[str]) -> list[TracedCall]:
    """The traced calls of `tests` (a parametrized id matches its cases), first test first."""
    out: list[TracedCall] = []
    for test in tests:
        for test_id, trace in traces.items():
            if test_id == test or test_id.startswith(test + "["):
                out += trace.functions
    return out


def frames_of(traces: Mapping[str, TestTrace], files: Sequence[str]) -> list[tuple[str, int]]:
    """Traceback frames (file, line) of the traces in files of the worktree, innermost first."""
    known = set(files)
    out: list[tuple[str, int]] = []
    for trace in traces.values():
        out += [(f.file, f.line) for f in reversed(trace.frames) if f.file in known]
    return out


def _match(call: TracedCall, defs: Sequence[Definition]) -> Definition | None:
    """The definition the traced code object is: by qualified name, else by its first line."""
    qualname = ".".join(p for p in call.name.split(".") if p != "<locals>")
    named = [d for d in defs if d.qualname == qualname]
    if len(named) == 1:
        return named[0]
    at = [d for d in named or defs if d.start == call.line]
    if at:
        return at[0]
    inside = [d for d in defs if d.start <= call.line <= d.end]
    return min(inside, key=lambda d: d.end - d.start) if inside else None


def _readers(keywords: Set[str], defs: Set[Definition]) -> dict[str, float]:
    """Per keyword the test passes, 1 / the executed definitions whose code names it:
    `hide_input=True` ties the test to the one function that reads `hide_input`, a
    keyword twenty functions name ties it to none of them in particular."""
    out: dict[str, float] = {}
    for keyword in keywords:
        readers = sum(1 for d in defs if keyword in d.refers_to)
        if readers:
            out[keyword] = 1.0 / readers
    return out


def passed_tests(traces: Mapping[str, TestTrace]) -> int:
    """Passing tests of the run the traces were contrasted with (0: no contrast)."""
    return max((t.passed_tests for t in traces.values()), default=0)


def weigh(
    calls: Sequence[TracedCall],
    by_file: Mapping[str, list[Definition]],
    test_words: set[str],
    passed: int = 0,
    keywords: Set[str] = frozenset(),
) -> list[Executed]:
    """Each executed definition once, with its weight (see the module docstring)."""
    if not calls:
        return []
    top = min(c.depth for c in calls)
    seen: dict[Definition, float] = {}
    rare: dict[Definition, tuple[int, ...]] = {}
    matched = [(call, d) for call in calls if (d := _match(call, by_file.get(call.file, [])))]
    readers = _readers(keywords, {d for _call, d in matched})
    for call, d in matched:
        depth = max(call.depth - top, 0)
        weight = _EXECUTED / (1.0 + _DEPTH_DISCOUNT * depth)
        weight /= 1.0 + _CALLS_DISCOUNT * math.log2(max(call.calls, 1))
        if passed:
            shared = call.passed_by if call.line_passed_by is None else call.line_passed_by
            weight *= (2.0 / math.sqrt(1.0 + min(shared, passed))) ** _CONTRAST_POWER
        weight += _AFFINITY * len(words(d.qualname) & test_words)
        weight += _KEYWORD * sum(readers[k] for k in keywords & d.refers_to)
        if weight > seen.get(d, -1.0):
            seen[d] = weight
            rare[d] = tuple(line for line in call.rare_lines if d.start <= line <= d.end)
    return [Executed(d, w, rare[d]) for d, w in seen.items()]
