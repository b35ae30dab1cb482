"""The policy gate: what a candidate may not do, whichever proposer wrote it.

Checked before a candidate runs, from the diff (and the pre-patch files when
the caller can read them): paths outside the worktree, protected paths (CI
config, lockfiles...), binaries and build outputs (artifacts.py), test
tampering (deleting tests, skipping them, removing or weakening assertions,
steering test collection), runner tampering anywhere
in the patch (tampering.py: exiting at import, patching the test framework,
scripts that swallow the exit code), and size. The gate judges the change, not the intent: a
"fix" that makes a failing test stop failing by editing the test is refused
unless the job allows test changes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import pathspec
from pydantic import BaseModel, ConfigDict

from patchheal.config import PolicySpec
from patchheal.errors import NotADiff
from patchheal.gates.artifacts import artifact_reasons
from patchheal.gates.tampering import post_patch_text, runner_tampering
from patchheal.gates.testfiles import changed_lines, changed_tests
from patchheal.intake import rawspec
from patchheal.workspace import diffs

if TYPE_CHECKING:
    from unidiff.patch import PatchedFile

RULES = (
    "not_a_diff",
    "outside_worktree",
    "protected_path",
    "artifact",
    "test_tampering",
    "runner_tampering",
    "size",
)

# (pattern, what it does): each match an added line brings beyond the removed ones is refused.
_SKIPS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), why)
    for p, why in (
        (r"\bpytest\.mark\.(?:skip|skipif|xfail)\b", "adds a skip/xfail marker"),
        (r"\bpytest\.(?:skip|xfail|importorskip)\s*\(", "adds a pytest skip/xfail call"),
        (r"\bunittest\.(?:skip\w*|expectedFailure)\b", "adds a unittest skip"),
        (r"^\s*@(?:skip\w*|expectedFailure)\b", "adds a skip decorator"),
        (r"\bskipTest\s*\(|\bSkipTest\b", "adds a skipTest"),
        (r"\b(?:it|test|describe)\.(?:skip|todo|only)\s*\(", "skips tests (.skip/.todo/.only)"),
        (r"^\s*(?:xit|xtest|xdescribe)\s*\(", "disables a test (xit/xtest/xdescribe)"),
        (r"\b__test__\s*=\s*False\b", "turns off test collection (__test__ = False)"),
        (r"\bcollect_ignore(?:_glob)?\b", "hides tests from collection (collect_ignore)"),
        (
            # Every hook on a test's outcome path (collectors/patchheal_pluginwatch.py lists
            # the same at run time, where names assembled by the code are seen too); a new
            # test's fixture, `pytest_generate_tests` and `pytest_configure` stay free.
            r"\bpytest_(?:collection(?:_modifyitems|_finish)?|ignore_collect|deselected|"
            r"runtest_\w+|runtestloop|pyfunc_call|pycollect_\w+|collect_file|"
            r"make_collect_report|itemcollected|collectreport|fixture_setup|"
            r"fixture_post_finalizer|exception_interact|sessionfinish|terminal_summary|"
            r"report_(?:teststatus|to_serializable|from_serializable))\b",
            "hooks into how tests run or are reported",
        ),
        (r"\bos\._exit\s*\(|\bsys\.exit\s*\(", "forces the test process's exit code"),
    )
)
_CONFIG_FILES = re.compile(
    r"(?:^|/)(?:pytest\.ini|tox\.ini|setup\.cfg|setup\.py|pyproject\.toml|package\.json|"
    r"jest\.config\.\w+|vitest\.config\.\w+|\.mocharc\.\w+)$"
)
_CONFIG_STEERING = re.compile(
    r"--deselect|--ignore\b|--ignore-glob|(?:^|[\s\"'=])-k\s|\bnorecursedirs\b|\btestpaths\b|"
    r"\bpython_(?:files|classes|functions)\b|\bcollect_ignore|[Tt]estPathIgnorePatterns|\baddopts\b"
)
# An entry point in this group makes pytest load the module it names as a plugin, into every
# test run of an environment the project is installed in.
_PLUGIN_ENTRY_POINT = re.compile(r"\bpytest11\b")
_TEST_DEF = re.compile(
    r"^\s*(?:async\s+)?def\s+(test\w*)\s*\(|^\s*class\s+(Test\w*)\b|"
    r"^\s*(?:it|test|describe)\s*\(\s*(['\"`])(.+?)\3"
)
_ASSERT_START = re.compile(
    r"^\s*(?:assert\b|self\.(?:assert|fail)\w*\s*\(|(?:await\s+)?expect\s*\(|"
    r"assert(?:\.\w+)?\s*\(|(?:with\s+)?pytest\.(?:raises|warns|fail)\b|with\s+self\.assert\w+|"
    r"(?:np|numpy)\.testing\.assert\w*|assert_\w+\s*\()"
)
_STRINGS = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"")
_WEAK = re.compile(r"^assert (?:True|1|not False)$|\bor (?:True|1)\b")


class PolicyDecision(BaseModel):
    """The gate's answer; `rule` is the first rule broken, `reasons` say what and where."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed: bool
    rule: str = ""
    reasons: tuple[str, ...] = ()


