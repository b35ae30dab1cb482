"""Localization: from a failing test to the code it exercises, ranked and packed into a budget.

A model that sees only the test must guess the code under test. Here the test
function is read with `ast` for the names it uses and the names its module
imports; the project's source files (those packages first) are indexed for
their functions and classes; each definition is scored by how it is reached:
imported by name, used by the test, named in the failure message, on a
traceback frame, touched by the change that broke the job, executed by the
failing test in the reproduction run (its trace, see executed.py), or referred
to by a definition already chosen. Files are ranked by their definitions' scores and
packed into a token budget: a file that fits is shown whole (the model then
has exact SEARCH lines for every part of it), a larger one by its highest
scoring definitions. Nothing is run or imported here (the trace comes from the
harness's run), no network is used, and the work stops at a deadline with what
it has.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from patchheal.evidence.executed import Executed, weigh, words
from patchheal.evidence.symbols import (
    Definition,
    TestUsage,
    index_definitions,
    module_files,
    parse,
    suffix_index,
    test_usage,
)
from patchheal.evidence.tokens import count_tokens
from patchheal.models import TracedCall

# Weights of the ways a definition is reached (why: an explicit import names the code
# under test; a frame or a breaking change is where it ran or changed; a bare use may
# hit a homonym, so it is split between the definitions sharing the name).
_IMPORTED = 6.0
_FRAME = 8.0
_CHANGED = 5.0
_USED = 3.0
_MESSAGE = 2.0
_HOP = 1.0
_NAMESAKE = 6.0  # a file-level bonus, as strong as an explicit import
# With a trace: executed definitions outrank any reading-based score, the rest is discounted.
_TRACE_SCALE = 10.0
_UNEXECUTED_SHARE = 0.2
_HEADER_SHARE = 0.5  # a module's header against its best definition
_MAX_HOMONYMS = 12
_MAX_FILES_INDEXED = 1500
# Why 250: the functions fixes touch in click run to 130-170 lines (`Option.__init__`,
# `Context.__init__`); cut at 150, a fix in their last lines was never shown (measured
# in benchmarks/README.md; 400 gained nothing more, and eliding docstrings lost more).
_MAX_DEF_LINES = 250
_CLASS_HEADER_LINES = 40
_RARE_MARGIN = 20  # lines shown above the first line only the failing test ran
_WHOLE_FILE_SHARE = 0.6
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_TEST_PATH = re.compile(r"(?:^|/)(?:tests?|testing)/|(?:^|/)test_[^/]*\.py$|_test\.py$|conftest")
_BUILTIN_NOISE = frozenset(
    {"self", "cls", "True", "False", "None", "len", "str", "int", "dict", "list", "set", "print"}
)


@dataclass(frozen=True)
class Span:
    """Lines `start`..`end` (1-based, inclusive) of a file, and why they were chosen."""

    file: str
    start: int
    end: int
    score: float
    whole_file: bool = False


@dataclass
class Localization:
    """Ranked spans of the code under test, and how the search went."""

    spans: list[Span] = field(default_factory=list)
    ranked_files: list[tuple[str, float]] = field(default_factory=list)
    test_span: Span | None = None
    timed_out: bool = False


def is_test_file(path: str) -> bool:
    return bool(_TEST_PATH.search(path))


def _source_files(
    files: Sequence[str], usages: Sequence[TestUsage], extra: Sequence[str]
) -> list[str]:
    """The project's Python sources, the packages the tests import first."""
    sources = [f for f in files if f.endswith(".py") and not is_test_file(f)]
    by_suffix = suffix_index(sources)
    roots: set[str] = set()
    for usage in usages:
        for module in usage.imported_modules:
            for hit in module_files(module.split(".")[0], by_suffix):
                roots.add(str(PurePosixPath(hit).parent) if hit.endswith("__init__.py") else hit)
    first = [f for f in sources if any(f == r or f.startswith(r + "/") for r in roots)]
    first += [f for f in extra if f in by_suffix.get(f, [])]
    rest = [f for f in sources if f not in set(first)]
    return list(dict.fromkeys(first + rest))[:_MAX_FILES_INDEXED]


def _named_after_tests(usages: Sequence[TestUsage], sources: Sequence[str]) -> list[str]:
    """Sources a test file is named after (pytest's convention: tests/test_x.py tests x.py)."""
    stems = set()
    for usage in usages:
        stem = PurePosixPath(usage.file).stem
        stems.add(stem.removeprefix("test_").removesuffix("_test").removesuffix("_tests"))
    return [f for f in sources if PurePosixPath(f).stem in stems]


