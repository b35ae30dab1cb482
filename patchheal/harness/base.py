"""The Harness Protocol: where a step runs.

A harness runs one command over a worktree and reports what it captured. It
never judges the result (verdict.py does) and never raises for the step's own
failure; it raises `HarnessError`/`InfraUnavailable` only when it could not
run the command at all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from patchheal.models import CommandResult

# What every step sees unless its harness overrides it, so that a verdict
# does not drift from run to run.
DETERMINISTIC_ENV: dict[str, str] = {
    "TZ": "UTC",
    "PYTHONHASHSEED": "0",
    "LC_ALL": "C.UTF-8",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "CI": "true",
}

OutputSink = Callable[[bytes], None]


@runtime_checkable
class Harness(Protocol):
    """Runs step commands over worktrees."""

    name: str
    """Shown in reports, e.g. 'local' or 'docker:python'."""

    regression: tuple[str, ...]
    """Regression steps this harness adds to every job's (its definition's `regression`)."""

    def prepare(self, worktree: Path) -> None:
        """Make the runtime ready for this worktree (image, dependencies).

        Idempotent and cached: dependencies are installed once per dependency
        fingerprint, not per attempt.
        """
        ...

    def run(
        self,
        command: str,
        worktree: Path,
        *,
        timeout: float,
        idle_timeout: float,
        on_output: OutputSink | None = None,
        results: str | None = None,
        trace: bool = False,
    ) -> CommandResult:
        """Run `command` with `worktree` as the working directory.

        The run's per-test outcomes come back in `CommandResult.tests`, from a
        results channel the harness opens per run (see harness/results/channel.py);
        `results` is a step's declared JUnit XML glob, relative to the worktree;
        `trace` asks the collectors for what failing tests executed
        (`TestResults.traces`, evidence for localization).
        """
        ...

    def close(self) -> None:
        """Release everything this harness started; never raises."""
        ...
