"""What pytest runs that is not its own, as the monitor notes it (patchheal_pluginwatch.py).

Real pytest runs in the local harness, with the monitor armed: the notes a project's own hooks
and items give, the same in every run of the same tree, and none from a pytest session a test
runs inside it. The hostile side (a new conftest's or a plugin module's hook or fixture hiding
a broken test) is in tests/verdict_battery.py, judged by the real verification.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from patchheal.harness.local.harness import LocalHarness
from patchheal.harness.results.collectors import COLLECTORS
from patchheal.models import MonitorEvent, TestResults
from patchheal.verdict.tripwire import tainting
from tests.healjobs import git

_OPS = ("hook on test outcomes", "test item changed")
_CALC = "def add(a, b):\n    return a + b\n"
_TESTS = textwrap.dedent("""
    from calc import add


    def test_add():
        assert add(2, 3) == 5


    def test_again():
        assert add(1, 1) == 2
""")


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(textwrap.dedent(text).lstrip("\n"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    return repo


def _run(repo: Path, command: str = "-m pytest -q -p no:cacheprovider tests") -> TestResults:
    result = LocalHarness().run(f"{sys.executable} {command}", repo, timeout=120, idle_timeout=120)
    assert result.tests is not None, result.output
    return result.tests


def _notes(tests: TestResults) -> list[MonitorEvent]:
    return [e for e in tests.monitor if e.op in _OPS]


def test_a_projects_own_hooks_and_decorated_tests_are_the_same_in_every_run(
    tmp_path: Path,
) -> None:
    """A conftest that wraps every report and a test decorated by the project's own helper
    are noted, on a protected target, and the same in a second run: nothing taints."""
    repo = _project(
        tmp_path,
        {
            "calc.py": _CALC
            + textwrap.dedent("""

                import functools


                def logged(test):
                    @functools.wraps(test)
                    def run(*args, **kwargs):
                        return test(*args, **kwargs)

                    return run
            """),
            "conftest.py": """
                import pytest


                @pytest.hookimpl(hookwrapper=True)
                def pytest_runtest_makereport(item, call):
                    outcome = yield
                    outcome.get_result().user_properties.append(("seen", True))
            """,
            "tests/test_calc.py": _TESTS.replace(
                "def test_again", "@logged\ndef test_again"
            ).replace("import add", "import add, logged"),
            "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
        },
    )
    first, second = _run(repo), _run(repo)
    notes = sorted((e.op, e.file, e.detail.split(":")[0]) for e in _notes(first))
    assert notes == [
        ("hook on test outcomes", "conftest.py", "pytest_runtest_makereport"),
        ("test item changed", "calc.py", "the test function"),
    ], first.monitor
    assert all(e.target == "runner" for e in _notes(first))
    assert tainting(second, first, changed=["calc.py", "conftest.py"]) == []


def test_a_hook_added_to_a_conftest_taints_the_run_that_has_it(tmp_path: Path) -> None:
    """The same conftest with one more outcome hook than the baseline run had: that hook is
    named, with the file and the hook; the one both runs had is not."""
    conftest = """
        import pytest


        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            yield
    """
    repo = _project(
        tmp_path,
        {
            "calc.py": _CALC,
            "conftest.py": conftest,
            "tests/test_calc.py": _TESTS,
            "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
        },
    )
    baseline = _run(repo)
    (repo / "conftest.py").write_text(
        textwrap.dedent(conftest).lstrip("\n")
        + "\n\ndef pytest_report_teststatus(report, config):\n    return None\n"
    )
    found = tainting(_run(repo), baseline, changed=["conftest.py"])
    assert [(e.op, e.file, e.detail.split(":")[0]) for e in found] == [
        ("hook on test outcomes", "conftest.py", "pytest_report_teststatus")
    ]


def test_hooks_are_read_when_the_first_test_is_no_plain_function(tmp_path: Path) -> None:
    """A suite whose first item is a TestCase's (no plain pytest function): the session's hooks
    are still read, through pytest's own node class."""
    repo = _project(
        tmp_path,
        {
            "calc.py": _CALC,
            "conftest.py": "def pytest_runtest_logreport(report):\n    pass\n",
            "tests/test_calc.py": """
                import unittest

                from calc import add


                class AddTest(unittest.TestCase):
                    def test_add(self):
                        self.assertEqual(add(2, 3), 5)
            """,
            "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
        },
    )
    notes = [(e.op, e.file, e.detail.split(":")[0]) for e in _notes(_run(repo))]
    assert notes == [("hook on test outcomes", "conftest.py", "pytest_runtest_logreport")]


def test_a_pytest_session_a_test_runs_inside_it_notes_nothing(tmp_path: Path) -> None:
    """A plugin's own tests run pytest in-process over files they write to a fresh temporary
    folder (pytester): those tests' items and hooks are not this run's, and their paths differ
    in every run, so noting them would taint every run of such a project."""
    repo = _project(
        tmp_path,
        {
            "calc.py": _CALC,
            "tests/test_calc.py": _TESTS
            + textwrap.dedent("""


                def test_inner(tmp_path):
                    import pytest

                    (tmp_path / "conftest.py").write_text(
                        "def pytest_runtest_logreport(report):\\n    pass\\n"
                    )
                    (tmp_path / "test_inner.py").write_text("def test_x():\\n    assert True\\n")
                    assert pytest.main(["-q", "-p", "no:cacheprovider", str(tmp_path)]) == 0
            """),
            "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
        },
    )
    tests = _run(repo)
    assert tests.outcomes["tests/test_calc.py::test_inner"] == "passed"
    assert _notes(tests) == []


def test_a_code_digest_is_the_same_wherever_its_lines_are_and_in_every_process() -> None:
    """Lines moved (a fixture added above a hook) and another string-hash seed (a frozenset's
    order) leave the digest as it was; another body does not."""
    probe = textwrap.dedent("""
        import sys
        namespace = {}
        exec(open(sys.argv[1]).read(), namespace)
        source = sys.argv[2]
        code = compile(source, "conftest.py", "exec").co_consts[0]
        print(namespace["code_digest"](code))
    """)
    hook = "def hook(x):\n    return x in {'alpha', 'beta', 'gamma', 'delta'}\n"
    digests = []
    for seed, source in (
        ("1", hook),
        ("2", "\n\n\n" + hook),
        ("3", hook.replace("x in", "x not in")),
    ):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", probe, str(COLLECTORS / "patchheal_pluginwatch.py"), source],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        digests.append(done.stdout.strip())
    assert digests[0] == digests[1] != digests[2]
