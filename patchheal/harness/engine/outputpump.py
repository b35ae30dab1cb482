"""What a run printed and how it ended: the output stream read under wall and idle timeouts."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from patchheal.models import CommandResult, TestResults
from patchheal.proc import DEFAULT_OUTPUT_CAP, _CappedBuffer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finished:
    """What `run_to_completion` saw."""

    exit_code: int | None
    output: str
    truncated: bool
    timed_out: str | None
    oom_killed: bool
    duration: float
    stopped: str | None = None
    """Why a limit of the run stopped it (the worktree's size: treesize.py), or None."""

    def result(
        self, command: str, *, harness: str, memory: str, tests: TestResults | None = None
    ) -> CommandResult:
        """The harness's `CommandResult` of this run (one place for every container harness)."""
        output = self.output
        if self.oom_killed:
            output += f"\n[patchheal: the step was OOM-killed at {memory}]\n"
        if self.stopped:
            output += f"\n[patchheal: the step was stopped: {self.stopped}]\n"
        return CommandResult(
            command=command,
            exit_code=None if self.stopped else self.exit_code,
            stopped=self.stopped,
            output=output,
            duration_seconds=self.duration,
            timed_out=self.timed_out,
            truncated=self.truncated,
            oom_killed=self.oom_killed,
            harness=harness,
            tests=tests,
        )


class OutputPump:
    """An engine output stream read by a thread into a queue, and the timed loop over it.

    One place for the wall and idle timeouts of every run, whether a started
    container's attach stream or an exec's.
    """

    def __init__(self, stream: Any, name: str, cap: int = DEFAULT_OUTPUT_CAP) -> None:
        self.buffer = _CappedBuffer(cap)
        self._chunks: queue.Queue[bytes | None] = queue.Queue()
        self._reader = threading.Thread(
            target=self._read, args=(stream, name), name=f"out-{name}", daemon=True
        )
        self._reader.start()

    def _read(self, stream: Any, name: str) -> None:
        try:
            for chunk in stream:
                self._chunks.put(chunk)
        except Exception as exc:  # the engine closed the stream; the exit status tells the rest
            log.debug("output stream of %s ended: %s", name, exc)
        finally:
            self._chunks.put(None)

    def follow(
        self,
        started: float,
        *,
        timeout: float,
        idle_timeout: float,
        on_output: Callable[[bytes], None] | None,
        kill: Callable[[], None],
    ) -> str | None:
        """Collect output until the stream ends; on a timeout `kill` and say which one."""
        last_output = started
        while True:
            now = time.monotonic()
            timed_out = (
                "wall"
                if now - started >= timeout
                else "idle"
                if now - last_output >= idle_timeout
                else None
            )
            if timed_out:
                with contextlib.suppress(Exception):
                    kill()
                return timed_out
            wait = min(started + timeout, last_output + idle_timeout) - now
            try:
                chunk = self._chunks.get(timeout=max(0.01, min(wait, 1.0)))
            except queue.Empty:
                continue
            if chunk is None:
                return None
            last_output = time.monotonic()
            self.buffer.add(chunk)
            if on_output is not None:
                on_output(chunk)

    def finish(self) -> _CappedBuffer:
        """The output, with what arrived between a timeout and the kill."""
        self._reader.join(timeout=5)
        while True:
            try:
                chunk = self._chunks.get_nowait()
            except queue.Empty:
                return self.buffer
            if chunk:
                self.buffer.add(chunk)
