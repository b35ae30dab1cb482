"""A skipped Airflow task is not a fixed one, although `airflow tasks test` exits 0 for it.

The outputs are real (`patchheal harness run airflow ...` on examples/airflow):
the task skipped by the example's second candidate, and the task succeeding
after the fix.
"""

from __future__ import annotations

from pathlib import Path

from patchheal.models import CommandResult
from patchheal.verdict.airflow import check_tasks, task_states
from patchheal.verdict.judge import judge

DATA = Path(__file__).parent / "data" / "airflow"
TASK = "daily_revenue.summarize"


def _exit0(name: str) -> tuple[str, CommandResult]:
    output = (DATA / name).read_text(encoding="utf-8")
    return output, CommandResult(
        command="airflow tasks test", exit_code=0, output=output, duration_seconds=5
    )


def test_a_skipped_task_exits_0_and_is_refused() -> None:
    output, result = _exit0("tasks_test_skipped.txt")
    plain = judge(result, expected_tests=(TASK,))
    assert plain.passed  # the exit code alone says fixed: that is the hole
    checked = check_tasks(plain, output, (TASK,))
    assert not checked.passed
    assert checked.reason == (
        "exited 0 but Airflow says daily_revenue.summarize was skipped, not success"
    )


def test_a_task_that_succeeded_passes() -> None:
    output, result = _exit0("tasks_test_success.txt")
    assert task_states(output) == {TASK: "SUCCESS"}
    assert check_tasks(judge(result, expected_tests=(TASK,)), output, (TASK,)).passed


def test_a_task_with_no_mark_was_never_run_and_dag_files_are_not_tasks() -> None:
    output, result = _exit0("tasks_test_success.txt")
    quiet = "\n".join(line for line in output.splitlines() if "Marking task" not in line)
    refused = check_tasks(judge(result), quiet, (TASK,))
    assert refused.reason == (
        "exited 0 but Airflow says daily_revenue.summarize was never run, not success"
    )
    # The parse check's ids are DAG files: nothing marks them, and a clean parse passes.
    assert check_tasks(judge(result), "No data found", ("dags/weekly_report.py",)).passed


def test_the_last_mark_of_a_mapped_task_instance_counts() -> None:
    output = (
        "Marking task as FAILED. dag_id=d, task_id=t, map_index=1, run_id=r\n"
        "Marking task as SUCCESS. dag_id=d, task_id=t, map_index=0, run_id=r\n"
        "Marking task as SUCCESS. dag_id=d, task_id=t, map_index=1, run_id=r\n"
    )
    assert task_states(output) == {"d.t[0]": "SUCCESS", "d.t[1]": "SUCCESS"}
