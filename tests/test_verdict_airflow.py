"""A skipped Airflow task is not a fixed one, although `airflow tasks test` exits 0 for it.

The outputs are real (`patchheal harness run airflow ...` on examples/airflow):
the task skipped by the example's second candidate, and the task succeeding
after the fix. A pass needs the collector's signed record (`results`, as
`ResultsChannel.collect` returns it); the printed mark can only refute it.
The same checks against real Airflow runs: tests/test_airflow_results.py.
"""

from __future__ import annotations

from pathlib import Path

from patchheal.models import CommandResult, TestResults
from patchheal.verdict.airflow import check_tasks, task_states
from patchheal.verdict.judge import judge

DATA = Path(__file__).parent / "data" / "airflow"
TASK = "daily_revenue.summarize"


def _signed(outcome: str, **extra: tuple[str, ...]) -> TestResults:
    return TestResults(outcomes={TASK: outcome}, runners=("airflow",), **extra)


def _exit0(name: str, tests: TestResults | None = None) -> tuple[str, CommandResult]:
    output = (DATA / name).read_text(encoding="utf-8")
    return output, CommandResult(
        command="airflow tasks test", exit_code=0, output=output, duration_seconds=5, tests=tests
    )


def test_a_skipped_task_exits_0_and_is_refused() -> None:
    output, result = _exit0("tasks_test_skipped.txt")
    plain = judge(result, expected_tests=(TASK,))
    assert plain.passed  # the exit code alone says fixed: that is the hole
    checked = check_tasks(plain, output, (TASK,), _signed("skipped"))
    assert not checked.passed
    assert checked.reason == (
        "exited 0 but Airflow says daily_revenue.summarize was skipped, not success"
    )


def test_a_task_that_succeeded_passes_only_with_a_signed_record() -> None:
    output, result = _exit0("tasks_test_success.txt", _signed("passed"))
    assert task_states(output) == {TASK: "SUCCESS"}
    assert check_tasks(judge(result, expected_tests=(TASK,)), output, (TASK,), result.tests).passed
    # The same real SUCCESS line without the record (a forged line, then os._exit(0)).
    refused = check_tasks(judge(result), output, (TASK,), None)
    assert not refused.passed
    assert "there is no signed Airflow record of daily_revenue.summarize" in refused.reason


def test_untrusted_or_incomplete_records_do_not_pass() -> None:
    output, result = _exit0("tasks_test_success.txt")
    verdict = judge(result)
    cases = {
        "the Airflow collector found its hooks tampered with: x": _signed(
            "passed", tampered=("x",)
        ),
        "results files not written by the collector were found: f.json": _signed(
            "passed", rejected=("f.json",)
        ),
        "did not return from its callable": _signed("error"),
        "the signed Airflow record has no run of": TestResults(
            outcomes={"daily_revenue.other": "passed"}, runners=("airflow",)
        ),
        "there is no signed Airflow record": TestResults(
            outcomes={TASK: "passed"}, runners=("pytest",)
        ),
    }
    for expected, results in cases.items():
        checked = check_tasks(verdict, output, (TASK,), results)
        assert not checked.passed, expected
        assert expected in checked.reason, (expected, checked.reason)


def test_a_printed_mark_contradicting_the_record_fails() -> None:
    output, result = _exit0("tasks_test_skipped.txt")
    checked = check_tasks(judge(result), output, (TASK,), _signed("passed"))
    assert checked.reason == (
        "exited 0 but Airflow printed daily_revenue.summarize as skipped, not success"
    )
    quiet = "\n".join(line for line in output.splitlines() if "Marking task" not in line)
    checked = check_tasks(judge(result), quiet, (TASK,), _signed("passed"))
    assert "Airflow printed no state for daily_revenue.summarize" in checked.reason


def test_dag_files_are_not_tasks() -> None:
    _, result = _exit0("tasks_test_success.txt")
    # The parse check's ids are DAG files: nothing marks them, and a clean parse passes.
    assert check_tasks(judge(result), "No data found", ("dags/weekly_report.py",), None).passed


def test_the_last_mark_of_a_mapped_task_instance_counts() -> None:
    # 2.10.5's format: map_index comes after run_id (taskinstance._log_state).
    run = "run_id=manual__2026, "
    output = (
        f"Marking task as FAILED. dag_id=d, task_id=t, {run}map_index=1, execution_date=x\n"
        f"Marking task as SUCCESS. dag_id=d, task_id=t, {run}map_index=0, execution_date=x\n"
        f"Marking task as SUCCESS. dag_id=d, task_id=t, {run}map_index=1, execution_date=x\n"
        f"Marking task as SKIPPED. dag_id=d, task_id=u, {run}execution_date=x\n"
    )
    assert task_states(output) == {"d.t[0]": "SUCCESS", "d.t[1]": "SUCCESS", "d.u": "SKIPPED"}
