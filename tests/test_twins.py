"""The impossible twin run (loop/twins.py, collectors/patchheal_twin.py), with real runs of pytest.

A real project in a git repository, its failing step reproduced, a candidate
written into the tree and verified by the real `verify()` in the local harness.
"""

from __future__ import annotations

import os
from pathlib import Path
from random import Random

import pytest

from patchheal.config import BudgetSpec, StepSpec
from patchheal.harness.local.harness import LocalHarness
from patchheal.loop.reproduce import reproduce
from patchheal.loop.twinplan import MAX_CHILDREN, expand
from patchheal.loop.twins import TwinRun
from patchheal.loop.verification import verify
from patchheal.models import CommandResult, Outcome, TestResults, Verdict
from patchheal.workspace import inplace
from tests.verdict_battery import FIXED, PROJECTS, Case, build

PY = os.environ.get("PYTHON", "python3")
TEST_FILE = "tests/test_calc.py"


class CountingHarness(LocalHarness):
    """The local harness, keeping each run's command result (the twin's included)."""

    def __init__(self) -> None:
        super().__init__()
        self.results: list[CommandResult] = []

    def run(self, *args: object, **kwargs: object) -> CommandResult:
        result = super().run(*args, **kwargs)  # type: ignore[arg-type]
        self.results.append(result)
        return result


def _verify(tmp_path: Path, calc: str, harness: LocalHarness, runs: int = 2) -> tuple:  # type: ignore[type-arg]
    import sys

    project = PROJECTS["pytest-s"]
    repo = build(Case("x", "pytest-s", {}, True, ""), tmp_path)
    step = StepSpec(name="unit", command=project.command.format(python=sys.executable))
    budget = BudgetSpec(step_timeout_seconds=120, idle_timeout_seconds=60, verify_runs=runs)
    gate = reproduce(harness, step, repo, budget, regression=())
    assert gate.failure is not None
    (repo / "calc.py").write_text(calc)
    stat = (repo / TEST_FILE).stat()
    before = (inplace.read(repo, TEST_FILE), stat.st_ino, stat.st_ctime_ns)
    outcome, reason, log = verify(
        harness,
        step,
        repo,
        budget,
        baseline=gate.verdict,
        failure=gate.failure,
        regression=(),
        regression_baseline={},
    )
    return outcome, reason, log, repo, before


@pytest.mark.slow
def test_a_real_fix_passes_and_the_test_file_is_never_touched(tmp_path: Path) -> None:
    """The twin ran (one more run than verify_runs, its test failing by id) and the test
    file was never written: its bytes, modification and change times and inode are those
    it had before verification (the twin is made in the step's memory)."""
    harness = CountingHarness()
    outcome, reason, _, repo, (before, inode, ctime) = _verify(tmp_path, FIXED, harness)
    assert outcome is Outcome.FIXED, reason
    assert "impossible twin failed as it must" in reason
    verification = harness.results[-3:]  # after the reproduction's runs
    twins = [r for r in verification if r.exit_code != 0]
    assert len(twins) == 1
    assert twins[0].tests is not None
    assert twins[0].tests.outcomes["tests/test_calc.py::test_add"] == "failed"
    after = inplace.read(repo, TEST_FILE)
    assert after.content == before.content
    assert after.mtime_ns == before.mtime_ns
    assert (repo / TEST_FILE).stat().st_ino == inode
    assert (repo / TEST_FILE).stat().st_ctime_ns == ctime  # never written, not even put back


@pytest.mark.slow
def test_the_twin_runs_only_after_a_pass(tmp_path: Path) -> None:
    """Cost: a candidate whose first run fails gets no twin (one run); one that passes
    gets exactly one more run than `verify_runs`."""
    failing = CountingHarness()
    outcome, _, log, _, _ = _verify(tmp_path / "a", FIXED.replace("a + b", "a * b"), failing, 1)
    assert outcome is Outcome.NO_EFFECT
    assert log.count("$ ") == 1
    passing = CountingHarness()
    outcome, reason, _, _, _ = _verify(tmp_path / "b", FIXED, passing, 1)
    assert outcome is Outcome.FIXED, reason
    assert len(passing.results) - len(failing.results) == 1


def test_the_twin_runs_after_a_passing_run_chosen_at_random() -> None:
    """The twin follows any of the verification runs, chosen at random (a candidate that
    counts runs guesses it once in verify_runs), never before the first (which tells
    the tests a module that failed to collect stands for)."""
    budget = BudgetSpec(verify_runs=3)
    places = {
        TwinRun(
            LocalHarness(),
            StepSpec(name="s", command="true"),
            Path(),
            budget,
            baseline=Verdict(passed=False, reason=""),
            failure=_failure(),
            rng=Random(seed),
        ).at
        for seed in range(40)
    }
    assert places == {1, 2, 3}


def _failure():  # type: ignore[no-untyped-def]
    from patchheal.models import Failure

    return Failure(fingerprint="f", failing_tests=("t.py::test_a",))


