"""The collector compatibility matrix: a clean project run with and without the collectors.

A small project with every kind of outcome (passing, failing, erroring in
setup and teardown, skipped, xfail and xpass, parametrized, class-based and
unittest.TestCase tests, a module that fails to import) is run by a real
pytest of each version in a venv of its own (cached under a directory the
caller gives), once plainly and once with the harness's results channel. Its
outcomes by test id from pytest's own JUnit XML and verbose lines (without the
collectors) must equal the pytest collector's signed record (with them), and
both runs must exit alike. The same for `python -m unittest` and the unittest
collector. Shared by tests/test_collector_matrix.py and the measurement in
docs/verdict.md ("Collector compatibility").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from patchheal.harness.results.channel import ResultsChannel
from patchheal.harness.results.collectors import COLLECTORS
from patchheal.models import TestResults


def _d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


PYTEST_VERSIONS = ("4.6.11", "5.4.3", "6.2.5", "7.4.4", "8.4.2")

PROJECT: dict[str, str] = {
    "pkg/__init__.py": "",
    "pkg/calc.py": "def add(a, b):\n    return a + b\n",
    "conftest.py": _d("""
        import sys
        from pathlib import Path

        import pytest

        sys.path.insert(0, str(Path(__file__).parent))


        @pytest.fixture
        def two():
            return 2
    """),
    "tests/__init__.py": "",
    "tests/test_basic.py": _d("""
        import pytest

        from pkg.calc import add


        def test_pass(two):
            assert add(1, 1) == two


        def test_fail():
            assert add(1, 2) == 4


        def test_raises_in_body():
            raise RuntimeError("boom")


        @pytest.fixture
        def broken():
            raise RuntimeError("fixture broke")


        def test_setup_error(broken):
            pass


        @pytest.fixture
        def bad_teardown():
            yield 1
            raise RuntimeError("teardown broke")


        def test_teardown_error(bad_teardown):
            assert bad_teardown == 1


        @pytest.mark.skip(reason="not today")
        def test_skipped():
            pass


        def test_skip_inside():
            pytest.skip("inside")


        @pytest.mark.xfail(reason="known")
        def test_xfail():
            assert add(1, 1) == 3


        @pytest.mark.xfail(reason="fixed meanwhile")
        def test_xpass():
            assert add(1, 1) == 2


        @pytest.mark.xfail(strict=True, reason="strict")
        def test_xpass_strict():
            assert add(1, 1) == 2


        @pytest.mark.parametrize("a,b,total", [(1, 1, 2), (2, 2, 5), (0, 0, 0)])
        def test_param(a, b, total):
            assert add(a, b) == total


        class TestClass:
            def test_method_pass(self):
                assert add(2, 2) == 4

            def test_method_fail(self):
                assert add(2, 2) == 5

            @pytest.mark.parametrize("n", [1, 2])
            def test_method_param(self, n):
                assert n == 1
    """),
    "tests/test_unit.py": _d("""
        import unittest

        from pkg.calc import add


        class UnitTest(unittest.TestCase):
            def test_ok(self):
                self.assertEqual(add(1, 1), 2)

            def test_fail(self):
                self.assertEqual(add(1, 1), 3)

            def test_error(self):
                raise ValueError("bad")

            @unittest.skip("not here")
            def test_skip(self):
                pass

            @unittest.expectedFailure
            def test_expected_failure(self):
                self.assertEqual(add(1, 1), 3)


        class SetUpBroken(unittest.TestCase):
            def setUp(self):
                raise RuntimeError("setUp broke")

            def test_never_runs(self):
                pass
    """),
    "tests/test_broken.py": "import not_a_module_anywhere  # noqa\n\n\ndef test_x():\n    pass\n",
    # patchheal's code in the step keeps no project object alive (issue 32, item 7): an
    # object, a file and a lock keyed on it (structlog's WRITE_LOCKS) are collected once
    # dropped, with asserts passing before the drop (pytest's explanation of a passing
    # assert once kept every local alive).
    "tests/test_gc.py": _d("""
        import gc
        import threading
        import unittest
        import weakref

        LOCKS = weakref.WeakKeyDictionary()


        class Thing:
            pass


        def test_object_is_collected():
            thing = Thing()
            ref = weakref.ref(thing)
            assert ref() is thing
            del thing
            gc.collect()
            assert ref() is None


        def test_file_lock_released(tmp_path):
            handle = open(tmp_path / "log.txt", "w")
            LOCKS[handle] = threading.Lock()
            before = len(LOCKS)
            assert len(LOCKS) == before
            handle.close()
            assert len(LOCKS) == before
            del handle
            gc.collect()
            assert len(LOCKS) == before - 1


        class GcCase(unittest.TestCase):
            def test_object_is_collected(self):
                thing = Thing()
                ref = weakref.ref(thing)
                self.assertIs(ref(), thing)
                del thing
                gc.collect()
                self.assertIsNone(ref())
    """),
}
# Unittest's own runner over the same project: the test module that fails to import is
# named last, the form `python -m unittest a.b` gives a `_FailedTest` stand-in for.
UNITTEST_ARGS = ("-m", "unittest", "-v", "tests.test_unit", "tests.test_gc", "tests.test_broken")
PYTEST_ARGS = (
    "-m",
    "pytest",
    "-v",
    "-p",
    "no:cacheprovider",
    "--continue-on-collection-errors",
    "-o",
    "junit_family=xunit1",
)

# What pytest itself must report: a version that does not (broken on that Python) is
# not in the matrix. Checked on the plain run, never on the collector's record.
EXPECTED_PYTEST = {
    "tests/test_basic.py::test_pass": "passed",
    "tests/test_basic.py::test_fail": "failed",
    "tests/test_basic.py::test_raises_in_body": "failed",
    "tests/test_basic.py::test_setup_error": "error",
    "tests/test_basic.py::test_teardown_error": "error",
    "tests/test_basic.py::test_skipped": "skipped",
    "tests/test_basic.py::test_skip_inside": "skipped",
    "tests/test_basic.py::test_xfail": "xfailed",
    "tests/test_basic.py::test_xpass": "passed",
    "tests/test_basic.py::test_xpass_strict": "failed",
    "tests/test_basic.py::test_param[1-1-2]": "passed",
    "tests/test_basic.py::test_param[2-2-5]": "failed",
    "tests/test_basic.py::test_param[0-0-0]": "passed",
    "tests/test_basic.py::TestClass::test_method_pass": "passed",
    "tests/test_basic.py::TestClass::test_method_fail": "failed",
    "tests/test_basic.py::TestClass::test_method_param[1]": "passed",
    "tests/test_basic.py::TestClass::test_method_param[2]": "failed",
    "tests/test_unit.py::UnitTest::test_ok": "passed",
    "tests/test_unit.py::UnitTest::test_fail": "failed",
    "tests/test_unit.py::UnitTest::test_error": "failed",
    "tests/test_unit.py::UnitTest::test_skip": "skipped",
    "tests/test_unit.py::UnitTest::test_expected_failure": "xfailed",
    "tests/test_unit.py::SetUpBroken::test_never_runs": "failed",
    "tests/test_broken.py": "error",
    "tests/test_gc.py::test_object_is_collected": "passed",
    "tests/test_gc.py::test_file_lock_released": "passed",
    "tests/test_gc.py::GcCase::test_object_is_collected": "passed",
}

# pytest < 6.2.4 cannot rewrite assertions on Python >= 3.10 (`required field "lineno"
# missing from alias`, measured): there it runs only with plain asserts.
_NEEDS_PLAIN_ASSERT_FROM = (3, 10)
_REWRITES_FROM = (6, 2, 4)


@dataclass(frozen=True)
class Cell:
    """One runner on one Python: what the collectors must not change."""

    python: str
    runner: str  # "pytest 7.4.4", "unittest"
    exit_plain: int
    exit_collected: int
    reference: dict[str, str]
    """Outcome by id from the runner's own output (JUnit XML, verbose lines), no collectors."""
    verbose_plain: dict[str, str]
    verbose_collected: dict[str, str]
    """The runner's verbose lines with the collectors loaded: they must not change either."""
    recorded: TestResults | None

    @property
    def identical(self) -> bool:
        return (
            self.exit_plain == self.exit_collected
            and self.recorded is not None
            and not self.recorded.collector_errors
            and self.recorded.outcomes == self.reference
            and self.verbose_plain == self.verbose_collected
        )


