"""Which workflow step a CI log shows failing (GitHub Actions job logs).

A downloaded job log opens each step with `##[group]Run <first line of its
script>` and ends a failed one with `##[error]Process completed with exit code
N.`; every line may carry a timestamp. The step is matched by its script's
first line, since that is what the log shows (not the step's `name:`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_STAMP = re.compile(r"^\ufeff?\d{4}-\d\d-\d\dT[\d:.]+Z ")
_RUN = re.compile(r"^(?:##\[group\])?Run (.+?)\s*$")
_FAILED = re.compile(r"^##\[error\]Process completed with exit code ([1-9]\d*)\.?\s*$")


def failed_commands(log_text: str) -> list[str]:
    """The first script line of every step the log shows exiting non-zero, in order."""
    current: str | None = None
    failed: list[str] = []
    for raw in log_text.splitlines():
        line = _STAMP.sub("", raw)
        if run := _RUN.match(line):
            current = run.group(1)
        elif _FAILED.match(line) and current is not None and current not in failed:
            failed.append(current)
    return failed


def failing_step(log_text: str, steps: Sequence[tuple[str, str]]) -> str | None:
    """The name of the (name, run script) step whose command the log shows failing first."""
    for command in failed_commands(log_text):
        for name, script in steps:
            lines = [ln.strip() for ln in script.splitlines() if ln.strip()]
            if lines and lines[0] == command.strip():
                return name
    return None
