"""bench_fidelity's pure parts: the project file, outcomes by id, their diff, the table.

The inline unittest runner is run for real on a small suite (a subprocess, no network).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from fidelity import (
    PROJECTS,
    Project,
    ProjectError,
    Side,
    compare,
    first_error_line,
    harness_note,
    load_projects,
    parse_junit,
    parse_results,
    runtime_of,
    summary,
    table,
)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="6">
<testcase classname="tests.test_a" name="test_ok" time="0.1"/>
<testcase classname="tests.test_a" name="test_bad" time="0.1">
  <failure message="AssertionError: 1 != 2&#10;more">long text</failure></testcase>
<testcase classname="tests.test_a" name="test_skip" time="0">
  <skipped type="pytest.skip" message="no network">skip</skipped></testcase>
<testcase classname="tests.test_a" name="test_xf" time="0">
  <skipped type="pytest.xfail" message="known"/></testcase>
<testcase classname="" name="tests.test_b" time="0">
  <error message="collection failure">ModuleNotFoundError: No module named 'x'</error></testcase>
<testcase classname="tests.test_a" name="test_ok" time="0.1"/>
</testsuite></testsuites>
"""


def _project(**changes: object) -> Project:
    fields: dict[str, object] = {
        "name": "demo",
        "source": "github:o/demo",
        "commit": "a" * 40,
        "python": "3.11",
        "install": ("pip install -e .",),
        "command": "python -m pytest",
    }
    return Project(**(fields | changes))  # type: ignore[arg-type]


def test_junit_outcomes_by_id_with_their_first_message_line() -> None:
    outcomes = parse_junit(JUNIT)
    assert outcomes == {
        "tests.test_a::test_ok": ("passed", ""),
        "tests.test_a::test_bad": ("failed", "AssertionError: 1 != 2"),
        "tests.test_a::test_skip": ("skipped", "no network"),
        "tests.test_a::test_xf": ("xfailed", "known"),
        "::tests.test_b": ("error", "ModuleNotFoundError: No module named 'x'"),
        "tests.test_a::test_ok#2": ("passed", ""),
    }


NO_ID = "no such id in the other run, which reported no error (another test id?)"


def test_compare_names_each_differing_id_with_the_harness_reason() -> None:
    plain = Side(parse_junit(JUNIT), 1, 1.0)
    harness_outcomes = dict(parse_junit(JUNIT))
    harness_outcomes["tests.test_a::test_ok"] = ("failed", "PermissionError: [Errno 1]")
    del harness_outcomes["tests.test_a::test_skip"]
    harness_outcomes["tests.test_a::test_new"] = ("passed", "")
    del harness_outcomes["::tests.test_b"]  # collected there: its tests ran
    result = compare(plain, Side(harness_outcomes, 1, 1.0, "E   ImportError: gone"))
    assert (result.tests, result.identical) == (7, 3)
    found = {(d.test_id, d.plain, d.harness, d.reason) for d in result.differences}
    assert found == {
        ("tests.test_a::test_ok", "passed", "failed", "PermissionError: [Errno 1]"),
        ("tests.test_a::test_skip", "skipped", "absent", NO_ID),
        ("tests.test_a::test_new", "absent", "passed", NO_ID),
        ("::tests.test_b", "error", "absent", "plain: ModuleNotFoundError: No module named 'x'"),
    }
    # A run that could not collect a module: the ids it lacks take its first error line.
    harness_outcomes["::tests.test_c"] = ("error", "ImportError: gone")
    result = compare(plain, Side(harness_outcomes, 1, 1.0, "E   ImportError: gone"))
    skip = [d for d in result.differences if d.test_id == "tests.test_a::test_skip"]
    assert skip[0].reason == "E   ImportError: gone"


def test_a_side_without_results_makes_every_id_absent_with_its_error_line() -> None:
    output = "Collecting x\nerror: Cannot update time stamp of directory '/tmp/pip'\nmore\n"
    harness = Side(None, 1, 2.0, first_error_line(output))
    result = compare(Side(parse_junit(JUNIT), 1, 1.0), harness)
    assert result.identical == 0
    assert len(result.differences) == 6
    assert {d.harness for d in result.differences} == {"absent"}
    reasons = {d.reason for d in result.differences}
    assert reasons == {"error: Cannot update time stamp of directory '/tmp/pip'"}


def test_first_error_line_finds_the_exception_not_the_chatter() -> None:
    text = (
        "running setup\nImportError while importing test module 'x'.\n"
        "E   ModuleNotFoundError: No module named 'humanize._version'\n"
    )
    assert first_error_line(text) == "E   ModuleNotFoundError: No module named 'humanize._version'"
    assert first_error_line("all fine\nlast words\n") == "last words"
    conftest = "ImportError while loading conftest 'c'.\nE   zoneinfo.ZoneInfoNotFoundError: 'x'\n"
    assert first_error_line(conftest) == "E   zoneinfo.ZoneInfoNotFoundError: 'x'"
    coloured = "\x1b[31mE   ModuleNotFoundError: No module named 'x'\x1b[0m\n"
    assert first_error_line(coloured) == "E   ModuleNotFoundError: No module named 'x'"
    assert first_error_line("") == ""