def python_version(python: str) -> tuple[int, ...]:
    done = subprocess.run(
        [python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return tuple(int(p) for p in done.stdout.split("."))


def pytest_args(python: str, version: str) -> tuple[str, ...]:
    plain = (
        python_version(python)[:2] >= _NEEDS_PLAIN_ASSERT_FROM
        and tuple(int(p) for p in version.split(".")) < _REWRITES_FROM
    )
    return (*PYTEST_ARGS, *(("--assert=plain",) if plain else ()))


def venv_with_pytest(cache: Path, python: str, version: str) -> Path:
    """A venv of `python` with `pytest==version` from PyPI, built once under `cache`."""
    tag = "py" + ".".join(map(str, python_version(python)[:2])) + f"-pytest{version}"
    ready = cache / tag
    if (ready / "bin" / "python").exists():
        return ready
    cache.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=cache))
    subprocess.run([python, "-m", "venv", str(building)], check=True, capture_output=True)
    pip = [str(building / "bin" / "python"), "-m", "pip", "install", "-q", f"pytest=={version}"]
    subprocess.run(pip, check=True, capture_output=True)
    # Moved into place once complete (only `bin/python -m ...` is used, which survives
    # the move); a concurrent build that got there first wins.
    try:
        building.rename(ready)
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
    return ready