def _trace_first(scorer: _Scorer, ran: Sequence[Executed]) -> None:
    """With a trace, what the test executed comes first: a definition it never ran cannot
    hold the bug it shows, so reading-based scores only order the executed ones (and keep
    the rest, discounted, for what a trace cannot show: a call that is missing)."""
    static = dict(scorer.scores)
    for d in static:
        scorer.scores[d] = static[d] * _UNEXECUTED_SHARE
    for found in ran:
        scorer.scores[found.definition] = found.weight * _TRACE_SCALE + static.get(
            found.definition, 0.0
        )


def _test_words(failing_tests: Sequence[str], usages: Sequence[TestUsage]) -> set[str]:
    """The words a test is about: its name's and the identifiers of its body."""
    found: set[str] = set()
    for test in failing_tests:
        found |= words(test.partition("::")[2].split("[")[0])
    for usage in usages:
        if usage.span is not None:
            found |= words(" ".join(usage.used))
    return found


def _containing(defs: Sequence[Definition], line: int) -> Definition | None:
    inside = [d for d in defs if d.start <= line <= d.end]
    return min(inside, key=lambda d: d.end - d.start) if inside else None


@dataclass
class _Scorer:
    by_name: dict[str, list[Definition]]
    by_file: dict[str, list[Definition]]
    by_suffix: dict[str, list[str]]
    scores: dict[Definition, float] = field(default_factory=lambda: defaultdict(float))

    def add_name(self, name: str, weight: float, within: Sequence[str] = ()) -> None:
        defs = self.by_name.get(name, [])
        if within:
            defs = [d for d in defs if d.file in within] or defs
        if name in _BUILTIN_NOISE or not defs or len(defs) > _MAX_HOMONYMS:
            return
        for d in defs:
            self.scores[d] += weight / len(defs)

    def add_line(self, file: str, lines: Sequence[int], weight: float) -> None:
        for line in lines:
            d = _containing(self.by_file.get(file, []), line)
            if d is not None:
                self.scores[d] += weight

    def usage(self, usage: TestUsage) -> None:
        for local, (module, name) in usage.imported_names.items():
            del local
            self.add_name(name, _IMPORTED, module_files(module, self.by_suffix))
        for name in usage.used:
            self.add_name(name, _USED)

    def members(self, used: set[str]) -> None:
        """A chosen class's constructor and the methods the test calls by name: a class is
        exercised through them, and a big class is shown only by its header otherwise."""
        for d, score in list(self.scores.items()):
            if not d.is_class or score <= 0:
                continue
            for m in self.by_file.get(d.file, []):
                direct = m.qualname.rpartition(".")[0] == d.qualname
                if direct and (
                    m.name in {"__init__", "__post_init__", "__call__"} or m.name in used
                ):
                    self.scores[m] += score / 2

    def hop(self, top: int = 8) -> None:
        """Definitions the best ones refer to: the code the test exercises indirectly."""
        best = sorted(self.scores.items(), key=lambda kv: (-kv[1], kv[0].file, kv[0].start))[:top]
        for d, _score in best:
            for name in d.refers_to:
                if len(self.by_name.get(name, [])) <= 6:
                    self.add_name(name, _HOP)


def _def_span(
    d: Definition,
    score: float,
    by_file: Mapping[str, list[Definition]],
    rare_lines: Sequence[int] = (),
) -> Span:
    """A definition's lines; a big class shows its header (its methods are scored apart),
    a long function the part around the lines only the failing test ran, if known."""
    end = d.end
    if d.is_class and d.end - d.start + 1 > _MAX_DEF_LINES:
        children = [c.start for c in by_file[d.file] if c.start > d.start and c.end <= d.end]
        end = min([d.start + _CLASS_HEADER_LINES, *(c - 1 for c in children[:1])])
    start = d.start
    if not d.is_class and rare_lines and max(rare_lines) >= d.start + _MAX_DEF_LINES:
        start = max(d.start, min(min(rare_lines) - _RARE_MARGIN, d.end - _MAX_DEF_LINES + 1))
    return Span(d.file, start, min(end, start + _MAX_DEF_LINES - 1), score)


def _header(file: str, by_file: Mapping[str, list[Definition]]) -> int | None:
    """The last line before a module's first definition (at most 60 lines), if any."""
    starts = [d.start for d in by_file.get(file, [])]
    if not starts or min(starts) <= 1:
        return None
    return min(min(starts) - 1, 60)


def _text(worktree: Path, span: Span, cache: dict[str, list[str]]) -> str:
    if span.file not in cache:
        try:
            cache[span.file] = (worktree / span.file).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            cache[span.file] = []
    return "\n".join(cache[span.file][span.start - 1 : span.end])


