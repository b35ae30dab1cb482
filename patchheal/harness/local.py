"""The local harness: the step runs as a host process in the worktree.

Fast and with no isolation; the Docker harness is the authoritative one.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from patchheal import proc
from patchheal.errors import HarnessError
from patchheal.harness.base import DETERMINISTIC_ENV, OutputSink
from patchheal.harness.results import COLLECTORS, ResultsChannel
from patchheal.models import CommandResult

# Inherited so that host tools are found; everything else is dropped.
_INHERITED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "VIRTUAL_ENV",
    "PYENV_ROOT",
    "PYENV_VERSION",
)


class LocalHarness:
    """Runs commands with `/bin/sh -c` in the worktree, process-group killed on timeout."""

    name = "local"

    def __init__(
        self,
        *,
        setup: Sequence[str] = (),
        env_passthrough: Sequence[str] = (),
        setup_timeout: float = 1800.0,
    ) -> None:
        self._setup = tuple(setup)
        self._passthrough = tuple(env_passthrough)
        self._setup_timeout = setup_timeout
        self._prepared: set[str] = set()

    def environment(self) -> dict[str, str]:
        env = {k: os.environ[k] for k in (*_INHERITED, *self._passthrough) if k in os.environ}
        env.update(DETERMINISTIC_ENV)
        return env

    def prepare(self, worktree: Path) -> None:
        if not self._setup:
            return
        # A worktree is reset between attempts, so setup runs once per
        # worktree path and setup commands, not once per attempt.
        key = hashlib.sha256(f"{worktree}\0{self._setup}".encode()).hexdigest()
        if key in self._prepared:
            return
        for command in self._setup:
            result = proc.run(
                command, cwd=worktree, env=self.environment(), timeout=self._setup_timeout
            )
            if not result.passed:
                raise HarnessError(
                    f"setup command failed in the local harness: {command}\n{result.output[-4000:]}"
                )
        self._prepared.add(key)

    def run(
        self,
        command: str,
        worktree: Path,
        *,
        timeout: float,
        idle_timeout: float,
        on_output: OutputSink | None = None,
        results: str | None = None,
    ) -> CommandResult:
        channel = ResultsChannel()
        try:
            env = channel.environment(
                self.environment(), results_dir=str(channel.host_dir), collectors=str(COLLECTORS)
            )
            result = proc.run(
                command,
                cwd=worktree,
                env=env,
                timeout=timeout,
                idle_timeout=idle_timeout,
                on_output=on_output,
                harness=self.name,
            )
            return result.model_copy(update={"tests": channel.collect(worktree, results)})
        finally:
            channel.close()

    def close(self) -> None:
        return None
