"""Airflow's output: a failed task (`airflow tasks test`) and DAG files that do not parse.

A task that raises is logged as

    [2026-01-05T09:00:00.000+0000] {taskinstance.py:3313} ERROR - Task failed with exception
    Traceback (most recent call last):
      ...
      File "/workspace/dags/shop/orders.py", line 14, in parse_order_time
    ValueError: time data '...' does not match format '%Y-%m-%d %H:%M:%S'
    [...] {taskinstance.py:1226} INFO - Marking task as FAILED. dag_id=daily_revenue,
    task_id=summarize, ...              (one line)

and becomes the failure `ValueError` of the test id `daily_revenue.summarize` (with
`[N]` for a mapped task's index), its frames the traceback's (the DAG file and
the user's code are the project frames; Airflow's own are library frames).

A DAG file that does not import is a `Failed to import: PATH` log record with a
traceback (any command that fills a DagBag), or a row of `airflow dags
list-import-errors` (table or plain output, the traceback in the second column).
Each such file is a test id (`dags/weekly_report.py`, relative to the DAG
folder's parent when the output names it); the first one's exception is the
headline when no task failed. Airflow's own re-raise of the task's exception
through its CLI (a second traceback, all library frames) is not read.
"""

from __future__ import annotations

import re

from patchheal.failure.parsers import ParsedFailure, RawException, traceback

MARKERS = (
    "Task failed with exception",
    "Failed to import: ",
    "Marking task as FAILED",
    "Marking task as UP_FOR_RETRY",
    "list-import-errors",
)

# A log record: `[2026-01-05T09:00:00.123+0000] {file.py:12} LEVEL - message` (the
# timestamp is gone once `normalize.clean` has read the log).
_RECORD = re.compile(r"^(?:\[\d{4}-\d\d-\d\d[T ][^\]]*\]\s*)?\{[\w.-]+:\d+\}\s+[A-Z]+\s+-\s")
_TASK_FAILED = re.compile(r"\bTask failed with exception\s*$")
_MARKED = re.compile(
    r"Marking task as (?:FAILED|UP_FOR_RETRY)\. dag_id=(?P<dag>[\w.-]+), "
    r"task_id=(?P<task>[\w.-]+)(?:, map_index=(?P<index>-?\d+))?"
)
_TASK_INSTANCE = re.compile(r"<TaskInstance: (?P<dag>[\w-]+)\.(?P<task>[\w.-]+) ")
_FAILED_IMPORT = re.compile(r"\bFailed to import: (?P<path>\S+?\.py)\s*$")
# A row of `dags list-import-errors`: the file, a column separator, the traceback's first line.
_IMPORT_ROW = re.compile(
    r"^(?P<path>\S+\.py)(?P<sep>\s*\|\s|\s{2,})(?P<start>Traceback \(most recent call last\):)"
)
_DAGBAG = re.compile(r"Filling up the DagBag from (?P<folder>/\S+?)/?\s*$", re.MULTILINE)


def _record_block(lines: list[str], start: int) -> list[str]:
    """The lines after lines[start] up to the next log record: one record's traceback."""
    block: list[str] = []
    for line in lines[start + 1 :]:
        if _RECORD.match(line):
            break
        block.append(line)
    return block


def _column_block(lines: list[str], start: int, column: int) -> list[str]:
    """A list-import-errors row's second column, from lines[start] down to the next row."""
    block = [lines[start][column:]]
    for line in lines[start + 1 :]:
        if line[:column].strip() not in ("", "|") or not line.strip(" |"):
            break
        block.append(line[column:])
    return block


def _exception(block: list[str]) -> RawException | None:
    """The exception that ended the block's (last) traceback."""
    chains = traceback.parse_chains("\n".join(block))
    return chains[-1][-1] if chains else None


def _task_id(text: str) -> str:
    marked = list(_MARKED.finditer(text))
    if marked:
        last = marked[-1]
        index = last["index"]
        suffix = f"[{index}]" if index is not None and index != "-1" else ""
        return f"{last['dag']}.{last['task']}{suffix}"
    instance = _TASK_INSTANCE.search(text)
    return f"{instance['dag']}.{instance['task']}" if instance else ""


def _dag_file_id(path: str, dag_folder: str) -> str:
    """A DAG file as a stable id: relative to the DAG folder's parent (`dags/x.py`)."""
    if dag_folder and path.startswith(dag_folder.rstrip("/") + "/"):
        parent = dag_folder.rstrip("/").rsplit("/", 1)[0]
        return path[len(parent) + 1 :]
    if "/dags/" in path:
        return "dags/" + path.rsplit("/dags/", 1)[1]
    return path.rsplit("/", 1)[-1]


def _import_errors(lines: list[str], dag_folder: str) -> list[tuple[str, RawException, str]]:
    """(DAG file id, its exception, the lines read) for every DAG file that did not import."""
    found: list[tuple[str, RawException, str]] = []
    for i, line in enumerate(lines):
        block: list[str] = []
        if failed := _FAILED_IMPORT.search(line):
            path, block = failed["path"], _record_block(lines, i)
        elif row := _IMPORT_ROW.match(line):
            path, block = row["path"], _column_block(lines, i, row.start("start"))
        exc = _exception(block) if block else None
        if exc is not None:
            file_id = _dag_file_id(path, dag_folder)
            if file_id not in (seen[0] for seen in found):
                found.append((file_id, exc, "\n".join([line, *block])))
    return found


def parse(text: str) -> ParsedFailure:
    """A failed task, else the DAG files that did not import; empty when there is neither."""
    lines = text.split("\n")
    found = ParsedFailure(source="airflow")
    folder = _DAGBAG.search(text)
    imports = _import_errors(lines, folder["folder"] if folder else "")
    failed_at = [i for i, line in enumerate(lines) if _TASK_FAILED.search(line)]
    if failed_at:
        block = _record_block(lines, failed_at[-1])
        chains = traceback.parse_chains("\n".join(block))
        if chains:
            chain = chains[-1]
            found.error_type, found.message = chain[-1].error_type, chain[-1].message
            found.frames, found.chain = chain[-1].frames, chain[:-1]
            task = _task_id(text)
            found.failing_tests = [task] if task else []
            marked = [line for line in lines if _MARKED.search(line)]
            found.block = "\n".join([lines[failed_at[-1]], *block, *marked[-1:]])
            return found
    if imports:
        first = imports[0][1]
        found.error_type, found.message = first.error_type, first.message
        found.frames = first.frames
        found.chain = [exc for _, exc, _ in imports[1:]]
        found.failing_tests = [file_id for file_id, _, _ in imports]
        found.block = "\n".join(block for _, _, block in imports)
    return found
