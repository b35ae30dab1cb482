"""Operator control: commands issued from another terminal, honored between attempts."""

from __future__ import annotations

import getpass
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from patchheal.errors import BadInput
from patchheal.events import EventLog
from patchheal.memory.store import AttemptStore

COMMANDS = (
    "pause",
    "resume",
    "cancel",
    "takeover",
    "retry-step",
    "hard-reset-step",
    "resume-from-step",
)
PAUSE_POLL_SECONDS = 0.5


def issuer() -> str:
    """Who issued a command: user@host (pid)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} (pid {os.getpid()})"


def validate(command: str, arg: int | None) -> None:
    if command not in COMMANDS:
        raise BadInput(f"unknown control command {command!r}; known: {', '.join(COMMANDS)}")
    if command == "resume-from-step" and (arg is None or arg < 1):
        raise BadInput("resume-from-step needs a step number N >= 1")


@dataclass(frozen=True)
class Directive:
    """What the loop must do after reading the control queue."""

    action: (
        str  # "continue", "cancel", "takeover", "retry-step", "hard-reset-step", "resume-from-step"
    )
    arg: int | None = None
    issued_by: str = ""


class ControlReader:
    """Reads and applies the job's pending control commands, in order."""

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

    def poll(self) -> Directive:
        """Apply pending commands; blocks while paused. Returns the directive to follow."""
        paused = False
        while True:
            for row in self.store.pending_controls(self.job_id):
                self.events.emit(
                    "control.received",
                    data={
                        "command": row.command,
                        "arg": row.arg,
                        "issued_by": row.issued_by,
                        "control_id": row.id,
                    },
                )
                directive = self._apply(row.command, row.arg, row.issued_by)
                self.store.finish_control(row.id, result="applied")
                self.events.emit(
                    "control.applied",
                    data={"command": row.command, "arg": row.arg, "control_id": row.id},
                )
                if row.command == "pause":
                    paused = True
                    self.on_message(f"paused by {row.issued_by}; waiting for resume")
                elif row.command == "resume":
                    paused = False
                    self.on_message(f"resumed by {row.issued_by}")
                elif directive is not None:
                    return directive
            if not paused:
                return Directive("continue")
            self.heartbeat()
            self.sleep(PAUSE_POLL_SECONDS)

    @staticmethod
    def _apply(command: str, arg: int | None, issued_by: str) -> Directive | None:
        if command in ("pause", "resume"):
            return None
        return Directive(command, arg, issued_by)
