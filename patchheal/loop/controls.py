"""Operator control: commands issued from another terminal, honored between attempts."""

from __future__ import annotations

import getpass
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from patchheal.errors import BadInput
from patchheal.memory.store import AttemptStore
from patchheal.models import CONTROL_COMMANDS
from patchheal.telemetry.events import EventLog

PAUSE_POLL_SECONDS = 0.5


def issuer() -> str:
    """Who issued a command: user@host (pid)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} (pid {os.getpid()})"


def validate(command: str, arg: int | None) -> None:
    if command not in CONTROL_COMMANDS:
        raise BadInput(f"unknown control command {command!r}; known: {', '.join(CONTROL_COMMANDS)}")
    if command == "resume-from-step" and (arg is None or arg < 1):
        raise BadInput("resume-from-step needs a step number N >= 1")


@dataclass(frozen=True)
class Directive:
    """What the loop must do after reading the control queue."""

    # "continue", "cancel", "takeover", "retry-step", "hard-reset-step", "resume-from-step"
    action: str
    arg: int | None = None
    issued_by: str = ""


# Directives that end a pause: everything else waits for `resume`.
_URGENT = ("cancel", "takeover")


class ControlReader:
    """Reads and applies the job's pending control commands, in order.

    pause/resume are applied here (a pause blocks `poll` until a resume, a
    cancel or a takeover); every other command becomes a Directive for the
    caller. A caller that cannot act on a directive where it stands (e.g.
    retry-step during a checkpoint replay) hands it back with `hold`, and the
    next `poll` returns it.
    """

    def __init__(
        self,
        store: AttemptStore,
        events: EventLog,
        job_id: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        heartbeat: Callable[[], None] = lambda: None,
        on_message: Callable[[str], None] = lambda _m: None,
    ) -> None:
        self.store = store
        self.events = events
        self.job_id = job_id
        self.sleep = sleep
        self.heartbeat = heartbeat
        self.on_message = on_message
        self.paused = False
        self._held: list[Directive] = []

    def poll(self) -> Directive:
        """Apply pending commands; blocks while paused. Returns the directive to follow."""
        while True:
            self.heartbeat()  # between attempts and while paused: the run is alive
            self._read()
            urgent = next((d for d in self._held if d.action in _URGENT), None)
            if urgent is not None:
                self._held.remove(urgent)
                self.paused = False
                return urgent
            if not self.paused:
                return self._held.pop(0) if self._held else Directive("continue")
            self.sleep(PAUSE_POLL_SECONDS)

    def expire(self, why: str) -> None:
        """Close the commands still queued when the run ends: they are recorded, not applied."""
        self._held.clear()
        for row in self.store.pending_controls(self.job_id):
            assert row.id is not None  # a stored row
            self.events.emit(
                "control.received",
                data={
                    "command": row.command,
                    "arg": row.arg,
                    "control_id": row.id,
                    "issued_by": row.issued_by,
                    "issued_at": row.issued_at,
                    "result": f"not applied: {why}",
                },
            )
            self.store.finish_control(row.id, result=f"not applied: {why}")

    def hold(self, directive: Directive) -> None:
        """Give a directive back: the next `poll` returns it first."""
        if directive.action != "continue":
            self._held.insert(0, directive)

    def _read(self) -> None:
        for row in self.store.pending_controls(self.job_id):
            assert row.id is not None  # a stored row
            command = {"command": row.command, "arg": row.arg, "control_id": row.id}
            # Who issued it and when (from the queue), next to when the loop read it.
            self.events.emit(
                "control.received",
                data={**command, "issued_by": row.issued_by, "issued_at": row.issued_at},
            )
            self.store.finish_control(row.id, result="applied")
            self.events.emit("control.applied", data=command)
            if row.command == "pause":
                self.paused = True
                self.on_message(f"paused by {row.issued_by}; waiting for resume")
            elif row.command == "resume":
                self.paused = False
                self.on_message(f"resumed by {row.issued_by}")
            else:
                self._held.append(Directive(row.command, row.arg, row.issued_by))