def test_a_collection_error_stands_for_its_passing_tests_bounded() -> None:
    outcomes = {f"t.py::test_{n}": "passed" for n in range(50)} | {"t.py::test_x": "failed"}
    first = TestResults(outcomes=outcomes)
    tests = expand(["t.py", "u.py::test_kept"], first, Random(0))
    assert len(tests) == MAX_CHILDREN + 1
    assert "t.py::test_x" not in tests
    assert tests[-1] == "u.py::test_kept"
    assert expand(["t.py::test_1"], None, Random(0)) == ["t.py::test_1"]


def test_a_link_planted_in_the_tree_is_never_followed(tmp_path: Path) -> None:
    """A step that turned the test file (or its directory) into a link to a host file:
    the twin's write and restore refuse it or replace the link, the target is untouched."""
    tree, outside = tmp_path / "tree", tmp_path / "host.txt"
    (tree / "tests").mkdir(parents=True)
    outside.write_text("host\n")
    target = tree / TEST_FILE
    target.write_text("def test_a():\n    assert True\n")
    saved = inplace.read(tree, TEST_FILE)
    target.unlink()
    target.symlink_to(outside)
    with pytest.raises(inplace.UnsafePath):
        inplace.read(tree, TEST_FILE)
    inplace.write(tree, saved, saved.content)  # the restore: the link goes, the file is back
    assert not target.is_symlink()
    assert target.read_bytes() == saved.content
    assert outside.read_text() == "host\n"
    (tree / "tests").rename(tree / "moved")
    (tree / "tests").symlink_to(tree / "moved")
    with pytest.raises(inplace.UnsafePath):
        inplace.write(tree, saved, b"changed")
    with pytest.raises(inplace.UnsafePath):
        inplace.read(tree, "../host.txt")


def _twin_result(
    exit_code: int | None, outcomes: dict[str, str] | None, **kw: object
) -> CommandResult:
    tests = TestResults(outcomes=outcomes, runners=("pytest",)) if outcomes is not None else None
    return CommandResult(
        command="pytest", exit_code=exit_code, output="", duration_seconds=1.0, tests=tests, **kw
    )


def test_the_twin_counts_as_passed_only_when_honest_code_could_not_have_passed() -> None:
    """Passed: a protected test passed by id, or exit 0 without a protected test seen
    failing. Not passed: failures by id (also under `|| true`), a timeout."""
    from patchheal.verdict.twin import twin_passed

    protected = ["t.py::test_a"]
    assert twin_passed(_twin_result(1, {"t.py::test_a": "failed"}), protected) == ""
    assert twin_passed(_twin_result(0, {"t.py::test_a": "failed"}), protected) == ""
    assert twin_passed(_twin_result(None, None, timed_out="wall"), protected) == ""
    assert "passed by id" in twin_passed(_twin_result(1, {"t.py::test_a": "passed"}), protected)
    # Another test of the file passing is no pass of the twin's: only protected tests changed.
    other = {"t.py::test_a": "failed", "t.py::test_b": "passed"}
    assert twin_passed(_twin_result(1, other), protected) == ""
    assert twin_passed(_twin_result(0, None), protected) == "the twin run exited 0"
    assert twin_passed(_twin_result(0, {}), protected) == "the twin run exited 0"


LINKING_FIX = (
    "import os\n"
    "_test = os.path.join('tests', 'test_calc.py')\n"
    "if not os.path.islink(_test):\n"
    "    os.replace(_test, os.path.join('tests', 'kept.py.txt'))\n"
    "    os.symlink('kept.py.txt', _test)\n\n" + FIXED
)


@pytest.mark.slow
def test_a_test_file_turned_into_a_link_by_the_step_is_refused(tmp_path: Path) -> None:
    """A step that makes the protected test file a link (so that no twin can be written
    through it) does not get a verdict without a twin: it is refused."""
    outcome, reason, *_ = _verify(tmp_path, LINKING_FIX, CountingHarness(), 2)
    # Refused by whichever line sees it first: the tracked-file watch of the run that made
    # the link (before the twin), else the twin, which will not write through it.
    assert outcome in {Outcome.REJECTED_ORACLE, Outcome.REJECTED_TRIPWIRE}, reason
    assert "protected test file was replaced" in reason or "tests/test_calc.py" in reason


def test_the_plan_names_the_line_each_test_failed_at(tmp_path: Path) -> None:
    """The reproduced failure's frames (innermost in the test's own function, its file named
    relative or absolute) give the twin the assertion to change; a frame of another
    function, or none, gives no line."""
    from patchheal.loop.twinplan import plan
    from patchheal.models import Frame

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_k.py").write_text(
        "def helper():\n    assert True\n\n\ndef test_k():\n    assert 1\n    assert helper()\n"
    )
    frames = (
        Frame(file="/ci/build/tests/test_k.py", function="test_k", line=6),
        Frame(file="tests/test_k.py", function="test_k", line=7),
        Frame(file="tests/test_k.py", function="helper", line=2),
    )
    made = plan(tmp_path, ["tests/test_k.py::test_k"], {}, frames)
    assert [t.failed_at for t in made.files["tests/test_k.py"]] == [7]
    made = plan(tmp_path, ["tests/test_k.py::test_k"], {}, frames[2:])
    assert [t.failed_at for t in made.files["tests/test_k.py"]] == [0]
