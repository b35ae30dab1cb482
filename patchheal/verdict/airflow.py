"""Airflow's own word on a task, which its exit code does not give.

`airflow tasks test` exits 0 when the task raised `AirflowSkipException`
(measured on 2.10.5: "Marking task as SKIPPED", exit 0), so a patch that skips
the failing task would look fixed. A run that exited 0 passes only if the
harness's Airflow collector (`collectors/patchheal_airflow.py`) left a
signed, finished record in which every originally failing task instance
(`D.T`, `D.T[N]`) is `passed`: Airflow set it SUCCESS and its callable
returned. The line Airflow prints (`Marking task as SUCCESS. dag_id=D,
task_id=T, ...`) is step output a patch can forge, so it is a cross-check only:
a run whose last mark of the task is not SUCCESS fails, a mark never makes a
run pass. See docs/verdict.md for what an in-process attacker can still do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from patchheal.models import TestResults, Verdict

# 2.10.5's `_log_state`: "... task_id=T, run_id=R, map_index=N, execution_date=..." (map_index
# only for a mapped instance, and after the run id).
_MARKED = re.compile(
    r"Marking task as (?P<state>[A-Z_]+)\. dag_id=(?P<dag>[\w.-]+), "
    r"task_id=(?P<task>[\w.-]+)(?:, run_id=[^,\s]*)?(?:, map_index=(?P<index>-?\d+))?"
)


def task_states(output: str) -> dict[str, str]:
    """The last state Airflow marked each task instance with, by `dag.task[index]`."""
    states: dict[str, str] = {}
    for mark in _MARKED.finditer(output):
        index = mark["index"]
        suffix = f"[{index}]" if index is not None and index != "-1" else ""
        states[f"{mark['dag']}.{mark['task']}{suffix}"] = mark["state"]
    return states


def _signed(task: str, results: TestResults | None) -> str | None:
    """Why the results channel does not show `task` passing; None when it does."""
    if results is None or "airflow" not in results.runners:
        return (
            f"there is no signed Airflow record of {task} (the run was cut short, "
            "e.g. os._exit, or the collector was bypassed)"
        )
    if results.rejected:
        return f"results files not written by the collector were found: {results.rejected[0]}"
    if results.tampered:
        return f"the Airflow collector found its hooks tampered with: {results.tampered[0]}"
    outcome = results.outcomes.get(task)
    if outcome is None:
        return f"the signed Airflow record has no run of {task}"
    if outcome == "error":
        return (
            f"Airflow's signed record says {task} did not return from its callable "
            "(sys.exit inside the task, or a callback changed the state)"
        )
    return None if outcome == "passed" else f"Airflow says {task} was {outcome}, not success"


def _printed(task: str, states: dict[str, str]) -> str | None:
    """Why the printed marks contradict a pass of `task`; None when they agree."""
    if task not in states:
        return f"Airflow printed no state for {task} (the task may never have run)"
    if states[task] != "SUCCESS":
        return f"Airflow printed {task} as {states[task].lower()}, not success"
    return None


def check_tasks(
    verdict: Verdict, output: str, tasks: Sequence[str], results: TestResults | None
) -> Verdict:
    """`verdict`, or a failing one when a task among `tasks` did not succeed.

    Success is read from `results` (the signed record); the marks in `output`
    can only refute it. DAG files (the parse check's ids, `dags/x.py`) are not
    tasks and are left alone.
    """
    if not verdict.passed:
        return verdict
    states = task_states(output)
    wrong: list[str] = []
    for task in (t for t in tasks if "/" not in t):
        why = _signed(task, results) or _printed(task, states)
        if why:
            wrong.append(why)
    if not wrong:
        return verdict
    return verdict.model_copy(
        update={"passed": False, "reason": f"exited 0 but {'; '.join(wrong)}"}
    )