def _pack(
    worktree: Path, units: list[Span], budget: int, cache: dict[str, list[str]]
) -> list[Span]:
    """The highest-scoring spans that fit `budget` tokens, nothing shown twice."""
    chosen: list[Span] = []
    left = budget
    # Ties are broken by place, so the same tree gives the same context on every run.
    for unit in sorted(units, key=lambda s: (-s.score, s.file, s.start, -s.end)):
        covered = any(
            c.file == unit.file and c.start <= unit.start and unit.end <= c.end for c in chosen
        )
        if covered or left < 50:
            continue
        cost = count_tokens(_text(worktree, unit, cache)) + 15  # + the excerpt's header
        if cost <= left:
            chosen.append(unit)
            left -= cost
    return chosen


def localize(
    worktree: Path,
    files: Sequence[str],
    *,
    failing_tests: Sequence[str],
    frames: Sequence[tuple[str, int]] = (),
    message: str = "",
    changed: Mapping[str, Sequence[int]] | None = None,
    executed: Sequence[TracedCall] = (),
    passed_tests: int = 0,
    budget_tokens: int = 4000,
    deadline_seconds: float = 5.0,
) -> Localization:
    """The code under test for `failing_tests`, ranked, within `budget_tokens` tokens.

    `executed` is what the failing tests ran (their traces, in call order), contrasted
    with `passed_tests` passing tests of the same run; `frames` are (file, line) of
    traceback frames, innermost first."""
    started = time.monotonic()
    result = Localization()
    changed = changed or {}
    usages = [u for u in (test_usage(worktree, t) for t in failing_tests[:5]) if u is not None]
    spanned = [u for u in usages if u.span is not None]
    if spanned and spanned[0].span is not None:
        start, end = spanned[0].span
        result.test_span = Span(spanned[0].file, start, min(end, start + _MAX_DEF_LINES - 1), 0.0)
    known = set(files)
    extra = [f for f, _ in frames] + list(changed)
    extra += list(dict.fromkeys(c.file for c in executed if c.file in known))
    by_name: dict[str, list[Definition]] = defaultdict(list)
    by_file: dict[str, list[Definition]] = {}
    sources = _source_files(files, usages, extra)
    for rel in sources:
        if time.monotonic() - started > deadline_seconds:
            result.timed_out = True
            break
        tree = parse(worktree / rel)
        defs = index_definitions(rel, tree) if tree is not None else []
        by_file[rel] = defs
        for d in defs:
            by_name[d.name].append(d)
    scorer = _Scorer(by_name, by_file, suffix_index(list(by_file)))
    for usage in usages:
        scorer.usage(usage)
    for name in set(_IDENT.findall(message[:20000])):
        scorer.add_name(name, _MESSAGE)
    for file, line in frames:
        scorer.add_line(file, [line], _FRAME)
    for file, lines in changed.items():
        scorer.add_line(file, lines, _CHANGED)
    scorer.members(set().union(*(u.used for u in usages)) if usages else set())
    scorer.hop()
    keywords = set().union(*(u.keywords for u in usages)) if usages else set()
    ran = weigh(executed, by_file, _test_words(failing_tests, usages), passed_tests, keywords)
    if ran:
        _trace_first(scorer, ran)
    file_scores: dict[str, float] = defaultdict(float)
    for d, score in scorer.scores.items():
        file_scores[d.file] += score
    for file in _named_after_tests(usages, list(by_file)):
        file_scores[file] += _NAMESAKE
    result.ranked_files = sorted(file_scores.items(), key=lambda kv: (-kv[1], kv[0]))
    cache: dict[str, list[str]] = {}
    units: list[Span] = []
    for rank, (file, score) in enumerate(result.ranked_files[:15]):
        length = len(_text(worktree, Span(file, 1, 10**9, 0), cache).splitlines())
        whole = Span(file, 1, length, score + 1000.0 * (rank == 0), whole_file=True)
        share = _WHOLE_FILE_SHARE if rank == 0 else _WHOLE_FILE_SHARE / 2
        if count_tokens(_text(worktree, whole, cache)) <= budget_tokens * share:
            units.append(whole)
    rare = {found.definition: found.rare_lines for found in ran}
    for d, score in scorer.scores.items():
        units.append(_def_span(d, score, by_file, rare.get(d, ())))
    best_in: dict[str, float] = defaultdict(float)
    for d, score in scorer.scores.items():
        best_in[d.file] = max(best_in[d.file], score)
    for file, score in result.ranked_files[:8]:
        header = _header(file, by_file)
        if header is not None:  # imports and module constants: what a fix often edits too
            units.append(Span(file, 1, header, min(score / 4, best_in[file] * _HEADER_SHARE)))
    result.spans = _pack(worktree, units, budget_tokens, cache)
    return result
