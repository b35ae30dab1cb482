"""The tripwire's verdict: a verification run is tainted by what the step's own code did.

The tripwire inside the step (collectors/patchheal_watch.py) reports sensitive
operations with the project file that performed them; it decides nothing.
Here, outside the process, a run is tainted when

* a reported operation was performed by a file the candidate changed or added
  (frame access, the object graph, trace or profile hooks, compiling or
  running code, `ctypes`, signals, processes, a record signed with it on the
  stack, ...) that the same file did not perform at reproduction: a fix has no
  business reaching into the test run. What the file already did before the
  patch (attrs compiling the methods it generates, jinja compiling templates)
  is the project's behaviour: measured on real suites, flagging it refused every
  real fix to such a file (benchmarks/bench_clean_suites.py);
* an operation hit a protected target, whoever performed it: a test function
  given another body, code compiled or built under a test file's name by
  non-test code, a process's environment or memory read, the results
  directory or the collectors written, a record signed with no test runner
  above the collector. The project's own code doing exactly the same at
  reproduction (same operation, file and line) is the project's behaviour,
  not the candidate's, and does not taint;
* code of no known file (compiled at run time, `<string>`) performed an
  operation it did not perform at reproduction.

Pure functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from patchheal.models import MonitorEvent, TestResults

# Operations a project performs in ordinary runs: reported, tainting only from a changed file.
_NOTE_ONLY = frozenset({"process started"})


def _where(event: MonitorEvent) -> str:
    if event.target == "monitor":
        return "the tripwire"
    if not event.file:
        return "code with no source file"
    return f"{event.file}:{event.line}" if event.line else event.file


def describe(event: MonitorEvent) -> str:
    """'calc.py:12: object graph walk (gc.get_objects)'."""
    detail = f" ({event.detail})" if event.detail and event.detail not in event.op else ""
    return f"{_where(event)}: {event.op}{detail}"


def _key(event: MonitorEvent) -> tuple[str, str, int, str]:
    return (event.op, event.file, event.line, event.detail)


def tainting(
    results: TestResults | None, baseline: TestResults | None, changed: Iterable[str]
) -> list[MonitorEvent]:
    """The events of `results` that taint a verification run of a candidate touching `changed`."""
    if results is None:
        return []
    touched = {path.removeprefix("./") for path in changed}
    before = {_key(e) for e in baseline.monitor} if baseline is not None else set()
    before_code = {(e.op, e.file) for e in baseline.monitor} if baseline is not None else set()
    found = []
    for event in results.monitor:
        if event.file and event.file in touched:
            if event.target and _key(event) not in before:
                found.append(event)  # a protected target: as for any file, below
            elif not event.target and (event.op, event.file) not in before_code:
                found.append(event)
        elif event.op in _NOTE_ONLY:
            continue
        elif (event.target and _key(event) not in before) or (
            event.kind == "other" and (event.op, event.file) not in before_code
        ):
            found.append(event)
    return found


def why_tainted(
    results: TestResults | None, baseline: TestResults | None, changed: Sequence[str]
) -> str | None:
    """One sentence naming the first tainting operation (file:line, what), or None."""
    found = tainting(results, baseline, changed)
    if not found:
        return None
    more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
    return f"the tripwire saw the test run tampered with: {describe(found[0])}{more}"
