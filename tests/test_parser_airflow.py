"""Airflow's output parsed into the failure: the task as the test id, its exception, its frames.

The inputs are real output of the airflow harness's image (Airflow 2.10.5,
Python 3.11) on examples/airflow, captured with `patchheal harness run
airflow --repo ORDERS --ref REF -- airflow ...`: the task failing at the base
commit, and the DAG files after the first candidate (which renames a helper
that another DAG imports).
"""

from __future__ import annotations

from pathlib import Path

from patchheal.failure import analysis
from patchheal.failure.parsers import airflow

DATA = Path(__file__).parent / "data" / "airflow"
TASK_TEST = "airflow tasks test daily_revenue summarize 2026-01-05"


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_a_failed_task_is_its_exception_with_the_task_as_the_test_id() -> None:
    failure = analysis.from_text(_read("tasks_test_value_error.txt"), command=TASK_TEST)
    assert failure.source == "airflow"
    assert failure.failing_tests == ("daily_revenue.summarize",)
    assert failure.error_type == "ValueError"
    assert failure.message == "time data '<ts>' does not match format '%Y-%m-%d %H:%M:%S'"
    project = [(f.file, f.function) for f in failure.project_frames]
    assert project == [
        ("dags/daily_revenue.py", "summarize"),
        ("dags/shop/orders.py", "orders_on"),
        ("dags/shop/orders.py", "<listcomp>"),
        ("dags/shop/orders.py", "parse_order_time"),
    ]
    # The task's own traceback, not Airflow's CLI re-raising it (whose first frame is bin/airflow).
    assert all("bin/airflow" not in f.file for f in failure.frames)
    assert "Marking task as FAILED. dag_id=daily_revenue, task_id=summarize" in failure.summary


def test_the_fingerprint_ignores_run_ids_and_timestamps_but_not_the_task() -> None:
    text = _read("tasks_test_value_error.txt")
    first = analysis.from_text(text, command=TASK_TEST).fingerprint
    later = text.replace("2026-11-23T13:10", "2027-02-01T08:44").replace("13:10:", "08:44:")
    assert analysis.from_text(later, command=TASK_TEST).fingerprint == first
    other_task = text.replace("task_id=summarize", "task_id=summarize_eu")
    assert analysis.from_text(other_task, command=TASK_TEST).fingerprint != first


def test_a_mapped_task_instance_keeps_its_index() -> None:
    text = _read("tasks_test_value_error.txt").replace(
        "task_id=summarize, run_id", "task_id=summarize, map_index=2, run_id"
    )
    assert airflow.parse(text).failing_tests == ["daily_revenue.summarize[2]"]


def test_the_parse_check_names_each_dag_file_that_does_not_import() -> None:
    failure = analysis.from_text(
        _read("list_import_errors_plain.txt"), command="airflow dags list-import-errors -o plain"
    )
    assert failure.source == "airflow"
    assert failure.failing_tests == ("dags/weekly_report.py",)
    assert failure.error_type == "ImportError"
    assert failure.message.startswith("cannot import name 'parse_order_time' from 'shop.orders'")
    assert [(f.file, f.function) for f in failure.project_frames] == [
        ("dags/weekly_report.py", "<module>")
    ]


def test_the_table_output_reads_like_the_plain_one() -> None:
    plain = _read("list_import_errors_plain.txt")
    lines = plain.split("\n")
    header = next(i for i, line in enumerate(lines) if line.startswith("filepath"))
    width = lines[header + 1].index("Traceback")
    table = [
        f"{line[:width].rstrip():<{width}}| {line[width:]}" if line.strip() else line
        for line in lines[header + 1 :]
    ]
    parsed = airflow.parse("\n".join(lines[: header + 1] + table))
    assert parsed.failing_tests == ["dags/weekly_report.py"]
    assert parsed.error_type == "ImportError"
    command = "airflow dags list-import-errors"
    assert (
        analysis.from_text("\n".join(table), command=command).fingerprint
        == analysis.from_text(plain, command=command).fingerprint
    )


def test_a_task_of_a_dag_that_does_not_parse_is_the_import_error() -> None:
    """`tasks test` of a DAG whose file fails to import ends in Airflow's 'could not be
    found'; the cause worth fixing is the import error the DagBag logged."""
    failure = analysis.from_text(
        _read("tasks_test_dag_import_error.txt"),
        command="airflow tasks test weekly_report last_order 2026-01-05",
    )
    assert failure.source == "airflow"
    assert failure.failing_tests == ("dags/weekly_report.py",)
    assert failure.error_type == "ImportError"
    parse_check = analysis.from_text(
        _read("list_import_errors_plain.txt"), command="airflow dags list-import-errors -o plain"
    )
    assert failure.fingerprint == parse_check.fingerprint


def test_a_dag_folder_of_another_name_keeps_its_name_in_the_test_id() -> None:
    text = _read("tasks_test_dag_import_error.txt").replace("/workspace/dags", "/srv/etl/pipelines")
    assert "Filling up the DagBag from /srv/etl/pipelines" in text
    parsed = airflow.parse(text)
    assert parsed.failing_tests == ["pipelines/weekly_report.py"]


def test_output_without_airflow_failures_is_left_to_the_other_parsers() -> None:
    assert not airflow.parse("Task failed with exception\nnothing else\n").found
    failure = analysis.from_text(
        'Traceback (most recent call last):\n  File "app/x.py", line 3, in f\nKeyError: 1\n',
        command="python -m app",
    )
    assert failure.source == "traceback"
