"""The pure parts of bench_fidelity: projects, outcomes by test id, their diff, the table.

No process, no network, no Docker here: what bench_fidelity.py runs is read back
through these functions, so tests/test_bench_fidelity.py can check them on text.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

PROJECTS = Path(__file__).resolve().parent / "fidelity_projects.toml"
JUNIT_FILE = "fidelity-junit.xml"
UNITTEST_FILE = "fidelity-unittest.json"
RUNNERS = ("pytest", "unittest")
SETUP = "setup: "  # a side's note when its setup failed, so no test ran
_SETUP_FAILED = "patchheal: setup command failed"
_PROGRESS = re.compile(r"^\[harness [^\]]*\] ?")
# What each side records for a test (a unittest subtest's failure fails its test).
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")

# A unittest runner given inline (`python -c`), so the same command runs in the plain
# tree and in the harness's worktree without adding a file to either: unittest's own
# discovery and TextTestRunner, with every test's outcome and message written by id.
UNITTEST_RUNNER = """\
import json, sys, unittest
ids, seen = [], {}
def note(test, outcome, text):
    seen[test.id()] = (outcome, text)
class Result(unittest.TextTestResult):
    def startTest(self, test):
        ids.append(test.id())
        super().startTest(test)
    def addFailure(self, test, err):
        note(test, "failed", self._exc_info_to_string(err, test))
        super().addFailure(test, err)
    def addError(self, test, err):
        note(test, "error", self._exc_info_to_string(err, test))
        super().addError(test, err)
    def addSkip(self, test, reason):
        note(test, "skipped", reason)
        super().addSkip(test, reason)
    def addExpectedFailure(self, test, err):
        note(test, "xfailed", "")
        super().addExpectedFailure(test, err)
    def addUnexpectedSuccess(self, test):
        note(test, "xpassed", "")
        super().addUnexpectedSuccess(test)
    def addSubTest(self, test, subtest, err):
        if err is not None:
            note(test, "failed", self._exc_info_to_string(err, test))
        super().addSubTest(test, subtest, err)
runner = unittest.TextTestRunner(resultclass=Result, verbosity=1)
main = unittest.main(module=None, argv=["unittest", *sys.argv[1:]], testRunner=runner, exit=False)
outcomes = {i: seen.get(i, ("passed", "")) for i in ids}
outcomes.update({i: v for i, v in seen.items() if i not in outcomes})
with open(%(path)r, "w") as out:
    json.dump(outcomes, out)
sys.exit(0 if main.result.wasSuccessful() else 1)
"""


class ProjectError(ValueError):
    """A project entry that cannot be run as written."""


@dataclass(frozen=True)
class Project:
    name: str
    source: str  # the fetch tool's `github:OWNER/NAME`
    commit: str
    python: str
    install: tuple[str, ...]  # setup commands, in order (each a `--setup` of the harness)
    command: str  # without the results option: the script adds it
    runner: str = "pytest"
    build: str = ""
    notes: str = ""

    @property
    def results_file(self) -> str:
        return JUNIT_FILE if self.runner == "pytest" else UNITTEST_FILE

    def full_command(self) -> str:
        """The test command both sides run, with its results written into the tree."""
        if self.runner == "pytest":
            return f"{self.command} --junitxml={JUNIT_FILE}"
        code = UNITTEST_RUNNER % {"path": UNITTEST_FILE}
        return f"python -c {shlex.quote(code)} {self.command}".rstrip()


_REQUIRED = ("source", "commit", "python", "install", "command")


def load_projects(path: Path = PROJECTS) -> list[Project]:
    """The `[[project]]` tables of the data file, checked: a clear error, not a KeyError."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProjectError(f"{path}: {exc}") from exc
    projects = []
    for index, entry in enumerate(data.get("project", [])):
        name = entry.get("name") or f"#{index + 1}"
        # A unittest project's command may be empty: `python -m unittest` discovers.
        missing = [k for k in ("name", *_REQUIRED) if not entry.get(k) and k != "command"]
        missing += [] if isinstance(entry.get("command"), str) else ["command"]
        if missing:
            raise ProjectError(f"{path}: project {name} lacks {', '.join(missing)}")
        if entry.get("runner", "pytest") not in RUNNERS:
            raise ProjectError(f"{path}: project {name}: runner must be one of {RUNNERS}")
        if not re.fullmatch(r"[0-9a-f]{40}", entry["commit"]):
            raise ProjectError(f"{path}: project {name}: commit must be 40 hex digits")
        known = set(Project.__dataclass_fields__)
        unknown = sorted(set(entry) - known)
        if unknown:
            raise ProjectError(f"{path}: project {name}: unknown keys {', '.join(unknown)}")
        install = entry["install"]
        if isinstance(install, str):
            install = [install]
        if not isinstance(install, list) or not all(isinstance(i, str) for i in install):
            raise ProjectError(f"{path}: project {name}: install must be a string or strings")
        projects.append(Project(**(entry | {"install": tuple(install)})))
    names = [p.name for p in projects]
    if len(set(names)) != len(names):
        raise ProjectError(f"{path}: project names repeat")
    return projects


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _exception_line(text: str) -> str:
    """The exception of a traceback (its last line that is not blank), else its first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("Traceback"):
        return lines[-1]
    return lines[0] if lines else ""


def parse_junit(text: str) -> dict[str, tuple[str, str]]:
    """pytest's JUnit XML -> {test id: (outcome, first line of its message)}.

    The id is `classname::name` (a collection error has an empty classname); a name
    met twice gets `#2`, `#3` so no outcome is lost."""
    root = ET.fromstring(text)
    outcomes: dict[str, tuple[str, str]] = {}
    for case in root.iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, message = "passed", ""
        for child in case:
            kind = child.tag
            detail = child.get("message") or child.text or ""
            if kind == "failure":
                outcome, message = "failed", detail
            elif kind == "error" and outcome != "failed":
                outcome, message = "error", detail
            elif kind == "skipped" and outcome == "passed":
                xfail = child.get("type") == "pytest.xfail"
                outcome, message = ("xfailed" if xfail else "skipped"), detail
        if outcome == "error" and message == "collection failure":  # the error's own line
            message = _collection_error(child_text(case)) or message
        unique, count = test_id, 1
        while unique in outcomes:
            count += 1
            unique = f"{test_id}#{count}"
        outcomes[unique] = (outcome, _first_line(message))
    return outcomes


def child_text(case: ET.Element) -> str:
    return "\n".join(child.text or "" for child in case)


def _collection_error(text: str) -> str:
    """The exception pytest printed for a module it could not collect (`E   ...`)."""
    for line in text.splitlines():
        if re.match(r"E\s+\S", line):
            return line[1:].strip()
    return _exception_line(text)


def parse_unittest(text: str) -> dict[str, tuple[str, str]]:
    """The inline runner's JSON -> {test id: (outcome, the exception line)}."""
    data = json.loads(text)
    return {
        test_id: (str(outcome), _exception_line(str(message)))
        for test_id, (outcome, message) in data.items()
    }


