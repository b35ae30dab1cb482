"""The operator control queue: `patchheal control` writes, the running loop reads.

The two sides are different processes sharing one store, so the queue is a
table: a command is a row that stays `pending` until the loop finishes it,
and every row keeps who issued it and when, for the audit trail.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlmodel import col

from patchheal.errors import BadInput
from patchheal.memory.db import StoreBase
from patchheal.memory.tables import ControlRow
from patchheal.models import CONTROL_COMMANDS, CONTROL_COMMANDS_WITH_STEP

NEEDS_ARG = CONTROL_COMMANDS_WITH_STEP


class ControlMixin(StoreBase):
    """The control-queue half of the attempt store."""

    def enqueue_control(self, job_id: str, command: str, *, arg: int | None, issued_by: str) -> int:
        from patchheal.scrub.active import scrub

        if command not in CONTROL_COMMANDS:
            known = ", ".join(sorted(CONTROL_COMMANDS))
            raise BadInput(f"unknown control command {command!r}; known: {known}")
        if command in NEEDS_ARG and arg is None:
            raise BadInput(f"{command} needs a step number")
        if arg is not None and arg < 0:
            raise BadInput(f"{command}: the step number must be 0 or more, got {arg}")
        row = ControlRow(
            job_id=job_id,
            command=command,
            arg=arg,
            issued_by=scrub(issued_by),
            issued_at=self._now(),
        )
        # A job not started yet may be named: its first run reads the queue.
        with self._write() as session:
            session.add(row)
            session.commit()
        assert row.id is not None
        return row.id

    def pending_controls(self, job_id: str) -> list[ControlRow]:
        """Commands not yet finished, oldest first."""
        query = (
            select(ControlRow)
            .where(col(ControlRow.job_id) == job_id, col(ControlRow.status) == "pending")
            .order_by(col(ControlRow.id))
        )
        with self._read() as session:
            return list(session.execute(query).scalars())

    def controls(self, job_id: str) -> list[ControlRow]:
        """Every command issued for the job, finished or not, oldest first."""
        query = (
            select(ControlRow).where(col(ControlRow.job_id) == job_id).order_by(col(ControlRow.id))
        )
        with self._read() as session:
            return list(session.execute(query).scalars())

    def finish_control(self, control_id: int, *, result: str) -> None:
        from patchheal.scrub.active import scrub

        with self._write() as session:
            row = session.get(ControlRow, control_id)
            if row is None:
                raise BadInput(f"no control command with id {control_id}")
            if row.status != "pending":
                raise BadInput(f"control command {control_id} was already finished: {row.result}")
            row.status, row.result, row.finished_at = "done", scrub(result), self._now()
            session.add(row)
            session.commit()
