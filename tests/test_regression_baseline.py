"""A regression step's baseline from two runs of the base (`steadied`): ids the base
itself does not give again (a parameter made from the clock, a flaky test) are not
blamed on a patch by id, and a patch that breaks or hides such a test is still caught.

Real pytest runs in the local harness over a real git worktree, through the collectors
(by-id results), as the loop reproduces and verifies.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patchheal.config import BudgetSpec, StepSpec
from patchheal.harness.local.harness import LocalHarness
from patchheal.loop.reproduce import reproduce
from patchheal.loop.verification import verify
from patchheal.models import Outcome, TestCounts, TestResults, Verdict
from patchheal.verdict.judge import worse
from patchheal.verdict.regression import steadied
from tests.conftest import RepoFactory

CALC = """\
def add(a, b):
    return a - b


def mul(a, b):
    return a * b


def cases():
    return [(2, 3, 6), (3, 3, 9)]
"""
FIXED = CALC.replace("return a - b", "return a + b")

TEST_ADD = """\
from calc import add


def test_add():
    assert add(2, 3) == 5
"""

# Each run makes its own ids: the parameter is the time the module was imported.
TEST_STAMPED = """\
import time

import pytest

from calc import cases, mul

NOW = time.strftime("%H:%M:%S") + f".{time.time_ns() % 10**9:09d}"


@pytest.mark.parametrize("when", [NOW])
@pytest.mark.parametrize("a,b,product", cases())
def test_mul_at(a, b, product, when):
    assert mul(a, b) == product


def test_mul():
    assert mul(4, 5) == 20