def parse_results(runner: str, text: str) -> dict[str, tuple[str, str]]:
    return parse_junit(text) if runner == "pytest" else parse_unittest(text)


_ERROR_LINE = re.compile(
    r"^(E\s+\S|error:|ERROR\b|\w*(Error|Exception)\b|FAILED\b)|\b\w+(Error|Exception):"
)


# pip's own wrapping of a build's failure: the build's error line comes after these.
_GENERIC = re.compile(
    r"subprocess-exited-with-error|metadata-generation-failed|Failed building|"
    r"Could not build wheels|^note:|^×|finished with status"
)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def first_error_line(output: str, *, fallback: bool = True) -> str:
    """The first line of a run's output that says what went wrong (colours taken out)."""
    output = _ANSI.sub("", output)
    for line in output.splitlines():  # pytest's own error lines say it most precisely
        if re.match(r"E\s+[\w.]*(Error|Exception)\b", line):
            return line.strip()[:200]
    for line in output.splitlines():
        stripped = line.strip()
        if stripped and _ERROR_LINE.search(stripped) and not _GENERIC.search(stripped):
            return stripped[:200]
    if not fallback:
        return ""
    return _first_line(output.splitlines()[-1] if output.strip() else "")[:200]


def harness_note(output: str, *, fallback: bool = True) -> str:
    """Why a harness run has no results: when patchheal says the setup failed, setup's
    first error line (setup's output comes as `[harness run NAME]` progress lines),
    else the first error line of the rest."""
    own: list[str] = []
    progress: list[str] = []
    for line in output.splitlines()[1:]:  # the first line is the command bench_fidelity ran
        match = _PROGRESS.match(line)
        (progress if match else own).append(line[match.end() :] if match else line)
    if any(line.startswith(_SETUP_FAILED) for line in own):
        return SETUP + first_error_line("\n".join(progress))
    kept = "\n".join(x for x in own if not x.startswith("worktree kept:"))
    return first_error_line(kept, fallback=fallback)


_PLATFORM = re.compile(r"platform \S+ -- (Python [\w.+]+), (pytest-[\w.]+)")


def runtime_of(output: str) -> str:
    """`Python 3.11.2, pytest-7.2.1` from pytest's header, else the interpreter unittest
    ran on is not printed: empty."""
    match = _PLATFORM.search(output)
    return f"{match.group(1)}, {match.group(2)}" if match else ""


