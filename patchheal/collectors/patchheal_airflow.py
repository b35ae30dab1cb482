"""patchheal's Airflow collector: each task instance's end state, from Airflow's own run of it.

Why not a listener plugin: in Airflow 2.10.5 `airflow tasks test` runs the task
with test_mode=True, and `taskinstance._run_raw_task` calls
`on_task_instance_success` only `if not test_mode`; there is no skipped hook at
all (read in the installed source, and measured: tests/test_airflow_results.py).
So this collector wraps the run itself. `sitecustomize` calls `install()` at
interpreter start-up (before the CLI parses any DAG file; the token is already
out of os.environ then, taken by `patchheal_results`), which adds an import
hook: when `airflow.models.taskinstance` has been executed, its module-level
`_run_raw_task` (every `TaskInstance.run` goes through it) and its
`ExecutionCallableRunner` (what calls the operator's `execute`) are replaced by
wrappers. A task instance is recorded `passed` only when Airflow set it SUCCESS
**and** the operator's callable returned normally: Airflow itself counts a
`sys.exit(0)` inside the task as success, and a DAG's `on_skipped_callback` can
flip `ti.state` after the skip; neither is a pass here.

One signed record (runner `airflow`, `dag.task[index]` -> outcome) is written
at interpreter exit, and only by a process that ran a task instance: a process
that ends through `os._exit` writes nothing, which the verdict refuses.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import patchheal_results as channel

MODULE = "airflow.models.taskinstance"
# Airflow's TaskInstanceState values -> the verdict's outcomes (worst first in channel.RANK).
_OUTCOMES = {
    "success": "passed",
    "skipped": "skipped",
    "failed": "failed",
    "up_for_retry": "failed",
    "upstream_failed": "failed",
}
_outcomes: dict[str, str] = {}
_tampered: list[str] = []
# One entry per task-instance run in progress: how the operator's callable ended.
_running: list[dict[str, str]] = []
_ours: dict[str, Any] = {}


def _instance_id(ti: Any) -> str:
    index = getattr(ti, "map_index", -1)
    suffix = f"[{index}]" if isinstance(index, int) and index >= 0 else ""
    return f"{ti.dag_id}.{ti.task_id}{suffix}"


def _outcome(state: Any, ended: str) -> str:
    if ended == "exit":
        return "error"  # sys.exit() inside the task: Airflow calls exit code 0 a success
    outcome = _OUTCOMES.get(str(getattr(state, "value", state)), "error")
    if outcome == "passed" and ended != "returned":
        return "error"  # SUCCESS without the callable returning: a callback changed the state
    return outcome


def _wrap_run_raw_task(original: Any) -> Any:
    def _run_raw_task(*args: Any, **kwargs: Any) -> Any:
        ti = kwargs.get("ti", args[0] if args else None)
        if _running:
            _tampered.append("a task instance was run from inside a running task")
        frame = {"ended": "not run"}
        _running.append(frame)
        try:
            return original(*args, **kwargs)
        finally:
            _running.pop()
            if ti is not None:
                _outcomes[_instance_id(ti)] = _outcome(getattr(ti, "state", None), frame["ended"])

    return _run_raw_task


def _wrap_runner(original: type) -> type:
    class ExecutionCallableRunner(original):  # type: ignore[misc]
        def run(self, *args: Any, **kwargs: Any) -> Any:
            frame = _running[-1] if _running else {}
            try:
                result = super().run(*args, **kwargs)
            except SystemExit:
                frame["ended"] = "exit"
                raise
            except BaseException:
                frame["ended"] = "raised"
                raise
            frame["ended"] = "returned"
            return result

    return ExecutionCallableRunner


def patch(module: ModuleType) -> None:
    """Wrap the task-instance run of an executed `airflow.models.taskinstance`."""
    _ours["_run_raw_task"] = _wrap_run_raw_task(module._run_raw_task)
    _ours["ExecutionCallableRunner"] = _wrap_runner(module.ExecutionCallableRunner)
    for name, wrapper in _ours.items():
        setattr(module, name, wrapper)
    atexit.register(finish)


def finish() -> None:
    """Write the signed, finished record (at exit, when no task is running)."""
    if _running:
        _tampered.append("the record was written while a task was running")
    module = sys.modules.get(MODULE)
    if module is not None:
        _tampered.extend(
            f"taskinstance.{name}"
            for name, ours in _ours.items()
            if getattr(module, name) is not ours
        )
    if _outcomes or _tampered:
        channel.write("airflow", {"outcomes": _outcomes, "tampered": _tampered})


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: lets the other finders find the module, then wraps its loading."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != MODULE:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target)
            if spec is not None and spec.loader is not None:
                # A loader instance is made for this one spec, so the attribute is its own.
                spec.loader.exec_module = _patching(spec.loader.exec_module)  # type: ignore[method-assign]
                return spec
        return None


def _patching(execute: Any) -> Any:
    def exec_module(module: ModuleType) -> None:
        execute(module)
        patch(module)

    return exec_module


def install() -> None:
    """Wrap Airflow's task-instance run when (if ever) this process imports it."""
    if channel.active() and MODULE not in sys.modules:
        sys.meta_path.insert(0, _Finder())
