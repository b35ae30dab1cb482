"""A collector's internal error never changes the step's outcome, and is never the project's.

Real pytest and unittest processes with the harness's results channel: a
collector that hits an error of its own (here: a project's custom test item or
test case that the collector's assumptions do not fit) stops observing, the
tests run as they would without it, its record says `collector_error`, the
reproduction reports a harness problem instead of fingerprinting it, and a
candidate's verification ends `harness_error`, never `no_effect` or `fixed`.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from patchheal.config import BudgetSpec, StepSpec
from patchheal.errors import HarnessError
from patchheal.harness.engine import containers
from patchheal.harness.local.harness import LocalHarness
from patchheal.harness.results.collectors import COLLECTORS
from patchheal.loop.reproduce import reproduce
from patchheal.loop.verification import verify
from patchheal.models import Outcome
from tests.conftest import RepoFactory, git

PY = sys.executable
BUDGET = BudgetSpec(step_timeout_seconds=120, idle_timeout_seconds=60, flaky_reruns=0)

# A project's own kind of test item (as YAML- or notebook-test plugins have) whose `obj` is
# a function that wraps itself: the collector unwraps it to find the test function's file.
ODD_ITEM_CONFTEST = textwrap.dedent("""
    import pytest


    def _check():
        pass


    _check.__wrapped__ = _check


    class CheckItem(pytest.Item):
        obj = staticmethod(_check)

        def runtest(self):
            pass

        def reportinfo(self):
            return self.path, 0, self.name


    class CheckFile(pytest.File):
        def collect(self):
            for name in ("check_one", "check_two"):
                yield CheckItem.from_parent(self, name=name)


    def pytest_collect_file(parent, file_path):
        if file_path.name.startswith("checks") and file_path.suffix == ".txt":
            return CheckFile.from_parent(parent, path=file_path)
""")
CALC = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["."]\n'


def _run(harness: LocalHarness, command: str, repo: Path) -> tuple[int | None, str, object]:
    result = harness.run(command, repo, timeout=120, idle_timeout=60)
    return result.exit_code, result.output, result.tests


def test_pytest_collector_error_changes_no_outcome_and_is_recorded(make_repo: RepoFactory) -> None:
    """Tests the collector cannot make sense of run as without it (exit 0, no traceback of
    the collector in the output); its record says why it stopped, and holds no outcomes."""
    repo = make_repo(
        {"conftest.py": ODD_ITEM_CONFTEST, "checks.txt": "", "pyproject.toml": PYPROJECT}
    )
    plain = subprocess.run(
        [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=repo, capture_output=True
    )
    code, output, tests = _run(LocalHarness(), f"{PY} -m pytest -q -p no:cacheprovider", repo)
    assert plain.returncode == 0
    assert code == 0, output
    assert "2 passed" in output
    assert "patchheal_pytest" not in output
    assert tests is not None
    errors = tests.collector_errors  # type: ignore[attr-defined]
    assert len(errors) == 1
    assert errors[0].startswith("pytest: ValueError: wrapper loop when unwrapping")
    assert "(patchheal_pytest.py:" in errors[0]
    assert tests.outcomes == {}  # type: ignore[attr-defined]


def test_unittest_collector_error_changes_no_outcome_and_is_recorded(
    make_repo: RepoFactory,
) -> None:
    """A TestCase whose id() the collector cannot call: unittest's own run is unchanged."""
    repo = make_repo(
        {
            "test_odd.py": textwrap.dedent("""
                import unittest


                class Odd(unittest.TestCase):
                    def id(self):
                        raise RuntimeError("no id for this case")

                    def test_fine(self):
                        self.assertTrue(True)
            """)
        }
    )
    code, output, tests = _run(LocalHarness(), f"{PY} -m unittest -v test_odd", repo)
    assert code == 0, output
    assert "OK" in output
    assert "patchheal_unittest" not in output
    assert tests is not None
    errors = tests.collector_errors  # type: ignore[attr-defined]
    assert errors
    assert errors[0].startswith("unittest: RuntimeError: no id for this case")


def test_reproduction_reports_a_collector_error_as_a_harness_problem(
    make_repo: RepoFactory,
) -> None:
    """A failing step whose collector broke is not fingerprinted or classified as the
    project's failure (never a `code_bug` to patch): the harness error path (exit 3)."""
    repo = make_repo(
        {
            "calc.py": CALC,
            "tests/test_calc.py": TESTS,
            "conftest.py": ODD_ITEM_CONFTEST,
            "checks.txt": "",
            "pyproject.toml": PYPROJECT,
        }
    )
    step = StepSpec(name="unit", command=f"{PY} -m pytest -q -p no:cacheprovider")
    with pytest.raises(HarnessError, match="no trusted results") as caught:
        reproduce(LocalHarness(), step, repo, BUDGET, regression=())
    assert caught.value.exit_code == 3
    assert "ValueError: wrapper loop when unwrapping" in str(caught.value)