@dataclass
class Side:
    """One side's run of a project: its outcomes by id, or why it has none."""

    outcomes: dict[str, tuple[str, str]] | None
    exit_code: int | None
    seconds: float
    note: str = ""  # the run's first error line (why its tests are absent, if they are)
    extra: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "outcomes": None
            if self.outcomes is None
            else {k: list(v) for k, v in self.outcomes.items()},
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 1),
            "note": self.note,
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Side:
        raw = data.get("outcomes")
        outcomes = None
        if isinstance(raw, dict):
            outcomes = {str(k): (str(v[0]), str(v[1])) for k, v in raw.items()}
        exit_code = data.get("exit_code")
        seconds = data.get("seconds", 0.0)
        extra = data.get("extra")
        return cls(
            outcomes=outcomes,
            exit_code=exit_code if isinstance(exit_code, int) else None,
            seconds=float(seconds) if isinstance(seconds, int | float) else 0.0,
            note=str(data.get("note", "")),
            extra={str(k): str(v) for k, v in extra.items()} if isinstance(extra, dict) else {},
        )


def summary(side: Side | None) -> str:
    """`911 passed, 1 failed`; `no results (...)` for a run that produced none."""
    if side is None:
        return "not run"
    if side.outcomes is None:
        what = "setup fails" if side.note.startswith(SETUP) else "no results"
        return f"{what} (exit {side.exit_code})"
    counts: dict[str, int] = {}
    for outcome, _ in side.outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    text = ", ".join(f"{counts[o]:,} {o}" for o in OUTCOMES if o in counts) or "0 tests"
    runtime = side.extra.get("runtime")
    return f"{text} ({runtime})" if runtime else text


@dataclass(frozen=True)
class Difference:
    test_id: str
    plain: str  # an outcome, or "absent"
    harness: str
    reason: str


@dataclass(frozen=True)
class Comparison:
    tests: int  # ids in either run
    identical: int  # ids with the same outcome in both
    differences: list[Difference]


_NO_ID = "no such id in the other run, which reported no error (another test id?)"


def _absent(side: Side, label: str) -> str:
    """Why a run that has results lacks an id: its first error line when it could not
    collect something (an `error` outcome), else it ran the test under another id."""
    errors = any(outcome == "error" for outcome, _ in (side.outcomes or {}).values())
    return f"{label}{side.note}" if errors and side.note else _NO_ID


def compare(plain: Side, harness: Side) -> Comparison:
    """Outcomes by id; a side without results counts every id of the other as absent.

    The reason of a difference is the harness's message for the id (its first error
    line), else the plain run's, else the harness run's first error line."""
    ours = plain.outcomes or {}
    theirs = harness.outcomes or {}
    ids = sorted(set(ours) | set(theirs))
    differences = []
    identical = 0
    for test_id in ids:
        a, b = ours.get(test_id, ("absent", "")), theirs.get(test_id, ("absent", ""))
        if a[0] == b[0]:
            identical += 1
            continue
        own_a = f"plain: {a[1]}" if a[1] else ""
        if harness.outcomes is None:  # the run's own reason, the same for every id
            reason = harness.note
        elif plain.outcomes is None:
            reason = f"plain: {plain.note}"
        elif b[0] == "absent":  # the id's own error (a module not collected) or the run's
            reason = own_a if a[0] == "error" and own_a else _absent(harness, "")
        elif a[0] == "absent":
            reason = b[1] if b[0] == "error" and b[1] else _absent(plain, "plain: ")
        else:
            reason = b[1] or own_a
        differences.append(Difference(test_id, a[0], b[0], reason))
    return Comparison(len(ids), identical, differences)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _grouped(differences: list[Difference], limit: int) -> list[str]:
    """Differences with the same outcomes and reason together, the reason once, then
    their ids (at most `limit` of each group, 0 for all)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for diff in differences:
        groups.setdefault((diff.plain, diff.harness, diff.reason), []).append(diff.test_id)
    lines = []
    for (plain, harness, reason), ids in groups.items():
        lines.append(f"  {plain} -> {harness} ({len(ids)}): {reason[:240]}")
        shown = ids if limit == 0 else ids[:limit]
        lines += [f"    {test_id}" for test_id in shown]
        if len(shown) < len(ids):
            lines.append(f"    ... and {len(ids) - len(shown)} more")
    return lines


def table(rows: Sequence[tuple[Project, Side | None, Side | None]], *, limit: int = 10) -> str:
    """The Markdown table (one row per project) and, under it, per project the differing
    ids grouped by outcomes and reason (at most `limit` ids a group, 0 for all)."""
    lines = [
        "| project | python | runner | build | tests | plain venv | harness | identical by id |",
        "| --- | --- | --- | --- | ---: | --- | --- | ---: |",
    ]
    details: list[str] = []
    for project, plain, harness in rows:
        if plain is None or harness is None:
            tests, same = "", "not compared"
        else:
            result = compare(plain, harness)
            tests = f"{result.tests:,}"
            same = f"{result.identical:,} of {result.tests:,}"
            if not result.differences and result.tests:
                same += " (all)"
            if result.differences:
                details.append(f"{project.name}: {len(result.differences):,} differ")
                details += _grouped(result.differences, limit)
        cells = [
            project.name,
            project.python,
            project.runner,
            project.build,
            tests,
            summary(plain),
            summary(harness),
            same,
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join([*lines, "", *details]).rstrip() + "\n"
