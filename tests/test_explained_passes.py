"""pytest explains a passing assert only inside the tests whose evidence the verdict wants.

For the assertion-pass hook, pytest builds a passing assert's explanation (the `repr`
of its operands) as it would a failure's. filelock's suite measured it: an exception
group of shared leaves 25 deep compares in 0.08 s plainly and timed out at 20 s
explained, so two of its tests failed in the harness and in no plain venv. Here a
test's operand writes a file when its `repr` is taken: that file tells, without
timing anything, whether patchheal's collector made pytest explain the test.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from patchheal.config import BudgetSpec, StepSpec
from patchheal.harness.local.harness import LocalHarness
from patchheal.harness.results import twinchannel
from patchheal.loop.reproduce import reproduce
from patchheal.loop.verification import verify
from patchheal.models import Outcome, TestResults
from tests.healjobs import git

CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = """
    from calc import add


    def test_add():
        total = add(2, 2)
        assert total == 4
"""
# Its operand's repr leaves a mark: taken only to explain the passing assert.
TEST_LOUD = """
    from pathlib import Path


    class Loud:
        def __repr__(self):
            Path(__file__).with_name("explained.txt").write_text("explained")
            return "Loud()"


    def test_loud():
        assert Loud() is not None
"""
COMMAND = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py test_loud.py"


def _repo(tmp_path: Path, calc: str = CALC) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    files = {"calc.py": calc, "test_calc.py": TEST_CALC, "test_loud.py": TEST_LOUD}
    for rel, text in files.items():
        (repo / rel).write_text(textwrap.dedent(text).lstrip("\n"))
    (repo / ".gitignore").write_text("explained.txt\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    return repo


def _run(repo: Path, wanted: Sequence[str] | None) -> TestResults:
    harness = LocalHarness()
    if wanted is None:  # the reproduction, a regression step: no evidence wanted
        result = harness.run(COMMAND, repo, timeout=120, idle_timeout=120)
    else:
        with twinchannel.wanting(wanted):
            result = harness.run(COMMAND, repo, timeout=120, idle_timeout=120)
    assert result.tests is not None, result.output
    return result.tests


@pytest.mark.parametrize(
    ("wanted", "explained", "evidence"),
    [
        # A verification of test_calc.py's test: its assert is seen, the other not explained.
        (["test_calc.py"], False, {"test_calc.py::test_add": ("test_calc.py:6",)}),
        # Wanted there, the other test's passing assert is explained: the mark is made.
        (["test_loud.py"], True, {"test_loud.py::test_loud": ("test_loud.py:11",)}),
        # Nothing wanted: nothing explained, nothing seen.
        (None, False, {}),
    ],
)
def test_a_passing_assert_is_explained_only_in_a_wanted_test(
    tmp_path: Path,
    wanted: list[str] | None,
    explained: bool,
    evidence: dict[str, tuple[str, ...]],
) -> None:
    repo = _repo(tmp_path, calc="def add(a, b):\n    return a + b\n")
    tests = _run(repo, wanted)
    assert tests.outcomes == {
        "test_calc.py::test_add": "passed",
        "test_loud.py::test_loud": "passed",
    }
    assert (repo / "explained.txt").exists() is explained
    assert tests.asserted == evidence


def test_a_real_fix_is_verified_with_its_evidence_and_the_rest_of_the_suite_unexplained(
    tmp_path: Path,
) -> None:
    """Reproduction, both verification runs and the impossible twin: the fix is `fixed`
    (the protected test's assert seen from its frame in each run), and no run explained
    the neighbour's passing assert."""
    repo = _repo(tmp_path)
    budget = BudgetSpec(step_timeout_seconds=60, idle_timeout_seconds=60)
    step = StepSpec(name="unit", command=COMMAND)
    harness = LocalHarness()
    gate = reproduce(harness, step, repo, budget, regression=())
    assert gate.failure is not None
    assert not gate.verdict.passed
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    outcome, reason, _ = verify(
        harness,
        step,
        repo,
        budget,
        baseline=gate.verdict,
        failure=gate.failure,
        regression=(),
        regression_baseline=gate.regression_baseline,
        changed=("calc.py",),
    )
    assert outcome is Outcome.FIXED, reason
    assert "impossible twin failed as it must" in reason
    assert not (repo / "explained.txt").exists()


# Writes whether pytest rewrote its module for the assertion-pass hook: the rewritten code
# then calls `_call_assertion_pass` (a name of its code object), and to make that code
# pytest tokenizes the module's whole source.
TEST_SHAPE = """
    from pathlib import Path


    def test_shape():
        assert 1 + 1 == 2
        names = test_shape.__code__.co_names
        Path(__file__).with_name("shape.txt").write_text(str("_call_assertion_pass" in names))
"""


@pytest.mark.parametrize(
    ("wanted", "rewritten_for_the_hook"),
    [(["test_shape.py"], True), (["test_calc.py"], False), (None, False)],
)
def test_only_a_wanted_module_is_rewritten_for_the_assertion_pass_hook(
    tmp_path: Path, wanted: list[str] | None, rewritten_for_the_hook: bool
) -> None:
    """Regression (cost): the hook was on for every module of the session, so each run of
    a step tokenized every test module's source for each assert's text; click's suite
    took 1.20x a plain run's CPU with patchheal, 1.13x with the hook only where wanted."""
    repo = _repo(tmp_path, calc="def add(a, b):\n    return a + b\n")
    (repo / "test_shape.py").write_text(textwrap.dedent(TEST_SHAPE).lstrip("\n"))
    command = f"{sys.executable} -m pytest -q -p no:cacheprovider test_shape.py test_calc.py"
    harness = LocalHarness()
    if wanted is None:
        result = harness.run(command, repo, timeout=120, idle_timeout=120)
    else:
        with twinchannel.wanting(wanted):
            result = harness.run(command, repo, timeout=120, idle_timeout=120)
    assert result.tests is not None, result.output
    assert result.tests.outcomes["test_shape.py::test_shape"] == "passed", result.output
    assert (repo / "shape.txt").read_text() == str(rewritten_for_the_hook)
