"""What a heal says on stderr while it runs: its messages, and a sign of life on long waits.

A base image build, a dependency setup or a slow step can keep the loop
silent for minutes; a user watching a terminal cannot tell that from a hang.
While nothing has been said for `quiet_after` seconds, a line tells what the
run is waiting on and for how long: redrawn in place on a terminal, repeated
every `log_every` seconds otherwise (CI logs), so it never floods a log.

The waiting line names what is under way (`waiting_on`): the last message that
started something (a reproduction, a setup command, an image build), or, after
an attempt's result, what comes next. It never repeats a result or a line of a
command's output, which read as an error or a stall (issue 27).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

import click

from patchheal.report.filters import cut_at_word

QUIET_AFTER_SECONDS = 2.0
LOG_EVERY_SECONDS = 15.0


# Messages that start something the run then waits on, and the words for it.
_STARTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^step (\d+) \([^)]*\): reproducing"), r"step \1's reproduction run"),
    (re.compile(r"^setup: (?:creating )?(.+)"), r"the job's setup (\1)"),
    (
        re.compile(
            r"^((?:building|pulling|importing|installing|pip download|npm \w+ on|reading"
            r"|committing|running|creating)\b.*)"
        ),
        r"\1",
    ),
)
# What a waiting line names is cut at this length, between words.
WAITING_ON_CHARS = 80
_GROUP = re.compile(r"\\(\d)")
# A result: what follows is the loop's next move, not the thing just reported.
_RESULT = re.compile(r"^(?:attempt \d+|step \d+|memory|harness)\b.*(?:->|:)")
_NEXT = "the next candidate (a proposer, the gates or a verification run)"


def _fill(words: str, parts: list[str]) -> str:
    """`words` with each `\\N` replaced by the Nth (shortened) group."""
    return _GROUP.sub(lambda ref: parts[int(ref[1]) - 1], words).rstrip()


def waiting_on(message: str, previous: str) -> str:
    """What the run waits on after `message` (`previous`: what it waited on before)."""
    for pattern, words in _STARTS:
        found = pattern.match(message)
        if found:
            return _fill(words, [cut_at_word(g or "", WAITING_ON_CHARS) for g in found.groups()])
    if _RESULT.match(message):
        return _NEXT
    return previous  # a line of a command's output: the same wait goes on


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
        self._waiting_on = "the run to start"
        self._last_said = time.monotonic()
        self._last_tick = 0.0
        self._drawn = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="patchheal-progress", daemon=True)

    def say(self, message: str) -> None:
        with self._lock:
            self._last_message, self._last_said = self._scrub(message), time.monotonic()
            self._waiting_on = waiting_on(self._last_message, self._waiting_on)
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
                line = f"[{self.prefix}] … waiting {silent:.0f} s on {self._waiting_on}"
                if self._tty:
                    click.echo(f"\r\033[K{line}", file=self._stream, nl=False)
                    self._drawn = True
                else:
                    click.echo(line, file=self._stream)

    def _clear(self) -> None:
        if self._drawn:
            click.echo("\r\033[K", file=self._stream, nl=False)
            self._drawn = False