def write_project(root: Path) -> Path:
    for rel, text in PROJECT.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


def _base_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "TMPDIR", "LANG")
    return {k: os.environ[k] for k in keep if k in os.environ}


def run_plain(argv: list[str], project: Path) -> tuple[int, str]:
    """`argv` in `project` without the collectors."""
    return _run(argv, project, _base_env())


def run_collected(
    argv: list[str], project: Path, *, trace: bool = False
) -> tuple[tuple[int, str], TestResults | None]:
    """`argv` in `project` with the harness's results channel, and what it collected."""
    channel = ResultsChannel(trace=trace)
    try:
        env = channel.environment(
            _base_env(), results_dir=str(channel.host_dir), collectors=str(COLLECTORS)
        )
        return _run(argv, project, env), channel.collect()
    finally:
        channel.close()


_PYTEST_WORDS = {
    "PASSED": "passed",
    "FAILED": "failed",
    "ERROR": "error",
    "SKIPPED": "skipped",
    "XFAIL": "xfailed",
    "XPASS": "passed",
}
_PYTEST_LINE = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", re.M)
_RANK = {"error": 0, "failed": 1, "passed": 2, "xfailed": 3, "skipped": 4}


def _keep_worst(into: dict[str, str], test_id: str, outcome: str) -> None:
    before = into.get(test_id)
    if before is None or _RANK[outcome] < _RANK[before]:
        into[test_id] = outcome


def pytest_verbose(output: str) -> dict[str, str]:
    """Outcome by node id from pytest's `-v` lines (a teardown error follows a PASSED)."""
    found: dict[str, str] = {}
    for test_id, word in _PYTEST_LINE.findall(output):
        _keep_worst(found, test_id, _PYTEST_WORDS[word])
    return found


