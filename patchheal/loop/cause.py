"""The root cause of a fixed step, for its report: the code the verified patch changes,
each function with whether the failing test ran it at reproduction (evidence/cause.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from patchheal import proc
from patchheal.evidence.cause import MAX_SOURCE_BYTES, changed_code
from patchheal.models import TestTrace
from patchheal.report.model import CauseSite

_GIT_TIMEOUT = 20.0


def cause_sites(
    tree: Path,
    start_commit: str,
    diff: str,
    traces: Mapping[str, TestTrace],
    failing_tests: Sequence[str],
) -> tuple[CauseSite, ...]:
    """Where `diff` changes the code as it was at `start_commit` (the reproduced commit)."""

    def read_old(file: str) -> str | None:
        if file.startswith("-") or ".." in file.split("/"):
            return None  # the diff is a candidate's text: never a git option or an escape
        result = proc.git(
            "show", f"{start_commit}:{file}", cwd=tree, check=False, timeout=_GIT_TIMEOUT
        )
        if result.exit_code != 0 or len(result.output) > MAX_SOURCE_BYTES:
            return None
        return result.output

    try:
        found = changed_code(diff, read_old, traces, failing_tests)
    except OSError:
        return ()  # a report without its cause beats no report
    return tuple(CauseSite(file=c.file, function=c.function, executed=c.executed) for c in found)