def test_candidate_that_breaks_the_collector_is_a_harness_error(make_repo: RepoFactory) -> None:
    """Verification of a candidate whose run the collector could not observe ends
    `harness_error` with the reason, never `no_effect` and never `fixed` (the bug is fixed
    here too: an unobserved pass is still not a verified one)."""
    repo = make_repo({"calc.py": CALC, "tests/test_calc.py": TESTS, "pyproject.toml": PYPROJECT})
    step = StepSpec(name="unit", command=f"{PY} -m pytest -q -p no:cacheprovider")
    harness = LocalHarness()
    gate = reproduce(harness, step, repo, BUDGET, regression=())
    assert gate.failure is not None
    assert gate.verdict.tests is not None
    assert gate.verdict.tests.runners == ("pytest",)
    git(repo, "reset", "-q", "--hard")
    (repo / "calc.py").write_text(CALC.replace("a - b", "a + b"))
    (repo / "conftest.py").write_text(ODD_ITEM_CONFTEST)
    (repo / "checks.txt").write_text("")
    outcome, reason, _ = verify(
        harness,
        step,
        repo,
        BUDGET,
        baseline=gate.verdict,
        failure=gate.failure,
        regression=(),
        regression_baseline={},
    )
    assert outcome is Outcome.HARNESS_ERROR, reason
    assert "no trusted results" in reason


def test_a_trace_hook_error_never_reaches_the_test(tmp_path: Path) -> None:
    """The tracer's profile hook failing mid-test gives up tracing (and says so) instead of
    raising into the traced code; the previous profile hook is back afterwards."""
    script = textwrap.dedent("""
        import sys
        import patchheal_trace

        class Faulty(patchheal_trace.TestTrace):
            def _is_project(self, code):
                raise ZeroDivisionError("tracer bug")

        def work():
            return sum(range(10))

        before = sys.getprofile()
        trace = Faulty(sys.argv[1])
        trace.start()
        value = work()
        trace.stop()
        assert value == 45
        assert sys.getprofile() is before
        print("broken:", patchheal_trace.broken())
    """)
    done = subprocess.run(
        [PY, "-c", script, str(tmp_path)],
        env={"PYTHONPATH": str(COLLECTORS), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "broken: ZeroDivisionError: tracer bug" in done.stdout


OLD_PYTEST_PROJECT = {
    "calc.py": CALC,
    "tests/test_calc.py": TESTS + "\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
    "conftest.py": "",  # puts the project root on sys.path (pytest 5.4 has no `pythonpath`)
    # pytest < 6.2.4 cannot rewrite assertions on Python >= 3.10 (measured): plain asserts.
    "setup.cfg": "[tool:pytest]\naddopts = --assert=plain\n",
}


def test_a_project_pinning_pytest_5_4_has_its_real_fix_judged_fixed(
    make_repo: RepoFactory,
) -> None:
    """The held-out failure: a project whose setup installs pytest 5.4 (no `rootpath`).
    Its failing test is reproduced by id, not as the collector's own error, and the real
    fix is `fixed` (before: every test errored inside the collector, a `code_bug` whose
    fix was `no_effect`)."""
    repo = make_repo(OLD_PYTEST_PROJECT)
    harness = LocalHarness(setup=["python -m pip install -q pytest==5.4.3"])
    gate = _old_pytest_reproduced_then_fixed(harness, repo)
    assert gate.classification is not None
    assert gate.classification.failure_class.value == "code_bug"
    assert "AttributeError" not in gate.result.output


def _old_pytest_reproduced_then_fixed(harness: Any, repo: Path) -> Any:
    """The pytest 5.4 project reproduced by id in `harness`, then its real fix `fixed`;
    returns the reproduction."""
    step = StepSpec(name="unit", command="python -m pytest -v tests/test_calc.py")
    gate = reproduce(harness, step, repo, BUDGET, regression=())
    assert gate.failure is not None
    assert "pytest-5.4.3" in gate.result.output
    assert gate.verdict.tests is not None
    assert gate.verdict.tests.outcomes == {
        "tests/test_calc.py::test_add": "failed",
        "tests/test_calc.py::test_zero": "passed",
    }
    git(repo, "reset", "-q", "--hard")
    (repo / "calc.py").write_text(CALC.replace("a - b", "a + b"))
    outcome, reason, _ = verify(
        harness,
        step,
        repo,
        BUDGET,
        baseline=gate.verdict,
        failure=gate.failure,
        regression=(),
        regression_baseline={},
    )
    assert outcome is Outcome.FIXED, reason
    return gate


@pytest.mark.docker
def test_docker_harness_old_pytest_real_fix_is_fixed(
    make_repo: RepoFactory, require_docker: None
) -> None:
    """The same pytest 5.4 project in the Docker python harness (its setup installs pytest
    5.4.3 into the job's dependency image, offline from a host wheelhouse): reproduced by
    id, the real fix `fixed`."""
    import uuid

    from patchheal.harness.definitions import load_harness
    from patchheal.harness.docker.harness import DockerHarness

    repo = make_repo(OLD_PYTEST_PROJECT)
    # A nonce: another session's dependency image must not stand in for this one.
    setup = [f"pip install pytest==5.4.3 && echo {uuid.uuid4().hex}"]
    harness = DockerHarness(load_harness("python"), job_id=f"oldpytest-{repo.name}", setup=setup)
    try:
        _old_pytest_reproduced_then_fixed(harness, repo)
    finally:
        dependency_image = harness.run_image(repo)
        harness.close()
        containers.remove_image(harness.client, dependency_image)
