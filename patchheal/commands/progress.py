"""What a heal says on stderr while it runs: its messages, and a sign of life on long waits.

A base image build, a dependency setup or a slow step can keep the loop
silent for minutes; a user watching a terminal cannot tell that from a hang.
While nothing has been said for `quiet_after` seconds, a line tells what the
run is waiting on and for how long: redrawn in place on a terminal, repeated
every `log_every` seconds otherwise (CI logs), so it never floods a log.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

import click

QUIET_AFTER_SECONDS = 2.0
LOG_EVERY_SECONDS = 15.0


class Progress:
    """`say()` prints a message; while the run is silent, a waiting line shows it is alive."""

    def __init__(
        self,
        prefix: str,
        *,
        verbosity: int = 0,
        stream: TextIO | None = None,
        quiet_after: float = QUIET_AFTER_SECONDS,
        log_every: float = LOG_EVERY_SECONDS,
        scrub: Callable[[str], str] = str,
    ) -> None:
        self.prefix = prefix
        self._scrub = scrub  # the terminal is a write path too
        self.verbosity = verbosity
        self._stream: TextIO = stream if stream is not None else sys.stderr
        self._tty = bool(self._stream.isatty())
        self._quiet_after = quiet_after
        self._log_every = log_every
        self._lock = threading.Lock()
        self._last_message = "starting"
        self._last_said = time.monotonic()
        self._last_tick = 0.0
        self._drawn = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="patchheal-progress", daemon=True)

    def say(self, message: str) -> None:
        with self._lock:
            self._last_message, self._last_said = self._scrub(message), time.monotonic()
            if self.verbosity < 0:
                return
            self._clear()
            click.echo(f"[{self.prefix}] {self._last_message}", file=self._stream)

    def touch(self) -> None:
        """Something else showed a sign of life (a command's streamed output): the
        waiting line goes, and the silence is counted from now."""
        with self._lock:
            self._last_said = time.monotonic()
            self._clear()

    def __enter__(self) -> Progress:
        if self.verbosity >= 0:
            self._thread.start()
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        with self._lock:
            self._clear()

    def _watch(self) -> None:
        while not self._stop.wait(0.25):
            with self._lock:
                now = time.monotonic()
                silent = now - self._last_said
                if silent < self._quiet_after:
                    continue
                if not self._tty and now - self._last_tick < self._log_every:
                    continue
                self._last_tick = now
                line = f"[{self.prefix}] … {self._last_message} (waiting {silent:.0f} s)"
                if self._tty:
                    click.echo(f"\r\033[K{line}", file=self._stream, nl=False)
                    self._drawn = True
                else:
                    click.echo(line, file=self._stream)

    def _clear(self) -> None:
        if self._drawn:
            click.echo("\r\033[K", file=self._stream, nl=False)
            self._drawn = False