"""

STEP = StepSpec(
    name="add", command=f"{sys.executable} -m pytest -q -p no:cacheprovider tests/test_add.py"
)
REGRESSION = (f"{sys.executable} -m pytest -q -p no:cacheprovider tests/test_stamped.py",)
BUDGET = BudgetSpec(verify_runs=1, flaky_reruns=1, step_timeout_seconds=120)


def _repo(make_repo: RepoFactory, files: dict[str, str]) -> Path:
    return make_repo({"calc.py": CALC, "tests/test_add.py": TEST_ADD, **files})


def _heal(tree: Path, candidate: str, budget: BudgetSpec = BUDGET) -> tuple[Outcome, str]:
    harness = LocalHarness()
    repro = reproduce(harness, STEP, tree, budget, regression=REGRESSION)
    assert repro.failure is not None
    assert not repro.verdict.passed
    (tree / "calc.py").write_text(candidate)
    outcome, reason, _ = verify(
        harness, STEP, tree, budget,
        baseline=repro.verdict, failure=repro.failure, changed=("calc.py",),
        regression=REGRESSION, regression_baseline=repro.regression_baseline,
    )  # fmt: skip
    return outcome, reason


def test_the_real_fix_is_fixed_though_the_regression_steps_ids_come_from_the_clock(
    make_repo: RepoFactory,
) -> None:
    outcome, reason = _heal(_repo(make_repo, {"tests/test_stamped.py": TEST_STAMPED}), FIXED)
    assert outcome is Outcome.FIXED, reason


def test_with_one_run_of_the_base_the_clocks_ids_are_lost_by_id(make_repo: RepoFactory) -> None:
    """The converse, and what `flaky_reruns = 0` gives up: one run of the base cannot tell
    an id made from the clock from a test that stopped passing."""
    tree = _repo(make_repo, {"tests/test_stamped.py": TEST_STAMPED})
    outcome, reason = _heal(tree, FIXED, BUDGET.model_copy(update={"flaky_reruns": 0}))
    assert outcome is Outcome.REGRESSION, reason
    assert "passed before, not now: tests/test_stamped.py::test_mul_at[" in reason


def test_a_fix_that_breaks_a_test_with_a_clock_made_id_is_a_regression(
    make_repo: RepoFactory,
) -> None:
    broken = FIXED.replace("return a * b", "return a * b if a != 3 else 0")
    outcome, reason = _heal(_repo(make_repo, {"tests/test_stamped.py": TEST_STAMPED}), broken)
    assert outcome is Outcome.REGRESSION, reason
    assert "passed before, fails now" in reason
    assert "test_mul_at[3-3-9-" in reason


def test_a_fix_that_makes_a_clock_made_test_vanish_is_a_regression(
    make_repo: RepoFactory,
) -> None:
    """The project's own values name the parameters: a candidate that drops one makes
    fewer tests run, which the counts see though the ids are not compared."""
    hidden = FIXED.replace("return [(2, 3, 6), (3, 3, 9)]", "return [(2, 3, 6)]")
    outcome, reason = _heal(_repo(make_repo, {"tests/test_stamped.py": TEST_STAMPED}), hidden)
    assert outcome is Outcome.REGRESSION, reason
    assert "fewer tests" in reason


def test_a_test_that_failed_in_one_run_of_the_base_is_not_blamed_on_the_fix(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    """A flaky regression test (it fails on the base's second run only, and in the
    candidate's run): the fix is `fixed`, not a regression."""
    counter = tmp_path / "runs"
    flaky = f"""\
from pathlib import Path

COUNTER = Path({str(counter)!r})


def test_sometimes():
    runs = int(COUNTER.read_text()) + 1 if COUNTER.exists() else 1
    COUNTER.write_text(str(runs))
    assert runs != 2 and runs != 3


def test_always():
    assert True
"""
    outcome, reason = _heal(_repo(make_repo, {"tests/test_stamped.py": flaky}), FIXED)
    assert counter.read_text() == "3"  # two runs of the base, the candidate's third
    assert outcome is Outcome.FIXED, reason


# -- steadied, the pure function ------------------------------------------------------


def _verdict(outcomes: dict[str, str], **counts: int) -> Verdict:
    failing = tuple(t for t, o in outcomes.items() if o in ("failed", "error"))
    return Verdict(
        passed=not failing,
        reason="r",
        counts=TestCounts(**counts),
        failing_tests=failing,
        tests=TestResults(outcomes=outcomes, runners=("pytest",)),
    )


def test_steadied_marks_what_the_two_runs_do_not_agree_on() -> None:
    first = _verdict({"t::a": "passed", "t::b[1]": "passed", "t::c": "passed"}, passed=3)
    again = _verdict({"t::a": "passed", "t::b[2]": "passed", "t::c": "failed"}, passed=2, failed=1)
    both = steadied(first, again)
    assert both.tests is not None
    assert both.tests.unstable == ("t::b[1]", "t::c")
    assert both.tests.outcomes["t::c"] == "failed"  # the worse of the two
    assert not both.passed
    assert both.counts.passed == 2
    assert both.counts.failed == 1
    assert both.failing_tests == ("t::c",)


@pytest.mark.parametrize(
    ("after", "counts", "got_worse"),
    [
        ({"t::a": "passed", "t::b[3]": "passed", "t::c": "passed"}, {"passed": 3}, False),
        (
            {"t::a": "passed", "t::b[3]": "passed", "t::c": "failed"},
            {"passed": 2, "failed": 1},
            False,
        ),
        # No more failures than the base's worst run, but a failing id the base never had.
        (
            {"t::a": "passed", "t::b[3]": "failed", "t::c": "passed"},
            {"passed": 2, "failed": 1},
            True,
        ),
        (
            {"t::a": "failed", "t::b[3]": "passed", "t::c": "passed"},
            {"passed": 2, "failed": 1},
            True,
        ),
        ({"t::a": "passed", "t::c": "passed"}, {"passed": 2}, True),
        ({"t::b[3]": "passed", "t::c": "passed"}, {"passed": 2}, True),
    ],
    ids=[
        "new-id",
        "flaky-fails",
        "unstable-fails-newly",
        "stable-fails",
        "vanished",
        "stable-gone",
    ],
)
def test_a_steadied_baseline_compares_the_unstable_by_count_and_the_rest_by_id(
    after: dict[str, str], counts: dict[str, int], got_worse: bool
) -> None:
    first = _verdict({"t::a": "passed", "t::b[1]": "passed", "t::c": "passed"}, passed=3)
    again = _verdict({"t::a": "passed", "t::b[2]": "passed", "t::c": "failed"}, passed=2, failed=1)
    assert worse(steadied(first, again), _verdict(after, **counts))[0] is got_worse
