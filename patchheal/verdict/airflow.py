"""Airflow's own word on a task, which its exit code does not give.

`airflow tasks test` exits 0 when the task raised `AirflowSkipException`
(measured on 2.10.5: "Marking task as SKIPPED", exit 0), so a patch that skips
the failing task would look fixed. Airflow logs the state it gave each task
instance (`Marking task as SUCCESS. dag_id=D, task_id=T, ...`); a run that
exited 0 passes only if every originally failing task (`D.T`, `D.T[N]`) was
marked SUCCESS in that run. A task that never got a mark (a patch that ends the
process from inside the task) fails too. The mark is text the step prints, so a
patch that prints a forged one is not caught here (see docs/verdict.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from patchheal.models import Verdict

_MARKED = re.compile(
    r"Marking task as (?P<state>[A-Z_]+)\. dag_id=(?P<dag>[\w.-]+), "
    r"task_id=(?P<task>[\w.-]+)(?:, map_index=(?P<index>-?\d+))?"
)


def task_states(output: str) -> dict[str, str]:
    """The last state Airflow marked each task instance with, by `dag.task[index]`."""
    states: dict[str, str] = {}
    for mark in _MARKED.finditer(output):
        index = mark["index"]
        suffix = f"[{index}]" if index is not None and index != "-1" else ""
        states[f"{mark['dag']}.{mark['task']}{suffix}"] = mark["state"]
    return states


def check_tasks(verdict: Verdict, output: str, tasks: Sequence[str]) -> Verdict:
    """`verdict`, or a failing one when a task among `tasks` did not succeed in `output`.

    DAG files (the parse check's test ids, `dags/x.py`) are not tasks and are left alone.
    """
    if not verdict.passed:
        return verdict
    states = task_states(output)
    wrong = [
        f"{task} was {states[task].lower()}" if task in states else f"{task} was never run"
        for task in tasks
        if "/" not in task and states.get(task) != "SUCCESS"
    ]
    if not wrong:
        return verdict
    return verdict.model_copy(
        update={
            "passed": False,
            "reason": f"exited 0 but Airflow says {', '.join(wrong)}, not success",
        }
    )