@lru_cache(maxsize=256)
def _gitignore(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def path_matches(path: str, patterns: Iterable[str]) -> str | None:
    """The pattern that decides the repo-relative `path` is matched, or None.

    gitignore rules (pathspec): `**` spans directories, `*` and `?` stay in one
    segment, a pattern without an inner `/` matches at any depth, a matched
    directory covers its files, the last matching pattern wins and `!` excepts.
    """
    kept = tuple(p for p in patterns if p.strip())
    found = _gitignore(tuple(rawspec.normal_glob(p) for p in kept)).check_file(path)
    return kept[found.index] if found.include and found.index is not None else None


def check_candidate(
    diff: str, policy: PolicySpec, original: Callable[[str], str | None] | None = None
) -> PolicyDecision:
    """Judge a candidate diff against the job's policy, before it is applied or run.

    `original(path)` reads a file as it is before the patch (None if it cannot), so Python
    files are judged on their whole post-patch syntax tree; without it, on the hunks alone.
    """
    try:
        patchset = diffs.parse(diff)
    except NotADiff as exc:
        return PolicyDecision(allowed=False, rule="not_a_diff", reasons=(str(exc),))
    found: dict[str, list[str]] = {rule: [] for rule in RULES}
    # Size first, before any per-file work: a 3 MB patch over 60,001 files once took 319 s
    # (one `git show` per file for the tampering check) to be refused for its size.
    found["size"] = _over_size(patchset, policy)
    if found["size"]:
        return PolicyDecision(allowed=False, rule="size", reasons=tuple(found["size"]))
    for path, why in diffs.unsafe_paths(diff):
        found["outside_worktree"].append(f"{path} {why}; patches stay inside the worktree")
    for path in diffs.touched_files(diff):
        # Each list on its own: a `!` in extra_protected_paths excepts only from its own
        # patterns, it never un-protects a default (`.git/**`, the CI workflows).
        pattern = path_matches(path, policy.protected_paths) or path_matches(
            path, policy.extra_protected_paths
        )
        if pattern:
            found["protected_path"].append(
                f"{path} is a protected path (matches {pattern!r}); candidates may not change it"
            )
    found["artifact"] = artifact_reasons(
        patchset, lambda path: path_matches(path, policy.allow_artifacts)
    )
    befores: dict[str, str | None] = {}

    def before(patched: PatchedFile) -> str | None:
        paths = diffs.file_paths(patched)
        if original is None or not paths:
            return None
        if paths[0] not in befores:  # one `git show` per file, however many rules read it
            befores[paths[0]] = original(paths[0])
        return befores[paths[0]]

    if not policy.allow_test_changes:
        for patched in patchset:
            found["test_tampering"].extend(_tampering(patched, policy.test_paths, before))
    for patched in patchset:
        found["runner_tampering"].extend(runner_tampering(patched, before(patched)))
    broken = [rule for rule in RULES if found[rule]]
    if not broken:
        return PolicyDecision(allowed=True)
    return PolicyDecision(
        allowed=False,
        rule=broken[0],
        reasons=tuple(reason for rule in broken for reason in found[rule]),
    )


def _over_size(patchset: Iterable[PatchedFile], policy: PolicySpec) -> list[str]:
    """Why the parsed patch is too big (diffs.changed_lines and touched_files, parsed once)."""
    reasons: list[str] = []
    patched = list(patchset)
    lines = sum(f.added + f.removed for f in patched)
    files = len({p for f in patched for p in diffs.file_paths(f)})
    if lines > policy.max_changed_lines:
        reasons.append(
            f"the patch changes {lines} lines, more than the limit of {policy.max_changed_lines}"
        )
    if files > policy.max_files:
        reasons.append(
            f"the patch touches {files} files, more than the limit of {policy.max_files}"
        )
    return reasons


def _tampering(
    patched: PatchedFile,
    test_paths: Sequence[str],
    before: Callable[[PatchedFile], str | None],
) -> list[str]:
    paths = diffs.file_paths(patched)
    name = paths[-1] if paths else "?"
    removed = [line.value.rstrip("\n") for hunk in patched for line in hunk if line.is_removed]
    added = [line.value.rstrip("\n") for hunk in patched for line in hunk if line.is_added]
    reasons: list[str] = []
    if any(_CONFIG_FILES.search(p) for p in paths):
        for text in _new_matches(added, removed, _CONFIG_STEERING):
            reasons.append(f"{name}: changes which tests run (`{text.strip()}`)")
        for text in _new_matches(added, removed, _PLUGIN_ENTRY_POINT):
            reasons.append(
                f"{name}: declares a pytest plugin (`{text.strip()}`), which every test run "
                "would load"
            )
    if not any(path_matches(p, test_paths) for p in paths):
        return reasons
    status = diffs.file_status(patched)
    if status == "deleted":
        return [*reasons, f"deletes the test file {name}"]
    if status == "renamed":
        reasons.append(f"renames the test file {paths[0]} to {name}")
    for pattern, why in _SKIPS:
        for text in _new_matches(added, removed, pattern):
            reasons.append(f"{name}: {why} (`{text.strip()}`)")
    if status == "added" or reasons:
        return reasons  # refused already, in the most specific words (a skip marker, ...)
    # Existing tests are read-only, new ones may be added (testfiles.py): judged on the
    # syntax trees where both sides are known (formatting is free, a parametrize row or an
    # expected value is not), else by the named rules and then line by line.
    judged = None
    if name.endswith(".py"):
        original = before(patched)
        judged = changed_tests(name, original, post_patch_text(patched, original))
    if judged is not None:
        return [*reasons, *judged]
    gone = Counter(_test_names(removed)) - Counter(_test_names(added))
    reasons.extend(f"{name}: deletes the test {test!r}" for test in sorted(gone))
    reasons.extend(f"{name}: {why}" for why in _assertion_changes(patched))
    if not reasons:
        reasons.extend(changed_lines(name, removed, added))
    return reasons


def _new_matches(added: list[str], removed: list[str], pattern: re.Pattern[str]) -> list[str]:
    """Added lines matching `pattern`, beyond as many as the removed lines had (moves are fine)."""
    hits = [line for line in added if pattern.search(line)]
    already = sum(1 for line in removed if pattern.search(line))
    return hits[already:]


def _test_names(lines: Iterable[str]) -> Iterable[str]:
    for line in lines:
        match = _TEST_DEF.match(line)
        if match:
            yield match.group(1) or match.group(2) or match.group(4)


def _statements(lines: list[str], shown: dict[str, str]) -> list[str]:
    """Assertion statements among a hunk's lines, continuation lines joined, canonicalized;
    `shown` maps each canonical form to the text as written, for messages."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not _ASSERT_START.match(lines[i]):
            i += 1
            continue
        statement, depth = [lines[i]], _depth(lines[i])
        i += 1
        while (
            i < len(lines)
            and len(statement) < 30
            and (depth > 0 or statement[-1].rstrip().endswith("\\"))
        ):
            statement.append(lines[i])
            depth += _depth(lines[i])
            i += 1
        key = diffs.canonical_line(" ".join(statement))
        shown.setdefault(key, " ".join(" ".join(statement).split()))
        out.append(key)
    return out


def _depth(line: str) -> int:
    code = _STRINGS.sub("''", line.split(" #", 1)[0])
    return sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")


def _assertion_changes(patched: PatchedFile) -> list[str]:
    """Assertions that are gone or changed: each hunk's old assertion statements (context +
    removed lines) that its new side (context + added lines) no longer has."""
    reasons: list[str] = []
    for hunk in patched:
        shown: dict[str, str] = {}
        old = _statements([ln.value.rstrip("\n") for ln in hunk if ln.line_type in " -"], shown)
        new = _statements([ln.value.rstrip("\n") for ln in hunk if ln.line_type in " +"], shown)
        lost = list((Counter(old) - Counter(new)).elements())
        gained = list((Counter(new) - Counter(old)).elements())
        for index, statement in enumerate(lost):
            if index < len(gained):
                verb = "weakens" if _weakens(statement, gained[index]) else "changes"
                reasons.append(
                    f"{verb} the assertion `{shown[statement]}` into `{shown[gained[index]]}`"
                )
            else:
                reasons.append(f"removes the assertion `{shown[statement]}`")
    return reasons


def _weakens(old: str, new: str) -> bool:
    """`assert x == 3` → `assert True`, `assert x`, `... or True`, assertEqual → assertTrue."""
    return bool(_WEAK.search(new)) or old.startswith(new) or ("True" in new and "True" not in old)