def pytest_junit(path: Path) -> dict[str, str]:
    """Outcome by node id from pytest's own JUnit XML (xunit1: each case names its file)."""
    found: dict[str, str] = {}
    for case in ET.parse(path).iter("testcase"):
        file, classname = case.get("file", ""), case.get("classname", "")
        name = case.get("name", "")
        module = file.removesuffix(".py").replace("/", ".")
        if not classname:  # a collection error: named after the module
            test_id = file
        else:
            classes = classname.removeprefix(module).strip(".")
            test_id = "::".join(filter(None, (file, *classes.split("."), name)))
        kinds = {child.tag: child.get("type", "") for child in case}
        if "error" in kinds:
            outcome = "error"
        elif "failure" in kinds:
            outcome = "failed"
        elif kinds.get("skipped") == "pytest.xfail":
            outcome = "xfailed"
        elif "skipped" in kinds:
            outcome = "skipped"
        else:
            outcome = "passed"
        _keep_worst(found, test_id, outcome)
    return found


def pytest_cell(python: str, venv: Path, version: str, root: Path, *, trace: bool) -> Cell:
    project = write_project(root)
    junit = root.parent / f"{root.name}-junit.xml"
    argv = [str(venv / "bin" / "python"), *pytest_args(python, version), f"--junitxml={junit}"]
    plain = run_plain(argv, project)
    # Read before the second run writes the same file.
    reference = pytest_junit(junit) if junit.is_file() else {}
    junit.unlink(missing_ok=True)
    collected, recorded = run_collected(argv, project, trace=trace)
    return Cell(
        python=".".join(map(str, python_version(python)[:2])),
        runner=f"pytest {version}",
        exit_plain=plain[0],
        exit_collected=collected[0],
        reference=reference,
        verbose_plain=pytest_verbose(plain[1]),
        verbose_collected=pytest_verbose(collected[1]),
        recorded=recorded,
    )


_UNITTEST_WORDS = {
    "ok": "passed",
    "FAIL": "failed",
    "ERROR": "error",
    "skipped": "skipped",
    "expected failure": "xfailed",
    "unexpected success": "failed",
}
# `test_ok (tests.test_unit.UnitTest.test_ok) ... ok` (3.11+) or `(tests.test_unit.UnitTest)`.
_UNITTEST_LINE = re.compile(
    r"^(\w+) \(([\w.]+)\)(?: \.\.\.|\n.*?\.\.\.) (ok|FAIL|ERROR|skipped|expected failure|"
    r"unexpected success)\b",
    re.M,
)


def unittest_verbose(output: str) -> dict[str, str]:
    """Outcome by test id from `python -m unittest -v` lines."""
    found: dict[str, str] = {}
    for method, where, word in _UNITTEST_LINE.findall(output):
        test_id = where if where.endswith(f".{method}") else f"{where}.{method}"
        _keep_worst(found, test_id, _UNITTEST_WORDS[word])
    return found


# The collector names a by-name stand-in after the module it stood for (the verdict matches
# it to that module's tests after a fix); unittest itself prints only the last part.
UNITTEST_RENAMED = {
    "unittest.loader._FailedTest.test_broken": "unittest.loader._FailedTest.tests.test_broken"
}


def unittest_cell(python: str, root: Path) -> Cell:
    project = write_project(root)
    plain = run_plain([python, *UNITTEST_ARGS], project)
    collected, recorded = run_collected([python, *UNITTEST_ARGS], project)
    reference = {
        UNITTEST_RENAMED.get(t, t): outcome for t, outcome in unittest_verbose(plain[1]).items()
    }
    return Cell(
        python=".".join(map(str, python_version(python)[:2])),
        runner="unittest",
        exit_plain=plain[0],
        exit_collected=collected[0],
        reference=reference,
        verbose_plain=unittest_verbose(plain[1]),
        verbose_collected=unittest_verbose(collected[1]),
        recorded=recorded,
    )
