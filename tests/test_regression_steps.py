"""Regression steps: the job's [regression] command plus its harness's, compared per DAG file.

Real processes in the local harness over a real git worktree; the parse check's
output is real output of the airflow harness's image (tests/data/airflow: one
DAG file broken at base, then a second one broken by a patch, captured from
tests/test_airflow_parse_regression.py's run).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from patchheal.config import BudgetSpec, RegressionSpec, StepSpec
from patchheal.harness.definitions import load_harness
from patchheal.harness.local.harness import LocalHarness
from patchheal.loop.reproduce import reproduce
from patchheal.loop.verification import verify
from patchheal.models import Outcome

DATA = Path(__file__).parent / "data" / "airflow"
PARSE_CHECK = "airflow dags list-import-errors -o plain"
# The parse check's output at base: dags/legacy_export.py does not import.
AT_BASE = "list_import_errors_one_at_base.txt"
# After the rename candidate: dags/weekly_report.py does not import either.
BOTH = "list_import_errors_two_files.txt"
# The bundled example's rename at a clean base: only dags/weekly_report.py.
WEEKLY = "list_import_errors_plain.txt"


def test_the_job_command_comes_first_and_a_command_named_twice_runs_once() -> None:
    harness = (PARSE_CHECK,)
    assert RegressionSpec().steps(harness) == (PARSE_CHECK,)
    assert RegressionSpec(command="pytest -q").steps(harness) == ("pytest -q", PARSE_CHECK)
    spaced = "airflow  dags list-import-errors   -o plain"
    assert RegressionSpec(command=spaced).steps(harness) == (spaced,)
    assert RegressionSpec(command="pytest -q", harness=False).steps(harness) == ("pytest -q",)
    assert RegressionSpec(harness=False).steps(harness) == ()
    assert RegressionSpec(command="pytest -q").steps(()) == ("pytest -q",)


def test_the_airflow_harness_adds_its_parse_check_and_the_others_add_nothing() -> None:
    assert load_harness("airflow").regression == (PARSE_CHECK,)
    assert load_harness("python").regression == ()
    assert LocalHarness().regression == ()


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "ok.txt").write_text("fine\n")
    # A stand-in for the image's `airflow`: prints the parse check's output that parse.txt
    # holds, exiting 1 as the real one does on any import error.
    (tree / "bin").mkdir()
    (tree / "bin" / "airflow").write_text("#!/bin/sh\ncat parse.txt\nexit 1\n")
    (tree / "bin" / "airflow").chmod(0o755)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args],
            cwd=tree, check=True,
        )  # fmt: skip
    return tree


def _parse_output(tree: Path, name: str) -> None:
    shutil.copyfile(DATA / name, tree / "parse.txt")


# The step fails at base until `fixed` exists; the parse check prints what parse.txt holds.
STEP = StepSpec(name="task", command="test -e fixed || { echo 'ValueError: bad'; exit 1; }")
CHECK = "bin/airflow dags list-import-errors -o plain"
BUDGET = BudgetSpec(verify_runs=1, flaky_reruns=0, step_timeout_seconds=30)


def _heal(tmp_path: Path, base: str, after: str, regression: tuple[str, ...]) -> tuple[str, str]:
    tree = _tree(tmp_path)
    harness = LocalHarness()
    _parse_output(tree, base)
    repro = reproduce(harness, STEP, tree, BUDGET, regression=regression)
    assert repro.failure is not None
    assert not repro.verdict.passed
    (tree / "fixed").write_text("")
    _parse_output(tree, after)
    outcome, reason, _ = verify(
        harness, STEP, tree, BUDGET,
        baseline=repro.verdict, failure=repro.failure,
        regression=regression, regression_baseline=repro.regression_baseline,
    )  # fmt: skip
    return outcome.value, reason


def test_a_dag_broken_at_base_and_still_broken_is_not_the_patchs_regression(
    tmp_path: Path,
) -> None:
    outcome, reason = _heal(tmp_path, AT_BASE, AT_BASE, (CHECK,))
    assert outcome == Outcome.FIXED.value, reason
    assert "did not get worse" in reason


def test_one_more_broken_dag_is_a_regression_named_by_the_new_file(tmp_path: Path) -> None:
    outcome, reason = _heal(tmp_path, AT_BASE, BOTH, (CHECK,))
    assert outcome == Outcome.REGRESSION.value, reason
    assert "newly failing: dags/weekly_report.py" in reason
    # The file that was broken at base is not what the patch broke.
    assert "legacy_export" not in reason


def test_a_dag_fixed_while_another_breaks_is_a_regression(tmp_path: Path) -> None:
    outcome, reason = _heal(tmp_path, WEEKLY, AT_BASE, (CHECK,))
    assert outcome == Outcome.REGRESSION.value, reason
    assert "newly failing: dags/legacy_export.py" in reason


def test_a_patch_that_also_fixes_the_dag_broken_at_base_is_fixed(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    harness = LocalHarness()
    _parse_output(tree, AT_BASE)
    repro = reproduce(harness, STEP, tree, BUDGET, regression=(CHECK,))
    assert repro.failure is not None
    (tree / "fixed").write_text("")
    (tree / "bin" / "airflow").write_text("#!/bin/sh\necho 'No data found'\n")
    outcome, reason, log = verify(
        harness, STEP, tree, BUDGET,
        baseline=repro.verdict, failure=repro.failure,
        regression=(CHECK,), regression_baseline=repro.regression_baseline,
    )  # fmt: skip
    assert outcome is Outcome.FIXED, reason
    assert f"$ {CHECK}\nNo data found" in log


@pytest.mark.parametrize("order", ["job first", "harness first"])
def test_every_regression_step_is_judged_against_its_own_baseline(
    tmp_path: Path, order: str
) -> None:
    """A job command that passes and the parse check that fails at base: the patch that
    breaks one more DAG file is caught whichever of the two runs first."""
    steps = ("test -e ok.txt", CHECK)
    outcome, reason = _heal(tmp_path, AT_BASE, BOTH, steps if order == "job first" else steps[::-1])
    assert outcome == Outcome.REGRESSION.value, reason
    assert "newly failing: dags/weekly_report.py" in reason