def test_summary_and_table() -> None:
    plain = Side(parse_junit(JUNIT), 1, 1.0)
    changed = dict(parse_junit(JUNIT)) | {"tests.test_a::test_ok": ("failed", "boom")}
    rows = [
        (_project(build="flit"), plain, Side(changed, 1, 1.0)),
        (_project(name="same"), plain, plain),
        (_project(name="broken"), plain, Side(None, 2, 1.0, "error: no wheel")),
        (_project(name="half"), plain, None),
    ]
    assert summary(plain) == "2 passed, 1 failed, 1 error, 1 skipped, 1 xfailed"
    text = table(rows)
    lines = text.splitlines()
    assert lines[2] == (
        "| demo | 3.11 | pytest | flit | 6 | 2 passed, 1 failed, 1 error, 1 skipped, 1 xfailed"
        " | 1 passed, 2 failed, 1 error, 1 skipped, 1 xfailed | 5 of 6 |"
    )
    assert lines[3].endswith("| 6 of 6 (all) |")
    assert "| no results (exit 2) | 0 of 6 |" in lines[4]
    assert lines[5].endswith("| not run | not compared |")
    at = lines.index("demo: 1 differ")
    assert lines[at + 1 : at + 3] == ["  passed -> failed (1): boom", "    tests.test_a::test_ok"]
    assert "  passed -> absent (2): error: no wheel" in lines
    short = table(rows, limit=1).splitlines()
    at = short.index("  passed -> absent (2): error: no wheel")
    assert short[at : at + 3] == [
        "  passed -> absent (2): error: no wheel",
        "    tests.test_a::test_ok",
        "    ... and 1 more",
    ]


def test_the_runtime_comes_from_pytest_s_header() -> None:
    header = (
        "=== test session starts ===\nplatform linux -- Python 3.11.2, pytest-7.2.1, pluggy-1.0\n"
    )
    assert runtime_of(header) == "Python 3.11.2, pytest-7.2.1"
    assert runtime_of("Ran 3 tests\nOK\n") == ""
    side = Side({"t::a": ("passed", "")}, 0, 1.0, extra={"runtime": runtime_of(header)})
    assert summary(side) == "1 passed (Python 3.11.2, pytest-7.2.1)"


def test_side_survives_its_record() -> None:
    side = Side(parse_junit(JUNIT), 1, 3.14159, "", {"python": "Python 3.11.7"})
    again = Side.from_json(side.to_json())
    assert again.outcomes == side.outcomes
    assert again.extra == side.extra
    assert again.seconds == pytest.approx(3.1)
    assert again.exit_code == 1
    assert Side.from_json(Side(None, None, 0.0, "why").to_json()).outcomes is None


def test_the_project_file_loads_and_names_each_commit() -> None:
    projects = load_projects(PROJECTS)
    assert len(projects) >= 20
    assert {p.runner for p in projects} == {"pytest", "unittest"}
    assert all(len(p.commit) == 40 and p.install for p in projects)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[[project]]\nname = "x"\n', "lacks source, commit, python, install, command"),
        ("[[project]\n", "Expected"),
        (
            '[[project]]\nname="x"\nsource="s"\ncommit="abc"\npython="3.11"\n'
            'install="i"\ncommand="c"\n',
            "commit must be 40 hex digits",
        ),
        (
            f'[[project]]\nname="x"\nsource="s"\ncommit="{"a" * 40}"\npython="3.11"\n'
            'install="i"\ncommand="c"\nrunner="nose"\n',
            "runner must be one of",
        ),
        (
            f'[[project]]\nname="x"\nsource="s"\ncommit="{"a" * 40}"\npython="3.11"\n'
            'install="i"\ncommand="c"\ncolour="red"\n',
            "unknown keys colour",
        ),
    ],
)
def test_a_bad_project_file_is_a_clear_error(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "projects.toml"
    path.write_text(body)
    with pytest.raises(ProjectError, match=message):
        load_projects(path)


def test_the_inline_unittest_runner_records_every_outcome_by_id(tmp_path: Path) -> None:
    (tmp_path / "test_demo.py").write_text(
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_ok(self): pass\n"
        "    def test_fail(self): self.assertEqual(1, 2)\n"
        "    def test_error(self): raise KeyError('k')\n"
        "    @unittest.skip('later')\n"
        "    def test_skip(self): pass\n"
        "    @unittest.expectedFailure\n"
        "    def test_xf(self): raise ValueError\n"
        "    def test_sub(self):\n"
        "        for i in range(2):\n"
        "            with self.subTest(i=i): self.assertEqual(i, 0)\n"
    )
    project = _project(runner="unittest", command="discover -s . -p test_*.py")
    command = project.full_command().replace("python ", f"{sys.executable} ", 1)
    done = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    outcomes = parse_results("unittest", (tmp_path / project.results_file).read_text())
    assert outcomes == {
        "test_demo.T.test_ok": ("passed", ""),
        "test_demo.T.test_fail": ("failed", "AssertionError: 1 != 2"),
        "test_demo.T.test_error": ("error", "KeyError: 'k'"),
        "test_demo.T.test_skip": ("skipped", "later"),
        "test_demo.T.test_xf": ("xfailed", ""),
        "test_demo.T.test_sub": ("failed", "AssertionError: 1 != 0"),
    }


def test_a_harness_run_whose_setup_failed_says_so_with_setup_s_error() -> None:
    output = (
        "$ patchheal harness run python ...\n"
        "[harness run python] setup: pip install -e .\n"
        "[harness run python] Processing /opt/patchheal/wheelhouse/pytest-9.2.0.whl\n"
        "[harness run python] ERROR: ResolutionImpossible: for help visit ...\n"
        "worktree kept: /tmp/x\n"
        "patchheal: setup command failed in harness python: pip install -e .\n"
    )
    assert harness_note(output) == "setup: ERROR: ResolutionImpossible: for help visit ..."
    assert summary(Side(None, 3, 1.0, harness_note(output))) == "setup fails (exit 3)"
    ran = "$ patchheal ...\n[harness run python] running\nE   ZoneInfoNotFoundError: 'x'\n"
    assert harness_note(ran) == "E   ZoneInfoNotFoundError: 'x'"
    assert summary(Side(None, 4, 1.0, harness_note(ran))) == "no results (exit 4)"
